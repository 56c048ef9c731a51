"""The build folder is checked before anything is written: never `/`, the project, a parent
of it, a file, a symlink loop or another tool's folder; a symlink to elsewhere works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from small_project import write_project

from buildgen.cli import main

REPO = Path(__file__).resolve().parents[2]


def gen(manifest: Path, build_dir: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["gen", "--manifest", str(manifest), "--build-dir", build_dir])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("/", "is the root of the file system"),
        (".", "is the manifest's own folder"),
        ("..", "is a parent of the manifest's folder"),
    ],
)
def test_folders_that_hold_the_project_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, reason: str
) -> None:
    project = tmp_path / "project"
    manifest = write_project(project)
    (project / "build.ninja").write_text("# the user's own\n")
    build_dir = str(project / where) if where != "/" else "/"
    code, err = gen(manifest, build_dir, capsys)
    assert code != 0 and reason in err and "Traceback" not in err
    assert (project / "build.ninja").read_text() == "# the user's own\n"
    assert main(["clean", "--manifest", str(manifest), "--build-dir", build_dir]) != 0
    assert (project / "build.ninja").exists()


def test_a_file_a_loop_and_a_foreign_folder_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write_project(tmp_path / "p")
    (tmp_path / "file").write_text("x")
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    cmake = tmp_path / "cmake-build"
    cmake.mkdir()
    (cmake / "build.ninja").write_text("# CMake's\n")
    for where, reason in [("file", "exists and is not a folder"), ("loop", "symlink loop"),
                          ("cmake-build", "holds files that buildgen did not write")]:
        code, err = gen(manifest, str(tmp_path / where), capsys)
        assert code != 0 and reason in err and "Traceback" not in err, err
    assert (cmake / "build.ninja").read_text() == "# CMake's\n"


def test_a_symlinked_build_folder_builds_where_it_points(tmp_path: Path) -> None:
    manifest = write_project(tmp_path / "project")
    elsewhere = tmp_path / "scratch" / "out"
    elsewhere.mkdir(parents=True)
    (tmp_path / "project" / "build").symlink_to(elsewhere)
    env = dict(os.environ, PYTHONPATH=str(REPO), BUILDGEN_CACHE="off")
    done = subprocess.run([sys.executable, "-m", "buildgen", "build", "--manifest",
                           str(manifest)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (elsewhere / "tiny" / "cpu" / "libtiny.so").exists()
    rebuilt = subprocess.run([sys.executable, "-m", "buildgen", "build", "--manifest",
                              str(manifest)], capture_output=True, text=True, env=env)
    assert rebuilt.returncode == 0
    assert "no work to do" in rebuilt.stdout + rebuilt.stderr  # paths from build.ninja hold


def test_a_folder_buildgen_wrote_before_is_reused(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    manifest = write_project(tmp_path / "p")
    build = tmp_path / "p" / "build"
    assert gen(manifest, str(build), capsys)[0] == 0
    assert gen(manifest, str(build), capsys)[0] == 0


def test_target_and_model_mistakes_are_reported_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write_project(tmp_path / "p")
    manifest.write_text(
        "buildgen: 1\n"
        "targets:\n"
        "  cpu: {kind: composite, host: {kind: c, opt_levl: 3}}\n"
        "  t3: {kind: c, threads: -1}\n"
        "models:\n"
        "  tiny: {source: models/tiny.onnx, inputs: {x: [2, 0]}, targets: [cpu, nope]}\n")
    code, err = gen(manifest, str(tmp_path / "p" / "build"), capsys)
    assert code != 0
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert [line.split(":")[1] for line in lines] == ["3", "4", "6", "6"], err
    assert "opt_levl" in lines[0] and "threads" in lines[1] and "nope" in lines[3]
