"""`buildgen init MODEL.onnx [--target T] [--name NAME] [--manifest BUILD.yaml]`: add a model
to a manifest, or write a new manifest holding it.

What it decides, and why:
  * The manifest is edited as text, never re-dumped: the entry is inserted at the end of
    the `models:` block with that block's own indentation (a `models:` key is added at the
    end when there is none), so the user's comments, order and quoting survive.
  * The entry names the ONNX file relative to the manifest's folder, and gets an `inputs:`
    block for the inputs with dynamic dims, written by buildgen.importer.inputs_yaml: a
    batch-named dim becomes 1 (the manifest builds at once), any other dynamic dim a
    placeholder `<name>` that the schema refuses at its line and column (no guess of a
    sequence length or image size is safe). The importer's "inputs with dynamic dims" error
    prints the same lines.
  * The target: --target (a manifest target, a registered kind or a tag); else the target
    list most of the manifest's models use; else its first target; else, for a manifest
    without a `targets:` section, a `cpu` target for this machine: the `c` host, plus
    oneDNN and OpenBLAS as accelerators when their libraries are installed (a composite
    naming a missing library would fail at gen).
  * The name: --name as given (refused with the reason if it cannot name a model), else the
    file's stem made a C identifier. A name the manifest has (or has in another case,
    which the manifest refuses too) is refused, pointing at the existing entry.
  * Before anything is written the new text is loaded by buildgen's own loader (with the
    placeholders read as 1, so only they remain to fix); a text that would not load is not
    written and the manifest is left as it was. The write is atomic.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import BuildgenError, Diagnostic, error

if TYPE_CHECKING:
    import onnx

    from buildgen.importer.inputs_yaml import DynamicInput
    from buildgen.manifest.sourcemap import SourceMap

DEFAULT_MANIFEST = Path("BUILD.yaml")
DEFAULT_TARGET_NAME = "cpu"

_MODELS_KEY = re.compile(r"^(?:models|\"models\"|'models')[ \t]*:(?P<rest>.*)$")
_TARGETS_KEY = re.compile(r"^(?:targets|\"targets\"|'targets')[ \t]*:")
# A placeholder as a whole item of a flow list: `[1, <seq>, 256]`.
_PLACEHOLDER_ITEM = re.compile(r"(?<=[\[,])([ \t]*)<[A-Za-z0-9_.-]+>(?=[ \t]*[,\]])")
_PLAIN_PATH = re.compile(r"^[A-Za-z0-9_./][A-Za-z0-9_./+-]*$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", type=Path, metavar="MODEL.onnx", help="the ONNX file to add")
    parser.add_argument(
        "--target", metavar="T",
        help="the target to build it for: a target of the manifest, a kind or a tag "
        "(default: the one the manifest's models use, else one for this machine)",
    )
    parser.add_argument(
        "--name", help="the model's name in the manifest (default: the file's stem)"
    )
    parser.add_argument(
        "--manifest", type=Path, default=DEFAULT_MANIFEST,
        help=f"the manifest to add it to, written if missing (default: {DEFAULT_MANIFEST})",
    )


@dataclass(frozen=True)
class InitResult:
    name: str
    text: str  # the whole manifest as written
    added: str  # the lines added, as written
    placeholders: tuple[tuple[int, str], ...]  # (line, placeholder) still to fill in
    created: bool


def run(args: argparse.Namespace) -> int:
    result = init_model(args.model, args.manifest, name=args.name, target=args.target)
    manifest = str(args.manifest)
    print(f"wrote {manifest}:" if result.created else f"added to {manifest}:")
    print(result.added.rstrip("\n"))
    build = "buildgen build"
    if Path(os.path.abspath(args.manifest)) != Path(os.path.abspath(DEFAULT_MANIFEST)):
        build += f" --manifest {manifest}"
    if result.placeholders:
        where = ", ".join(f"{p} ({manifest}:{line})" for line, p in result.placeholders)
        print(f"\nfill in the sizes buildgen cannot guess: {where}")
        print(f"then: {build} {result.name}")
    else:
        print(f"\nnext: {build} {result.name}")
    return 0


def init_model(
    model: Path, manifest: Path, *, name: str | None = None, target: str | None = None
) -> InitResult:
    """Add ``model`` to ``manifest`` (written if missing); see the module's docstring."""
    from buildgen.importer.inputs_yaml import dynamic_inputs
    from buildgen.manifest import load_yaml

    graph = _read_graph(model)
    items = dynamic_inputs(graph)
    root = Path(os.path.abspath(manifest)).parent
    source = _source_text(Path(os.path.abspath(model)), root)
    created = not manifest.exists()
    data: dict[str, object] = {}
    text = ""
    if not created:
        document = load_yaml(manifest)
        if document.diagnostics:
            raise BuildgenError([
                Diagnostic(f"{manifest}: cannot add a model to a manifest that does not "
                           "read; fix these first"),
                *document.diagnostics,
            ])
        if document.data is not None and not isinstance(document.data, dict):
            raise error(f"{manifest}: not a manifest (its top level is not a mapping)")
        data = document.data or {}
        with open(manifest, encoding="utf-8-sig", newline="") as f:  # CRLF stays CRLF
            text = f.read()
        models = data.get("models")
        existing = list(models) if isinstance(models, dict) else []
        model_name = _model_name(name, model, existing)
        _refuse_duplicate(model_name, existing, manifest, document.source_map)
    else:
        model_name = _model_name(name, model, [])
    targets, section = _choose_target(target, data)
    new_text, added, entry = _edit(text, model_name, source, items, targets, section)
    _check(new_text, manifest)
    from buildgen.fsutil import write_atomic

    write_atomic(manifest, new_text)
    placeholders = tuple(
        (first + offset, found)
        for first, entry_lines in [entry]
        for offset, line in enumerate(entry_lines)
        for found in dict.fromkeys(re.findall(r"<[A-Za-z0-9_.-]+>", line.split("#")[0]))
    )
    return InitResult(model_name, new_text, added, placeholders, created)


