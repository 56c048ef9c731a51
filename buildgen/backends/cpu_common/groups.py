"""A region as groups: an anchor op (Conv, MatMul, Softmax, ...) with the epilogue steps
fused after it, or a run of steps on their own.

The partitioner hands a backend regions that are concatenations of its pattern matches (or,
under the priority policy, runs of nodes its decline_reason accepted). The backend reads the
ops back from the graph: `group_region` walks the region in order, starts a group at each
anchor and appends each epilogue node to the group whose output it reads. A step whose
anchor went elsewhere (a pin, another region) becomes a group of its own, so any region of
accepted nodes can be generated.

`chain_reason` is decline_reason for epilogue ops: a node is taken only where it continues
a chain that starts at an anchor this backend takes, so a lone Relu stays with the host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from buildgen.backends.cpu_common.gelu import gelu_at
from buildgen.backends.cpu_common.shuffle import shuffle_at
from buildgen.backends.cpu_common.steps import (
    EPILOGUE_OPS,
    Binary,
    Gelu,
    Shuffle,
    Step,
    Swish,
    chain_candidates,
    step_for,
    step_nodes,
)
from buildgen.backends.cpu_common.swish import swish_at
from buildgen.errors import error
from buildgen.ir import Graph, Node

Reason = Callable[[Node, Graph], "str | None"]


@dataclass(frozen=True)
class ChainRules:
    """What one backend takes: its anchors and how long a fused chain may be."""

    kind: str
    anchors: frozenset[str]  # ops that start a group
    fusable: frozenset[str]  # anchors that take epilogue steps after them
    anchor_reason: Reason  # None when the backend runs this anchor node
    max_steps: int = 6
    step_reason: Callable[[Step, Graph], str | None] = lambda step, graph: None
    gelu: bool = False  # runs an exported erf GELU (five nodes) as one step
    swish: bool = False  # runs an exported SiLU, x * Sigmoid(x), as one step
    shuffle: bool = False  # runs a channel shuffle (Reshape, Transpose, Reshape) as a group
    # anchors that take no fused steps, after which a chain of them runs in the same
    # region as groups of their own (DenseNet's BatchNormalization and Relu after a Concat)
    steps_after: frozenset[str] = frozenset()
    # anchors whose output (with the steps fused after them), read twice, may start a group
    # of its own with a binary step on two run-time tensors (a squeeze-excite's x * s)
    binary_after: frozenset[str] = frozenset()

    def describe(self) -> str:
        return "/".join(sorted(self.fusable))


@dataclass(frozen=True)
class Group:
    anchor: Node | None  # None: the steps run on their own, reading `source`
    source: str  # what the first step reads when there is no anchor ("" otherwise)
    steps: tuple[Step, ...]

    @property
    def nodes(self) -> tuple[Node, ...]:
        head = (self.anchor,) if self.anchor is not None else ()
        return (*head, *(n for s in self.steps for n in step_nodes(s)))

    @property
    def output(self) -> str:
        return self.nodes[-1].outputs[0]

    @property
    def first(self) -> Node:
        return self.nodes[0]

    def reads(self, graph: Graph) -> tuple[str, ...]:
        """Non-weight tensors the group reads from outside itself, in first-use order."""
        names: list[str] = []
        if self.anchor is not None:
            names += [n for n in self.anchor.inputs if n]
        else:
            names.append(self.source)
        names += [s.other for s in self.steps if isinstance(s, Binary)]
        return tuple(n for n in dict.fromkeys(names) if not graph.is_weight(n))


def compound_at(node: Node, graph: Graph, rules: ChainRules) -> Gelu | Swish | Shuffle | None:
    """The multi-node step the backend runs as one that `node` belongs to (a GELU's or a
    SiLU's nodes, which no chain can declare: their input feeds two of them; a channel
    shuffle's Reshape, Transpose and Reshape)."""
    if rules.gelu and (gelu := gelu_at(graph, node)) is not None:
        return Gelu(gelu)
    if rules.swish and (swish := swish_at(graph, node)) is not None:
        return Swish(swish)
    if rules.shuffle and (shuffle := shuffle_at(graph, node)) is not None:
        return Shuffle(shuffle)
    return None


def _continues(node: Node, graph: Graph, rules: ChainRules, budget: int) -> bool:
    """Whether `node`'s output can carry a chain: it is a fusable anchor the backend takes,
    or a step of such a chain within `budget` steps."""
    return _reaches(node, graph, rules, budget, rules.fusable | rules.steps_after, starts=True)


def _reaches(node: Node, graph: Graph, rules: ChainRules, budget: int,
             roots: frozenset[str], starts: bool) -> bool:
    """Whether `node` is an anchor of `roots` the backend takes, or a step fused after one
    within `budget` steps (a GELU or SiLU counting as one); with `starts`, also a step
    that starts a chain of its own after a steps_after anchor."""
    if node.op in roots:
        return rules.anchor_reason(node, graph) is None
    if budget <= 0 or node.op not in EPILOGUE_OPS:
        return False
    if any(_reaches(p, graph, rules, budget - 1, roots, starts)
           for p in _step_producers(node, graph, rules)):
        return True
    return starts and _starts_after_anchor(node, graph, rules)


def _step_producers(node: Node, graph: Graph, rules: ChainRules) -> Iterator[Node]:
    """The producers of the inputs step `node` could continue a chain from. A GELU or SiLU
    ending at `node` continues from its source: a residual Add after a Conv's SiLU
    (YOLOv5's bottlenecks) fuses as the Conv's next post-op, although the SiLU's input,
    read twice, is no chain candidate."""
    compound = compound_at(node, graph, rules)
    if compound is not None and not isinstance(compound, Shuffle) \
            and compound.match.output == node.outputs[0]:
        producer = graph.producer(compound.match.source)
        if producer is not None:
            yield producer
    for chain in chain_candidates(node, graph):
        step = step_for(node, graph, chain)
        producer = graph.producer(chain)
        if not isinstance(step, str) and producer is not None \
                and rules.step_reason(step, graph) is None:
            yield producer


def _starts_after_anchor(node: Node, graph: Graph, rules: ChainRules) -> bool:
    """Whether step `node` runs as a group of its own on what a steps_after anchor computes."""
    source = _source_after_anchor(node, graph, rules)
    if source is None:
        return False
    step = step_for(node, graph, source)
    return not isinstance(step, str) and rules.step_reason(step, graph) is None


def chain_reason(node: Node, graph: Graph, rules: ChainRules) -> str | None:
    """decline_reason of a backend whose nodes are anchors and the chains fused after them."""
    if node.op in rules.anchors:
        return rules.anchor_reason(node, graph)
    if compound_at(node, graph, rules) is not None:
        return None  # fused after its anchor, or one eltwise of its own
    if node.op not in EPILOGUE_OPS:
        return f"no {rules.kind} pattern covers {node.op}"
    problems = []
    for chain in chain_candidates(node, graph):
        step = step_for(node, graph, chain)
        if isinstance(step, str):
            problems.append(step)
            continue
        extra = rules.step_reason(step, graph)
        producer = graph.producer(chain)
        if extra:
            problems.append(extra)
        elif producer is not None and _continues(producer, graph, rules, rules.max_steps - 1):
            return None
    if _starts_after_anchor(node, graph, rules):
        return None
    detail = "; ".join(dict.fromkeys(problems)) or "its input does not come from one"
    return f"{node.op} runs on {rules.kind} only fused after {rules.describe()} ({detail})"


def _source_after_anchor(node: Node, graph: Graph, rules: ChainRules) -> str | None:
    """The input of step `node` a chain of steps may start from, as groups of their own:
    what an anchor of rules.steps_after (one the backend takes) computes, or what an
    anchor of rules.binary_after computes, with the steps fused after it, when `node`
    is a binary step whose other operand is a run-time tensor too."""
    for source in dict.fromkeys(n for n in node.inputs if n and not graph.is_weight(n)):
        producer = graph.producer(source)
        if producer is None:
            continue
        if producer.op in rules.steps_after and rules.anchor_reason(producer, graph) is None:
            return source
        step = step_for(node, graph, source)
        if (isinstance(step, Binary) and not graph.is_weight(step.other) and _reaches(
                producer, graph, rules, rules.max_steps, rules.binary_after, starts=False)):
            return source
    return None


def chain_problem(graph: Graph, nodes: Sequence[Node], rules: ChainRules) -> str | None:
    """None if `nodes` (an anchor, then steps each reading the previous node's first output,
    as a pattern match is) is a chain the backend fuses, else the first reason it is not.
    Steps may also start the chain where an anchor of rules.steps_after computes their
    input."""
    first = nodes[0]
    compound = compound_at(first, graph, rules) if first.op not in rules.anchors else None
    if compound is not None and compound.match.nodes == tuple(nodes):
        return None
    if compound is not None and not isinstance(compound, Shuffle) \
            and tuple(nodes[:len(compound.match.nodes)]) == compound.match.nodes:
        # steps after a GELU or SiLU: the anchor computing its input takes them all
        producer = graph.producer(compound.match.source)
        if producer is None or not _continues(producer, graph, rules, rules.max_steps - 1):
            return (f"steps after {first.op} run on {rules.kind} only where it is fused after "
                    f"{rules.describe()}")
        i, source = 0, compound.match.source
    elif first.op in rules.anchors:
        reason = rules.anchor_reason(first, graph)
        if reason is not None:
            return reason
        if len(nodes) > 1 and first.op not in rules.fusable | rules.steps_after:
            return f"{first.op} takes no fused steps on {rules.kind}"
        i, source = 1, first.outputs[0]
    else:
        after = _source_after_anchor(first, graph, rules)
        if after is None:
            return f"{first.op} does not start a {rules.kind} group"
        i, source = 0, after
    steps = 0
    while i < len(nodes):
        compound = compound_at(nodes[i], graph, rules)
        if isinstance(compound, Shuffle):
            return "a channel shuffle runs as a group of its own, fused into nothing"
        if compound is not None and tuple(nodes[i:i + len(compound.match.nodes)]) \
                == compound.match.nodes and compound.match.source == source:
            i += len(compound.match.nodes)  # a GELU or SiLU of the chain's value: one step
        else:
            step = step_for(nodes[i], graph, source)
            if isinstance(step, str):
                return step
            reason = rules.step_reason(step, graph)
            if reason is not None:
                return reason
            i += 1
        source = nodes[i - 1].outputs[0]
        steps += 1
    if steps > rules.max_steps:
        return f"more than {rules.max_steps} fused steps"
    return None


@dataclass
class _Building:
    anchor: Node | None
    source: str = ""
    steps: list[Step] = field(default_factory=list)

    def frozen(self) -> Group:
        return Group(self.anchor, self.source, tuple(self.steps))

    @property
    def last(self) -> Node:
        if self.steps:
            return step_nodes(self.steps[-1])[-1]
        assert self.anchor is not None
        return self.anchor


def _standalone(node: Node, graph: Graph, rules: ChainRules) -> _Building:
    problems = []
    for source in dict.fromkeys(n for n in node.inputs if n and not graph.is_weight(n)):
        step = step_for(node, graph, source)
        reason = step if isinstance(step, str) else rules.step_reason(step, graph)
        if reason is None and not isinstance(step, str):
            return _Building(None, source, [step])
        problems.append(reason or "")
    detail = "; ".join(p for p in dict.fromkeys(problems) if p) or "no tensor input"
    raise error(f"{rules.kind} backend cannot run node '{node.name}' ({node.op}): {detail}")


def _place_compound(step: Gelu | Swish | Shuffle, graph: Graph, order: dict[str, int],
                    groups: list[_Building], open_tails: dict[str, int], rules: ChainRules
                    ) -> None:
    """A GELU or SiLU joins the group computing its input when nothing else reads that
    input, else it is a group of its own; a channel shuffle is always one of its own."""
    match = step.match
    missing = [n.name for n in match.nodes if n.name not in order]
    if missing:
        what = {Gelu: "GELU", Swish: "SiLU", Shuffle: "channel shuffle"}[type(step)]
        raise error(f"{rules.kind} backend: region holds part of a {what} without {missing}")
    if isinstance(step, Shuffle):  # no tail: what reads its output is no post-op of it
        groups.append(_Building(None, match.source, [step]))
        return
    readers = {n.name for n in graph.consumers(match.source)}
    inside = {n.name for n in match.nodes}
    index = open_tails.get(match.source)
    if (index is not None and readers <= inside and match.source not in graph.output_names
            and len(groups[index].steps) < rules.max_steps):
        groups[index].steps.append(step)
        del open_tails[match.source]
        open_tails[match.output] = index
        return
    groups.append(_Building(None, match.source, [step]))
    open_tails[match.output] = len(groups) - 1


def group_region(graph: Graph, nodes: Sequence[str], rules: ChainRules) -> list[Group]:
    """The region's nodes as groups, in an order that runs every group after the groups it
    reads: the order of each group's last node."""
    order = {name: i for i, name in enumerate(nodes)}
    groups: list[_Building] = []
    open_tails: dict[str, int] = {}  # a group's current output tensor -> the group
    taken: set[str] = set()  # nodes already placed with an earlier one (a GELU's, a SiLU's)
    for name in nodes:
        node = graph.node(name)
        if name in taken:
            continue
        compound = compound_at(node, graph, rules)
        if compound is not None:
            taken.update(n.name for n in compound.match.nodes)
            _place_compound(compound, graph, order, groups, open_tails, rules)
            continue
        if node.op in rules.anchors:
            reason = rules.anchor_reason(node, graph)
            if reason is not None:
                raise error(f"{rules.kind} backend cannot run node '{name}' ({node.op}): {reason}")
            groups.append(_Building(node))
            if node.op in rules.fusable:
                open_tails[node.outputs[0]] = len(groups) - 1
            continue
        # Continue the chain whose last node ran latest: the other operands are then ready.
        tails = [t for t in chain_candidates(node, graph) if t in open_tails]
        tails.sort(key=lambda t: -order[groups[open_tails[t]].last.name])
        for tail in tails:
            building = groups[open_tails[tail]]
            step = step_for(node, graph, tail)
            if isinstance(step, str) or rules.step_reason(step, graph):
                continue
            if len(building.steps) >= rules.max_steps:
                continue
            building.steps.append(step)
            index = open_tails.pop(tail)
            open_tails[node.outputs[0]] = index
            break
        else:
            groups.append(_standalone(node, graph, rules))
            open_tails[node.outputs[0]] = len(groups) - 1
    frozen = [g.frozen() for g in groups]
    return sorted(frozen, key=lambda g: order[g.nodes[-1].name])
