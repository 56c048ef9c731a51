"""Fuzzing the import and partition stages with mutated ONNX models.

Seeds: the committed examples/models/*.onnx and small models made here with onnx.helper
(conv, matmul, reshape/transpose, a dynamic dim, gather/concat). Each case parses a seed,
mutates the protobuf structurally (op types swapped among real ONNX ops, node inputs and
outputs dropped, duplicated or renamed, initializers and graph inputs/outputs likewise,
attributes of the wrong type or value, odd shapes (0, -1, huge), other dtypes, other opset
and IR versions, external data pointing elsewhere, odd names), sometimes damages the
serialized bytes (truncation, bit flips), and sometimes passes odd input shapes. It then
runs what the build's IMPORT and PARTITION actions run, in-process: the importer, the
graph's serialization round trip, and the partition for the `c` target (no C compiled).

Each case must end in success or a BuildgenError (what the actions print as `error: ...`)
within PER_CASE_SECONDS; never another exception (an internal error), a hang, or a file
written outside the case's folder.
"""

from __future__ import annotations

import os
import shutil
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from fuzz_support import (
    PER_CASE_SECONDS,
    CaseTimeout,
    Tally,
    crash_reports,
    fuzz_settings,
    hang_guard,
    listing,
)
from hypothesis import given
from hypothesis import strategies as st
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from buildgen.errors import BuildgenError

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_EXAMPLES = 1200

ALL_OPS = sorted({s.name for s in onnx.defs.get_all_schemas() if s.domain == ""})
UNARY = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Log", "Sqrt", "Erf", "Identity",
         "Softmax", "Floor", "Ceil", "Reciprocal", "Sign", "Not", "Cast", "Shape", "Size",
         "LeakyRelu", "Elu", "Selu", "HardSigmoid", "Softplus", "Gelu", "Flatten",
         "ReduceMean", "ReduceSum", "ArgMax", "NonZero", "Transpose", "Squeeze", "Unsqueeze"]
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "MatMul", "Equal", "Less",
          "Greater", "And", "Or", "Mod", "PRelu", "Reshape", "Expand", "Gather", "Concat",
          "Tile", "Where", "Gemm", "Conv", "Sum", "Mean"]
DTYPES = [t for t in TensorProto.DataType.values() if t != TensorProto.UNDEFINED]
ATTR_TYPES = list(AttributeProto.AttributeType.values())


# --- seeds -------------------------------------------------------------------------------

def _vi(name: str, shape: list[Any] | None, dtype: int = TensorProto.FLOAT) -> Any:
    return helper.make_tensor_value_info(name, dtype, shape)


