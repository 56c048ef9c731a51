"""The registry of kinds: what each kind declares, and the checks on rules and schema files."""

import json

import jsonschema
import pytest

from buildgen.errors import BuildgenError
from buildgen.targets import (
    Role,
    get_kind,
    has_code_generator,
    is_external_codegen_for,
    registered_kinds,
)
from buildgen.targets.kinds import AFFECTS, load_kind

BUILT_IN = {
    # kind: (device type, role, external codegen for)
    "c": ("cpu", Role.HOST, None),
    "onednn": ("cpu", Role.ACCELERATOR, "c"),
    "openblas": ("cpu", Role.ACCELERATOR, "c"),
    "cuda": ("cuda", Role.DEVICE, None),
    "cublas": ("cuda", Role.ACCELERATOR, "cuda"),
    "cudnn": ("cuda", Role.ACCELERATOR, "cuda"),
    "cutlass": ("cuda", Role.ACCELERATOR, "cuda"),
}


def test_the_built_in_kinds_and_what_they_declare():
    kinds = registered_kinds()
    assert set(BUILT_IN) <= set(kinds)
    for name, (device, role, base) in BUILT_IN.items():
        kind = kinds[name]
        assert (kind.device, kind.role, kind.external_codegen_for) == (device, role, base), name
        assert kind.is_external_codegen == (role is Role.ACCELERATOR)


def test_is_external_codegen_for_relates_a_kind_to_its_device_kind():
    assert is_external_codegen_for("cutlass", "cuda")
    assert is_external_codegen_for("cublas", "cuda") and is_external_codegen_for("cudnn", "cuda")
    assert is_external_codegen_for("onednn", "c") and is_external_codegen_for("openblas", "c")
    assert not is_external_codegen_for("cutlass", "c")
    assert not is_external_codegen_for("onednn", "cuda")
    assert not is_external_codegen_for("cuda", "cuda")  # a device is not its own codegen
    with pytest.raises(BuildgenError, match="unknown target kind 'cutlas'"):
        is_external_codegen_for("cutlas", "cuda")


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_every_attribute_is_documented_with_a_valid_default(name):
    kind = get_kind(name)
    validator = jsonschema.Draft202012Validator(kind.schema)
    assert kind.attributes
    for attr in kind.attributes:
        assert len(attr.description) > 15, (name, attr.name)
        assert attr.affects in AFFECTS, (name, attr.name)
        assert not list(validator.iter_errors({attr.name: attr.default})), (name, attr.name)


def test_the_attributes_the_issue_asks_for():
    names = {k: {a.name for a in get_kind(k).attributes} for k in BUILT_IN}
    assert {"sm", "use_3xtf32", "split_k_slices", "profile_all_alignments", "find_first_valid",
            "use_multiprocessing", "tmp_dir"} <= names["cutlass"]
    for cpu in ("c", "onednn", "openblas"):
        assert {"cc", "opt_level", "march", "mcpu", "cflags", "threads"} <= names[cpu], cpu
    assert {"arch", "nvcc_flags", "nvcc_jobs"} <= names["cuda"]


def test_what_a_change_re_runs_is_declared_per_attribute():
    cutlass = get_kind("cutlass")
    assert cutlass.attribute("split_k_slices").affects == "codegen"
    assert cutlass.attribute("sm").affects == "partition"
    # How the profiler runs never changes what it chooses.
    assert cutlass.attribute("use_multiprocessing").affects == "none"
    assert cutlass.attribute("tmp_dir").affects == "none"
    assert get_kind("c").attribute("opt_level").affects == "compile"


# cudnn's backend is declared in its rules but may be mid-way through being written: only
# the others are loaded here.
LOADED_BACKENDS = {"c", "onednn", "openblas", "cuda", "cublas", "cutlass"}


def test_every_built_in_kind_declares_a_code_generator_and_it_loads():
    from buildgen.backends.registry import get_backend

    for name in BUILT_IN:
        assert has_code_generator(name), name
    for name in sorted(LOADED_BACKENDS):
        assert get_backend(name).kind == name


def test_get_backend_says_a_kind_has_no_code_generator(without_backend):
    from buildgen.backends.registry import get_backend

    get_backend.cache_clear()
    without_backend("cutlass")
    try:
        assert not has_code_generator("cutlass") and has_code_generator("cuda")
        with pytest.raises(BuildgenError, match="kind 'cutlass' has no code generator"):
            get_backend("cutlass")
        without_backend("cutlass", backend="buildgen.backends.no_such_module:Backend")
        with pytest.raises(BuildgenError, match="backend 'cutlass': cannot load "
                           "'buildgen.backends.no_such_module:Backend'"):
            get_backend("cutlass")
    finally:
        get_backend.cache_clear()  # nothing this test saw outlives it


