"""What buildgen itself costs, against the tools it runs, in one run (issue: build overhead).

    python bench/bench_overhead.py                 # all measurements; prints a table
    python bench/bench_overhead.py --markdown      # the same as Markdown
    python bench/bench_overhead.py --models 200    # the size of the many-model project

Measured, each the best of --rounds (other load only ever adds time), but per action:

    no-op build      `buildgen build` with nothing to do, against `python -c pass` plus
                     `ninja -C build` (also nothing to do), at 3 models (the examples) and
                     at --models tiny models
    per action       one compile (the tiny model's model.c) run by hand, and the same
                     command line as build.ninja runs it: through the worker and with
                     BUILDGEN_WORKERS=off, on a cache miss (empty cache), a miss with a
                     cache in use (the source edited) and a hit (the output removed, as
                     after a clean; with workers also with the output there, as after a
                     checkout: a runner starts the compile then); then the last miss for a
                     model's kernels source from the examples' build (encoder's c.c at
                     x86-64-v4), a compile of the size most are, and for the generated
                     model.c of the corpus models TVM_MODELS names (not written by us).
                     Each alternates with the compile by hand round by round and reports
                     medians (see _paired)
    Python stages    a clean build's import/partition/codegen/executor/report actions,
                     summed from the action journal, workers on and off
    gen              `buildgen gen` of a manifest with --gen-models models
    clean build      a clean build of --clean-models tiny models at ninja's default -j
                     (empty cache, warm worker), with its time per stage and critical path
    vs TVM           a clean build of one example model (empty cache, warm worker)
                     against TVM compiling it (bench/tvm_bench.py; --tvm-python names an
                     interpreter that has apache-tvm, else the row is skipped)

Each build's products are compared between workers on and off: a difference stops the
bench (a wrong answer is reported, never timed).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "ninja"))
from small_project import save_tiny_model  # noqa: E402 - the tests' one-model project

from buildgen.cache.write_behind import wait_for_stores  # noqa: E402

STAGES = ("import", "partition", "codegen", "executor", "report")
TINY_TARGET = '{kind: c, opt_level: 1, march: x86-64}'


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--gen-models", type=int, default=1000)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--tvm-python", default=sys.executable,
                        help="an interpreter with apache-tvm installed (default: this one)")
    parser.add_argument("--only", nargs="*", default=None,
                        choices=("noop", "action", "stages", "gen", "clean", "tvm"))
    parser.add_argument("--clean-models", type=int, default=200)
    args = parser.parse_args(argv)
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bg-overhead-") as tmp:
        root = Path(tmp)
        env = _environment(root)
        wanted = set(args.only or ("noop", "action", "stages", "gen", "clean", "tvm"))
        if "noop" in wanted:
            rows += _no_op(root / "examples", _examples(root / "examples"), env, args.rounds)
            many = _tiny_project(root / "many", args.models)
            rows += _no_op(root / "many", many, env, args.rounds,
                           label=f"{args.models} models")
        if "action" in wanted:
            rows += _per_action(root / "one", env, args.rounds)
            rows += _model_compile(root / "model-compile", env, args.rounds)
            rows += _corpus_compiles(root / "corpus-compile", env, args.rounds)
        if "stages" in wanted:
            rows += _stages(root / "stages", env)
        if "gen" in wanted:
            rows += _gen(root / "gen", args.gen_models, env, args.rounds)
        if "clean" in wanted:
            rows += _clean_build(root / "clean", args.clean_models, env)
        if "tvm" in wanted:
            rows += _versus_tvm(root / "tvm", env, args.tvm_python)
    _print(rows, args.markdown)
    return 0


def _environment(root: Path) -> dict[str, str]:
    # Without PYTHONDONTWRITEBYTECODE (set on some CI machines and sandboxes): an installed
    # buildgen has its bytecode cached, and a module compiled from source at every start
    # (each one edited since its .pyc) costs a no-op ~1 ms.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("BUILDGEN_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["BUILDGEN_CACHE_DIR"] = str(root / "cache")
    env["BUILDGEN_WORKER_DIR"] = str(root / "workers")
    # The kernels compiled at install time (buildgen/cache/prebuilt.py) only where a row
    # says so: every other row measures the build as it runs without them.
    env["BUILDGEN_PREBUILT"] = "off"
    return env


def _examples(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy2(REPO / "BUILD.yaml", folder / "BUILD.yaml")
    shutil.copytree(REPO / "examples" / "models", folder / "examples" / "models")
    return folder


def _tiny_project(folder: Path, models: int) -> Path:
    save_tiny_model(folder / "models" / "tiny.onnx")
    lines = ["buildgen: 1", "targets:", f"  cpu: {TINY_TARGET}", "models:"]
    for i in range(models):
        lines += [f"  m{i}:", "    source: models/tiny.onnx", "    inputs: {x: [2, 4]}",
                  "    targets: [cpu]"]
    (folder / "BUILD.yaml").write_text("\n".join(lines) + "\n")
    return folder


def _run(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed: {shlex.join(argv)}\n{done.stdout}{done.stderr}")
    return done.stdout


def _best(rounds: int, action: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def _buildgen(*words: str) -> list[str]:
    return [sys.executable, "-m", "buildgen", *words]


def _no_op(folder: Path, project: Path, env: dict[str, str], rounds: int,
           label: str = "3 models (examples)") -> list[tuple[str, str, str]]:
    _run(_buildgen("build"), project, env)
    _run(_buildgen("build"), project, env)  # settles the stamp
    ninja = shutil.which("ninja") or _ninja_binary()
    buildgen = _best(rounds, lambda: _run(_buildgen("build"), project, env))
    python = _best(rounds, lambda: _run([sys.executable, "-c", "pass"], project, env))
    plain = _best(rounds, lambda: _run([ninja, "-C", "build"], project, env))
    ratio = buildgen / (python + plain)
    return [(f"no-op build, {label}", f"{buildgen * 1e3:.0f} ms",
             f"{ratio:.2f}x (python -c pass {python * 1e3:.0f} ms + ninja {plain * 1e3:.0f} ms)")]


def _ninja_binary() -> str:
    import ninja

    return os.path.join(ninja.BIN_DIR, "ninja")


def _per_action(folder: Path, env: dict[str, str], rounds: int) -> list[tuple[str, str, str]]:
    project = _tiny_project(folder, 1)
    _run(_buildgen("build"), project, env)
    build = project / "build"
    target = "m0/cpu/obj/model.o"
    wrapped = _command_for(build, target)
    tool = wrapped[wrapped.index("--") + 1:]
    source = build / "m0/cpu/src/model.c"
    original = source.read_text()
    raw = _editing(source, tool, build, env)
    rows: list[tuple[str, str, str]] = []
    references: list[float] = []
    # "miss": the cache emptied first (its memo of the compiler's identity, a `cc -v`
    # probe, goes too); "miss, cache in use": a source edited each time, as in a rebuild.
    ways = [("workers on, compiled client", "on", wrapped),
            ("workers on, client.py", "on", _through_client_py(wrapped)),
            ("workers off", "off", wrapped)]
    for label, workers, command in ways:
        mode = {**env, "BUILDGEN_WORKERS": workers}
        cache = folder / f"cache-{workers}"
        cached = {**mode, "BUILDGEN_CACHE_DIR": str(cache)}

        def through(command: list[str] = command, cached: dict[str, str] = cached) -> None:
            _run(command, build, cached)

        def empty(cache: Path = cache) -> None:
            wait_for_stores(build)  # the last action's stores, written after its reply
            shutil.rmtree(cache, ignore_errors=True)

        def unlink() -> None:
            (build / target).unlink()

        if workers == "on":
            _start_worker(folder / "warm-up", mode)
        reference, missed = _paired(rounds, raw, through, prepare=empty)
        references.append(reference)
        rows.append(_overhead_row(f"{label}, miss", reference, missed))
        rows.append(_overhead_row(f"{label}, miss, cache in use",
                                  *_paired(rounds, raw, _editing(source, command, build, cached))))
        source.write_text(original)  # the entry a hit finds: the unedited source's
        _run(command, build, cached)
        reference, hits = _paired(rounds, lambda: _run(tool, build, env), through,
                                  prepare=unlink)
        rows.append((f"  through the wrapper, {label}, hit", f"{hits * 1e3:.0f} ms",
                     f"{(hits / reference) * 100:.0f}% of the compile"))
        if workers == "on":  # a runner starts a compile whose output is there, then stops it
            reference, hits = _paired(rounds, lambda: _run(tool, build, env), through)
            rows.append((f"  through the wrapper, {label}, hit, output there",
                         f"{hits * 1e3:.0f} ms", f"{(hits / reference) * 100:.0f}% of the compile"))
    return [("compile model.o, by hand", f"{statistics.median(references) * 1e3:.0f} ms",
             "the reference"), *rows]


def _model_compile(folder: Path, env: dict[str, str], rounds: int
                   ) -> list[tuple[str, str, str]]:
    """The wrapper's cost on a miss for a compile of a real model's generated kernels:
    the tiny model's model.c is the smallest compile a build runs, this one is typical."""
    project = _examples(folder)
    mode = {**env, "BUILDGEN_WORKERS": "on"}
    _start_worker(folder / "warm-up", mode)
    _run(_buildgen("build"), project, mode)
    build = project / "build"
    wrapped = _command_for(build, "encoder/cpu/obj/c.x86-64-v4.o")
    tool = wrapped[wrapped.index("--") + 1:]
    source = build / "encoder/cpu/src/c.c"
    reference, missed = _paired(rounds, _editing(source, tool, build, mode),
                                _editing(source, wrapped, build, mode))
    return [("compile encoder's c.c (x86-64-v4), by hand", f"{reference * 1e3:.0f} ms",
             "the reference"),
            _overhead_row("workers on, compiled client, miss, cache in use", reference,
                          missed)]


