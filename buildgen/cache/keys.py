"""Action keys: the sha256 of everything that determines an action's outputs.

A key covers the rule, the command line, the bytes of every input, the identity of every
tool and the libraries a link reads — and nothing about where the checkout lives, so two
clones at different paths share keys. Paths are named in a *frame*: a file under the build
dir is `<build>/rel`, one under the source root `<root>/rel`, one of buildgen's own files
(its C headers and kernels sources) `<buildgen>/rel` wherever buildgen is installed,
anything else (a system header, a tool) keeps its absolute path, identified by its bytes or
its version. So the c host's kernels have one key in every project and every installation
of the same buildgen: the store filled at install time (buildgen/cache/prebuilt.py) holds
them under it.

Inputs found only by running the action (headers, external-data files: a depfile's
prerequisites) are handled as ccache's direct mode does: the *base key* covers the command,
the declared inputs and the tools; the store keeps, under `depsets_key(base)`, the sets of
hidden inputs seen with that base before; the *full key* adds those files' names and bytes.
A lookup tries each recorded set; a run records a new one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Protocol

KEY_FORMAT = 3  # bumped whenever what a key covers changes: old entries then simply miss
BUILD_TOKEN = "<build>"
ROOT_TOKEN = "<root>"
PACKAGE_TOKEN = "<buildgen>"
# buildgen's package folder, resolved as buildgen.resources resolves it (the paths gen
# writes for its headers come from there).
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
MISSING = "missing"  # the digest of a file that does not exist
_CHUNK = 1 << 20
MEMO_MIN_BYTES = 1 << 20  # smaller files hash faster than a memo entry is read
RACY_S = 2.0


@dataclass(frozen=True)
class PathFrame:
    """Names paths independently of where the build dir and source root are."""

    build: str  # absolute, normalized: ninja's cwd
    root: str  # absolute, normalized: the manifest's folder
    package: str = PACKAGE_DIR  # buildgen's own folder

    @classmethod
    def of(cls, build: str, root: str, package: str = PACKAGE_DIR) -> PathFrame:
        """`root` may be relative to `build` (as build.ninja writes it)."""
        build = os.path.normpath(os.path.abspath(build))
        return cls(build, os.path.normpath(os.path.join(build, root)), package)

    @cached_property
    def _bases(self) -> tuple[tuple[str, str], ...]:
        # The longer (inner) folder first: the build dir usually lies inside the root, and
        # in a checkout of buildgen its package lies inside the root too.
        pairs = ((BUILD_TOKEN, self.build), (ROOT_TOKEN, self.root),
                 (PACKAGE_TOKEN, self.package))
        return tuple(sorted(pairs, key=lambda p: -len(p[1])))

    def name(self, path: str) -> str:
        """A file's name in keys; `path` is absolute or relative to the build dir."""
        return _name_in(self, path)

    def local(self, name: str) -> str:
        """The path (relative to the build dir where it can be) a key's name stands for."""
        return _local_in(self, name)

    def absolute(self, name: str) -> str:
        """The absolute path a key's name stands for."""
        return _absolute_in(self, name)

    def argument(self, arg: str) -> str:
        """A command-line word with the frame's absolute folders replaced by tokens, so
        `-I/home/a/repo/include` and `-I/home/b/repo/include` read the same. Relative
        words are already relative to the build dir and stay as written."""
        for token, base in self._bases:
            if base == "/" or base not in arg:  # most words name no absolute folder
                continue
            pattern = re.compile(re.escape(base) + r"(?=/|$|[\s:;,=])")
            arg = _replace_paths(pattern, token, arg)
        return arg


# Memoized per frame and path (frames compare by value, so a runner's next action, with a
# frame of its own, finds them): every action names its compile's ~40 headers twice, and
# each name is a join, a normpath and a relpath in Python.
@lru_cache(maxsize=1 << 15)
def _name_in(frame: PathFrame, path: str) -> str:
    absolute = os.path.normpath(os.path.join(frame.build, path))
    for token, base in frame._bases:
        if absolute == base:
            return token
        if absolute.startswith(base.rstrip("/") + "/"):
            return token + "/" + absolute[len(base.rstrip("/")) + 1 :]
    return absolute


