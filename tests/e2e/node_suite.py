"""The ONNX backend node tests that buildgen's op set covers, generated at test time.

onnx >= 1.23 no longer ships onnx/backend/test/data/node/, so the data is produced from
the case generators the wheel still ships (the ones onnx's own `backend-test-tools
generate-data` uses), and written in the same layout: <name>/model.onnx and
<name>/test_data_set_0/{input,output}_<j>.pb.

A test qualifies when every node is a default-domain op from SUPPORTED_OPS, every graph
output and every intermediate is float32 (int64 allowed for intermediates, which is what
Shape/Gather reshape logic computes), and every graph input is float32, an int64
shape/axes/indices operand (SHAPE_OPERANDS, INDEX_OPERANDS), an int32 data operand
(INT32_OPERANDS) or a bool condition (BOOL_OPERANDS). Bool results are taken from the
ops in BOOL_RESULT_OPS (IsNaN, IsInf, comparisons, logic), int64 graph outputs from the
ops in INT64_RESULT_OPS (ArgMax, ArgMin, TopK, Shape, Size).

Node tests feed *everything* as graph inputs, including the shape and axes operands that
real exporters emit as initializers. buildgen fixes shapes at build time, so for the
build each int64 shape/axes input is turned into an initializer holding the test's value
(model.build.onnx); float inputs (weights included) and Gather indices stay run-time
inputs of the compiled library.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnx

# fmt: off
SUPPORTED_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Neg", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Gelu",
    "Exp", "Log", "Sqrt", "Pow", "Clip", "MatMul", "Gemm", "Conv", "ConvTranspose", "MaxPool",
    "AveragePool", "GlobalAveragePool", "BatchNormalization", "LayerNormalization", "Softmax",
    "ReduceMean", "ReduceSum", "Reshape", "Flatten", "Transpose", "Concat", "Split", "Slice",
    "Gather", "Squeeze", "Unsqueeze", "Identity", "Constant", "Shape", "Cast",
    "Pad", "LRN", "IsNaN", "IsInf", "GatherElements", "ScatterElements", "ScatterND", "Scatter",
    "GatherND",
    "LSTM", "GRU", "RNN",
    "Resize", "Upsample",
    "Abs", "Ceil", "Floor", "Round", "Sign", "Reciprocal", "Sin", "Cos", "Elu", "Selu", "Celu",
    "Softplus", "Softsign", "Mish", "HardSigmoid", "HardSwish", "ThresholdedRelu", "PRelu",
    "Max", "Min", "Mean", "Sum", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
    "And", "Or", "Xor", "Not", "Where", "Dropout", "Expand", "Tile", "Size", "ArgMax", "ArgMin",
    "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceSumSquare", "GlobalMaxPool", "InstanceNormalization",
    "LogSoftmax", "Mod", "CastLike", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
    "Acosh", "Atanh", "Swish", "Shrink", "Hardmax", "RMSNormalization", "LpNormalization",
    "DepthToSpace", "SpaceToDepth", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss",
    "TopK", "LpPool", "GroupNormalization", "ReverseSequence", "CenterCropPad", "Det",
    "EyeLike",
    # folded to constants by the importer once the shapes are fixed
    "ConstantOfShape", "Range",
})
# fmt: on

# int64 operands that determine output shapes: folded into initializers for the build.
SHAPE_OPERANDS: dict[str, frozenset[int]] = {
    "Reshape": frozenset({1}),
    "Slice": frozenset({1, 2, 3, 4}),
    "Squeeze": frozenset({1}),
    "Unsqueeze": frozenset({1}),
    "Split": frozenset({1}),
    "ReduceMean": frozenset({1}),
    "ReduceSum": frozenset({1}),
    **{op: frozenset({1}) for op in (
        "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
        "ReduceLogSumExp", "ReduceSumSquare", "Expand", "Tile", "TopK",
    )},
    "ConstantOfShape": frozenset({0}),
    "CenterCropPad": frozenset({1}),
    "Pad": frozenset({1, 3}),
    # roi, scales (float) and sizes; Resize-10 and Upsample-9 take scales as input 1
    "Resize": frozenset({1, 2, 3}),
    "Upsample": frozenset({1}),
}
# int64 operands that are data (they do not change shapes): stay run-time inputs.
INDEX_OPERANDS: dict[str, frozenset[int]] = {
    "Gather": frozenset({1}),
    "GatherElements": frozenset({1}),
    "GatherND": frozenset({1}),
    "ScatterElements": frozenset({1}),
    "ScatterND": frozenset({1}),
    "Scatter": frozenset({1}),
    "NegativeLogLikelihoodLoss": frozenset({1}),
    "SoftmaxCrossEntropyLoss": frozenset({1}),
    "Unsqueeze": frozenset({0}),  # class indices on their way to GatherElements
    "ReverseSequence": frozenset({1}),
    "Pow": frozenset({1}),  # an integer exponent
}
# Ops whose bool results (graph outputs or intermediates) the suite takes.
BOOL_RESULT_OPS = frozenset({
    "IsNaN", "IsInf", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
    "Xor", "Not",
})
# bool operands that are data: stay run-time inputs.
BOOL_OPERANDS: dict[str, frozenset[int]] = {"Where": frozenset({0})}
# Ops whose int64 results (graph outputs) the suite takes.
INT64_RESULT_OPS = frozenset({"ArgMax", "ArgMin", "TopK", "Shape", "Size"})
# int32 operands that are data: stay run-time inputs (the recurrent ops' sequence_lens).
INT32_OPERANDS: dict[str, frozenset[int]] = {
    "LSTM": frozenset({4}),
    "GRU": frozenset({4}),
    "RNN": frozenset({4}),
    "Pow": frozenset({1}),
    "EyeLike": frozenset({0}),  # only its shape is read
}


@dataclass(frozen=True)
class NodeCase:
    """One qualifying test, written under `root`."""

    name: str  # the onnx test name, e.g. "test_conv_with_strides_padding"
    root: Path
    ops: tuple[str, ...]  # sorted distinct op types
    rtol: float
    atol: float

    @property
    def model_name(self) -> str:
        """A C identifier for the manifest: t_<name without 'test_'>."""
        return "t_" + re.sub(r"[^A-Za-z0-9_]", "_", self.name.removeprefix("test_"))

    @property
    def model_path(self) -> Path:
        return self.root / "model.onnx"

    @property
    def build_model_path(self) -> Path:
        return self.root / "model.build.onnx"

    def data(self, kind: str) -> list[np.ndarray]:
        """The inputs ("input") or reference outputs ("output") of test_data_set_0."""
        import onnx
        from onnx import numpy_helper

        data_dir = self.root / "test_data_set_0"
        count = len(list(data_dir.glob(f"{kind}_*.pb")))
        arrays = []
        for j in range(count):
            tensor = onnx.TensorProto()
            tensor.ParseFromString((data_dir / f"{kind}_{j}.pb").read_bytes())
            arrays.append(numpy_helper.to_array(tensor))
        return arrays


@dataclass(frozen=True)
class Suite:
    cases: tuple[NodeCase, ...]
    total: int  # every node test the onnx wheel generates
    excluded_ops: tuple[tuple[str, tuple[str, ...]], ...]  # (test, ops outside the list)
    excluded_dtype: tuple[tuple[str, str], ...]  # (test, why)

    def unsupported_op_counts(self) -> Counter[str]:
        return Counter(op for _, ops in self.excluded_ops for op in ops)


def _elem_type(value_info: onnx.ValueInfoProto) -> int | None:
    if not value_info.type.HasField("tensor_type"):
        return None
    return value_info.type.tensor_type.elem_type


def _bool_result(value: onnx.ValueInfoProto, bool_results: set[str]) -> bool:
    import onnx

    return _elem_type(value) == onnx.TensorProto.BOOL and value.name in bool_results


def _dtype_problem(model: onnx.ModelProto) -> str | None:
    """None if the test's tensors have the dtypes buildgen's node suite covers, else why not."""
    import onnx

    f32, i64, i32 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64, onnx.TensorProto.INT32
    graph = model.graph
    int64_operands = {
        op: SHAPE_OPERANDS.get(op, frozenset()) | INDEX_OPERANDS.get(op, frozenset())
        for op in {*SHAPE_OPERANDS, *INDEX_OPERANDS}
    }
    for value in graph.input:
        elem = _elem_type(value)
        if elem == f32:
            continue
        uses = [
            (n.op_type, i) for n in graph.node for i, x in enumerate(n.input) if x == value.name
        ]
        if elem == i64 and uses and all(i in int64_operands.get(op, ()) for op, i in uses):
            continue
        if elem == i32 and uses and all(i in INT32_OPERANDS.get(op, ()) for op, i in uses):
            continue
        if elem == onnx.TensorProto.BOOL and uses and all(
            i in BOOL_OPERANDS.get(op, ()) for op, i in uses
        ):
            continue
        return f"input {value.name!r} has elem_type {elem} used as {uses}"
    bool_results = {x for n in graph.node if n.op_type in BOOL_RESULT_OPS for x in n.output}
    int64_results = {x for n in graph.node if n.op_type in INT64_RESULT_OPS for x in n.output}
    for value in graph.output:
        if _elem_type(value) == i64 and value.name in int64_results:
            continue
        if _elem_type(value) != f32 and not _bool_result(value, bool_results):
            return f"output {value.name!r} has elem_type {_elem_type(value)}"
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    for value in inferred.graph.value_info:
        if _elem_type(value) not in (f32, i64) and not _bool_result(value, bool_results):
            return f"intermediate {value.name!r} has elem_type {_elem_type(value)}"
    return None


def _build_model(model: onnx.ModelProto, inputs: Sequence[np.ndarray]) -> onnx.ModelProto:
    """A copy where each int64 shape/axes graph input is an initializer with the test's value."""
    from onnx import numpy_helper

    built = type(model)()
    built.CopyFrom(model)
    graph = built.graph
    shape_inputs = {
        x
        for n in graph.node
        for i, x in enumerate(n.input)
        if i in SHAPE_OPERANDS.get(n.op_type, ()) and x
    }
    kept = []
    for value, array in zip(model.graph.input, inputs, strict=True):
        if value.name in shape_inputs:
            graph.initializer.append(numpy_helper.from_array(np.asarray(array), value.name))
        else:
            kept.append(value)
    del graph.input[:]
    graph.input.extend(kept)
    return built


