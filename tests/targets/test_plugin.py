"""A kind added from outside: a package with a rules file, a schema, a tags file and a backend
class, found through the `buildgen.kinds` entry point. Nothing in buildgen is edited; the
test builds a model with it and runs the library."""

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from buildgen.backends.registry import get_backend
from buildgen.cli import main
from buildgen.errors import BuildgenError
from buildgen.targets import (
    has_code_generator,
    is_external_codegen_for,
    parse_target,
    registered_kinds,
    reload_registry,
)

RULES = """\
format: 1
kind: relu_c
device: cpu
is_external_codegen: true
external_codegen_for: c
backend: bgplugin.backend:ReluBackend
inherit: {cc: cc, opt_level: opt_level}
toolchain:
  language: c
  compiler: "{cc}"
  flags: ["-std=c11", "-O{opt_level}", "-fPIC", "-fvisibility=hidden"]
"""

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "relu_c: Relu as a C loop, a plug-in's external codegen for the c host",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "kind": {"const": "relu_c"},
        "cc": {"type": ["string", "null"], "default": None, "x-affects": "compile",
               "description": "C compiler; unset: the host's"},
        "opt_level": {"type": ["integer", "null"], "default": None, "x-affects": "compile",
                      "description": "-O level; unset: the host's"},
        "negative_slope": {"type": "number", "default": 0.0, "x-affects": "codegen",
                           "description": "y = slope * x for x < 0 (0: Relu)"},
    },
}

TAGS = """\
format: 1
tags:
  x86-relu:
    description: Relu loops first, then the c host
    target: {kind: composite, host: {kind: c, opt_level: 2}, accelerators: [relu_c]}
"""

BACKEND = '''
"""Runs Relu nodes as one C loop each, following buildgen_abi.h."""

from buildgen.backends.base import GeneratedSource
from buildgen.partition.boundaries import region_io


class ReluBackend:
    kind = "relu_c"

    def decline_reason(self, node, graph):
        if node.op != "Relu":
            return f"op {node.op} not implemented"
        return None if graph.type_of(node.inputs[0]).dtype.value == "float32" else "float32 only"

    def generate(self, model, graph, partition, options, weights=None):
        slope = float(options["negative_slope"])
        p = f"{model}__relu_c"
        out = ["#include <stddef.h>", '#include "buildgen_abi.h"',
               f"const size_t {p}_scratch_bytes = 0;",
               f"int {p}_create(bg_env *env) {{ (void)env; return 0; }}",
               f"void {p}_destroy(bg_env *env) {{ (void)env; }}"]
        for region in partition.regions_for(self.kind):
            io = region_io(graph, region)
            n = graph.type_of(io.inputs[0]).numel
            out += [f"int {p}_{region.id}(bg_env *env, const void *const *in, void *const *out)",
                    "{", "    (void)env;", "    const float *x = in[0];", "    float *y = out[0];",
                    f"    for (size_t i = 0; i < {n}; ++i)",
                    f"        y[i] = x[i] > 0 ? x[i] : {slope}f * x[i];",
                    "    return 0;", "}"]
        return GeneratedSource("relu_c.c", "c", "\\n".join(out) + "\\n")
'''


