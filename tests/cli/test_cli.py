"""`buildgen` command line: dispatch, errors printed once, clean removes only our files."""

import pytest
from cli_helpers import run_python, small_project

from buildgen import __version__
from buildgen.cli import main


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"buildgen {__version__}"


def test_python_dash_m_buildgen_works():
    done = run_python("-m", "buildgen", "--help")
    assert done.returncode == 0
    for command in ("gen", "build", "clean"):
        assert command in done.stdout


def test_errors_are_printed_once_with_their_location(tmp_path, capsys):
    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text("buildgen: 1\nmodels:\n  m: {source: nowhere.onnx, targets: [c]}\n")
    assert main(["gen", "--manifest", str(manifest)]) == 1
    err = capsys.readouterr().err
    assert f"{manifest}:3:" in err and "file not found" in err
    assert err.count("error:") == 1
    assert not (tmp_path / "build").exists()


def test_a_missing_manifest_is_an_error(tmp_path, capsys):
    assert main(["gen", "--manifest", str(tmp_path / "nope.yaml")]) == 1
    assert "manifest not found" in capsys.readouterr().err


def test_only_build_takes_ninja_arguments(capsys):
    with pytest.raises(SystemExit):
        main(["gen", "--", "-j2"])
    assert "after '--'" in capsys.readouterr().err


def test_gen_writes_the_build_files_once(tmp_path):
    manifest = small_project(tmp_path / "proj")
    assert main(["gen", "--manifest", str(manifest)]) == 0
    build = tmp_path / "proj" / "build"
    text = (build / "build.ninja").read_text()
    assert "build m/graph.json m/weights.bin m/constants.bin: import ../models/m.onnx\n" in text
    assert str(tmp_path) not in text  # paths under the project are relative
    for rel in ("_targets/cpu/target.json", "_targets/cpu/options/c.json",
                "_targets/c/options/target.json"):
        assert (build / rel).is_file()
    stamps = {p: p.stat().st_mtime_ns for p in build.rglob("*") if p.is_file()}
    assert main(["gen", "--manifest", str(manifest)]) == 0
    assert {p: p.stat().st_mtime_ns for p in build.rglob("*") if p.is_file()} == stamps


def test_build_passes_names_and_ninja_arguments_through(tmp_path, capfd):
    manifest = small_project(tmp_path / "proj")
    build = tmp_path / "out"
    assert main(["build", "--manifest", str(manifest), "--build-dir", str(build),
                 "m-cpu", "--", "-n"]) == 0
    out = capfd.readouterr().out
    assert "IMPORT m" in out and "LINK m/cpu libm.so" in out
    assert "PARTITION m/c\n" not in out  # only the named target
    assert not (build / "m" / "graph.json").exists()  # -n: nothing ran


def test_target_errors_point_into_the_manifest(tmp_path, capsys):
    manifest = small_project(tmp_path / "proj")
    manifest.write_text(manifest.read_text().replace("opt_level: 2", "opt_levle: 2"))
    assert main(["gen", "--manifest", str(manifest)]) == 1
    err = capsys.readouterr().err
    assert f"{manifest}:3:" in err and "did you mean 'opt_level'?" in err
