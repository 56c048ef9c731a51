"""The cudnn backend without a GPU: what it takes on the example models and why it declines,
what each convolution folds and fuses, and what the generated module says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cpulib_build import imported, one_region
from cpulib_cases import Builder, conv_block, conv_geometry, norms, pools, resblock
from cudnn_cases import one_d
from gpulib import example, gpu_target, ops_on

from buildgen.backends.cpu_common.values import bn_scale_shift
from buildgen.backends.cudnn import CudnnBackend
from buildgen.backends.cudnn.lower import ConvCall, PoolCall, SoftmaxCall
from buildgen.backends.cudnn.support import softmax_view

BACKEND = CudnnBackend()


def _calls(graph, weights, partition):
    return [c for r in BACKEND.lower(graph, partition, weights) for c in r.calls]


def test_example_partitions() -> None:
    cnn = ops_on("cnn", "cudnn")
    graph, _, _ = example("cnn")
    assert sorted(cnn) == sorted(n.op for n in graph.nodes if n.op not in ("Flatten", "Gemm"))
    assert ops_on("encoder", "cudnn") == ["Softmax"]
    assert ops_on("mlp", "cudnn") == []


def test_cnn_folds_batch_norms_and_fuses_relu() -> None:
    graph, weights, partition = example("cnn")
    calls = _calls(graph, weights, partition)
    convs = [c for c in calls if isinstance(c, ConvCall)]
    assert len(convs) == 4 and all(c.relu and c.scale is not None for c in convs)
    residual = [c for c in convs if c.epilogue is not None]
    assert len(residual) == 1 and residual[0].epilogue.params == ("/MaxPool_output_0",)
    pools_ = [c for c in calls if isinstance(c, PoolCall)]
    assert [c.mode for c in pools_] == ["CUDNN_POOLING_MAX", "CUDNN_POOLING_MAX",
                                        "CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING"]
    assert pools_[-1].geo.kernel == (8, 8)  # GlobalAveragePool: the whole plane


def test_conv_block_values(tmp_path: Path) -> None:
    graph, weights = imported(conv_block(), {"x": (1, 8, 12, 12)}, tmp_path)
    c1, c2 = _calls(graph, weights, one_region(graph, "cudnn"))
    scale, shift = bn_scale_shift(graph.node("/bn1"), weights)
    np.testing.assert_array_equal(np.array(c1.scale.values, np.float32), scale)
    np.testing.assert_array_equal(np.array(c1.bias.values, np.float32), shift)
    assert c1.relu and c1.epilogue.params == ("x",)  # the residual Add after the ReLU
    # c2: its own bias through cudnnAddTensor, then Clip in the kernel.
    assert (c2.relu, c2.bias, c2.bias_weight, c2.scale) == (False, None, "b2", None)
    text = BACKEND.generate("m", graph, one_region(graph, "cudnn"), {}, weights).text
    assert "cudnnAddTensor(s->handle, &one, s->k1.bias" in text
    assert "bg_scale_rows<<<" in text and "static __device__ const float k0_scale[8]" in text


def test_residual_before_relu_is_the_fused_calls_z(tmp_path: Path) -> None:
    graph, weights = imported(resblock(), {"x": (1, 8, 10, 10)}, tmp_path)
    partition = one_region(graph, "cudnn")
    c0, c1, c2, c3 = _calls(graph, weights, partition)
    assert (c2.residual, c2.relu, c2.epilogue) == ("c0", True, None)
    assert c1.residual is None and c1.relu and c0.relu is False
    text = BACKEND.generate("m", graph, partition, {}, weights).text
    assert "&one, s->k2.y, (float *)(env->scratch + " in text  # z: c0's output, alpha2 = 1
    assert "&zero, s->k1.y, (float *)(env->scratch + " in text


def test_declines_with_reasons(tmp_path: Path) -> None:
    graph, _ = imported(conv_geometry(), {"x": (2, 6, 11, 13), "s": (1, 4, 20)}, tmp_path)
    assert "padded unevenly" in BACKEND.decline_reason(graph.node("/c"), graph)
    assert "padded unevenly" in BACKEND.decline_reason(graph.node("/c1d"), graph)  # SAME
    assert "only fused after Conv" in BACKEND.decline_reason(graph.node("/y"), graph)
    graph, _ = imported(pools(), {"x": (1, 8, 15, 15)}, tmp_path)
    assert BACKEND.decline_reason(graph.node("/mp"), graph) is None  # ceil_mode, same size
    assert BACKEND.decline_reason(graph.node("/ap"), graph) is None
    assert "padded unevenly" in BACKEND.decline_reason(graph.node("/ap2"), graph)
    b = Builder("ceil")
    x = b.input("x", [1, 2, 16, 16])
    b.outputs.append(b.node("MaxPool", [x], "y", kernel_shape=[3, 3], strides=[2, 2],
                            ceil_mode=1))
    graph, _ = imported(b.model(), {}, tmp_path)
    assert "needs ceil_mode" in BACKEND.decline_reason(graph.node("/y"), graph)
    b = Builder("runtime_weights")
    x = b.input("x", [1, 2, 5, 5])
    b.outputs.append(b.node("Conv", [x, b.input("w", [3, 2, 3, 3])], "y"))
    graph, _ = imported(b.model(), {}, tmp_path)
    assert "run-time weights" in BACKEND.decline_reason(graph.node("/y"), graph)


def test_one_dimensional_windows_run_with_height_one(tmp_path: Path) -> None:
    from buildgen.partition.matcher import find_matches
    from buildgen.targets import get_kind

    graph, weights = imported(one_d(), {}, tmp_path)
    assert "rank 5" in BACKEND.decline_reason(graph.node("/c3d"), graph)
    matched = {m.nodes for m in find_matches(graph, get_kind("cudnn").patterns)}
    assert ("/c", "/r") in matched and ("/y",) in matched
    assert not [m for m in matched if "/c3d" in m]
    conv, pool = _calls(graph, weights, one_region(graph, "cudnn", ["/c", "/r", "/y"]))
    assert (conv.x_shape, conv.w_shape, conv.y_shape) == ((2, 4, 1, 20), (6, 4, 1, 3),
                                                          (2, 6, 1, 9))
    assert (conv.geo.pads_begin, conv.geo.strides, conv.geo.dilations) == ((0, 1), (1, 2),
                                                                           (1, 2))
    assert pool.x_shape == (2, 6, 1, 9) and pool.geo.kernel == (1, 3) and pool.y_shape[3] == 5


def test_softmax_views(tmp_path: Path) -> None:
    graph, weights = imported(norms(), {"x": (2, 6, 10)}, tmp_path)
    assert softmax_view(graph.node("/sm"), graph) == (2, 6, 10)  # axis 1: C=6, 10 inside
    assert softmax_view(graph.node("/y"), graph) == (12, 7, 1)
    partition = one_region(graph, "cudnn", ["/sm", "/y"])
    sm, log = _calls(graph, weights, partition)
    assert isinstance(sm, SoftmaxCall) and log.algorithm == "CUDNN_SOFTMAX_LOG"
    b = Builder("softmax11", opset=11)
    b.outputs.append(b.node("Softmax", [b.input("x", [2, 3, 4])], "y", axis=1))
    graph, _ = imported(b.model(), {}, tmp_path)
    assert softmax_view(graph.node("/y"), graph) == (2, 12, 1)  # Softmax-11 flattens


def test_module_is_readable_and_deterministic() -> None:
    graph, weights, partition = example("cnn")
    first = BACKEND.generate("cnn", graph, partition, {}, weights)
    assert first.text == BACKEND.generate("cnn", graph, partition, {}, weights).text
    assert (first.filename, first.language) == ("cudnn.cu", "cuda")
    text = first.text
    assert text.startswith("/* Model cnn: module of the cudnn backend")
    assert "Source: cnn.onnx" in text and "/work/" not in text
    assert "cudnnConvolutionBiasActivationForward(s->handle" in text
    assert "cudnnSetStream(s->handle, (cudaStream_t)env->stream)" in text
    assert "/* k0: Conv '/stem/conv/Conv' -> BatchNormalization" in text


def test_empty_module_creates_nothing() -> None:
    graph, weights, partition = example("mlp")
    text = BACKEND.generate("mlp", graph, partition, {}, weights).text
    assert "mlp__cudnn_scratch_bytes = 0;" in text and "cudnnCreate(" not in text


@pytest.mark.parametrize(("attrs", "expected", "default"), [
    ({"allow_tf32": True}, "#define BG_MATH CUDNN_DEFAULT_MATH",
     "#define BG_MATH CUDNN_FMA_MATH"),
    ({"workspace_limit_mb": 8}, "BG_WORKSPACE_LIMIT ((size_t)8388608)",
     "BG_WORKSPACE_LIMIT ((size_t)67108864)"),
    ({"algorithm_search": "benchmark"},
     "#define BG_ALGORITHMS cudnnFindConvolutionForwardAlgorithm",
     "#define BG_ALGORITHMS cudnnGetConvolutionForwardAlgorithm_v7"),
])
def test_each_codegen_attribute_changes_the_module(attrs, expected, default) -> None:
    graph, weights, partition = example("cnn")
    options = gpu_target(cudnn=attrs).instance("cudnn").as_dict()
    changed = BACKEND.generate("cnn", graph, partition, options, weights).text
    plain = BACKEND.generate("cnn", graph, partition, {}, weights).text
    assert expected in changed and expected not in plain and default in plain


def test_every_codegen_attribute_is_tested() -> None:
    from buildgen.targets import get_kind

    codegen = {a.name for a in get_kind("cudnn").attributes if a.affects == "codegen"}
    # `sm` picks which tuning records apply: test_cudnn_tune checks it with records.
    assert codegen == {"allow_tf32", "workspace_limit_mb", "algorithm_search", "sm"}
