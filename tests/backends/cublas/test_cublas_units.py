"""The cublas backend without a GPU: what it takes on the example models and why it declines,
which calls each group becomes, and what the generated module says."""

from __future__ import annotations

from pathlib import Path

import pytest
from cpulib_build import imported, one_region
from cpulib_cases import Builder, gemm_variants, mm_batched, mm_bias_relu
from gpulib import example, gpu_target, ops_on

from buildgen.backends.cublas import CublasBackend
from buildgen.backends.cublas.lower import GemmCall, StandaloneCall
from buildgen.backends.cublas.patterns import chain_ok
from buildgen.backends.cublas.support import gemm_geometry

BACKEND = CublasBackend()


def _calls(graph, weights, partition):
    return [c for r in BACKEND.lower(graph, partition, weights) for c in r.calls]


def test_example_partitions_give_every_gemm_to_cublas() -> None:
    assert ops_on("mlp", "cublas") == ["Gemm", "Relu", "Gemm", "Div", "Erf", "Add", "Mul",
                                       "Mul", "Gemm"]
    encoder = ops_on("encoder", "cublas")
    graph, _, _ = example("encoder")
    assert encoder.count("MatMul") == sum(n.op == "MatMul" for n in graph.nodes) == 8
    assert "Erf" in encoder and "LayerNormalization" not in encoder
    assert ops_on("cnn", "cublas") == ["Gemm"]
    _, _, partition = example("encoder")
    patterns = {p for r in partition.regions_for("cublas") for p in r.pattern.split(",")}
    assert patterns == {"cublas.matmul", "cublas.gelu"}


def test_example_calls_use_cublaslt_where_an_epilogue_fuses() -> None:
    mlp = _calls(*example("mlp"))
    assert [(c.name, c.lt_epilogue) for c in mlp if isinstance(c, GemmCall)] == [
        ("k0", "CUBLASLT_EPILOGUE_RELU_BIAS"), ("k1", "CUBLASLT_EPILOGUE_BIAS"),
        ("k2", "CUBLASLT_EPILOGUE_BIAS")]
    # The erf GELU after fc2 is exact in the epilogue kernel (cuBLASLt's GELU is tanh's).
    fc2 = mlp[1]
    assert fc2.epilogue is not None and "erff" in "\n".join(fc2.epilogue.definition())
    encoder = _calls(*example("encoder"))
    batched = [c for c in encoder if isinstance(c, GemmCall) and c.geometry.batch > 1]
    assert [(c.geometry.batch, c.geometry.m, c.geometry.n, c.geometry.k) for c in batched] == [
        (4, 128, 128, 64), (4, 128, 64, 128)]
    assert all(c.lt_epilogue is None for c in batched)  # strided batched GEMMs
    projections = [c for c in encoder if isinstance(c, GemmCall) and c.geometry.batch == 1]
    assert {c.geometry.m for c in projections} == {128}  # [1, 128, 256]: batch folded into M


def test_declines_with_reasons(tmp_path: Path) -> None:
    b = Builder("declines")
    a, v = b.input("a", [2, 3, 4, 5]), b.input("v", [5])
    y = b.node("MatMul", [a, b.input("bb", [2, 1, 5, 6])], "broadcast")
    b.outputs.append(y)
    b.outputs.append(b.node("MatMul", [a, v], "vector"))
    bn = b.node("MatMul", [b.input("x", [2, 4, 3]), b.weight("w", [3, 4])], "mm")
    b.outputs.append(b.batch_norm(bn, 4, "bn"))
    graph, _ = imported(b.model(), {}, tmp_path)
    reasons = {n.name: BACKEND.decline_reason(n, graph) for n in graph.nodes}
    assert "broadcasting batch dims [2, 3] against [2, 1]" in reasons["/broadcast"]
    assert "1-D operand" in reasons["/vector"]
    assert reasons["/mm"] is None
    assert "BatchNormalization after a GEMM" in reasons["/bn"]
    mm, bn_node = graph.node("/mm"), graph.node("/bn")
    assert "BatchNormalization after a GEMM" in chain_ok(graph, (mm, bn_node))


def test_geometry_of_batched_and_transposed_products(tmp_path: Path) -> None:
    graph, _ = imported(gemm_variants(), {"a": (8, 16)}, tmp_path)
    g1 = gemm_geometry(graph.node("/g1"), graph)
    assert (g1.m, g1.n, g1.k, g1.trans_a, g1.alpha) == (16, 12, 8, True, 0.5)
    g2 = gemm_geometry(graph.node("/g2"), graph)
    assert (g2.m, g2.n, g2.k, g2.trans_b) == (16, 10, 12, True)
    b = Builder("batched")
    y = b.node("MatMul", [b.input("a", [3, 4, 5]), b.input("b", [3, 5, 6])], "both")
    b.outputs += [y, b.node("MatMul", [b.input("m", [4, 5]), b.input("n", [2, 3, 5, 6])], "one")]
    graph, _ = imported(b.model(), {}, tmp_path)
    both = gemm_geometry(graph.node("/both"), graph)
    assert (both.batch, both.stride_a, both.stride_b) == (3, 20, 30)
    one = gemm_geometry(graph.node("/one"), graph)
    assert (one.batch, one.stride_a, one.stride_b, one.m) == (6, 0, 30, 4)


