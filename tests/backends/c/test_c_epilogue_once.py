"""A node joins one epilogue only: in `MatMul(a[1,K], W1) + MatMul(b[1,K], W2)` each [1,N]
result looks like a bias of the other, and both anchors used to absorb the Add (codegen
then failed with a KeyError). Built through `buildgen build` for the c backend and the
CPU libraries, with MatMul, Gemm and Conv anchors, and compared with onnxruntime."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "importer"))
from onnx_builders import F32, build_models, library_outputs, make_model, run_ort  # noqa: E402

from buildgen.backends.c.fusion import plan_units  # noqa: E402
from buildgen.backends.c.kernel import LowerContext  # noqa: E402

RNG = np.random.default_rng(7)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _two_anchors(op: str, x: list[int], w1: np.ndarray, w2: np.ndarray, y: list[int],
                 relu: bool, **attrs: object) -> onnx.ModelProto:
    nodes = [
        helper.make_node(op, ["a", "w1"], ["p"], name=f"{op}_a", **attrs),
        helper.make_node(op, ["b", "w2"], ["q"], name=f"{op}_b", **attrs),
        helper.make_node("Add", ["p", "q"], ["s" if relu else "y"], name="sum"),
    ]
    if relu:
        nodes.append(helper.make_node("Relu", ["s"], ["y"], name="relu"))
    inputs = [helper.make_tensor_value_info(n, F32, x) for n in ("a", "b")]
    output = helper.make_tensor_value_info("y", F32, y)
    return make_model(nodes, inputs, [output], {"w1": w1, "w2": w2}, name=op.lower())


MODELS = {
    "matmul": (_two_anchors("MatMul", [1, 16], _rand(16, 8), _rand(16, 8), [1, 8], True), [1, 16]),
    "gemm": (_two_anchors("Gemm", [1, 16], _rand(8, 16), _rand(8, 16), [1, 8], False, transB=1),
             [1, 16]),
    "conv": (_two_anchors("Conv", [1, 3, 4, 4], _rand(6, 3, 4, 4), _rand(6, 3, 4, 4),
                          [1, 6, 1, 1], True), [1, 3, 4, 4]),
}
CPU_LIBRARIES = {"ob": {"kind": "openblas", "threads": 1}, "dn": {"kind": "onednn", "threads": 1}}


def _library_installed(name: str) -> bool:
    import importlib.util

    from buildgen.backends.libraries import pip_onednn_prefix
    from buildgen.errors import BuildgenError

    if name == "ob":
        return importlib.util.find_spec("scipy_openblas32") is not None
    try:
        pip_onednn_prefix()
    except BuildgenError:
        return False
    return True


def _available_targets() -> tuple[list[str], dict[str, dict[str, object]]]:
    """c, and a composite of c and each CPU library that is installed."""
    names = [name for name in CPU_LIBRARIES if _library_installed(name)]
    composites = {
        name: {"kind": "composite", "host": {"kind": "c"}, "accelerators": [CPU_LIBRARIES[name]]}
        for name in names
    }
    return ["c", *names], composites


# The c backend builds every model; the CPU libraries (whose grouping never had the flaw)
# the MatMul case, so the build stays short.
BuiltTargets = dict[str, list[str]]


@pytest.fixture(scope="module")
def built(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuiltTargets]:
    pytest.importorskip("onnxruntime")
    folder = tmp_path_factory.mktemp("epilogue_once")
    libraries, composites = _available_targets()
    targets = {name: libraries if name == "matmul" else ["c"] for name in MODELS}
    models = {name: (model, {"a": x, "b": x}) for name, (model, x) in MODELS.items()}
    done = build_models(folder, models, targets, composites)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return folder, targets


@pytest.mark.parametrize("name", sorted(MODELS))
def test_sum_of_two_anchors_matches_onnxruntime(
    built: tuple[Path, BuiltTargets], name: str
) -> None:
    folder, targets = built
    model, x = MODELS[name]
    feeds = {"a": _rand(*x), "b": _rand(*x)}
    (expected,) = run_ort(model, feeds)
    for target in targets[name]:
        ours = library_outputs(folder, name, target, feeds)["y"]
        np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-5, err_msg=target)


def test_the_add_joins_the_first_anchor_only(tmp_path: Path) -> None:
    from onnx_builders import save

    from buildgen.importer import import_model

    model, x = MODELS["matmul"]
    graph = import_model(save(model, tmp_path), {"a": x, "b": x}).graph
    units = plan_units(LowerContext(graph, None), list(graph.nodes), frozenset(["y"]))
    placed = [n.name for u in units for n in u.nodes]
    assert sorted(placed) == sorted(n.name for n in graph.nodes)  # each node in one unit
    assert [[n.name for n in u.nodes] for u in units] == [
        ["MatMul_b"], ["MatMul_a", "sum", "relu"]
    ]
