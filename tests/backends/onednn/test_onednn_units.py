"""The onednn backend without a compiler: what it takes, which tensors keep oneDNN's
blocked layouts, and what the generated module says."""

from __future__ import annotations

from pathlib import Path

import pytest
from cpulib_build import imported, one_region
from cpulib_cases import Builder, conv_block, mm_batched, mm_bias_relu, pools, silu

from buildgen.backends.onednn import OneDNNBackend
from buildgen.backends.onednn.layout import region_layout


@pytest.fixture()
def backend() -> OneDNNBackend:
    return OneDNNBackend()


def test_declines_with_reasons(backend, tmp_path: Path) -> None:
    b = Builder("declines")
    x = b.input("x", [1, 4, 8, 8])
    w = b.input("w", [4, 4, 3, 3])
    y = b.node("Conv", [x, w], "conv")  # run-time weights
    y = b.node("MaxPool", [y], "pool", kernel_shape=[2, 2], strides=[2, 2])
    y = b.node("Relu", [y], "relu")  # after a pooling: an eltwise primitive of its own
    y = b.node("Reshape", [y, b.weights_int("shape", [4, 9])], "flat")
    y = b.node("Relu", [y], "relu2")  # after a Reshape, which the host runs
    b.outputs.append(b.node("MatMul", [y, b.weight("v", [9])], "y"))
    graph, _ = imported(b.model(), {"x": (1, 4, 8, 8), "w": (4, 4, 3, 3)}, tmp_path)
    conv, pool, relu, reshape, relu2, matmul = graph.nodes
    assert "run-time weights" in backend.decline_reason(conv, graph)
    assert backend.decline_reason(pool, graph) is None
    assert backend.decline_reason(relu, graph) is None
    assert "only fused after Conv/Gemm/MatMul" in backend.decline_reason(relu2, graph)
    assert backend.decline_reason(reshape, graph) == "no onednn pattern covers Reshape"
    assert "matrix-vector" in backend.decline_reason(matmul, graph)


@pytest.mark.parametrize(("opset", "shape", "axis", "declined"), [
    (17, [1, 16, 4, 20], 1, True),  # YOLOv8's DFL head: over the bins, the anchors after
    (17, [1, 16, 4, 20], -1, False),
    (17, [2, 10], 1, False),  # a classifier's last axis
    (11, [1, 16, 4, 20], 1, False),  # Softmax-11 flattens from the axis on: innermost
])
def test_softmax_over_an_inner_axis_is_left_to_the_host(
    backend, tmp_path: Path, opset: int, shape: list[int], axis: int, declined: bool
) -> None:
    b = Builder(f"softmax_{opset}_{axis}", opset=opset)
    b.outputs.append(b.node("Softmax", [b.input("x", shape)], "y", axis=axis))
    graph, _ = imported(b.model(), {"x": tuple(shape)}, tmp_path)
    reason = backend.decline_reason(graph.nodes[0], graph)
    if declined:
        assert reason is not None and "innermost axis only" in reason and "80 elements" in reason
    else:
        assert reason is None


def test_a_silu_after_a_conv_is_its_swish_post_op(backend, tmp_path: Path) -> None:
    from buildgen.backends.cpu_common.groups import group_region
    from buildgen.backends.cpu_common.steps import Swish
    from buildgen.backends.onednn.support import RULES

    graph, _ = imported(silu(), {"x": (1, 4, 8, 8)}, tmp_path)
    assert all(backend.decline_reason(n, graph) is None for n in graph.nodes if n.op != "Add")
    groups = group_region(graph, [n.name for n in graph.nodes if n.op != "Add"], RULES)
    # c1 + SiLU, c2 + SiLU (operands the other way round), then a SiLU whose input (m2) is
    # also read by the Add: a swish of its own
    assert [(g.anchor.name if g.anchor else None, [type(s).__name__ for s in g.steps])
            for g in groups] == [("/c1", ["Swish"]), ("/c2", ["Swish"]), (None, ["Swish"])]
    assert isinstance(groups[2].steps[0], Swish) and groups[2].source == "m2"


def test_a_mul_by_another_tensors_sigmoid_is_no_silu(tmp_path: Path) -> None:
    from buildgen.backends.cpu_common.groups import group_region
    from buildgen.backends.onednn.support import RULES

    b = Builder("not_silu")
    x = b.input("x", [1, 4, 8, 8])
    c = b.node("Conv", [x, b.weight("w", [4, 4, 1, 1])], "c")
    b.outputs.append(b.node("Mul", [x, b.node("Sigmoid", [c], "s")], "y"))
    graph, _ = imported(b.model(), {"x": (1, 4, 8, 8)}, tmp_path)
    (group,) = group_region(graph, [n.name for n in graph.nodes], RULES)
    assert [type(s).__name__ for s in group.steps] == ["Act", "Binary"]  # a gate by x


