"""Small models built with a c + onednn target (manifest -> `buildgen build`) agree with
onnxruntime, and their ops really ran on oneDNN. Two cases build in the quick suite; the
rest are slow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cpulib_build import (
    assert_reported_arena_is_the_librarys,
    build_cases,
    check_case,
    composite,
    library,
    source,
)
from cpulib_cases import COMMON, ONEDNN_ONLY, QUICK, Builder, Case

from buildgen.backends.libraries import ONEDNN_PIP, pip_onednn_prefix
from buildgen.errors import BuildgenError

pytest.importorskip("onnxruntime")
TARGET = composite("onednn", threads=1)
CASES = (*COMMON, *ONEDNN_ONLY)
QUICK_CASES = [c for c in CASES if c.name in QUICK]
SLOW_CASES = [c for c in CASES if c.name not in QUICK]


def _need_onednn() -> None:
    try:
        pip_onednn_prefix()
    except BuildgenError:
        pytest.skip(f"oneDNN is not installed: {ONEDNN_PIP}")


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need_onednn()
    return build_cases(tmp_path_factory.mktemp("onednn-quick"), QUICK_CASES, TARGET)


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need_onednn()
    return build_cases(tmp_path_factory.mktemp("onednn-slow"), SLOW_CASES, TARGET)


@pytest.mark.parametrize("case", QUICK_CASES, ids=lambda c: c.name)
def test_quick_case_matches_onnxruntime(quick: Path, case: Case) -> None:
    check_case(quick, case, "onednn")


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW_CASES, ids=lambda c: c.name)
def test_case_matches_onnxruntime(slow: Path, case: Case) -> None:
    check_case(slow, case, "onednn")


def test_generated_source_is_readable(quick: Path) -> None:
    text = source(quick / "build", "conv_block", "onednn")
    assert "Conv '/c1'" in text and "BatchNormalization '/bn1'" in text  # ONNX origin
    assert "folded into the weights and bias" in text
    assert "int conv_block__onednn_r0(bg_env *env" in text  # one function per region
    assert "static const bg_dnnl_conv_spec spec" in text
    assert "conv_block.onnx (graph 'conv_block'" in text and str(quick) not in text


def test_gelu_and_in_place_sum_in_the_source(slow: Path) -> None:
    text = source(slow / "build", "gelu_mlp", "onednn")
    # The first GELU is a post-op of its Gemm; the second reads an output: its own eltwise.
    assert ".alg = dnnl_eltwise_gelu_erf" in text and "bg_make_eltwise" not in text
    assert "bg_dnnl_make_eltwise, &eltwise" in text and "dnnl_eltwise_gelu_erf, .alpha" in text
    text = source(slow / "build", "resblock", "onednn")
    assert ".kind = BG_DNNL_SUM" in text and ".in_place = 1" in text


LAYOUT_CASES = [c for c in CASES if c.name in ("conv_block", "pools", "resblock",
                                                "depthwise_3d")]


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["any", "plain"])
def test_other_activation_layouts_agree(tmp_path: Path, layout: str) -> None:
    _need_onednn()
    target = composite("onednn", threads=1, activation_layout=layout)
    folder = build_cases(tmp_path, LAYOUT_CASES, target)
    for case in LAYOUT_CASES:
        check_case(folder, case, "onednn")
        assert_reported_arena_is_the_librarys(library(folder / "build", case.name), case.name)


def _huge_page_advised_mappings(lib: Path) -> int:
    """Mappings advised MADV_HUGEPAGE (VmFlags `hg`) once the library has made its instance,
    in a fresh process: this one holds other libraries' memory too."""
    code = ("import numpy as np, sys; from buildgen import runtime; c = runtime.load(sys.argv[1]);"
            "c(*[np.ones(i.shape, np.float32) for i in c.inputs]);"
            "print(sum(l.startswith('VmFlags:') and ' hg' in l"
            " for l in open('/proc/self/smaps').read().splitlines()))")
    done = subprocess.run([sys.executable, "-c", code, str(lib)], capture_output=True, text=True,
                          check=True)
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not Path("/sys/kernel/mm/transparent_hugepage").exists(),
                    reason="a kernel without transparent huge pages")
def test_large_reordered_weights_are_advised_huge_pages(tmp_path: Path) -> None:
    """A classifier's 4 MiB of weights, reordered into oneDNN's layout at create, streams
    from memory on every call: its bytes come from bg_alloc_constants (bg_alloc.h), in
    memory advised for huge pages, which needs the module's _GNU_SOURCE."""
    _need_onednn()
    b = Builder("classifier")
    y = b.node("Gemm", [b.input("x", [8, 1024]), b.weight("w", [1024, 1024], 0.03),
                        b.weight("bias", [1024])], "fc", transB=1)
    b.outputs.append(b.node("Relu", [y], "y"))
    case = Case("classifier", b.model, {"x": (8, 1024)}, ("Gemm",))
    folder = build_cases(tmp_path, [case], composite("onednn", threads=1))
    check_case(folder, case, "onednn")
    assert _huge_page_advised_mappings(library(folder / "build", case.name)) >= 1


