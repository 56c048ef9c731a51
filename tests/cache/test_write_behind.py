"""The stores a runner writes after its reply (buildgen/cache/write_behind.py): whoever
waits for them (`buildgen build`, once ninja returns) sees them all."""

from __future__ import annotations

import threading

from buildgen.cache import write_behind


def _waiter(build):
    done = threading.Event()
    thread = threading.Thread(target=lambda: (write_behind.wait_for_stores(build), done.set()))
    thread.start()
    return thread, done


def test_the_wait_ends_only_when_every_runner_has_written_its_stores(tmp_path):
    first, second = write_behind.hold(tmp_path), write_behind.hold(tmp_path)
    assert first is not None and second is not None
    thread, done = _waiter(tmp_path)
    assert not done.wait(0.3)
    written = []
    assert write_behind.finish([lambda: written.append("a")], first)
    assert not done.wait(0.3)  # the other runner is still writing
    assert write_behind.finish([lambda: written.append("b")], second)
    assert done.wait(10)
    thread.join()
    assert written == ["a", "b"]


def test_with_no_runner_writing_the_wait_returns_at_once(tmp_path):
    write_behind.wait_for_stores(tmp_path)  # no lock file yet
    write_behind.finish([], write_behind.hold(tmp_path))
    thread, done = _waiter(tmp_path)
    assert done.wait(10)
    thread.join()


def test_a_failing_store_is_reported_and_the_rest_still_run(tmp_path, capsys):
    held = write_behind.hold(tmp_path)
    ran = []

    def broken() -> None:
        raise ValueError("a bug in a store")

    assert not write_behind.finish([broken, lambda: ran.append(1)], held)
    assert ran == [1]
    assert "a bug in a store" in capsys.readouterr().err
    thread, done = _waiter(tmp_path)  # and the lock is free again
    assert done.wait(10)
    thread.join()


def test_without_a_writable_build_folder_the_stores_run_unlocked(tmp_path):
    (tmp_path / ".buildgen").write_text("a file where the folder belongs")
    assert write_behind.hold(tmp_path) is None
    ran = []
    assert write_behind.finish([lambda: ran.append(1)], None)
    assert ran == [1]
