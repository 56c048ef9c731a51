"""Action keys: what must change them (tool versions, weights, shapes, headers) and what
must not (the checkout's path, the cache's own settings)."""

from __future__ import annotations

import os
import shutil
import sys

import pytest
from cache_helpers import REPO, outcomes, run_action, wrapper_env

from buildgen.cache.action import ActionSpec, compute_base_key
from buildgen.cache.keys import PathFrame, full_key
from buildgen.cache.tools import Memo, command_tools


def _spec(command, inputs=("a.c",)) -> ActionSpec:
    return ActionSpec("cc", "..", ("a.o",), tuple(inputs), tuple(command), "a.o.d")


def _fake_cc(folder, version: str):
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "cc"
    script.write_text(f'#!/bin/sh\n[ "$1" = --version ] && echo "{version}" && exit 0\nexit 1\n')
    script.chmod(0o755)
    return script


def _key(tmp_path, command, memo_dir="memo", monkeypatch=None) -> str:
    build = tmp_path / "root" / "build"
    build.mkdir(parents=True, exist_ok=True)
    (build / "a.c").write_text("int x;\n")
    cwd = os.getcwd()
    os.chdir(build)
    try:
        return compute_base_key(
            _spec(command), PathFrame.of(str(build), ".."), Memo(tmp_path / memo_dir)
        )
    finally:
        os.chdir(cwd)


def test_two_compiler_versions_never_share_a_key(tmp_path, monkeypatch):
    _fake_cc(tmp_path / "v1", "cc (fake) 12.2.0")
    _fake_cc(tmp_path / "v2", "cc (fake) 13.1.0")
    command = ["cc", "-O2", "-c", "a.c", "-o", "a.o"]
    monkeypatch.setenv("PATH", f"{tmp_path / 'v1'}{os.pathsep}{os.environ['PATH']}")
    one = _key(tmp_path, command)
    monkeypatch.setenv("PATH", f"{tmp_path / 'v2'}{os.pathsep}{os.environ['PATH']}")
    assert _key(tmp_path, command) != one
    # Upgraded in place (same path): the memoized --version is asked again.
    monkeypatch.setenv("PATH", f"{tmp_path / 'v1'}{os.pathsep}{os.environ['PATH']}")
    assert _key(tmp_path, command) == one
    _fake_cc(tmp_path / "v1", "cc (fake) 12.3.0 (a longer version line)")
    assert _key(tmp_path, command) != one


def test_a_launcher_and_its_compiler_are_both_tools(tmp_path):
    gcc = shutil.which("gcc")
    assert gcc
    tools = command_tools(["env", "A=1", "gcc", "-c", "a.c"])
    assert [w for w, _ in tools] == ["env", "gcc"]
    assert tools[1][1] == os.path.realpath(gcc)
    assert command_tools(["ar", "rcsD", "lib.a"])[0][0] == "ar"
    assert command_tools(["no-such-tool-xyz", "x"]) == [("no-such-tool-xyz", "")]


def test_keys_do_not_depend_on_the_cache_folder(tmp_path):
    command = ["gcc", "-O2", "-c", "a.c", "-o", "a.o"]
    assert _key(tmp_path, command, "memo-a") == _key(tmp_path, command, "memo-b")


def test_flags_change_the_key(tmp_path):
    assert _key(tmp_path, ["gcc", "-O2", "-c", "a.c"]) != _key(
        tmp_path, ["gcc", "-O3", "-c", "a.c"]
    )


def test_hidden_inputs_change_the_full_key():
    base = "0" * 64
    assert full_key(base, [("<root>/h.h", "1" * 64)]) != full_key(base, [("<root>/h.h", "2" * 64)])
    assert full_key(base, [("<root>/h.h", "1" * 64)]) != full_key(base, [("<root>/g.h", "1" * 64)])
    assert full_key(base, []) == full_key(base, [])


