"""Four builds at once sharing one small action cache: eviction runs under them, entries are
damaged between rounds, and every library still comes out byte-identical to a reference.

Four copies of a project (each its own folder and build folder) build at the same time,
round after round, against ONE cache folder whose limit (BUILDGEN_CACHE_MAX_SIZE) is 3/4
of what the builds store, so the store evicts (buildgen/cache/evict.py: when the
counted size passes the limit, one process walks the store and removes the least recently
used files down to 90%) while the other builds read and write it. The copies come in two
variants: one model named `net` in both, with other weights, so both variants' actions have
the same output paths under different keys, and copies of one variant share keys.

Before every round but the first, some entries of the store are damaged the ways a disk,
a crash or a hostile user could: a blob truncated, a blob with one byte flipped, a FIFO in
place of an action entry and of a blob, an action entry replaced by a symbolic link to the
other variant's entry for the same outputs (followed, it would restore the other model's
library), a blob replaced by a link to another blob. The store must treat each as a miss.

Checked after every round: every build succeeded and every product of it equals the
reference bytes of its variant; no temp file is left in the cache folder; the store
(`ac/` and `cas/`) is within its limit plus what the policy allows (the actions that
were storing while the last eviction walked the store, see SLACK_ACTIONS); each damaged
file is gone, replaced by a sound one, or (counted, not wrong: damage is found when read)
left unread. At the end: the eviction really ran (evict.lock exists; results the
references stored — same keys — are missing from the shared store; rounds after the first
re-ran actions).

BUILDGEN_FAULT_ROUNDS=<n> sets the rounds (default 3); BUILDGEN_FAULT_SEED the seed.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fault_helpers import (
    build_argv,
    buildgen_sources_mtime,
    compare,
    environment,
    products,
    run_build,
    summary_counts,
    worker_folder,
    write_project,
)

from buildgen.cache.evict import store_files
from buildgen.cache.stats import read_stats

ROUNDS = int(os.environ.get("BUILDGEN_FAULT_ROUNDS", "3"))
SEED = int(os.environ.get("BUILDGEN_FAULT_SEED", "20261126"))
COPIES = 4
VARIANTS = (8, 6)  # the hidden size of the model `net` of each variant: copy i is i % 2
LIMIT_FRACTION = 0.75  # of what both variants store: eviction must run, and one
# variant's results fit, so that damaged entries are there to be read
# The store may pass its limit by what actions stored while the last eviction walked it
# (each build runs up to cores + 2 actions at once): at most this many actions' worth.
SLACK_ACTIONS = COPIES * 4
_TEMP = re.compile(r"^\..+\.tmp$")


@dataclass
class Tally:
    rounds: int = 0
    builds: int = 0
    wrong: list[str] = field(default_factory=list)
    ran: int = 0  # actions run in rounds after the first (the cache could not restore them)
    restored: int = 0
    damaged: int = 0
    healed: int = 0  # damaged files replaced by a sound entry or blob
    evicted: int = 0  # damaged files gone after the round
    unread: int = 0  # damaged files still there, as no build read them
    gone: int = 0  # the references' results missing from the shared store, at most
    disturbed: int = 0
    max_store: int = 0
    drift: int = 0  # the store's true size less its count, the largest seen


@pytest.mark.slow
def test_four_builds_share_a_small_cache_that_evicts_and_is_damaged(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    started = time.monotonic()
    references: list[dict[str, bytes]] = []
    sizes: list[int] = []
    expected: set[str] = set()  # the entries and blobs the references stored
    biggest_action = 0
    with worker_folder() as workers:
        # References: each variant built alone with a cache of its own (cold: every action
        # runs), which also says how much one variant stores.
        for number, hidden in enumerate(VARIANTS):
            project = write_project(tmp_path / f"reference{number}", [hidden], name="net")
            cache = tmp_path / f"reference-cache{number}"
            done = run_build(project, environment(cache, workers, cache=True, workers=True))
            assert done.returncode == 0, done.stdout + done.stderr
            references.append(products(project / "build"))
            sizes.append(sum(e.size for e in store_files(cache)))
            expected |= _names(cache)
            biggest_action = max(biggest_action, _biggest_action(cache))
        assert references[0].keys() == references[1].keys()
        assert all(references[0][k] != references[1][k] for k in references[0]
                   if k.endswith(".so")), "the variants must differ"
        limit = int(LIMIT_FRACTION * sum(sizes))
        allowed = limit + SLACK_ACTIONS * biggest_action
        shared = tmp_path / "shared-cache"
        copies = [write_project(tmp_path / f"copy{i}", [VARIANTS[i % 2]], name="net")
                  for i in range(COPIES)]
        tally = Tally()
        print(f"\nconcurrent builds: variants store {sizes} bytes; limit {limit}, "
              f"allowed with slack {allowed} (biggest action {biggest_action})")
        for number in range(ROUNDS):
            damage = _damage(shared, rng) if number else []
            tally.damaged += len(damage)
            if damage:
                print(f"round {number}: damaged " + ", ".join(
                    f"{p.parent.parent.name}/{p.name[:8]} ({_kind(p)})" for p in damage))
            # Workers on in even rounds, off in odd ones: both paths share the store.
            env = environment(shared, workers, cache=True, workers=number % 2 == 0,
                              BUILDGEN_CACHE_MAX_SIZE=str(limit))
            _round(number, copies, env, references, tally)
            _check_store(number, shared, allowed, damage, tally)
            tally.gone = max(tally.gone, len(expected - _names(shared)))
    elapsed = time.monotonic() - started
    evicted = (shared / "evict.lock").exists()
    print(f"concurrent builds: {tally.rounds} rounds, {tally.builds} builds, "
          f"{len(tally.wrong)} wrong outcomes; after round 1: {tally.ran} actions ran, "
          f"{tally.restored} restored; {tally.damaged} files damaged, {tally.healed} healed, "
          f"{tally.evicted} evicted, {tally.unread} not read; store at most "
          f"{tally.max_store} bytes (limit {limit}), results missing from it at most "
          f"{tally.gone} of {len(expected)}, "
          f"its count off by up to {tally.drift}; "
          f"{tally.disturbed} rounds disturbed by edits of buildgen; {elapsed:.1f} s")
    assert tally.builds == ROUNDS * COPIES
    assert not tally.wrong, "\n".join(tally.wrong)
    assert evicted, "the store never evicted: no evict.lock in the cache folder"
    assert tally.gone > 0, "every result of the references is in the shared store"
    if ROUNDS > 1:
        assert tally.ran > 0, "no action re-ran after the first round: nothing was evicted"


def _round(number: int, copies: list[Path], env: dict[str, str],
           references: list[dict[str, bytes]], tally: Tally) -> None:
    tally.rounds += 1
    before = buildgen_sources_mtime()
    for project in copies:
        shutil.rmtree(project / "build", ignore_errors=True)
    running = [subprocess.Popen(build_argv(), cwd=project, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
               for project in copies]
    outputs = [p.communicate(timeout=900)[0] for p in running]
    if buildgen_sources_mtime() != before:
        tally.disturbed += 1
        tally.builds += len(copies)
        return
    for i, (project, process, output) in enumerate(zip(copies, running, outputs, strict=True)):
        tally.builds += 1
        what = f"round {number}, copy {i}"
        if process.returncode != 0:
            tally.wrong.append(f"{what}: the build failed:\n{output}")
            continue
        result = compare(project / "build", references[i % 2])
        if result.wrong or result.leftovers:
            tally.wrong.append(f"{what}: products differ from the reference: {result}")
        counts = summary_counts(output)
        if number:
            tally.ran += counts.get("ran", 0)
            tally.restored += counts.get("local", 0)
        # A no-op after it: the concurrent builds left nothing ninja would redo.
        noop = run_build(project, env)
        if noop.returncode != 0 or "ninja: no work to do." not in noop.stdout:
            tally.wrong.append(f"{what}: the next build was not a no-op:\n{noop.stdout}")


def _check_store(number: int, root: Path, allowed: int, damage: list[Path],
                 tally: Tally) -> None:
    temps = [p for p in root.rglob("*") if _TEMP.match(p.name)]
    if temps:
        tally.wrong.append(f"round {number}: temp files left in the cache: {temps}")
    size = sum(e.size for e in store_files(root))
    tally.max_store = max(tally.max_store, size)
    # What the store believes it holds (stats.json; eviction starts when it passes the
    # limit) against the truth: reported, as a count that drifts low lets the store grow.
    tally.drift = max(tally.drift, size - read_stats(root).bytes, key=abs)
    if size > allowed:
        tally.wrong.append(f"round {number}: the store holds {size} bytes, over {allowed}")
    try:
        json.loads((root / "stats.json").read_text())
    except (OSError, ValueError) as exc:
        tally.wrong.append(f"round {number}: stats.json is unreadable: {exc}")
    for path in damage:
        if not os.path.lexists(path):
            tally.evicted += 1
        elif _sound(path):
            tally.healed += 1
        else:
            # Not wrong: damage is found when read, and this one was not read this round
            # (its entry evicted first, or left unused by a build whose keys changed). The
            # products' bytes are what says whether a damaged file was ever trusted.
            tally.unread += 1


def _names(root: Path) -> set[str]:
    return {os.path.relpath(e.path, root) for e in store_files(root)}


def _sound(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    data = path.read_bytes()
    if path.parent.parent.name == "cas":
        return hashlib.sha256(data).hexdigest() == path.name
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def _kind(path: Path) -> str:
    if path.is_symlink():
        return f"a link to {Path(os.readlink(path)).name[:8]}"
    if path.is_fifo():
        return "a FIFO"
    return f"{path.stat().st_size} bytes, damaged"


def _entries(root: Path) -> list[tuple[Path, dict]]:
    found = []
    for path in sorted((root / "ac").glob("*/*")):
        if path.is_symlink() or not path.is_file() or path.name.startswith("."):
            continue
        try:
            found.append((path, json.loads(path.read_bytes())))
        except (OSError, ValueError):
            continue
    return found


def _biggest_action(root: Path) -> int:
    """The bytes one action stores at most: its entry and its blobs."""
    biggest = 0
    for path, entry in _entries(root):
        biggest = max(biggest, path.stat().st_size + sum(
            int(o["size"]) for o in entry.get("outputs", [])))
    return biggest


def _damage(root: Path, rng: random.Random) -> list[Path]:
    """Damage a few entries and blobs of the store, each a different way; returns them."""
    entries = [(p, e) for p, e in _entries(root)
               if any(not o["path"].startswith(".buildgen/") for o in e.get("outputs", []))]

    def blob(entry: dict, suffix: str) -> Path | None:
        for output in entry.get("outputs", []):
            path = root / "cas" / output["digest"][:2] / output["digest"]
            if output["path"].endswith(suffix) and path.is_file() and not path.is_symlink():
                return path
        return None

    damaged: list[Path] = []
    by_outputs: dict[tuple[str, ...], list[Path]] = {}
    for path, entry in entries:
        by_outputs.setdefault(tuple(sorted(o["path"] for o in entry["outputs"])), []).append(
            path)
    rng.shuffle(entries)
    used: set[Path] = set()

    def pick(suffix: str) -> tuple[Path, Path] | None:
        """An entry with an output named *suffix (else any output) and that blob."""
        for wanted in (suffix, ""):
            for path, entry in entries:
                found = blob(entry, wanted)
                if path not in used and found is not None and found not in used:
                    used.update((path, found))
                    return path, found
        return None

    # An entry made a link to the other variant's entry for the same outputs (a library's
    # first: followed, the build would get the other model's library).
    for _names, paths in sorted(by_outputs.items(),
                               key=lambda item: not any(n.endswith(".so") for n in item[0])):
        free = [p for p in paths if p not in used]
        if len(free) >= 2:
            free[0].unlink()
            free[0].symlink_to(free[1])
            used.update(free[:2])
            damaged.append(free[0])
            break
    if (hit := pick(".so")) is not None:  # a truncated blob
        data = hit[1].read_bytes()
        hit[1].write_bytes(data[: len(data) // 2])
        damaged.append(hit[1])
    if (hit := pick(".h")) is not None:  # one byte flipped
        data = bytearray(hit[1].read_bytes())
        data[rng.randrange(len(data))] ^= 0x01
        hit[1].write_bytes(bytes(data))
        damaged.append(hit[1])
    if (hit := pick(".a")) is not None:  # a FIFO for the action entry
        hit[0].unlink()
        os.mkfifo(hit[0])
        damaged.append(hit[0])
    if (hit := pick(".o")) is not None:  # a FIFO for a blob
        hit[1].unlink()
        os.mkfifo(hit[1])
        damaged.append(hit[1])
    if (hit := pick(".c")) is not None:  # a blob made a link to another blob
        other = next((b for _, e in entries for o in e["outputs"]
                      if (b := root / "cas" / o["digest"][:2] / o["digest"]) not in used
                      and b.is_file() and not b.is_symlink()), None)
        if other is not None:
            hit[1].unlink()
            hit[1].symlink_to(other)
            damaged.append(hit[1])
    for path in damaged:  # used last of all: eviction, which goes by age, takes them last
        os.utime(path, follow_symlinks=False)
    return damaged
