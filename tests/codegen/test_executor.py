"""The executor, header and weights object, built into a real library with two regions."""

import ctypes
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from executor_build import CC, build_library
from onnx import TensorProto, helper, numpy_helper

from buildgen import runtime
from buildgen.codegen.executor import boundary_bytes
from buildgen.importer import import_model
from buildgen.partition.model import Partition, Region

pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler on PATH")


def _model(path):
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float32), "w2")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="/fc1/MatMul"),
        helper.make_node("Relu", ["h"], ["hr"], name="/fc1/Relu"),
        helper.make_node("MatMul", ["hr", "w2"], ["o"], name="/fc2/MatMul"),
        helper.make_node("Add", ["o", "b"], ["y"], name="/fc2/Add"),
        helper.make_node("Sigmoid", ["h"], ["gate"], name="/gate"),
    ]
    graph = helper.make_graph(
        nodes,
        "two_regions",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("gate", TensorProto.FLOAT, None),
        ],
        [w1, w2, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)
    return model


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("executor")
    _model(root / "m.onnx")
    result = import_model(root / "m.onnx", {"x": (4, 8)})
    graph = result.graph
    order = [n.name for n in graph.nodes]
    cut = order.index("/fc1/Relu") + 1
    partition = Partition(
        "tm",
        "cpu",
        "digest",
        (Region("r0", "c", tuple(order[:cut])), Region("r1", "c", tuple(order[cut:]))),
    )
    sources = build_library(root, "tm", result, partition)
    return root, graph, partition, sources


def test_two_regions_pass_a_boundary_tensor_through_the_arena(built):
    root, graph, partition, sources = built
    assert sources.boundary_bytes == boundary_bytes(graph, partition) > 0
    model = runtime.load(root / "libtm.so")
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    import onnxruntime as ort

    ref = ort.InferenceSession(str(root / "m.onnx")).run(None, {"x": x})
    got = model(x)
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_tables_describe_the_inputs_and_outputs(built):
    model = runtime.load(built[0] / "libtm.so")
    assert [(i.name, i.shape, str(i.dtype)) for i in model.inputs] == [("x", (4, 8), "float32")]
    assert [o.name for o in model.outputs] == ["y", "gate"]
    assert [o.shape for o in model.outputs] == [(4, 4), (4, 16)]


def test_a_null_input_is_reported_through_last_error(built):
    lib = ctypes.CDLL(str(built[0] / "libtm.so"))
    lib.tm_last_error.restype = ctypes.c_char_p
    lib.tm_last_error.argtypes = [ctypes.c_void_p]
    handle = ctypes.c_void_p()
    assert lib.tm_create(ctypes.byref(handle)) == 0
    outs = (ctypes.c_void_p * 2)()
    ins = (ctypes.c_void_p * 1)(None)
    assert lib.tm_run(handle, ins, outs) == -1
    assert lib.tm_last_error(handle) == b"input 0 is NULL"
    lib.tm_destroy(handle)


def test_only_the_c_api_is_exported(built):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm is not installed")
    symbols = subprocess.run(
        [nm, "-D", "--defined-only", str(built[0] / "libtm.so")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {line.split()[-1] for line in symbols.splitlines()}
    assert {"tm_create", "tm_run", "tm_destroy", "tm_last_error", "tm_input_names"} <= names
    assert not any(n.startswith("tm__") for n in names), "backend internals leak from the .so"


def test_header_compiles_as_cpp(built):
    cxx = shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    (built[0] / "use.cc").write_text(
        '#include "tm.h"\nint main() { tm_model *m; return tm_create(&m); }\n'
    )
    subprocess.run(
        [cxx, "-std=c++17", "-Wall", "-Werror", "-fsyntax-only", "use.cc"], cwd=built[0], check=True
    )
