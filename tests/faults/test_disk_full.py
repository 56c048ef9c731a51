"""ENOSPC for real: the build folder, then the cache folder, on a tmpfs too small for them.

The disk is a tmpfs mounted for each trial (root only: the tests skip, saying why, where
mounting is refused), sized by a seeded draw between "fails at gen's first file" and "just
fits", so each trial runs out of space at another point: gen's files, an import, a
compile's object, the archive, the link, ninja's own logs. Half the trials build with an
empty cache (the tools run and write into the full folder), half with a warm one (the
cache's restores are what fail).

- Build folder full: the build must fail with exit status 1 and an error naming the action
  or file, never a traceback; after `mount -o remount` makes room, the next build must
  succeed with outputs byte-identical to a reference build made elsewhere (so nothing
  half-written was trusted), and the one after must run nothing.
- Cache folder full: caching is best-effort, so every build must succeed with the right
  bytes; after making room, a fresh copy of the project built from that cache must get
  the reference bytes too (nothing truncated was stored and restored), and every blob
  left in the cache must match its hash.

Counts and timings are printed (pytest -s); BUILDGEN_FAULT_TRIALS raises the trial counts.
"""

from __future__ import annotations

import random

import pytest
from disk_helpers import (
    PAGE,
    Builder,
    Reference,
    Trials,
    built_beside_faulty_cache,
    check_cache_restores,
    check_rebuild,
    judge_failure,
    remount,
    require_tmpfs,
    stop_workers_after,
    tmpfs,
    trial_count,
    write_project,
)

pytestmark = pytest.mark.slow

ENOSPC = "No space left on device"
ROOMY_KIB = 32 * 1024
SEED = 20261126


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("disk-full")
    require_tmpfs(root / "probe")
    builder = Builder(root / "workers")
    with stop_workers_after(builder):
        yield Reference(root, builder)


def test_a_full_build_folder_fails_clearly_and_the_next_build_is_right(reference, tmp_path):
    ref = reference
    rng = random.Random(SEED)
    trials = Trials("ENOSPC in the build folder")
    # Peak use is above the final (temp files beside outputs, ninja's logs): a few more.
    top = ref.build_pages + 8
    for index in range(trial_count(6)):
        pages = rng.randint(1, top)
        warm = index % 2 == 1
        cache = ref.cache if warm else tmp_path / f"cold-cache-{index}"
        trial = f"trial {index}: {pages} pages of {top}, {'warm' if warm else 'empty'} cache"
        project = write_project(tmp_path / f"project-{index}", ref.model)
        trials.counts["trials"] += 1
        with tmpfs(project / "build", pages * PAGE // 1024, ref.builder):
            first = ref.builder.build(project, cache)
            judge_failure(trials, trial, first, ref, project, ENOSPC)
            remount(project / "build", ROOMY_KIB)
            check_rebuild(trials, trial, ref, project, cache)
    trials.check()


def test_a_full_cache_folder_costs_only_hits(reference, tmp_path):
    ref = reference
    rng = random.Random(SEED + 1)
    trials = Trials("ENOSPC in the cache folder")
    top = ref.cache_pages + 8
    for index in range(trial_count(3)):
        pages = rng.randint(1, top)
        trial = f"trial {index}: a cache of {pages} pages of {top}"
        cache = tmp_path / f"cache-{index}"
        trials.counts["trials"] += 1
        with tmpfs(cache, pages * PAGE // 1024):
            first_project = write_project(tmp_path / f"first-{index}", ref.model)
            first = ref.builder.build(first_project, cache)
            if not built_beside_faulty_cache(trials, trial, first, ref, first_project, "full"):
                continue
            remount(cache, ROOMY_KIB)
            # A fresh copy elsewhere restores whatever the full cache kept.
            project = write_project(tmp_path / f"second-{index}", ref.model)
            check_cache_restores(trials, trial, ref, cache, project)
    trials.check()