def _write_case(case_root: Path, model: onnx.ModelProto, data_set: tuple) -> None:
    """The layout of onnx's `generate-data` (tensor inputs/outputs only, all we select)."""
    from onnx import numpy_helper

    inputs, outputs = data_set
    data_dir = case_root / "test_data_set_0"
    data_dir.mkdir(parents=True, exist_ok=True)
    (case_root / "model.onnx").write_bytes(model.SerializeToString())
    for kind, arrays, infos in (
        ("input", inputs, model.graph.input),
        ("output", outputs, model.graph.output),
    ):
        for j, (array, info) in enumerate(zip(arrays, infos, strict=True)):
            proto = numpy_helper.from_array(np.asarray(array), info.name)
            (data_dir / f"{kind}_{j}.pb").write_bytes(proto.SerializeToString())
    (case_root / "model.build.onnx").write_bytes(_build_model(model, inputs).SerializeToString())


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # The generators compute their references in numpy and deliberately hit overflow,
    # log(0) and 0/0 for the edge-case tests; those warnings are expected noise.
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def generate_suite(out_dir: Path) -> Suite:
    """Generate every node test, select the qualifying ones and write them under out_dir."""
    from onnx.backend.test.case.node import collect_testcases

    with _quiet():
        all_cases = collect_testcases()
    cases: list[NodeCase] = []
    excluded_ops: list[tuple[str, tuple[str, ...]]] = []
    excluded_dtype: list[tuple[str, str]] = []
    for case in sorted(all_cases, key=lambda c: c.name):
        assert case.model is not None and case.data_sets  # node cases always carry both
        nodes = case.model.graph.node
        outside = sorted(
            {n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}" for n in nodes}
            - SUPPORTED_OPS
        )
        if outside:
            excluded_ops.append((case.name, tuple(outside)))
            continue
        problem = _dtype_problem(case.model)
        if problem:
            excluded_dtype.append((case.name, problem))
            continue
        root = out_dir / case.name
        _write_case(root, case.model, case.data_sets[0])
        ops = tuple(sorted({n.op_type for n in nodes}))
        cases.append(NodeCase(case.name, root, ops, case.rtol, case.atol))
    return Suite(tuple(cases), len(all_cases), tuple(excluded_ops), tuple(excluded_dtype))
