"""The `where:` vocabulary of pattern tables, evaluated on matched nodes.

    dtype: float32 | [float32, int64]    every tensor the nodes read or write
    <Op>:                                 each matched node of that op
      const_inputs: [1]                   those inputs are weights
      input_rank: {1: 2}                  input 1 has rank 2 (or one of a list)
      output_rank: {0: [2, 3]}
      same_shape: [0, 1]                  those inputs have one shape
      bias_of: MatMul                     the operand that is not the chain's tensor is a
                                          weight of shape [N], [1, N], ... where N is the
                                          last dim of the nearest earlier MatMul's output
      attrs: {axis: [-1, last, null]}     allowed values; last = the last axis of input 0;
                                          null = the attribute may be absent

Each check returns None or a short reason, which explanations show.
"""

from __future__ import annotations

from buildgen.ir import Graph, Node
from buildgen.targets.patterns import LAST_AXIS, AttrChoice, OpWhere, PatternSpec


def _tensor_dtypes(graph: Graph, nodes: tuple[Node, ...], allowed: tuple[str, ...]) -> str | None:
    for node in nodes:
        for name in (*node.inputs, *node.outputs):
            if name and graph.type_of(name).dtype.value not in allowed:
                dtype = graph.type_of(name).dtype.value
                return f"{node.op} tensor '{name}' is {dtype}, not {'/'.join(allowed)}"
    return None


def _input(node: Node, index: int) -> str | None:
    return node.inputs[index] if index < len(node.inputs) and node.inputs[index] else None


def _ranks(graph: Graph, node: Node, rules: tuple[tuple[int, tuple[int, ...]], ...],
           tensors: tuple[str, ...], what: str) -> str | None:
    for index, ranks in rules:
        name = tensors[index] if index < len(tensors) and tensors[index] else None
        if name is None:
            return f"{node.op} has no {what} {index}"
        rank = graph.type_of(name).rank
        if rank not in ranks:
            wanted = " or ".join(str(r) for r in ranks)
            return f"{node.op} {what} {index} has rank {rank}, not {wanted}"
    return None


def _attr_ok(value: object, choices: tuple[AttrChoice, ...], last_axis: int | None) -> bool:
    if value is None:
        return None in choices
    if isinstance(value, tuple):
        return any(isinstance(c, tuple) and tuple(c) == value for c in choices)
    if LAST_AXIS in choices and last_axis is not None and value in (-1, last_axis):
        return True
    return any(not isinstance(c, tuple) and c is not None and c == value for c in choices)


def _bias(graph: Graph, node: Node, owner: Node | None, chain_tensor: str | None) -> str | None:
    if owner is None or not owner.outputs:
        return f"{node.op} has no earlier op in the chain to be the bias of"
    others = [t for t in node.inputs if t and t != chain_tensor]
    if len(others) != 1 or not graph.is_weight(others[0]):
        return f"{node.op}: the other operand is not one weight"
    width = graph.type_of(owner.outputs[0]).shape[-1:] or (1,)
    shape = graph.type_of(others[0]).shape
    if not shape or shape[-1] != width[0] or any(d != 1 for d in shape[:-1]):
        return f"{node.op}: weight shape {list(shape)} is not a bias over {width[0]} columns"
    return None


def _op_problem(graph: Graph, rule: OpWhere, nodes: tuple[Node, ...], at: int) -> str | None:
    node = nodes[at]
    for index in rule.const_inputs:
        name = _input(node, index)
        if name is None or not graph.is_weight(name):
            return f"{node.op} input {index} is not a weight"
    problem = _ranks(graph, node, rule.input_rank, node.inputs, "input") or _ranks(
        graph, node, rule.output_rank, node.outputs, "output"
    )
    if problem:
        return problem
    if rule.same_shape:
        names = [_input(node, i) for i in rule.same_shape]
        if any(n is None for n in names):
            return f"{node.op} lacks one of inputs {list(rule.same_shape)}"
        if len({graph.type_of(n).shape for n in names if n}) > 1:
            return f"{node.op} inputs {list(rule.same_shape)} differ in shape"
    if rule.bias_of is not None:
        owner = next((n for n in reversed(nodes[:at]) if n.op == rule.bias_of), None)
        chain_tensor = nodes[at - 1].outputs[0] if at else None
        problem = _bias(graph, node, owner, chain_tensor)
        if problem:
            return problem
    first = _input(node, 0)
    last_axis = graph.type_of(first).rank - 1 if first else None
    for name, choices in rule.attrs:
        value = node.attr(name)
        if not _attr_ok(value, choices, last_axis):
            return f"{node.op} attribute {name}={value!r} is not one of {list(choices)}"
    return None


def where_problem(graph: Graph, spec: PatternSpec, nodes: tuple[Node, ...]) -> str | None:
    """None if the matched `nodes` satisfy the pattern's `where`, else the first reason."""
    if spec.dtypes:
        problem = _tensor_dtypes(graph, nodes, spec.dtypes)
        if problem:
            return problem
    for at, node in enumerate(nodes):
        rule = spec.where_for(node.op)
        if rule is not None:
            problem = _op_problem(graph, rule, nodes, at)
            if problem:
                return problem
    return None
