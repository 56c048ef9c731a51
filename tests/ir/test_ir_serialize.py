"""graph.json round trips and is deterministic; the weights file is aligned and read-only."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from ir_samples import small_graph

from buildgen.errors import BuildgenError
from buildgen.ir import DType, TensorType, Weight
from buildgen.ir.serialize import (
    FORMAT,
    VERSION,
    dump_graph,
    graph_digest,
    load_graph,
    load_weights,
    pack_weights,
    weights_size,
)


def _attrs_equal(a: object, b: object) -> bool:
    # nan != nan, so compare attribute values through their text form
    return repr(a) == repr(b)


def test_round_trip_keeps_every_field_and_attr_type() -> None:
    graph = small_graph()
    loaded = load_graph(dump_graph(graph))
    assert loaded.values == graph.values and loaded.weights == graph.weights
    assert loaded.inputs == graph.inputs and loaded.outputs == graph.outputs
    assert (loaded.name, loaded.opset, loaded.source) == ("small", 17, "models/small.onnx")
    for got, want in zip(loaded.nodes, graph.nodes, strict=True):
        assert replace(got, attrs=()) == replace(want, attrs=())
        assert _attrs_equal(got.attrs, want.attrs)
    reshape = loaded.node("reshape")
    assert type(reshape.attr("one")) is float and type(reshape.attr("allowzero")) is int
    assert reshape.attr("empty") == ()
    assert math.isnan(reshape.attr("nan"))  # type: ignore[arg-type]
    assert reshape.attr("floats") == (0.1, 1e-300, math.inf, -math.inf)
    assert loaded.node("add").attr("note") == "π in UTF-8"
    assert loaded.node("custom").domain == "com.example"
    assert dump_graph(loaded) == dump_graph(graph)


def test_text_is_strict_sorted_json_with_a_format_header() -> None:
    text = dump_graph(small_graph())
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert (doc["format"], doc["version"]) == (FORMAT, VERSION)
    assert list(doc) == sorted(doc)
    assert all(list(node) == sorted(node) for node in doc["nodes"])
    assert text.endswith("}\n")
    assert text == dump_graph(small_graph())


def test_digest_is_sha256_of_the_text() -> None:
    text = dump_graph(small_graph())
    assert graph_digest(text) == graph_digest(dump_graph(load_graph(text)))
    assert len(graph_digest(text)) == 64
    assert graph_digest(text) != graph_digest(text.replace('"small"', '"other"'))


def test_load_from_path_str_and_pathlike(tmp_path: Path) -> None:
    path = tmp_path / "graph.json"
    path.write_text(dump_graph(small_graph()), encoding="utf-8")
    assert load_graph(path) == load_graph(str(path)) == load_graph(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format="something-else"), "not a buildgen graph file"),
        (lambda d: d.update(version=2), "graph file version 2 is not supported"),
        (lambda d: d.pop("nodes"), "malformed graph file: KeyError"),
        (lambda d: d["inputs"][0].update(dtype="float16"), "malformed graph file: ValueError"),
    ],
)
def test_mismatched_or_malformed_files_are_clear_errors(mutate, message: str) -> None:  # noqa: ANN001
    doc = json.loads(dump_graph(small_graph()))
    mutate(doc)
    with pytest.raises(BuildgenError, match=message):
        load_graph(json.dumps(doc))


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(BuildgenError, match="cannot read graph file"):
        load_graph(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  oops", encoding="utf-8")
    with pytest.raises(BuildgenError, match=r"bad.json:2:3: graph file is not valid JSON"):
        load_graph(bad)


def _arrays() -> list[tuple[str, np.ndarray]]:
    return [
        ("w", np.arange(12, dtype=np.float32).reshape(3, 4)),
        ("b", np.array([1.5, -2.0, 3.25, 0.1], np.float32)),
        ("shape", np.array([-1], np.int64)),
        ("flag", np.array([True, False, True])),
    ]


def test_pack_weights_aligns_each_weight_and_writes_little_endian() -> None:
    weights, blob = pack_weights(_arrays())
    assert [w.offset for w in weights] == [0, 64, 128, 192]
    assert weights == small_graph().weights
    assert len(blob) == 195  # nothing after the last weight
    assert blob[48:64] == bytes(16)  # zero padding between weights
    assert blob[128:136] == (-1).to_bytes(8, "little", signed=True)
    assert blob[192:195] == b"\x01\x00\x01"


def test_pack_weights_big_endian_input_is_stored_little_endian() -> None:
    (weight,), blob = pack_weights([("x", np.array([1, 2], dtype=">i4"))])
    assert weight.type == TensorType(DType.INT32, (2,))
    assert blob == b"\x01\x00\x00\x00\x02\x00\x00\x00"


def test_pack_weights_rejects_dtypes_the_ir_lacks() -> None:
    with pytest.raises(ValueError, match="float16"):
        pack_weights([("h", np.zeros(2, np.float16))])


def test_load_weights_from_file_and_bytes_are_read_only_views(tmp_path: Path) -> None:
    graph = small_graph()
    _, blob = pack_weights(_arrays())
    path = tmp_path / "weights.bin"
    path.write_bytes(blob)
    assert weights_size(graph) == len(blob)
    for source in (path, str(path), blob):
        arrays = load_weights(graph, source)
        assert list(arrays) == ["w", "b", "shape", "flag"]
        for name, want in _arrays():
            np.testing.assert_array_equal(arrays[name], want)
            assert arrays[name].dtype == want.dtype.newbyteorder("<") or want.dtype == bool
            assert not arrays[name].flags.writeable
        with pytest.raises(ValueError):
            arrays["w"][0, 0] = 5.0


def test_load_weights_size_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    graph = small_graph()
    path = tmp_path / "weights.bin"
    path.write_bytes(bytes(100))
    with pytest.raises(BuildgenError, match="has 100 bytes but graph 'small' expects 195"):
        load_weights(graph, path)
    with pytest.raises(BuildgenError, match="cannot read weights file"):
        load_weights(graph, tmp_path / "absent.bin")


def test_graph_without_weights_reads_an_empty_file(tmp_path: Path) -> None:
    graph = replace(small_graph(), weights=())
    path = tmp_path / "empty.bin"
    path.write_bytes(b"")
    assert load_weights(graph, path) == {}
    assert pack_weights([]) == ((), b"")


def test_zero_size_weight_gets_an_aligned_offset() -> None:
    weights, blob = pack_weights(
        [
            ("a", np.ones(3, np.float32)),
            ("empty", np.zeros(0, np.int64)),
            ("c", np.ones(1, np.float32)),
        ]
    )
    assert weights[1] == Weight("empty", TensorType(DType.INT64, (0,)), 64)
    assert weights[2].offset == 64 and len(blob) == 68