def _corpus_compiles(folder: Path, env: dict[str, str], rounds: int
                     ) -> list[tuple[str, str, str]]:
    """The same miss for models we did not write: each corpus model's generated model.c
    (TVM_MODELS but the example), built first with the root manifest's cpu target."""
    mode = {**env, "BUILDGEN_WORKERS": "on", "BUILDGEN_CACHE_DIR": str(folder / "cache")}
    _start_worker(folder / "warm-up", mode)
    rows = []
    for name, onnx_file, shapes in TVM_MODELS[1:]:
        project = folder / name
        _one_model_build(project, name, onnx_file, shapes, mode)
        build = project / "build"
        wrapped = _command_for(build, f"{name}/cpu/obj/model.o")
        tool = wrapped[wrapped.index("--") + 1:]
        source = build / name / "cpu" / "src" / "model.c"
        reference, missed = _paired(rounds, _editing(source, tool, build, mode),
                                    _editing(source, wrapped, build, mode))
        wait_for_stores(build)  # before the folder goes
        rows += [(f"compile {name}'s model.c, by hand", f"{reference * 1e3:.0f} ms",
                  "the reference"),
                 _overhead_row("workers on, compiled client, miss, cache in use", reference,
                               missed)]
    return rows


def _editing(source: Path, command: list[str], build: Path, env: dict[str, str]
             ) -> Callable[[], object]:
    """Run `command` after an edit of `source` (a comment: a new source each time, so a
    miss in a cache that is in use); the edit is left in place, a comment at the end."""
    original = source.read_text().split("\n/* edit ")[0]

    def run() -> None:
        # The clock's nanoseconds: a text no earlier edit had, whichever closure made it.
        source.write_text(f"{original}\n/* edit {time.monotonic_ns()} */\n")
        _run(command, build, env)
    return run


