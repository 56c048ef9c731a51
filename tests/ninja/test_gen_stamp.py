"""`buildgen build` skips gen when its stamp vouches for build.ninja (gen_stamp.py), and
runs it whenever something gen reads but ninja cannot see has changed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from small_project import write_project

from buildgen.ninja.gen import generate
from buildgen.ninja.gen_stamp import STAMP, fresh_build_dir, write_stamp

REPO = Path(__file__).resolve().parents[2]


def gen_and_stamp(manifest: Path, build_dir: Path | None = None) -> Path:
    out = generate(manifest, build_dir).build_dir
    write_stamp(manifest, build_dir, out)
    return out


@pytest.fixture
def manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in [k for k in os.environ if k.startswith("BUILDGEN_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("BUILDGEN_PREBUILT", "off")  # as tests/conftest.py says
    return write_project(tmp_path / "p")


def test_a_stamped_build_dir_is_fresh_until_the_manifest_changes(manifest: Path) -> None:
    out = gen_and_stamp(manifest)
    assert (out / STAMP).is_file()
    assert fresh_build_dir(manifest, None) == out
    manifest.write_text(manifest.read_text() + "\n# a comment is a change too\n")
    assert fresh_build_dir(manifest, None) is None


def test_a_variable_gen_reads_makes_it_stale(manifest: Path, monkeypatch) -> None:
    gen_and_stamp(manifest)
    monkeypatch.setenv("BUILDGEN_CACHE", "off")  # gen writes plain commands then
    assert fresh_build_dir(manifest, None) is None
    monkeypatch.delenv("BUILDGEN_CACHE")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert fresh_build_dir(manifest, None) is None


def test_a_build_ninja_gen_wrote_since_is_not_vouched_for(manifest: Path, monkeypatch) -> None:
    out = gen_and_stamp(manifest)
    monkeypatch.setenv("BUILDGEN_CACHE", "off")
    generate(manifest)  # by hand (or by ninja's generator rule), other settings
    monkeypatch.delenv("BUILDGEN_CACHE")
    assert fresh_build_dir(manifest, None) is None
    (out / "build.ninja").unlink()
    assert fresh_build_dir(manifest, None) is None


def test_build_dir_from_the_manifest_or_the_command_line(manifest: Path) -> None:
    manifest.write_text(manifest.read_text() + "build_dir: 'out'  # ours\n")
    out = gen_and_stamp(manifest)
    assert out == manifest.parent / "out" and fresh_build_dir(manifest, None) == out
    elsewhere = manifest.parent / "elsewhere"
    assert gen_and_stamp(manifest, elsewhere) == elsewhere
    assert fresh_build_dir(manifest, elsewhere) == elsewhere
    assert fresh_build_dir(manifest, manifest.parent / "third") is None


def test_a_no_op_build_imports_no_manifest_machinery(manifest: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")},
           "PYTHONPATH": str(REPO), "BUILDGEN_CACHE_DIR": str(manifest.parent / "cache"),
           "BUILDGEN_PREBUILT": "off"}

    def build(*flags: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, *flags, "-m", "buildgen", "build"],
                              cwd=manifest.parent, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    build()
    again = build("-X", "importtime")
    assert "no work to do" in again.stdout
    # The summary still counts the build's actions (all of them up to date).
    counted = re.search(r"buildgen: (\d+) actions: 0 ran, .* (\d+) up to date", again.stdout)
    assert counted and int(counted[1]) == int(counted[2]) >= 9, again.stdout
    imported = {line.rpartition("|")[2].strip() for line in again.stderr.splitlines()}
    assert "buildgen.ninja.gen" not in imported and "yaml" not in imported
    assert "jsonschema" not in imported
    # ninja's generator rule still sees what it tracks: a touched manifest re-runs gen
    # (through ninja), which rewrites nothing, so nothing else runs.
    newer = (manifest.parent / "build" / "build.ninja").stat().st_mtime_ns + 10**9
    os.utime(manifest, ns=(newer, newer))
    touched = build().stdout
    assert "GEN build.ninja" in touched and " actions: 0 ran, 0 restored" in touched


def test_gen_imports_no_schema_validator_for_a_good_manifest(manifest: Path) -> None:
    """jsonschema (~60 ms to import) is for explaining a bad manifest; a good one is
    accepted by the generated check (buildgen/schemacheck.py), twice: once to make and keep
    that check, once reading it back."""
    probe = ("import sys; from pathlib import Path; from buildgen.ninja.gen import generate; "
             f"generate(Path({str(manifest)!r})); print(sorted(m for m in sys.modules "
             "if m.split('.')[0] == 'jsonschema'))")
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "XDG_CACHE_HOME": str(manifest.parent / "xdg")}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                              text=True, timeout=300, check=True)
        assert done.stdout.strip() == "[]", done.stdout
