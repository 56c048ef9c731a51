"""link_kernels: a module's list of kernels sources + its target's objects -> the dyndep file
ninja reads and the response file the link reads (buildgen/stages/link_kernels_stage.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from buildgen.errors import BuildgenError
from buildgen.stages import link_kernels_stage

OBJECTS = "".join(f"bg_kernels_{family}.c=_shared/c-1/bg_kernels_{family}.{level}.o\n"
                  for family in ("threads", "gemm", "conv", "pool")
                  for level in ("x86-64", "x86-64-v3"))


def _run(tmp_path: Path, sources: str, edges: tuple[str, ...] = ("m/t/libm.so", "m/t/libm.a"),
         objects: str = OBJECTS) -> dict[str, str]:
    (tmp_path / "sources").write_text(sources)
    (tmp_path / "objects").write_text(objects)
    parser = argparse.ArgumentParser()
    link_kernels_stage.add_arguments(parser)
    args = parser.parse_args([
        "--sources", str(tmp_path / "sources"), "--objects", str(tmp_path / "objects"),
        "--dyndep", "dd", "--rsp", "rsp", *(w for e in edges for w in ("--edge", e))])
    assert link_kernels_stage.outputs(args) == ["dd", "rsp"]
    return dict(link_kernels_stage.run(args))


def test_the_objects_of_the_listed_sources_go_to_every_edge_in_the_targets_order(tmp_path):
    out = _run(tmp_path, "bg_kernels_gemm.c\nbg_kernels_threads.c\n")
    objects = [f"_shared/c-1/bg_kernels_{family}.{level}.o" for family in ("threads", "gemm")
               for level in ("x86-64", "x86-64-v3")]
    assert out["rsp"] == "".join(f"{o}\n" for o in objects)
    assert out["dd"] == (
        "ninja_dyndep_version = 1\n"
        f"build m/t/libm.so: dyndep | {' '.join(objects)}\n"
        f"build m/t/libm.a: dyndep | {' '.join(objects)}\n")


def test_a_module_calling_no_kernel_links_none(tmp_path):
    out = _run(tmp_path, "")
    assert out == {"dd": "ninja_dyndep_version = 1\nbuild m/t/libm.so: dyndep\n"
                         "build m/t/libm.a: dyndep\n", "rsp": ""}


def test_edges_are_escaped_as_ninja_paths(tmp_path):
    out = _run(tmp_path, "", edges=("my model/t/lib$x.so",))
    assert "build my$ model/t/lib$$x.so: dyndep\n" in out["dd"]


def test_a_source_the_target_has_no_object_for_is_an_error(tmp_path):
    with pytest.raises(BuildgenError) as caught:
        _run(tmp_path, "bg_kernels_new.c\n")
    text = str(caught.value)
    assert "bg_kernels_new.c" in text and "buildgen gen" in text


def test_an_object_a_response_file_cannot_hold_is_refused(tmp_path):
    with pytest.raises(BuildgenError, match="response file"):
        _run(tmp_path, "bg_kernels_gemm.c\n", objects="bg_kernels_gemm.c=a b.o\n")


def test_an_object_a_response_file_cannot_hold_is_an_error(tmp_path):
    with pytest.raises(BuildgenError, match="cannot be written to a response file"):
        _run(tmp_path, "bg_kernels_gemm.c\n",
             objects="bg_kernels_gemm.c=_shared/c 1/bg_kernels_gemm.o\n")


def test_the_response_file_reads_back_as_written(tmp_path):
    from buildgen.ninja.response_file import read_response_file, response_file_text

    listing = tmp_path / "rsp"
    assert read_response_file(str(listing)) is None  # not written yet
    listing.write_text(response_file_text(["_shared/a.o", "_shared/b.o"]))
    assert read_response_file(str(listing)) == ["_shared/a.o", "_shared/b.o"]