def test_paths_are_named_by_the_build_dir_and_the_root():
    frame = PathFrame.of("/w/clone/build", "..")
    assert frame.name("mlp/graph.json") == "<build>/mlp/graph.json"
    assert frame.name("../examples/m.onnx") == "<root>/examples/m.onnx"
    assert frame.name("/usr/include/stdio.h") == "/usr/include/stdio.h"
    assert frame.local("<root>/include/h.h") == "../include/h.h"
    assert frame.argument("-I/w/clone/include") == "-I<root>/include"
    assert frame.argument("-Wl,-rpath,/w/clone/build/lib") == "-Wl,-rpath,<build>/lib"
    assert frame.argument("/w/clone2/x") == "/w/clone2/x"  # another folder, not the root
    assert frame.argument("/other/w/clone/x") == "/other/w/clone/x"  # not a prefix of it
    other = PathFrame.of("/elsewhere/b", "/w/clone")  # a build dir outside the root
    assert other.name("/w/clone/m.onnx") == "<root>/m.onnx"


def test_buildgens_own_files_have_one_name_wherever_it_is_installed():
    """Its kernels sources and headers: so their objects share a key across projects and
    installations (the store filled at install time, buildgen/cache/prebuilt.py)."""
    venv = PathFrame.of("/p/build", "..", "/venv/site-packages/buildgen")
    checkout = PathFrame.of("/w/clone/build", "..", "/w/clone/buildgen")  # editable, inside
    assert venv.name("/venv/site-packages/buildgen/include/bg_gemm.h") == (
        "<buildgen>/include/bg_gemm.h")
    assert checkout.name("../buildgen/include/bg_gemm.h") == "<buildgen>/include/bg_gemm.h"
    assert checkout.argument("-I/w/clone/buildgen/include") == "-I<buildgen>/include"
    assert venv.argument("-I/venv/site-packages/buildgen/include") == "-I<buildgen>/include"
    assert checkout.name("../buildgenx/a.c") == "<root>/buildgenx/a.c"
    assert checkout.local("<buildgen>/include/h.h") == "../buildgen/include/h.h"
    assert checkout.name("mlp/graph.json") == "<build>/mlp/graph.json"


# -- the import stage, for real: weights and shapes ------------------------------------------


def _save_mlp(path, bump: float = 0.0):
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    model = onnx.load(str(REPO / "examples" / "models" / "mlp.onnx"))
    first = model.graph.initializer[0]
    array = numpy_helper.to_array(first).copy()
    array.flat[0] += bump
    first.CopyFrom(numpy_helper.from_array(array, first.name))
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def _import(build, cache, shape="8,512"):
    command = [
        sys.executable,
        "-m",
        "buildgen.stages",
        "--buildgen-version",
        __import__("buildgen").__version__,
        "import",
        "--model",
        "mlp",
        "--source",
        "../m/mlp.onnx",
        "--input",
        f"x={shape}",
        "--graph",
        "mlp/graph.json",
        "--weights",
        "mlp/weights.bin",
        "--constants",
        "mlp/constants.bin",
        "--depfile",
        "mlp/graph.json.d",
    ]
    return run_action(
        build,
        cache,
        command,
        rule="import",
        restat=True,
        depfile="mlp/graph.json.d",
        outputs=["mlp/graph.json", "mlp/weights.bin", "mlp/constants.bin"],
        inputs=["../m/mlp.onnx"],
        env=wrapper_env(cache),
    )


def test_two_weights_and_two_shapes_never_share_a_key(tmp_path):
    build, cache = tmp_path / "build", tmp_path / "cache"
    build.mkdir()
    _save_mlp(tmp_path / "m" / "mlp.onnx")
    assert _import(build, cache).returncode == 0
    weights = (build / "mlp" / "weights.bin").read_bytes()
    _save_mlp(tmp_path / "m" / "mlp.onnx", bump=1.0)
    assert _import(build, cache).returncode == 0
    assert (build / "mlp" / "weights.bin").read_bytes() != weights
    graph = (build / "mlp" / "graph.json").read_text()
    assert _import(build, cache, shape="4,512").returncode == 0
    assert (build / "mlp" / "graph.json").read_text() != graph
    _save_mlp(tmp_path / "m" / "mlp.onnx")
    assert _import(build, cache).returncode == 0
    assert outcomes(build) == ["ran", "ran", "ran", "local"]
    assert (build / "mlp" / "weights.bin").read_bytes() == weights


