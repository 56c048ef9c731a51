"""The cuda module and the executor's device side, as text (no nvcc, no GPU): what each
region does, which nodes fuse, where the copies and synchronizations go; model.c is C."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from cuda_helpers import MIXED, example_models

from buildgen.backends.cuda import CudaBackend
from buildgen.backends.cuda_toolchain import find_toolkit
from buildgen.codegen.executor import generate_executor
from buildgen.importer import import_model
from buildgen.ir import DType, Graph, Node, TensorType, Value
from buildgen.ir.serialize import load_weights
from buildgen.partition.model import Partition, Region
from buildgen.partition.transfers import plan_transfers
from buildgen.resources import include_dir

MODELS = example_models()


def _imported(model: str):
    source, inputs = MODELS[model]
    result = import_model(source, {k: tuple(v) for k, v in inputs.items()})
    return result.graph, load_weights(result.graph, result.weights_blob)


def _split(graph: Graph, host: set[str]) -> Partition:
    regions: list[Region] = []
    for node in graph.nodes:
        kind = "c" if node.name in host else "cuda"
        if regions and regions[-1].target == kind:
            last = regions[-1]
            regions[-1] = Region(last.id, kind, (*last.nodes, node.name))
        else:
            regions.append(Region(f"r{len(regions)}", kind, (node.name,)))
    return Partition("m", "gpu", "", tuple(regions), plan_transfers(graph, regions))


@pytest.mark.parametrize("model", sorted(MODELS))
def test_one_readable_module_per_model(model: str) -> None:
    graph, weights = _imported(model)
    partition = _split(graph, set())
    text = CudaBackend().generate(model, graph, partition, {}, weights).text
    assert text == CudaBackend().generate(model, graph, partition, {}, weights).text
    assert f'extern "C" int {model}__cuda_r0(bg_env *env' in text
    assert f'extern "C" const size_t {model}__cuda_scratch_bytes = ' in text
    for node in graph.nodes:  # every node is named in its region's comment
        assert f"{node.op} '{node.name}'" in text
    assert "cudaDeviceSynchronize" not in text and "cudaStreamSynchronize" not in text


def test_elementwise_chains_fuse_into_one_kernel_with_constants_inlined() -> None:
    graph, weights = _imported("mlp")
    text = CudaBackend().generate("mlp", graph, _split(graph, set()), {}, weights).text
    kernel = re.search(r"__global__ void (k\d+_div_erf_add_mul)\((.*)\)", text)
    assert kernel is not None
    # the erf GELU reads the GEMM's output once and writes one tensor
    assert kernel[2].count("const float *") == 1 and kernel[2].count("float *__restrict__ o") == 1
    assert "1.4142135381698608f" in text and "erff(" in text
    assert text.count(f"{kernel[1]}<<<") == 1


def test_conv_batchnorm_relu_and_views() -> None:
    graph, weights = _imported("cnn")
    text = CudaBackend().generate("cnn", graph, _split(graph, set()), {}, weights).text
    assert text.count("bg_conv2d<<<") == 4 and text.count("bg_pool2d<<<") == 2
    assert re.search(r"__global__ void k\d+_batchnormalization_relu\(", text)
    assert "rsqrtf(" in text and "bg_reduce<<<" in text  # GlobalAveragePool
    # Flatten feeds the Gemm as an alias of the pooled tensor: no copy
    assert "cudaMemcpyAsync" not in text


def test_unsupported_nodes_are_declined_with_a_reason() -> None:
    f32 = TensorType(DType.FLOAT32, (2, 3))
    i64 = TensorType(DType.INT64, (2, 3))
    graph = Graph(
        "g", (Value("x", f32), Value("n", i64)), (Value("y", f32),),
        (Node("t", "TopK", ("x",), ("y",)), Node("a", "Add", ("n", "n"), ("m",))),
        (Value("x", f32), Value("n", i64), Value("y", f32), Value("m", i64)), (), 17,
    )
    backend = CudaBackend()
    assert "TopK not implemented" in (backend.decline_reason(graph.nodes[0], graph) or "")
    assert "dtype int64" in (backend.decline_reason(graph.nodes[1], graph) or "")


def test_the_executor_copies_at_the_crossings_and_synchronizes_before_host_work(
    tmp_path: Path,
) -> None:
    _, model, pins = MIXED
    graph, _ = _imported(model)
    partition = _split(graph, {name for name, _ in pins})
    sources = generate_executor("mixed", graph, partition, "w.bin", 64)
    c = sources.source_c
    run = c[c.index("int mixed_run("):c.index("void mixed_destroy(")]
    order = [run.index(s) for s in (
        "copying 'x' to the device before region r0", "mixed__cuda_r0(",
        "copying '/Relu_output_0' to the host before region r1",
        '"before region r1"', "mixed__c_r1(",
        "copying '/fc2/Gemm_output_0' to the device before region r2", "mixed__cuda_r2(",
        "copying 'y' to the host after the last region", '"at the end of run"',
    )]
    assert order == sorted(order)
    assert run.count("cudaStreamSynchronize(m->stream)") == 2
    assert "cudaGetDeviceCount" in c and "cudaStreamCreateWithFlags" in c
    assert sources.device_boundary_bytes > 0
    assert "mixed_device_arena_bytes(void)" in sources.header
    # model.c is plain C: the host's compiler takes it with the runtime's C API
    (tmp_path / "model.c").write_text(c)
    (tmp_path / "mixed.h").write_text(sources.header)
    done = subprocess.run(
        ["cc", "-std=c11", "-Wall", "-Werror", "-fsyntax-only", f"-I{include_dir()}",
         f"-I{tmp_path}", f"-I{find_toolkit(None).include}", str(tmp_path / "model.c")],
        capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_host_only_executor_has_no_device_side() -> None:
    graph, _ = _imported("mlp")
    partition = Partition("m", "cpu", "", (Region("r0", "c", tuple(n.name for n in graph.nodes)),))
    sources = generate_executor("mlp", graph, partition, "w.bin", 64)
    assert "cuda" not in sources.source_c and "device_arena" not in sources.header
