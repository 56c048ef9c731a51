"""The build's stages as Python functions, for custom passes and experiments.

    from buildgen import stages
    model = stages.import_model("mlp.onnx", {"x": [8, 512]})
    target = stages.resolve_target("x86-fast")
    part = stages.partition(model.graph, target, pins={"/fc3/Gemm": "host"})
    part = my_pass(model.graph, target, part)               # regions, each with its target
    stages.save_partition(part, "my_partition.json")        # hand it to BUILD.yaml:
                                                            # partition: {file: my_partition.json}
    lib = stages.build_library("out", "mlp", model, part, target)   # or build it here

These are the functions the build's actions call (through buildgen.stages.<stage>_stage),
so what a script produces is what `buildgen build` would.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from buildgen.errors import error
from buildgen.fsutil import write_if_changed

if TYPE_CHECKING:
    import numpy as np

    from buildgen.backends.base import GeneratedSource
    from buildgen.ir import Graph
    from buildgen.partition.custom import Step
    from buildgen.partition.model import Partition
    from buildgen.targets import ResolvedTarget


@dataclass(frozen=True)
class ImportedModel:
    graph: Graph
    weights_blob: bytes  # the weights file's bytes

    @property
    def digest(self) -> str:
        """The digest partition files record: of the graph's serialized form."""
        from buildgen.ir.serialize import dump_graph, graph_digest

        return graph_digest(dump_graph(self.graph))

    def weights(self) -> dict[str, np.ndarray]:
        from buildgen.ir.serialize import load_weights

        return load_weights(self.graph, self.weights_blob)


def import_model(
    source: str | Path, inputs: Mapping[str, Sequence[int]] | None = None,
    *, name: str | None = None,
) -> ImportedModel:
    """An ONNX file -> graph IR + weights, with dynamic input dims fixed by `inputs`."""
    from buildgen.importer import import_model as run_import
    from buildgen.ir.constants import with_constants_from_weights

    result = run_import(Path(source), dict(inputs or {}), model_name=name)
    graph = with_constants_from_weights(result.graph, result.weights_blob)
    return ImportedModel(graph, result.weights_blob)


def resolve_target(target: str | Mapping[str, Any]) -> ResolvedTarget:
    """A kind or tag name, or a mapping as in a manifest's `targets:`."""
    from buildgen.targets import parse_target

    return parse_target(target)


def partition(
    graph: Graph, target: ResolvedTarget, *, model: str = "model",
    pins: Mapping[str, str] | Sequence[tuple[str, str]] = (), policy: str = "priority",
    records: str | Path | None = None, start: Partition | str | Path | None = None,
    step: Step | str | None = None,
) -> Partition:
    """The partition the build's partition stage makes with the same inputs. `start` is a
    partition (or partition file) whose regions with a target are kept; `step` a function
    (or "module:function") run on the result."""
    from buildgen.ir.serialize import dump_graph, graph_digest
    from buildgen.partition.cost.records import optional_records
    from buildgen.partition.custom import load_step, load_user_partition
    from buildgen.partition.model import Partition as PartitionType
    from buildgen.partition.pipeline import PartitionOptions, make_partition

    if isinstance(start, PartitionType):
        regions, origin = start.regions, "the starting partition"
    elif start is not None:
        regions, origin = load_user_partition(start), f"partition file {Path(start).name}"
    else:
        regions, origin = (), ""
    step_name = step if isinstance(step, str) else getattr(step, "__name__", "step")
    options = PartitionOptions(
        pins=tuple(sorted(pins.items() if isinstance(pins, Mapping) else pins)),
        policy=policy,
        records=optional_records(records),
        start=tuple(regions),
        start_origin=origin,
        step=load_step(step) if isinstance(step, str) else step,
        step_name=step_name,
    )
    digest = graph_digest(dump_graph(graph))
    return make_partition(graph, target, model, digest, options)


def save_partition(partition: Partition, path: str | Path) -> None:
    from buildgen.partition.serialize import dump_partition

    write_if_changed(Path(path), dump_partition(partition))


def load_partition(path: str | Path) -> Partition:
    from buildgen.partition.serialize import load_partition as load

    return load(path)


def codegen(
    model: str, imported: ImportedModel, partition: Partition, target: ResolvedTarget,
    backends: Sequence[str] | None = None,
) -> dict[str, GeneratedSource]:
    """backend kind -> its generated module, for `backends` (default: every backend of the
    target; one given no region still gets a valid, empty module, as in the build)."""
    from buildgen.backends.registry import get_backend

    weights = imported.weights()
    return {
        kind: get_backend(kind).generate(model, imported.graph, partition,
                                         target.codegen_options(kind), weights)
        for kind in (target.backends if backends is None else backends)
    }