def test_convs_and_pools_pass_blocked_layouts_inside_a_region(tmp_path: Path) -> None:
    graph, _ = imported(pools(), {"x": (1, 8, 15, 15)}, tmp_path)
    layout = region_layout(graph, one_region(graph, "onednn").regions[0])
    flexible = {e.name: e.flexible for e in layout.tensors}
    # x comes in plain; mp/ap/c/ap2 go from one pooling or Conv to the next; y leaves plain.
    assert flexible == {"x": False, "mp": True, "ap": True, "c": True, "ap2": True, "y": False}
    assert layout.entry("ap").bytes == 8 * 8 * 8 * 4  # channels-last: its own size
    blocked = region_layout(graph, one_region(graph, "onednn").regions[0], blocked=True)
    assert blocked.entry("ap").bytes == 16 * 8 * 8 * 4  # 8 channels planned as 16 (a block)


def test_residual_of_a_sum_post_op_may_stay_blocked(tmp_path: Path) -> None:
    b = Builder("resnet_like")
    x = b.input("x", [1, 8, 6, 6])
    y = b.node("Conv", [x, b.weight("w1", [8, 8, 3, 3])], "c1", pads=[1, 1, 1, 1])
    z = b.node("Conv", [y, b.weight("w2", [8, 8, 3, 3])], "c2", pads=[1, 1, 1, 1])
    z = b.node("Add", [z, y], "sum")
    b.outputs.append(b.node("Relu", [z], "y"))
    graph, weights = imported(b.model(), {"x": (1, 8, 6, 6)}, tmp_path)
    partition = one_region(graph, "onednn")
    layout = region_layout(graph, partition.regions[0])
    assert layout.entry("c1").flexible  # read by a Conv and as the sum's residual
    text = OneDNNBackend().generate("m", graph, partition, {}, weights).text
    assert "{.kind = BG_DNNL_SUM" in text and "dnnl_eltwise_relu" in text


def test_constant_matrix_products_run_as_inner_products(backend, tmp_path: Path) -> None:
    graph, weights = imported(mm_bias_relu(), {"x": (2, 3, 16, 32)}, tmp_path)
    text = backend.generate("m", graph, one_region(graph, "onednn"), {}, weights).text
    assert ".inner_product = 1" in text and ".src_dims = {96, 32}" in text
    assert f".bias_offset = {graph.weight('bias').offset}" in text  # the Add is the bias
    inputs = {"a": (2, 4, 8, 16), "b": (1, 4, 16, 8), "r": (2, 4, 8, 8)}
    graph, weights = imported(mm_batched(), inputs, tmp_path)
    text = backend.generate("m", graph, one_region(graph, "onednn"), {}, weights).text
    assert ".inner_product = 0" in text and ".weights_tensor = r0_b" in text
    assert "dnnl_eltwise_linear, .alpha = 0.125f" in text  # the scalar Mul


def test_module_names_threads_fpmath_and_origin(backend, tmp_path: Path) -> None:
    graph, weights = imported(conv_block(), {"x": (1, 8, 12, 12)}, tmp_path)
    partition = one_region(graph, "onednn")
    text = backend.generate("m", graph, partition, {"threads": 2, "fpmath_mode": "bf16"},
                            weights).text
    assert "bg_dnnl_module_init(m, env, 2, dnnl_fpmath_mode_bf16, BG_DNNL_CHANNELS_LAST, 1)" in text
    assert "/* k0: Conv '/c1'" in text and "then Relu '/r1'" in text
    assert "static const float k0_scale[8]" in text  # the folded BatchNormalization
    assert text == backend.generate("m", graph, partition, {"threads": 2, "fpmath_mode": "bf16"},
                                    weights).text


def test_a_module_without_regions_creates_nothing(backend, tmp_path: Path) -> None:
    graph, weights = imported(conv_block(), {"x": (1, 8, 12, 12)}, tmp_path)
    text = backend.generate("m", graph, one_region(graph, "c"), {}, weights).text
    assert "int m__onednn_create(bg_env *env)\n{\n    (void)env;\n    return 0;\n}" in text
    assert "const size_t m__onednn_scratch_bytes = 0;" in text


def test_full_size_binary_operands_stay_channels_last(tmp_path: Path) -> None:
    """PP-OCR's FPN: x + x * s and x + upsampled, both operands full size. Each reads its
    second operand as a binary post-op's src1, which oneDNN takes in the layout it writes:
    channels-last needs no reorder of either; a blocked layout keeps them plain."""
    from onednn_image_cases import squeeze_excite

    model = squeeze_excite()
    for _ in range(3):  # the host's three ReduceMeans: one oneDNN region is left
        model.graph.output.pop()
        model.graph.node.pop()
    model.graph.input.pop()
    graph, _ = imported(model, {"x": (1, 8, 10, 10)}, tmp_path)
    region = one_region(graph, "onednn").regions[0]
    layout = region_layout(graph, region)
    assert layout.entry("c0_bias").flexible  # Mul's source; Add's other operand
    assert layout.entry("up").flexible  # the FPN Add's other operand
    assert not layout.entry("se_gate").flexible  # broadcast [1, 16, 1, 1]: plain
    blocked = region_layout(graph, region, blocked=True)
    assert not blocked.entry("c0_bias").flexible and not blocked.entry("up").flexible
