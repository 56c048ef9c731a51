"""Window geometry of Conv and pooling nodes: strides, dilations and pads per spatial axis,
with ONNX's auto_pad resolved against the (static) output shape."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.ir import AttrValue, Node


def _ints(value: AttrValue | None, default: Sequence[int]) -> tuple[int, ...]:
    if value is None:
        return tuple(default)
    assert isinstance(value, tuple)
    return tuple(int(v) for v in value)


@dataclass(frozen=True)
class Window:
    """Per spatial axis (D, H, W order) geometry; `size`/`out` are the input/output extents."""

    size: tuple[int, ...]
    out: tuple[int, ...]
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.size)

    @property
    def is_pointwise(self) -> bool:
        """A 1x1 window with unit strides and no padding: the input is already the im2col."""
        return (
            all(k == 1 for k in self.kernel)
            and all(s == 1 for s in self.strides)
            and not any(self.pads_begin)
            and not any(self.pads_end)
        )

    def implied_pads_end(self) -> tuple[int, ...]:
        """The end pads that make the output extent exactly `out` (covers ceil_mode)."""
        return tuple(
            (o - 1) * s + (k - 1) * d + 1 - n - b
            for o, s, k, d, n, b in zip(
                self.out, self.strides, self.kernel, self.dilations, self.size, self.pads_begin,
                strict=True,
            )
        )


def window(node: Node, x_shape: Sequence[int], y_shape: Sequence[int], kernel: Sequence[int]
           ) -> Window:
    """The geometry of `node` reading `x_shape` (N, C, spatial...) into `y_shape`."""
    rank = len(x_shape) - 2
    strides = _ints(node.attr("strides"), (1,) * rank)
    dilations = _ints(node.attr("dilations"), (1,) * rank)
    pads = list(_ints(node.attr("pads"), (0,) * (2 * rank)))
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad == "VALID":
        pads = [0] * (2 * rank)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        for d in range(rank):
            span = (kernel[d] - 1) * dilations[d] + 1
            total = max(0, (y_shape[2 + d] - 1) * strides[d] + span - x_shape[2 + d])
            small, big = total // 2, total - total // 2
            pads[d], pads[rank + d] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    return Window(
        size=tuple(x_shape[2:]),
        out=tuple(y_shape[2:]),
        kernel=tuple(kernel),
        strides=strides,
        dilations=dilations,
        pads_begin=tuple(pads[:rank]),
        pads_end=tuple(pads[rank:]),
    )
