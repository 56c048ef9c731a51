"""REAPI ActionResult wire format: hand-derived golden bytes, roundtrips, protobuf cross-check."""

from __future__ import annotations

import pytest

from buildgen.cache.model import ActionResult, OutputFile
from buildgen.cache.protocol import ProtocolError, decode_action_result, encode_action_result

HASH = "ab" * 32  # 64 hex characters


def test_golden_bytes_derived_from_the_spec() -> None:
    # Derived by hand: tag = field_number << 3 | wire_type (0 varint, 2 length-delimited).
    #   Digest{hash=1: 64 ascii bytes, size_bytes=2: 300 = varint AC 02}
    #     0a 40 <hash> 10 ac 02                      -> 2 + 64 + 3 = 69 = 0x45 bytes
    #   OutputFile{path=1: "a.o", digest=2, is_executable=4: true}
    #     0a 03 "a.o" 12 45 <digest> 20 01           -> 5 + 71 + 2 = 78 = 0x4e bytes
    #   ActionResult{output_files=2, exit_code=4: 3}
    #     12 4e <output file> 20 03
    digest = b"\x0a\x40" + HASH.encode() + b"\x10\xac\x02"
    output = b"\x0a\x03a.o" + b"\x12\x45" + digest + b"\x20\x01"
    golden = b"\x12\x4e" + output + b"\x20\x03"
    result = ActionResult((OutputFile("a.o", HASH, 300, executable=True),), exit_code=3)
    assert encode_action_result(result) == golden
    assert decode_action_result(golden) == result


def test_zero_values_are_omitted_as_proto3_does() -> None:
    # An empty file: no size_bytes, no is_executable, no exit_code.
    result = ActionResult((OutputFile("e", HASH, 0),))
    assert encode_action_result(result) == b"\x12\x47\x0a\x01e\x12\x42\x0a\x40" + HASH.encode()
    assert encode_action_result(ActionResult(())) == b""
    assert decode_action_result(b"") == ActionResult(())


def test_roundtrip_keeps_order_unicode_large_sizes_and_negative_exit_codes() -> None:
    result = ActionResult(
        (
            OutputFile("mlp/cpu/libmlp.so", "0" * 64, 5 << 40, executable=True),
            OutputFile("mlp/cpu/src/ü.c", "f" * 64, 1),
        ),
        exit_code=-1,
    )
    data = encode_action_result(result)
    assert decode_action_result(data) == result
    # int32 -1 is a 10-byte varint (64-bit two's complement), as protobuf writes it.
    assert data.endswith(b"\x20" + b"\xff" * 9 + b"\x01")


def test_unknown_fields_are_skipped() -> None:
    known = encode_action_result(ActionResult((OutputFile("x", HASH, 7),)))
    # output_directories (3, len), stdout_raw (5, len), a fixed64 (6) and a fixed32 (7) field.
    extra = b"\x1a\x02\x0a\x00" + b"\x2a\x03abc" + b"\x31" + bytes(8) + b"\x3d" + bytes(4)
    assert decode_action_result(extra + known) == decode_action_result(known)


@pytest.mark.parametrize(
    "data",
    [
        b"\x12",  # tag with no length
        b"\x12\x05ab",  # length past the end
        b"\x20" + b"\xff" * 11,  # overlong varint
        b"\x0b",  # wire type 3 (groups) is not supported
        b"\x12\x02\x10\x01",  # an OutputFile without a path
        b"\x00\x00",  # field number 0
    ],
)
def test_malformed_bytes_raise_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_action_result(data)


def test_bytes_agree_with_the_protobuf_library() -> None:
    """Build the three REAPI messages as a dynamic descriptor and parse our bytes with protobuf."""
    descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
    from google.protobuf import descriptor_pool, message_factory

    f = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name="reapi_subset.proto", package="build.bazel.remote.execution.v2", syntax="proto3"
    )

    def message(name: str, fields: list[tuple[str, int, int, str | None, bool]]) -> None:
        m = fdp.message_type.add(name=name)
        for fname, number, ftype, type_name, repeated in fields:
            field = m.field.add(name=fname, number=number, type=ftype)
            field.label = f.LABEL_REPEATED if repeated else f.LABEL_OPTIONAL
            if type_name:
                field.type_name = type_name

    pkg = ".build.bazel.remote.execution.v2."
    message("Digest", [("hash", 1, f.TYPE_STRING, None, False),
                       ("size_bytes", 2, f.TYPE_INT64, None, False)])  # fmt: skip
    message("OutputFile", [("path", 1, f.TYPE_STRING, None, False),
                           ("digest", 2, f.TYPE_MESSAGE, pkg + "Digest", False),
                           ("is_executable", 4, f.TYPE_BOOL, None, False)])  # fmt: skip
    message("ActionResult", [("output_files", 2, f.TYPE_MESSAGE, pkg + "OutputFile", True),
                             ("exit_code", 4, f.TYPE_INT32, None, False)])  # fmt: skip
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    cls = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("build.bazel.remote.execution.v2.ActionResult")
    )

    result = ActionResult(
        (OutputFile("lib/libm.so", HASH, 123456789, True), OutputFile("m.h", "c" * 64, 0)),
        exit_code=-2,
    )
    ours = encode_action_result(result)
    msg = cls.FromString(ours)
    assert [(o.path, o.digest.hash, o.digest.size_bytes, o.is_executable)
            for o in msg.output_files] == [("lib/libm.so", HASH, 123456789, True),
                                           ("m.h", "c" * 64, 0, False)]  # fmt: skip
    assert msg.exit_code == -2
    # protobuf's own serialization of the same message is byte-identical (deterministic).
    assert msg.SerializeToString(deterministic=True) == ours
    assert decode_action_result(msg.SerializeToString()) == result
