"""Who writes and who reads each value of a list of ONNX nodes: what the import's rewrites
(canonical.py, activations.py) look up around a node before changing it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import onnx


class NodeIndex:
    def __init__(self, nodes: Sequence[onnx.NodeProto], outputs: Iterable[str] = ()):
        self.producer = {out: n for n in nodes for out in n.output}
        self.readers: dict[str, list[onnx.NodeProto]] = {}
        for n in nodes:
            for name in n.input:
                self.readers.setdefault(name, []).append(n)
        self.outputs = set(outputs)  # the graph's outputs: read from outside

    def only_reader(self, value: str) -> onnx.NodeProto | None:
        """The one node reading `value`, if nothing else (nor the graph's caller) does."""
        readers = self.readers.get(value, [])
        if len(readers) != 1 or value in self.outputs:
            return None
        return readers[0]