@lru_cache(maxsize=1 << 15)
def _absolute_in(frame: PathFrame, name: str) -> str:
    for token, base in frame._bases:
        if name == token or name.startswith(token + "/"):
            return os.path.normpath(base + name[len(token) :])
    return name


@lru_cache(maxsize=1 << 15)
def _local_in(frame: PathFrame, name: str) -> str:
    absolute = _absolute_in(frame, name)
    return absolute if absolute == name else os.path.relpath(absolute, frame.build)


def _replace_paths(pattern: re.Pattern[str], token: str, word: str) -> str:
    return pattern.sub(lambda m: token if _starts_path(word, m.start()) else m[0], word)


def _starts_path(word: str, at: int) -> bool:
    """Whether an absolute path starts at `at` in `word` (and is not the tail of a longer
    path): at the word's start, after `=`, `,`, `:` or `;`, or after an option's name
    (`-I/abs`, `-isystem/abs`)."""
    if at == 0 or word[at - 1] in "=,:;":
        return True
    return word.startswith("-") and "/" not in word[:at]


def file_digest(path: str, memo: DigestMemo | None = None) -> str:
    """sha256 hex of a file's bytes; MISSING when it does not exist (the action then
    fails or produces it, and the key says so). With `memo`, a large file's digest is
    remembered per path, size, mtime, ctime and inode (ccache's direct mode, ninja's
    deps log): a 100 MB weights file is hashed once, not by every action reading it."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return MISSING
    return _digest_of(path if path.startswith("/") else os.path.abspath(path), info, memo)


def file_digests(paths: tuple[str, ...]) -> list[str] | None:
    """file_digest of each of these absolute paths, None if one is missing. A compile's
    hidden inputs (its ~40 headers) come as one set, the same set rebuild after rebuild:
    when every file has the stamps it had the last time the set was asked for, its
    digests are those of that time, for a stat a file and no lookup of each (half the
    cost, 38 headers)."""
    try:
        infos = list(map(os.stat, paths))
    except (FileNotFoundError, NotADirectoryError):
        return None
    stamps: list[_Stamp] = [
        (i.st_size, i.st_mtime_ns, i.st_ctime_ns, i.st_ino, i.st_dev) for i in infos]
    known = _SETS.get(paths)
    if known is not None and known[0] == stamps:
        return list(known[1])
    digests = [_digest_of(path, info, None) for path, info in zip(paths, infos, strict=True)]
    if MISSING in digests:
        return None
    # Not while a file may still change within its mtime's granularity (see RACY_S).
    if not infos or time.time() - max(i.st_mtime for i in infos) >= RACY_S:
        if len(_SETS) >= 4096:
            _SETS.clear()
        _SETS[paths] = (stamps, tuple(digests))
    return digests


_Stamp = tuple[int, int, int, int, int]  # size, mtime, ctime (ns), inode, device
_SETS: dict[tuple[str, ...], tuple[list[_Stamp], tuple[str, ...]]] = {}


def _digest_of(path: str, info: os.stat_result, memo: DigestMemo | None) -> str:
    """The digest of the file at absolute `path`, whose status is `info`."""
    # A file changed within RACY_S could change again within its mtime's granularity
    # without its stamp changing: hashed every time until it has settled.
    if time.time() - info.st_mtime < RACY_S:
        return _hash_file(path)
    stamp = (path, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)
    if (known := _SEEN.known(stamp)) is not None:  # a runner's headers: most files
        return known
    return _SEEN.get_or_compute(stamp, lambda: _stored_digest(path, info, memo))


def _stored_digest(path: str, info: os.stat_result, memo: DigestMemo | None) -> str:
    """The digest from the on-disk memo (a large file), else the file's bytes hashed."""
    if memo is None or info.st_size < MEMO_MIN_BYTES:
        return _hash_file(path)
    fingerprint = ["file", os.path.realpath(path), info.st_size, info.st_mtime_ns,
                   info.st_ctime_ns, info.st_ino]
    return memo.get_or_compute(fingerprint, lambda: _hash_file(path))


