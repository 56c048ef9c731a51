"""LRN, Resize, Upsample, Concat (and the steps after it), channel shuffles, LSTM, GRU and
RNN on the composite CPU target (c + onednn): the
variants oneDNN reproduces run in onednn regions, the others decline to the c host with a
reason naming the attribute, and every library agrees with onnxruntime."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from cpulib_build import build_cases, check_case, composite, imported, one_region, source
from cpulib_cases import Builder
from onednn_image_cases import (
    IMAGE_CASES,
    RECURRENT_CASES,
    SWEEP,
    int32s,
    recurrent_node,
    resize_declined,
    resize_node,
    upsample9,
)

from buildgen.backends.libraries import ONEDNN_PIP, pip_onednn_prefix
from buildgen.backends.onednn import OneDNNBackend
from buildgen.errors import BuildgenError

TARGET = composite("onednn", threads=1)
CASES = (*IMAGE_CASES, *RECURRENT_CASES)


def _placement(build_dir: Path, model: str) -> dict[str, str]:
    """Node name -> the target of its region."""
    partition = json.loads((build_dir / model / "lib" / "partition.json").read_text())
    return {n: r["target"] for r in partition["regions"] for n in r["nodes"]}


def _need_onednn() -> None:
    pytest.importorskip("onnxruntime")
    try:
        pip_onednn_prefix()
    except BuildgenError:
        pytest.skip(f"oneDNN is not installed: {ONEDNN_PIP}")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need_onednn()
    return build_cases(tmp_path_factory.mktemp("onednn-image"), [c for c, _, _ in CASES],
                       TARGET)


@pytest.mark.parametrize("entry", CASES, ids=lambda e: e[0].name)
def test_taken_on_onednn_declined_on_host_and_matches_onnxruntime(built: Path, entry) -> None:
    case, on_onednn, on_host = entry
    placement = _placement(built / "build", case.name)
    assert {n: placement[n] for n in on_onednn} == {n: "onednn" for n in on_onednn}
    assert {n: placement[n] for n in on_host} == {n: "c" for n in on_host}
    check_case(built, case, "onednn")


def test_the_modules_compile_without_warnings(built: Path) -> None:
    """GCC saw arrays of 3 to 5 dims passed where oneDNN declares dnnl_dims_t (12): with
    a bidirectional LSTM's view it warned -Wstringop-overread (recurrent_taken)."""
    log = (built / "build.log").read_text()
    assert "warning:" not in log, log[-4000:]


@pytest.mark.slow
def test_sampling_sweep_matches_onnxruntime(tmp_path: Path) -> None:
    """The Resize variants decline_reason takes (by comparing index and weight tables with
    oneDNN's) run on oneDNN and agree with onnxruntime; the rest run on the host."""
    _need_onednn()
    folder = build_cases(tmp_path, [SWEEP], TARGET)
    placement = _placement(folder / "build", SWEEP.name)
    graph, _ = imported(SWEEP.make(), SWEEP.inputs, tmp_path)
    backend = OneDNNBackend()
    taken = {n.name for n in graph.nodes if backend.decline_reason(n, graph) is None}
    assert 20 < len(taken) < len(graph.nodes)
    assert {n for n, target in placement.items() if target == "onednn"} == taken
    check_case(folder, SWEEP, "onednn")


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["any", "plain"])
def test_other_activation_layouts_agree(tmp_path: Path, layout: str) -> None:
    """LRN, resampling and concat read and write blocked (any) or plain activations too."""
    _need_onednn()
    cases = [c for c, _, _ in IMAGE_CASES
             if c.name in ("lrn_net", "resize_taken", "concat_net", "shuffle_net", "c2f")]
    folder = build_cases(tmp_path, cases, composite("onednn", threads=1, activation_layout=layout))
    for case in cases:
        check_case(folder, case, "onednn")


def test_generated_source_builds_the_primitives(built: Path) -> None:
    text = source(built / "build", "lrn_net", "onednn")
    assert "bg_dnnl_make_lrn, &lrn" in text and ".size = 5, .alpha = 0.01f" in text
    text = source(built / "build", "resize_taken", "onednn")
    assert ".alg = dnnl_resampling_nearest" in text and ".alg = dnnl_resampling_linear" in text


