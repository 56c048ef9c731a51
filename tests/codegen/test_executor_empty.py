"""Empty tensors through the executor: an empty input, an empty tensor passed between
regions, empty outputs (one produced, one an input returned as is). Their pointers may be
NULL; every other pointer still may not. (x is returned as is too: regions must read it
from the input, not from the output it is copied to at the end.)"""

import ctypes

import numpy as np
import onnx
import pytest
from executor_build import CC, build_library
from onnx import TensorProto, helper, numpy_helper

from buildgen import runtime
from buildgen.importer import import_model
from buildgen.partition.model import Partition, Region

pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler on PATH")


def _model(path):
    nodes = [
        helper.make_node("Concat", ["x", "e"], ["c"], name="/concat", axis=0),
        helper.make_node("Split", ["c", "sizes"], ["s0", "s1"], name="/split", axis=0),
        helper.make_node("Relu", ["s0"], ["y"], name="/relu"),
        helper.make_node("Neg", ["s1"], ["z"], name="/neg"),
        helper.make_node("ReduceSum", ["e", "axes"], ["r"], name="/sum", keepdims=1),
    ]
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes,
        "empty",
        [
            helper.make_tensor_value_info("x", f32, [2, 3]),
            helper.make_tensor_value_info("e", f32, [0, 3]),
        ],
        [helper.make_tensor_value_info(n, f32, None) for n in ("y", "z", "r", "e", "x")],
        [
            numpy_helper.from_array(np.array([2, 0], np.int64), "sizes"),
            numpy_helper.from_array(np.array([0], np.int64), "axes"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    onnx.save(model, path)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("executor_empty")
    _model(root / "m.onnx")
    result = import_model(root / "m.onnx", {})
    order = [n.name for n in result.graph.nodes]
    first = ("/concat", "/split")
    partition = Partition(
        "te",
        "cpu",
        "digest",
        (
            Region("r0", "c", tuple(n for n in order if n in first)),
            Region("r1", "c", tuple(n for n in order if n not in first)),
        ),
    )
    sources = build_library(root, "te", result, partition)
    return root, sources


def _call(lib, inputs, outputs):
    handle = ctypes.c_void_p()
    assert lib.te_create(ctypes.byref(handle)) == 0
    ins = (ctypes.c_void_p * len(inputs))(*inputs)
    outs = (ctypes.c_void_p * len(outputs))(*outputs)
    rc = lib.te_run(handle, ins, outs)
    lib.te_last_error.restype = ctypes.c_char_p
    lib.te_last_error.argtypes = [ctypes.c_void_p]
    message = lib.te_last_error(handle)
    lib.te_destroy(handle)
    return rc, message


def test_empty_tensors_may_be_passed_as_null(built):
    lib = ctypes.CDLL(str(built[0] / "libte.so"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    y, r = np.full((2, 3), np.nan, np.float32), np.full((1, 3), np.nan, np.float32)
    x_out = np.full((2, 3), np.nan, np.float32)
    outputs = [y.ctypes.data, None, r.ctypes.data, None, x_out.ctypes.data]
    rc, message = _call(lib, [x.ctypes.data, None], outputs)
    assert (rc, message) == (0, b"")
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    np.testing.assert_array_equal(x_out, x)
    np.testing.assert_array_equal(r, np.zeros((1, 3), np.float32))


def test_a_null_pointer_for_a_non_empty_tensor_is_still_an_error(built):
    lib = ctypes.CDLL(str(built[0] / "libte.so"))
    x, r = np.zeros((2, 3), np.float32), np.zeros((1, 3), np.float32)
    outputs = [None, None, r.ctypes.data, None, x.ctypes.data]
    rc, message = _call(lib, [x.ctypes.data, None], outputs)
    assert (rc, message) == (-1, b"output 0 is NULL")


def test_runtime_takes_and_returns_empty_arrays(built):
    root, sources = built
    model = runtime.load(root / "libte.so")
    assert [(i.name, i.shape) for i in model.inputs] == [("x", (2, 3)), ("e", (0, 3))]
    assert [o.shape for o in model.outputs] == [(2, 3), (0, 3), (1, 3), (0, 3), (2, 3)]
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    e = np.zeros((0, 3), np.float32)
    import onnxruntime as ort

    expected = ort.InferenceSession(str(root / "m.onnx")).run(None, {"x": x, "e": e})
    for got, want in zip(model(x, e), expected, strict=True):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert "te_input_bytes[i] != 0" in sources.source_c  # the NULL checks know the sizes
    assert "may be NULL" in sources.header