# -- checks on the files that declare a kind (what a plug-in author sees) -----------------

RULES = """\
format: 1
kind: toy
device: cpu
is_external_codegen: true
external_codegen_for: c
inherit: {cc: cc}
toolchain: {language: c, compiler: "{cc}", flags: ["-O{level}"]}
"""


def _schema(**props):
    return {
        "type": "object", "additionalProperties": False,
        "properties": {"kind": {"const": "toy"}, **props},
    }


def _write(tmp_path, rules=RULES, schema=None, name="toy"):
    (tmp_path / f"{name}.yaml").write_text(rules)
    schema = schema if schema is not None else _schema(
        cc={"type": ["string", "null"], "default": None, "x-affects": "compile",
            "description": "compiler; unset: the host's"},
        level={"type": "integer", "default": 2, "x-affects": "compile",
               "description": "the optimisation level"},
    )
    (tmp_path / f"{name}.schema.json").write_text(json.dumps(schema))
    return tmp_path / f"{name}.yaml", tmp_path / f"{name}.schema.json"


def test_a_good_kind_loads(tmp_path):
    kind = load_kind(*_write(tmp_path))
    assert kind.role is Role.ACCELERATOR and kind.defaults() == {"cc": None, "level": 2}


def test_a_rules_file_error_is_located(tmp_path):
    rules = RULES.replace("device: cpu", "device: [cpu]")
    with pytest.raises(BuildgenError) as info:
        load_kind(*_write(tmp_path, rules))
    (diag,) = info.value.diagnostics
    assert (diag.location.line, diag.location.column) == (3, 9)
    assert "is not of type 'string'" in diag.message and diag.message.startswith("device:")


def test_a_kind_name_must_be_a_c_identifier(tmp_path):
    with pytest.raises(BuildgenError, match="does not match"):
        load_kind(*_write(tmp_path, RULES.replace("kind: toy", "kind: to-y")))


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (_schema(level={"type": "integer", "x-affects": "compile", "description": "d"}),
         "attribute 'level' lacks default"),
        (_schema(level={"type": "integer", "default": "2", "x-affects": "compile",
                        "description": "d"}),
         "attribute 'level': its default is not valid"),
        (_schema(level={"type": "integer", "default": 2, "x-affects": "link-time",
                        "description": "d"}),
         "x-affects must be one of partition, codegen, compile, link, none"),
        ({**_schema(), "additionalProperties": True}, "set \"additionalProperties\": false"),
        ({"type": "object", "additionalProperties": False, "properties": {}},
         "properties.kind must be {\"const\": \"toy\"}"),
        (_schema(cc={"type": "string", "default": "cc", "x-affects": "compile",
                     "description": "d"},
                 level={"type": "integer", "default": 2, "x-affects": "compile",
                        "description": "d"}),
         "inherit: 'cc' must default to null"),
        (_schema(cc={"type": ["string", "null"], "default": None, "x-affects": "compile",
                     "description": "d"}),
         "toolchain uses 'level', which is not an attribute"),
        (_schema(cc={"type": ["string", "null"], "default": None, "x-affects": "compile",
                     "description": "d"},
                 level={"type": "integer", "default": 2, "x-affects": "compile",
                        "description": "d", "x-key-as": {"2": 3}}),
         "attribute 'level': x-key-as '2': 3 is not a value of it"),
    ],
)
def test_schema_mistakes_are_reported(tmp_path, schema, message):
    with pytest.raises(BuildgenError) as info:
        load_kind(*_write(tmp_path, schema=schema))
    assert any(message in d.message for d in info.value.diagnostics), info.value.render()


def test_rules_and_schema_must_agree(tmp_path):
    rules = RULES.replace("external_codegen_for: c\n", "")
    rules_file, schema_file = _write(tmp_path, rules, name="other")
    with pytest.raises(BuildgenError) as info:
        load_kind(rules_file, schema_file)
    text = info.value.render()
    assert "declares kind 'toy'; name the file toy.yaml" in text
    assert "give it exactly when is_external_codegen is true" in text


def test_a_missing_schema_is_named(tmp_path):
    rules_file, _ = _write(tmp_path)
    with pytest.raises(BuildgenError, match="has no attribute schema at .*nope.schema.json"):
        load_kind(rules_file, tmp_path / "nope.schema.json")


def test_a_schema_that_is_not_json_schema_is_reported(tmp_path):
    schema = _schema(level={"type": "integr", "default": 2, "x-affects": "compile",
                            "description": "d"})
    with pytest.raises(BuildgenError, match="not a valid JSON Schema"):
        load_kind(*_write(tmp_path, schema=schema))
