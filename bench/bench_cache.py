"""Cold vs warm-cache `buildgen build` of the examples, in one run (the CI table in docs/cache.md).

    python bench/bench_cache.py                  # best of 3 rounds; prints a table
    python bench/bench_cache.py --markdown       # the same as Markdown

Each round starts a fresh nginx (WebDAV, the Bazel HTTP cache protocol; see
tests/cache/nginx.py) on loopback and builds the root BUILD.yaml's examples in fresh copies
of the repository's examples, each at its own path, as CI runners do:

    no cache       BUILDGEN_CACHE=off: plain ninja actions, no cache wrapper (the reference)
    cold           empty local cache, empty remote: runs everything, fills both
    warm local     another clone, the local cache of `cold`, no remote
    warm remote    another clone, an empty local cache, the remote `cold` filled

Each clone's libraries must be byte-identical to the no-cache build's, or the bench stops:
a wrong answer is reported, never timed. A time is the best of the rounds: other load on
the machine only ever adds time. Outcome counts come from the build's
`.buildgen/actions.jsonl` (none without the wrapper).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "cache"))
from nginx import running_nginx  # noqa: E402 - one nginx runner, shared with the tests

SCENARIOS = ("no cache", "cold", "warm local", "warm remote")
OUTCOMES = ("ran", "local", "remote")  # as the action wrapper logs them (cache/journal.py)
LIBRARY_SUFFIXES = (".so", ".a")


@dataclass(frozen=True)
class Measurement:
    seconds: float
    outcomes: dict[str, int] | None  # None: the build ran without the cache wrapper
    libraries: dict[str, bytes]  # path relative to the build dir -> bytes


def make_clone(dest: Path) -> Path:
    """A checkout of the examples: the root manifest and the models it names."""
    (dest / "examples").mkdir(parents=True)
    shutil.copy2(REPO / "BUILD.yaml", dest / "BUILD.yaml")
    shutil.copytree(REPO / "examples" / "models", dest / "examples" / "models")
    return dest


def build(clone: Path, env_overrides: dict[str, str]) -> Measurement:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    env["BUILDGEN_PREBUILT"] = "off"  # kernels compiled in the build
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(env_overrides)
    command = [sys.executable, "-m", "buildgen", "build", "--manifest", str(clone / "BUILD.yaml")]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed in {clone}:\n{done.stdout}\n{done.stderr}")
    build_dir = clone / "build"
    libraries = {
        str(p.relative_to(build_dir)): p.read_bytes()
        for p in sorted(build_dir.rglob("lib*"))
        if p.suffix in LIBRARY_SUFFIXES
    }
    return Measurement(seconds, outcomes(build_dir), libraries)


def outcomes(build_dir: Path) -> dict[str, int] | None:
    """How many actions ran, and were restored from each cache, per the wrapper's log."""
    log = build_dir / ".buildgen" / "actions.jsonl"
    if not log.exists():
        return None
    counts: collections.Counter[str] = collections.Counter()
    for line in log.read_text().splitlines():
        counts[str(json.loads(line).get("outcome"))] += 1
    return dict(counts)


def one_round(work: Path) -> dict[str, Measurement]:
    local_a, local_b = work / "local-a", work / "local-b"
    with running_nginx(work / "nginx") as server:
        remote = {"BUILDGEN_REMOTE_CACHE": server.url}
        results = {
            "no cache": build(make_clone(work / "d"), {"BUILDGEN_CACHE": "off"}),
            "cold": build(make_clone(work / "a"), {"BUILDGEN_CACHE_DIR": str(local_a), **remote}),
            "warm local": build(make_clone(work / "c"), {"BUILDGEN_CACHE_DIR": str(local_a)}),
            "warm remote": build(
                make_clone(work / "b"), {"BUILDGEN_CACHE_DIR": str(local_b), **remote}
            ),
        }
    reference = results["no cache"].libraries
    if not reference:
        sys.exit("the examples built no libraries")
    for name, measured in results.items():
        if measured.libraries != reference:
            sys.exit(f"{name}: libraries differ from the build without a cache")
    return results


def table(rounds: list[dict[str, Measurement]], markdown: bool) -> str:
    cold = min(r["cold"].seconds for r in rounds)
    header = (
        "build",
        "wall time (s)",
        "speed-up vs cold",
        "actions run",
        "from local",
        "from remote",
    )
    rows = []
    for name in SCENARIOS:
        seconds = min(r[name].seconds for r in rounds)
        counts = rounds[-1][name].outcomes
        cells = [str(counts.get(o, 0)) if counts is not None else "-" for o in OUTCOMES]
        rows.append((name, f"{seconds:.1f}", f"{cold / seconds:.1f}x", *cells))
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    return "\n".join(
        "  ".join(
            cell.rjust(w) if i else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in (header, *rows)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp:
        rounds = []
        for i in range(args.rounds):
            rounds.append(one_round(Path(tmp) / f"round{i}"))
            times = ", ".join(f"{n} {m.seconds:.1f}s" for n, m in rounds[-1].items())
            print(f"round {i + 1}/{args.rounds}: {times}", file=sys.stderr)
    print(f"`buildgen build` of the {len(rounds[0]['cold'].libraries) // 2} examples "
          f"(best of {args.rounds} rounds, {os.cpu_count()} cores):\n")  # fmt: skip
    print(table(rounds, args.markdown))


if __name__ == "__main__":
    main()
