"""Tensor names become readable, unique C identifiers, whatever the ONNX names are."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from c_harness import compile_module, run_partition
from c_ir import F32, ir_graph, ir_node, one_region

from buildgen.backends.c import CBackend
from buildgen.backends.c.cwriter import Names


def test_names_are_sanitized_and_unique() -> None:
    names = Names(("env",))
    assert names("/layer1/Relu_output_0") == "layer1_Relu_output_0"
    assert names("a.b") == "a_b"
    assert names("a_b") == "a_b_2"
    assert names("a.b") == "a_b"  # stable per tensor
    assert names("int") == "t_int"
    assert names("env") == "t_env"
    assert names("0x") == "t_0x"
    assert names("k3_relu") == "t_k3_relu"
    assert names("_private") == "private"
    assert names("::") == "t"
    assert names("?") == "t_2"


def test_hostile_names_compile_and_run(c_toolchain: None, tmp_path: Path) -> None:
    hostile = ["int", "int64_t", "1x", "k0_relu", "a/b:c", "a.b", "a_b", "*/ oops /*"]
    nodes = [
        ir_node("Relu" if i % 2 else "Neg", [src], [dst])
        for i, (src, dst) in enumerate(zip(hostile, hostile[1:], strict=False))
    ]
    # fuse=False keeps every tensor a named, materialized local
    types = {t: (F32, (2, 3)) for t in hostile}
    graph = ir_graph(nodes, types, [hostile[0]], [hostile[-1]])
    partition = one_region(graph)
    source = CBackend(fuse=False).generate("m", graph, partition, {})
    module = compile_module(source, "m", ["r0"], tmp_path)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    out = run_partition(module, graph, partition, {}, {"int": x})
    expected = x
    for i in range(len(hostile) - 1):
        expected = np.maximum(expected, 0) if i % 2 else -expected
    np.testing.assert_array_equal(out[hostile[-1]], expected)


def test_a_module_without_regions_still_compiles(c_toolchain: None, tmp_path: Path) -> None:
    """The build has one codegen action per backend whatever the partition says, so a
    backend given no region must still produce a valid module."""
    graph = ir_graph(
        [ir_node("Relu", ["x"], ["y"])], {"x": (F32, (2,)), "y": (F32, (2,))}, ["x"], ["y"]
    )
    source = CBackend().generate("m", graph, one_region(graph, target="onednn"), {})
    assert "const size_t BG_EXPORT(m__c_scratch_bytes) = 0;" in source.text
    assert "m__c_r0" not in source.text
    module = compile_module(source, "m", [], tmp_path)
    assert module.scratch_bytes == 0
