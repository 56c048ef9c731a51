"""A manifest from an untrusted branch costs bounded time and memory to read, and its errors
stay short: alias bombs, deep nesting, huge files and huge keys are located errors."""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import pytest

from buildgen.errors import BuildgenError, Diagnostic, SourceLocation
from buildgen.manifest import load_yaml, parse_yaml


def _alias_bomb(levels: int = 9) -> str:
    lines = ["buildgen: 1", 'a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _merge_bomb(levels: int = 9) -> str:
    lines = ["buildgen: 1", "m0: &m0 {k0: 1, k1: 2, k2: 3}"]
    for i in range(1, levels):
        refs = ", ".join(f"x{j}: *m{i - 1}" for j in range(9))
        lines.append(f"m{i}: &m{i} {{{refs}, <<: *m{i - 1}}}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text", [_alias_bomb(), _merge_bomb()], ids=["aliases", "merge-keys"])
def test_alias_bombs_stop_early_with_a_located_error(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(BuildgenError) as caught:
        parse_yaml(text, "B.yaml")
    assert time.perf_counter() - start < 20  # ~1.5 s here; unbounded (GBs, minutes) before
    (diagnostic,) = caught.value.diagnostics
    assert "expands to more than 100,000 values" in diagnostic.message
    assert diagnostic.location is not None and diagnostic.location.path == "B.yaml"


def test_a_few_aliases_are_fine() -> None:
    doc = parse_yaml(_alias_bomb(levels=3), "B.yaml")  # 9 * 9 * 9 values
    assert isinstance(doc.data, dict) and len(doc.data["a2"]) == 9


# 10,000 levels: the event scan refuses it before libyaml's composer could overflow its
# stack; 70: the composer is safe, and the converter refuses it.
@pytest.mark.parametrize("depth", [10000, 70], ids=["scan", "converter"])
def test_deep_nesting_is_a_located_error_not_a_recursion_error(depth: int) -> None:
    text = "buildgen: 1\nx: " + "[" * depth + "]" * depth + "\n"
    with pytest.raises(BuildgenError) as caught:
        parse_yaml(text, "B.yaml")
    (diagnostic,) = caught.value.diagnostics
    assert "nested more than 64 deep" in diagnostic.message
    assert diagnostic.location == SourceLocation("B.yaml", 2, 3 + 64)  # the root mapping is 1
    assert len(caught.value.render()) < 1000


# Flow collections over many short lines, so the bound's flow count must carry it (the
# block term, 2 * (widest line + 1), is small), around brackets it must not count as
# closers: without that care the bound would drop to _DEEP while the depth is 2 * _DEEP.
_DEEP = 30


def _around(middle: str) -> str:
    return ("a:\n" + " [\n" * _DEEP + middle + " [\n" * _DEEP + " 1"
            + "\n ]" * (2 * _DEEP) + "\n")


@pytest.mark.parametrize("text", [
    _around(""),
    _around(' "' + " ]]]]]]]]\n" * 5 + ' ",\n'),  # a double-quoted scalar over lines
    _around(" '" + " ]]]]]]]]\n" * 5 + " ',\n"),
    _around(" x, # ]]]]]]]]\n" * 5),  # comments
    "x: |\n ]]]]]]\nb: c]]]\nd:\n" + " [\n" * _DEEP + " 1" + "\n ]" * _DEEP + "\n",
    "- - - - a\n",
    "a:\n- b:\n  - c:\n    - - d\n",
    "? - - a\n: - - b\n",
], ids=["flow", "double-quoted", "single-quoted", "comments", "block-scalar", "compact",
        "block", "complex-keys"])
def test_the_nesting_bound_is_never_below_the_real_depth(text: str) -> None:
    import yaml

    from buildgen.manifest.load import nesting_bound

    depth = deepest = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            deepest = max(deepest, depth)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    assert nesting_bound(text, tuple(text.split("\n"))) >= deepest


def test_a_large_ordinary_manifest_skips_the_event_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    loader = importlib.import_module("buildgen.manifest.load")

    def scan(*args: object) -> None:
        raise AssertionError("the event scan ran")

    monkeypatch.setattr(loader, "_check_depth", scan)
    models = "".join(f"  m{i}:\n    source: m.onnx\n    inputs: {{x: [2, 4]}}\n"
                     f"    targets: [cpu]\n" for i in range(2000))
    doc = parse_yaml(f"buildgen: 1\ntargets:\n  cpu: {{kind: c}}\nmodels:\n{models}", "B.yaml")
    assert isinstance(doc.data, dict) and len(doc.data["models"]) == 2000


def test_a_huge_manifest_is_refused_before_reading(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    loader = importlib.import_module("buildgen.manifest.load")
    monkeypatch.setattr(loader, "MAX_MANIFEST_BYTES", 1000)
    path = tmp_path / "BUILD.yaml"
    path.write_text("buildgen: 1\n# " + "x" * 2000 + "\n")
    with pytest.raises(BuildgenError, match="at most 1,000"):
        load_yaml(path)


def test_a_ten_megabyte_key_makes_a_short_error(tmp_path: Path) -> None:
    path = tmp_path / "BUILD.yaml"
    path.write_text("buildgen: 1\nmodels:\n  " + "k" * 10_000_000 + ": {}\n")
    with pytest.raises(BuildgenError) as caught:
        load_yaml(path)
    assert len(caught.value.render()) < 3000


def test_long_messages_and_lines_are_shortened_around_the_caret() -> None:
    line = "a" * 500 + "X" + "b" * 500
    text = Diagnostic("m" * 5000, SourceLocation("B.yaml", 1, 501), "h" * 5000, line).render()
    head, shown, caret, hint = text.splitlines()
    assert len(head) < 1100 and len(hint) < 1100 and "characters]" in head
    assert len(shown) < 200 and shown[caret.index("^")] == "X"
