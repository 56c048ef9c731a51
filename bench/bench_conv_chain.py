"""A chain of 3x3 convolutions through oneDNN (both activation layouts) and the `c` host against
onnxruntime, all loaded in one process and timed in alternating blocks.

    python bench/bench_conv_chain.py                              # YOLOv5's head: 96 ch, 52x52
    python bench/bench_conv_chain.py --channels 64 --size 56 --no-silu
    python bench/bench_conv_chain.py --in-channels 48 --channels 192 --size 16 --width 40 \
        --layers 1                                     # ddddocr's recogniser, Conv_17

A model's layer-by-layer profile says which convolutions trail; this isolates one shape from
the rest of the model, so what is left is each engine's kernel at that shape: oneDNN's (in
both activation layouts) and the `c` host's against onnxruntime's (MLAS NCHWc). Prints each
engine's best block (ms per call) and its ratio to onnxruntime.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]
# The target of each runner: oneDNN in each activation layout, and the `c` host alone.
TARGETS = {
    **{layout: f"{{kind: composite, host: {{kind: c}}, accelerators: "
                f"[{{kind: onednn, activation_layout: {layout}}}]}}"
       for layout in ("channels_last", "any")},
    "c_host": "{kind: c}",
}


def chain(shape: list[int], channels: int, layers: int, silu: bool) -> onnx.ModelProto:
    """`layers` 3x3 convolutions to `channels` from an input of `shape` (NCHW)."""
    rng = np.random.default_rng(0)
    nodes, weights, x = [], [], "x"
    for i in range(layers):
        fan_in = shape[1] if i == 0 else channels
        weights += [
            numpy_helper.from_array(
                (rng.standard_normal((channels, fan_in, 3, 3)) * 0.05).astype(np.float32),
                f"w{i}"),
            numpy_helper.from_array((rng.standard_normal(channels) * 0.1).astype(np.float32),
                                    f"b{i}"),
        ]
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}",
                                      pads=[1, 1, 1, 1], kernel_shape=[3, 3]))
        x = f"c{i}"
        if silu:
            nodes += [helper.make_node("Sigmoid", [x], [f"s{i}"], name=f"sigmoid{i}"),
                      helper.make_node("Mul", [x, f"s{i}"], [f"y{i}"], name=f"mul{i}")]
            x = f"y{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, channels, *shape[2:]])],
        weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def build(folder: Path, model: onnx.ModelProto, shape: list[int]) -> dict[str, Path]:
    onnx.save(model, folder / "chain.onnx")
    targets = "\n".join(f"  {name}: {target}" for name, target in TARGETS.items())
    (folder / "BUILD.yaml").write_text(
        f"buildgen: 1\ntargets:\n{targets}\nmodels:\n  chain:\n    source: chain.onnx\n"
        f"    inputs: {{x: {shape}}}\n"
        f"    targets: [{', '.join(TARGETS)}]\n")
    subprocess.run([sys.executable, "-m", "buildgen", "build", "--manifest",
                    str(folder / "BUILD.yaml")], check=True, capture_output=True)
    return {name: folder / "build" / "chain" / name / "libchain.so" for name in TARGETS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channels", type=int, default=96)
    parser.add_argument("--in-channels", type=int, help="the first layer's (default: --channels)")
    parser.add_argument("--size", type=int, default=52, help="height (and width)")
    parser.add_argument("--width", type=int, help="default: --size")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--no-silu", dest="silu", action="store_false")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    import onnxruntime as ort

    from buildgen.runtime import CompiledModel

    shape = [1, args.in_channels or args.channels, args.size, args.width or args.size]
    model = chain(shape, args.channels, args.layers, args.silu)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        libraries = build(Path(tmp), model, shape)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(str(Path(tmp) / "chain.onnx"), options,
                                       providers=["CPUExecutionProvider"])
        runners = {"onnxruntime": lambda: session.run(None, {"x": x})}
        for name, path in libraries.items():
            compiled = CompiledModel(path, "chain")
            runners[f"buildgen {name}"] = lambda compiled=compiled: compiled(x)
        best = dict.fromkeys(runners, float("inf"))
        for _ in range(args.rounds):
            for name, run in runners.items():
                run()
                start = time.perf_counter()
                for _ in range(5):
                    run()
                best[name] = min(best[name], (time.perf_counter() - start) / 5)
    what = (f"{args.layers} x Conv {shape[1]}->{args.channels} 3x3 at {shape[2]}x{shape[3]}"
            f"{' + SiLU' if args.silu else ''}")
    print(f"{what}, 1 thread, best of {args.rounds} blocks")
    for name, seconds in best.items():
        print(f"  {name:24s} {seconds * 1e3:8.2f} ms  {seconds / best['onnxruntime']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