def _paired(rounds: int, reference: Callable[[], object], candidate: Callable[[], object],
            prepare: Callable[[], object] | None = None) -> tuple[float, float]:
    """(the reference's median seconds, the candidate's median + the median of the paired
    differences): the two alternate round by round, so this VM's drift (a compile's time
    moves by 20% between minutes) falls on both alike; a best-of of each apart does not.
    `prepare` runs before each candidate, off the clock (emptying the cache for a miss)."""
    pairs = []
    for _ in range(max(rounds, 3)):
        ran = []
        for action in (reference, candidate):
            if action is candidate and prepare is not None:
                prepare()
            start = time.perf_counter()
            action()
            ran.append(time.perf_counter() - start)
        pairs.append((ran[0], ran[1]))
    base = statistics.median(a for a, _ in pairs)
    return base, base + statistics.median(b - a for a, b in pairs)


def _overhead_row(label: str, reference: float, wrapped: float) -> tuple[str, str, str]:
    return (f"  through the wrapper, {label}", f"{wrapped * 1e3:.0f} ms",
            f"{(wrapped - reference) * 1e3:+.1f} ms ({(wrapped / reference - 1) * 100:+.1f}%)")


def _through_client_py(command: list[str]) -> list[str]:
    """The same action started through client.py instead of the compiled client (which gen
    uses where a C compiler works: buildgen/worker/native.py)."""
    if "--python" not in command:
        return command  # gen wrote client.py's command already
    at = command.index("--python")
    return [*command[:at - 1], command[at + 1], "-S", str(REPO / "buildgen/worker/client.py"),
            *command[at + 2:]]


