"""buildgen.codegen.memplan and the c backend's use of it."""

from __future__ import annotations

import random

import pytest
from c_ir import F32, ir_graph, ir_node, one_region

from buildgen.backends.c import CBackend
from buildgen.codegen.memplan import Buffer, plan_memory


def _check_no_conflicts(buffers: list[Buffer], offsets: dict[str, int]) -> None:
    for i, a in enumerate(buffers):
        assert offsets[a.name] % 64 == 0
        for b in buffers[i + 1 :]:
            if a.first <= b.last and b.first <= a.last and a.size and b.size:
                a0, b0 = offsets[a.name], offsets[b.name]
                assert a0 + a.size <= b0 or b0 + b.size <= a0, f"{a} and {b} overlap"


def test_chain_reuses_bytes() -> None:
    # t0 -> t1 -> t2 -> t3: only neighbours are alive together
    buffers = [Buffer(f"t{i}", 1000, i, i + 1) for i in range(4)]
    plan = plan_memory(buffers)
    assert plan.unshared_bytes == 4 * 1024
    assert plan.total_bytes == 2 * 1024
    assert plan.saved_bytes == 2 * 1024
    _check_no_conflicts(buffers, dict(plan.offsets))


def test_best_fit_fills_the_smallest_gap() -> None:
    buffers = [
        Buffer("big", 4096, 0, 1),
        Buffer("mid", 1024, 0, 3),
        Buffer("late", 3000, 2, 3),
        Buffer("small", 900, 2, 3),
    ]
    plan = plan_memory(buffers)
    # "late" and "small" reuse the bytes of "big", which is dead from step 2 on: "small"
    # takes the 1088-byte gap after "late" rather than the open end after "mid"
    assert dict(plan.offsets) == {"big": 0, "mid": 4096, "late": 0, "small": 3008}
    assert plan.total_bytes == 4096 + 1024
    _check_no_conflicts(buffers, dict(plan.offsets))


def test_random_plans_are_valid_and_deterministic() -> None:
    rng = random.Random(1)
    for _ in range(50):
        buffers = []
        for i in range(rng.randint(1, 30)):
            first = rng.randint(0, 20)
            buffers.append(
                Buffer(
                    f"b{i}",
                    rng.choice([0, 1, 63, 64, 65, 500, 4096]),
                    first,
                    first + rng.randint(0, 5),
                )
            )
        plan = plan_memory(buffers)
        _check_no_conflicts(buffers, dict(plan.offsets))
        assert plan.total_bytes <= plan.unshared_bytes
        assert plan == plan_memory(list(buffers))


def test_empty_buffers_take_no_space() -> None:
    """An empty tensor (0 bytes) gets an offset inside the arena but adds nothing to it."""
    buffers = [Buffer("e0", 0, 0, 3), Buffer("a", 100, 0, 3), Buffer("e1", 0, 1, 2)]
    plan = plan_memory(buffers)
    assert plan.total_bytes == plan.unshared_bytes == 128
    assert all(0 <= offset <= plan.total_bytes for offset in plan.offsets.values())
    assert plan_memory([Buffer("e", 0, 0, 0)]).total_bytes == 0


def test_invalid_requests() -> None:
    with pytest.raises(ValueError, match="unique"):
        plan_memory([Buffer("a", 1, 0, 0), Buffer("a", 1, 0, 0)])
    with pytest.raises(ValueError, match="invalid"):
        plan_memory([Buffer("a", 1, 3, 2)])
    assert plan_memory([]).total_bytes == 0


def test_c_module_scratch_is_planned() -> None:
    """Six unfusable steps in a row: intermediates share scratch, and the summary says so."""
    shape = (4, 64)
    nodes, types = [], {"x0": (F32, shape)}
    for i in range(6):
        op = "Softmax" if i % 2 == 0 else "Transpose"
        nodes.append(
            ir_node(op, [f"x{i}"], [f"x{i + 1}"], **({"perm": [0, 1]} if op == "Transpose" else {}))
        )
        types[f"x{i + 1}"] = (F32, shape)
    graph = ir_graph(nodes, types, ["x0"], ["x6"])
    summary = CBackend().plan_summary(graph, one_region(graph), {})
    assert summary.unshared_bytes == 5 * 1024  # x1..x5 live in scratch
    assert summary.scratch_bytes == 2 * 1024
    assert [(r.region, r.planned_bytes, r.buffers) for r in summary.regions] == [("r0", 2048, 5)]
    text = CBackend().generate("m", graph, one_region(graph), {}).text
    assert "const size_t BG_EXPORT(m__c_scratch_bytes) = 2048;" in text
    assert "Scratch: 2048 bytes planned for 5120 bytes of intermediates and workspaces." in text
