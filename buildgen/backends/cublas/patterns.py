"""The predicate of rules/cublas.yaml's patterns: what `where:` cannot say about a chain.

It accepts exactly the chains that decline_reason accepts node by node (shared chain rules,
buildgen.backends.cpu_common.groups), so both policies hand the backend regions its codegen
can read back.
"""

from __future__ import annotations

from buildgen.backends.cpu_common.groups import chain_problem
from buildgen.backends.cublas.support import RULES
from buildgen.ir import Graph, Node


def chain_ok(graph: Graph, nodes: tuple[Node, ...]) -> str | None:
    return chain_problem(graph, nodes, RULES)
