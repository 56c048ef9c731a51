"""A target named after a kind is refused, at its key, with the renamed definition as YAML."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from buildgen.errors import BuildgenError
from buildgen.targets.manifest_targets import resolve_targets


def test_the_message_proposes_the_fix_as_yaml(manifest) -> None:
    m = manifest("""
        buildgen: 1
        targets:
          c: {kind: c, opt_level: 2}   # ours
          cuda: {kind: composite, device: {kind: cuda}}
          gpu: {kind: c}
        """)
    with pytest.raises(BuildgenError) as info:
        resolve_targets(m)
    text = info.value.render()
    assert f"{m.path}:3:3: error: targets.c: target name 'c' is the name of a target kind\n" \
           "    c: {kind: c, opt_level: 2}   # ours\n" \
           "    ^\n" \
           "  hint: rename it, and write 'cpu' where models name it ('c' alone already means " \
           "the kind):\n" \
           "    targets:\n" \
           "      cpu: {kind: c, opt_level: 2}\n" in text
    # 'gpu' is taken: the next free name.
    assert "      my-cuda: {kind: composite, device: {kind: cuda}}" in text
    fix = yaml.safe_load(textwrap.dedent("\n".join(text.splitlines()[4:6])))
    assert fix == {"targets": {"cpu": {"kind": "c", "opt_level": 2}}}


def test_the_fix_resolves(manifest) -> None:
    m = manifest("""
        buildgen: 1
        targets:
          cpu: {kind: c, opt_level: 2}
        models:
          m: {source: m.onnx, targets: [cpu]}
        """)
    assert resolve_targets(m)["cpu"].canonical_json()
