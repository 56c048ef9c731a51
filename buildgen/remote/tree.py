"""An action's input root as REAPI `Directory` messages (a Merkle tree).

Each folder is one `Directory` message listing its files and subfolders by name, in sorted
order (the API requires it, and it makes the root's digest a function of the files alone);
a folder's digest is the sha256 of its serialized message. The root digest then names the
whole tree, and the CAS holds each message once however many actions share the folder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from buildgen.remote.protos import re_pb2


@dataclass(frozen=True)
class Blob:
    """Content the CAS may need: a file on this machine, or bytes made here."""

    hash: str  # sha256 hex
    size: int
    path: str | None = None  # read when uploaded; None: `data` holds the bytes
    data: bytes | None = None

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None
        with open(self.path, "rb") as f:
            return f.read()

    @property
    def digest(self) -> re_pb2.Digest:
        return re_pb2.Digest(hash=self.hash, size_bytes=self.size)


@dataclass(frozen=True)
class InputFile:
    path: str  # relative to the input root, '/'-separated, normalized
    blob: Blob
    executable: bool = False


def message_blob(message: object) -> Blob:
    """A protobuf message as the blob the CAS stores it in."""
    data = message.SerializeToString(deterministic=True)  # type: ignore[attr-defined]
    return Blob(hashlib.sha256(data).hexdigest(), len(data), data=data)


def input_root(files: Iterable[InputFile]) -> tuple[Blob, list[Blob]]:
    """The root `Directory`'s blob and every blob the tree needs (messages and files)."""
    tree = _Folders()
    for file in files:
        folder, _, name = file.path.rpartition("/")
        tree.add(folder)
        tree.files[folder][name] = file
    blobs: dict[str, Blob] = {}
    root = tree.directory("", blobs)
    return root, list(blobs.values())


@dataclass
class _Folders:
    files: dict[str, dict[str, InputFile]] = field(default_factory=lambda: {"": {}})
    subfolders: dict[str, set[str]] = field(default_factory=lambda: {"": set()})

    def add(self, folder: str) -> None:
        while folder not in self.files:
            self.files[folder] = {}
            self.subfolders.setdefault(folder, set())
            parent, _, name = folder.rpartition("/")
            self.subfolders.setdefault(parent, set()).add(name)
            folder = parent

    def directory(self, folder: str, blobs: dict[str, Blob]) -> Blob:
        """The folder's message as a blob, after its subfolders'; all go into `blobs`."""
        prefix = folder + "/" if folder else ""
        message = re_pb2.Directory()
        for name, file in sorted(self.files[folder].items()):
            message.files.append(re_pb2.FileNode(
                name=name, digest=file.blob.digest, is_executable=file.executable))
            blobs.setdefault(file.blob.hash, file.blob)
        for name in sorted(self.subfolders[folder]):
            child = self.directory(prefix + name, blobs)
            message.directories.append(re_pb2.DirectoryNode(name=name, digest=child.digest))
        blob = message_blob(message)
        blobs.setdefault(blob.hash, blob)
        return blob
