"""Op test cases for the c backend: small ONNX graphs checked against onnxruntime.

Many cases share one compiled module: `run_cases` merges them into one ONNX model (every
name prefixed by its case), imports it with the real importer, gives each case its own c
region, generates and compiles the module once, runs each region, and runs onnxruntime
on the merged model for the expected values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from c_harness import compile_module, run_partition
from onnx import helper, numpy_helper

from buildgen.backends.c import CBackend
from buildgen.ir import Graph
from buildgen.partition.model import Partition, Region

RTOL, ATOL = 1e-4, 1e-5


@dataclass
class Case:
    name: str
    nodes: list[onnx.NodeProto]
    feeds: dict[str, np.ndarray]  # run-time inputs and their test values
    outputs: list[str]
    weights: dict[str, np.ndarray] = field(default_factory=dict)  # initializers


def node(op: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: object) -> onnx.NodeProto:
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


def rand(rng: np.random.Generator, *shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, size=shape).astype(np.float32)


def _prefixed(case: Case, name: str) -> str:
    return f"{case.name}.{name}" if name else ""


def merged_model(cases: Sequence[Case], opset: int) -> onnx.ModelProto:
    nodes, inputs, inits, outputs = [], [], [], []
    for case in cases:
        for k, n in enumerate(case.nodes):
            copy = onnx.NodeProto()
            copy.CopyFrom(n)
            copy.name = f"{case.name}.{n.op_type}_{k}"
            copy.input[:] = [_prefixed(case, t) for t in n.input]
            copy.output[:] = [_prefixed(case, t) for t in n.output]
            nodes.append(copy)
        for name, value in case.feeds.items():
            elem = helper.np_dtype_to_tensor_dtype(value.dtype)
            inputs.append(helper.make_tensor_value_info(_prefixed(case, name), elem, value.shape))
        for name, value in case.weights.items():
            inits.append(numpy_helper.from_array(value, _prefixed(case, name)))
        outputs += [helper.make_empty_tensor_value_info(_prefixed(case, o)) for o in case.outputs]
    graph = helper.make_graph(nodes, "cases", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def ort_outputs(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds)), strict=True))


def case_partition(graph: Graph, cases: Sequence[Case]) -> Partition:
    regions = []
    for case in cases:
        members = tuple(n.name for n in graph.nodes if n.name.startswith(case.name + "."))
        regions.append(Region(f"r{len(regions)}", "c", members, "test"))
    return Partition("cases", "cpu", "", tuple(regions))


@dataclass
class CaseResults:
    expected: dict[str, np.ndarray]
    actual: dict[str, np.ndarray]
    source: str

    def check(self, case: Case) -> None:
        for out in case.outputs:
            name = _prefixed(case, out)
            want, got = self.expected[name], self.actual[name]
            assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
            assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
            if want.dtype.kind == "f":
                np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=name)
            else:
                np.testing.assert_array_equal(got, want, err_msg=name)


def run_cases(
    cases: Sequence[Case], opset: int, workdir: Path, backend: CBackend | None = None
) -> CaseResults:
    model = merged_model(cases, opset)
    feeds = {_prefixed(c, k): v for c in cases for k, v in c.feeds.items()}
    actual, source = run_c(model, feeds, cases, workdir, backend)
    return CaseResults(ort_outputs(model, feeds), actual, source)


def run_c(
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    cases: Sequence[Case],
    workdir: Path,
    backend: CBackend | None = None,
) -> tuple[dict[str, np.ndarray], str]:
    """The c backend's outputs of the merged `model` (by prefixed name) and its source."""
    from buildgen.importer import import_model
    from buildgen.ir.serialize import load_weights

    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "cases.onnx"
    onnx.save(model, path)
    result = import_model(path, {k: v.shape for k, v in feeds.items()}, model_name="cases")
    graph = result.graph
    weights = load_weights(graph, result.weights_blob)
    partition = case_partition(graph, cases)
    source = (backend or CBackend()).generate("cases", graph, partition, {}, weights=weights)
    module = compile_module(source, "cases", [r.id for r in partition.regions], workdir)
    return run_partition(module, graph, partition, weights, feeds), source.text


def run_case_without_onnxruntime(case: Case, opset: int, workdir: Path) -> dict[str, np.ndarray]:
    """The c backend's outputs of one case, by unprefixed name, for what onnxruntime
    refuses to run (the test then compares with the ONNX reference)."""
    feeds = {_prefixed(case, k): v for k, v in case.feeds.items()}
    actual, _ = run_c(merged_model([case], opset), feeds, [case], workdir)
    return {out: actual[_prefixed(case, out)] for out in case.outputs}