def write_plugin(
    site: Path, name: str, entry_point: str, files: dict[str, str], more_entry_points: str = ""
) -> Path:
    """A package `name` under `site` with `files`, registered under buildgen.kinds."""
    package = site / name
    for rel, text in files.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(text)
    (package / "__init__.py").touch()
    dist = site / f"{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[buildgen.kinds]\n{name} = {entry_point}\n{more_entry_points}"
    )
    return package


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path (and on the actions' PYTHONPATH) for plug-in packages."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", f"{site}:{repo}")
    yield site
    monkeypatch.undo()
    for module in [m for m in sys.modules if m.split(".")[0] in ("bgplugin", "dupplugin")]:
        del sys.modules[module]
    reload_registry()
    get_backend.cache_clear()


@pytest.fixture
def plugin(site):
    package = write_plugin(site, "bgplugin", "bgplugin", {
        "rules/relu_c.yaml": RULES,
        "rules/tags.yaml": TAGS,
        "schemas/targets/relu_c.schema.json": json.dumps(SCHEMA, indent=1),
        "backend.py": textwrap.dedent(BACKEND),
    })
    reload_registry()
    get_backend.cache_clear()
    return package


def test_a_plugin_kind_and_tag_are_registered(plugin, capsys):
    kind = registered_kinds()["relu_c"]
    assert kind.rules_file == plugin / "rules" / "relu_c.yaml"
    assert is_external_codegen_for("relu_c", "c") and has_code_generator("relu_c")
    target = parse_target({"tag": "x86-relu", "relu_c": {"negative_slope": 0.5}})
    assert target.backends == ("relu_c", "c")
    assert target.instance("relu_c").get("opt_level") == 2  # inherited from the tag's host
    assert target.codegen_options("relu_c") == {"negative_slope": 0.5}
    assert main(["targets", "relu_c", "x86-relu"]) == 0
    out = capsys.readouterr().out
    assert "relu_c: external codegen for c (cpu); builds" in out
    assert "negative_slope  0.0   codegen" in out and "x86-relu  relu_c > c {opt_level: 2}" in out


def test_a_plugin_kind_builds_and_runs(plugin, tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import buildgen.runtime

    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Relu", ["h"], ["y"], name="relu")],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "tiny.onnx")
    (tmp_path / "BUILD.yaml").write_text(textwrap.dedent("""\
        buildgen: 1
        targets:
          leaky: {tag: x86-relu, relu_c: {negative_slope: 0.25}}
        models:
          tiny: {source: tiny.onnx, targets: [leaky]}
        """))
    assert main(["build", "--manifest", str(tmp_path / "BUILD.yaml")]) == 0
    out = tmp_path / "build" / "tiny" / "leaky"
    report = json.loads((out / "report.json").read_text())
    assert [(r["target"], r["nodes"]) for r in report["regions"]] == [("c", 1), ("relu_c", 1)]
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    (y,) = buildgen.runtime.load(out / "libtiny.so")(x)
    h = x @ w
    np.testing.assert_allclose(y, np.where(h > 0, h, 0.25 * h), rtol=1e-6)


def test_editing_a_plugin_tag_re_resolves_targets_using_it(plugin):
    before = parse_target("x86-relu")
    (plugin / "rules" / "tags.yaml").write_text(TAGS.replace("opt_level: 2", "opt_level: 1"))
    reload_registry()
    after = parse_target("x86-relu")
    assert before.host.get("opt_level") == 2 and after.host.get("opt_level") == 1
    assert after.instance("relu_c").get("opt_level") == 1


def test_a_mistake_in_a_plugin_is_reported_in_its_file(plugin):
    (plugin / "rules" / "relu_c.yaml").write_text(RULES.replace("device: cpu", "devise: cpu"))
    reload_registry()
    with pytest.raises(BuildgenError) as info:
        registered_kinds()
    text = info.value.render()
    assert f"{plugin / 'rules' / 'relu_c.yaml'}:1:1: error: 'device' is a required property" in text
    assert f"{plugin / 'rules' / 'relu_c.yaml'}:3:1: error: devise: unknown key 'devise'" in text
    assert "hint: did you mean 'device'?" in text


def test_a_plugin_may_not_redefine_a_kind(site):
    folder = site / "dupplugin" / "defs"
    write_plugin(site, "dupplugin", "dupplugin:folder", {
        "defs/rules/c.yaml": RULES.replace("kind: relu_c", "kind: c"),
        "defs/schemas/targets/c.schema.json": json.dumps(SCHEMA).replace("relu_c", "c"),
        "__init__.py": f"def folder():\n    return {str(folder)!r}\n",
    })
    reload_registry()
    with pytest.raises(BuildgenError, match=r"defs/rules/c.yaml: 'c' is already defined by "):
        registered_kinds()


def test_a_plugin_backend_may_be_an_entry_point_instead_of_a_rules_reference(site):
    write_plugin(site, "bgplugin", "bgplugin", {
        "rules/relu_c.yaml": RULES.replace("backend: bgplugin.backend:ReluBackend\n", ""),
        "schemas/targets/relu_c.schema.json": json.dumps(SCHEMA),
        "backend.py": textwrap.dedent(BACKEND),
    }, "[buildgen.backends]\nrelu_c = bgplugin.backend:ReluBackend\n")
    reload_registry()
    get_backend.cache_clear()
    assert registered_kinds()["relu_c"].backend is None
    assert has_code_generator("relu_c")
    assert get_backend("relu_c").kind == "relu_c"
