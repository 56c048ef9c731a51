"""One action as the wrapper sees it, and its base key.

build.ninja runs every cached rule as

    $python -m buildgen.cache exec --root <source root> --rule <rule> [--restat]
        [--depfile <file>] [--kind=<backend kind>] [--stoppable]
        --out $out --in $in [implicit inputs]
        -- <the rule's command>

so the wrapper knows the action's declared outputs and inputs without parsing the
command, and ninja's view of the command (what it compares to re-run an edge) is the
command plus these words, which only change when the graph does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from buildgen.cache.keys import (
    KeyParts,
    PathFrame,
    base_key,
    file_digest,
    file_digests,
    tool_environment,
)
from buildgen.cache.tools import (
    Memo,
    command_tools,
    interpreter_path,
    library_search_dirs,
    native_cpu,
    tool_identity,
)
from buildgen.ninja.response_file import read_response_file

PYTHON_WORD = "<python>"  # the interpreter running the stages, as a key names it
LINK_RULES = frozenset({"link_shared"})  # rules whose command is a compiler-driver link
_LIST_OPTIONS = {"--out": "outputs", "--in": "inputs"}
_VALUE_OPTIONS = {"--rule": "rule", "--root": "root", "--depfile": "depfile"}


class UsageError(ValueError):
    pass




@dataclass(frozen=True)
class ActionSpec:
    rule: str
    root: str  # the source root, absolute or relative to the build dir
    outputs: tuple[str, ...]  # relative to the build dir, as ninja names them
    inputs: tuple[str, ...]  # declared inputs: explicit, then implicit
    command: tuple[str, ...]
    depfile: str | None = None
    restat: bool = False  # the command leaves unchanged outputs untouched
    # A compile's backend kind (`--kind=`): picks its workers' platform properties
    # (buildgen.remote.settings); not part of any key.
    kind: str = ""
    # `--stoppable`: the command may be stopped midway and leaves nothing but its outputs
    # (a C or C++ compile: Toolchain.stoppable); not part of any key.
    stoppable: bool = False


def parse_exec_args(argv: Sequence[str]) -> ActionSpec:
    """Parse `exec`'s arguments by hand: ninja passes `$in` as many words, and argparse
    costs an import on every action."""
    argv = list(argv)
    if "--" not in argv:
        raise UsageError("expected `-- <command>` after the action's description")
    cut = argv.index("--")
    head, command = argv[:cut], tuple(argv[cut + 1 :])
    if not command:
        raise UsageError("no command after `--`")
    values: dict[str, str] = {}
    lists: dict[str, list[str]] = {"outputs": [], "inputs": []}
    restat = stoppable = False
    current: list[str] | None = None
    i = 0
    while i < len(head):
        word = head[i]
        if word in _LIST_OPTIONS:
            current = lists[_LIST_OPTIONS[word]]
        elif word in _VALUE_OPTIONS:
            if i + 1 >= len(head):
                raise UsageError(f"{word} needs a value")
            values[_VALUE_OPTIONS[word]] = head[i + 1]
            current = None
            i += 1
        elif word == "--restat":
            restat, current = True, None
        elif word == "--stoppable":
            stoppable, current = True, None
        elif word.startswith("--kind="):  # one word: an empty kind is still one
            values["kind"], current = word.removeprefix("--kind="), None
        elif current is not None:
            current.append(word)
        else:
            raise UsageError(f"unexpected argument {word!r}")
        i += 1
    for needed in ("rule", "root"):
        if needed not in values:
            raise UsageError(f"--{needed} is required")
    if not lists["outputs"]:
        raise UsageError("--out needs at least one output")
    return ActionSpec(
        rule=values["rule"],
        root=values["root"],
        outputs=tuple(lists["outputs"]),
        inputs=tuple(dict.fromkeys(_expand_response_files(lists["inputs"]))),
        command=command,
        depfile=values.get("depfile"),
        restat=restat,
        kind=values.get("kind", ""),
        stoppable=stoppable,
    )


def _expand_response_files(words: list[str]) -> list[str]:
    """`--in` words with each `@file` (a response file the command reads: a link's list of
    the kernels objects it takes) replaced by the file and the paths it lists, so that the
    key and a remote action's inputs hold them. A missing list stays as its own path:
    hashing it then says what is missing."""
    out: list[str] = []
    for word in words:
        if not word.startswith("@"):
            out.append(word)
            continue
        out += [word[1:], *(read_response_file(word[1:]) or [])]
    return out


def compute_base_key(spec: ActionSpec, frame: PathFrame, memo: Memo) -> str:
    """The key of everything known before the action runs (hidden inputs aside)."""
    return base_key(key_parts(spec, frame, memo))


def key_parts(spec: ActionSpec, frame: PathFrame, memo: Memo) -> KeyParts:
    tools = command_tools(spec.command)
    libraries: list[tuple[str, str]] = []
    if spec.rule in LINK_RULES and tools:
        from buildgen.cache.links import library_digests, linked_libraries

        compiler = tools[-1][1]
        found = linked_libraries(spec.command, library_search_dirs(compiler, memo))
        libraries = library_digests(found, memo)
    # The interpreter is named by what it is (python_identity), not by the path that
    # reached it: `python3` here, `/usr/bin/python3.11` on another machine, one key.
    interpreter = {word for word, path in tools if path == interpreter_path()}
    identities = [
        (PYTHON_WORD if word in interpreter else word, tool_identity(path, memo))
        for word, path in tools
    ]
    if any("=native" in word for word in spec.command):
        # -march=native, nvcc -arch=native: the output depends on this machine's processor.
        identities.append(("<native>", native_cpu()))
    return KeyParts(
        rule=spec.rule,
        command=tuple(
            PYTHON_WORD if word in interpreter else frame.argument(word) for word in spec.command
        ),
        inputs=tuple((frame.name(p), file_digest(p, memo)) for p in spec.inputs),
        outputs=tuple(frame.name(p) for p in spec.outputs),
        depfile=frame.name(spec.depfile) if spec.depfile else None,
        tools=tuple(identities),
        libraries=tuple((frame.argument(p), d) for p, d in libraries),
        environment=tool_environment(os.environ),
    )


def hidden_inputs(
    spec: ActionSpec, frame: PathFrame, prerequisites: Sequence[str]
) -> tuple[str, ...]:
    """The depfile's prerequisites that are not declared inputs or outputs, as names in
    the frame, sorted: one *dependency set* of the direct-mode manifest."""
    return _hidden_names(frame, (*spec.inputs, *spec.outputs), tuple(prerequisites))


# A runner asks again for every rebuild of a source, with the same headers.
@lru_cache(maxsize=1024)
def _hidden_names(frame: PathFrame, declared: tuple[str, ...], prerequisites: tuple[str, ...]
                  ) -> tuple[str, ...]:
    known = {frame.name(p) for p in declared}
    return tuple(sorted({frame.name(p) for p in prerequisites} - known))


def hidden_digests(frame: PathFrame, names: Sequence[str]) -> list[tuple[str, str]] | None:
    """(name, digest) of each hidden input in this checkout; None if one is missing."""
    names = tuple(names)
    digests = file_digests(_absolute_paths(frame, names))
    return None if digests is None else list(zip(names, digests, strict=True))


@lru_cache(maxsize=1024)
def _absolute_paths(frame: PathFrame, names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(frame.absolute(name) for name in names)


def output_name(path: str) -> str | None:
    """An output's path in an ActionResult ('/'-separated, relative to the build dir), or
    None for one outside the build dir (such an action is not cached)."""
    norm = os.path.normpath(path)
    if os.path.isabs(norm) or norm == ".." or norm.startswith("../"):
        return None
    return norm.replace(os.sep, "/")
