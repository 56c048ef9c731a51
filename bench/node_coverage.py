"""How many of onnx's float32 backend node tests buildgen passes.

    python bench/node_coverage.py                 # every in-scope test; rewrites the list
    python bench/node_coverage.py --ops TopK,Mod  # rebuild only the tests using these ops
    python bench/node_coverage.py --no-build      # scope and qualification counts only

In scope: a node test (generated from the onnx wheel's case generators, as
tests/e2e/node_suite.py does) whose nodes are all default-domain ops, whose graph inputs
and outputs are all tensors of float32, int64, int32 or bool with at least one float32
(so float16, double, integer-only, string, sequence and optional tests are out), and that
onnxruntime's CPU provider loads and runs. A test onnxruntime cannot run is out of scope.

Each in-scope test is then either not qualified by the node suite (an op outside
SUPPORTED_OPS or a dtype it does not take), or built by buildgen and checked exactly as
tests/e2e/test_node_tests.py checks it: against the reference outputs and onnxruntime's.
The build runs in-process through buildgen.stages (the functions the build's actions
call, and the same compile and link commands), one process per core, without a process
start per action: the full run takes minutes rather than the suite's hour on 2 cores.
The figure is passing / in scope. The passing tests are written one name a line to
tests/e2e/node_passing.txt (generated; commit it); with --ops, the tests outside the
selection keep the entries of the previous run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
E2E = REPO / "tests" / "e2e"
PASSING = E2E / "node_passing.txt"

sys.path[:0] = [str(REPO), str(E2E)]

from conftest import ort_session  # noqa: E402
from node_build import build_case  # noqa: E402
from node_suite import NodeCase, Suite, _quiet, generate_suite  # noqa: E402
from test_node_tests import check_case  # noqa: E402

# TensorProto element types an in-scope test may use: FLOAT, INT32, INT64, BOOL.
_FLOAT, _INT32, _INT64, _BOOL = 1, 6, 7, 9
_ALLOWED = frozenset({_FLOAT, _INT32, _INT64, _BOOL})


@dataclass(frozen=True)
class Scoped:
    name: str
    ops: tuple[str, ...]
    out_of_scope: str | None  # why not in scope; None: in scope


def _scope(case) -> Scoped:  # case: onnx.backend.test.case.test_case.TestCase
    import onnxruntime as ort

    graph = case.model.graph
    ops = sorted(
        {
            n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
            for n in graph.node
        }
    )
    if any("." in op for op in ops):
        return Scoped(case.name, tuple(ops), "not the default domain")
    elems = []
    for value in (*graph.input, *graph.output):
        if not value.type.HasField("tensor_type"):
            return Scoped(case.name, tuple(ops), "sequence/optional/map values")
        elems.append(value.type.tensor_type.elem_type)
    if not set(elems) <= _ALLOWED or _FLOAT not in elems:
        return Scoped(case.name, tuple(ops), "not a float32 test")
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    try:
        session = ort.InferenceSession(
            case.model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        inputs = case.data_sets[0][0]
        with _quiet():
            session.run(None, {v.name: x for v, x in zip(graph.input, inputs, strict=False)})
    except Exception as exc:  # onnxruntime raises many kinds; any of them means "cannot run"
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        return Scoped(case.name, tuple(ops), f"onnxruntime CPU cannot run it: {first[:100]}")
    return Scoped(case.name, tuple(ops), None)


def _build_and_check_one(case: NodeCase, build_dir: Path) -> str | None:
    """None if the test builds and passes, else its first error line."""
    error = build_case(case, build_dir)
    errors = {case.model_name: error} if error is not None else {}
    return check_case(case, build_dir, errors, ort_session).error


def _build_and_check(cases: Sequence[NodeCase], work: Path, jobs: int) -> dict[str, str | None]:
    """test name -> None if it passes, else its first error."""
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {c.name: pool.submit(_build_and_check_one, c, work / "build") for c in cases}
        return {name: future.result() for name, future in futures.items()}


def _read_passing() -> set[str]:
    if not PASSING.exists():
        return set()
    lines = PASSING.read_text().splitlines()
    return {line for line in lines if line and not line.startswith("#")}


def _report(suite: Suite, scoped: list[Scoped], results: dict[str, str | None]) -> None:
    in_scope = {s.name for s in scoped if s.out_of_scope is None}
    out = Counter(s.out_of_scope.split(":")[0] for s in scoped if s.out_of_scope)
    excluded = dict(suite.excluded_ops)
    unqualified_ops = Counter(op for name in in_scope if name in excluded for op in excluded[name])
    unqualified_dtype = sorted(name for name, _ in suite.excluded_dtype if name in in_scope)
    failing = sorted(name for name, error in results.items() if error is not None)
    print(f"node tests generated: {len(scoped)}")
    print("out of scope: " + ", ".join(f"{why} {n}" for why, n in out.most_common()))
    print(f"in scope: {len(in_scope)}; qualified by the node suite and built: {len(results)}")
    print(
        "in scope, not qualified for ops: "
        + ", ".join(f"{op} {n}" for op, n in unqualified_ops.most_common())
    )
    print(f"in scope, not qualified for dtypes: {' '.join(unqualified_dtype) or 'none'}")
    for name in failing:
        print(f"  FAIL {name}: {results[name]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ops",
        default="",
        help="build only the tests using one of these ops (A,B) and "
        "update their entries in the list",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel builds")
    parser.add_argument(
        "--no-build", action="store_true", help="classify only: count qualified, build nothing"
    )
    args = parser.parse_args(argv)
    only = {op.strip() for op in args.ops.split(",") if op.strip()}

    from onnx.backend.test.case.node import collect_testcases

    with _quiet():
        cases = collect_testcases()
    scoped = [_scope(c) for c in sorted(cases, key=lambda c: c.name)]
    in_scope = {s.name for s in scoped if s.out_of_scope is None}
    selected = {s.name for s in scoped if not only or only & set(s.ops)}

    with tempfile.TemporaryDirectory(prefix="node-coverage-") as tmp:
        work = Path(tmp)
        suite = generate_suite(work / "cases")
        qualified = tuple(c for c in suite.cases if c.name in in_scope)
        if args.no_build:
            print(f"in scope: {len(in_scope)}; qualified by the node suite: {len(qualified)}")
            return 0
        chosen = [c for c in qualified if c.name in selected]
        results = _build_and_check(chosen, work, args.jobs)

    _report(suite, scoped, results)
    # --ops: the tests outside the selection keep their entries from the last run
    kept = {name for name in _read_passing() if name in in_scope and name not in selected}
    passing = sorted(kept | {name for name, error in results.items() if error is None})
    print(f"coverage: {len(passing)}/{len(in_scope)} = {len(passing) / len(in_scope):.1%}")
    header = (
        "# Generated by `python bench/node_coverage.py`: the in-scope onnx node tests that\n"
        f"# buildgen passes ({len(passing)} of {len(in_scope)}). Do not edit.\n"
    )
    PASSING.write_text(header + "".join(f"{name}\n" for name in passing))
    print(f"wrote {PASSING.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