def test_a_link_reads_the_libraries_it_names(tmp_path):
    from buildgen.cache.links import library_digests, linked_libraries

    mine, system = tmp_path / "mine", tmp_path / "system"
    mine.mkdir()
    system.mkdir()
    (mine / "libdnnl.so").write_bytes(b"\x7fELF v3.2")
    (system / "libdnnl.so").write_bytes(b"\x7fELF v2.6")  # found only after -L folders
    (system / "libm.so.6").write_bytes(b"\x7fELF libm")
    (system / "libm.so").write_text(f"/* GNU ld script */\nGROUP ( {system}/libm.so.6 )\n")
    command = ["cc", "-shared", "-o", "x.so", "a.o", f"-L{mine}", "-ldnnl", "-lm", "-lnothere"]
    found = linked_libraries(command, [str(system)])
    assert found == [str(mine / "libdnnl.so"), str(system / "libm.so")]
    memo = Memo(tmp_path / "memo")
    digests = dict(library_digests(found, memo))
    assert set(digests) == {*found, str(system / "libm.so.6")}  # the script's member too
    before = digests[str(mine / "libdnnl.so")]
    (mine / "libdnnl.so").write_bytes(b"\x7fELF v3.3!")  # upgraded in place
    assert dict(library_digests(found, memo))[str(mine / "libdnnl.so")] != before


def test_native_code_is_keyed_by_this_machines_processor(tmp_path, monkeypatch):
    from buildgen.cache import action

    native = ["gcc", "-march=native", "-c", "a.c"]
    portable = ["gcc", "-march=x86-64-v3", "-c", "a.c"]
    here, everywhere = _key(tmp_path, native), _key(tmp_path, portable)
    monkeypatch.setattr(action, "native_cpu", lambda: "another processor")
    assert _key(tmp_path, native) != here
    assert _key(tmp_path, portable) == everywhere  # a portable build is shared across CPUs


def test_the_compilers_environment_changes_the_key(tmp_path, monkeypatch):
    command = ["gcc", "-O2", "-c", "a.c", "-o", "a.o"]
    monkeypatch.delenv("CPATH", raising=False)
    plain = _key(tmp_path, command)
    monkeypatch.setenv("CPATH", str(tmp_path / "other-headers"))
    assert _key(tmp_path, command) != plain
    monkeypatch.delenv("CPATH")
    monkeypatch.setenv("BUILDGEN_UNRELATED", "1")  # what tools ignore stays out of the key
    assert _key(tmp_path, command) == plain


def test_large_file_digests_are_remembered_until_the_file_changes(tmp_path):
    import hashlib
    import os
    import time

    from buildgen.cache.keys import MEMO_MIN_BYTES, file_digest
    from buildgen.cache.tools import Memo

    memo = Memo(tmp_path / "memo")
    path = tmp_path / "weights.bin"
    path.write_bytes(b"a" * MEMO_MIN_BYTES)
    # Just written: it may change again within its mtime's granularity, so not remembered.
    assert file_digest(str(path), memo) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert not (tmp_path / "memo").exists()
    settled = time.time() - 60
    os.utime(path, (settled, settled))
    first = file_digest(str(path), memo)
    assert first == hashlib.sha256(path.read_bytes()).hexdigest()
    assert len(list((tmp_path / "memo").rglob("*"))) == 2  # the folder and one entry
    # The same size and mtime, other bytes: the inode change time gives it away.
    path.write_bytes(b"b" * MEMO_MIN_BYTES)
    os.utime(path, (settled, settled))
    assert file_digest(str(path), memo) == hashlib.sha256(path.read_bytes()).hexdigest() != first


