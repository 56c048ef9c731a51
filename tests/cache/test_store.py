"""The local store: round trips, damaged files, LRU eviction, and two processes at once."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from pathlib import Path

import pytest

from buildgen.cache import stats
from buildgen.cache.evict import evict, store_files
from buildgen.cache.model import ActionResult, OutputFile
from buildgen.cache.settings import SettingsError, parse_size, resolve_settings
from buildgen.cache.store import LocalStore


def _blob(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _result(*blobs: bytes) -> ActionResult:
    return ActionResult(tuple(
        OutputFile(f"out/{i}.o", _blob(b), len(b), executable=i == 0) for i, b in enumerate(blobs)
    ))  # fmt: skip


def test_entries_and_blobs_round_trip(tmp_path):
    store = LocalStore(tmp_path)
    data = b"object bytes"
    assert store.put_blob(_blob(data), data) == len(data)
    assert store.put_blob(_blob(data), data) == 0  # already there: nothing written
    key = "ab" * 32
    store.put_action(key, _result(data))
    assert store.get_action(key) == _result(data)
    assert store.get_blob(_blob(data)) == data
    assert store.get_action("cd" * 32) is None
    assert (tmp_path / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172")
    # Nothing but finished files: no temp file is left behind.
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()]


def test_damaged_files_are_misses(tmp_path):
    store = LocalStore(tmp_path)
    data = b"x" * 100
    store.put_blob(_blob(data), data)
    path = tmp_path / "cas" / _blob(data)[:2] / _blob(data)
    path.write_bytes(b"y" * 100)
    assert store.get_blob(_blob(data)) is None
    assert not path.exists()  # dropped, so the next store replaces it
    key = "ef" * 32
    store.put_action(key, _result(data))
    (tmp_path / "ac" / key[:2] / key).write_text("{not json")
    assert store.get_action(key) is None
    (tmp_path / "ac" / key[:2] / key).write_text(
        '{"format": 1, "exit_code": 0, "outputs": [{"path": "../escape", "digest": "'
        + "0" * 64
        + '", "size": 1, "executable": false}]}'
    )
    assert store.get_action(key) is None  # would write outside the build dir
    with pytest.raises(ValueError):
        store.get_blob("../../etc/passwd")


def test_eviction_removes_the_least_recently_used_first(tmp_path):
    store = LocalStore(tmp_path)
    blobs = [bytes([i]) * 1000 for i in range(6)]
    for age, data in enumerate(blobs):
        store.put_blob(_blob(data), data)
        path = tmp_path / "cas" / _blob(data)[:2] / _blob(data)
        os.utime(path, ns=(age * 10**9, age * 10**9))
    assert store.get_blob(_blob(blobs[0])) == blobs[0]  # a hit: now the most recent
    size = evict(tmp_path, limit=3500)
    assert size is not None and size <= 3500 * 0.9
    kept = {b for b in blobs if store.has_blob(_blob(b))}
    assert kept == {blobs[0], blobs[4], blobs[5]}
    assert stats.read_stats(tmp_path).bytes == size


def test_eviction_happens_once_the_counted_size_passes_the_limit(tmp_path):
    for i in range(5):
        stats.record(tmp_path, "ran", 1000)
        LocalStore(tmp_path).put_blob(_blob(bytes([i]) * 1000), bytes([i]) * 1000)
    assert stats.read_stats(tmp_path).bytes == 5000
    assert sum(f.size for f in store_files(tmp_path)) == 5000
    evict(tmp_path, 2000)
    assert sum(f.size for f in store_files(tmp_path)) <= 1800


def _hammer(root: str, seed: int, rounds: int, queue) -> None:
    """Store and read the same keys as the other process; report anything wrong."""
    store = LocalStore(Path(root))
    problems = 0
    for i in range(rounds):
        data = f"payload {i % 7}".encode() * 2000
        key = hashlib.sha256(f"key {i % 7}".encode()).hexdigest()
        store.put_blob(_blob(data), data)
        store.put_action(key, ActionResult((OutputFile("o", _blob(data), len(data)),)))
        found = store.get_action(key)
        blob = store.get_blob(_blob(data))
        # A miss is fine (the other process may have just evicted it); a wrong answer
        # or an exception is not.
        wrong_entry = found is not None and found.outputs[0].digest != _blob(data)
        if wrong_entry or blob not in (None, data):
            problems += 1
        stats.record(Path(root), "ran", 0)
        if (i + seed) % 10 == 0:
            evict(Path(root), 10_000)  # evictions under the other process's reads
    queue.put(problems)


def test_two_processes_share_one_store(tmp_path):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=_hammer, args=(str(tmp_path), s, 150, queue)) for s in (0, 5)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    assert [queue.get(timeout=5), queue.get(timeout=5)] == [0, 0]
    days = stats.read_stats(tmp_path).days
    assert sum(count for _, counts in days for _, count in counts) == 300  # no lost update


def test_sizes_and_settings():
    assert parse_size("2GB") == 2 * 10**9
    assert parse_size("512MiB") == 512 * 2**20
    assert parse_size("1000") == 1000
    with pytest.raises(SettingsError):
        parse_size("lots")
    env = {"BUILDGEN_CACHE_DIR": "/tmp/c", "BUILDGEN_CACHE_MAX_SIZE": "1kB",
           "BUILDGEN_REMOTE_CACHE_READ_ONLY": "1"}  # fmt: skip
    section = {"dir": "/elsewhere", "max_size": 5, "remote": "http://h:1", "read_only": False}
    settings = resolve_settings(section, env)
    assert (str(settings.dir), settings.max_size) == ("/tmp/c", 1000)
    assert settings.remote == "http://h:1" and settings.read_only and settings.enabled
    assert not resolve_settings({}, {"BUILDGEN_CACHE": "off"}).enabled
    assert resolve_settings({}, {"XDG_CACHE_HOME": "/x"}).dir == Path("/x/buildgen")
    with pytest.raises(SettingsError, match="BUILDGEN_CACHE"):
        resolve_settings({}, {"BUILDGEN_CACHE": "maybe"})


def test_what_others_store_during_an_eviction_walk_stays_counted(tmp_path):
    """Eviction measures the store by a walk; bytes another build records meanwhile must
    not vanish from the count, or the store outgrows its limit under concurrent builds."""
    stats.record(tmp_path, None, 100)
    before = stats.counted_size(tmp_path)  # the evictor starts its walk here
    stats.record(tmp_path, None, 50)  # another build stores an action meanwhile
    stats.set_size(tmp_path, 80, before)  # the walk found 80 bytes left after removals
    assert stats.counted_size(tmp_path) == 130


def test_atomic_writes_take_the_umask_make_folders_and_never_reuse_a_leftover(
        tmp_path, monkeypatch):
    from buildgen import fsutil

    old = os.umask(0o027)
    try:
        fsutil.write_atomic(tmp_path / "a" / "b" / "plain", "x")
        fsutil.write_atomic(tmp_path / "tool", b"#!/bin/sh\n", executable=True)
    finally:
        os.umask(old)
    assert (tmp_path / "a" / "b" / "plain").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "tool").stat().st_mode & 0o777 == 0o750
    # A temp file a killed process of the same id left: taken as taken, not written into.
    monkeypatch.setattr(fsutil, "_TEMPS", iter(range(10)))
    stale = tmp_path / f".plain.{os.getpid()}.0.tmp"
    stale.write_text("stale")
    fsutil.write_atomic(tmp_path / "plain", "new")
    assert (tmp_path / "plain").read_text() == "new"
    assert stale.read_text() == "stale"
    assert sorted(p.name for p in tmp_path.glob(".*.tmp")) == [stale.name]
