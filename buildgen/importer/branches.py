"""An If node becomes its branches and a select: Where(cond, then, else) per output.

A library's graph is straight-line code with static shapes, and the Ifs of shipped models
flatten: openwakeword's `hey_jarvis` scores a window with one network and runs a second,
"verifier" one only when the score passes a threshold; silero's VAD branches on its
sample-rate input, and inside each branch on values that are constant once the manifest
fixes the input shapes. One level of Ifs a pass (buildgen/importer/api.py), outermost
first, the branch nodes joining the graph under names of their own (`<if>/then/<name>`,
so generated code still shows where a kernel came from):

* an If whose condition folds to a constant at the manifest's shapes (found by folding a
  copy of the graph first) becomes the branch it picks; the other is never inferred, which
  matters: it need not be valid at these shapes (silero's LSTM on the path not taken);
* any other becomes both branches, run on every call, and a select that keeps the taken
  one's result: what ONNX's If returns, at the cost of the other branch's time (for
  hey_jarvis, one more small MLP). A result of the branch not taken is never read: a NaN
  or an infinity in it does not reach the output. A condition that folds only later makes
  its select an Identity, the other branch dead code (`settle`).

Refused, with the node named:
* branches whose results differ in shape (ONNX allows it; a static graph has one shape per
  value);
* a select decided at run time whose branches keep, after folding, an op that can fail on
  its data (a Gather of run-time indices: one out of range fails the call): run on inputs
  meant for the other branch, it would fail a call that ONNX's If completes.
Loop and Scan stay refused (buildgen/importer/api.py), before shape inference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableSequence, Sequence, Set
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from buildgen.errors import error
from buildgen.importer.names import unique_name

# Ops whose kernels fail a call on data they cannot use (an index out of range, a
# sequence length beyond the sequence): see the `fallible` kernels of the c backend.
FALLIBLE_OPS = frozenset({
    "Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND",
    "ReverseSequence", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss",
    "LSTM", "GRU", "RNN",
})
_RECURRENT = frozenset({"LSTM", "GRU", "RNN"})  # fallible through sequence_lens (input 4)


@dataclass(frozen=True)
class Select:
    """One output of an inlined If: `output` = Where(`cond`, `then`, `other`)."""

    node: str  # the If's name, for messages
    output: str
    condition: str  # the If's condition, as the graph names it
    cond: str  # the same, as a scalar
    then: str
    other: str

    def holds(self, node: onnx.NodeProto) -> bool:
        """Whether `node` came from one of its branches (nested Ifs' included): each was
        named `<if>/then/...` or `<if>/else/...` as it was inlined."""
        return node.name.startswith((f"{self.node}/then/", f"{self.node}/else/"))


def has_if(nodes: Iterable[onnx.NodeProto]) -> bool:
    return any(node.op_type == "If" and node.domain in ("", "ai.onnx") for node in nodes)


def inline_ifs(nodes: Sequence[onnx.NodeProto], graph: onnx.GraphProto, path: Path,
               ready: Set[str], decided: Mapping[str, bool]
               ) -> tuple[list[onnx.NodeProto], list[Select]]:
    """`nodes` with each If whose condition is `ready` replaced by its branches and
    selects, or by the one branch its condition picks where `decided` holds the
    condition's value; the branches' initializers join `graph.initializer`. Other Ifs, and
    those inside the branches, stay (the next pass's): their conditions may fold once
    this pass's values are known."""
    taken = _all_names(graph, nodes)
    selects: list[Select] = []
    flat = _inline(nodes, graph, path, taken, selects, ready, decided)
    return flat, selects


def settle(nodes: MutableSequence[onnx.NodeProto], selects: Sequence[Select],
           shapes: Mapping[str, tuple[int, ...] | None],
           constants: Mapping[str, np.ndarray], path: Path) -> None:
    """After folding: check each select's branches agree in shape, and turn a select on a
    constant condition into an Identity of the branch it picks (in place)."""
    by_output = {node.output[0]: node for node in nodes if node.output}
    for select in selects:
        then, other = shapes.get(select.then), shapes.get(select.other)
        if then is not None and other is not None and then != other:
            raise error(f"{path}: node '{select.node}' (If): its branches give "
                        f"'{select.output}' different shapes ({list(then)} and "
                        f"{list(other)}); a compiled graph has one shape per value")
        node = by_output.get(select.output)
        if node is None or node.op_type != "Where":
            continue  # folded already
        if select.cond not in constants:
            _check_fallible(select, nodes, constants, path)
            continue  # decided at run time
        chosen = select.then if bool(constants[select.cond].reshape(-1)[0]) else select.other
        node.op_type = "Identity"
        node.input[:] = [chosen]


def _inline(nodes: Iterable[onnx.NodeProto], graph: onnx.GraphProto, path: Path,
            taken: set[str], selects: list[Select], ready: Set[str],
            decided: Mapping[str, bool]) -> list[onnx.NodeProto]:
    flat: list[onnx.NodeProto] = []
    for node in nodes:
        if (node.op_type != "If" or node.domain not in ("", "ai.onnx")
                or (node.input and node.input[0] not in ready)):
            flat.append(node)
            continue
        branches = {a.name: a.g for a in node.attribute if a.name in ("then_branch",
                                                                      "else_branch")}
        if len(branches) != 2 or len(node.input) != 1:
            raise error(f"{path}: node '{node.name}' (If) needs a condition, then_branch "
                        "and else_branch")
        picked = decided.get(node.input[0])
        labels: tuple[str, ...] = ("then", "else")
        if picked is not None:
            labels = ("then",) if picked else ("else",)
        results = {}
        for label in labels:
            body = branches[f"{label}_branch"]
            renamed = _hoist(node.name, label, body, graph, taken)
            flat.extend(_renamed_node(n, f"{node.name}/{label}", renamed, taken)
                        for n in body.node)
            results[label] = [renamed.get(o.name, o.name) for o in body.output]
            if len(results[label]) != len(node.output):
                raise error(f"{path}: node '{node.name}' (If): its {label} branch has "
                            f"{len(results[label])} outputs, the node {len(node.output)}")
        if picked is not None:  # the branch its constant condition picks
            chosen = results[labels[0]]
            for k, output in enumerate(node.output):
                if output:
                    name = unique_name(f"{node.name}/{k}", taken)
                    flat.append(onnx.helper.make_node("Identity", [chosen[k]], [output],
                                                      name=name))
            continue
        cond = unique_name(f"{node.name}/cond", taken)
        shape = unique_name(f"{node.name}/scalar", taken)
        graph.initializer.append(onnx.numpy_helper.from_array(np.zeros(0, np.int64), shape))
        flat.append(onnx.helper.make_node("Reshape", [node.input[0], shape], [cond],
                                          name=cond))
        for k, output in enumerate(node.output):
            if not output:
                continue
            then, other = results["then"][k], results["else"][k]
            name = node.name if len(node.output) == 1 else f"{node.name}/select_{k}"
            flat.append(onnx.helper.make_node("Where", [cond, then, other], [output],
                                              name=name))
            selects.append(Select(node.name, output, node.input[0], cond, then, other))
    return flat


def _check_fallible(select: Select, nodes: Sequence[onnx.NodeProto],
                   constants: Mapping[str, np.ndarray], path: Path) -> None:
    """Refuse a run-time select whose branches keep a node that can fail on its data:
    run on inputs meant for the other branch, it would fail a call ONNX's If completes.
    Gathers of constant indices (what Shape arithmetic folds into) cannot."""
    for node in nodes:
        if not select.holds(node) or node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type not in FALLIBLE_OPS:
            continue
        data = _index_input(node)
        if data and data not in constants:
            raise error(
                f"{path}: node '{select.node}' (If): its branches run both, and "
                f"'{node.name}' ({node.op_type}) can fail on data meant for the other one "
                "(an index out of range); control flow is not supported")


def _index_input(node: onnx.NodeProto) -> str:
    """The input whose values can be out of range (indices, targets, lengths), or ''."""
    position = 4 if node.op_type in _RECURRENT else 1
    return node.input[position] if len(node.input) > position else ""


def _every_node_of(nodes: Iterable[onnx.NodeProto]) -> Iterable[onnx.NodeProto]:
    for inner in nodes:
        yield inner
        for attr in inner.attribute:
            if attr.HasField("g"):
                yield from _every_node_of(attr.g.node)
            for sub in attr.graphs:
                yield from _every_node_of(sub.node)


def _hoist(if_name: str, label: str, body: onnx.GraphProto, graph: onnx.GraphProto,
           taken: set[str]) -> dict[str, str]:
    """New names for what the branch defines (its initializers join the outer graph's);
    names it reads from the outer scope keep theirs."""
    prefix = f"{if_name}/{label}/"
    renamed: dict[str, str] = {}
    for tensor in body.initializer:
        renamed[tensor.name] = unique_name(prefix + tensor.name, taken)
        copy = onnx.TensorProto()
        copy.CopyFrom(tensor)
        copy.name = renamed[tensor.name]
        graph.initializer.append(copy)
    for inner in body.node:
        for output in inner.output:
            if output:
                renamed[output] = unique_name(prefix + output, taken)
    return renamed


def _renamed_node(node: onnx.NodeProto, prefix: str, renamed: Mapping[str, str],
                  taken: set[str]) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.name = unique_name(f"{prefix}/{node.name or node.op_type}", taken)
    copy.input[:] = [renamed.get(name, name) for name in node.input]
    copy.output[:] = [renamed.get(name, name) for name in node.output]
    for attr in copy.attribute:  # a nested If's branches read this branch's values too
        for sub in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
            _rename_reads(sub, renamed)
    return copy


def _rename_reads(body: onnx.GraphProto, renamed: Mapping[str, str]) -> None:
    own = {t.name for t in body.initializer} | {o for n in body.node for o in n.output}
    outer = {k: v for k, v in renamed.items() if k not in own}
    for inner in body.node:
        inner.input[:] = [outer.get(name, name) for name in inner.input]
        for attr in inner.attribute:
            for sub in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
                _rename_reads(sub, outer)
    for output in body.output:
        output.name = outer.get(output.name, output.name)


def _all_names(graph: onnx.GraphProto, nodes: Iterable[onnx.NodeProto]) -> set[str]:
    """Every name in use: the graph's weights and inputs, and what `nodes` (the graph's,
    flattened so far) and their subgraphs name."""
    names = {t.name for t in graph.initializer} | {i.name for i in graph.input}
    for node in _every_node_of(nodes):
        names.add(node.name)
        names.update(node.input)
        names.update(node.output)
    return names