def _run(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise error(f"`{' '.join(command)}` failed in {cwd}:\n{done.stderr.strip()}")


def build_library(
    out_dir: str | Path, model: str, imported: ImportedModel, partition: Partition,
    target: ResolvedTarget, *, jobs: int = 1, kernels_dir: str | Path | None = None,
) -> Path:
    """Generate, compile and link lib<model>.so in `out_dir` with the target's toolchains,
    the same commands as the build's; returns the library's path. Only the backends that
    own a region are generated and linked (the build makes every backend's module, empty
    ones included, so that its graph of actions never depends on a partition).

    A kind's shared kernels (the c host's) that the modules call are compiled under
    `kernels_dir` (default: the library's obj/), once: later calls given the same folder
    link the objects there, as the build links _shared/'s. Processes may share the folder."""
    from buildgen.codegen.executor import generate_executor
    from buildgen.codegen.isa import isa_plan
    from buildgen.ninja.layout import SOURCE_EXTENSIONS, compile_units
    from buildgen.ninja.shared_modules import fixed_kernels
    from buildgen.resources import include_dir
    from buildgen.targets.shared_kernels import linked_by

    out = Path(out_dir).resolve()
    for sub in ("src", "include", "obj"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    write_if_changed(out / "weights.bin", imported.weights_blob)
    sources = generate_executor(model, imported.graph, partition, str(out / "weights.bin"),
                                len(imported.weights_blob), isa_plan(target), target.profiled)
    write_if_changed(out / "include" / f"{model}.h", sources.header)
    host = target.toolchain(target.host_kind)
    units: list[tuple[Path, Any, Path]] = [
        (out / "src" / "model.c", host, out / "obj" / "model.o"),
        (out / "src" / "weights.S", host, out / "obj" / "weights.o"),
    ]
    write_if_changed(units[0][0], sources.source_c)
    write_if_changed(units[1][0], sources.weights_asm)
    used = [k for k in target.backends if k in partition.backends]
    kernels: list[tuple[Path, Any, Path]] = []
    for kind, generated in codegen(model, imported, partition, target, used).items():
        toolchain = target.toolchain(kind)
        if shared := fixed_kernels(kind, toolchain):
            toolchain = shared.toolchain
            folder = Path(kernels_dir or out / "obj").resolve() / shared.folder
            linked = linked_by(shared.spec, generated.text)
            kernels += [(Path(source), tc, folder / Path(obj).name)
                        for source, obj, tc in shared.fixed_units if Path(source) in linked]
        path = out / "src" / f"{kind}.{SOURCE_EXTENSIONS[toolchain.language]}"
        write_if_changed(path, generated.text)
        units += [(path, tc, Path(obj)) for obj, tc in compile_units(
            str(out / "obj" / f"{kind}.o"), toolchain)]
    includes = [f"-I{include_dir()}", f"-I{out / 'include'}"]

    def compile_one(unit: tuple[Path, Any, Path]) -> Path:
        source, toolchain, obj = unit
        # As the build does: no launcher (ccache) for weights.S, whose .incbin it cannot see.
        launcher = () if source == units[1][0] else toolchain.launcher
        command = [*launcher, toolchain.cc, *toolchain.cflags, *includes]
        _run([*command, "-c", str(source), "-o", str(obj)], out)
        return obj

    def compile_shared(unit: tuple[Path, Any, Path]) -> Path:
        """A shared kernels object, compiled unless there: to a name of this process's, then
        renamed, so a process sharing the folder never links a half-written object."""
        source, toolchain, obj = unit
        if not obj.exists():
            obj.parent.mkdir(parents=True, exist_ok=True)
            # Unique per call, not per process: the tuner builds in threads of one process.
            fd, name = tempfile.mkstemp(prefix=f".{obj.name}.", suffix=".tmp", dir=obj.parent)
            os.close(fd)
            scratch = Path(name)
            try:
                compile_one((source, toolchain, scratch))
                os.replace(scratch, obj)
            finally:
                scratch.unlink(missing_ok=True)
        return obj

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        objects = list(pool.map(compile_one, units))
        objects += pool.map(compile_shared, kernels)
    ldflags: list[str] = []
    groups: list[tuple[str, ...]] = []
    for kind in used:  # as the build links: accelerators first, groups once
        group = target.toolchain(kind).ldflags
        if group not in groups:
            groups.append(group)
            ldflags += group
    library = out / f"lib{model}.so"
    _run([host.cc, "-shared", "-o", str(library), *map(str, objects), *ldflags], out)
    return library
