"""Read a YAML manifest into plain data, remembering where every value and key came from.

PyYAML's composer gives nodes with marks; we build dicts, lists and scalars from them
ourselves so that (a) each value and each key gets a SourceLocation, and (b) a duplicate
key is an error at its second occurrence instead of silently winning, as yaml.safe_load
would let it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from buildgen.errors import BuildgenError, Diagnostic, SourceLocation
from buildgen.manifest.sourcemap import NodePath, Position, Positions, SourceMap, format_path

_YAML = "tag:yaml.org,2002:"
# Scalars that map onto JSON types; SafeLoader's constructors give them their Python value.
_PLAIN_SCALAR_TAGS = frozenset(_YAML + t for t in ("str", "int", "float", "bool", "null"))
# An unquoted date would otherwise become a datetime, which no schema accepts; its text
# is what the user meant.
_TIMESTAMP_TAG = _YAML + "timestamp"
_STR_TAG = _YAML + "str"
_MERGE_TAG = _YAML + "merge"
_MAP_TAG = _YAML + "map"
_SEQ_TAG = _YAML + "seq"
# The line breaks PyYAML counts when it computes marks.
_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")

# Limits on what a manifest may cost to read. A manifest comes from a branch anyone can
# open, and YAML aliases let a few hundred bytes stand for billions of values ("billion
# laughs"); PyYAML's composer also recurses once per nesting level. Real manifests are far
# inside all three (200 models is ~50 kB, ~5,000 values, 6 levels).
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_VALUES = 100_000  # after alias and merge expansion
# libyaml's composer (C) recurses once per level and overflows an 8 MB stack at ~25,000
# levels; a document that provably nests less than this is composed without the event scan
# (_check_depth) that would otherwise come first, and the converter, which sees every
# level, refuses one deeper than MAX_DEPTH.
_SAFE_TO_COMPOSE = 1000

# libyaml's parser (PyYAML's C binding) when the wheel has it: the same events and marks as
# the pure-Python one, about ten times faster. Its error messages differ, so a document it
# refuses is parsed again by the pure-Python parser, whose messages and hints we give.
_C_LOADER: type[yaml.CSafeLoader] | None = (
    yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else None
)


@dataclass(frozen=True)
class LoadedDocument:
    """A YAML document as plain data, its positions, and the problems found while reading it.

    ``diagnostics`` holds structural problems (duplicate keys, unsupported tags) that do
    not stop reading, so they can be reported together with schema errors.
    """

    data: object
    source_map: SourceMap
    diagnostics: tuple[Diagnostic, ...]


def load_yaml(path: str | os.PathLike[str]) -> LoadedDocument:
    """Read and parse ``path``; the file name is shown in messages as given."""
    file = os.fspath(path)
    try:
        size = Path(path).stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise BuildgenError(
                Diagnostic(f"{file}: {size:,} bytes; a manifest may hold at most "
                           f"{MAX_MANIFEST_BYTES:,}", hint="split it: a manifest's models may "
                           "name ONNX files, not embed data")
            )
        # utf-8-sig drops a byte-order mark, which would otherwise shift line 1's columns.
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise BuildgenError(f"manifest not found: {file}") from None
    except UnicodeDecodeError as exc:
        raise BuildgenError(f"{file}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise BuildgenError(f"cannot read manifest {file}: {exc.strerror}") from None
    return parse_yaml(text, file)


def parse_yaml(text: str, file: str) -> LoadedDocument:
    """Parse YAML text; a syntax error raises BuildgenError located at the problem."""
    lines = tuple(_LINE_BREAK.split(text))
    converter = _Converter(file, lines)
    # Unprintable characters: the pure-Python reader's check and message, as below.
    loader: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = yaml.SafeLoader
    if _C_LOADER is not None and not yaml.reader.Reader.NON_PRINTABLE.search(text):
        loader = _C_LOADER
    try:
        if nesting_bound(text, lines) > _SAFE_TO_COMPOSE:
            _check_depth(text, file, lines, loader)
        data = converter.run(text, loader)
    except yaml.YAMLError as exc:
        if loader is not yaml.SafeLoader:  # the messages and hints are the pure-Python
            return _parse_slowly(text, file, lines, exc)  # parser's: ask it
        raise BuildgenError(_syntax_diagnostic(exc, text, file, lines)) from None
    # Plain dicts, read-only through SourceMap's Mapping types: a MappingProxyType would stop
    # a Manifest from being copied or pickled (e.g. to a worker process).
    source_map = SourceMap(file, lines, Positions(file, converter.values),
                           Positions(file, converter.keys))
    return LoadedDocument(data, source_map, tuple(converter.diagnostics))


def _parse_slowly(
    text: str, file: str, lines: tuple[str, ...], fast_error: yaml.YAMLError
) -> LoadedDocument:
    converter = _Converter(file, lines)
    try:
        _check_depth(text, file, lines, yaml.SafeLoader)
        converter.run(text, yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise BuildgenError(_syntax_diagnostic(exc, text, file, lines)) from None
    except ValueError:  # PyYAML's chr() on an escape past U+10FFFF ("\U20099C76")
        raise BuildgenError(_syntax_diagnostic(fast_error, text, file, lines)) from None
    # The pure-Python parser is laxer in places (an escaped surrogate, "\ud800", which
    # libyaml refuses and UTF-8 cannot hold): libyaml's refusal stands.
    raise BuildgenError(_syntax_diagnostic(fast_error, text, file, lines))


class _Converter:
    """Turns composed nodes into plain data while filling the position maps."""

    def __init__(self, file: str, lines: tuple[str, ...]):
        self._loader: yaml.SafeLoader | yaml.CSafeLoader | None = None
        self._file = file
        self._lines = lines
        self.values: dict[NodePath, Position] = {}
        self.keys: dict[NodePath, Position] = {}
        self.diagnostics: list[Diagnostic] = []
        # Ids of the collections being converted: an alias to one of them would recurse forever.
        self._active: set[int] = set()
        self._count = 0  # values made so far, aliases expanded: bounded by MAX_VALUES

    def run(self, text: str, loader: type[yaml.SafeLoader] | type[yaml.CSafeLoader]) -> object:
        """The document's data; None for an empty document. Raises yaml.YAMLError."""
        # The loader checks for unprintable characters as it is created: inside the caller's
        # try, so those become located syntax errors too.
        self._loader = loader(text)
        try:
            root = self._loader.get_single_node()
            return self.convert(root, ()) if root is not None else None
        finally:
            self._loader.dispose()

    def convert(self, node: yaml.Node, path: NodePath) -> object:
        if len(path) >= MAX_DEPTH and not isinstance(node, yaml.ScalarNode):
            raise BuildgenError(_too_deep(self._file, self._lines, node.start_mark))
        self._count += 1
        if self._count > MAX_VALUES:
            location = self._location(node.start_mark)
            raise BuildgenError(Diagnostic(
                f"the manifest expands to more than {MAX_VALUES:,} values (YAML aliases "
                "repeat what they refer to)", location,
                "write the repeated parts out, or share them through fewer aliases",
                self._lines[location.line - 1]))
        mark = node.start_mark
        self.values.setdefault(path, (mark.line + 1, mark.column + 1))
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        if id(node) in self._active:
            self._report(node.start_mark, path, "an alias refers to itself")
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                self._check_tag(node, _SEQ_TAG, path)
                return self._sequence(node, path)
            assert isinstance(node, yaml.MappingNode)  # the composer makes only these three
            self._check_tag(node, _MAP_TAG, path)
            result: dict[str, object] = {}
            self._fill_mapping(node, path, result, {}, explicit=True)
            return result
        finally:
            self._active.discard(id(node))

    def _scalar(self, node: yaml.ScalarNode, path: NodePath) -> object:
        if node.tag == _STR_TAG:  # what SafeConstructor returns for one, without its calls
            return node.value
        if node.tag in _PLAIN_SCALAR_TAGS and self._loader is not None:
            return self._loader.construct_object(node)
        if node.tag == _TIMESTAMP_TAG:
            return node.value
        self._report(node.start_mark, path, f"unsupported YAML tag '{node.tag}'")
        return None

    def _sequence(self, node: yaml.SequenceNode, path: NodePath) -> list[object]:
        items = []
        for index, item in enumerate(node.value):
            self.keys[path + (index,)] = (item.start_mark.line + 1, item.start_mark.column + 1)
            items.append(self.convert(item, path + (index,)))
        return items

    def _fill_mapping(
        self,
        node: yaml.MappingNode,
        path: NodePath,
        result: dict[str, object],
        first_seen: dict[str, Position],
        *,
        explicit: bool,
    ) -> None:
        """Add ``node``'s entries to ``result``; explicit keys first, then ``<<`` merges.

        Merged entries only fill keys that are still missing (YAML merge semantics), and a
        merged mapping's own duplicates are reported where it is defined, not again here.
        """
        merges: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merges.append(value_node)
                continue
            key = self._key(key_node, path)
            if key is None:
                continue
            mark = key_node.start_mark
            if key in first_seen:
                if explicit:
                    line, column = first_seen[key]
                    self._report(
                        mark, path, f"duplicate key '{key}'",
                        hint=f"'{key}' is first defined at {self._file}:{line}:{column}",
                    )
                continue
            first_seen[key] = self.keys[path + (key,)] = (mark.line + 1, mark.column + 1)
            result[key] = self.convert(value_node, path + (key,))
        for merged in merges:
            sources = merged.value if isinstance(merged, yaml.SequenceNode) else [merged]
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    self._report(source.start_mark, path, "'<<' can merge only mappings")
                elif id(source) in self._active:
                    self._report(source.start_mark, path, "an alias refers to itself")
                else:
                    self._active.add(id(source))
                    self._fill_mapping(source, path, result, first_seen, explicit=False)
                    self._active.discard(id(source))

    def _key(self, node: yaml.Node, path: NodePath) -> str | None:
        # Keys are names (models, targets, inputs, nodes): their text is what the user
        # wrote, so `8:` or `true:` stay the strings "8" and "true".
        if isinstance(node, yaml.ScalarNode):
            return str(node.value)
        self._report(node.start_mark, path, "a mapping key must be a plain name, not a collection")
        return None

    def _check_tag(self, node: yaml.Node, expected: str, path: NodePath) -> None:
        if node.tag != expected:
            self._report(node.start_mark, path, f"unsupported YAML tag '{node.tag}'")

    def _location(self, mark: yaml.Mark) -> SourceLocation:
        return SourceLocation(self._file, mark.line + 1, mark.column + 1)

    def _report(
        self, mark: yaml.Mark, path: NodePath, message: str, hint: str | None = None
    ) -> None:
        location = self._location(mark)
        prefix = f"{format_path(path)}: " if path else ""
        self.diagnostics.append(
            Diagnostic(prefix + message, location, hint, self._lines[location.line - 1])
        )


