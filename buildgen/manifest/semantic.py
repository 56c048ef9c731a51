"""Checks the schema cannot express: names that become C symbols and file names, target
references, and files that must exist.

They run on the same raw data as the schema check, even when it failed, so that one run
reports every mistake; each check therefore looks at a value only if it has the right type
(a wrong type was already reported by the schema).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from buildgen.errors import Diagnostic
from buildgen.manifest.sourcemap import NodePath, SourceMap
from buildgen.manifest.validate import did_you_mean

IsKnownTarget = Callable[[str], bool]

_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Target names become file and folder names, Ninja paths and CMake target names.
_TARGET_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
# C11 keywords plus the C23 ones that matter to a compiler in C23 mode.
_C_KEYWORDS = frozenset(
    (
        "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
        "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
        "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch",
        "typedef", "union", "unsigned", "void", "volatile", "while", "_Alignas", "_Alignof",
        "_Atomic", "_Bool", "_Complex", "_Generic", "_Imaginary", "_Noreturn", "_Static_assert",
        "_Thread_local", "alignas", "alignof", "bool", "constexpr", "false", "nullptr",
        "static_assert", "thread_local", "true", "typeof", "typeof_unqual",
    )
)
# Ninja cannot escape '|' or (before 1.14) a newline in a path, and '$' is also special to
# CMake and shells: rejecting them here is simpler than escaping them in every writer.
_UNSAFE = {"|": "'|'", "\n": "a newline", "\r": "a carriage return", "$": "'$'"}
# Model and target names become file names (lib<model>.so, <model>_weights.o) and C
# symbols; file systems allow 255 bytes per name.
MAX_NAME = 100
# The generated runtime and backend modules own symbols starting with this prefix.
RESERVED_PREFIX = "bg_"
# A model's files live in <build dir>/<model>/, beside the build dir's own folders
# (ninja/layout.py's BUILD_FOLDERS; a test keeps the two lists equal).
RESERVED_MODEL_NAMES = ("_shared", "_targets")


def semantic_diagnostics(
    data: object,
    source_map: SourceMap,
    root: Path,
    is_known_target: IsKnownTarget,
) -> list[Diagnostic]:
    """Every semantic problem of the manifest ``data``; ``root`` is the manifest's folder."""
    if not isinstance(data, dict):
        return []
    found: list[Diagnostic] = []
    targets = data.get("targets")
    defined = set(targets) if isinstance(targets, dict) else set()
    for name in sorted(defined):
        problem = target_name_problem(name)
        if problem:
            found.append(_name_diagnostic(source_map, ("targets", name), problem,
                                          "target names start with a letter and hold only "
                                          "letters, digits, '_' and '-'"))
    found += _path_problems(source_map, ("build_dir",), data.get("build_dir"), root, False)
    found += _partition_problems(source_map, ("partition",), data.get("partition"), root)
    models = data.get("models")
    if isinstance(models, dict):
        by_folded: dict[str, str] = {}
        for name, model in models.items():
            problem = model_name_problem(name)
            first = by_folded.setdefault(name.casefold(), name)
            if problem is None and first != name:
                problem = (f"model name '{name}' differs from '{first}' only in case: their "
                           f"headers, C symbols and files would collide")
            if problem:
                found.append(_name_diagnostic(source_map, ("models", name), problem,
                                              f"the model name prefixes its C API "
                                              f"({name}_create, {name}_run, ...)"))
            if isinstance(model, dict):
                found += _model_problems(source_map, ("models", name), model, root,
                                         defined, is_known_target)
    return found


def model_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a model (it prefixes C symbols), or None."""
    if len(name) > MAX_NAME:
        return f"model name '{name[:40]}...' is {len(name)} characters long (at most {MAX_NAME})"
    if not _C_IDENTIFIER.match(name):
        return f"model name '{name}' is not a C identifier"
    if name in _C_KEYWORDS:
        return f"model name '{name}' is a C keyword"
    if name.startswith(RESERVED_PREFIX):
        return f"model name '{name}' starts with '{RESERVED_PREFIX}', which buildgen reserves"
    if name in RESERVED_MODEL_NAMES:
        return f"model name '{name}' is the name of a folder buildgen keeps in the build dir"
    if name.startswith("__") or (name.startswith("_") and name[1:2].isupper()):
        return f"model name '{name}' is reserved by the C standard"
    return None


def target_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a target (it becomes a file name), or None."""
    if len(name) > MAX_NAME:
        return f"target name '{name[:40]}...' is {len(name)} characters long (at most {MAX_NAME})"
    if not _TARGET_NAME.match(name):
        return f"invalid target name '{name}'"
    return None


