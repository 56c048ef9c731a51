"""The analytic estimate, used where no tuning record exists: a flops/bytes (roofline) model.

    seconds(candidate on kind) = call_us / 1e6
        + max(contraction_flops / matmul_gflops + other_flops / gflops,
              boundary_bytes / gbytes_per_s) / 1e9

Contractions are MatMul, Gemm, Conv and ConvTranspose (2·M·N·K multiply-adds); other ops
count a few flops per output element (more for transcendental ones); views (Reshape,
Flatten, ...) count none. Boundary bytes are what the candidate reads from outside (inputs
and weights) and writes: tensors inside a candidate stay in cache. A tensor moved between
the host and another device type adds transfer_us / 1e6 + bytes / transfer_gbytes_per_s / 1e9.

The numbers are a kind's `cost:` in its rules file, else the defaults of its role below:
rough single-thread figures for an AVX2 core and a datacenter GPU. They only have to rank
backends sensibly; `buildgen tune` replaces them with measurements.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from buildgen.ir import Graph, Node
from buildgen.targets import get_kind
from buildgen.targets.kinds import Role


@dataclass(frozen=True)
class CostModel:
    gflops: float
    matmul_gflops: float
    gbytes_per_s: float
    call_us: float
    transfer_gbytes_per_s: float
    transfer_us: float


ROLE_DEFAULTS = {
    Role.HOST: CostModel(4.0, 40.0, 10.0, 0.2, 10.0, 0.0),
    Role.ACCELERATOR: CostModel(4.0, 60.0, 10.0, 1.0, 10.0, 0.0),
    Role.DEVICE: CostModel(2000.0, 20000.0, 1000.0, 5.0, 12.0, 10.0),
}

CONTRACTIONS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose"})
VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})
# Flops per output element of ops that are more than one arithmetic instruction.
_HEAVY = {
    "Exp": 8, "Log": 8, "Tanh": 10, "Sigmoid": 10, "Erf": 10, "Gelu": 14, "Pow": 12,
    "Softmax": 12, "LogSoftmax": 14, "LayerNormalization": 8, "InstanceNormalization": 8,
    "BatchNormalization": 2, "Softplus": 10, "Mish": 20, "Elu": 8, "Selu": 8, "Celu": 8,
    "HardSwish": 4, "HardSigmoid": 3, "Sqrt": 4, "Div": 4, "Reciprocal": 4,
}


def cost_model(kind: str) -> CostModel:
    declared = get_kind(kind)
    base = ROLE_DEFAULTS[declared.role]
    spec = declared.cost
    return CostModel(
        gflops=spec.gflops or base.gflops,
        matmul_gflops=spec.matmul_gflops or base.matmul_gflops,
        gbytes_per_s=spec.gbytes_per_s or base.gbytes_per_s,
        call_us=base.call_us if spec.call_us is None else spec.call_us,
        transfer_gbytes_per_s=spec.transfer_gbytes_per_s or base.transfer_gbytes_per_s,
        transfer_us=base.transfer_us if spec.transfer_us is None else spec.transfer_us,
    )


def _shape(graph: Graph, name: str) -> tuple[int, ...]:
    return graph.type_of(name).shape


def contraction_flops(graph: Graph, node: Node) -> int:
    out = prod(_shape(graph, node.outputs[0]))
    if node.op in ("MatMul", "Gemm"):
        a = _shape(graph, node.inputs[0])
        k = a[-1] if node.op == "MatMul" or not node.attr("transA") else a[0]
        return 2 * out * (k if a else 1)
    weight = _shape(graph, node.inputs[1])  # Conv: [M, C/g, k...]; ConvTranspose: [C, M/g, k...]
    if node.op == "Conv":
        return 2 * out * prod(weight[1:])
    return 2 * prod(_shape(graph, node.inputs[0])) * prod(weight[1:])


def node_flops(graph: Graph, node: Node) -> tuple[int, int]:
    """(contraction flops, other flops) of one node."""
    if node.op in CONTRACTIONS:
        return contraction_flops(graph, node), 0
    if node.op in VIEWS:
        return 0, 0
    outputs = sum(prod(_shape(graph, t)) for t in node.outputs if t)
    if node.op.startswith("Reduce") or node.op.endswith("Pool") or node.op.startswith("Global"):
        inputs = prod(_shape(graph, node.inputs[0]))
        return 0, max(inputs, outputs)
    return 0, outputs * _HEAVY.get(node.op, 1)


def boundary_bytes(graph: Graph, nodes: tuple[Node, ...]) -> int:
    produced = {t for n in nodes for t in n.outputs if t}
    members = {n.name for n in nodes}
    read: dict[str, int] = {}
    for n in nodes:
        for t in n.inputs:
            if t and t not in produced:
                read[t] = graph.type_of(t).nbytes
    written = sum(
        graph.type_of(t).nbytes
        for t in produced
        if t in graph.output_names or any(c.name not in members for c in graph.consumers(t))
    )
    return sum(read.values()) + written


def estimate_seconds(graph: Graph, nodes: tuple[Node, ...], kind: str) -> float:
    model = cost_model(kind)
    contraction = other = 0
    for node in nodes:
        c, o = node_flops(graph, node)
        contraction += c
        other += o
    compute = contraction / model.matmul_gflops + other / model.gflops
    memory = boundary_bytes(graph, nodes) / model.gbytes_per_s
    return model.call_us * 1e-6 + max(compute, memory) * 1e-9


def transfer_seconds(nbytes: int, kinds: tuple[str, str]) -> float:
    """Moving `nbytes` between the devices of two kinds: the slower side's link counts."""
    models = [cost_model(k) for k in kinds if get_kind(k).role is Role.DEVICE] or [
        cost_model(kinds[0])
    ]
    link = min(models, key=lambda m: m.transfer_gbytes_per_s)
    return link.transfer_us * 1e-6 + nbytes / link.transfer_gbytes_per_s * 1e-9