def _convolution_kernels(lib: Path) -> dict[str, str]:
    """oneDNN's kernel for each convolution the library runs, by its problem (oneDNN's
    verbose log of one call in a fresh process)."""
    code = ("import numpy as np, sys; from buildgen import runtime; c = runtime.load(sys.argv[1]);"
            "c(*[np.ones(i.shape, np.float32) for i in c.inputs])")
    done = subprocess.run([sys.executable, "-c", code, str(lib)], capture_output=True, text=True,
                          env={**os.environ, "ONEDNN_VERBOSE": "1"}, check=True)
    kernels, isa = {}, ""
    for line in done.stdout.splitlines():
        fields = line.split(",")
        if fields[:3] == ["onednn_verbose", "info", "cpu"] and fields[3].startswith("isa:"):
            isa = fields[3]
        if "exec" in fields and "convolution" in fields:
            at = fields.index("convolution")
            kernels[fields[-2]] = fields[at + 1]
    kernels["isa"] = isa
    return kernels


def test_a_1x1_convolution_takes_the_jit_1x1_kernel_on_avx2(quick: Path) -> None:
    """oneDNN ranks brgconv_1x1 first on AVX2; its jit_1x1 kernel is faster in models there
    (bg_onednn_ops.h). The 3x3 convolution keeps oneDNN's first choice."""
    kernels = _convolution_kernels(library(quick / "build", "conv_block"))
    if kernels.pop("isa") != "isa:Intel AVX2":
        pytest.skip("oneDNN ranks other kernels first on this CPU (not AVX2 without AVX-512)")
    one_by_one = [impl for problem, impl in kernels.items() if "kh1" in problem]
    three_by_three = [impl for problem, impl in kernels.items() if "kh3" in problem]
    assert one_by_one == ["jit_1x1:avx2"], kernels
    assert three_by_three and three_by_three != ["jit_1x1:avx2"], kernels


def test_a_1x1_convolution_keeps_onednns_choice_without_the_preferred_kernel(
        tmp_path: Path) -> None:
    """Moving on through oneDNN's kernels spends the primitive descriptor: when none is the
    preferred one, the convolution is created again as oneDNN ranks it, and still agrees."""
    _need_onednn()
    case = next(c for c in QUICK_CASES if c.name == "conv_block")
    target = composite("onednn", threads=1,
                       cflags=['-DBG_DNNL_1X1_PREFERRED="no_such_kernel"'])
    folder = build_cases(tmp_path, [case], target)
    check_case(folder, case, "onednn")
    kernels = _convolution_kernels(library(folder / "build", "conv_block"))
    if kernels.pop("isa") != "isa:Intel AVX2":
        pytest.skip("oneDNN ranks other kernels first on this CPU (not AVX2 without AVX-512)")
    assert [impl for problem, impl in kernels.items() if "kh1" in problem] == \
        ["brgconv_1x1:avx2"], kernels


def _executed(lib: Path) -> list[tuple[str, str, str]]:
    """(primitive, kernel, memory descriptors) of each step a second call runs (oneDNN's
    verbose log in a fresh process; the first call also runs create's weight reorders)."""
    code = ("import numpy as np, sys; from buildgen import runtime; c = runtime.load(sys.argv[1]);"
            "x = [np.ones(i.shape, np.float32) for i in c.inputs]; c(*x); print('second call');"
            "c(*x)")
    done = subprocess.run([sys.executable, "-c", code, str(lib)], capture_output=True, text=True,
                          env={**os.environ, "ONEDNN_VERBOSE": "1"}, check=True)
    second = done.stdout.split("second call", 1)[1]
    return [(f[3], f[4], f[6]) for f in (line.split(",") for line in second.splitlines())
            if f[:2] == ["onednn_verbose", "exec"]]


def test_a_first_layer_reads_the_image_as_it_is_and_the_pool_writes_channels_last(
        quick: Path) -> None:
    """The stem Conv reads the RGB input in NCHW (no reorder before it) with a direct kernel
    that writes channel blocks; the MaxPool after it converts back to channels-last, which
    both Convs reading it take without a reorder of their own."""
    text = (library(quick / "build", "stem").parent / "src" / "onednn.c").read_text()
    assert text.count(".first_layer = 1") == 1 and text.count(".channels_last = 1") == 1
    steps = _executed(library(quick / "build", "stem"))
    assert not [s for s in steps if s[0] != "concat" and s[1].startswith("ref")], steps
    kinds = [s[0] for s in steps]
    assert kinds == ["convolution", "pooling", "reorder", "convolution", "convolution",
                     "concat"], steps
    stem, pool, reorder = (_layouts(mds) for _, _, mds in steps[:3])
    assert stem["src"] == "abcd" and stem["dst"].startswith("aBcd"), steps  # NCHW, channel blocks
    assert pool["dst"].startswith("aBcd") and reorder["dst"] == "acdb", steps  # into NHWC
    assert all(_layouts(mds)["src"] == "acdb" for _, _, mds in steps[3:5]), steps


def _layouts(mds: str) -> dict[str, str]:
    """oneDNN's verbose memory descriptors ("src_f32::blocked:abcd::f0 ..."): arg -> format."""
    return {md.split("_")[0]: md.split(":")[3] for md in mds.split()}