def test_a_settled_file_is_read_once_per_process_until_it_changes(tmp_path, monkeypatch):
    """The process layer in front of the on-disk memo (a runner's ~40 headers a compile):
    a stat each after the first read, a new read when the stamp moves, nothing kept for a
    file that vanished between the stat and the read."""
    import os
    import time

    from buildgen.cache import keys

    reads: list[str] = []
    real = keys._hash_file
    monkeypatch.setattr(keys, "_hash_file", lambda p: reads.append(p) or real(p))
    header = tmp_path / "bg_kernels.h"
    header.write_text("int f(void);\n")
    settled = time.time() - 60
    os.utime(header, (settled, settled))
    first = keys.file_digest(str(header))
    assert keys.file_digest(str(header)) == first and len(reads) == 1
    header.write_text("int g(void);\n")
    os.utime(header, (settled, settled))
    assert keys.file_digest(str(header)) != first and len(reads) == 2
    monkeypatch.setattr(keys, "_hash_file", lambda p: reads.append(p) or keys.MISSING)
    other = tmp_path / "gone.h"
    other.write_text("x\n")
    os.utime(other, (settled, settled))
    assert keys.file_digest(str(other)) == keys.MISSING
    assert keys.file_digest(str(other)) == keys.MISSING and len(reads) == 4


def test_a_memo_value_is_remembered_in_the_process_by_its_fingerprint(tmp_path):
    """tools.Memo keeps what it found in memory as well as on disk: a runner asks again
    without reading the entry, even once the cache folder is gone, and another
    fingerprint (the tool changed) is asked for again."""
    asked: list[str] = []

    def probe(answer: str):
        return lambda: asked.append(answer) or answer

    memo = Memo(tmp_path / "memo")
    fingerprint = ["tool", str(tmp_path / "cc"), 1, 2]
    assert memo.get_or_compute(fingerprint, probe("v1")) == "v1"
    assert len(list((tmp_path / "memo").rglob("*"))) == 2  # still kept on disk
    shutil.rmtree(tmp_path / "memo")
    assert Memo(tmp_path / "other").get_or_compute(fingerprint, probe("v2")) == "v1"
    assert memo.get_or_compute([*fingerprint[:-1], 3], probe("v3")) == "v3"
    assert asked == ["v1", "v3"]


def test_frame_names_remembered_per_frame_round_trip(tmp_path):
    frame = PathFrame.of(str(tmp_path / "build"), "..")
    other = PathFrame.of(str(tmp_path / "clone" / "build"), "..")
    assert frame.name("obj/a.o") == "<build>/obj/a.o" == other.name("obj/a.o")
    assert frame.name("../src/a.c") == "<root>/src/a.c"
    assert frame.local("<root>/src/a.c") == "../src/a.c"
    assert frame.absolute("<root>/src/a.c") == str(tmp_path / "src" / "a.c")
    assert other.absolute("<root>/src/a.c") == str(tmp_path / "clone" / "src" / "a.c")
    assert frame.local("/usr/include/stdio.h") == "/usr/include/stdio.h"


def test_a_set_of_headers_is_digested_as_its_files_are_and_follows_each_edit(tmp_path):
    """file_digests remembers a whole set by its files' stamps (a compile's headers after
    every compile): the same digests as file by file, a new one for an edited file (even
    one of the same size), none while a file is missing, and no set kept while a file
    may still change within its mtime's granularity."""
    import time

    from buildgen.cache import keys

    settled = time.time() - 60
    headers = []
    for name, text in (("a.h", "int a;\n"), ("b.h", "int b;\n")):
        path = tmp_path / name
        path.write_text(text)
        os.utime(path, (settled, settled))
        headers.append(str(path))
    paths = tuple(headers)
    first = keys.file_digests(paths)
    assert first == [keys.file_digest(p) for p in paths]
    assert keys.file_digests(paths) == first and paths in keys._SETS
    (tmp_path / "b.h").write_text("int c;\n")  # the same size
    os.utime(tmp_path / "b.h", (settled, settled))
    assert keys.file_digests(paths) == [first[0], keys.file_digest(headers[1])] != first
    (tmp_path / "a.h").unlink()
    assert keys.file_digests(paths) is None
    (tmp_path / "a.h").write_text("int a;\n")  # just written: racy
    keys._SETS.pop(paths, None)
    assert keys.file_digests(paths) == [first[0], keys.file_digest(headers[1])]
    assert paths not in keys._SETS