def _init(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(array, name)


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any],
           inits: list[TensorProto] = ()) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _seeds() -> list[tuple[str, bytes, dict[str, list[int]]]]:
    rng = np.random.default_rng(0)
    f32 = np.float32
    seeds = [
        ("mlp", (ROOT / "examples/models/mlp.onnx").read_bytes(), {"x": [2, 512]}),
        ("cnn", (ROOT / "examples/models/cnn.onnx").read_bytes(), {"image": [1, 3, 32, 32]}),
        ("encoder", (ROOT / "examples/models/encoder.onnx").read_bytes(),
         {"x": [1, 8, 256]}),
        ("conv", _model(
            [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1],
                              strides=[1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2])],
            [_vi("x", ["n", 2, 8, 8])], [_vi("y", ["n", 4, 4, 4])],
            [_init("w", rng.standard_normal((4, 2, 3, 3)).astype(f32)),
             _init("b", rng.standard_normal(4).astype(f32))]), {"x": [1, 2, 8, 8]}),
        ("matmul", _model(
            [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["a"], name="add"),
             helper.make_node("Tanh", ["a"], ["y"], name="tanh")],
            [_vi("x", [3, 5])], [_vi("y", [3, 4])],
            [_init("w", rng.standard_normal((5, 4)).astype(f32)),
             _init("b", rng.standard_normal(4).astype(f32))]), {}),
        ("reshape", _model(
            [helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
             helper.make_node("Transpose", ["r"], ["t"], name="tr", perm=[0, 2, 1]),
             helper.make_node("Softmax", ["t"], ["y"], name="sm", axis=-1)],
            [_vi("x", [2, 12])], [_vi("y", [2, 4, 3])],
            [_init("s", np.array([2, 3, 4], dtype=np.int64))]), {}),
        ("dynamic", _model(
            [helper.make_node("Mul", ["x", "x"], ["m"], name="sq"),
             helper.make_node("ReduceSum", ["m", "axes"], ["y"], name="sum", keepdims=1)],
            [_vi("x", ["batch", "seq", 6])], [_vi("y", ["batch", "seq", 1])],
            [_init("axes", np.array([-1], dtype=np.int64))]), {"x": [2, 3, 6]}),
        ("gather", _model(
            [helper.make_node("Gather", ["table", "ids"], ["g"], name="gather", axis=0),
             helper.make_node("Concat", ["g", "g"], ["c"], name="cat", axis=1),
             helper.make_node("Cast", ["c"], ["y"], name="cast", to=TensorProto.FLOAT)],
            [_vi("ids", ["n"], TensorProto.INT64)], [_vi("y", ["n", 8])],
            [_init("table", rng.standard_normal((10, 4)).astype(f32))]), {"ids": [3]}),
    ]
    return seeds


SEEDS = _seeds()

# --- mutations ---------------------------------------------------------------------------

ODD_NAMES = st.sampled_from(["", "x", "y", "w", "b", "h", "a" * 300, "é", "名", "\x1b[2J",
                             "a\nb", "\u202e", "a b", "../x", "/", ":", "$x", "%", "\x00",
                             "r", "mm", "conv", "same"])
ODD_DIMS = st.sampled_from([0, -1, -7, 1, 2, 3, 2**31, 2**40, 2**62])


def _tensor_names(graph: onnx.GraphProto) -> list[str]:
    names = [i.name for i in graph.input] + [t.name for t in graph.initializer]
    for node in graph.node:
        names += list(node.input) + list(node.output)
    return [n for n in names if n] or ["x"]


def _pick(draw: st.DrawFn, seq: Any) -> Any:
    return seq[draw(st.integers(0, len(seq) - 1))]


