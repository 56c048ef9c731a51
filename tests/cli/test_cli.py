"""`buildgen` command line: dispatch, errors printed once, clean removes only our files."""

import pytest
from cli_helpers import run_python

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
