"""Elementwise ops as C expressions. fusion.py strings them into one loop nest per group.

Every expression reads its arguments (loop-local variables or literals) possibly more
than once, so arguments are never expressions with side effects. NaN handling follows
the comparison form (`x > 0 ? x : 0`) rather than fmaxf, so a NaN input stays NaN, as in
onnxruntime. CastLike is the one kernel here: its second input only names a dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from buildgen.backends.c.cwriter import Code, float_literal
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import (
    ANY,
    FLOAT,
    NUMERIC,
    dtype_reason,
    float_attr,
    int_attr,
    present,
    str_attr,
)
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import DType, Graph, Node

Args = Sequence["str | None"]
Dtypes = Sequence["DType | None"]


def _f(node: Node, name: str, default: float) -> str:
    return float_literal(float_attr(node, name, default))


# The C math functions of these ops are their names in lower case: tanf, asinf, ...
_TRIG = ("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh")


def _math_call(op: str) -> Callable[[Node], str]:
    function = op.lower() + "f"
    return lambda n: function + "({a})"


# Float-only unary ops: templates over {a} and the node's float attributes.
_UNARY_FLOAT: dict[str, Callable[[Node], str]] = {
    "Relu": lambda n: "{a} > 0.0f ? {a} : 0.0f",
    "LeakyRelu": lambda n: "{a} >= 0.0f ? {a} : {a} * " + _f(n, "alpha", 0.01),
    "Sigmoid": lambda n: "bg_sigmoidf({a})",
    "Tanh": lambda n: "bg_tanhf({a})",
    "Erf": lambda n: "bg_erff({a})",
    "Exp": lambda n: "bg_expf({a})",
    "Log": lambda n: "logf({a})",
    "Sqrt": lambda n: "sqrtf({a})",
    "Reciprocal": lambda n: "1.0f / {a}",
    "Floor": lambda n: "floorf({a})",
    "Ceil": lambda n: "ceilf({a})",
    "Round": lambda n: "nearbyintf({a})",  # half to even in the default rounding mode
    "Sin": lambda n: "sinf({a})",
    "Cos": lambda n: "cosf({a})",
    "HardSigmoid": lambda n: (
        "bg_hardsigmoidf({a}, " + _f(n, "alpha", 0.2) + ", " + _f(n, "beta", 0.5) + ")"
    ),
    "HardSwish": lambda n: "bg_hardswishf({a})",
    # log(1 + e^x) without overflow for large x
    "Softplus": lambda n: "{a} > 0.0f ? {a} + log1pf(bg_expf(-{a})) : log1pf(bg_expf({a}))",
    "Softsign": lambda n: "{a} / (1.0f + fabsf({a}))",
    "Elu": lambda n: "{a} > 0.0f ? {a} : " + _f(n, "alpha", 1.0) + " * expm1f({a})",
    "Selu": lambda n: (
        "{a} > 0.0f ? "
        + _f(n, "gamma", 1.0507009873554805)
        + " * {a} : "
        + _f(n, "gamma", 1.0507009873554805)
        + " * ("
        + _f(n, "alpha", 1.6732631921768188)
        + " * expm1f({a}))"
    ),
    "Celu": lambda n: (
        "bg_fmaxf(0.0f, {a}) + bg_fminf(0.0f, "
        + _f(n, "alpha", 1.0)
        + " * expm1f({a} / "
        + _f(n, "alpha", 1.0)
        + "))"
    ),
    "Mish": lambda n: (
        "{a} * bg_tanhf({a} > 0.0f ? {a} + log1pf(bg_expf(-{a})) : log1pf(bg_expf({a})))"
    ),
    "ThresholdedRelu": lambda n: "{a} > " + _f(n, "alpha", 1.0) + " ? {a} : 0.0f",
    "Swish": lambda n: "{a} / (1.0f + bg_expf(-" + _f(n, "alpha", 1.0) + " * {a}))",
    "Shrink": lambda n: (
        "{a} < "
        + float_literal(-float_attr(n, "lambd", 0.5))
        + " ? {a} + "
        + _f(n, "bias", 0.0)
        + " : ({a} > "
        + _f(n, "lambd", 0.5)
        + " ? {a} - "
        + _f(n, "bias", 0.0)
        + " : 0.0f)"
    ),
    **{op: _math_call(op) for op in _TRIG},
}

_GELU = {
    "none": "0.5f * {a} * (1.0f + bg_erff({a} * 0.70710678f))",
    "tanh": "0.5f * {a} * (1.0f + bg_tanhf(0.7978846f * ({a} + 0.044715f * {a} * {a} * {a})))",
}

_ARITH = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/"}
_COMPARE = {"Equal": "==", "Less": "<", "Greater": ">", "LessOrEqual": "<=", "GreaterOrEqual": ">="}
_LOGIC = {"And": "&&", "Or": "||", "Xor": "!="}

# TensorProto data types that Cast may target, mapped to the IR's dtypes.
_CAST_TO = {1: DType.FLOAT32, 6: DType.INT32, 7: DType.INT64, 9: DType.BOOL}


def _fill(template: str, a: str) -> str:
    return template.replace("{a}", a)


def _expr_unary_float(node: Node, args: Args, dtypes: Dtypes) -> str:
    assert args[0] is not None
    if node.op == "Gelu":
        return _fill(_GELU[str_attr(node, "approximate", "none")], args[0])
    return _fill(_UNARY_FLOAT[node.op](node), args[0])


def _expr_numeric_unary(node: Node, args: Args, dtypes: Dtypes) -> str:
    a = args[0]
    assert a is not None
    is_float = dtypes[0] == DType.FLOAT32
    if node.op == "Neg":
        return f"-{a}"
    if node.op == "Abs":
        return f"fabsf({a})" if is_float else f"{a} < 0 ? -{a} : {a}"
    assert node.op == "Sign"
    zero = "0.0f" if is_float else "0"
    return f"({a} > {zero}) - ({a} < {zero})"


# Constant exponents (as the fused expression writes them: float literals, or integer ones
# for an integer exponent tensor) computed by multiplication.
_SMALL_POWERS = {
    "2.0f": "{a} * {a}", "2": "{a} * {a}",
    "3.0f": "{a} * {a} * {a}", "3": "{a} * {a} * {a}",
}


def _expr_binary(node: Node, args: Args, dtypes: Dtypes) -> str:
    a, b = args[0], args[1]
    assert a is not None and b is not None
    if node.op in _ARITH:
        return f"{a} {_ARITH[node.op]} {b}"
    if node.op in _COMPARE:
        return f"{a} {_COMPARE[node.op]} {b}"
    if node.op in _LOGIC:
        return f"({a} != 0) {_LOGIC[node.op]} ({b} != 0)"
    if node.op == "Mod":
        return _mod(node, a, b, dtypes[0] == DType.FLOAT32)
    if node.op == "Pow":
        # Squares and cubes as onnxruntime computes them (x*x, x*x*x): powf is a call, which
        # keeps the loop scalar (GPT-2's tanh GELU cubes every activation).
        if b in _SMALL_POWERS:
            return _SMALL_POWERS[b].format(a=a)
        exponent = b if dtypes[1] == DType.FLOAT32 else f"(float){b}"
        return f"powf({a}, {exponent})"
    assert node.op == "PRelu"
    return f"{a} < 0.0f ? {a} * {b} : {a}"


def _mod(node: Node, a: str, b: str, is_float: bool) -> str:
    """fmod=1: the remainder takes the dividend's sign (C's fmodf and %); fmod=0: the
    divisor's sign, as in Python."""
    if int_attr(node, "fmod", 0):
        return f"fmodf({a}, {b})" if is_float else f"{a} % {b}"
    if is_float:
        return f"bg_mod_floorf({a}, {b})"
    return f"({a} % {b} != 0 && (({a} % {b} < 0) != ({b} < 0)) ? {a} % {b} + {b} : {a} % {b})"


