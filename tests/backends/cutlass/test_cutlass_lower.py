"""How ONNX Gemm and MatMul attributes become GEMM launcher arguments: layouts, leading
dimensions, alpha/beta, bias rows versus full C, batch strides."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
from cutlass_cases import target
from onnx import TensorProto, helper, numpy_helper

from buildgen import stages
from buildgen.backends.cutlass import CutlassBackend


def _build(tmp_path: Path, nodes: list, inputs: dict, weights: dict, output: str) -> str:
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones(s, np.float32), n) for n, s in weights.items()])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    imported = stages.import_model(path, {})
    t = target()
    part = stages.partition(imported.graph, t, model="m")
    assert [r.target for r in part.regions] == ["cutlass"]
    source, _ = CutlassBackend().generate_with_kernels(
        "m", imported.graph, part, t.codegen_options("cutlass"), imported.weights())
    return source.text


def _args(text: str) -> dict[str, str]:
    return dict(re.findall(r"a\.(\w+) = ([^;]+);", text))


def test_gemm_transposes_alpha_beta_and_full_c(tmp_path: Path) -> None:
    node = helper.make_node("Gemm", ["x", "w", "c"], ["y"], transA=1, transB=1, alpha=0.5,
                            beta=2.0)
    text = _build(tmp_path, [node], {"x": [64, 16]}, {"w": [32, 64], "c": [16, 32]}, "y")
    args = _args(text)
    assert (args["m"], args["n"], args["k"]) == ("16", "32", "64")
    assert (args["lda"], args["ldb"], args["ldc"], args["ldd"]) == ("16", "64", "32", "32")
    assert (args["alpha"], args["beta"]) == ("0.5f", "2.0f")
    assert "GEMM m=16 n=32 k=64 A^T B^T" in text
    assert "column/column" in text  # both operands read transposed through their layouts


def test_batched_matmul_strides_and_stacked_rows(tmp_path: Path) -> None:
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    text = _build(tmp_path, [node], {"a": [3, 8, 16], "b": [3, 16, 4]}, {}, "y")
    args = _args(text)
    assert (args["batch"], args["m"], args["n"], args["k"]) == ("3", "8", "4", "16")
    assert (args["stride_a"], args["stride_b"], args["stride_d"]) == ("128", "64", "32")
    # One weight matrix for every batch: the batch's rows stack into one GEMM.
    stacked = helper.make_node("MatMul", ["a", "w"], ["y"])
    relu = helper.make_node("Relu", ["y"], ["z"])
    text = _build(tmp_path, [stacked, relu], {"a": [3, 8, 16]}, {"w": [16, 4]}, "z")
    args = _args(text)
    assert (args["batch"], args["m"], args["beta"]) == ("1", "24", "0.0f")
    assert "epilogue relu" in text