def _mutate_node(draw: st.DrawFn, graph: onnx.GraphProto, node: onnx.NodeProto) -> str:
    what = draw(st.sampled_from([
        "op_similar", "op_any", "op_junk", "domain", "drop_input", "dup_input",
        "rename_input", "drop_output", "dup_output", "rename_output", "self_loop",
        "attr_type", "attr_value", "attr_drop", "attr_add", "name", "drop_node",
        "dup_node"]))
    if what == "op_similar":
        node.op_type = draw(st.sampled_from(UNARY if len(node.input) < 2 else BINARY))
    elif what == "op_any":
        node.op_type = draw(st.sampled_from(ALL_OPS))
    elif what == "op_junk":
        node.op_type = draw(st.sampled_from(["", "relu", "Foo", "Relu ", "If", "Loop", "Scan"]))
    elif what == "domain":
        node.domain = draw(st.sampled_from(["com.microsoft", "ai.onnx.ml", "x", "ai.onnx"]))
    elif what == "drop_input" and node.input:
        del node.input[draw(st.integers(0, len(node.input) - 1))]
    elif what == "dup_input" and node.input:
        node.input.append(_pick(draw, node.input))
    elif what == "rename_input" and node.input:
        names = _tensor_names(graph)
        node.input[draw(st.integers(0, len(node.input) - 1))] = draw(
            st.one_of(st.sampled_from(names), ODD_NAMES))
    elif what == "drop_output" and node.output:
        del node.output[draw(st.integers(0, len(node.output) - 1))]
    elif what == "dup_output" and node.output:
        node.output.append(draw(st.one_of(st.sampled_from(_tensor_names(graph)), ODD_NAMES)))
    elif what == "rename_output" and node.output:
        node.output[draw(st.integers(0, len(node.output) - 1))] = draw(
            st.one_of(st.sampled_from(_tensor_names(graph)), ODD_NAMES))
    elif what == "self_loop" and node.output:
        node.input.append(node.output[0])
    elif what == "attr_type" and node.attribute:
        attr = _pick(draw, node.attribute)
        attr.type = draw(st.sampled_from(ATTR_TYPES))
    elif what == "attr_value" and node.attribute:
        attr = _pick(draw, node.attribute)
        attr.i = draw(st.sampled_from([0, -1, -100, 7, 2**40, -(2**62)]))
        attr.f = draw(st.sampled_from([0.0, -1.0, float("nan"), float("inf"), 1e30]))
        del attr.ints[:]
        attr.ints.extend(draw(st.lists(ODD_DIMS, max_size=6)))
        attr.s = draw(st.sampled_from([b"", b"NOTSET", b"SAME_UPPER", b"\xff\xfe", b"x" * 10]))
    elif what == "attr_drop" and node.attribute:
        del node.attribute[draw(st.integers(0, len(node.attribute) - 1))]
    elif what == "attr_add":
        name = draw(st.sampled_from(["axis", "perm", "to", "kernel_shape", "pads", "strides",
                                     "keepdims", "group", "transA", "alpha", "value", "junk",
                                     "dilations", "auto_pad", "axes", "mode"]))
        value = draw(st.one_of(ODD_DIMS, st.lists(ODD_DIMS, min_size=1, max_size=5),
                               st.sampled_from([1.5, "VALID", b"x"])))
        node.attribute.append(helper.make_attribute(name, value))
    elif what == "name":
        node.name = draw(ODD_NAMES)
    elif what == "drop_node":
        graph.node.remove(node)
    elif what == "dup_node":
        graph.node.append(node)  # a copy: two nodes writing the same outputs
    return what


def _mutate_value_info(draw: st.DrawFn, info: onnx.ValueInfoProto) -> None:
    tensor = info.type.tensor_type
    what = draw(st.sampled_from(["dim", "dim", "rank", "dtype", "no_shape", "param",
                                 "sequence"]))
    if what == "dim" and tensor.shape.dim:
        dim = _pick(draw, tensor.shape.dim)
        dim.dim_value = draw(ODD_DIMS)
    elif what == "param" and tensor.shape.dim:
        _pick(draw, tensor.shape.dim).dim_param = draw(ODD_NAMES)
    elif what == "rank":
        if tensor.shape.dim and draw(st.booleans()):
            del tensor.shape.dim[-1]
        else:
            tensor.shape.dim.add().dim_value = draw(ODD_DIMS)
    elif what == "dtype":
        tensor.elem_type = draw(st.sampled_from(DTYPES + [0, 99]))
    elif what == "no_shape":
        tensor.ClearField("shape")
    elif what == "sequence":
        info.type.CopyFrom(helper.make_sequence_type_proto(info.type))


