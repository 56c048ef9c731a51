"""Cross targets in the build graph: `emulator` only runs things (changing it re-runs no
action), and every compile's action-cache key differs per triple."""

from __future__ import annotations

import os
import re
from pathlib import Path

from plan_helpers import make_context
from small_project import write_project
from test_incremental_actions import _build

from buildgen.cache.action import ActionSpec, compute_base_key
from buildgen.cache.keys import PathFrame
from buildgen.cache.tools import Memo
from buildgen.manifest import ModelSpec
from buildgen.ninja.actions import plan_build
from buildgen.ninja.genfiles import gen_files
from buildgen.targets import resolve_target


def test_changing_only_the_emulator_reruns_no_action(tmp_path: Path) -> None:
    manifest = write_project(tmp_path / "p")
    text = manifest.read_text()
    assert '"opt_level": 1}' in text
    manifest.write_text(text.replace('"opt_level": 1}', '"opt_level": 1, "emulator": ["a"]}'))
    first = _build(manifest.parent)
    assert "tiny/cpu/obj/model.o" in first
    manifest.write_text(text.replace(
        '"opt_level": 1}', '"opt_level": 1, "emulator": ["qemu-aarch64", "-L", "/x"]}'))
    assert _build(manifest.parent) == []
    # Unset again: still nothing (the attribute reaches no command line and no read file
    # but target.json, which no action of the priority policy reads).
    manifest.write_text(text)
    assert _build(manifest.parent) == []


def _fake_compilers(folder: Path, names: list[str]) -> None:
    """Compilers that all print one version: keys then differ only by what the triple puts
    on the command line."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        script = folder / name
        script.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "gcc (fake) 13.2.0" '
                          "&& exit 0\nexit 1\n")
        script.chmod(0o755)


def _compile_key(tmp_path: Path, host: dict[str, object]) -> str:
    """The base key of model.c's compile for a target `t` with `host`: the same target name,
    so the same paths, whatever the host."""
    target = resolve_target("t", {"kind": "c", "opt_level": 2, **host})
    model = ModelSpec("mlp", tmp_path / "mlp.onnx", (("x", (2, 4)),), ("t",), ())
    files = gen_files((model,), {"t": target})
    plan = plan_build((model,), {"t": target}, make_context(tmp_path), tuple(files))
    (action,) = [a for a in plan.actions if a.outputs == ("mlp/t/obj/model.o",)]
    variables = dict(action.variables)
    build = tmp_path / "build"
    source = build / action.inputs[0]
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("int x;\n")  # the same source bytes for every host
    command = (*variables["cc"], *variables["cflags"], *variables["includes"], "-c",
               action.inputs[0], "-o", action.outputs[0])
    spec = ActionSpec("cc", "..", action.outputs, action.inputs, command, None)
    cwd = os.getcwd()
    os.chdir(build)
    try:
        return compute_base_key(spec, PathFrame.of(str(build), ".."), Memo(tmp_path / "memo"))
    finally:
        os.chdir(cwd)


def test_compile_keys_differ_per_triple(tmp_path: Path, monkeypatch) -> None:
    _fake_compilers(tmp_path / "bin", ["cc", "aarch64-linux-gnu-gcc", "riscv64-linux-gnu-gcc",
                                       "clang"])
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    hosts: dict[str, dict[str, object]] = {
        "native": {"march": "x86-64"},  # one compile, as the cross targets have
        "arm": {"triple": "aarch64-linux-gnu"},
        "riscv": {"triple": "riscv64-linux-gnu"},
        "arm-clang": {"triple": "aarch64-linux-gnu", "cc": "clang"},
        "riscv-clang": {"triple": "riscv64-linux-gnu", "cc": "clang"},
    }
    keys = {name: _compile_key(tmp_path, host) for name, host in hosts.items()}
    assert len(set(keys.values())) == len(hosts), keys
    assert re.fullmatch(r"[0-9a-f]{64}", keys["arm"])
    # The emulator is part of no key; the same host again gives the same key.
    emulated = {**hosts["arm"], "emulator": ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]}
    assert _compile_key(tmp_path, emulated) == keys["arm"]
