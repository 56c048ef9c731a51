"""A tiny CMake project linking a compiled model: relu(x @ w + b), weights in an
external-data file, built for two targets, and a C program printing the outputs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

MANIFEST = """\
buildgen: 1
targets:
  cpu: {kind: composite, host: {kind: c, opt_level: 2}}
  small: {kind: c, opt_level: 1}
models:
  tiny:
    source: models/tiny.onnx
    inputs: {x: [2, 4]}
    targets: [cpu, small]
"""

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.20)
project(tiny_app LANGUAGES C)
find_package(buildgen CONFIG REQUIRED)
buildgen_add_models(MANIFEST BUILD.yaml)
add_executable(app main.c)
target_link_libraries(app PRIVATE buildgen::tiny_cpu)
"""

MAIN_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "tiny.h"
int main(void) {
    tiny_model *m = NULL;
    if (tiny_create(&m) != 0) return 1;
    size_t n = tiny_input_bytes[0] / sizeof(float), k = tiny_output_bytes[0] / sizeof(float);
    float *x = malloc(tiny_input_bytes[0]), *y = malloc(tiny_output_bytes[0]);
    for (size_t i = 0; i < n; i++) x[i] = (float)i / 4.0f - 1.0f;
    const void *in[1] = {x};
    void *out[1] = {y};
    if (tiny_run(m, in, out) != 0) return 1;
    for (size_t i = 0; i < k; i++) printf("%.9g\n", y[i]);
    tiny_destroy(m);
    return 0;
}
"""


def weights(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((4, 3)).astype(np.float32),
            rng.standard_normal(3).astype(np.float32))


def save_model(folder: Path, seed: int) -> None:
    """models/tiny.onnx with its weights in models/tiny.bin (external data)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w, b = weights(seed)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
         helper.make_node("Relu", ["hb"], ["y"], name="relu")],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, folder / "tiny.onnx", save_as_external_data=True,
              all_tensors_to_one_file=True, location="tiny.bin", size_threshold=0)


def expected(rows: int, seed: int) -> np.ndarray:
    w, b = weights(seed)
    x = (np.arange(rows * 4, dtype=np.float32) / 4 - 1).reshape(rows, 4)
    return np.maximum(x @ w + b, 0).ravel()


def check_app(app: Path, rows: int, seed: int) -> None:
    out = subprocess.run([str(app)], capture_output=True, text=True,
                         check=True).stdout
    got = np.array([float(v) for v in out.split()], dtype=np.float32)
    np.testing.assert_allclose(got, expected(rows, seed), rtol=1e-5, atol=1e-6)



def write_project(project: Path, seed: int = 1) -> None:
    save_model(project / "models", seed)
    (project / "BUILD.yaml").write_text(MANIFEST)
    (project / "CMakeLists.txt").write_text(CMAKELISTS)
    (project / "main.c").write_text(MAIN_C)
