"""Fuzzing `buildgen gen` with manifests generated from the JSON schemas.

Documents are drawn FROM schemas/manifest.schema.json and the target kinds' schemas
(schemas/targets/<kind>.schema.json): every property's type, enum, const, pattern, bounds
and required keys give mostly-valid manifests; mutations then break them (wrong types,
unknown keys, missing required keys, odd names: unicode, very long, case-equal, keywords,
path-like), share sub-trees (YAML anchors and aliases), nest deeply, and rewrite the text
(duplicate keys, merge keys, tags, alias bombs, tabs) or its bytes (flips, truncation,
invalid UTF-8). Each case is written in its own folder beside a tiny ONNX model and run
through `buildgen gen` in-process (buildgen.cli.main, the path the command takes).

Each case must exit 0, or 1 with a rendered error; never an internal error (crash report),
an exception out of main, a hang, or a file outside the case's folder. Paths in a case
(build_dir, source, partition files, cache dir) may point anywhere; the ones that would be
accepted outside the sandbox are kept inside it by making the sandbox deep (see _SANDBOX).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzz_support import (
    KNOWN_SLOW_SECONDS,
    PER_CASE_SECONDS,
    CaseTimeout,
    Tally,
    crash_reports,
    fuzz_settings,
    hang_guard,
    listing,
)
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
MANIFEST_SCHEMA = json.loads((SCHEMAS / "manifest.schema.json").read_text())
KIND_SCHEMAS = {
    path.name.removesuffix(".schema.json"): json.loads(path.read_text())
    for path in sorted((SCHEMAS / "targets").glob("*.schema.json"))
    if not path.name.startswith("_")
}
TAGS = sorted(yaml.safe_load((ROOT / "rules" / "tags.yaml").read_text())["tags"])
KINDS = sorted(KIND_SCHEMAS)
DEFAULT_EXAMPLES = 900

# The manifest lives 4 folders below the case folder, so build_dir: ../../../x (accepted by
# buildgen: "beside the project") still lands inside the case. Generated relative paths
# climb at most 3 levels unless they are only '..' (a parent of the project: refused).
_SANDBOX = ("w", "x", "y", "proj")
CASE = "@CASE@"  # replaced by the case folder's absolute path when the case is written

# --- values ------------------------------------------------------------------------------

ODD_TEXT = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
    st.sampled_from([
        "", " ", "a" * 300, "é", "ｍｌｐ", "名前", "\u202e", "\x1b[2J", "\t", "a\nb", "\x00",
        "#", "&a", "*a", "!!str", "- x", "{", "[", "'", '"', "\\", "null", "~", "yes", "no",
        "on", "1e3", "0x10", ".inf", ".nan", "-", "?", ":", "a: b", "%TAG", "@",
    ]),
)

PATHS = st.one_of(
    st.sampled_from([
        "build", "out/build", "b", "", ".", "..", "../..", "../../..", "../../../../..",
        "./", "/", "//", "/.", "../out", "../../out", "../../../out", "build/../build",
        "BUILD.yaml", "m.onnx", "sub", "sub/../..", "~", "~/..", "/proc", "/etc", "/usr",
        "/tmp", "/dev/null", "nul", "con", "a" * 300, "a/" * 60, "x\x00y", "é/ñ",
        "build\\..\\..", "\u202ebuild", " build ", "-rf", "$HOME", "${PWD}", "$(pwd)",
        f"{CASE}/w/abs-build", f"{CASE}/w/x/y/proj", f"{CASE}/w/x/y", f"{CASE}",
        f"{CASE}/w/x/y/proj/sub", f"{CASE}/w/x/y/proj/m.onnx", f"{CASE}/w/x/y/proj/loop",
        "loop", "loop/x", "link", "file.txt", "full",
    ]),
    st.from_regex(r"\A(\.\./){0,3}[a-z]{1,6}(/[a-z]{1,6}){0,2}\Z"),
)
SOURCES = st.one_of(
    st.sampled_from(["m.onnx", "m.onnx", "m.onnx", "missing.onnx", "sub", "BUILD.yaml",
                     "../../proj/m.onnx", f"{CASE}/w/x/y/proj/m.onnx", "/dev/null", "",
                     "M.ONNX", "m.onnx/", "loop", "file.txt"]),
    PATHS,
)
VALID_MODEL_NAME = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,20}\Z")
VALID_TARGET_NAME = st.from_regex(r"\A[A-Za-z][A-Za-z0-9_-]{0,12}\Z")
MODEL_NAMES = st.one_of(
    VALID_MODEL_NAME, VALID_MODEL_NAME, VALID_MODEL_NAME,
    st.sampled_from(["m", "mlp", "net2", "_x", "Model", "m" * 100, "m" * 101, "a" * 5000,
                     "int", "return", "main", "my-model", "1abc", "", "é", "ｍ", "a b",
                     "..", "../x", "a/b", "con", "__init__", "x.y", "m\u0301", "Mlp", "MLP"]),
    st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,20}\Z"),
    ODD_TEXT,
)
TARGET_NAMES = st.one_of(
    VALID_TARGET_NAME, VALID_TARGET_NAME, VALID_TARGET_NAME,
    st.sampled_from(["cpu", "fast", "t-1", "T", "c", "cuda", "x86-fast", "composite", "",
                     "-x", "a" * 300, "é", "a b", "../t", "t/u", "Cpu", "CPU"]),
    st.from_regex(r"\A[A-Za-z][A-Za-z0-9_-]{0,12}\Z"),
    ODD_TEXT,
)
TARGET_REFS = st.sampled_from([*KINDS, *TAGS, "composite", "nope", "C", "x86-fastt"])

JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    ODD_TEXT, st.just([]), st.just({}), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


# Schema locations whose values are drawn by hand (paths, names, targets): filled below.
OVERRIDES: dict[str, Any] = {}
KEY_NAMES: dict[str, st.SearchStrategy[str]] = {}


def _pattern_strategy(pattern: str) -> st.SearchStrategy[str]:
    return st.one_of(st.from_regex(pattern, fullmatch=True), ODD_TEXT)


def from_schema(node: dict[str, Any], defs: dict[str, Any], where: str = "#",
                depth: int = 0) -> st.SearchStrategy[Any]:
    """Mostly-valid values for a JSON-schema node (the subset buildgen's schemas use)."""
    if where in OVERRIDES:
        return OVERRIDES[where]()
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return from_schema(defs[name], defs, f"#/$defs/{name}", depth)
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    for key in ("oneOf", "anyOf"):
        if key in node:
            return st.one_of([from_schema(branch, defs, f"{where}/{key}/{i}", depth)
                              for i, branch in enumerate(node[key])])
    kinds = node.get("type")
    if isinstance(kinds, list):
        return st.one_of([from_schema({**node, "type": k}, defs, where, depth) for k in kinds])
    if kinds == "null":
        return st.none()
    if kinds == "boolean":
        return st.booleans()
    if kinds == "integer":
        low = node.get("minimum", -5)
        high = node.get("maximum", low + 5000)
        return st.integers(low, high)
    if kinds == "number":
        return st.floats(node.get("minimum", 0), node.get("maximum", 1e6))
    if kinds == "string":
        if "pattern" in node:
            return _pattern_strategy(node["pattern"])
        return st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)),
                       min_size=node.get("minLength", 0), max_size=10)
    if kinds == "array":
        items = from_schema(node.get("items", {}), defs, f"{where}/items", depth + 1)
        return st.lists(items, min_size=node.get("minItems", 0),
                        max_size=max(node.get("minItems", 0), 3),
                        unique_by=(lambda v: json.dumps(v, sort_keys=True, default=str))
                        if node.get("uniqueItems") else None)
    if kinds == "object" or "properties" in node:
        props = node.get("properties", {})
        required = [k for k in node.get("required", []) if k in props]
        optional = {k: v for k, v in props.items() if k not in required}
        fixed = st.fixed_dictionaries(
            {k: from_schema(props[k], defs, f"{where}/properties/{k}", depth + 1)
             for k in required},
            optional={k: from_schema(v, defs, f"{where}/properties/{k}", depth + 1)
                      for k, v in optional.items()},
        )
        extra = node.get("additionalProperties", True)
        if isinstance(extra, dict) and depth < 6:
            more = st.dictionaries(
                KEY_NAMES.get(where, st.text(max_size=8)),
                from_schema(extra, defs, f"{where}/additionalProperties", depth + 1),
                max_size=3)
            return st.builds(lambda a, b: {**b, **a}, fixed, more)
        return fixed
    return JUNK  # an unconstrained node ({}): anything


