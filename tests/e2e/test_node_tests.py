"""ONNX backend node tests: every qualifying test built by buildgen and run from Python.

All qualifying tests (see node_suite.py) are built, one library per test, through the
stage API in one worker process per core (node_build.py says why not as ninja actions).
Each library then runs on test_data_set_0's inputs and must match the reference outputs
(the node tests' own rtol/atol) and onnxruntime's outputs.
A summary (tried, passed, failed with the first error line, ops not yet supported) is
printed whatever the result.

While working on some ops, BUILDGEN_NODE_OPS=Pad,LRN (comma-separated op types) builds and
runs only the qualifying tests that use one of them; unset, every qualifying test runs.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from ninja_errors import first_errors
from node_build import build_cases, library_relpath
from node_known_failures import KNOWN_FAILURES
from node_suite import NodeCase, Suite, generate_suite


@dataclass(frozen=True)
class Outcome:
    case: NodeCase
    error: str | None  # None: passed
    ort_checked: bool = False


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    return generate_suite(tmp_path_factory.mktemp("node-tests"))


@pytest.fixture(scope="module")
def selected(suite: Suite) -> Suite:
    """The suite, or only its tests that use an op named in BUILDGEN_NODE_OPS."""
    only = {op.strip() for op in os.environ.get("BUILDGEN_NODE_OPS", "").split(",") if op.strip()}
    if not only:
        return suite
    cases = tuple(c for c in suite.cases if only & set(c.ops))
    if not cases:
        pytest.fail(f"BUILDGEN_NODE_OPS: no qualifying node test uses {sorted(only)}")
    return dataclasses.replace(suite, cases=cases)


@pytest.fixture(scope="module")
def built(selected: Suite, tmp_path_factory: pytest.TempPathFactory):
    """(build dir, model -> first error line) after building every selected test."""
    build_dir = tmp_path_factory.mktemp("node-build")
    return build_dir, build_cases(selected.cases, build_dir)


def _compare(ours: np.ndarray, expected: np.ndarray, case: NodeCase, what: str) -> str | None:
    if ours.shape != expected.shape:
        return f"{what}: shape {ours.shape} != {expected.shape}"
    try:
        np.testing.assert_allclose(ours, expected, rtol=case.rtol, atol=case.atol)
    except AssertionError as exc:
        detail = next((ln.strip() for ln in str(exc).splitlines() if "Max abs" in ln), "")
        return f"{what}: mismatch {detail}"
    return None


def ort_outputs(case: NodeCase, feeds: dict[str, np.ndarray], ort_session) -> list | None:
    """onnxruntime's outputs, or None if it refuses to load the model.

    A few expanded tests are stamped with an IR version or opset newer than onnxruntime
    accepts (1.31: IR 13, opset 26); they are still checked against the reference outputs.
    """
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail, NotImplemented

    try:
        session = ort_session(case.model_path)
    except (Fail, NotImplemented):  # NotImplemented: e.g. Swish-24 has no CPU kernel
        return None
    names = {i.name for i in session.get_inputs()}
    return list(session.run(None, {k: v for k, v in feeds.items() if k in names}))


def check_case(case: NodeCase, build_dir: Path, errors: dict[str, str], ort_session) -> Outcome:
    import onnx

    from buildgen import runtime

    library = build_dir / library_relpath(case)
    if not library.exists():
        error = errors.get(case.model_name, "no library, no error")
        return Outcome(case, "build: " + error.replace(f"{case.root}/", ""))
    model = onnx.load(str(case.model_path))
    feeds = dict(zip([v.name for v in model.graph.input], case.data("input"), strict=True))
    try:
        compiled = runtime.load(library)
        ours = compiled(*(feeds[i.name] for i in compiled.inputs))
        compiled.close()
    except (runtime.ModelError, ValueError, KeyError, OSError) as exc:
        return Outcome(case, f"run: {str(exc).splitlines()[0]}")
    reference = case.data("output")
    if len(ours) != len(reference):
        return Outcome(case, f"run: {len(ours)} outputs, expected {len(reference)}")
    for j, (value, ref) in enumerate(zip(ours, reference, strict=True)):
        problem = _compare(value, ref, case, f"output {j} vs reference")
        if problem:
            return Outcome(case, problem)
    theirs_all = ort_outputs(case, feeds, ort_session)
    if theirs_all is None:
        return Outcome(case, None)
    for j, (value, theirs) in enumerate(zip(ours, theirs_all, strict=True)):
        problem = _compare(value, theirs, case, f"output {j} vs onnxruntime")
        if problem:
            return Outcome(case, problem, ort_checked=True)
    return Outcome(case, None, ort_checked=True)


_DECLINED = re.compile(r"\(op (?P<op>\w+)\) is not supported by any backend.*?— (?P<why>.*)$")


def summarize(suite: Suite, outcomes: list[Outcome]) -> str:
    passed = [o for o in outcomes if o.error is None]
    failed = [o for o in outcomes if o.error is not None]
    # "Not yet supported": what the backends declined, with their reasons, by count.
    declined = Counter(
        f"{m['op']} ({m['why']})" for o in failed if (m := _DECLINED.search(o.error or ""))
    )
    excluded = ", ".join(f"{op} {n}" for op, n in suite.unsupported_op_counts().most_common(10))
    lines = [
        f"ONNX node tests: {suite.total} generated; {len(suite.excluded_ops)} excluded for ops "
        f"outside the list (most common: {excluded}); {len(suite.excluded_dtype)} excluded "
        "for dtypes",
        f"tried {len(outcomes)}, passed {len(passed)} "
        f"({sum(o.ort_checked for o in passed)} also checked against onnxruntime), "
        f"failed {len(failed)} ({sum(o.case.name in KNOWN_FAILURES for o in failed)} known)",
        *(f"  FAIL {o.case.name}: {o.error}" for o in failed),
        "not yet supported: "
        + (", ".join(f"{what} x{n}" for what, n in sorted(declined.items())) or "nothing"),
    ]
    return "\n".join(lines)


def test_selection(suite: Suite) -> None:
    """The filter keeps float32 tests of listed ops and folds shape operands; fast."""
    names = {c.name for c in suite.cases}
    assert {"test_conv_with_strides_padding", "test_gemm_all_attributes"} <= names
    assert "test_reshape_negative_dim" in names  # int64 shape operand: folded
    assert "test_gather_0" in names  # int64 indices: stay a run-time input
    assert "test_add_uint8" in dict(suite.excluded_dtype)
    assert "test_argmax_default_axis_example" in names  # an int64 output of ArgMax
    assert "NonZero" in dict(suite.excluded_ops)["test_nonzero_example"]
    assert not set(KNOWN_FAILURES) - names, "KNOWN_FAILURES names a test that is not selected"

    import onnx

    reshape = next(c for c in suite.cases if c.name == "test_reshape_negative_dim")
    graph = onnx.load(str(reshape.build_model_path)).graph
    assert [v.name for v in graph.input] == ["data"]
    assert [t.name for t in graph.initializer] == ["shape"]
    gather = next(c for c in suite.cases if c.name == "test_gather_0")
    assert len(onnx.load(str(gather.build_model_path)).graph.input) == 2


def test_first_errors_attributes_failures_to_models() -> None:
    output = "\n".join(
        [
            "[1/9] IMPORT t_a",
            "FAILED: [code=1] t_a/graph.json t_a/weights.bin ",
            "python -m buildgen.stages import --model t_a",
            "Traceback (most recent call last):",
            "error: t_a/model.onnx: node 'n' (op X) is not supported",
            "[2/9] CC t_b/c c.o",
            "FAILED: t_b/c/obj/c.o ",
            "cc -c t_b/c/src/c.c",
            "t_b/c/src/c.c:3:1: warning: unused",
            "ninja: build stopped: cannot make progress due to previous errors.",
        ]
    )
    assert first_errors(output) == {
        "t_a": "error: t_a/model.onnx: node 'n' (op X) is not supported",
        "t_b": "t_b/c/src/c.c:3:1: warning: unused",
    }


@pytest.mark.slow
def test_node_tests(selected: Suite, built, onnxruntime_session, capsys) -> None:
    build_dir, errors = built
    outcomes = [check_case(c, build_dir, errors, onnxruntime_session) for c in selected.cases]
    with capsys.disabled():
        print("\n" + summarize(selected, outcomes))
    failed = {o.case.name: o.error or "" for o in outcomes if o.error is not None}
    unexpected = sorted(
        name
        for name, error in failed.items()
        if name not in KNOWN_FAILURES or KNOWN_FAILURES[name].expect not in error
    )
    tried = {c.name for c in selected.cases}
    stale = sorted(set(KNOWN_FAILURES) & tried - set(failed))
    assert not unexpected, f"{len(unexpected)} node tests failed unexpectedly: {unexpected}"
    assert not stale, f"known failures that now pass (remove them): {stale}"