def _command_for(build: Path, output: str) -> list[str]:
    ninja = shutil.which("ninja") or _ninja_binary()
    done = subprocess.run([ninja, "-C", str(build), "-t", "commands", "-s", output],
                          capture_output=True, text=True, check=True)
    return shlex.split(done.stdout.strip().splitlines()[-1])


def _stages(folder: Path, env: dict[str, str]) -> list[tuple[str, str, str]]:
    """A clean build's Python stage time as ninja saw it (.ninja_log: process start to
    exit), workers on and off, with the same products."""
    products: dict[str, dict[str, bytes]] = {}
    rows = []
    for workers in ("on", "off"):
        mode = {**env, "BUILDGEN_WORKERS": workers,
                "BUILDGEN_CACHE_DIR": str(folder / f"cache-{workers}")}
        if workers == "on":  # a warm worker, as in every build but the first of the day
            _start_worker(folder / "warm-up", mode)
        project = _examples(folder / workers)
        _run(_buildgen("build"), project, mode)
        seconds, count = _stage_seconds(project / "build")
        products[workers] = {p.name: p.read_bytes() for p in (project / "build").rglob("*.so")}
        rows.append((f"Python stages of a clean build (examples), workers {workers}",
                     f"{seconds:.2f} s", f"{count} actions, summed"))
    if products["on"] != products["off"]:
        raise SystemExit("the libraries differ between workers on and off")
    return rows


def _start_worker(folder: Path, env: dict[str, str]) -> None:
    """Build a tiny project (its first action starts a worker) and wait until it serves."""
    project = _tiny_project(folder, 1)
    _run(_buildgen("build"), project, env)
    sockets = Path(env["BUILDGEN_WORKER_DIR"])
    for _ in range(600):
        if list(sockets.glob("*.sock")):
            return
        time.sleep(0.1)
    raise SystemExit("no worker came up")


