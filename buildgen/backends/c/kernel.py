"""What lowering a region produces: kernels (static C functions) and views (aliases).

A Kernel is self-contained C: its parameters are pointers bound to graph tensors (or to
a workspace in scratch), its body uses only constants. The module writer (module.py)
decides where every bound tensor lives and calls the kernels in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from buildgen.errors import error
from buildgen.ir import DType, Graph, Node

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Param:
    name: str  # the parameter's name inside the kernel, e.g. "X"
    tensor: str  # the graph tensor bound to it ("" for the workspace or a packed operand)
    ctype: str  # element type: "float", "int64_t", "uint8_t"; "void" for the workspace
    is_output: bool = False
    packed: bool = False  # bound to the kernel's Packed of this name (in env->state)
    pool: bool = False  # bound to the model instance's thread pool (NULL: one thread)

    def declaration(self) -> str:
        if self.pool:
            return f"bg_threadpool *{self.name}"
        if self.packed:
            return f"const void *restrict {self.name}"
        if not self.tensor:
            return f"void *restrict {self.name}"
        const = "" if self.is_output else "const "
        return f"{const}{self.ctype} *restrict {self.name}"


# The parameter of a kernel that calls a bg_kernels.h function taking the thread pool
# (bg_sgemm, bg_conv2d, ...): the function splits its work over the instance's threads.
POOL = Param("pool", "", "bg_threadpool", pool=True)


@dataclass(frozen=True)
class Packed:
    """A constant operand (GEMM weights, conv filters) packed once, at create, into the kernel
    library's micro-panel layout, so that no call re-packs it. The module keeps every packed
    operand in one block at env->state; the kernel reads this one through Param `param`."""

    param: str  # the kernel's parameter, e.g. "Bp"
    tensor: str  # the weight it is packed from
    nbytes: int  # its size (workspace.py mirrors the kernel library's)
    # C statement that packs it: "{src}" is the weight (const float *), "{dst}" where it goes,
    # "{params}" the address of the kernel's struct, "{src1}", "{src2}"... the `sources`
    pack: str
    check: str  # C expression of the size the kernel library wants; create() compares
    sources: tuple[str, ...] = ()  # further weights it is computed from


@dataclass(frozen=True)
class Kernel:
    stem: str  # what it computes, e.g. "conv_relu"; the function is k<n>_<stem>
    nodes: tuple[Node, ...]  # the ONNX nodes it implements, in graph order
    params: tuple[Param, ...]
    body: tuple[str, ...]  # C lines, already indented one level
    workspace: int = 0  # bytes of scratch it needs during the call (a Param named "ws")
    # A constant parameter struct for the kernel library (bg_conv2d_params, ...): its C type
    # and designated-initializer fields. module.py defines it at file scope, where create()
    # can see it too, and the body reaches it through `p`.
    struct: tuple[str, tuple[tuple[str, int], ...]] | None = None
    # C expression for the workspace the kernel library really wants ("{params}" stands for
    # the address of `struct`); create() checks it against `workspace`.
    workspace_check: str = ""
    fallible: bool = False  # returns int: non-zero means `error_message`
    error_message: str = ""
    packed: tuple[Packed, ...] = ()  # constant operands packed at create
    # > 0: the body's outermost loop runs over rows [lo, hi) of [0, split), each row
    # independent of the others, and split.py shares the rows among the instance's threads
    # in blocks of at least `split_grain` (the kernel then takes the pool: POOL in params).
    split: int = 0
    split_grain: int = 1

    @property
    def uses_pool(self) -> bool:
        return any(p.pool for p in self.params)

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(p.tensor for p in self.params if p.tensor and not p.is_output)

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(p.tensor for p in self.params if p.tensor and p.is_output)


@dataclass(frozen=True)
class View:
    """`output` is `source` reinterpreted (Reshape, Flatten, Squeeze, ...): no code, no copy."""

    node: Node
    source: str
    output: str


Step = Kernel | View


@dataclass(frozen=True)
class LowerContext:
    """What an emitter may look at: the graph, and the values of constant tensors."""

    graph: Graph
    weights: Mapping[str, np.ndarray] | None = None
    _cache: dict[str, tuple[float | int, ...]] = field(default_factory=dict, compare=False)

    def dtype(self, tensor: str) -> DType:
        return self.graph.type_of(tensor).dtype

    def shape(self, tensor: str) -> tuple[int, ...]:
        return self.graph.type_of(tensor).shape

    def known(self, tensor: str) -> bool:
        """True when `tensor` is a weight whose values were handed to the backend."""
        return bool(tensor) and self.graph.is_weight(tensor) and self.weights is not None

    def values(self, tensor: str, node: Node) -> tuple[float | int, ...]:
        """The flattened values of a constant input (shape, axes, pads, ...) at codegen time."""
        if tensor in self._cache:
            return self._cache[tensor]
        if not self.graph.is_weight(tensor):
            raise error(f"{node.op} '{node.name}': input '{tensor}' must be a constant")
        if self.weights is None or tensor not in self.weights:
            raise error(
                f"{node.op} '{node.name}' needs the values of weight '{tensor}' at code "
                "generation time, but no weights were passed to the c backend",
                hint="call CBackend.generate(..., weights=load_weights(graph, path))",
            )
        flat = self.weights[tensor].reshape(-1).tolist()
        result = tuple(bool(v) if isinstance(v, bool) else v for v in flat)
        self._cache[tensor] = result
        return result

    def ints(self, tensor: str, node: Node) -> tuple[int, ...]:
        return tuple(int(v) for v in self.values(tensor, node))