def unsafe_character(text: str) -> str | None:
    """The first character of ``text`` that no generated build file can carry, described."""
    for char, described in _UNSAFE.items():
        if char in text:
            return described
    return None


def resolve(root: Path, text: str) -> Path:
    """A manifest path made absolute: relative paths start at the manifest's folder (``root``,
    itself absolute), never at the cwd. Symlinks are kept as written, as Ninja keeps them."""
    return Path(os.path.normpath(os.path.join(root, text)))


def _name_diagnostic(
    source_map: SourceMap, path: NodePath, problem: str, hint: str
) -> Diagnostic:
    return source_map.diagnostic(path[:-1], problem, hint, at_key=True, at=path)


def _model_problems(
    source_map: SourceMap,
    path: NodePath,
    model: dict[str, object],
    root: Path,
    defined: set[str],
    is_known_target: IsKnownTarget,
) -> list[Diagnostic]:
    found = _path_problems(source_map, path + ("source",), model.get("source"), root, True)
    inputs = model.get("inputs")
    if isinstance(inputs, dict):
        for input_name in inputs:
            bad = unsafe_character(input_name)
            problem = f"input name {input_name!r} contains {bad}" if bad else None
            if not input_name:
                problem = "an input name cannot be empty"
            if problem:
                found.append(_name_diagnostic(source_map, path + ("inputs", input_name),
                                              problem, "use the name the ONNX model gives "
                                              "the input"))
    targets = model.get("targets")
    if isinstance(targets, list):
        seen: set[str] = set()
        for index, target in enumerate(targets):
            if not isinstance(target, str) or not target:
                continue
            where = path + ("targets", index)
            if target in seen:
                found.append(source_map.diagnostic(where, f"target '{target}' is listed twice"))
            elif target not in defined and not is_known_target(target):
                hint = did_you_mean(target, defined) or (
                    "define it under 'targets:' or use a registered target kind or tag"
                )
                found.append(source_map.diagnostic(where, f"unknown target '{target}'", hint))
            seen.add(target)
    found += _partition_problems(source_map, path + ("partition",), model.get("partition"), root)
    return found


def _partition_problems(
    source_map: SourceMap, path: NodePath, options: object, root: Path
) -> list[Diagnostic]:
    if not isinstance(options, dict):
        return []
    # A partition file is the user's own, so it must be there; tuning records may be named
    # before `buildgen tune` writes them (buildgen/ninja/awaited_records.py).
    return [
        d
        for key, must_exist in (("records", False), ("file", True))
        for d in _path_problems(source_map, path + (key,), options.get(key), root, must_exist)
    ]


def _path_problems(
    source_map: SourceMap, path: NodePath, text: object, root: Path, must_exist: bool
) -> list[Diagnostic]:
    if not isinstance(text, str) or not text:
        return []
    bad = unsafe_character(text)
    if bad:
        return [source_map.diagnostic(path, f"a path cannot contain {bad} "
                                            "(build files cannot carry it)")]
    if not must_exist:
        return []
    resolved = resolve(root, text)
    try:
        mode = os.stat(resolved).st_mode  # one system call per model, not two
    except (FileNotFoundError, NotADirectoryError, ValueError):  # ValueError: a NUL in it
        return [source_map.diagnostic(path, f"file not found: {resolved}",
                                      "relative paths start at the manifest's folder")]
    except OSError as exc:  # a name too long for the file system, a folder it cannot enter
        return [source_map.diagnostic(path, f"cannot read {resolved}: {exc.strerror or exc}")]
    if not stat.S_ISREG(mode):
        return [source_map.diagnostic(path, f"not a file: {resolved}")]
    return []
