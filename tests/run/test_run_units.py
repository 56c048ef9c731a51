"""`buildgen run`'s parts that need no library: the driver's source and compile errors,
running under an emulator prefix, inputs and outputs files. Quick."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from buildgen.errors import BuildgenError
from buildgen.ir.graph import DType
from buildgen.ninja.layout import TargetFiles
from buildgen.run import tensors
from buildgen.run.driver import DriverBuild, _compile, driver_source
from buildgen.run.execute import run_driver
from buildgen.run.tensors import TensorSpec

X = TensorSpec("x", np.dtype("float32"), (2, 3))
IDS = TensorSpec("ids", np.dtype("int64"), (4,))


def test_driver_source_is_the_models_api_only():
    source = driver_source("mlp")
    assert source == driver_source("mlp")  # deterministic
    assert '#include "mlp.h"' in source and "mlp_create(&model)" in source
    assert "MLP_NUM_INPUTS + 1" in source and "@" not in source
    # The timed runs, and the warm-up of a library built with profile: true.
    assert "cnn" not in source and driver_source("cnn").count("cnn_run(") == 2


def test_a_failed_driver_compile_shows_the_compilers_errors(tmp_path):
    build = DriverBuild(tmp_path, TargetFiles("m", "cpu"))
    broken = tmp_path / "broken.c"
    broken.write_text("int main(void) { return no_such_name; }\n")
    with pytest.raises(BuildgenError) as caught:
        _compile(["cc", "-c", str(broken), "-o", str(tmp_path / "x.o")], build)
    text = str(caught.value.diagnostics[0].message)
    assert "the driver of m/cpu did not compile" in text and "no_such_name" in text
    with pytest.raises(BuildgenError, match="compiler 'no-such-cc' not found"):
        _compile(["no-such-cc", str(broken)], build)


def test_a_missing_emulator_says_how_to_install_it(tmp_path):
    with pytest.raises(BuildgenError) as caught:
        run_driver(Path("/bin/true"), ["no-such-dir/qemu-aarch64", "-L", "/x"], tmp_path / "i",
                   tmp_path / "o", 1, "m/arm")
    diagnostic = caught.value.diagnostics[0]
    assert "emulator 'no-such-dir/qemu-aarch64' is not an executable" in diagnostic.message
    assert diagnostic.hint and "apt-get install qemu-user" in diagnostic.hint


def test_a_crashing_driver_is_reported_with_its_signal(tmp_path):
    crash = ["sh", "-c", "kill -SEGV $$", "sh"]  # an "emulator" that dies of SIGSEGV
    with pytest.raises(BuildgenError, match=r"m/cpu: the driver was killed by SIGSEGV"):
        run_driver(Path("/bin/true"), crash, tmp_path / "i", tmp_path / "o", 1, "m/cpu")


def test_a_driver_for_another_machine_asks_for_an_emulator(tmp_path):
    foreign = tmp_path / "driver"
    foreign.write_bytes(b"\x7fELF" + bytes(60))  # an ELF header this machine cannot run
    foreign.chmod(foreign.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(BuildgenError) as caught:
        run_driver(foreign, [], tmp_path / "i", tmp_path / "o", 1, "m/arm")
    assert "cannot execute its driver here" in caught.value.diagnostics[0].message
    assert "emulator:" in (caught.value.diagnostics[0].hint or "")


def test_random_inputs_are_deterministic_and_in_range():
    first = tensors.random_inputs([X, IDS], seed=3)
    again = tensors.random_inputs([X, IDS], seed=3)
    other = tensors.random_inputs([X, IDS], seed=4)
    assert all(np.array_equal(first[k], again[k]) for k in first)
    assert not np.array_equal(first["x"], other["x"])
    assert first["x"].dtype == np.float32 and 0 <= first["x"].min() < first["x"].max() < 1
    assert first["ids"].dtype == np.int64 and set(np.unique(first["ids"])) <= {0, 1}


def test_inputs_are_checked_against_the_model(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, x=np.ones((2, 3)), ids=np.arange(4))  # float64: cast to float32
    feeds = tensors.load_inputs(path, [X, IDS])
    assert feeds["x"].dtype == np.float32 and feeds["ids"].dtype == np.int64
    np.savez(path, x=np.ones((3, 2), np.float32), ids=np.arange(4))
    with pytest.raises(BuildgenError, match=r"input 'x' is float32\[3, 2\], expected x: "
                       r"float32\[2, 3\]"):
        tensors.load_inputs(path, [X, IDS])
    np.savez(path, x=np.ones((2, 3), np.float32), ids=np.ones(4, np.float32))
    with pytest.raises(BuildgenError, match="input 'ids' is float32"):
        tensors.load_inputs(path, [X, IDS])


def test_raw_files_and_npz_round_trip(tmp_path):
    values = {"x": np.arange(6, dtype=np.float32).reshape(2, 3),
              "ids": np.array([5, -1, 2, 7], np.int64)}
    tensors.write_raw(tmp_path / "raw", [X, IDS], values)
    assert (tmp_path / "raw").stat().st_size == 6 * 4 + 4 * 8
    back = tensors.read_raw(tmp_path / "raw", [X, IDS])
    assert all(np.array_equal(back[k], values[k]) for k in values)
    named = {"file": values["x"], "a/b": values["ids"]}  # names np.savez would refuse
    tensors.save_npz(tmp_path / "out.npz", named)
    first = (tmp_path / "out.npz").read_bytes()
    with np.load(tmp_path / "out.npz") as loaded:
        assert sorted(loaded.files) == ["a/b", "file"]
        assert np.array_equal(loaded["file"], values["x"])
    tensors.save_npz(tmp_path / "out.npz", named)
    assert (tmp_path / "out.npz").read_bytes() == first  # same outputs, same bytes
    with pytest.raises(BuildgenError, match="wrote 56 bytes of outputs, expected 72"):
        tensors.read_raw(tmp_path / "raw", [X, IDS, TensorSpec("z", np.dtype("bool"), (16,))])


def test_summary_line():
    line = tensors.summary(X, np.array([[0, 1, 2], [3, 4, np.nan]], np.float32))
    assert line.startswith("x  float32[2, 3]  min ") and "(1 NaN)" in line
    assert DType.BOOL.value == "bool" and tensors.summary(
        TensorSpec("e", np.dtype("float32"), (0,)), np.zeros(0, np.float32)).endswith("(empty)")


def test_a_file_that_is_not_an_npz(tmp_path):
    bad = tmp_path / "in.npz"
    bad.write_text("not a zip")
    with pytest.raises(BuildgenError, match="not a readable .npz file"):
        tensors.load_inputs(bad, [X])
    with pytest.raises(BuildgenError, match="no such file"):
        tensors.load_inputs(tmp_path / "absent.npz", [X])
    np.save(tmp_path / "one.npy", np.zeros(3))
    with pytest.raises(BuildgenError, match="a single .npy array"):
        tensors.load_inputs(tmp_path / "one.npy", [X])
    assert os.path.exists(bad)


def test_emulator_for_reads_the_targets_emulator():
    from buildgen.run.execute import emulator_for
    from buildgen.targets import resolve_target

    assert emulator_for(resolve_target("t", {"kind": "c"})) == ()
    written = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]
    try:
        target = resolve_target("t", {"kind": "c", "emulator": written})
    except BuildgenError:
        pytest.skip("the c host has no `emulator` attribute yet")
    assert emulator_for(target) == tuple(written)