def test_concat_keeps_the_region_in_one_piece(built: Path) -> None:
    """The Concats and the steps after them join their Convs' region: the fire module's
    branches, the DenseNet-style block and the pooling are one onednn region."""
    partition = json.loads((built / "build" / "concat_net" / "lib" / "partition.json")
                           .read_text())
    region_of = {n: r["id"] for r in partition["regions"] for n in r["nodes"]}
    chain = ("/a_conv", "/c", "/d_bn", "/e", "/f", "/g_pool", "/g")
    assert len({region_of[n] for n in chain}) == 1
    text = source(built / "build", "concat_net", "onednn")
    assert "bg_dnnl_concat(m, r, &spec" in text and ".axis = 3" in text


def test_a_channel_shuffle_keeps_the_convolutions_in_one_region(built: Path) -> None:
    """ShuffleNet's unit runs as one onednn region, its shuffle as oneDNN's shuffle of
    group size channels / groups."""
    partition = json.loads((built / "build" / "shuffle_net" / "lib" / "partition.json")
                           .read_text())
    region_of = {n: r["id"] for r in partition["regions"] for n in r["nodes"]}
    assert len({region_of[n] for n in ("/g1", "/s_r1", "/s_t", "/s_r2", "/dw")}) == 1
    text = source(built / "build", "shuffle_net", "onednn")
    assert "bg_dnnl_make_shuffle" in text and ".group_size = 4" in text


def test_a_split_keeps_a_c2f_block_in_one_region(built: Path) -> None:
    """YOLOv8's C2f block is one onednn region: its Split is a reorder per part, from a view
    of the Conv's output, and the halves stay in the layout the Conv wrote."""
    partition = json.loads((built / "build" / "c2f" / "lib" / "partition.json").read_text())
    onednn = [r for r in partition["regions"] if r["target"] == "onednn"]
    assert len(onednn) == 1, partition["regions"]
    text = source(built / "build", "c2f", "onednn")
    assert text.count("bg_dnnl_split(m, r, &spec") == 3
    assert ".axis = 1, .n = 2" in text and ".axis = 3, .n = 3" in text


def test_steps_after_a_silu_or_gelu_fuse_into_its_anchor(built: Path) -> None:
    """YOLOv5's bottleneck is one region whose residual Add is the last Conv's post-op
    (after its swish); a GELU's residual Add is the MatMul's, after its gelu_erf."""
    partition = json.loads((built / "build" / "silu_residual" / "lib" / "partition.json")
                           .read_text())
    assert len(partition["regions"]) == 1
    text = source(built / "build", "silu_residual", "onednn")
    conv = text[text.index("Conv '/c2'"):]
    conv = conv[:conv.index("bg_dnnl_conv(")]
    assert "dnnl_eltwise_swish" in conv and "Add '/res'" in conv
    matmul = text[text.index("MatMul '/mm'"):]
    matmul = matmul[:matmul.index("bg_dnnl_matmul(")]
    assert "dnnl_eltwise_gelu_erf" in matmul and "Add '/g_res'" in matmul


def test_decline_reasons_name_the_attribute(tmp_path: Path) -> None:
    backend = OneDNNBackend()
    graph, _ = imported(resize_declined(), {"x": (1, 3, 6, 8)}, tmp_path)
    reasons = {n.name: backend.decline_reason(n, graph) for n in graph.nodes}
    assert reasons["/align"] == ("Resize coordinate_transformation_mode=align_corners: oneDNN "
                                 "resampling has no such mode")
    assert reasons["/near_down_floor"].startswith("Resize nearest_mode=round_prefer_floor: ")
    assert "along axis 2 (6 -> 3)" in reasons["/near_down_floor"]
    assert reasons["/lin_asym"].startswith("Resize coordinate_transformation_mode=asymmetric: ")
    assert reasons["/cubic"].startswith("Resize mode=cubic: oneDNN resampling has no such mode")
    assert "batch or channel" in reasons["/channels"]
    graph, _ = imported(upsample9(), {"x": (1, 2, 4, 5)}, tmp_path)
    near, lin = graph.nodes
    assert backend.decline_reason(near, graph) is None
    assert backend.decline_reason(lin, graph).startswith("Upsample mode=linear (asymmetric")


