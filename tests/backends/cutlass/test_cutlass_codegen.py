"""The glue module and instantiation list: deterministic, readable, and changed by every
codegen attribute of the cutlass target."""

from __future__ import annotations

import json
import re

import pytest
from cutlass_cases import generate

from buildgen.backends.cutlass import choose
from buildgen.errors import BuildgenError


def _kernels(listing: str) -> dict[str, dict]:
    return {k["name"]: k for k in json.loads(listing)["kernels"]}


def _calls(text: str) -> list[str]:
    """The launchers the region functions call, in order."""
    return re.findall(r"if \((bg_cutlass_\w+)\(&a, stream", text)


def test_deterministic_and_free_of_cutlass_headers() -> None:
    first, listing = generate("cnn")
    again, listing_again = generate("cnn")
    assert first == again and listing == listing_again
    assert "#include \"cutlass/" not in first and "bg_cutlass.h" in first
    assert "/Users/" not in first and "/work/" not in first  # no machine paths


def test_glue_names_nodes_shapes_and_kernels() -> None:
    text, _ = generate("cnn")
    assert "Conv '/block1/conv/Conv' -> BatchNormalization '/block1/bn/BatchNormalization'" \
        in text
    assert "Conv2d fprop x=[1,32,16,16] w=[32,32,3,3] -> [1,32,16,16]" in text
    assert "cnn__cutlass_create" in text and "KCRS -> KRSC" in text
    assert "NCHW -> NHWC transpose" in text


def test_identical_instantiations_are_emitted_once() -> None:
    text, listing = generate("cnn")
    kernels = _kernels(listing)
    # block1, block2 and head_conv share one set of template parameters.
    shared = [k for k in kernels.values() if len(k["users"]) == 3]
    assert len(shared) == 1 and shared[0]["name"].startswith("bg_cutlass_conv2d_")
    assert re.fullmatch(r"bg_cutlass_conv2d_[0-9a-f]{12}", shared[0]["name"])
    assert text.count(f"extern \"C\" int {shared[0]['name']}(") == 1
    assert _calls(text).count(shared[0]["name"]) == 3


def test_sm_and_use_3xtf32_pick_the_math() -> None:
    _, tensor_op = generate("mlp", sm=90)
    _, simt_old = generate("mlp", sm=75)
    _, simt_off = generate("mlp", sm=90, use_3xtf32=False)
    maths = [{k["params"]["math"] for k in _kernels(x).values()}
             for x in (tensor_op, simt_old, simt_off)]
    assert maths == [{"3xtf32"}, {"simt"}, {"simt"}]
    # sm also bounds shared memory: the 147 KiB 256x128x32 tile fits sm_80 and sm_90, not
    # the 99 KiB of sm_86/89.
    problem = choose.Problem("gemm", 512, 512, 512, 1, "row", "row", (512, 512, 512), "linear")
    deep = choose.Tile((256, 128, 32), (64, 64, 32), 3)
    for sm, fits in ((80, True), (86, False), (89, False), (90, True)):
        tiles = {c.tile for c in choose.candidates(problem, choose.settings_of({"sm": sm}))}
        assert (deep in tiles) == fits, sm
    # ... and the SM count the heuristic fills with waves of CTAs: some square GEMM gets
    # another tile on an A100 (108 SMs) than on an H100 (132).
    def tile(size: int, sm: int) -> choose.Tile:
        square = choose.Problem("gemm", size, size, 1024, 1, "row", "row", (1024, size, size),
                                "linear")
        settings = choose.settings_of({"sm": sm, "find_first_valid": False})
        return choose.choose(square, settings).kernel.tile

    assert any(tile(size, 80) != tile(size, 90) for size in range(256, 4097, 256))


def test_split_k_slices_split_a_small_wide_gemm() -> None:
    plain, _ = generate("mlp")
    split, _ = generate("mlp", split_k_slices=[1, 2, 4])
    assert "a.split_k = 4;" not in plain
    # fc3: m=8 n=10 k=512 fills one CTA: four slices of 128 run on four SMs.
    assert "a.split_k = 4;" in split and "split-K 4" in split
    assert re.search(r"a\.workspace_bytes = [1-9]", split)


def test_find_first_valid_versus_heuristic() -> None:
    _, first = generate("mlp")
    _, scored = generate("mlp", find_first_valid=False)
    tiles_first = {tuple(k["params"]["threadblock"]) for k in _kernels(first).values()}
    tiles_scored = {tuple(k["params"]["threadblock"]) for k in _kernels(scored).values()}
    assert tiles_first == {(128, 128, 16)}  # the first candidate fits every GEMM
    assert tiles_scored != tiles_first  # m=8 GEMMs want narrower tiles


def test_profile_all_alignments_widens_the_candidates_and_records_may_pick_them() -> None:
    from buildgen.partition.cost.keys import key_text
    from buildgen.partition.cost.records import Record, Records

    problem = choose.Problem("gemm", 8, 1024, 512, 1, "row", "column", (512, 512, 1024),
                             "relu")
    widest = choose.settings_of({"sm": 90})
    every = choose.settings_of({"sm": 90, "profile_all_alignments": True})
    narrow = [c for c in choose.candidates(problem, every) if c.align_a == 2]
    assert len(choose.candidates(problem, every)) == 9 * len(
        choose.candidates(problem, widest))
    record = Record(key_text(choose.record_key(problem, narrow[0], 1, 90)), 1e-6, 10)
    records = Records({record.key: record})
    assert choose.choose(problem, every, records).kernel == narrow[0]
    assert choose.choose(problem, every, records).reason == "record"
    # Without the attribute the narrow kernel is no candidate: its record is ignored.
    assert choose.choose(problem, widest, records).kernel.align_a == 4


def test_records_override_the_choice_in_the_generated_module() -> None:
    from buildgen.partition.cost.keys import key_text
    from buildgen.partition.cost.records import Record, Records

    problem = choose.Problem("gemm", 8, 10, 512, 1, "row", "column", (512, 512, 10), "linear")
    settings = choose.settings_of({"sm": 90, "split_k_slices": [1, 2]})
    last = choose.candidates(problem, settings)[-1]
    record = Record(key_text(choose.record_key(problem, last, 2, 90)), 1e-7, 10)
    text, listing = generate("mlp", Records({record.key: record}), split_k_slices=[1, 2])
    assert last.symbol in _kernels(listing)
    assert "split-K 2 (record)" in text


def test_unset_sm_is_an_error() -> None:
    from cutlass_cases import model, partition

    from buildgen.backends.cutlass import CutlassBackend

    with pytest.raises(BuildgenError, match="'sm' attribute is unset"):
        CutlassBackend().plan(model("mlp").graph, partition("mlp"), {"sm": None})