def _mutate_initializer(draw: st.DrawFn, graph: onnx.GraphProto) -> None:
    if not graph.initializer:
        return
    index = draw(st.integers(0, len(graph.initializer) - 1))
    init = graph.initializer[index]
    what = draw(st.sampled_from(["drop", "dup", "rename", "dims", "dtype", "truncate",
                                 "external", "clear", "as_input"]))
    if what == "drop":
        del graph.initializer[index]
    elif what == "dup":
        graph.initializer.append(init)
    elif what == "rename":
        init.name = draw(st.one_of(st.sampled_from(_tensor_names(graph)), ODD_NAMES))
    elif what == "dims":
        if init.dims and draw(st.booleans()):
            init.dims[draw(st.integers(0, len(init.dims) - 1))] = draw(ODD_DIMS)
        else:
            init.dims.append(draw(ODD_DIMS))
    elif what == "dtype":
        init.data_type = draw(st.sampled_from(DTYPES + [0, 99]))
    elif what == "truncate" and init.raw_data:
        init.raw_data = init.raw_data[: draw(st.integers(0, len(init.raw_data) - 1))]
    elif what == "external":
        init.data_location = TensorProto.EXTERNAL
        del init.external_data[:]
        for key, value in draw(st.lists(st.tuples(
                st.sampled_from(["location", "offset", "length", "checksum", "junk"]),
                st.sampled_from(["w.bin", "../../../etc/passwd", "/etc/hostname", "/dev/zero",
                                 "", "0", "-1", "99999999999", "model.onnx", "."])),
                min_size=1, max_size=3)):
            entry = init.external_data.add()
            entry.key, entry.value = key, value
    elif what == "clear":
        init.ClearField("raw_data")
        del init.float_data[:]
    elif what == "as_input":
        graph.input.append(helper.make_tensor_value_info(init.name, init.data_type,
                                                         list(init.dims)))


@st.composite
def onnx_cases(draw: st.DrawFn) -> tuple[str, bytes, dict[str, list[int]], list[str]]:
    """(seed name, model bytes, input shapes, what was mutated)."""
    name, data, shapes = SEEDS[draw(st.integers(0, len(SEEDS) - 1))]
    model = onnx.ModelProto()
    model.ParseFromString(data)
    graph = model.graph
    done: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        where = draw(st.sampled_from(["node", "node", "node", "value", "init", "io",
                                      "opset", "model"]))
        if where == "node" and graph.node:
            done.append(_mutate_node(draw, graph, _pick(draw, graph.node)))
        elif where == "value":
            infos = [*graph.input, *graph.output, *graph.value_info]
            if infos:
                _mutate_value_info(draw, _pick(draw, infos))
                done.append("value_info")
        elif where == "init":
            _mutate_initializer(draw, graph)
            done.append("initializer")
        elif where == "io":
            which = graph.input if draw(st.booleans()) else graph.output
            how = draw(st.sampled_from(["drop", "dup", "rename", "add"]))
            if how == "drop" and which:
                del which[draw(st.integers(0, len(which) - 1))]
            elif how == "dup" and which:
                which.append(_pick(draw, which))
            elif how == "rename" and which:
                _pick(draw, which).name = draw(
                    st.one_of(st.sampled_from(_tensor_names(graph)), ODD_NAMES))
            elif how == "add":
                which.append(_vi(draw(st.one_of(st.sampled_from(_tensor_names(graph)),
                                                ODD_NAMES)), [draw(ODD_DIMS)]))
            done.append(f"graph {how}")
        elif where == "opset":
            version = draw(st.sampled_from([0, 1, 6, 7, 11, 13, 18, 21, 27, 99, 2**40, -1]))
            how = draw(st.sampled_from(["set", "add", "clear"]))
            if how == "set" and model.opset_import:
                model.opset_import[0].version = version
            elif how == "add":
                model.opset_import.append(helper.make_opsetid(
                    draw(st.sampled_from(["", "ai.onnx", "com.microsoft"])), version))
            elif how == "clear":
                del model.opset_import[:]
            done.append(f"opset {how}")
        elif where == "model":
            how = draw(st.sampled_from(["ir", "functions", "metadata"]))
            if how == "ir":
                model.ir_version = draw(st.sampled_from([0, 1, 3, 7, 10, 11, 99]))
            elif how == "functions":
                function = model.functions.add()
                function.name, function.domain = "Relu", ""
            else:
                entry = model.metadata_props.add()
                entry.key, entry.value = draw(ODD_NAMES), draw(ODD_NAMES)
            done.append(f"model {how}")
    try:
        raw = model.SerializeToString()
    except Exception as exc:  # a mutation protobuf cannot serialize: keep the seed's
        done.append(f"unserializable: {type(exc).__name__}")
        raw = data
    if draw(st.integers(0, 7)) == 0:  # byte-level damage
        damaged = bytearray(raw)
        spread = draw(st.randoms(use_true_random=True))  # uniform positions (seeded by the draw)
        for _ in range(draw(st.integers(1, 3))):
            how = draw(st.sampled_from(["truncate", "flip", "flip", "zero"]))
            at = spread.randrange(max(1, len(damaged)))
            if how == "truncate":
                del damaged[at:]
            elif how == "flip" and damaged:
                damaged[at] ^= 1 << spread.randrange(8)
            elif how == "zero":
                damaged[at:at + 8] = bytes(len(damaged[at:at + 8]))
        raw = bytes(damaged)
        done.append("bytes")
    if draw(st.integers(0, 5)) == 0:
        shapes = draw(st.dictionaries(
            st.one_of(st.sampled_from(list(shapes) or ["x"]), ODD_NAMES),
            st.lists(ODD_DIMS, max_size=5), max_size=2))
        done.append("input shapes")
    return name, raw, shapes, done