def kind_target(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """{kind: <kind>, ...attributes} with attributes drawn from the kind's schema."""
    schema = KIND_SCHEMAS[kind]
    props = {k: v for k, v in schema["properties"].items() if k != "kind"}
    return st.fixed_dictionaries(
        {"kind": st.just(kind)},
        optional={k: from_schema(v, {}, f"kind:{kind}/{k}") for k, v in props.items()},
    )


ANY_KIND_TARGET = st.one_of([kind_target(k) for k in KINDS])
ATTRIBUTES = st.one_of([kind_target(k).map(lambda d: {k: v for k, v in d.items()
                                                      if k != "kind"}) for k in KINDS])


def target_value(depth: int = 0) -> st.SearchStrategy[Any]:
    member = TARGET_REFS if depth > 1 else st.one_of(TARGET_REFS, ANY_KIND_TARGET,
                                                     st.deferred(lambda: target_value(depth + 1)))
    composite = st.fixed_dictionaries(
        {"kind": st.just("composite")},
        optional={"host": member, "device": member,
                  "accelerators": st.lists(member, max_size=3)},
    )
    tagged = st.fixed_dictionaries(
        {"tag": st.sampled_from([*TAGS, "nope"])},
        optional={"host": st.one_of(TARGET_REFS, ATTRIBUTES), "device": st.one_of(
            TARGET_REFS, ATTRIBUTES), "c": ATTRIBUTES, "openblas": ATTRIBUTES,
            "accelerators": st.lists(TARGET_REFS, max_size=2)},
    )
    return st.one_of(TARGET_REFS, ANY_KIND_TARGET, composite, tagged)


OVERRIDES.update({
    "#/properties/build_dir": lambda: PATHS,
    "#/$defs/target": lambda: target_value(),
    "#/$defs/name": lambda: st.one_of(TARGET_REFS, TARGET_NAMES),
    "#/$defs/model/properties/source": lambda: SOURCES,
    "#/$defs/partition/properties/records": lambda: st.one_of(PATHS, SOURCES),
    "#/$defs/partition/properties/file": lambda: st.one_of(PATHS, SOURCES),
    "#/$defs/cache/properties/dir": lambda: PATHS,
    "#/$defs/model/properties/inputs": lambda: st.one_of(
        st.just({"x": [1, 4]}), st.just({"x": [1000000000, 4]}),
        st.dictionaries(st.sampled_from(["x", "y", "X", ""]),
                        st.lists(st.integers(-2, 2**40), max_size=4), max_size=2)),
})
KEY_NAMES.update({
    "#/properties/targets": TARGET_NAMES,
    "#/properties/models": MODEL_NAMES,
    "#/$defs/model/properties/pin": st.one_of(
        st.sampled_from(["r", "op:Relu", "re:(", "re:.*", "*", "", "host"]), ODD_TEXT),
})

MANIFESTS = from_schema(MANIFEST_SCHEMA, MANIFEST_SCHEMA["$defs"])

# --- mutations ---------------------------------------------------------------------------


def _containers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every dict and list in `value` (the first 20 levels)."""
    found: list[tuple[Any, ...]] = []
    if len(path) > 20:
        return found
    if isinstance(value, dict):
        found.append(path)
        for k, v in value.items():
            found += _containers(v, (*path, k))
    elif isinstance(value, list):
        found.append(path)
        for i, v in enumerate(value):
            found += _containers(v, (*path, i))
    return found


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@st.composite
def mutated_document(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(draw(MANIFESTS))  # st.just() values are shared between cases
    doc.setdefault("models", {}).setdefault("m", {"source": "m.onnx",
                                                  "inputs": {"x": [1, 4]}, "targets": ["c"]})
    for _ in range(draw(st.integers(0, 3))):
        spots = _containers(doc)
        path = draw(st.sampled_from(spots))
        here = _get(doc, path)
        action = draw(st.sampled_from([
            "wrong_type", "unknown_key", "drop_key", "odd_name", "case_twin", "share",
            "nest", "swap_root"]))
        if action == "swap_root" and not path:
            return draw(JUNK)
        if isinstance(here, dict):
            keys = list(here)
            if action == "wrong_type" and keys:
                here[draw(st.sampled_from(keys))] = copy.deepcopy(draw(JUNK))
            elif action == "unknown_key":
                key = draw(st.one_of(st.sampled_from(["sorce", "target", "kind", "tag",
                                                      "<<", "buildgen", "Source"]),
                                     ODD_TEXT, st.integers(), st.none(), st.booleans()))
                here[key] = copy.deepcopy(draw(JUNK))
            elif action == "drop_key" and keys:
                del here[draw(st.sampled_from(keys))]
            elif action in ("odd_name", "case_twin") and keys:
                key = draw(st.sampled_from(keys))
                name = (key.swapcase() if isinstance(key, str) and action == "case_twin"
                        else draw(st.one_of(MODEL_NAMES, TARGET_NAMES)))
                here[name] = here[key] if action == "case_twin" else here.pop(key)
            elif action == "share" and keys:  # one object twice: an anchor and an alias
                key = draw(st.sampled_from(keys))
                here[draw(st.one_of(st.sampled_from(keys), MODEL_NAMES))] = here[key]
            elif action == "nest" and keys:
                depth = draw(st.sampled_from([2, 10, 63, 64, 65, 100]))
                nested: Any = copy.deepcopy(draw(JUNK))
                for _ in range(depth):
                    nested = [nested] if draw(st.booleans()) else {"k": nested}
                here[draw(st.sampled_from(keys))] = nested
        elif isinstance(here, list) and here:
            index = draw(st.integers(0, len(here) - 1))
            if action in ("wrong_type", "unknown_key", "odd_name"):
                here[index] = copy.deepcopy(draw(JUNK))
            elif action == "drop_key":
                del here[index]
            elif action == "share":
                here.append(here[index])
    return doc


def _render(doc: Any, style: str, unicode: bool) -> str:
    class Dumper(yaml.SafeDumper):
        pass

    if style == "json":
        with contextlib.suppress(ValueError, TypeError, RecursionError):
            return json.dumps(doc, ensure_ascii=not unicode)
    try:
        return yaml.dump(doc, Dumper=Dumper, allow_unicode=unicode, sort_keys=False,
                         default_flow_style={"block": False, "flow": True}.get(style),
                         width=60 if style == "block" else 4096)
    except (yaml.YAMLError, RecursionError):  # a self-referencing "share" mutation
        return "buildgen: 1\nmodels: &a {m: *a}\n"


def _bomb(width: int, depth: int) -> str:
    lines = ["buildgen: 1", f"a0: &a0 [{', '.join(['x'] * width)}]"]
    for i in range(1, depth):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


RAW_TEXTS = st.sampled_from([
    "", "\n", "# only a comment\n", "---\n", "buildgen: 1\n---\nbuildgen: 1\n", "...\n",
    "buildgen: 1\n", "buildgen: 2\n", "buildgen: '1'\n", "buildgen: 1.0\n", "buildgen: true\n",
    "[1, 2]\n", "42\n", "null\n", "~\n", "\ufeffbuildgen: 1\n", "buildgen: 1\n\tmodels: {}\n",
    "buildgen: !!python/object:os.system [echo]\n", "buildgen: !foo 1\n",
    "buildgen: 1\n? [a, b]\n: c\n", "buildgen: 1\nmodels:\n  ? {a: 1}\n  : x\n",
    "buildgen: 1\nbase: &b {source: m.onnx, targets: [c]}\nmodels: {m: {<<: *b}}\n",
    "buildgen: 1\nmodels: {m: {<<: [*x], source: m.onnx}}\n",
    "buildgen: 1\nmodels: &m {m: {source: m.onnx, targets: [c]}, n: *m}\n",
    "buildgen: 1\nx: &x [*x]\n", "%YAML 1.1\n---\nbuildgen: 1\n",
    "%YAML 9.9\n---\nbuildgen: 1\n", "buildgen: 1\nmodels: {m: {source: m.onnx, "
    "targets: [c], inputs: {x: [1, 4]}}, m: {source: m.onnx, targets: [c]}}\n",
    "buildgen: 1\nbuild_dir: !!binary aGVsbG8=\n", "buildgen: 1\nbuild_dir: 2024-01-01\n",
    "buildgen: 1\nbuild_dir: 0o17\n", "buildgen: 0x1\n", "buildgen: 1\nbuild_dir: |\n  a\n  b\n",
    "buildgen: 1\n" + "x:\n " * 70 + " 1\n", "buildgen: 1\nx: " + "[" * 200 + "]" * 200 + "\n",
    "buildgen: 1\nx: " + "{a: " * 100 + "1" + "}" * 100 + "\n",
    "buildgen: 1\nx: " + "[" * 5000 + "\n",
    _bomb(10, 6), _bomb(3, 12), _bomb(2, 40),
])


@st.composite
def manifest_texts(draw: st.DrawFn) -> bytes:
    """A manifest's bytes: a rendered document, sometimes rewritten as text or bytes."""
    if draw(st.integers(0, 19)) == 0:
        text = draw(RAW_TEXTS)
    else:
        doc = draw(mutated_document())
        text = _render(doc, draw(st.sampled_from(["block", "block", "flow", "json", "auto"])),
                       draw(st.booleans()))
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(0, 2)) if draw(st.integers(0, 3)) == 0 else 0):
        change = draw(st.sampled_from(["dup_line", "tab", "anchor", "merge", "drop_line"]))
        if not lines:
            break
        i = draw(st.randoms(use_true_random=True)).randrange(len(lines))
        if change == "dup_line":  # a duplicate key (or item) where the line is `key: ...`
            lines.insert(i, lines[i])
        elif change == "tab":
            lines[i] = "\t" + lines[i]
        elif change == "drop_line":
            del lines[i]
        elif change == "anchor":
            lines[i] = re.sub(r": (\S)", r": &q \1", lines[i], count=1)
            lines.append("zz: *q\n")
        elif change == "merge":
            lines.insert(i, re.match(r"\s*", lines[i]).group(0) + "<<: {build_dir: x}\n")
    data = "".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0:  # byte-level damage
        raw = bytearray(data)
        spread = draw(st.randoms(use_true_random=True))  # uniform positions (seeded by the draw)
        for _ in range(draw(st.integers(1, 4))):
            how = draw(st.sampled_from(["flip", "insert", "truncate", "delete"]))
            at = spread.randrange(max(1, len(raw)))
            if how == "flip" and raw:
                raw[at] ^= 1 << spread.randrange(8)
            elif how == "insert":
                raw[at:at] = draw(st.sampled_from([b"\xff", b"\xc3", b"\x00", b"\xed\xa0\x80",
                                                   b"\xef\xbb\xbf", b"\r", b"\x85", b":",
                                                   b"- ", b"&", b"*", b"!", b"'", b'"']))
            elif how == "truncate":
                del raw[at:]
            elif how == "delete":
                del raw[at:at + draw(st.integers(1, 8))]
        data = bytes(raw)
    return data


