"""`buildgen build` of the examples with a real nginx as the remote cache, as CI uses it.

Clone A builds once with an empty local cache and fills the server (module fixture); each
test then starts its own nginx on a copy of that store and builds a fresh clone B at another
path with another empty local cache. Every build sends a token: it must reach the server
and nothing on disk.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from nginx import NginxServer, require_nginx, start_nginx

from buildgen.cache.journal import read_entries

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TOKEN = "e2e-s3cret-9d1f0c"


@dataclass(frozen=True)
class WarmRemote:
    store: Path  # a copy of the server's store after clone A's build
    libraries: dict[str, bytes]  # clone A's libraries, by path relative to the build dir
    actions: int  # how many actions A ran


def make_clone(dest: Path) -> Path:
    (dest / "examples").mkdir(parents=True)
    shutil.copy2(REPO / "BUILD.yaml", dest / "BUILD.yaml")
    shutil.copytree(REPO / "examples" / "models", dest / "examples" / "models")
    return dest


def build(clone: Path, server: NginxServer, local: Path, **env: str) -> str:
    """`buildgen build` in ``clone``; returns its output (the summary is on stdout)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    full["BUILDGEN_PREBUILT"] = "off"  # as tests/conftest.py says
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full.get("PYTHONPATH")]))
    full.update(
        BUILDGEN_CACHE_DIR=str(local),
        BUILDGEN_REMOTE_CACHE=server.url,
        BUILDGEN_REMOTE_CACHE_TOKEN=TOKEN,
        **env,
    )
    done = subprocess.run(
        [sys.executable, "-m", "buildgen", "build"],
        cwd=clone, env=full, capture_output=True, text=True, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert TOKEN not in output
    return output


def libraries(build_dir: Path) -> dict[str, bytes]:
    found = {
        str(p.relative_to(build_dir)): p.read_bytes()
        for p in build_dir.rglob("lib*")
        if p.suffix in (".so", ".a")
    }
    # three examples, a .so and a .a each (the c host's kernels objects go straight into
    # them: no archive of their own is built)
    assert len(found) == 6 and not [name for name in found if name.startswith("_shared/")], found
    return found


def outcomes(build_dir: Path) -> dict[str, str]:
    return {e.output: e.outcome for e in read_entries(build_dir)}


def assert_no_token_on_disk(*folders: Path) -> None:
    leaks = [
        p for folder in folders for p in folder.rglob("*")
        if p.is_file() and TOKEN.encode() in p.read_bytes()
    ]  # fmt: skip
    assert leaks == []


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> WarmRemote:
    require_nginx()
    tmp = tmp_path_factory.mktemp("clone-a")
    server = start_nginx(tmp / "nginx", log_auth=True)
    try:
        clone = make_clone(tmp / "src")
        build(clone, server, tmp / "local")
    finally:
        server.stop()
    assert all(f'auth="Bearer {TOKEN}"' in line for line in server.requests())
    assert_no_token_on_disk(clone, tmp / "local")
    ran = outcomes(clone / "build")
    assert set(ran.values()) == {"ran"}
    return WarmRemote(server.store, libraries(clone / "build"), len(ran))


@pytest.fixture
def server(warm: WarmRemote, tmp_path: Path) -> Iterator[NginxServer]:
    """A server of its own on a copy of the warm store."""
    shutil.copytree(warm.store, tmp_path / "nginx" / "store")
    server = start_nginx(tmp_path / "nginx", log_auth=True)
    yield server
    server.stop()


def test_a_fresh_clone_runs_nothing_and_writes_nothing(
    warm: WarmRemote, server: NginxServer, tmp_path: Path
) -> None:
    clone = make_clone(tmp_path / "elsewhere" / "clone-b")
    # A pull request's runner: read-only, its own empty local cache.
    output = build(clone, server, tmp_path / "local-b", BUILDGEN_REMOTE_CACHE_READ_ONLY="1")

    got = outcomes(clone / "build")
    assert len(got) == warm.actions and set(got.values()) == {"remote"}
    assert libraries(clone / "build") == warm.libraries
    assert f"0 ran, 0 restored from the local cache, {warm.actions} from the remote" in output
    assert "  warning: " not in output
    requests = server.requests()
    assert requests and not [r for r in requests if not r.startswith(("GET", "HEAD"))]
    assert all(f'auth="Bearer {TOKEN}"' in r for r in requests)
    assert_no_token_on_disk(clone, tmp_path / "local-b")


def test_a_corrupted_blob_is_detected_rebuilt_reported_and_replaced(
    warm: WarmRemote, server: NginxServer, tmp_path: Path
) -> None:
    library = "mlp/cpu/libmlp.so"
    digest = hashlib.sha256(warm.libraries[library]).hexdigest()
    server.cas_path(digest).write_bytes(b"\x7fELF but not the library")
    clone = make_clone(tmp_path / "clone-b")
    output = build(clone, server, tmp_path / "local-b")

    got = outcomes(clone / "build")
    assert got.pop(library) == "ran"
    assert set(got.values()) == {"remote"}
    assert libraries(clone / "build") == warm.libraries
    assert f"warning: remote cache blob {digest} failed verification" in output
    assert "1 ran" in output
    # A writable runner uploaded the rebuilt library over the bad blob.
    assert server.cas_path(digest).read_bytes() == warm.libraries[library]


def test_the_server_stopped_mid_build_leaves_a_correct_build(
    warm: WarmRemote, server: NginxServer, tmp_path: Path
) -> None:
    clone = make_clone(tmp_path / "clone-b")
    journal = clone / "build" / ".buildgen" / "actions.jsonl"

    def stop_after_three_actions() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if journal.exists() and len(journal.read_bytes().splitlines()) >= 3:
                break
            time.sleep(0.01)
        server.stop()

    watcher = threading.Thread(target=stop_after_three_actions)
    watcher.start()
    try:
        output = build(clone, server, tmp_path / "local-b")
    finally:
        watcher.join()

    got = list(outcomes(clone / "build").values())
    assert len(got) == warm.actions
    assert got.count("remote") >= 3 and got.count("ran") >= 1, got
    assert libraries(clone / "build") == warm.libraries
    warnings = [line for line in output.splitlines() if line.startswith("  warning: ")]
    assert len(warnings) == 1 and "unreachable" in warnings[0], output
    assert_no_token_on_disk(clone, tmp_path / "local-b")
