"""The epilogue kernel of the GPU library backends, run without a GPU: its definition is
compiled as host C++ with the CUDA keywords defined away and called once per element, so the
broadcast indexing and the steps are checked against numpy."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cpulib_build import imported
from cpulib_cases import Builder

from buildgen.backends.cpu_common.groups import group_region
from buildgen.backends.cublas.support import RULES
from buildgen.backends.gpu_epilogue import epilogue_for

SHIMS = r"""
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#define __global__
#define __device__
struct Dim { size_t x; };
static Dim blockIdx, threadIdx, blockDim = {1};
"""


def _chain(tmp_path: Path):
    """MatMul [2, 3, 4] -> Add a [3, 1] operand -> Mul a [4] weight -> Sigmoid -> Add a
    run-time [2, 1, 4] tensor -> Div by a scalar."""
    b = Builder("epilogue")
    y = b.node("MatMul", [b.input("x", [2, 3, 5]), b.weight("w", [5, 4])], "mm")
    y = b.node("Add", [y, b.weight("col", [3, 1])], "add")
    y = b.node("Mul", [y, b.weight("row", [4])], "mul")
    y = b.node("Sigmoid", [y], "sig")
    y = b.node("Add", [y, b.input("r", [2, 1, 4])], "res")
    b.outputs.append(b.node("Div", [y, b.scalar("two", 2.0)], "y"))
    return imported(b.model(), {}, tmp_path)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to run the kernel on the host")
def test_epilogue_matches_numpy(tmp_path: Path) -> None:
    graph, weights = _chain(tmp_path)
    (group,) = group_region(graph, [n.name for n in graph.nodes], RULES)
    epilogue = epilogue_for("k0_epilogue", group.steps, (2, 3, 4), graph, weights)
    assert epilogue is not None and epilogue.params == ("col", "row", "r")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    r = rng.standard_normal((2, 1, 4)).astype(np.float32)
    col, row = weights["col"], weights["row"]

    def array(name: str, values: np.ndarray) -> str:
        return (f"static float {name}[] = {{"
                + ", ".join(f"{v!r}f" for v in values.reshape(-1).tolist()) + "};")

    main = [
        array("x", x), array("col", col), array("row", row), array("r", r),
        "static float y[24];",
        "int main() {",
        "    for (size_t i = 0; i < 24; ++i) {",
        "        threadIdx.x = i;",
        "        k0_epilogue(y, x, col, row, r);",
        "    }",
        '    for (size_t i = 0; i < 24; ++i) printf("%.9g\\n", y[i]);',
        "}",
    ]
    source = tmp_path / "epilogue.cc"
    source.write_text("\n".join([SHIMS, *epilogue.definition(), *main]) + "\n")
    binary = tmp_path / "epilogue"
    subprocess.run(["g++", "-std=c++17", "-O1", str(source), "-o", str(binary)], check=True)
    out = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
    got = np.array([float(v) for v in out.split()], np.float32).reshape(2, 3, 4)
    expected = (1 / (1 + np.exp(-((x + col) * row))) + r) / 2
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_nothing_to_apply_is_no_kernel(tmp_path: Path) -> None:
    graph, weights = _chain(tmp_path)
    assert epilogue_for("k0_epilogue", (), (2, 3, 4), graph, weights) is None