# --- the test ----------------------------------------------------------------------------


def _tiny_model(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="r")], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def _prepare(case: Path, model_bytes: bytes) -> Path:
    project = case.joinpath(*_SANDBOX)
    (project / "sub").mkdir(parents=True)
    (project / "m.onnx").write_bytes(model_bytes)
    (project / "file.txt").write_text("x")
    (project / "full").mkdir()
    (project / "full" / "theirs.txt").write_text("not buildgen's")
    (project / "loop").symlink_to("loop")
    (project / "link").symlink_to(case / "w" / "linked")
    return project


def test_fuzz_manifest_gen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from buildgen.cli import main

    model = tmp_path / "model.onnx"
    _tiny_model(model)
    model_bytes = model.read_bytes()
    base = tmp_path / "base"
    base.mkdir()
    cwd = base / "cwd"  # the process's working directory during a case: must stay empty
    cwd.mkdir()
    case = base / "case"
    tally = Tally("manifest fuzz (buildgen gen)")
    before = os.getcwd()
    os.chdir(cwd)

    @fuzz_settings(DEFAULT_EXAMPLES)
    @given(manifest_texts())
    def one_case(data: bytes) -> None:
        for leftover in (case, cwd / ".buildgen"):  # a failing case's, during shrinking
            if leftover.exists():
                shutil.rmtree(leftover)
        project = _prepare(case, model_bytes)
        manifest = project / "BUILD.yaml"
        manifest.write_bytes(data.replace(CASE.encode(), str(case).encode()))
        out, err = io.StringIO(), io.StringIO()
        start = time.monotonic()
        try:
            with hang_guard(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = main(["gen", "--manifest", str(manifest)])
        except CaseTimeout:
            raise AssertionError(f"hang: gen ran past the hang bound on {data!r}") from None
        seconds = time.monotonic() - start
        stderr = err.getvalue()
        assert os.getcwd() == str(cwd), "gen changed the working directory"
        assert "internal error" not in stderr and "Traceback" not in stderr, stderr
        assert not crash_reports(base), f"crash report written: {crash_reports(base)}"
        assert status in (0, 1), (status, stderr)
        if status == 1:
            assert "error:" in stderr, f"exit 1 without a rendered error: {stderr!r}"
        # Known slow (fuzz_support.KNOWN_SLOW_SECONDS): an alias bomb is parsed twice.
        known_slow = "expands to more than 100,000 values" in stderr
        bound = KNOWN_SLOW_SECONDS if known_slow else PER_CASE_SECONDS
        assert seconds < bound, f"case took {seconds:.1f} s: {data[:300]!r}"
        if seconds >= PER_CASE_SECONDS:
            tally.note("known slow (alias bomb parsed twice), over the per-case bound")
        assert sorted(os.listdir(base)) == ["case", "cwd"], sorted(os.listdir(base))
        assert not os.listdir(cwd), f"written into the working directory: {os.listdir(cwd)}"
        outside = {p for p in listing(case) if not p.startswith(os.path.join(*_SANDBOX))}
        allowed = {"w", "w/x", "w/x/y", "w/x/y/proj"}
        tally.record("success" if status == 0 else "clean error", seconds,
                     stderr.replace(str(manifest), "BUILD.yaml"))
        if outside - allowed:  # beside the project (../out, an absolute path): accepted
            tally.note("build folder beside the project")

    try:
        one_case()
    finally:
        os.chdir(before)
        with capsys.disabled():
            print("\n" + tally.summary())
    assert sorted(os.listdir(base)) in (["case", "cwd"], ["cwd"])
    assert not list(ROOT.glob(".hypothesis"))
