"""Whole small models through the real importer: golden generated sources, numerics,
regions interleaved with another backend's, and the create-time workspace guard.

Regenerate the golden files with BUILDGEN_UPDATE_GOLDEN=1 after an intended change.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from c_cases import ATOL, RTOL, ort_outputs
from c_harness import compile_module, run_partition, weights_buffer
from c_models import attention, conv_block, mlp

from buildgen.backends.c import CBackend
from buildgen.ir import Graph
from buildgen.partition.boundaries import region_io
from buildgen.partition.model import Partition, Region

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "c"
MODELS: dict[str, Callable[[], tuple[onnx.ModelProto, dict[str, np.ndarray]]]] = {
    "mlp": mlp,
    "conv_block": conv_block,
    "attention": attention,
}


def _import(
    name: str, tmp_path: Path
) -> tuple[onnx.ModelProto, dict[str, np.ndarray], Graph, dict]:
    from buildgen.importer import import_model
    from buildgen.ir.serialize import load_weights

    model, feeds = MODELS[name]()
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    result = import_model(path, {k: v.shape for k, v in feeds.items()}, model_name=name)
    return model, feeds, result.graph, load_weights(result.graph, result.weights_blob)


def _single_region(graph: Graph) -> Partition:
    return Partition(
        "m", "cpu", "", (Region("r0", "c", tuple(n.name for n in graph.nodes), "host"),)
    )


@pytest.mark.parametrize("name", sorted(MODELS))
def test_golden_source_and_numerics(c_toolchain: None, name: str, tmp_path: Path) -> None:
    model, feeds, graph, weights = _import(name, tmp_path)
    partition = _single_region(graph)
    source = CBackend().generate(name, graph, partition, {}, weights=weights)
    golden = GOLDEN / f"{name}.c"
    if os.environ.get("BUILDGEN_UPDATE_GOLDEN") == "1":
        golden.write_text(source.text)
    assert golden.is_file(), f"{golden} missing: run with BUILDGEN_UPDATE_GOLDEN=1"
    assert source.text == golden.read_text(), f"{name}: generated C differs from {golden}"

    module = compile_module(source, name, ["r0"], tmp_path / "build")
    actual = run_partition(module, graph, partition, weights, feeds)
    expected = ort_outputs(model, feeds)
    for out in graph.output_names:
        np.testing.assert_allclose(actual[out], expected[out], rtol=RTOL, atol=ATOL)


def test_mlp_is_two_fused_gemms_and_a_softmax(tmp_path: Path) -> None:
    _, _, graph, weights = _import("mlp", tmp_path)
    text = CBackend().generate("mlp", graph, _single_region(graph), {}, weights=weights).text
    assert "static void k0_matmul_add_relu(" in text
    assert "static void k1_matmul_add(" in text
    assert "static void k2_softmax(" in text and "k3_" not in text


def test_c_regions_interleaved_with_another_backend(c_toolchain: None, tmp_path: Path) -> None:
    """r0 and r2 run on c, r1 (the first Relu) elsewhere: the module defines exactly its own
    regions, and the tensors crossing the boundaries carry the right values."""
    model, feeds, graph, weights = _import("conv_block", tmp_path)
    names = [n.name for n in graph.nodes]
    relu = next(i for i, n in enumerate(graph.nodes) if n.op == "Relu")
    partition = Partition(
        "m",
        "cpu",
        "",
        (
            Region("r0", "c", tuple(names[:relu])),
            Region("r1", "other", (names[relu],)),
            Region("r2", "c", tuple(names[relu + 1 :])),
        ),
    )
    source = CBackend().generate("conv_block", graph, partition, {}, weights=weights)
    assert "int BG_EXPORT(conv_block__c_r0)(" in source.text
    assert "int BG_EXPORT(conv_block__c_r2)(" in source.text
    assert "conv_block__c_r1" not in source.text
    module = compile_module(source, "conv_block", ["r0", "r2"], tmp_path / "build")

    blob = weights_buffer(graph, weights)
    values = dict(feeds)
    for region in partition.regions:
        io = region_io(graph, region)
        if region.target != "c":  # the other backend's Relu, computed here
            values[io.outputs[0]] = np.maximum(values[io.inputs[0]], 0)
            continue
        outs = [np.empty(graph.type_of(t).shape, np.float32) for t in io.outputs]
        module.run_region(region.id, blob, [values[t] for t in io.inputs], outs)
        values.update(zip(io.outputs, outs, strict=True))
    expected = ort_outputs(model, feeds)
    np.testing.assert_allclose(values["y"], expected["y"], rtol=RTOL, atol=ATOL)


def test_create_fails_when_a_planned_workspace_is_too_small(
    c_toolchain: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If workspace.py and bg_kernels.h ever disagree, create() says so instead of letting a
    kernel write past its workspace."""
    import buildgen.backends.c.ops.matmul as matmul

    monkeypatch.setattr(matmul, "sgemm_workspace_bytes", lambda m, n, k: 64)
    _, feeds, graph, weights = _import("mlp", tmp_path)
    partition = _single_region(graph)
    source = CBackend().generate("mlp", graph, partition, {}, weights=weights)
    module = compile_module(source, "mlp", ["r0"], tmp_path / "build")
    with pytest.raises(
        RuntimeError, match="k0_matmul_add_relu needs more workspace than the 64 bytes"
    ):
        run_partition(module, graph, partition, weights, feeds)


def test_scratch_bytes_symbol_matches_plan(c_toolchain: None, tmp_path: Path) -> None:
    _, _, graph, weights = _import("conv_block", tmp_path)
    partition = _single_region(graph)
    summary = CBackend().plan_summary(graph, partition, {}, weights)
    source = CBackend().generate("conv_block", graph, partition, {}, weights=weights)
    module = compile_module(source, "conv_block", ["r0"], tmp_path / "build")
    assert module.scratch_bytes == summary.scratch_bytes
    assert 0 < summary.scratch_bytes < summary.unshared_bytes


def test_generation_does_not_depend_on_hash_seed(tmp_path: Path) -> None:
    """Set iteration order changes with PYTHONHASHSEED; the generated bytes must not."""
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path\n"
        "from test_c_models import _import, _single_region\n"
        "from buildgen.backends.c import CBackend\n"
        "_, _, g, w = _import('attention', Path(sys.argv[2]))\n"
        "sys.stdout.write(CBackend().generate('m', g, _single_region(g), {}, weights=w).text)\n"
    )
    texts = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script, str(Path(__file__).parent), str(tmp_path)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parents[3],
        )
        texts.append(out.stdout)
    assert texts[0] == texts[1] and "int BG_EXPORT(m__c_r0)(" in texts[0]
