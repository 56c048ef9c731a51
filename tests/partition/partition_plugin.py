"""Test-only accelerator kinds, installed as a plug-in package (buildgen.kinds entry point).

    tgemm   patterns: MatMul -> Add? -> Relu|Sigmoid? (2-D weight, bias), Gemm -> Relu?
    tvec    patterns: Softmax on the last axis; Add|Mul|Sub -> Relu?
    tall    no pattern table: claims every single node the c host accepts
    tdev    a device kind (device type tdev, not the host's cpu) with a slow link

Their code is the c backend's, renamed to the kind's symbols, so a model partitioned across
them builds and runs like a real composite target; which backend ran a node only changes
which module its code sits in.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

ACCELERATOR = """\
device: cpu
is_external_codegen: true
external_codegen_for: c
inherit: {cc: cc, opt_level: opt_level, march: march}
"""

DEVICE = """\
device: tdev
is_external_codegen: false
"""

TOOLCHAIN = """\
format: 1
kind: {kind}
backend: bgpart.backend:{cls}
{role}toolchain:
  language: c
  compiler: "{{cc}}"
  flags: ["-std=c11", "-O{{opt_level}}", "-fPIC", "-fvisibility=hidden", "-fno-math-errno"]
  optional_flags: {{march: "-march={{march}}"}}
  link_flags: ["-lm"]
"""

TABLES = {
    "tgemm": """\
patterns:
  - name: gemm_bias_act
    priority: 20
    ops: [MatMul, "Add?", "Relu|Sigmoid?"]
    where:
      dtype: float32
      MatMul: {const_inputs: [1], input_rank: {1: 2}}
      Add: {bias_of: MatMul}
    predicate: bgpart.predicates:not_too_wide
  - name: gemm
    priority: 10
    ops: [Gemm, "Relu?"]
cost: {matmul_gflops: 200, call_us: 0.5}
""",
    "tvec": """\
patterns:
  - name: softmax
    priority: 5
    ops: [Softmax]
    where:
      Softmax: {attrs: {axis: [last, null]}}
  - name: eltwise
    ops: [Add|Mul|Sub, "Relu?"]
""",
    "tall": "",
    "tdev": "cost: {transfer_gbytes_per_s: 1, transfer_us: 50}\n",
}

CLASSES = {"tgemm": "TGemm", "tvec": "TVec", "tall": "TAll", "tdev": "TDev"}


def _schema(kind: str) -> dict[str, object]:
    # An accelerator's compiler settings are inherited from the host (unset = null); the
    # device kind has its own.
    own = {"cc": "cc", "opt_level": 2} if kind == "tdev" else {}

    def attr(kind_: list[str], affects: str, text: str, name: str) -> dict[str, object]:
        return {"type": kind_, "default": own.get(name), "x-affects": affects,
                "description": text}

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{kind}: a test accelerator running c code",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "kind": {"const": kind},
            "cc": attr(["string", "null"], "compile", "C compiler", "cc"),
            "opt_level": attr(["integer", "null"], "compile", "-O level", "opt_level"),
            "march": attr(["string", "null"], "compile", "-march", "march"),
        },
    }


BACKEND = '''
"""Test accelerators: the c backend's code under another kind's symbols."""

from buildgen.backends.base import GeneratedSource
from buildgen.backends.c import CBackend
from buildgen.partition.model import Partition, Region
from buildgen.targets import get_kind


class _WrappedC:
    kind = ""

    def decline_reason(self, node, graph):
        patterns = get_kind(self.kind).patterns
        ops = {op for p in patterns for s in p.steps for op in s.ops}
        if patterns and node.op not in ops:
            return f"no {self.kind} pattern has {node.op}"
        return CBackend().decline_reason(node, graph)

    def generate(self, model, graph, partition, options, weights=None):
        mine = tuple(Region(r.id, "c", r.nodes) for r in partition.regions_for(self.kind))
        only = Partition(partition.model, partition.target, partition.graph_digest, mine)
        text = CBackend().generate(model, graph, only, {}, weights).text
        text = text.replace(f"{model}__c_", f"{model}__{self.kind}_")
        return GeneratedSource(f"{self.kind}.c", "c", text)


class TGemm(_WrappedC):
    kind = "tgemm"


class TVec(_WrappedC):
    kind = "tvec"


class TAll(_WrappedC):
    kind = "tall"


class TDev(_WrappedC):
    kind = "tdev"
'''

PREDICATES = '''
def not_too_wide(graph, nodes):
    """Declines a MatMul whose weight has more than 4096 columns."""
    width = graph.type_of(nodes[0].inputs[1]).shape[-1]
    return None if width <= 4096 else f"weight has {width} columns (more than 4096)"
'''


def write_plugin(site: Path, tables: dict[str, str] | None = None) -> Path:
    """The package `bgpart` under `site`, registered under buildgen.kinds."""
    package = site / "bgpart"
    tables = {**TABLES, **(tables or {})}
    files = {"__init__.py": "", "backend.py": BACKEND, "predicates.py": PREDICATES}
    for kind, cls in CLASSES.items():
        role = DEVICE if kind == "tdev" else ACCELERATOR
        files[f"rules/{kind}.yaml"] = TOOLCHAIN.format(kind=kind, cls=cls, role=role) + tables[kind]
        files[f"schemas/targets/{kind}.schema.json"] = json.dumps(_schema(kind), indent=1)
    for rel, text in files.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(textwrap.dedent(text))
    dist = site / "bgpart-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bgpart\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[buildgen.kinds]\nbgpart = bgpart\n")
    return package