def _stage_seconds(build: Path) -> tuple[float, int]:
    """Seconds of the Python stage actions (by the journal's stage) per .ninja_log."""
    stage_outputs = set()
    for line in (build / ".buildgen" / "actions.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry.get("rule") in STAGES:
            stage_outputs.add(entry["out"])
    total, count = 0.0, 0
    for line in (build / ".ninja_log").read_text().splitlines()[1:]:
        start, end, _mtime, output, *_ = line.split("\t")
        if output in stage_outputs:
            total += (int(end) - int(start)) / 1e3
            count += 1
    return total, count


def _gen(folder: Path, models: int, env: dict[str, str], rounds: int
         ) -> list[tuple[str, str, str]]:
    project = _tiny_project(folder, models)
    seconds = _best(rounds, lambda: _run(_buildgen("gen"), project, env))
    return [(f"gen, {models} models", f"{seconds:.2f} s", "target <= 0.5 s")]


def _clean_build(folder: Path, models: int, env: dict[str, str]
                 ) -> list[tuple[str, str, str]]:
    from buildgen.ninja.critical_path import critical_path, ninja_inputs, summary_lines
    from buildgen.ninja.trace import jobs_of, parse_ninja_log, split_builds

    _start_worker(folder / "warm-up", env)
    project = _tiny_project(folder / "p", models)
    start = time.perf_counter()
    _run(_buildgen("build"), project, {**env, "BUILDGEN_CACHE_DIR": str(folder / "cache")})
    seconds = time.perf_counter() - start
    build = project / "build"
    jobs = jobs_of(split_builds(parse_ninja_log((build / ".ninja_log").read_text()).entries)[-1])
    lines = summary_lines(jobs, critical_path(jobs, ninja_inputs(build)))
    print("\n".join([f"clean build of {models} models:", *lines]), file=sys.stderr)
    path = lines[1].split(":", 1)[1].split(" wall")[0].strip() if len(lines) > 1 else "-"
    return [(f"clean build, {models} tiny models", f"{seconds:.1f} s",
             f"{len(jobs)} actions; critical path {path}")]


# One model of the examples and two the project did not write (HuggingFace exports of the
# test corpus): (name, ONNX file, input shapes). The c host's kernels families differ: the
# MLP calls the GEMM, the CNNs the convolution and the pooling too.
TVM_MODELS = (
    ("mlp", REPO / "examples" / "models" / "mlp.onnx", {"x": [8, 512]}),
    ("hf_mobilenet_v2", REPO / "tests" / "corpus" / "models" / "hf_mobilenet_v2.onnx",
     {"pixel_values": [1, 3, 96, 96]}),
    ("hf_efficientnet", REPO / "tests" / "corpus" / "models" / "hf_efficientnet.onnx",
     {"pixel_values": [1, 3, 64, 64]}),
)


def _versus_tvm(folder: Path, env: dict[str, str], tvm_python: str
                ) -> list[tuple[str, str, str]]:
    """Each of TVM_MODELS, both compilers from scratch: TVM's compile, and buildgen's clean
    build (the root manifest's target, ninja's default -j, worker warm) with an empty cache
    three ways: the c host's kernels compiled in the build (the first build on a machine
    without them), taken from the store `pip install` filled (buildgen/cache/prebuilt.py),
    and cached by another model's build before (a new project on a machine that built
    something else; the model's own actions all run)."""
    probe = subprocess.run([tvm_python, "-c", "import tvm"], capture_output=True)
    if probe.returncode != 0:
        return [("clean build vs TVM compile", "skipped", "no apache-tvm (pass --tvm-python)")]
    _start_worker(folder / "warm-up", env)
    installed = _installed_kernels(env)
    rows = []
    for name, onnx_file, shapes in TVM_MODELS:
        start = time.perf_counter()
        _run([tvm_python, str(REPO / "bench" / "tvm_bench.py"), "compile", str(onnx_file),
              str(folder / f"{name}.so"), json.dumps(shapes)], folder, env)
        rows += _buildgen_versus(folder / name, env, (name, onnx_file, shapes), installed,
                                 time.perf_counter() - start)
    return rows


def _buildgen_versus(folder: Path, env: dict[str, str],
                     model: tuple[str, Path, dict[str, list[int]]], installed: str | None,
                     theirs: float) -> list[tuple[str, str, str]]:
    """The three clean builds of `model` (see _versus_tvm), against TVM's `theirs` s."""
    name = model[0]
    against = f"TVM's compile ({theirs:.1f} s; target <= 0.5x)"

    def row(label: str, cache: str, **extra: str) -> tuple[str, str, str]:
        run_env = {**env, "BUILDGEN_CACHE_DIR": str(folder / f"cache-{cache}"), **extra}
        seconds = _one_model_build(folder / label, *model, run_env)
        return (f"clean build of {name}, {label}", f"{seconds:.1f} s",
                f"{seconds / theirs:.2f}x {against}")

    rows = [row("empty cache, kernels compiled in the build", "cold")]
    if installed is None:
        rows.append((f"clean build of {name}, empty cache, kernels from the install",
                     "skipped", "no buildgen/_prebuilt store: `pip install` fills it"))
    else:
        rows.append(row("empty cache, kernels from the install", "installed",
                        BUILDGEN_PREBUILT=installed))
    other = "cnn" if name == "mlp" else "mlp"
    shapes = {"cnn": {"image": [1, 3, 32, 32]}, "mlp": {"x": [8, 512]}}[other]
    _one_model_build(folder / "other", other, REPO / "examples" / "models" / f"{other}.onnx",
                     shapes, {**env, "BUILDGEN_CACHE_DIR": str(folder / "cache-warm")})
    rows.append(row("kernels cached by another model's build", "warm"))
    return rows


def _installed_kernels(env: dict[str, str]) -> str | None:
    """The store `pip install` filled (buildgen/cache/prebuilt.py), as the interpreter
    the builds run with finds it."""
    found = _run([sys.executable, "-c", "from buildgen.cache.prebuilt import installed_store;"
                  "print(installed_store() or '')"], REPO, env).strip()
    return found or None


def _one_model_build(folder: Path, model: str, onnx_file: Path, shapes: dict[str, list[int]],
                     env: dict[str, str]) -> float:
    """Seconds of a clean `buildgen build` of `model` alone, with the root manifest's
    targets, in a new project folder."""
    folder.mkdir(parents=True)
    targets = (REPO / "BUILD.yaml").read_text().split("models:")[0]
    inputs = ", ".join(f"{k}: {v}" for k, v in shapes.items())
    (folder / "BUILD.yaml").write_text(
        f"{targets}models:\n  {model}:\n    source: {onnx_file}\n"
        f"    inputs: {{{inputs}}}\n    targets: [cpu]\n")
    start = time.perf_counter()
    _run(_buildgen("build"), folder, env)
    return time.perf_counter() - start


def _print(rows: list[tuple[str, str, str]], markdown: bool) -> None:
    if markdown:
        print("| measurement | time | against |\n|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        return
    width = max(len(r[0]) for r in rows)
    for name, value, against in rows:
        print(f"{name:<{width}}  {value:>9}  {against}")


if __name__ == "__main__":
    sys.exit(main())
