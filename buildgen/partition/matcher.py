"""Match a kind's pattern table (rules `patterns:`) on the graph IR.

A pattern is a chain of steps. From each node that can start it, every way of taking or
skipping optional steps is tried; each chain that satisfies `where` and the predicate is a
match. Overlaps between matches are for the policies to settle: the priority policy takes
the longest one still free, the cost policy weighs them all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache

from buildgen.errors import error
from buildgen.ir import Graph, Node
from buildgen.partition.where import where_problem
from buildgen.targets.patterns import PatternSpec, Step

Predicate = Callable[[Graph, tuple[Node, ...]], "str | None"]


@dataclass(frozen=True)
class Match:
    pattern: PatternSpec
    nodes: tuple[str, ...]  # in chain order, which is also the graph's order

    @property
    def rank(self) -> tuple[int, int, int]:
        """Sort key for claiming: higher priority, then more nodes, then declared earlier."""
        return (-self.pattern.priority, -len(self.nodes), self.pattern.index)


@cache
def load_predicate(reference: str) -> Predicate:
    module_name, _, attr = reference.partition(":")
    try:
        function: Predicate = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise error(f"pattern predicate {reference!r} cannot be loaded: {exc}") from exc
    return function


def _next_in_chain(graph: Graph, node: Node) -> Node | None:
    """The one node that reads `node`'s first output, if exactly one does and nothing else
    (a graph output is read by the caller) needs that tensor."""
    if not node.outputs or not node.outputs[0]:
        return None
    tensor = node.outputs[0]
    if tensor in graph.output_names:
        return None
    readers = {n.name: n for n in graph.consumers(tensor)}
    if len(readers) != 1:
        return None
    return next(iter(readers.values()))


def _chains(graph: Graph, spec: PatternSpec, start: Node) -> Iterator[tuple[Node, ...]]:
    """Every chain of `spec` starting at `start`, taking before skipping (so longer first)."""

    def extend(step: int, nodes: tuple[Node, ...]) -> Iterator[tuple[Node, ...]]:
        if step == len(spec.steps):
            yield nodes
            return
        nxt = _next_in_chain(graph, nodes[-1])
        if nxt is not None and nxt.op in spec.steps[step].ops:
            yield from extend(step + 1, (*nodes, nxt))
        if spec.steps[step].optional:
            yield from extend(step + 1, nodes)

    for first, step in enumerate(spec.steps):
        if start.op in step.ops:
            yield from extend(first + 1, (start,))
        if not step.optional:
            break


def check_chain(graph: Graph, spec: PatternSpec, nodes: Sequence[Node]) -> str | None:
    """None if `nodes` satisfy the pattern's `where` and predicate, else the first reason."""
    problem = where_problem(graph, spec, tuple(nodes))
    if problem is None and spec.predicate:
        problem = load_predicate(spec.predicate)(graph, tuple(nodes))
    return problem


def match_at(graph: Graph, spec: PatternSpec, start: Node) -> Match | str | None:
    """The longest valid chain from `start`; else the reason its longest chain failed, or
    None when no chain of the pattern's shape starts there."""
    best: tuple[Node, ...] | None = None
    first_problem: str | None = None
    for chain in _chains(graph, spec, start):
        if best is not None and len(chain) <= len(best):
            continue
        problem = check_chain(graph, spec, chain)
        if problem is None:
            best = chain
        elif first_problem is None:
            first_problem = problem
    if best is not None:
        return Match(spec, tuple(n.name for n in best))
    return first_problem


def matches_at(graph: Graph, spec: PatternSpec, start: Node) -> list[Match]:
    """Every valid chain of `spec` from `start`, longest first: when a longer one overlaps
    another claim, a shorter one may still be taken."""
    found: dict[tuple[str, ...], Match] = {}
    for chain in _chains(graph, spec, start):
        names = tuple(n.name for n in chain)
        if names not in found and check_chain(graph, spec, chain) is None:
            found[names] = Match(spec, names)
    return sorted(found.values(), key=lambda m: -len(m.nodes))


def find_matches(graph: Graph, patterns: Sequence[PatternSpec]) -> list[Match]:
    """Every pattern's valid chains from every start node, in claiming order: rank (priority,
    size, declaration), then the graph position of the first node."""
    position = {n.name: i for i, n in enumerate(graph.nodes)}
    found = [m for spec in patterns for node in graph.nodes for m in matches_at(graph, spec, node)]
    found.sort(key=lambda m: (m.rank, position[m.nodes[0]]))
    return found


def why_unmatched(graph: Graph, patterns: Sequence[PatternSpec], node: Node) -> str:
    """Why no pattern of a table took `node` on its own account: for explanations."""
    reasons: list[str] = []
    later: list[PatternSpec] = []  # patterns that have the op, but not where they start
    for spec in patterns:
        if node.op not in {op for step in spec.steps for op in step.ops}:
            continue
        result = match_at(graph, spec, node)
        if isinstance(result, Match):
            reasons.append(f"{spec.qualified_name} matches here, but another region or the "
                           "cost took the node")
        elif isinstance(result, str):
            reasons.append(f"{spec.qualified_name}: {result}")
        else:
            later.append(spec)
    if later:
        names = ", ".join(s.qualified_name for s in later)
        starts = dict.fromkeys(op for s in later for step in _start_steps(s) for op in step.ops)
        reasons.append(f"{names} take {node.op} only in a chain after {'/'.join(starts)}")
    return "; ".join(reasons) if reasons else f"no pattern has {node.op}"


def _start_steps(spec: PatternSpec) -> list[Step]:
    """The steps a chain of `spec` can start with: up to the first required one."""
    steps = []
    for step in spec.steps:
        steps.append(step)
        if not step.optional:
            break
    return steps
