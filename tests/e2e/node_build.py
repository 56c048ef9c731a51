"""Building node tests in-process: buildgen.stages, the functions the build's actions call.

About 1,100 node tests make ~7,000 actions; as ninja actions each is a Python process start
(~0.3 s), which alone takes the better part of an hour on 2 cores. The node tests check op
semantics, not the build graph (tests/e2e, tests/ninja and tests/cache build through ninja),
so they call the stage API (`buildgen.stages`: import, resolve, partition, build_library
with the same compile and link commands) once per test, one worker process per core.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from node_suite import NodeCase, _quiet

TARGET = "c"
# The `c` host pinned to this machine's ISA: one compile per test instead of one per level
# (rules/c.yaml isa_variants). The level it runs is the one the default target's create
# would pick here; tests/e2e/test_isa_dispatch.py runs every level of the default build.
TARGET_SPEC = {"kind": "c", "march": "native"}


def library_relpath(case: NodeCase) -> Path:
    return Path(case.model_name, TARGET, f"lib{case.model_name}.so")


def runtime_input_shapes(case: NodeCase) -> dict[str, list[int]]:
    import onnx

    graph = onnx.load(str(case.build_model_path)).graph
    return {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in graph.input}


def build_case(case: NodeCase, build_dir: Path) -> str | None:
    """Build one test's library under build_dir; None, or the first line of the error."""
    from buildgen import stages
    from buildgen.errors import BuildgenError

    shapes = runtime_input_shapes(case)
    if not all(d > 0 for dims in shapes.values() for d in dims):
        shapes = {}  # the zero-sized ("empty set") tests keep the shapes the model declares
    try:
        with _quiet():
            model = stages.import_model(case.build_model_path, shapes, name=case.model_name)
            target = stages.resolve_target(TARGET_SPEC)
            partition = stages.partition(model.graph, target, model=case.model_name)
            out = build_dir / library_relpath(case).parent
            stages.build_library(out, case.model_name, model, partition, target,
                                 kernels_dir=build_dir / "_shared")
    except BuildgenError as exc:
        return (str(exc).splitlines() or ["(no message)"])[0]
    except Exception as exc:  # a bug: the build's action would report it the same way
        return f"internal error: {type(exc).__name__}: {exc}".splitlines()[0]
    return None


def build_cases(cases: Sequence[NodeCase], build_dir: Path, jobs: int | None = None,
                ) -> dict[str, str]:
    """Build every case; model name -> first error line of those that failed."""
    jobs = jobs or max(1, len(os.sched_getaffinity(0)))
    # The first case compiles the c host's shared kernels (build_library's kernels_dir),
    # which every other case then links, as a build's libraries link _shared/'s.
    results = {cases[0].model_name: build_case(cases[0], build_dir)} if cases else {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {c.model_name: pool.submit(build_case, c, build_dir) for c in cases[1:]}
        results |= {name: future.result() for name, future in futures.items()}
    return {name: error for name, error in results.items() if error is not None}
