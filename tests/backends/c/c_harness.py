"""Compile a generated c-backend module with a tiny C shim and call its regions via ctypes.

The shim plays the executor's part of buildgen_abi.h: it allocates the scratch (filled
with 0xff bytes, i.e. NaNs, so reading before writing shows up), fills a bg_env with the
weights blob, and calls create / region / destroy.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from buildgen.backends.base import GeneratedSource
from buildgen.ir import Graph
from buildgen.partition.boundaries import region_io
from buildgen.partition.model import Partition
from buildgen.resources import include_dir

CFLAGS = ("-O2", "-std=c11", "-Wall", "-Werror", "-fPIC", "-shared")

_SHIM = """\
#define _POSIX_C_SOURCE 200112L
#include <stdlib.h>
#include <string.h>
#include "buildgen_abi.h"

typedef int (*region_fn)(bg_env *, const void *const *, void *const *);
extern const size_t {m}__c_scratch_bytes;
int {m}__c_create(bg_env *env);
void {m}__c_destroy(bg_env *env);
{decls}
static const region_fn regions[] = {{{table}}};

size_t shim_scratch_bytes(void) {{ return {m}__c_scratch_bytes; }}

int shim_run(const unsigned char *weights, int region, const void *const *in,
             void *const *out, char *error, size_t error_size)
{{
    bg_env env;
    void *scratch = NULL;
    size_t bytes = {m}__c_scratch_bytes ? {m}__c_scratch_bytes : 64;
    int rc;
    memset(&env, 0, sizeof env);
    if (posix_memalign(&scratch, 64, bytes) != 0) return -2;
    memset(scratch, 0xff, bytes);
    env.weights = weights;
    env.scratch = (unsigned char *)scratch;
    env.error = error;
    env.error_size = error_size;
    rc = {m}__c_create(&env);
    if (rc == 0) {{
        rc = regions[region](&env, in, out);
        {m}__c_destroy(&env);
    }}
    free(scratch);
    return rc;
}}
"""


def kernels_header_missing() -> str | None:
    """Why the generated code cannot compile here, or None."""
    if shutil.which("cc") is None:
        return "no C compiler (cc) on PATH"
    if not (include_dir() / "bg_kernels.h").is_file():
        return f"{include_dir() / 'bg_kernels.h'} does not exist yet"
    return None


def compile_module(
    source: GeneratedSource, model: str, region_ids: Sequence[str], workdir: Path
) -> CompiledModule:
    workdir.mkdir(parents=True, exist_ok=True)
    module_c = workdir / source.filename
    module_c.write_text(source.text)
    shim_c = workdir / "shim.c"
    decls = "\n".join(
        f"int {model}__c_{r}(bg_env *, const void *const *, void *const *);" for r in region_ids
    )
    table = ", ".join(f"{model}__c_{r}" for r in region_ids) or "0"
    shim_c.write_text(_SHIM.format(m=model, decls=decls, table=table))
    lib = workdir / f"lib{model}_c.so"
    cc = os.environ.get("CC", "cc")
    compile_flags = [f for f in CFLAGS if f != "-shared"]
    objects = []
    for source_c in (module_c, shim_c):
        obj = source_c.with_suffix(".o")
        cmd = [cc, *compile_flags, "-I", str(include_dir()), "-c", str(source_c), "-o", str(obj)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise AssertionError(f"compiling {source_c} failed:\n{result.stderr[-6000:]}")
        objects.append(str(obj))
    # Linked apart, as the build links (compile flags never reach the link): GCC links a
    # -ffast-math library with crtfastmath.o, whose constructor would turn on flush-to-zero
    # for the whole test process when ctypes loads it.
    result = subprocess.run([cc, "-shared", *objects, "-o", str(lib), "-lm"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"linking {lib} failed:\n{result.stderr[-6000:]}")
    return CompiledModule(ctypes.CDLL(str(lib)), tuple(region_ids), module_c)


def weights_buffer(graph: Graph, weights: Mapping[str, np.ndarray]) -> np.ndarray:
    """The weights blob laid out at the graph's offsets, in a 64-byte aligned buffer."""
    size = max((w.offset + w.type.nbytes for w in graph.weights), default=0)
    raw = np.zeros(size + 128, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    blob = raw[start : start + max(size, 1)]
    for w in graph.weights:
        data = np.ascontiguousarray(weights[w.name]).view(np.uint8).reshape(-1)
        blob[w.offset : w.offset + data.size] = data
    return blob


@dataclass
class CompiledModule:
    lib: ctypes.CDLL
    region_ids: tuple[str, ...]
    source: Path

    @property
    def scratch_bytes(self) -> int:
        self.lib.shim_scratch_bytes.restype = ctypes.c_size_t
        return int(self.lib.shim_scratch_bytes())

    def run_region(
        self,
        region_id: str,
        blob: np.ndarray,
        inputs: Sequence[np.ndarray],
        outputs: Sequence[np.ndarray],
    ) -> None:
        ins = (ctypes.c_void_p * max(len(inputs), 1))(*[a.ctypes.data for a in inputs])
        outs = (ctypes.c_void_p * max(len(outputs), 1))(*[a.ctypes.data for a in outputs])
        error = ctypes.create_string_buffer(512)
        fn = self.lib.shim_run
        fn.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_size_t,
        ]
        fn.restype = ctypes.c_int
        rc = fn(blob.ctypes.data, self.region_ids.index(region_id), ins, outs, error, 512)
        if rc != 0:
            raise RuntimeError(f"region {region_id} returned {rc}: {error.value.decode()}")


def run_partition(
    module: CompiledModule,
    graph: Graph,
    partition: Partition,
    weights: Mapping[str, np.ndarray],
    feeds: Mapping[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Run every c region in order, passing tensors between them; returns every region
    output by name."""
    from buildgen.ir.serialize import numpy_dtype

    blob = weights_buffer(graph, weights)
    values: dict[str, np.ndarray] = {k: np.ascontiguousarray(v) for k, v in feeds.items()}
    for region in partition.regions_for("c"):
        io = region_io(graph, region)
        ins = [values[n] for n in io.inputs]
        outs = []
        for name in io.outputs:
            tt = graph.type_of(name)
            out = np.empty(tt.shape, dtype=numpy_dtype(tt.dtype))
            out.reshape(-1).view(np.uint8)[:] = 0xFF  # NaN / -1: unwritten outputs show up
            outs.append(out)
        module.run_region(region.id, blob, ins, outs)
        values.update(zip(io.outputs, outs, strict=True))
    return values
