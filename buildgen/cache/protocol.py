"""ActionResult <-> the REAPI protobuf wire format used by Bazel HTTP remote caches.

An ``/ac/<key>`` entry of the Bazel HTTP cache protocol is a serialized
``build.bazel.remote.execution.v2.ActionResult``; bazel-remote validates AC entries as such
by default, so buildgen writes the same bytes Bazel would. We encode the few fields we use by
hand rather than through generated protobuf code: the REAPI ``.proto`` is not shipped in any
PyPI package buildgen depends on, and the wire format (varints and length-delimited fields)
is tiny and frozen by protobuf's compatibility rules. Fields used:

    ActionResult { repeated OutputFile output_files = 2; int32 exit_code = 4; }
    OutputFile   { string path = 1; Digest digest = 2; bool is_executable = 4; }
    Digest       { string hash = 1; int64 size_bytes = 2; }

Encoding follows proto3 conventions (fields in number order, zero values omitted), so equal
results give equal bytes. Decoding skips fields it does not know (a Bazel-written entry may
carry output directories, stdout digests or metadata); such an entry decodes to the files only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from buildgen.cache.model import ActionResult, OutputFile

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_MASK64 = (1 << 64) - 1


class ProtocolError(ValueError):
    """Bytes that are not a well-formed message of the expected shape."""


def encode_action_result(result: ActionResult) -> bytes:
    out = bytearray()
    for f in result.outputs:
        out += _len_field(2, _encode_output_file(f))
    if result.exit_code:
        # int32 is a varint of the 64-bit two's complement: negatives take 10 bytes.
        out += _varint_field(4, result.exit_code & _MASK64)
    return bytes(out)


def decode_action_result(data: bytes) -> ActionResult:
    outputs: list[OutputFile] = []
    exit_code = 0
    for number, value in _fields(data):
        if number == 2 and isinstance(value, bytes):
            outputs.append(_decode_output_file(value))
        elif number == 4 and isinstance(value, int):
            low = value & 0xFFFFFFFF  # int32 semantics: keep the low 32 bits, signed
            exit_code = low - (1 << 32) if low >= 1 << 31 else low
    return ActionResult(tuple(outputs), exit_code)


def _encode_output_file(f: OutputFile) -> bytes:
    digest = _len_field(1, f.digest.encode("ascii"))
    if f.size:
        digest += _varint_field(2, f.size)
    out = _len_field(1, f.path.encode("utf-8")) + _len_field(2, digest)
    if f.executable:
        out += _varint_field(4, 1)
    return out


def _decode_output_file(data: bytes) -> OutputFile:
    path, digest_hash, size, executable = None, "", 0, False
    for number, value in _fields(data):
        if number == 1 and isinstance(value, bytes):
            path = _text(value)
        elif number == 2 and isinstance(value, bytes):
            for dnum, dval in _fields(value):
                if dnum == 1 and isinstance(dval, bytes):
                    digest_hash = _text(dval)
                elif dnum == 2 and isinstance(dval, int):
                    size = dval
        elif number == 4 and isinstance(value, int):
            executable = value != 0
    if path is None:
        raise ProtocolError("OutputFile without a path")
    return OutputFile(path, digest_hash, size, executable)


def _varint(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"varint of a negative number {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3 | _VARINT) + _varint(value)


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | _LEN) + _varint(len(payload)) + payload


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ProtocolError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """Yield (field number, varint value or payload bytes); fixed-width fields as bytes."""
    pos = 0
    while pos < len(data):
        tag, pos = _read_varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ProtocolError("field number 0")
        if wire == _VARINT:
            value, pos = _read_varint(data, pos)
            yield number, value
            continue
        if wire == _LEN:
            size, pos = _read_varint(data, pos)
        elif wire in (_I64, _I32):
            size = 8 if wire == _I64 else 4
        else:
            raise ProtocolError(f"unsupported wire type {wire}")
        if pos + size > len(data):
            raise ProtocolError("field runs past the end of the message")
        yield number, data[pos : pos + size]
        pos += size


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolError(f"string field is not UTF-8: {e}") from None


_HEX64 = re.compile(r"[0-9a-f]{64}")


def validate_action_result(result: ActionResult) -> None:
    """An AC entry is not content-addressed: refuse outputs that would escape the build dir."""
    for f in result.outputs:
        parts = f.path.split("/")
        if not f.path or f.path.startswith("/") or "\\" in f.path or set(parts) & {"", ".", ".."}:
            raise ProtocolError(f"output path {f.path!r} is not a relative path inside the build")
        if not _HEX64.fullmatch(f.digest) or not 0 <= f.size < 1 << 63:
            raise ProtocolError(f"output {f.path!r} has an invalid digest")
