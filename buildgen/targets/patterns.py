"""Pattern tables and cost models as declared in rules/<kind>.yaml (`patterns:`, `cost:`).

This module only reads and checks the declarations; matching them on a graph is the
partitioner's job (buildgen.partition.matcher). The shape of a table is checked by the
rules meta-schema (schemas/targets/_rules.schema.json); what a schema cannot say (names
unique, `where` naming ops of the chain) is checked here, with the pattern's place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from buildgen.errors import BuildgenError, Diagnostic

# An attribute value a `where: {Op: {attrs: ...}}` list allows; lists are frozen to tuples.
AttrChoice = int | float | str | None | tuple[Any, ...]
LAST_AXIS = "last"  # in `attrs`: the last axis of the node's first input, as -1 or rank-1


@dataclass(frozen=True)
class Step:
    """One link of a chain: any of `ops`; `optional` steps may be absent."""

    ops: tuple[str, ...]
    optional: bool

    def __str__(self) -> str:
        return "|".join(self.ops) + ("?" if self.optional else "")


@dataclass(frozen=True)
class OpWhere:
    """Constraints on every matched node of op `op`."""

    op: str
    const_inputs: tuple[int, ...] = ()
    input_rank: tuple[tuple[int, tuple[int, ...]], ...] = ()
    output_rank: tuple[tuple[int, tuple[int, ...]], ...] = ()
    same_shape: tuple[int, ...] = ()
    bias_of: str | None = None
    attrs: tuple[tuple[str, tuple[AttrChoice, ...]], ...] = ()


@dataclass(frozen=True)
class PatternSpec:
    kind: str
    name: str
    priority: int
    steps: tuple[Step, ...]
    dtypes: tuple[str, ...]  # allowed dtypes of every tensor; () = any
    where: tuple[OpWhere, ...]  # sorted by op
    predicate: str | None  # "module:function"
    index: int  # declaration order in the kind's table

    @property
    def qualified_name(self) -> str:
        """How partition.json and messages name it: "<kind>.<name>"."""
        return f"{self.kind}.{self.name}"

    @property
    def chain(self) -> str:
        return " -> ".join(str(s) for s in self.steps)

    def where_for(self, op: str) -> OpWhere | None:
        for item in self.where:
            if item.op == op:
                return item
        return None


@dataclass(frozen=True)
class CostSpec:
    """The kind's numbers for the analytic cost model; None = the role's default."""

    gflops: float | None = None
    matmul_gflops: float | None = None
    gbytes_per_s: float | None = None
    call_us: float | None = None
    transfer_gbytes_per_s: float | None = None
    transfer_us: float | None = None


def _freeze(value: Any) -> AttrChoice:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _ranks(value: int | Sequence[int]) -> tuple[int, ...]:
    return (value,) if isinstance(value, int) else tuple(value)


def _by_index(data: Mapping[str, Any]) -> tuple[tuple[int, tuple[int, ...]], ...]:
    return tuple(sorted((int(k), _ranks(v)) for k, v in data.items()))


def _op_where(op: str, data: Mapping[str, Any]) -> OpWhere:
    return OpWhere(
        op=op,
        const_inputs=tuple(sorted(set(data.get("const_inputs", ())))),
        input_rank=_by_index(data.get("input_rank", {})),
        output_rank=_by_index(data.get("output_rank", {})),
        same_shape=tuple(data.get("same_shape", ())),
        bias_of=data.get("bias_of"),
        attrs=tuple(
            sorted((name, tuple(_freeze(v) for v in values))
                   for name, values in data.get("attrs", {}).items())
        ),
    )


def _step(text: str) -> Step:
    optional = text.endswith("?")
    return Step(tuple(text.rstrip("?").split("|")), optional)


def _pattern(kind: str, index: int, data: Mapping[str, Any]) -> PatternSpec:
    where = dict(data.get("where", {}))
    dtype = where.pop("dtype", ())
    return PatternSpec(
        kind=kind,
        name=data["name"],
        priority=int(data.get("priority", 0)),
        steps=tuple(_step(s) for s in data["ops"]),
        dtypes=(dtype,) if isinstance(dtype, str) else tuple(dtype),
        where=tuple(_op_where(op, spec) for op, spec in sorted(where.items())),
        predicate=data.get("predicate"),
        index=index,
    )


def _problems(spec: PatternSpec, where: str) -> list[str]:
    problems = []
    chain_ops = [op for step in spec.steps for op in step.ops]
    if all(step.optional for step in spec.steps):
        problems.append(f"{where}: every step is optional; a pattern must match at least one node")
    for item in spec.where:
        if item.op not in chain_ops:
            problems.append(
                f"{where}: where: {item.op!r} is not an op of the chain ({spec.chain})"
            )
            continue
        if item.bias_of is not None:
            position = min(i for i, s in enumerate(spec.steps) if item.op in s.ops)
            earlier = [op for s in spec.steps[:position] for op in s.ops]
            if item.bias_of not in earlier:
                problems.append(
                    f"{where}: where: {item.op}.bias_of: {item.bias_of!r} is not an op "
                    f"before {item.op} in the chain ({spec.chain})"
                )
        if item.same_shape and len(set(item.same_shape)) < 2:
            problems.append(f"{where}: where: {item.op}.same_shape needs two different inputs")
    return problems


def load_patterns(kind: str, data: Sequence[Mapping[str, Any]], rules_file: Path) -> tuple[
    PatternSpec, ...
]:
    """The kind's table, checked; raises BuildgenError naming each bad entry."""
    specs = tuple(_pattern(kind, i, item) for i, item in enumerate(data))
    problems: list[str] = []
    seen: dict[str, int] = {}
    for spec in specs:
        where = f"{rules_file}: patterns[{spec.index}] ({spec.name})"
        if spec.name in seen:
            problems.append(f"{where}: the name is already used by patterns[{seen[spec.name]}]")
        seen.setdefault(spec.name, spec.index)
        problems += _problems(spec, where)
    if problems:
        raise BuildgenError([Diagnostic(p) for p in problems])
    return specs


def load_cost(data: Mapping[str, Any] | None) -> CostSpec:
    if not data:
        return CostSpec()
    return CostSpec(**{k: float(v) for k, v in data.items()})
