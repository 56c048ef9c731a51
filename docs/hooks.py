"""MkDocs hooks: the reference pages, generated at build time from what the code reads.

`reference/targets.md` comes from the kinds' JSON schemas and rules (the registry
`buildgen targets` lists), `reference/manifest.md` from schemas/manifest.schema.json and
`reference/cli.md` from the argparse parsers of every subcommand. Nothing here is written
by hand, so the reference cannot drift from the code; tests/docs builds the site strictly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

GENERATED = "reference/"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    pages = {
        "reference/targets.md": targets_page,
        "reference/manifest.md": manifest_page,
        "reference/cli.md": cli_page,
    }
    for uri, render in pages.items():
        files.append(File.generated(config, uri, content=render()))
    return files


# --- target kinds -------------------------------------------------------------------------


def targets_page() -> str:
    from buildgen.targets.listing import summarize
    from buildgen.targets.registry import registered_kinds, registered_tags
    from buildgen.targets.resolve import resolve_tag

    out = [
        "# Target kinds and attributes",
        "",
        "Generated from `schemas/targets/<kind>.schema.json` and `rules/<kind>.yaml` when the",
        "site is built; `buildgen targets [NAME...]` prints the same from the installed package.",
        "**Re-runs** is the first action a change of the attribute re-runs (`codegen`, `compile`,",
        "`link`, or `none`: the attribute changes no output).",
        "",
    ]
    for kind in registered_kinds().values():
        role = (f"external code generator for `{kind.external_codegen_for}`"
                if kind.is_external_codegen else f"{kind.device} kind")
        out += [f"## `{kind.name}`", "", f"{_cell(kind.title)} ({role}).", ""]
        props = kind.schema.get("properties", {})
        out += ["| attribute | type | default | re-runs | meaning |", "|---|---|---|---|---|"]
        for attr in kind.attributes:
            spec = props.get(attr.name, {})
            out.append(
                f"| `{attr.name}` | {_type(spec)} | `{json.dumps(attr.default)}` "
                f"| {attr.affects} | {_cell(attr.description)} |"
            )
        out.append("")
    out += ["## Tags", "", "Short names for targets, usable wherever a target is "
            "(declared in `rules/tags.yaml`).", "",
            "| tag | members, in priority order | meaning |", "|---|---|---|"]
    for name, tag in registered_tags().items():
        out.append(f"| `{name}` | `{summarize(resolve_tag(name))}` | {_cell(tag.description)} |")
    return "\n".join(out) + "\n"


# --- manifest -------------------------------------------------------------------------------


def manifest_page() -> str:
    from buildgen.resources import schemas_dir

    schema = json.loads((schemas_dir() / "manifest.schema.json").read_text())
    out = [
        "# Manifest schema",
        "",
        "Every key `BUILD.yaml` accepts, generated from `schemas/manifest.schema.json` when the",
        "site is built. `<name>` stands for a name you choose. A target's own attributes depend",
        "on its kind: see [Target kinds and attributes](targets.md). The guide to the manifest is",
        "[The manifest](../manifest.md).",
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for path, spec in _walk(schema, schema, ""):
        default = f"`{json.dumps(spec['default'])}`" if "default" in spec else ""
        out.append(f"| `{path}` | {_type(spec, schema)} | {default} "
                   f"| {_cell(spec.get('description', ''))} |")
    return "\n".join(out) + "\n"


def _walk(node: dict[str, Any], root: dict[str, Any], prefix: str,
          seen: frozenset[str] = frozenset()) -> Iterator[tuple[str, dict[str, Any]]]:
    """(dotted key, schema) for every key under `node`, following $refs once per path."""
    for name, spec in node.get("properties", {}).items():
        path = f"{prefix}{name}"
        merged, refs = _resolve(spec, root)
        yield path, merged
        if refs & seen:  # a recursive definition: listed once
            continue
        yield from _walk(merged, root, f"{path}.", seen | refs)
        extra = merged.get("additionalProperties")
        if isinstance(extra, dict):
            inner, inner_refs = _resolve(extra, root)
            if inner.get("properties") and not inner_refs & seen:
                yield from _walk(inner, root, f"{path}.<name>.", seen | refs | inner_refs)


def _resolve(spec: dict[str, Any], root: dict[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    refs: set[str] = set()
    merged = dict(spec)
    while "$ref" in merged:
        ref = merged.pop("$ref")
        refs.add(ref)
        target = root
        for part in ref.removeprefix("#/").split("/"):
            target = target[part]
        merged = {**target, **merged}
    return merged, frozenset(refs)


def _type(spec: dict[str, Any], root: dict[str, Any] | None = None) -> str:
    if root is not None:
        spec, _ = _resolve(spec, root)
    if "const" in spec:
        return f"`{json.dumps(spec['const'])}`"
    if "enum" in spec:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in spec["enum"])
    for key in ("oneOf", "anyOf"):
        if key in spec:
            return " or ".join(_type(alt, root) for alt in spec[key])
    kind = spec.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array" and isinstance(spec.get("items"), dict):
        return f"array of {_type(spec['items'], root)}"
    if kind == "object" and isinstance(spec.get("additionalProperties"), dict):
        return "mapping"
    return str(kind or spec.get("x-expected", "any"))


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;")


# --- command line -----------------------------------------------------------------------------


def cli_page() -> str:
    from buildgen.cli import all_parsers

    out = [
        "# Commands",
        "",
        "Every command's `--help`, generated from its parser when the site is built. "
        "Conventions shared by all of them (ninja's flags, `-C`, completion, colour, exit "
        "codes) are in [Command line](../cli.md).",
        "",
    ]
    for name, parser in all_parsers().items():
        out += [f"## `buildgen{' ' + name if name else ''}`", "", "```text",
                parser.format_help().rstrip(), "```", ""]
    return "\n".join(out)
