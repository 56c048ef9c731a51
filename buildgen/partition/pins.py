"""Pins: the manifest's `pin:` entries, node pattern -> the backend that must run it.

A pattern is one of
    /blk/MatMul          an exact node name
    /blk/*/MatMul        a glob (fnmatch: * ? [...]) over node names
    re:/blk/\\d+/MatMul   a regular expression matching the whole node name
    op:Conv              every node of that op type
and the backend is a kind of the target or "host". A pin is a user's decision: it is never
overridden, and one that cannot be honoured (the backend declines the node, two pins
disagree, the pattern names nothing) stops the build with both the node and the backend.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.backends.registry import get_backend
from buildgen.errors import BuildgenError, Diagnostic
from buildgen.ir import Graph, Node
from buildgen.targets import ResolvedTarget

HOST = "host"


@dataclass(frozen=True)
class Pin:
    pattern: str  # as written
    backend: str  # as written: a kind or "host"

    def describe(self) -> str:
        return f"pin {self.pattern!r} -> {self.backend}"

    def matches(self, node: Node) -> bool:
        if self.pattern.startswith("op:"):
            return node.op == self.pattern[3:]
        if self.pattern.startswith("re:"):
            return re.fullmatch(self.pattern[3:], node.name) is not None
        if node.name == self.pattern:
            return True
        return any(c in self.pattern for c in "*?[") and fnmatch.fnmatchcase(
            node.name, self.pattern
        )


@dataclass(frozen=True)
class PinnedNode:
    kind: str  # the backend kind, "host" resolved
    pin: Pin


def _kind_of(pin: Pin, target: ResolvedTarget) -> str | Diagnostic:
    if pin.backend == HOST:
        return target.host_kind
    if pin.backend in target.backends:
        return pin.backend
    close = difflib.get_close_matches(pin.backend, [*target.backends, HOST], n=1)
    return Diagnostic(
        f"{pin.describe()}: target {target.name!r} has no backend {pin.backend!r}; "
        f"its backends are {', '.join(target.backends)} (or {HOST!r})",
        hint=f"did you mean {close[0]!r}?" if close else None,
    )


def _pattern_problem(pin: Pin) -> str | None:
    if pin.pattern.startswith("re:"):
        try:
            re.compile(pin.pattern[3:])
        except re.error as exc:
            return f"{pin.describe()}: invalid regular expression: {exc}"
    if pin.pattern in ("op:", "re:", ""):
        return f"{pin.describe()}: empty pattern"
    return None


def _nothing_matched(pin: Pin, graph: Graph) -> Diagnostic:
    hint: str | None
    if pin.pattern.startswith("op:"):
        ops = sorted({n.op for n in graph.nodes})
        close = difflib.get_close_matches(pin.pattern[3:], ops, n=1)
        hint = f"did you mean 'op:{close[0]}'?" if close else f"its ops: {', '.join(ops)}"
    else:
        close = difflib.get_close_matches(pin.pattern, [n.name for n in graph.nodes], n=1)
        hint = f"did you mean {close[0]!r}?" if close else None
    return Diagnostic(f"{pin.describe()}: matches no node of the model", hint=hint)


def resolve_pins(
    graph: Graph, target: ResolvedTarget, pins: Sequence[tuple[str, str]]
) -> dict[str, PinnedNode]:
    """node name -> its pin, for every node some pin matches; every problem is raised
    together."""
    problems: list[Diagnostic] = []
    pinned: dict[str, PinnedNode] = {}
    for pattern, backend in pins:
        pin = Pin(pattern, backend)
        bad = _pattern_problem(pin)
        if bad is not None:
            problems.append(Diagnostic(bad))
            continue
        kind = _kind_of(pin, target)
        if isinstance(kind, Diagnostic):
            problems.append(kind)
            continue
        matched = [n for n in graph.nodes if pin.matches(n)]
        if not matched:
            problems.append(_nothing_matched(pin, graph))
        for node in matched:
            earlier = pinned.get(node.name)
            if earlier is not None and earlier.kind != kind:
                problems.append(Diagnostic(
                    f"node {node.name!r} (op {node.op}) is pinned to {earlier.kind} by "
                    f"{earlier.pin.describe()} and to {kind} by {pin.describe()}",
                    hint="make the patterns disjoint, or pin the node by its exact name in one",
                ))
                continue
            reason = get_backend(kind).decline_reason(node, graph)
            if reason is not None:
                problems.append(Diagnostic(
                    f"{pin.describe()}: backend {kind} cannot run node {node.name!r} "
                    f"(op {node.op}): {reason}"
                ))
                continue
            pinned.setdefault(node.name, PinnedNode(kind, pin))
    if problems:
        raise BuildgenError(problems)
    return pinned