def _source_text(model: Path, root: Path) -> str:
    """The model's path as the entry names it: relative to the manifest's folder, unless the
    two share no folder but the file system's root (`../../../opt/m.onnx` says less than
    `/opt/m.onnx`, and breaks as soon as the project moves)."""
    if os.path.commonpath([model, root]) == model.anchor:
        return model.as_posix()
    return Path(os.path.relpath(model, root)).as_posix()


def _read_graph(model: Path) -> onnx.GraphProto:
    """The model's graph, without its external data: init reads only the inputs."""
    import onnx

    if not model.is_file():
        raise error(f"model not found: {model}" if not model.exists() else f"not a file: {model}")
    try:
        proto = onnx.load(str(model), load_external_data=False)
    except Exception as exc:  # DecodeError and friends: not an ONNX protobuf
        raise error(f"{model}: not an ONNX model ({type(exc).__name__}: {exc})") from None
    if not len(proto.graph.node) and not len(proto.graph.input):
        raise error(f"{model}: not an ONNX model (no graph)")
    return proto.graph


def _model_name(given: str | None, model: Path, existing: list[str]) -> str:
    from buildgen.manifest.semantic import model_name_problem

    if given is not None:
        problem = model_name_problem(given)
        if problem:
            raise error(problem, hint=f"try --name {suggest_name(given)}")
        return given
    return suggest_name(model.stem)


def suggest_name(text: str) -> str:
    """``text`` made a valid model name: a C identifier, no keyword, no reserved prefix."""
    from buildgen.manifest.semantic import MAX_NAME, RESERVED_PREFIX, model_name_problem

    name = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_") or "model"
    if name[0].isdigit():
        name = f"model_{name}"
    if name.startswith(RESERVED_PREFIX):
        name = f"model_{name}"
    name = name[:MAX_NAME].rstrip("_")
    if model_name_problem(name):  # a C keyword
        name = f"{name}_model"
    return name


