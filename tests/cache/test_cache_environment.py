"""A build whose compiler environment differs (CPATH finds another math.h) misses the cache
instead of restoring the other environment's objects; the same environment hits, and its
restored files have the modes a build gives them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "ninja"))
from small_project import write_project  # noqa: E402


def build(project: Path, cache: Path, **extra_env: str) -> dict[str, str]:
    """Build in a fresh build folder; {action output: how it finished} from the journal."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("BUILDGEN_") and k not in ("CPATH", "C_INCLUDE_PATH")}
    env["BUILDGEN_PREBUILT"] = "off"  # as tests/conftest.py says
    env.update(PYTHONPATH=str(REPO), BUILDGEN_CACHE_DIR=str(cache), **extra_env)
    build_dir = project / f"build-{len(list(project.glob('build-*')))}"
    done = subprocess.run([sys.executable, "-m", "buildgen", "build", "--build-dir",
                           str(build_dir)], cwd=project, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    journal = build_dir / ".buildgen" / "actions.jsonl"
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    return {str(e["out"]): str(e["outcome"]) for e in entries}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_cpath_change_misses_and_the_same_environment_hits(tmp_path: Path) -> None:
    project = tmp_path / "p"
    write_project(project)
    headers = tmp_path / "other-headers"
    headers.mkdir()
    (headers / "math.h").write_text("#include_next <math.h>\n#define BG_OTHER_MATH 1\n")
    cache = tmp_path / "cache"
    first = build(project, cache)
    assert set(first.values()) == {"ran"}
    again = build(project, cache)
    assert set(again.values()) == {"local"}
    for name in ("tiny/cpu/include/tiny.h", "tiny/cpu/libtiny.so", "build.ninja"):
        built, restored = (project / f"build-{i}" / name for i in (0, 1))
        assert built.stat().st_mode == restored.stat().st_mode, name  # not mkstemp's 0600
    assert (project / "build-0" / "build.ninja").stat().st_mode & 0o044 == 0o044 & ~_umask()
    other = build(project, cache, CPATH=str(headers))
    compiles = {out: how for out, how in other.items() if out.endswith(".o")}
    assert compiles and set(compiles.values()) == {"ran"}, other