def test_gemm_c_is_the_bias_only_when_cublaslt_can_add_it(tmp_path: Path) -> None:
    graph, weights = imported(gemm_variants(), {"a": (8, 16)}, tmp_path)
    calls = _calls(graph, weights, one_region(graph, "cublas"))
    g1, g2, g3 = (c for c in calls if isinstance(c, GemmCall))
    # g1: beta 2 -> cublasGemmStridedBatchedEx, then C (scaled) and Tanh in the kernel.
    assert g1.lt_epilogue is None and g1.bias is None
    assert "2.0f * p0" in "\n".join(g1.epilogue.definition())
    # g2: C of shape [16, 10] is no bias; g3: a scalar C is a literal in the kernel.
    assert g2.lt_epilogue is None and g2.epilogue.params == ("c2",)
    assert g3.epilogue.params == () and "v + 0.25f" in "\n".join(g3.epilogue.definition())
    graph, weights = imported(mm_bias_relu(), {"x": (2, 3, 16, 32)}, tmp_path)
    (call,) = _calls(graph, weights, one_region(graph, "cublas"))
    assert (call.lt_epilogue, call.bias, call.epilogue) == (
        "CUBLASLT_EPILOGUE_RELU_BIAS", "bias", None)
    assert call.geometry.m == 96


def test_a_step_whose_gemm_ran_elsewhere_is_a_kernel_of_its_own(tmp_path: Path) -> None:
    graph, weights = imported(mm_batched(), {"a": (2, 4, 8, 16), "b": (1, 4, 16, 8),
                                             "r": (2, 4, 8, 8)}, tmp_path)
    assert "broadcasting batch dims" in BACKEND.decline_reason(graph.node("/mm"), graph)
    partition = one_region(graph, "cublas", ["/scaled", "/y"])
    (call,) = _calls(graph, weights, partition)
    assert isinstance(call, StandaloneCall) and call.epilogue.params == ("r",)
    text = BACKEND.generate("m", graph, partition, {}, weights).text
    assert "k0_epilogue<<<2, 256, 0, stream>>>((float *)out[0], (float *)in[0], " \
           "(float *)in[1]);" in text


def test_module_is_readable_and_deterministic() -> None:
    graph, weights, partition = example("mlp")
    first = BACKEND.generate("mlp", graph, partition, {}, weights)
    again = BACKEND.generate("mlp", graph, partition, {}, weights)
    assert (first.filename, first.language) == ("cublas.cu", "cuda")
    assert first.text == again.text
    text = first.text
    assert text.startswith("/* Model mlp: module of the cublas backend")
    assert "Source: mlp.onnx" in text and "/work/" not in text
    assert "/* k0: Gemm '/fc1/Gemm' -> Relu '/Relu'" in text
    assert "cublasLtMatmul(s->lt, s->k0.desc" in text
    assert 'extern "C" int mlp__cublas_r0(bg_env *env' in text
    assert "cublasSetStream(s->handle, (cudaStream_t)env->stream)" in text


@pytest.mark.parametrize(("attrs", "expected", "default"), [
    ({"allow_tf32": True}, "#define BG_COMPUTE CUBLAS_COMPUTE_32F_FAST_TF32",
     "#define BG_COMPUTE CUBLAS_COMPUTE_32F\n"),
    ({"workspace_mb": 4}, "BG_WORKSPACE_BYTES ((size_t)4194304)",
     "BG_WORKSPACE_BYTES ((size_t)33554432)"),
])
def test_each_codegen_attribute_changes_the_module(attrs, expected, default) -> None:
    graph, weights, partition = example("encoder")
    options = gpu_target(cublas=attrs).instance("cublas").as_dict()
    changed = BACKEND.generate("encoder", graph, partition, options, weights).text
    plain = BACKEND.generate("encoder", graph, partition, {}, weights).text
    assert expected in changed and expected not in plain and default in plain


def test_every_codegen_attribute_is_tested() -> None:
    from buildgen.targets import get_kind

    codegen = {a.name for a in get_kind("cublas").attributes if a.affects == "codegen"}
    assert codegen == {"allow_tf32", "workspace_mb"}