class _ProcessMemo:
    """Digests this process has computed, by the same stamp as the on-disk memo's: a
    worker's runner (buildgen/worker/runner.py) serves many actions, and each compile's ~40
    headers then cost a stat each instead of a read and a hash. The layer in front of the
    on-disk memo; bounded. A stamp that matches is the same file as far as ccache's direct
    mode and ninja's deps log trust it."""

    def __init__(self, limit: int):
        self._known: dict[object, str] = {}
        self._limit = limit

    def known(self, fingerprint: object) -> str | None:
        return self._known.get(fingerprint)

    def get_or_compute(self, fingerprint: object, compute: Callable[[], str]) -> str:
        if (known := self._known.get(fingerprint)) is not None:
            return known
        digest = compute()
        if digest != MISSING:  # gone between the stat and the read: not a digest to keep
            if len(self._known) >= self._limit:
                self._known.clear()
            self._known[fingerprint] = digest
        return digest


_SEEN = _ProcessMemo(limit=50_000)


class DigestMemo(Protocol):
    def get_or_compute(self, fingerprint: object, compute: Callable[[], str]) -> str: ...


def _hash_file(path: str) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return MISSING
    return digest.hexdigest()


@dataclass(frozen=True)
class KeyParts:
    """What a base key is computed from; every path already named in the frame."""

    rule: str
    command: tuple[str, ...]  # normalized with PathFrame.argument
    inputs: tuple[tuple[str, str], ...]  # (name, digest) of each declared input, in order
    outputs: tuple[str, ...]  # names of the outputs
    depfile: str | None
    tools: tuple[tuple[str, str], ...]  # (word as written, identity) of each tool
    libraries: tuple[tuple[str, str], ...] = ()  # (name, digest) of libraries a link reads
    environment: tuple[tuple[str, str], ...] = ()  # (name, value) of set TOOL_ENVIRONMENT


# Environment variables that change what a compiler, assembler or linker does without
# appearing on its command line (the set ccache and Bazel's action_env care about): a
# different CPATH finds a different math.h, and the depfile of the cached run would still
# name the old one. Their values are part of every action's key.
TOOL_ENVIRONMENT = (
    "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "LIBRARY_PATH",
    "GCC_EXEC_PREFIX", "COMPILER_PATH", "GCC_COMPARE_DEBUG", "SOURCE_DATE_EPOCH",
    "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN", "CUDA_PATH", "CUDA_HOME",
    "CUDA_ROOT", "CUDAFLAGS", "CLANG_CONFIG_FILE_SYSTEM_DIR",
    "CLANG_CONFIG_FILE_USER_DIR", "MACOSX_DEPLOYMENT_TARGET", "SDKROOT",
)


_TOOL_NAMES = frozenset(TOOL_ENVIRONMENT)


def tool_environment(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The TOOL_ENVIRONMENT variables set in `environ`, with their values, in a fixed order.
    (One pass over its names: `name in os.environ` raises and catches a KeyError for each
    variable not set, 20 an action.)"""
    present = _TOOL_NAMES.intersection(environ)
    return tuple((name, environ[name]) for name in TOOL_ENVIRONMENT if name in present)


def key_document(parts: KeyParts) -> dict[str, object]:
    """What a base key is the sha256 of (as canonical JSON); BUILDGEN_CACHE_EXPLAIN=1
    writes it next to the build, so two builds' documents can be diffed."""
    return {
        "format": KEY_FORMAT,
        "rule": parts.rule,
        "command": list(parts.command),
        "inputs": [list(p) for p in parts.inputs],
        "outputs": list(parts.outputs),
        "depfile": parts.depfile,
        "tools": [list(p) for p in parts.tools],
        "libraries": [list(p) for p in parts.libraries],
        "environment": [list(p) for p in parts.environment],
    }


def base_key(parts: KeyParts) -> str:
    return _sha256_json(key_document(parts))


def full_key(base: str, hidden: Sequence[tuple[str, str]]) -> str:
    """The action's key: its base key plus the (name, digest) of each hidden input."""
    return _sha256_json({"format": KEY_FORMAT, "base": base, "hidden": sorted(map(list, hidden))})


def depsets_key(base: str) -> str:
    """Where the sets of hidden inputs seen with `base` are recorded."""
    return _sha256_json({"format": KEY_FORMAT, "depsets": base})


def _sha256_json(document: object) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