# --- the test ----------------------------------------------------------------------------


def run_import_and_partition(source: Path, shapes: dict[str, list[int]]) -> None:
    """What the IMPORT and PARTITION actions compute for the `c` target, in-process."""
    from buildgen.importer import import_model
    from buildgen.ir.constants import constants_blob
    from buildgen.ir.serialize import dump_graph, graph_digest, load_graph
    from buildgen.partition.pipeline import PartitionOptions, make_partition
    from buildgen.partition.serialize import dump_partition
    from buildgen.stages.api import resolve_target

    result = import_model(source, shapes, model_name="m")
    text = dump_graph(result.graph)
    constants_blob(result.graph, result.weights_blob)
    graph = load_graph(text)
    partition = make_partition(graph, resolve_target("c"), "m", graph_digest(text),
                               PartitionOptions())
    dump_partition(partition)


def test_fuzz_onnx_import_partition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base"
    base.mkdir()
    cwd = base / "cwd"  # the working directory during a case: must stay empty
    cwd.mkdir()
    case = base / "case"
    tally = Tally("ONNX fuzz (import + partition for c)")
    before = os.getcwd()
    os.chdir(cwd)
    run_import_and_partition(ROOT / "examples/models/cnn.onnx", SEEDS[1][2])  # warm up

    @fuzz_settings(DEFAULT_EXAMPLES)
    @given(onnx_cases())
    def one_case(drawn: tuple[str, bytes, dict[str, list[int]], list[str]]) -> None:
        seed, raw, shapes, mutations = drawn
        for leftover in (case, cwd / ".buildgen"):
            if leftover.exists():
                shutil.rmtree(leftover)
        (case / "models").mkdir(parents=True)
        source = case / "models" / "model.onnx"
        source.write_bytes(raw)
        start = time.monotonic()
        outcome, message = "success", ""
        try:
            with hang_guard():
                run_import_and_partition(source, shapes)
        except CaseTimeout:
            raise AssertionError(f"hang on {seed} after {mutations}") from None
        except BuildgenError as exc:
            outcome, message = "clean error", exc.render().replace(str(source), "model.onnx")
            assert "internal error" not in message, message
        except Exception as exc:
            raise AssertionError(
                f"internal error (not a BuildgenError) on {seed} after {mutations}: "
                f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}") from exc
        seconds = time.monotonic() - start
        assert seconds < PER_CASE_SECONDS, f"{seed} after {mutations}: {seconds:.1f} s"
        assert sorted(os.listdir(base)) == ["case", "cwd"], sorted(os.listdir(base))
        assert not os.listdir(cwd), f"written into the working directory: {os.listdir(cwd)}"
        assert listing(case) == {"models", os.path.join("models", "model.onnx")}, \
            listing(case)
        assert not crash_reports(base)
        tally.record(outcome, seconds, message)
        for what in mutations:
            tally.note(what)

    try:
        one_case()
    finally:
        os.chdir(before)
        with capsys.disabled():
            print("\n" + tally.summary())
    assert not list(ROOT.glob(".hypothesis"))
