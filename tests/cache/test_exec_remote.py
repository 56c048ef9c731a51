"""The wrapper's use of a remote cache, against an in-memory stand-in with the client's
interface (the real client and a real nginx: test_remote*.py)."""

from __future__ import annotations

from pathlib import Path

from cache_helpers import write_project

from buildgen.cache import exec as cache_exec
from buildgen.cache.action import ActionSpec
from buildgen.cache.model import ActionResult
from buildgen.cache.settings import resolve_settings


class FakeRemote:
    def __init__(self, read_only: bool = False):
        self.read_only = read_only
        self.ac: dict[str, ActionResult] = {}
        self.cas: dict[str, bytes] = {}

    def get_action(self, key: str) -> ActionResult | None:
        return self.ac.get(key)

    def put_action(self, key: str, result: ActionResult) -> None:
        if not self.read_only:
            self.ac[key] = result

    def get_blob(self, digest: str, size: int | None = None) -> bytes | None:
        return self.cas.get(digest)

    def put_blob(self, digest: str, data: bytes) -> None:
        if not self.read_only:
            self.cas[digest] = data

    def has_blob(self, digest: str) -> bool:
        return digest in self.cas

    def upload_action(
        self, key: str, result: ActionResult, root: Path, *, force: bool = False
    ) -> None:
        if self.read_only:
            return
        for f in result.outputs:
            if force or not self.has_blob(f.digest):
                self.put_blob(f.digest, (root / f.path).read_bytes())
        self.put_action(key, result)


SPEC = ActionSpec(
    rule="cc", root="..", outputs=("a.o",), inputs=("../src/a.c",),
    command=("gcc", "-O1", "-I../include", "-MD", "-MF", "a.o.d", "-c", "../src/a.c",
             "-o", "a.o"),
    depfile="a.o.d",
)  # fmt: skip


def _run(build: Path, local: Path, remote: FakeRemote, monkeypatch) -> str:
    monkeypatch.chdir(build)
    monkeypatch.setattr(cache_exec, "_open_remote", lambda settings, build: remote)
    settings = resolve_settings({"remote": "http://fake"}, {"BUILDGEN_CACHE_DIR": str(local)})
    outcome, code = cache_exec.CachedAction(SPEC, settings, build).execute()
    assert code == 0
    return outcome


def test_a_clone_with_an_empty_local_cache_restores_from_the_remote(tmp_path, monkeypatch):
    remote = FakeRemote()
    a = write_project(tmp_path / "a")
    assert _run(a, tmp_path / "local-a", remote, monkeypatch) == "ran"
    assert len(remote.ac) == 2  # the object's entry and its header sets
    b = write_project(tmp_path / "elsewhere" / "b")
    assert _run(b, tmp_path / "local-b", remote, monkeypatch) == "remote"
    assert (b / "a.o").read_bytes() == (a / "a.o").read_bytes()
    assert "../include/h.h" in (b / "a.o.d").read_text()
    # What the remote gave is kept locally: the next lookup needs no network.
    (b / "a.o").unlink()
    remote.ac.clear()
    assert _run(b, tmp_path / "local-b", remote, monkeypatch) == "local"


def test_a_read_only_remote_is_read_and_never_written(tmp_path, monkeypatch):
    remote = FakeRemote(read_only=True)
    build = write_project(tmp_path / "a")
    assert _run(build, tmp_path / "local", remote, monkeypatch) == "ran"
    assert remote.ac == {} and remote.cas == {}


def test_a_bad_remote_blob_means_running(tmp_path, monkeypatch):
    remote = FakeRemote()
    a = write_project(tmp_path / "a")
    _run(a, tmp_path / "local-a", remote, monkeypatch)
    objects = [d for d, data in remote.cas.items() if data.startswith(b"\x7fELF")]
    assert len(objects) == 1
    del remote.cas[objects[0]]  # the client returns None for a blob it cannot verify
    b = write_project(tmp_path / "b")
    assert _run(b, tmp_path / "local-b", remote, monkeypatch) == "ran"
    assert (b / "a.o").read_bytes() == (a / "a.o").read_bytes()