def test_lrn_declines(tmp_path: Path) -> None:
    backend = OneDNNBackend()
    b = Builder("odd_lrns")
    b.outputs.append(b.node("LRN", [b.input("flat", [2, 6])], "lrn2d", size=3))
    b.outputs.append(b.node("LRN", [b.input("x", [1, 6, 4, 4])], "lrn4", size=4))
    graph, _ = imported(b.model(), {"flat": (2, 6), "x": (1, 6, 4, 4)}, tmp_path)
    flat, even = graph.nodes
    assert "LRN of rank 2" in (backend.decline_reason(flat, graph) or "")
    # onnxruntime has no even sizes either, so the c host's result is not compared here.
    assert (backend.decline_reason(even, graph) or "").startswith("LRN size=4 (even): ")


def test_recurrent_declines(tmp_path: Path) -> None:
    """What onnxruntime cannot run either (so no build compares it): layout=1; and a
    constant sequence_lens with shorter sequences, declined for its values when the graph
    carries its constants (as in the partition stage), else refused at codegen with a hint."""
    backend = OneDNNBackend()
    b = Builder("recurrent_odd")
    b.outputs += recurrent_node(b, "RNN", b.input("xb", [2, 5, 4]), "batch_first", 3, 4,
                                layout=1)
    b.outputs += recurrent_node(b, "GRU", b.input("x", [5, 2, 4]), "short", 3, 4,
                                (int32s(b, "lens", [5, 3]),))
    b.outputs += recurrent_node(b, "RNN", "x", "mixed", 3, 4, direction="bidirectional",
                                activations=["Tanh", "Relu"])
    graph, weights = imported(b.model(), {"xb": (2, 5, 4), "x": (5, 2, 4)}, tmp_path)
    batch_first, short, mixed = graph.nodes
    assert backend.decline_reason(batch_first, graph).startswith("RNN layout=1 (batch first)")
    assert backend.decline_reason(mixed, graph).startswith("RNN activations=['Tanh', 'Relu']")
    assert backend.decline_reason(short, graph) is None  # no constants: codegen checks
    carrying = replace(graph, constant_values=weights)
    assert backend.decline_reason(graph.node("/short"), carrying) == (
        "GRU sequence_lens [3, 5] (oneDNN runs every sequence for all 5 steps)")
    partition = one_region(graph, "onednn", ["/short"])
    with pytest.raises(BuildgenError, match=r"sequence_lens \[3, 5\]"):
        backend.generate("m", graph, partition, {}, weights)


def test_scales_that_are_not_out_over_in_decline(tmp_path: Path) -> None:
    """With the graph's constants (the partition stage loads them) decline_reason judges the
    scales themselves; without them it checks out / in, and codegen checks the scales and
    names the node to pin when ONNX samples elsewhere (5 * 1.5 -> 7, not 7 / 5)."""
    b = Builder("fractional")
    x = b.input("x", [1, 2, 5, 5])
    b.outputs.append(resize_node(b, x, "frac", scales=[1, 1, 1.5, 1.5], mode="linear"))
    graph, weights = imported(b.model(), {"x": (1, 2, 5, 5)}, tmp_path)
    backend = OneDNNBackend()
    carrying = replace(graph, constant_values=weights)
    assert "scale 1.5 (not out / in = 7 / 5)" in (
        backend.decline_reason(carrying.nodes[0], carrying) or "")
    assert backend.decline_reason(graph.nodes[0], graph) is None
    with pytest.raises(BuildgenError, match=r"scale 1.5 \(not out / in = 7 / 5\)"):
        backend.generate("m", graph, one_region(graph, "onednn"), {}, weights)


def test_the_partition_depends_on_the_constants_only_where_a_backend_read_one(built: Path):
    """Resize's constant scales were read to decline /frac: its partition's depfile names
    constants.bin, so new scales re-run it. The LRN model's partition read no constant: new
    weight values there re-run no partition."""
    def depfile(model: str) -> str:  # as ninja recorded it (it deletes the file itself)
        import subprocess

        from buildgen.ninja.tool import ninja_binary

        return subprocess.run([ninja_binary(), "-C", str(built / "build"), "-t", "deps",
                               f"{model}/lib/partition.json"], capture_output=True, text=True,
                              check=True).stdout

    assert "resize_declined/constants.bin" in depfile("resize_declined")
    assert "constants.bin" not in depfile("lrn_net")