def _refuse_duplicate(
    name: str, existing: list[str], manifest: Path, source_map: SourceMap
) -> None:
    taken = {n.casefold(): n for n in existing}
    if name.casefold() not in taken:
        return
    other = taken[name.casefold()]
    free = next(f"{name}_{i}" for i in range(2, 10_000) if f"{name}_{i}".casefold() not in taken)
    same = "a model named" if other == name else f"'{other}', which differs only in case from"
    raise BuildgenError(source_map.diagnostic(
        ("models", other), f"{manifest} already has {same} '{name}'",
        f"choose another name: `buildgen init ... --name {free}`", at_key=True,
    ))


def machine_target() -> str:
    """The `cpu` target written into a manifest without targets, as flow YAML: the `c`
    host, with oneDNN and OpenBLAS first when their libraries are installed (they are
    optional extras, and gen refuses a target whose library it cannot find)."""
    from buildgen.backends import libraries
    from buildgen.targets.registry import has_code_generator

    accelerators = []
    for kind, find in (("onednn", libraries.pip_onednn_prefix),
                       ("openblas", libraries.scipy_openblas_prefix)):
        with contextlib.suppress(Exception):  # not installed, or broken: leave it out
            find()
            if has_code_generator(kind):
                accelerators.append(f"{{kind: {kind}}}")
    if not accelerators:
        return "{kind: c}"
    return f"{{kind: composite, host: {{kind: c}}, accelerators: [{', '.join(accelerators)}]}}"


def _choose_target(given: str | None, data: dict[str, object]) -> tuple[list[str], str | None]:
    """The model's `targets:` list, and a `targets:` section to add (flow YAML of the one
    target DEFAULT_TARGET_NAME) or None."""
    section = data.get("targets")
    defined = list(section) if isinstance(section, dict) else []
    if given is not None:
        from buildgen.targets import is_known_target
        from buildgen.targets.attributes import did_you_mean

        if given not in defined and not is_known_target(given):
            from buildgen.targets.registry import registered_kinds, registered_tags

            known = [*defined, *registered_kinds(), *registered_tags()]
            raise error(
                f"--target {given}: no target of that name in the manifest, and no target "
                "kind or tag", hint=did_you_mean(given, known) or "`buildgen targets` lists "
                "the kinds and tags",
            )
        return [given], None
    models = data.get("models")
    uses: Counter[tuple[str, ...]] = Counter()
    if isinstance(models, dict):
        for model in models.values():
            targets = model.get("targets") if isinstance(model, dict) else None
            if isinstance(targets, list) and targets and all(isinstance(t, str) for t in targets):
                uses[tuple(targets)] += 1
    if uses:
        return list(uses.most_common(1)[0][0]), None  # ties: the first in the file
    if defined:
        return [defined[0]], None
    if "targets" in data:  # an empty section: a registered kind needs no definition
        return ["c"], None
    return [DEFAULT_TARGET_NAME], machine_target()


def _yaml_path(text: str) -> str:
    import json

    return text if _PLAIN_PATH.match(text) else json.dumps(text)


def _entry_lines(name: str, source: str, items: list[DynamicInput], targets: list[str],
                 entry: str, key: str) -> list[str]:
    from buildgen.importer.inputs_yaml import inputs_lines, yaml_key

    step = key[len(entry):] or "  "
    lines = [f"{entry}{yaml_key(name)}:", f"{key}source: {_yaml_path(source)}"]
    if items:
        lines += inputs_lines(items, key, step)
    lines.append(f"{key}targets: [{', '.join(yaml_key(t) for t in targets)}]")
    return lines


