"""Each op family of the cuda backend, generated for the device and run on the CPU
stand-in for CUDA (emulate.py), agrees with onnxruntime. No nvcc: the backend's module and
the executor are generated in-process, so every case costs one g++ compile."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from cuda_helpers import TARGET
from emulate import emulated_library
from op_cases import CASES, OpCase

from buildgen import runtime
from buildgen.backends.cuda import CudaBackend
from buildgen.codegen.executor import generate_executor
from buildgen.importer import import_model
from buildgen.ir.serialize import load_weights
from buildgen.partition.pipeline import make_partition
from buildgen.targets import parse_target

pytestmark = pytest.mark.slow


def _emulated(case: OpCase, model: onnx.ModelProto, folder: Path) -> runtime.CompiledModel:
    source = folder / "case.onnx"
    onnx.save(model, source)
    shapes = {i.name: tuple(d.dim_value for d in i.type.tensor_type.shape.dim)
              for i in model.graph.input}
    result = import_model(source, shapes)
    graph = result.graph
    partition = make_partition(graph, parse_target(TARGET, "gpu"), case.name, "d")
    assert [r.target for r in partition.regions] == ["cuda"], partition.regions
    name = case.name
    weights_bin = folder / "weights.bin"
    weights_bin.write_bytes(result.weights_blob)
    module = CudaBackend().generate(name, graph, partition, {},
                                    load_weights(graph, result.weights_blob))
    sources = generate_executor(name, graph, partition, str(weights_bin),
                                len(result.weights_blob))
    (folder / "cuda.cu").write_text(module.text)
    (folder / "model.c").write_text(sources.source_c)
    (folder / f"{name}.h").write_text(sources.header)
    (folder / "weights.S").write_text(sources.weights_asm)
    weights_obj = folder / "weights.o"
    subprocess.run(["cc", "-c", str(folder / "weights.S"), "-o", str(weights_obj)], check=True)
    lib = emulated_library(folder, folder, [weights_obj], name, folder / "emu")
    return runtime.load(lib, name)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_matches_onnxruntime_on_the_emulated_device(case: OpCase, tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    model = case.make()
    compiled = _emulated(case, model, tmp_path)
    rng = np.random.default_rng(3)
    feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in compiled.inputs}
    ours = compiled.run(feeds)
    compiled.close()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    for name, reference in zip(names, session.run(None, feeds), strict=True):
        np.testing.assert_allclose(ours[name], reference, rtol=1e-4, atol=1e-5, err_msg=name)