def _expr_variadic(node: Node, args: Args, dtypes: Dtypes) -> str:
    xs = [a for a in args if a is not None]
    is_float = dtypes[0] == DType.FLOAT32
    if node.op in ("Sum", "Mean"):
        total = " + ".join(xs)
        if node.op == "Sum":
            return total
        return f"({total}) / {float_literal(len(xs))}" if len(xs) > 1 else xs[0]
    fn, cmp = ("bg_fmaxf", ">") if node.op == "Max" else ("bg_fminf", "<")
    acc = xs[0]
    for x in xs[1:]:
        acc = f"{fn}({acc}, {x})" if is_float else f"({acc} {cmp} {x} ? {acc} : {x})"
    return acc


def _bound(node: Node, args: Args, index: int, attr: str) -> str | None:
    if len(args) > index and args[index] is not None:
        return args[index]
    if node.has_attr(attr):  # Clip before opset 11 takes its bounds as attributes
        return float_literal(float_attr(node, attr, 0.0))
    return None


def _expr_clip(node: Node, args: Args, dtypes: Dtypes) -> str:
    a = args[0]
    assert a is not None
    lo, hi = _bound(node, args, 1, "min"), _bound(node, args, 2, "max")
    # min(max(a, lo), hi) as onnxruntime computes it, keeping a NaN input NaN
    expr = a
    if lo is not None:
        expr = f"({a} < {lo} ? {lo} : {a})"
    if hi is not None:
        expr = f"({expr} > {hi} ? {hi} : {expr})"
    return expr


