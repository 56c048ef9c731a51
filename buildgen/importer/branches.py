"""An If node becomes its branches and a select: Where(cond, then, else) per output.

A library's graph is straight-line code with static shapes, and the Ifs of shipped models
flatten: openwakeword's `hey_jarvis` scores a window with one network and runs a second,
"verifier" one only when the score passes a threshold; silero's VAD branches on its
sample-rate input, and inside each branch on values that are constant once the manifest
fixes the input shapes. One level of Ifs a pass (`flatten_ifs`), outermost first, the
branch nodes joining the graph under names of their own (`<if>/then/<name>`, so generated
code still shows where a kernel came from):

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
Loop and Scan stay refused, before shape inference.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, MutableSequence, Sequence, Set
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from buildgen.errors import BuildgenError, error
from buildgen.importer.fold import fold
from buildgen.importer.load import tensor_array
from buildgen.importer.names import unique_name
from buildgen.importer.order import topological_order
from buildgen.importer.shapes import TensorInfo, infer_model, input_types
from buildgen.importer.subgraphs import every_node, subgraphs

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

    def holds_name(self, name: str) -> bool:
        """Whether the node `name` came from one of its branches (nested Ifs' included):
        each was named `<if>/then/...` or `<if>/else/...` as it was inlined."""
        return name.startswith((f"{self.node}/then/", f"{self.node}/else/"))


def flatten_ifs(model: onnx.ModelProto, nodes: Sequence[onnx.NodeProto],
                runtime_inputs: Sequence[str], path: Path
                ) -> tuple[list[onnx.NodeProto], list[Select]]:
    """`nodes` (named) with every If flattened, in topological order, and the selects of
    those decided at run time. Loop and Scan are refused here, before shape inference,
    which would only report their results as of unknown shape."""
    flat = list(nodes)
    selects: list[Select] = []
    while any(_is_if(node) for node in flat):  # one level of Ifs a pass, outermost first
        flat = topological_order(flat, _defined(model.graph, runtime_inputs), path)
        ready, decided = _conditions(model, flat, runtime_inputs, selects, path)
        flat, inlined = _inline_ifs(flat, model.graph, path, ready, decided)
        selects += inlined
    _refuse_loops(flat, path)
    return topological_order(flat, _defined(model.graph, runtime_inputs), path), selects


def infer_flattened(model: onnx.ModelProto, nodes: Sequence[onnx.NodeProto],
                    selects: Sequence[Select], path: Path,
                    outputs: Sequence[str] | None = None) -> dict[str, TensorInfo]:
    """infer_model, saying so when the node it fails on came from a branch of an If
    decided at run time: both of its branches are compiled at the manifest's shapes."""
    try:
        return infer_model(model, nodes, path, outputs)
    except BuildgenError as exc:
        text = str(exc)
        culprit = _branch_named_in(text, selects)
        if culprit is None:
            raise
        raise error(
            text.removeprefix("error: ").strip(),
            hint=f"that node comes from a branch of If '{culprit.node}', whose condition "
                 f"('{culprit.condition}') is known only at run time: "
                 "both branches are compiled, at the shapes the manifest gives, and this "
                 "one is not valid at them. Export the model for the branch you run (or "
                 "with that condition a constant), or give the shapes that branch expects",
        ) from exc


def _branch_named_in(text: str, selects: Sequence[Select]) -> Select | None:
    """The innermost select one of whose branches holds the node ONNX's inference error
    names ("(op_type:Reshape, node name: <name>): ..."). The name is matched by prefix,
    not parsed out, since a model's node names can hold any character."""
    starts = [match.end() for match in re.finditer("node name: ", text)]
    holding = [select for select in selects
               if any(select.holds_name(text[start:]) for start in starts)]
    return max(holding, key=lambda select: len(select.node), default=None)


def _refuse_loops(nodes: Sequence[onnx.NodeProto], path: Path) -> None:
    for node in nodes:
        if node.op_type in ("Loop", "Scan") and node.domain in ("", "ai.onnx"):
            raise error(
                f"{path}: node '{node.name}' ({node.op_type}) repeats a subgraph, a number "
                "of times known only at run time: loops are not supported (control flow)",
                hint="cut the model before the loop (run it from your code), or export it "
                     "unrolled for the length you run")


def _is_if(node: onnx.NodeProto) -> bool:
    return node.op_type == "If" and node.domain in ("", "ai.onnx")


def _defined(graph: onnx.GraphProto, runtime_inputs: Sequence[str]) -> list[str]:
    return [*(t.name for t in graph.initializer), *runtime_inputs]


def _conditions(model: onnx.ModelProto, nodes: Sequence[onnx.NodeProto],
                runtime_inputs: Sequence[str], selects: Sequence[Select], path: Path
                ) -> tuple[set[str], dict[str, bool]]:
    """(The If conditions this pass can decide on: those that depend on no If's result,
    the value of each of them that folds to a constant at the manifest's shapes.) A
    constant one (a Shape compared with a number, a flag in the weights) is found by
    folding copies of the nodes it depends on alone: the branch not taken is then never
    inlined, nor inferred (it need not be valid at these shapes: silero's is not). One
    that depends on an If's result waits for a later pass, when that If is gone."""
    # `nodes` are in topological order: a node is plain when no subgraph is on its path.
    produced = {output for node in nodes for output in node.output}
    plain: dict[str, onnx.NodeProto] = {}
    for node in nodes:
        if next(subgraphs(node), None) is None and all(
                name in plain or name not in produced for name in node.input):
            plain.update((output, node) for output in node.output if output)
    conditions = [node.input[0] for node in nodes if _is_if(node) and node.input
                  and (node.input[0] in plain or node.input[0] not in produced)]
    needed: set[int] = set()
    pending = list(conditions)
    while pending:
        producer = plain.get(pending.pop())
        if producer is not None and id(producer) not in needed:
            needed.add(id(producer))
            pending.extend(producer.input)
    copies = []
    for node in nodes:
        if id(node) in needed:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copies.append(copy)
    inferred = infer_flattened(model, copies, selects, path, outputs=conditions)
    constants = {t.name: tensor_array(t, path) for t in model.graph.initializer}
    fold(copies, constants, input_types(model.graph, runtime_inputs), inferred,
         list(model.opset_import), path, {})
    return set(conditions), {name: bool(constants[name].reshape(-1)[0])
                             for name in conditions
                             if name in constants and constants[name].size == 1}


def _inline_ifs(nodes: Sequence[onnx.NodeProto], graph: onnx.GraphProto, path: Path,
                ready: Set[str], decided: Mapping[str, bool]
                ) -> tuple[list[onnx.NodeProto], list[Select]]:
    """`nodes` with each If whose condition is `ready` replaced by its branches and
    selects, or by the one branch its condition picks where `decided` holds the
    condition's value; the branches' initializers join `graph.initializer`. Other Ifs, and
    those inside the branches, stay (the next pass's): their conditions may fold once
    this pass's values are known."""
    taken = _all_names(graph, nodes)
    flat: list[onnx.NodeProto] = []
    selects: list[Select] = []
    for node in nodes:
        if not _is_if(node) or (node.input and node.input[0] not in ready):
            flat.append(node)
            continue
        branches = {a.name: a.g for a in node.attribute
                    if a.name in ("then_branch", "else_branch")}
        if len(branches) != 2 or len(node.input) != 1:
            raise error(f"{path}: node '{node.name}' (If) needs a condition, then_branch "
                        "and else_branch")
        picked = decided.get(node.input[0])
        labels = ("then", "else") if picked is None else ("then",) if picked else ("else",)
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
        if picked is None:
            flat += _selects(node, results["then"], results["else"], graph, taken, selects)
        else:  # the branch its constant condition picks
            chosen = results[labels[0]]
            flat += [onnx.helper.make_node("Identity", [chosen[k]], [output],
                                           name=unique_name(f"{node.name}/{k}", taken))
                     for k, output in enumerate(node.output) if output]
    return flat, selects


def _selects(node: onnx.NodeProto, then: Sequence[str], other: Sequence[str],
             graph: onnx.GraphProto, taken: set[str], selects: list[Select]
             ) -> list[onnx.NodeProto]:
    """The nodes that pick each of an If's results at run time: a Where per output, on
    the condition reshaped to a scalar (ONNX allows a one-element tensor of any rank)."""
    cond = unique_name(f"{node.name}/cond", taken)
    shape = unique_name(f"{node.name}/scalar", taken)
    graph.initializer.append(onnx.numpy_helper.from_array(np.zeros(0, np.int64), shape))
    made = [onnx.helper.make_node("Reshape", [node.input[0], shape], [cond], name=cond)]
    for k, output in enumerate(node.output):
        if output:
            name = node.name if len(node.output) == 1 else f"{node.name}/select_{k}"
            made.append(onnx.helper.make_node("Where", [cond, then[k], other[k]], [output],
                                              name=name))
            selects.append(Select(node.name, output, node.input[0], cond, then[k],
                                  other[k]))
    return made


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


def _check_fallible(select: Select, nodes: Sequence[onnx.NodeProto],
                   constants: Mapping[str, np.ndarray], path: Path) -> None:
    """Refuse a run-time select whose branches keep a node that can fail on its data:
    run on inputs meant for the other branch, it would fail a call ONNX's If completes.
    Gathers of constant indices (what Shape arithmetic folds into) cannot."""
    for node in nodes:
        if not select.holds_name(node.name) or node.domain not in ("", "ai.onnx"):
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
    for graph in subgraphs(copy):  # a nested If's branches read this branch's values too
        _rename_reads(graph, renamed)
    return copy


def _rename_reads(body: onnx.GraphProto, renamed: Mapping[str, str]) -> None:
    own = {t.name for t in body.initializer} | {o for n in body.node for o in n.output}
    outer = {k: v for k, v in renamed.items() if k not in own}
    for inner in body.node:
        inner.input[:] = [outer.get(name, name) for name in inner.input]
        for graph in subgraphs(inner):
            _rename_reads(graph, outer)
    for output in body.output:
        output.name = outer.get(output.name, output.name)


def _all_names(graph: onnx.GraphProto, nodes: Iterable[onnx.NodeProto]) -> set[str]:
    """Every name in use: the graph's weights and inputs, and what `nodes` (the graph's,
    flattened so far) and their subgraphs name."""
    names = {t.name for t in graph.initializer} | {i.name for i in graph.input}
    for node in every_node(nodes):
        names.add(node.name)
        names.update(node.input)
        names.update(node.output)
    return names
