"""Build models with a composite CPU target through a manifest and `buildgen build`, then
check each library against onnxruntime and see which ops the library backend ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import yaml
from cpulib_cases import Case

from buildgen import runtime

REPO = Path(__file__).resolve().parents[3]
TARGET = "lib"
RTOL, ATOL = 1e-3, 1e-4


def composite(kind: str, **attrs: object) -> dict[str, object]:
    """c (x86-64-v3 when the machine has it) plus one accelerator."""
    return {"kind": "composite", "host": {"kind": "c", "opt_level": 2},
            "accelerators": [{"kind": kind, **attrs}]}


def write_manifest(
    folder: Path,
    models: Mapping[str, tuple[onnx.ModelProto | Path, Mapping[str, Sequence[int]]]],
    target: Mapping[str, object],
) -> Path:
    """BUILD.yaml in `folder` building each (model, input shapes) for `target`."""
    entries = {}
    for name, (model, inputs) in sorted(models.items()):
        if isinstance(model, onnx.ModelProto):
            source = folder / f"{name}.onnx"
            onnx.save(model, source)
        else:
            source = model
        entries[name] = {"source": str(source), "inputs": {k: list(v) for k, v in inputs.items()},
                         "targets": [TARGET]}
    manifest = folder / "BUILD.yaml"
    text = yaml.safe_dump({"buildgen": 1, "targets": {TARGET: dict(target)}, "models": entries},
                          sort_keys=True)
    manifest.write_text(text)
    return manifest


def run_build(manifest: Path, build_dir: Path, check: bool = True
              ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "buildgen", "build", "--manifest", str(manifest),
           "--build-dir", str(build_dir)]
    done = subprocess.run(cmd, cwd=manifest.parent, env=env, capture_output=True, text=True)
    if check and done.returncode != 0:
        output = f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        raise AssertionError(f"buildgen build failed:\n{output}")
    return done


def ops_on(build_dir: Path, model: str, kind: str) -> set[str]:
    """The ops of every node the partition gave to `kind`."""
    partition = json.loads((build_dir / model / TARGET / "partition.json").read_text())
    graph = json.loads((build_dir / model / "graph.json").read_text())
    op_of = {node["name"]: node["op"] for node in graph["nodes"]}
    return {op_of[n] for r in partition["regions"] if r["target"] == kind for n in r["nodes"]}


def library(build_dir: Path, model: str) -> Path:
    return build_dir / model / TARGET / f"lib{model}.so"


def assert_reported_arena_is_the_librarys(lib_path: Path, model: str) -> None:
    """report.json's arena is what the library allocates (<model>_arena_bytes), asked in a
    fresh process: this one may hold an earlier build of the library at the same path."""
    code = ("import ctypes, sys; f = getattr(ctypes.CDLL(sys.argv[1]), sys.argv[2]);"
            "f.restype = ctypes.c_size_t; print(f())")
    done = subprocess.run([sys.executable, "-c", code, str(lib_path), f"{model}_arena_bytes"],
                          capture_output=True, text=True, check=True)
    report = json.loads((lib_path.parent / "report.json").read_text())
    assert report["arena_bytes"] == int(done.stdout), (report["arena_bytes"], done.stdout)


def source(build_dir: Path, model: str, kind: str) -> str:
    return (build_dir / model / TARGET / "src" / f"{kind}.c").read_text()


def assert_matches_onnxruntime(lib_path: Path, onnx_path: Path, seed: int = 0) -> None:
    """Random inputs through the library and onnxruntime (one thread) agree; a second run on
    the same instance gives the same bytes (no state leaks between runs)."""
    import onnxruntime as ort

    compiled = runtime.load(lib_path)
    rng = np.random.default_rng(seed)
    feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in compiled.inputs}
    ours = compiled.run(feeds)
    again = compiled.run(feeds)
    compiled.close()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    theirs = dict(zip(names, session.run(None, feeds), strict=True))
    for name, value in ours.items():
        np.testing.assert_allclose(value, theirs[name], rtol=RTOL, atol=ATOL, err_msg=name)
        np.testing.assert_array_equal(again[name], value, err_msg=f"{name} (second run)")


def build_cases(folder: Path, cases: Sequence[Case], target: Mapping[str, object]) -> Path:
    """Build every case into folder/build, what the build printed into folder/build.log;
    returns the folder."""
    models = {c.name: (c.make(), c.inputs) for c in cases}
    done = run_build(write_manifest(folder, models, target), folder / "build")
    (folder / "build.log").write_text(done.stdout + done.stderr)
    return folder


def check_case(folder: Path, case: Case, kind: str) -> None:
    """The case's ops ran on `kind`, and its library agrees with onnxruntime."""
    build_dir = folder / "build"
    assert set(case.on_backend) <= ops_on(build_dir, case.name, kind)
    assert_matches_onnxruntime(library(build_dir, case.name), folder / f"{case.name}.onnx")


def imported(model: onnx.ModelProto, inputs: Mapping[str, Sequence[int]], folder: Path):
    """(graph IR, weights by name) of `model` at `inputs`, through buildgen's importer."""
    from buildgen.importer import import_model
    from buildgen.ir.serialize import load_weights

    path = folder / f"{model.graph.name}.onnx"
    onnx.save(model, path)
    result = import_model(path, {k: tuple(v) for k, v in inputs.items()})
    return result.graph, load_weights(result.graph, result.weights_blob)


def one_region(graph, kind: str, nodes: Sequence[str] | None = None):  # -> Partition
    """A partition putting `nodes` (default: all) in one region of `kind`, the rest on c."""
    from buildgen.partition.model import Partition, Region

    chosen = [n.name for n in graph.nodes] if nodes is None else list(nodes)
    regions, current, members = [], None, []
    for node in graph.nodes:
        target = kind if node.name in chosen else "c"
        if target != current and members:
            regions.append(Region(f"r{len(regions)}", current, tuple(members)))
            members = []
        current = target
        members.append(node.name)
    regions.append(Region(f"r{len(regions)}", current, tuple(members)))
    return Partition("m", "lib", "digest", tuple(regions))


def example_models() -> dict[str, tuple[Path, dict[str, list[int]]]]:
    """The committed examples (root BUILD.yaml): name -> (ONNX file, input shapes)."""
    data = yaml.safe_load((REPO / "BUILD.yaml").read_text())
    return {name: (REPO / m["source"], m["inputs"]) for name, m in data["models"].items()}


def build_examples(folder: Path, target: Mapping[str, object]) -> Path:
    run_build(write_manifest(folder, example_models(), target), folder / "build")
    return folder / "build"


def explain(folder: Path, model: str) -> str:
    """`buildgen explain MODEL` on the manifest in `folder`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "buildgen", "explain", model, "--manifest",
           str(folder / "BUILD.yaml"), "--build-dir", str(folder / "build")]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