def _expr_where(node: Node, args: Args, dtypes: Dtypes) -> str:
    c, a, b = args
    return f"{c} ? {a} : {b}"


def _expr_not(node: Node, args: Args, dtypes: Dtypes) -> str:
    return f"!{args[0]}"


# IsNaN / IsInf test the bits (bg_kernels.h says why): the exponent all ones and the
# mantissa non-zero for NaN, zero for an infinity; the sign bit tells +inf from -inf.
_ISNAN = "(bg_f32_bits({a}) & 0x7fffffffu) > 0x7f800000u"
_ISINF = {  # (detect_positive, detect_negative) -> test
    (True, True): "(bg_f32_bits({a}) & 0x7fffffffu) == 0x7f800000u",
    (True, False): "bg_f32_bits({a}) == 0x7f800000u",
    (False, True): "bg_f32_bits({a}) == 0xff800000u",
    (False, False): "((void){a}, 0)",  # detects nothing; still reads {a} (no unused local)
}


def _expr_isnan_isinf(node: Node, args: Args, dtypes: Dtypes) -> str:
    assert args[0] is not None
    if node.op == "IsNaN":
        return _fill(_ISNAN, args[0])
    positive = int_attr(node, "detect_positive", 1) != 0
    negative = int_attr(node, "detect_negative", 1) != 0
    return _fill(_ISINF[(positive, negative)], args[0])


def _expr_cast(node: Node, args: Args, dtypes: Dtypes) -> str:
    target = _CAST_TO[int_attr(node, "to", 1)]
    a = args[0]
    if target == DType.BOOL:
        return f"{a} != 0"
    return f"({target.c_type}){a}"


def _lower_cast_like(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """CastLike(x, like): Cast to the dtype of `like`, whose values are never read (so it
    is a kernel of its own: in a fused group, `like` would be loaded per element)."""
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    target = ctx.dtype(y)
    value = "X[i] != 0" if target == DType.BOOL else f"({target.c_type})X[i]"
    code = Code()
    code.line(f"for (int64_t i = 0; i < {ctx.graph.type_of(y).numel}; ++i) Y[i] = {value};")
    params = (Param("X", x, ctx.dtype(x).c_type), Param("Y", y, target.c_type, True))
    return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)


# ---------------------------------------------------------------- checks


def _same_dtypes(node: Node, graph: Graph, allowed: frozenset[DType]) -> str | None:
    reason = dtype_reason(node, graph, allowed, node.inputs)
    if reason:
        return reason
    kinds = {graph.type_of(t).dtype for t in present(node.inputs)}
    if len(kinds) > 1:
        return f"{node.op} with mixed input dtypes {sorted(k.value for k in kinds)} not supported"
    return None


