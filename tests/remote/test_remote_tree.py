"""The input root as REAPI Directory messages: the digest the API defines, whatever the
order files come in, each blob once."""

from __future__ import annotations

import hashlib

from buildgen.remote.protos import re_pb2
from buildgen.remote.tree import Blob, InputFile, input_root, message_blob


def _blob(data: bytes) -> Blob:
    return Blob(hashlib.sha256(data).hexdigest(), len(data), data=data)


def test_the_root_digest_is_the_sha256_of_the_serialized_messages() -> None:
    header, source = _blob(b"#define X 1\n"), _blob(b"int x;\n")
    root, _ = input_root([InputFile("build/m.c", source), InputFile("include/x.h", header),
                          InputFile("tool.sh", source, executable=True)])
    build = re_pb2.Directory(files=[re_pb2.FileNode(name="m.c", digest=source.digest)])
    include = re_pb2.Directory(files=[re_pb2.FileNode(name="x.h", digest=header.digest)])
    expected = re_pb2.Directory(
        files=[re_pb2.FileNode(name="tool.sh", digest=source.digest, is_executable=True)],
        directories=[
            re_pb2.DirectoryNode(name="build", digest=message_blob(build).digest),
            re_pb2.DirectoryNode(name="include", digest=message_blob(include).digest),
        ],
    )
    assert root.data == expected.SerializeToString(deterministic=True)
    assert root.hash == hashlib.sha256(root.data).hexdigest()


def test_the_order_files_come_in_changes_nothing() -> None:
    files = [InputFile(f"a/{name}/f{i}", _blob(bytes([i]))) for i, name in
             enumerate(["z", "b", "m", "b"])]
    first, _ = input_root(files)
    second, _ = input_root(list(reversed(files[:3])) + files[3:])
    assert first.hash == second.hash


def test_every_blob_is_listed_once() -> None:
    same = _blob(b"same bytes")
    root, blobs = input_root([InputFile("a/x", same), InputFile("b/x", same),
                              InputFile("c/d/e/z", same)])
    hashes = [b.hash for b in blobs]
    assert len(hashes) == len(set(hashes))
    # the file, the root, a, b, c, c/d, c/d/e (a and b hold the same message: once)
    assert same.hash in hashes and root.hash in hashes
    assert len(blobs) == 1 + 1 + 1 + 3
