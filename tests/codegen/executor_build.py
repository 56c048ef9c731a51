"""Build a model library the way the build graph does, without ninja: backend module,
executor, header and weights object, compiled and linked with the system C compiler."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from buildgen.backends.registry import get_backend
from buildgen.codegen.executor import ExecutorSources, generate_executor
from buildgen.importer import ImportResult
from buildgen.ir.serialize import load_weights
from buildgen.partition.model import Partition
from buildgen.resources import include_dir

CC = shutil.which("cc")


def build_library(
    root: Path, model: str, result: ImportResult, partition: Partition
) -> ExecutorSources:
    """lib<model>.so in `root`, every region on the c backend."""
    graph = result.graph
    (root / "weights.bin").write_bytes(result.weights_blob)
    weights = load_weights(graph, root / "weights.bin")
    module = get_backend("c").generate(model, graph, partition, {}, weights)
    sources = generate_executor(model, graph, partition, "weights.bin", len(result.weights_blob))
    (root / "c.c").write_text(module.text)
    (root / "model.c").write_text(sources.source_c)
    (root / f"{model}.h").write_text(sources.header)
    (root / "weights.S").write_text(sources.weights_asm)
    assert CC is not None
    flags = [
        "-std=c11",
        "-O2",
        "-Wall",
        "-Werror",
        "-fPIC",
        "-fvisibility=hidden",
        f"-I{include_dir()}",
        f"-I{root}",
    ]
    for src in ("c.c", "model.c", "weights.S"):
        subprocess.run([CC, *flags, "-c", src, "-o", f"{src}.o"], cwd=root, check=True)
    objs = ["c.c.o", "model.c.o", "weights.S.o"]
    subprocess.run([CC, "-shared", "-o", f"lib{model}.so", *objs, "-lm"], cwd=root, check=True)
    return sources
