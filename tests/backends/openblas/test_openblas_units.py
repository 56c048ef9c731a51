"""The openblas backend without a compiler: what it takes and why not, how a region reads
back as groups, and what the generated module says."""

from __future__ import annotations

from pathlib import Path

import pytest
from cpulib_build import imported, one_region
from cpulib_cases import Builder, conv_block, gemm_variants, mm_batched

from buildgen.backends.cpu_common.groups import group_region
from buildgen.backends.openblas import OpenBLASBackend
from buildgen.backends.openblas.patterns import chain_ok
from buildgen.backends.openblas.support import RULES
from buildgen.errors import BuildgenError


@pytest.fixture()
def backend() -> OpenBLASBackend:
    return OpenBLASBackend()


def _graph(model, inputs, tmp_path: Path):
    return imported(model, inputs, tmp_path)


def test_takes_anchors_and_the_chains_after_them(backend, tmp_path: Path) -> None:
    graph, _ = _graph(conv_block(), {"x": (1, 8, 12, 12)}, tmp_path)
    reasons = {n.op + n.name: backend.decline_reason(n, graph) for n in graph.nodes}
    assert all(r is None for r in reasons.values()), reasons
    nodes = tuple(graph.nodes)
    assert [n.op for n in nodes[:4]] == ["Conv", "BatchNormalization", "Relu", "Add"]
    assert chain_ok(graph, nodes[:4]) is None
    assert chain_ok(graph, nodes[:5]) == "Conv is not an elementwise epilogue op"
    assert chain_ok(graph, nodes[1:3]) == "BatchNormalization does not start a openblas group"


def test_declines_with_reasons(backend, tmp_path: Path) -> None:
    b = Builder("declines")
    x = b.input("x", [1, 6, 9, 9])
    y = b.node("Conv", [x, b.weight("w", [6, 1, 3, 3])], "dw", group=6, pads=[1, 1, 1, 1])
    y = b.node("Relu", [y], "r")
    b.outputs.append(b.node("Softmax", [y], "y", axis=1))
    graph, _ = _graph(b.model(), {"x": (1, 6, 9, 9)}, tmp_path)
    conv, relu, softmax = graph.nodes
    assert "depthwise" in backend.decline_reason(conv, graph)
    assert "only fused after" in backend.decline_reason(relu, graph)  # its Conv declined
    assert backend.decline_reason(softmax, graph) == "no openblas pattern covers Softmax"


def test_residual_joins_the_chain_that_ran_last(tmp_path: Path) -> None:
    b = Builder("two_branches")
    x = b.input("x", [1, 4, 6, 6])
    left = b.node("Conv", [x, b.weight("w1", [4, 4, 1, 1])], "left")
    right = b.node("Conv", [x, b.weight("w2", [4, 4, 1, 1])], "right")
    b.outputs.append(b.node("Add", [left, right], "y"))
    graph, _ = _graph(b.model(), {"x": (1, 4, 6, 6)}, tmp_path)
    groups = group_region(graph, [n.name for n in graph.nodes], RULES)
    assert [[n.op for n in g.nodes] for g in groups] == [["Conv"], ["Conv", "Add"]]
    assert groups[1].anchor.name == "/right" and groups[1].steps[0].other == "left"


def test_a_step_without_its_anchor_is_a_group_of_its_own(tmp_path: Path) -> None:
    graph, _ = _graph(conv_block(), {"x": (1, 8, 12, 12)}, tmp_path)
    tail = [n.name for n in graph.nodes][1:3]  # BatchNormalization, Relu: the Conv elsewhere
    (group,) = group_region(graph, tail, RULES)
    assert group.anchor is None and group.source == "c1"
    assert [s.node.op for s in group.steps] == ["BatchNormalization", "Relu"]


def test_module_names_its_library_threads_and_origin(backend, tmp_path: Path) -> None:
    graph, weights = _graph(gemm_variants(), {"a": (8, 16)}, tmp_path)
    partition = one_region(graph, "openblas")
    text = backend.generate("m", graph, partition, {"library": "openblas", "threads": 0},
                            weights).text
    assert "cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, 16, 12, 8, 0.5f" in text
    assert "scipy_" not in text and "use_threads" not in text
    assert "Gemm '/g1'" in text and "Tanh '/t1'" in text
    assert "v = v + 2.0f * c[" in text  # beta * C, broadcast over the rows
    scipy = backend.generate("m", graph, partition, {"library": "scipy_openblas", "threads": 2},
                             weights).text
    assert "scipy_openblas_set_num_threads(2)" in scipy
    assert scipy == backend.generate("m", graph, partition, {"threads": 2}, weights).text


def test_batched_product_loops_over_broadcast_batches(backend, tmp_path: Path) -> None:
    inputs = {"a": (2, 4, 8, 16), "b": (1, 4, 16, 8), "r": (2, 4, 8, 8)}
    graph, weights = _graph(mm_batched(), inputs, tmp_path)
    text = backend.generate("m", graph, one_region(graph, "openblas"), {}, weights).text
    assert "/* 8 products of [8,16] x [16,8] */" in text
    assert "b + b1 * 128" in text  # the right operand's batch of 1 is broadcast
    assert "v = v * 0.125f;" in text


def test_needs_weights_for_folded_constants(backend, tmp_path: Path) -> None:
    graph, _ = _graph(conv_block(), {"x": (1, 8, 12, 12)}, tmp_path)
    with pytest.raises(BuildgenError, match="needed at codegen"):
        backend.generate("m", graph, one_region(graph, "openblas"), {}, None)


def test_scratch_holds_the_im2col_buffer(backend, tmp_path: Path) -> None:
    graph, weights = _graph(conv_block(), {"x": (1, 8, 12, 12)}, tmp_path)
    summary = backend.plan_summary(graph, one_region(graph, "openblas"), {}, weights)
    im2col = 8 * 9 * 12 * 12 * 4  # K = 8 channels x 3 x 3, one column per output pixel
    residual = 8 * 12 * 12 * 4  # the first chain's output, read by the 1x1 Conv
    assert summary.scratch_bytes == im2col + residual
