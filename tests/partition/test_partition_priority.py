import pytest

from buildgen.errors import BuildgenError
from buildgen.ir import DType, Graph, Node, TensorType, Value
from buildgen.partition import Partition, Region, partition_graph
from buildgen.partition.boundaries import region_io
from buildgen.partition.serialize import dump_partition, load_partition
from buildgen.targets import resolve_target

F = TensorType(DType.FLOAT32, (2, 3))


def _graph(*nodes: Node) -> Graph:
    names = {t for n in nodes for t in (*n.inputs, *n.outputs)}
    produced = {t for n in nodes for t in n.outputs}
    inputs = tuple(Value(t, F) for t in sorted(names - produced))
    outputs = (Value(nodes[-1].outputs[0], F),)
    values = tuple(Value(t, F) for t in sorted(names))
    return Graph("g", inputs, outputs, nodes, values, (), 17, "g.onnx")


def test_every_node_lands_on_the_host_in_one_convex_region():
    g = _graph(Node("a", "Relu", ("x",), ("y",)), Node("b", "Exp", ("y",), ("z",)))
    p = partition_graph(g, resolve_target("cpu", "c"), "m", "digest")
    assert p.regions == (Region("r0", "c", ("a", "b"), "host fallback"),)


def test_an_unsupported_op_names_the_node_the_op_and_the_backends_considered():
    g = _graph(
        Node("/blk/MaxUnpool", "MaxUnpool", ("x",), ("y",)), Node("n2", "Relu", ("y",), ("z",))
    )
    with pytest.raises(BuildgenError) as info:
        partition_graph(g, resolve_target("cpu", "c"), "m", "digest")
    message = info.value.render()
    assert "'/blk/MaxUnpool'" in message and "op MaxUnpool" in message
    assert "considered c" in message and "c: op MaxUnpool not implemented" in message


def test_region_io_orders_inputs_by_first_use_and_splits_internal_tensors():
    g = _graph(
        Node("a", "Relu", ("x",), ("y",)),
        Node("b", "Add", ("y", "w"), ("z",)),
        Node("c", "Exp", ("z",), ("o",)),
    )
    first = Region("r0", "c", ("a", "b"))
    io = region_io(g, first)
    assert io.inputs == ("x", "w")
    assert io.outputs == ("z",)  # consumed by node c, outside the region
    assert io.internal == ("y",)


def test_partition_file_round_trips(tmp_path):
    p = Partition("m", "cpu", "abc", (Region("r0", "c", ("a", "b"), "host", ""),))
    (tmp_path / "p.json").write_text(dump_partition(p))
    assert load_partition(tmp_path / "p.json") == p


def test_partition_file_of_another_format_is_refused(tmp_path):
    (tmp_path / "p.json").write_text('{"format": "buildgen-partition", "version": 99}')
    with pytest.raises(BuildgenError, match="version 1"):
        load_partition(tmp_path / "p.json")
