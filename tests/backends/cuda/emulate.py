"""Build a model's library against the CPU stand-in for CUDA (emu/): the generated cuda.cu
compiled as C++ by g++ (each `k<<<grid, block, 0, stream>>>(args)` rewritten to a call of
bg_emu_launch), model.c recompiled against the stand-in's headers, and the c module and
weights objects of the real build. Lets a machine without a GPU check the device code's
results against onnxruntime."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from buildgen.resources import include_dir

EMU = Path(__file__).resolve().parent / "emu"
# The generic kernels that call __syncthreads: their threads must run concurrently.
SYNCHRONIZING = frozenset({"bg_gemm", "bg_layer_norm"})
_LAUNCH = re.compile(r"^(\s*)(\w+)<<<(.*)>>>\((.*)\);$")


def _split_top(text: str) -> list[str]:
    """Split at commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return [*parts, text[start:].strip()]


def rewrite_launches(source: str) -> str:
    lines = []
    for line in source.splitlines():
        match = _LAUNCH.match(line)
        if match:
            indent, kernel, config, args = match.groups()
            grid, block = _split_top(config)[:2]
            threaded = "true" if kernel in SYNCHRONIZING else "false"
            line = (f"{indent}bg_emu_launch({grid}, {block}, {threaded}, "
                    f"[&] {{ {kernel}({args}); }});")
        lines.append(line)
    return "\n".join(lines) + "\n"


def _run(*cmd: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stderr[-4000:]}")


def emulated_library(
    sources: Path, headers: Path, objects: list[Path], model: str, out: Path
) -> Path:
    """lib<model>.so in `out` from `sources` (cuda.cu and model.c), the model's header folder
    and the host objects (the c module, the weights) of a build."""
    out.mkdir(parents=True, exist_ok=True)
    cu = out / "cuda_emu.cc"
    cu.write_text(rewrite_launches((sources / "cuda.cu").read_text()))
    includes = [f"-I{EMU}", f"-I{include_dir()}", f"-I{headers}"]
    built = []
    for source, compiler, std in ((cu, "g++", "-std=c++17"),
                                  (EMU / "cudart_emu.cc", "g++", "-std=c++17"),
                                  (sources / "model.c", "cc", "-std=c11")):
        obj = out / f"{source.stem}.o"
        _run(compiler, std, "-O1", "-fPIC", *includes, "-c", str(source), "-o", str(obj))
        built.append(str(obj))
    lib = out / f"lib{model}.so"
    _run("g++", "-shared", "-o", str(lib), *built, *map(str, objects), "-lm")
    return lib


def emulated_build(target_dir: Path, model: str, out: Path) -> Path:
    """The emulated library of `model` from its `buildgen build` folder <build>/<model>/<t>."""
    # The host's objects as built: c.o, or one c.<level>.o per ISA level; the weights; the
    # archives of shared kernels the library links, as build.ninja says; and the c host's
    # kernels objects its response file lists (src/c.link.rsp).
    objects = sorted((target_dir / "obj").glob("c.*o")) + [target_dir / "obj" / "weights.o"]
    build = target_dir.parents[1]
    label = target_dir.relative_to(build).as_posix()
    link = re.search(rf"^build {re.escape(label)}/lib{model}\.so: \w+ (.*)$",
                     (build / "build.ninja").read_text(), re.M)
    assert link is not None, f"no link of {label}/lib{model}.so in build.ninja"
    objects += [build / word for word in link.group(1).split() if word.endswith(".a")]
    for listing in sorted((target_dir / "src").glob("*.link.rsp")):
        objects += [build / line for line in listing.read_text().split()]
    return emulated_library(target_dir / "src", target_dir / "include",
                            [o for o in objects if o.exists()], model, out)
