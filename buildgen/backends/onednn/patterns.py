"""The predicate of rules/onednn.yaml's patterns: what `where:` cannot say about a chain.

The partitioner matches a pattern's op chain and calls `chain_ok(graph, nodes)`; it accepts
exactly the chains that decline_reason accepts node by node, so both policies hand the
backend regions its codegen can read back (buildgen.backends.cpu_common.groups).
"""

from __future__ import annotations

from buildgen.backends.cpu_common.groups import chain_problem
from buildgen.backends.onednn.support import RULES
from buildgen.ir import Graph, Node


def chain_ok(graph: Graph, nodes: tuple[Node, ...]) -> str | None:
    return chain_problem(graph, nodes, RULES)
