"""The c host's shared kernels: bg_kernels.h's entry points compiled once per toolchain and
ISA level (rules/c.yaml `shared_kernels`, bg_kernels_linked.h), not into every module.

The header's lists cannot drift from the headers; a linked module compiles none of the
kernels and calls them by their link names; a build plans one set of kernel compiles for
all its models, and the stage API compiles only what a library calls.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from buildgen import stages
from buildgen.manifest import ModelSpec
from buildgen.resources import include_dir
from buildgen.targets import get_kind, resolve_target
from buildgen.targets.shared_kernels import called_by, fixed_sources, kernels_digest, linked_by

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ninja"))
from plan_helpers import make_context  # noqa: E402

INCLUDE = include_dir()
LINKED = (INCLUDE / "bg_kernels_linked.h").read_text()


def _entry_points() -> set[str]:
    """Every BG_API function the headers define."""
    found = set()
    for header in INCLUDE.glob("bg_*.h"):
        found |= set(re.findall(r"^BG_API [^(;]*?\b(\w+)\(", header.read_text(), re.M))
    return found


def _families() -> dict[str, list[str]]:
    blocks = re.findall(r"#define BG_KERNELS_(\w+)\(X\)((?:[^\n]*\\\n)*[^\n]*)", LINKED)
    return {name: re.findall(r"X\((\w+)\)", body) for name, body in blocks}


def test_the_families_and_the_link_names_name_every_entry_point_once() -> None:
    points = _entry_points()
    assert len(points) > 20
    listed = [name for names in _families().values() for name in names]
    assert sorted(listed) == sorted(points)  # each in exactly one family
    renamed = re.findall(r"^#define (\w+)\s+BG__KERNEL_NAME\(\1\)$", LINKED, re.M)
    assert sorted(renamed) == sorted(points)


def test_each_family_has_one_source_and_every_source_is_in_the_rules() -> None:
    spec = get_kind("c").shared_kernels
    assert spec is not None and spec.fixed and "-DBG_KERNELS_LINKED" in spec.module_flags
    named = {re.search(r"#define BG_KERNELS_LIBRARY BG_KERNELS_(\w+)", s.read_text())[1]
             for s in fixed_sources(spec)}
    assert named == set(_families())
    assert sorted(p.name for p in INCLUDE.glob("bg_kernels_*.c")) == sorted(spec.sources)


def _compile(tmp_path: Path, source: str, *flags: str) -> Path:
    path = tmp_path / "m.c"
    path.write_text(source)
    obj = tmp_path / "m.o"
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Werror", "-march=x86-64-v3", *flags,
                    f"-I{INCLUDE}", "-c", str(path), "-o", str(obj)], check=True)
    return obj


def _symbols(obj: Path) -> list[str]:
    return subprocess.run(["nm", str(obj)], capture_output=True, text=True,
                          check=True).stdout.splitlines()


CALLER = """#include "bg_kernels.h"
void f(const float *a, const float *b, float *c, void *ws)
{
    bg_sgemm(0, 0, 4, 4, 4, 1.0f, a, 4, b, 4, 0.0f, c, 4, NULL, ws, NULL);
}
"""


def test_a_linked_module_calls_the_link_names_and_compiles_no_kernel(tmp_path: Path) -> None:
    flags = ("-DBG_KERNELS_LINKED", "-DBG_KERNELS_ID=kfeed", "-DBG_ISA_SUFFIX=__isa_x")
    symbols = _symbols(_compile(tmp_path, CALLER, *flags))
    assert any(line.split() == ["U", "bg_sgemm__kfeed__isa_x"] for line in symbols)
    assert not [line for line in symbols if " t " in line or "gemm_blocked" in line]


def test_without_the_flag_a_module_keeps_its_own_copies(tmp_path: Path) -> None:
    symbols = _symbols(_compile(tmp_path, CALLER))
    assert any(line.endswith(" t bg__ukernel_full") for line in symbols)  # the micro-kernel
    assert not any(line.startswith(" ") and " U bg_" in line for line in symbols)


def test_a_family_object_exports_its_entry_points_hidden(tmp_path: Path) -> None:
    source = INCLUDE / "bg_kernels_pool.c"
    obj = tmp_path / "pool.o"
    subprocess.run(["cc", "-std=c11", "-O1", "-Wall", "-Werror", "-fPIC", "-DBG_KERNELS_ID=kfeed",
                    f"-I{INCLUDE}", "-c", str(source), "-o", str(obj)], check=True)
    exported = {line.split()[-1] for line in _symbols(obj) if " T " in line}
    assert exported == {f"{name}__kfeed" for name in _families()["POOL"]}
    readelf = subprocess.run(["readelf", "-s", str(obj)], capture_output=True, text=True,
                             check=True).stdout
    assert all("HIDDEN" in line for line in readelf.splitlines() if "__kfeed" in line)


def test_called_by_reads_the_calls_of_a_module() -> None:
    spec = get_kind("c").shared_kernels
    assert spec is not None
    by_name = {s.stem: s for s in fixed_sources(spec)}
    module = "static void k(void) { bg_conv2d(&p, x, w, NULL, y, ws, pool); }"
    assert called_by(by_name["bg_kernels_conv"], module)
    assert not called_by(by_name["bg_kernels_gemm"], module)
    assert not called_by(by_name["bg_kernels_pool"], module)
    assert not called_by(by_name["bg_kernels_conv"], "/* bg_conv2d_params only */")


def test_a_library_links_the_families_its_module_calls_and_those_they_link() -> None:
    spec = get_kind("c").shared_kernels
    assert spec is not None

    def linked(module: str) -> list[str]:
        return [source.stem.removeprefix("bg_kernels_") for source in linked_by(spec, module)]

    assert linked("bg_sgemm_prepacked(0, 4, 4, 4, 1.0f, a, 4, b, 0.0f, c, 4, NULL, ws, p);"
                  "bg_threadpool_create(2);") == ["threads", "gemm"]
    assert linked("bg_conv2d(&p, x, w, NULL, y, ws, pool);") == ["gemm", "conv"]
    assert linked("bg_maxpool2d(&p, x, y);") == ["pool"]
    assert linked("y[i] = x[i] > 0 ? x[i] : 0;") == []


def test_the_conv_object_calls_the_gemm_objects_kernels_and_holds_no_copy(
        tmp_path: Path) -> None:
    """The convolution's object links the GEMM family's kernels (BG_KERNELS_LINKS_GEMM):
    a model with both compiles the GEMM once."""
    objects = {}
    for family in ("conv", "gemm"):
        objects[family] = tmp_path / f"{family}.o"
        subprocess.run(["cc", "-std=c11", "-O1", "-Wall", "-Werror", "-fPIC",
                        "-DBG_KERNELS_ID=kfeed", f"-I{INCLUDE}", "-c",
                        str(INCLUDE / f"bg_kernels_{family}.c"), "-o", str(objects[family])],
                       check=True)
    conv = _symbols(objects["conv"])
    gemm_exports = {line.split()[-1] for line in _symbols(objects["gemm"]) if " T " in line}
    conv_needs = {line.split()[-1] for line in conv if line.split()[0] == "U"}
    assert "bg__gemm_run__kfeed" in conv_needs & gemm_exports
    assert not [line for line in conv if "ukernel" in line or "gemm_blocked" in line]


def test_a_build_plans_one_set_of_kernel_compiles_for_all_its_models(tmp_path: Path) -> None:
    from buildgen.ninja.actions import plan_build
    from buildgen.ninja.genfiles import gen_files

    targets = {"cpu": resolve_target("cpu", {"kind": "c", "march": "x86-64-v3"})}
    models = tuple(ModelSpec(name, tmp_path / f"{name}.onnx", (("x", (2, 4)),), ("cpu",), ())
                   for name in ("a", "b"))
    plan = plan_build(models, targets, make_context(tmp_path), tuple(gen_files(models, targets)))
    kernels = [a for a in plan.actions if a.rule == "cc" and a.outputs[0].startswith("_shared/")]
    assert sorted(Path(a.inputs[0]).name for a in kernels) == sorted(
        get_kind("c").shared_kernels.sources)  # type: ignore[union-attr]
    (archive,) = [a.outputs[0] for a in plan.actions
                  if a.rule == "ar" and a.outputs[0].startswith("_shared/")]
    for name in ("a", "b"):
        # The libraries take the objects the codegen lists (dyndep; the archive for CMake).
        codegen = plan.action_for(f"{name}/cpu/src/c.c")
        assert f"{name}/cpu/src/c.kernels.txt" in codegen.outputs
        dyndep, rsp = f"{name}/cpu/src/c.link.dd", f"{name}/cpu/src/c.link.rsp"
        assert plan.action_for(dyndep).outputs == (dyndep, rsp)
        for library in (f"{name}/cpu/lib{name}.so", f"{name}/cpu/lib{name}.a"):
            link = plan.action_for(library)
            assert (link.dyndep, link.response_files) == (dyndep, (rsp,))
            assert not [path for path in link.inputs if path.startswith("_shared/")]
        assert plan.action_for(f"{name}/cpu/lib{name}.so").dynamic_inputs == \
            plan.action_for(archive).inputs
        module = plan.action_for(f"{name}/cpu/obj/c.o").variable("cflags")
        assert "-DBG_KERNELS_LINKED" in module and f"-DBG_KERNELS_ID=k{kernels_digest()}" in module
    assert f"-DBG_KERNELS_ID=k{kernels_digest()}" in kernels[0].variable("cflags")


def _one_op_model(tmp_path: Path, op: str) -> stages.ImportedModel:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inputs = ["x", "w"] if op == "MatMul" else ["x"]
    weights = [numpy_helper.from_array(np.ones((4, 4), np.float32), "w")] * (op == "MatMul")
    graph = helper.make_graph(
        [helper.make_node(op, inputs, ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], weights)
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return stages.import_model(path, {}, name="m")


V3 = {"kind": "c", "march": "x86-64-v3", "opt_level": 1}


@pytest.mark.parametrize(("op", "families"), [("Relu", []), ("MatMul", ["gemm", "threads"])])
def test_the_stage_api_compiles_only_the_kernels_a_library_calls(
    tmp_path: Path, op: str, families: list[str]
) -> None:
    model = _one_op_model(tmp_path, op)
    target = stages.resolve_target(V3)
    partition = stages.partition(model.graph, target, model="m")
    shared = tmp_path / "kernels"
    for out in ("one", "two"):
        stages.build_library(tmp_path / out, "m", model, partition, target, kernels_dir=shared)
    built = sorted(p.stem.removeprefix("bg_kernels_") for p in shared.rglob("*.o"))
    assert built == families
    assert not list(shared.rglob("*.tmp"))


def test_threads_of_one_process_share_a_kernels_folder(tmp_path: Path) -> None:
    """The tuner builds its candidates in threads: each compiles a missing kernels object to
    a name of its own (they once shared the process's and renamed each other's away)."""
    from concurrent.futures import ThreadPoolExecutor

    model = _one_op_model(tmp_path, "MatMul")
    target = stages.resolve_target(V3)
    partition = stages.partition(model.graph, target, model="m")
    shared = tmp_path / "kernels"
    with ThreadPoolExecutor(max_workers=8) as pool:
        libraries = list(pool.map(
            lambda i: stages.build_library(tmp_path / f"lib{i}", "m", model, partition, target,
                                           kernels_dir=shared),
            range(8)))
    assert all(library.is_file() for library in libraries)
    assert len(list(shared.rglob("*.o"))) == 2
    assert not list(shared.rglob("*.tmp"))