def _check_depth(text: str, file: str, lines: tuple[str, ...],
                 loader: type[yaml.SafeLoader] | type[yaml.CSafeLoader]) -> None:
    """Refuse nesting deeper than MAX_DEPTH before composing (the composer recurses per
    level; the event parser does not)."""
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                assert event.start_mark is not None  # the parser marks every event
                raise BuildgenError(_too_deep(file, lines, event.start_mark))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _too_deep(file: str, lines: tuple[str, ...],
              mark: yaml.error.Mark | yaml._yaml.Mark) -> Diagnostic:
    return Diagnostic(f"collections nested more than {MAX_DEPTH} deep",
                      SourceLocation(file, mark.line + 1, mark.column + 1), None,
                      lines[mark.line])


_FLOW = re.compile(r"[\[\]{}'\"#\n]")


def nesting_bound(text: str, lines: tuple[str, ...]) -> int:
    """An upper bound on how deep the document's collections nest, from its characters.

    Block collections nest by indentation: a child starts right of its parent, or (a
    sequence as a mapping's value) in the same column, so at most two levels per column
    and 2 * (widest line + 1) in all. Flow collections add at most the `[`/`{` not yet
    closed: counted over the text, where a `]`/`}` closes one only while no quote has been
    seen in the document (a quoted scalar, perhaps over several lines, may hold brackets)
    and not after a `#` on its line; a closer that closes nothing real (a plain block
    scalar's `]`) can only lower the count to 0, where the true depth already is."""
    width = max(map(len, lines), default=0)
    open_now = deepest = 0
    quoted = comment = False
    for match in _FLOW.finditer(text):
        char = match.group()
        if char in "[{":
            open_now += 1
            deepest = max(deepest, open_now)
        elif char in "]}":
            if not quoted and not comment and open_now:
                open_now -= 1
        elif char == "#":
            comment = True
        elif char == "\n":
            comment = False
        else:
            quoted = True
    return 2 * (width + 1) + deepest


def _syntax_diagnostic(
    exc: yaml.YAMLError, text: str, file: str, lines: tuple[str, ...]
) -> Diagnostic:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        location = SourceLocation(file, mark.line + 1, mark.column + 1)
        hint = None
        if exc.context and exc.context_mark is not None:
            start = exc.context_mark
            hint = f"{exc.context} that starts at {file}:{start.line + 1}:{start.column + 1}"
        if exc.problem and "'\\t'" in exc.problem:
            hint = "indent with spaces: YAML does not allow tabs there"
        source_line = lines[location.line - 1] if location.line <= len(lines) else None
        return Diagnostic(f"invalid YAML: {exc.problem}", location, hint, source_line)
    if isinstance(exc, yaml.reader.ReaderError):
        before = text[: exc.position]
        line = before.count("\n") + 1
        column = exc.position - (before.rfind("\n") + 1) + 1
        location = SourceLocation(file, line, column)
        # PyYAML reports the code point as an int for str input, a character for bytes.
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        message = f"invalid YAML: character #x{code:04x} is not allowed"
        return Diagnostic(message, location, None, lines[line - 1])
    return Diagnostic(f"invalid YAML: {exc}", SourceLocation(file, 1, 1))
