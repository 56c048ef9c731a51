"""The wrapper (`python -m buildgen.cache exec`) on real gcc compiles in tmp folders:
misses run and store, hits restore outputs and depfiles without running, failures store
nothing, a vanished blob falls back to running, BUILDGEN_CACHE=off passes through."""

from __future__ import annotations

import os
import shutil

from cache_helpers import compile_a, outcomes, run_action, wrapper_env, write_project


def test_a_second_compile_is_restored_with_its_depfile(tmp_path):
    build, cache = write_project(tmp_path / "p"), tmp_path / "cache"
    assert compile_a(build, cache).returncode == 0
    first = (build / "a.o").read_bytes()
    (build / "a.o").unlink()
    (build / "a.o.d").unlink()  # ninja reads and deletes it (deps = gcc)
    done = compile_a(build, cache)
    assert done.returncode == 0, done.stderr
    assert outcomes(build) == ["ran", "local"]
    assert (build / "a.o").read_bytes() == first
    # The restored depfile names the header, so ninja's deps log stays complete.
    depfile = (build / "a.o.d").read_text()
    assert depfile.startswith("a.o:") and "../include/h.h" in depfile


def test_a_hit_runs_no_tool(tmp_path):
    build, cache = write_project(tmp_path / "p"), tmp_path / "cache"
    bin_dir, marker = tmp_path / "bin", tmp_path / "compiled"
    bin_dir.mkdir()
    # A gcc that records every compile it does (its --version is gcc's own).
    (bin_dir / "gcc").write_text(
        f'#!/bin/sh\ncase "$1" in --version) exec {shutil.which("gcc")} "$@";; esac\n'
        f'echo x >> {marker}\nexec {shutil.which("gcc")} "$@"\n'
    )
    (bin_dir / "gcc").chmod(0o755)
    env = wrapper_env(cache, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert compile_a(build, cache, env=env).returncode == 0
    assert marker.read_text() == "x\n"
    (build / "a.o").unlink()
    done = compile_a(build, cache, env=env)
    assert done.returncode == 0, done.stderr
    assert outcomes(build) == ["ran", "local"]
    assert marker.read_text() == "x\n"  # no second compile
    assert (build / "a.o").exists()


def test_a_header_change_misses_and_both_versions_stay_cached(tmp_path):
    build, cache = write_project(tmp_path / "p"), tmp_path / "cache"
    compile_a(build, cache)
    three = (build / "a.o").read_bytes()
    (tmp_path / "p" / "include" / "h.h").write_text("#define N 4\n")
    compile_a(build, cache)
    assert (build / "a.o").read_bytes() != three
    (tmp_path / "p" / "include" / "h.h").write_text("#define N 3\n")
    compile_a(build, cache)
    assert outcomes(build) == ["ran", "ran", "local"]
    assert (build / "a.o").read_bytes() == three


def test_a_failing_command_stores_nothing_and_leaves_no_output(tmp_path):
    build, cache = write_project(tmp_path / "p"), tmp_path / "cache"
    assert compile_a(build, cache).returncode == 0
    (tmp_path / "p" / "src" / "a.c").write_text("int f(void) { return }\n")
    done = compile_a(build, cache)
    assert done.returncode != 0 and "error" in done.stderr
    assert not (build / "a.o").exists()  # the old object is gone, not trusted
    again = compile_a(build, cache)
    assert again.returncode != 0
    assert outcomes(build) == ["ran", "ran", "ran"]


def test_the_same_work_at_another_path_is_a_hit(tmp_path):
    cache = tmp_path / "cache"
    a = write_project(tmp_path / "clone-a")
    b = write_project(tmp_path / "somewhere" / "clone-b")
    # Absolute include paths differ between the clones; the key names them by the root.
    assert compile_a(a, cache, include=f"-I{tmp_path / 'clone-a' / 'include'}").returncode == 0
    done = compile_a(b, cache, include=f"-I{tmp_path / 'somewhere' / 'clone-b' / 'include'}")
    assert done.returncode == 0, done.stderr
    assert outcomes(b) == ["local"]
    assert (a / "a.o").read_bytes() == (b / "a.o").read_bytes()
    depfile = (b / "a.o.d").read_text()
    assert "clone-b" in depfile or "../include/h.h" in depfile
    assert "clone-a" not in depfile


def test_an_evicted_blob_makes_the_reader_run_the_action(tmp_path):
    build, cache = write_project(tmp_path / "p"), tmp_path / "cache"
    compile_a(build, cache)
    shutil.rmtree(cache / "cas")  # another build evicted every blob meanwhile
    (build / "a.o").unlink()
    done = compile_a(build, cache)
    assert done.returncode == 0, done.stderr
    assert outcomes(build) == ["ran", "ran"]
    assert (build / "a.o").exists()


def test_a_corrupt_blob_is_never_restored(tmp_path):
    build, cache = write_project(tmp_path / "p"), tmp_path / "cache"
    compile_a(build, cache)
    good = (build / "a.o").read_bytes()
    for blob in (cache / "cas").rglob("*"):
        if blob.is_file():
            blob.write_bytes(b"garbage")
    compile_a(build, cache)
    assert outcomes(build) == ["ran", "ran"]
    assert (build / "a.o").read_bytes() == good


def test_restat_leaves_identical_outputs_untouched(tmp_path):
    build = tmp_path / "b"
    build.mkdir()
    cache = tmp_path / "cache"
    (build / "in.txt").write_text("x")
    command = ["cp", "in.txt", "out.txt"]
    kw = {"rule": "codegen", "outputs": ["out.txt"], "inputs": ["in.txt"], "restat": True}
    assert run_action(build, cache, command, **kw).returncode == 0
    os.utime(build / "out.txt", ns=(1, 1))
    assert run_action(build, cache, command, **kw).returncode == 0
    assert outcomes(build) == ["ran", "local"]
    assert (build / "out.txt").stat().st_mtime_ns == 1  # same bytes: not rewritten
    # Without restat a hit rewrites the output: ninja expects it newer than its inputs.
    kw["restat"] = False
    run_action(build, cache, command, **kw)
    os.utime(build / "out.txt", ns=(1, 1))
    run_action(build, cache, command, **kw)
    assert (build / "out.txt").stat().st_mtime_ns > 1


def test_cache_off_passes_straight_through(tmp_path):
    build, cache = write_project(tmp_path / "p"), tmp_path / "cache"
    env = wrapper_env(cache, BUILDGEN_CACHE="off")
    for _ in range(2):
        assert compile_a(build, cache, env=env).returncode == 0
    assert outcomes(build) == ["ran", "ran"]
    assert not cache.exists()


def test_an_archive_starts_from_scratch(tmp_path):
    """ar appends; the wrapper removes a non-restat rule's outputs before running it."""
    build = tmp_path / "b"
    build.mkdir()
    cache = tmp_path / "cache"
    for name in ("x.o", "y.o"):
        (build / name).write_text(name)
    kw = {"rule": "ar", "outputs": ["lib.a"]}
    run_action(build, cache, ["ar", "rcsD", "lib.a", "x.o", "y.o"], inputs=["x.o", "y.o"], **kw)
    run_action(build, cache, ["ar", "rcsD", "lib.a", "x.o"], inputs=["x.o"], **kw)
    import subprocess

    members = subprocess.run(["ar", "t", str(build / "lib.a")], capture_output=True, text=True)
    assert members.stdout.split() == ["x.o"]


def test_the_objects_a_response_file_lists_are_part_of_the_key(tmp_path):
    """A link's `@file` (the c host's kernels objects, listed by link_kernels): the key
    covers each object it lists, so an object's new bytes miss and the old ones hit."""
    import subprocess

    build = tmp_path / "b"
    build.mkdir()
    cache = tmp_path / "cache"
    (build / "x.o").write_text("x")
    (build / "kernels.rsp").write_text("k1.o\nk2.o\n")

    def archive(k2: str) -> list[str]:
        (build / "k1.o").write_text("k1")
        (build / "k2.o").write_text(k2)
        run_action(build, cache, ["ar", "rcsD", "lib.a", "x.o", "@kernels.rsp"], rule="ar",
                   outputs=["lib.a"], inputs=["x.o", "@kernels.rsp"])
        members = subprocess.run(["ar", "t", str(build / "lib.a")], capture_output=True,
                                 text=True, check=True)
        assert members.stdout.split() == ["x.o", "k1.o", "k2.o"]
        return subprocess.run(["ar", "p", str(build / "lib.a"), "k2.o"], capture_output=True,
                              text=True, check=True).stdout.split()

    assert archive("old") == ["old"]
    assert archive("new") == ["new"]  # not the archive restored from the first key
    assert archive("old") == ["old"]
    assert outcomes(build) == ["ran", "ran", "local"]


def test_an_archive_is_written_aside_and_a_killed_ars_litter_is_removed(tmp_path):
    """ar's temp file lands beside its output; the wrapper has it write in a folder of its
    own, which the next run removes whole (what a kill -9 of ar left there)."""
    build = tmp_path / "b"
    build.mkdir()
    (build / "x.o").write_text("x")
    litter = build / "lib.a.partial" / "st22Ndjv"
    litter.parent.mkdir()
    litter.write_text("half an archive")
    archive = {"rule": "ar", "outputs": ["lib.a"], "inputs": ["x.o"]}
    run_action(build, tmp_path / "cache", ["ar", "rcsD", "lib.a", "x.o"], **archive)
    assert sorted(p.name for p in build.iterdir() if p.name != ".buildgen") == ["lib.a", "x.o"]
    # A restore from the cache runs no ar: the litter goes all the same.
    litter.parent.mkdir()
    litter.write_text("half an archive")
    (build / "lib.a").unlink()
    run_action(build, tmp_path / "cache", ["ar", "rcsD", "lib.a", "x.o"], **archive)
    assert sorted(p.name for p in build.iterdir() if p.name != ".buildgen") == ["lib.a", "x.o"]


def test_bad_usage_and_bad_settings_are_errors(tmp_path):
    build = tmp_path / "b"
    build.mkdir()
    cache = tmp_path / "cache"
    done = run_action(build, cache, [], outputs=["o"], inputs=[])
    assert done.returncode == 2 and "no command" in done.stderr
    env = wrapper_env(cache, BUILDGEN_CACHE_MAX_SIZE="lots")
    done = run_action(build, cache, ["true"], outputs=["o"], inputs=[], env=env)
    assert done.returncode == 1 and "BUILDGEN_CACHE_MAX_SIZE" in done.stderr


def test_a_hit_prints_what_the_command_printed(tmp_path):
    build, cache = write_project(tmp_path / "p"), tmp_path / "cache"
    (tmp_path / "p" / "src" / "a.c").write_text(
        '#include "h.h"\nint f(void) { int unused; return N; }\n'
    )
    first = compile_a(build, cache, include="-I../include -Wall")
    assert "unused variable" in first.stderr
    (build / "a.o").unlink()
    again = compile_a(build, cache, include="-I../include -Wall")
    assert outcomes(build) == ["ran", "local"]
    assert again.stderr == first.stderr  # the warning, replayed from the cache


def test_explain_writes_what_the_key_covers(tmp_path):
    import json

    build, cache = write_project(tmp_path / "p"), tmp_path / "cache"
    env = wrapper_env(cache, BUILDGEN_CACHE_EXPLAIN="1")
    compile_a(build, cache, env=env)
    first = json.loads((build / ".buildgen" / "keys" / "a.o.json").read_text())
    assert first["outcome"] == "ran" and first["base"]["rule"] == "cc"
    assert first["base"]["inputs"][0][0] == "<root>/src/a.c"
    assert "<root>/include/h.h" in [name for name, _ in first["hidden"]]  # a header
    (build / "a.o").unlink()
    compile_a(build, cache, env=env)
    second = json.loads((build / ".buildgen" / "keys" / "a.o.json").read_text())
    assert second["outcome"] == "local" and second["key"] == first["key"]