def _check(allowed: frozenset[DType]) -> Callable[[Node, Graph], str | None]:
    def check(node: Node, graph: Graph) -> str | None:
        return _same_dtypes(node, graph, allowed)

    return check


def _check_gelu(node: Node, graph: Graph) -> str | None:
    approximate = str_attr(node, "approximate", "none")
    if approximate not in _GELU:
        return f"Gelu with approximate='{approximate}' not supported"
    return _same_dtypes(node, graph, FLOAT)


def _check_pow(node: Node, graph: Graph) -> str | None:
    return dtype_reason(node, graph, FLOAT, node.inputs[:1]) or dtype_reason(
        node, graph, NUMERIC, node.inputs[1:]
    )


def _check_mod(node: Node, graph: Graph) -> str | None:
    float_mod = graph.type_of(node.inputs[0]).dtype == DType.FLOAT32
    if float_mod and not int_attr(node, "fmod", 0) and graph.opset < 28:
        return "Mod of float32 tensors with fmod=0 before opset 28 not supported (invalid)"
    return _same_dtypes(node, graph, NUMERIC)


def _check_where(node: Node, graph: Graph) -> str | None:
    return dtype_reason(node, graph, frozenset({DType.BOOL}), node.inputs[:1]) or _same_dtypes(
        Node(node.name, node.op, node.inputs[1:], node.outputs), graph, ANY
    )


def _check_cast(node: Node, graph: Graph) -> str | None:
    to = int_attr(node, "to", 1)
    if to not in _CAST_TO:
        return f"Cast to TensorProto data type {to} not supported"
    return dtype_reason(node, graph, ANY)


def _check_cast_like(node: Node, graph: Graph) -> str | None:
    return dtype_reason(node, graph, ANY, (node.inputs[0], *node.outputs))


def _check_clip(node: Node, graph: Graph) -> str | None:
    return _same_dtypes(node, graph, NUMERIC)


def _entries() -> tuple[OpEntry, ...]:
    float_unary = _check(FLOAT)
    entries = [
        OpEntry(op, "elementwise", float_unary, expr=_expr_unary_float) for op in _UNARY_FLOAT
    ]
    entries.append(OpEntry("Gelu", "elementwise", _check_gelu, expr=_expr_unary_float))
    for op in ("Neg", "Abs", "Sign"):
        entries.append(OpEntry(op, "elementwise", _check(NUMERIC), expr=_expr_numeric_unary))
    for op in (*_ARITH, *_COMPARE):
        entries.append(OpEntry(op, "elementwise", _check(NUMERIC), expr=_expr_binary))
    for op in _LOGIC:
        entries.append(
            OpEntry(op, "elementwise", _check(frozenset({DType.BOOL})), expr=_expr_binary)
        )
    entries.append(OpEntry("Pow", "elementwise", _check_pow, expr=_expr_binary))
    entries.append(OpEntry("Mod", "elementwise", _check_mod, expr=_expr_binary))
    entries.append(OpEntry("PRelu", "elementwise", _check(FLOAT), expr=_expr_binary))
    for op in ("Max", "Min", "Sum"):
        entries.append(OpEntry(op, "elementwise", _check(NUMERIC), expr=_expr_variadic))
    entries.append(OpEntry("Mean", "elementwise", _check(FLOAT), expr=_expr_variadic))
    entries.append(OpEntry("Clip", "elementwise", _check_clip, expr=_expr_clip))
    entries.append(OpEntry("Where", "elementwise", _check_where, expr=_expr_where))
    entries.append(OpEntry("Not", "elementwise", _check(frozenset({DType.BOOL})), expr=_expr_not))
    entries.append(OpEntry("Cast", "elementwise", _check_cast, expr=_expr_cast))
    entries.append(
        OpEntry("CastLike", "kernel", _check_cast_like, lower=_lower_cast_like, handles_empty=True)
    )
    for op in ("IsNaN", "IsInf"):
        entries.append(OpEntry(op, "elementwise", _check(FLOAT), expr=_expr_isnan_isinf))
    return tuple(entries)


ENTRIES = _entries()