def _edit(
    text: str, name: str, source: str, items: list[DynamicInput], targets: list[str],
    section: str | None,
) -> tuple[str, str, tuple[int, list[str]]]:
    """The manifest's new text, the lines added (joined), and the model's entry: its first
    line's number and its lines."""
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines()
    if not text:
        lines = ["buildgen: 1"]
        if section is not None:
            lines += ["targets:", f"  {DEFAULT_TARGET_NAME}: {section}"]
        entry = _entry_lines(name, source, items, targets, "  ", "    ")
        first = len(lines) + 2
        lines += ["models:", *entry]
        written = newline.join(lines) + newline
        return written, "\n".join(lines) + "\n", (first, entry)
    added: list[str] = []
    if section is not None and not any(_TARGETS_KEY.match(line) for line in lines):
        added_targets = ["targets:", f"  {DEFAULT_TARGET_NAME}: {section}"]
        lines += added_targets
        added += added_targets
    at = next((i for i, line in enumerate(lines) if _MODELS_KEY.match(line)), None)
    if at is None:
        entry = _entry_lines(name, source, items, targets, "  ", "    ")
        first = len(lines) + 2
        lines += ["models:", *entry]
        added += ["models:", *entry]
    else:
        match = _MODELS_KEY.match(lines[at])
        assert match is not None
        rest = match["rest"]
        value = rest.split(" #")[0].strip() if not rest.strip().startswith("#") else ""
        if value in ("{}", "null", "~"):  # an empty mapping: written as a block from now on
            after = rest[rest.index(value) + len(value):]  # the spaces and the comment
            lines[at] = lines[at][: len(lines[at]) - len(rest)] + after.rstrip()
        elif value:
            entry = _entry_lines(name, source, items, targets, "  ", "    ")
            raise error(
                f"the manifest's 'models:' is written in flow style ({value[:40]}...); "
                "init adds only to a block mapping",
                hint="add the model by hand under 'models:':\n" + "\n".join(entry),
            )
        last, entry_indent, key_indent = _block_extent(lines, at)
        entry_text = " " * (entry_indent or 2)
        key_text = " " * (key_indent or 2 * len(entry_text))
        entry = _entry_lines(name, source, items, targets, entry_text, key_text)
        lines[last + 1:last + 1] = entry
        first = last + 2
        added = entry + added
    return newline.join(lines) + newline, "\n".join(added) + "\n", (first, entry)


def _block_extent(lines: list[str], at: int) -> tuple[int, int | None, int | None]:
    """The last line of the block mapping under the top-level key on line ``at``, the
    indentation of its entries and of their keys (None when there is none to copy)."""
    last = at
    entry: int | None = None
    key: int | None = None
    for number in range(at + 1, len(lines)):
        line = lines[number]
        stripped = line.lstrip(" ")
        if not stripped.strip():
            continue
        indent = len(line) - len(stripped)
        if indent == 0:
            if stripped.startswith("#"):
                continue  # a comment at the margin: before the next key, or inside
            break
        last = number
        if stripped.startswith("#"):
            continue
        if entry is None:
            entry = indent
        elif key is None and indent > entry:
            key = indent
    return last, entry, key


def _check(text: str, manifest: Path) -> None:
    """Load ``text`` as ``manifest`` with buildgen's loader (placeholders read as 1); raise
    its problems, located in ``manifest``, if it does not load."""
    from buildgen.manifest import load_manifest
    from buildgen.targets import is_known_target

    filled = _PLACEHOLDER_ITEM.sub(r"\g<1>1", text)
    folder = Path(os.path.abspath(manifest)).parent
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    fd, scratch = tempfile.mkstemp(prefix=".buildgen-init-", suffix=".yaml", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(filled)
        load_manifest(scratch, is_known_target)
    except BuildgenError as exc:
        shown = [
            replace(d, location=replace(d.location, path=str(manifest)))
            if d.location is not None and d.location.path == scratch else d
            for d in exc.diagnostics
        ]
        for empty in made:  # the folders made for the check, innermost first
            with contextlib.suppress(OSError):
                empty.rmdir()
        raise BuildgenError([
            Diagnostic(f"{manifest}: not written: with the new model it would not load "
                       "(left as it was)"),
            *shown,
        ]) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)
