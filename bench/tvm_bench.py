"""Apache TVM as a peer in bench_cpu.py, run in a subprocess (TVM reads its thread count,
TVM_NUM_THREADS, when its runtime starts, and `import tvm` takes a second).

    python bench/tvm_bench.py compile MODEL.onnx OUT.so SHAPES_JSON
    TVM_NUM_THREADS=1 python bench/tvm_bench.py time OUT.so SHAPES_JSON RUNS OUTPUTS.npz

compile: the Relax ONNX frontend, target llvm for this CPU (untuned: no MetaSchedule),
cpu_generic's default pipeline (it fuses ops; without it nothing is). time: the VM's own
time_evaluator (no Python per call); prints "median_ms X", and saves the outputs for the
correctness check. Needs `pip install apache-tvm apache-tvm-ffi==0.1.14.post1`.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np


def llvm_cpu() -> str:
    """The CPU name LLVM uses for this machine (TVM wants it explicitly, not 'native')."""
    try:
        out = subprocess.run(["llc", "--version"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if "Host CPU:" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import tvm

    return str(tvm.target.codegen.llvm_get_system_cpu())


def compile_model(onnx_path: str, out: str, shapes: dict[str, list[int]]) -> None:
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    mod = from_onnx(onnx.load(onnx_path), shape_dict=shapes, keep_params_in_input=False)
    target = tvm.target.Target({"kind": "llvm", "mcpu": llvm_cpu()})
    pipeline = relax.backend.cpu_generic.get_default_pipeline(target)
    with tvm.transform.PassContext(opt_level=3):
        executable = tvm.compile(mod, target, relax_pipeline=pipeline)
    executable.export_library(out)


def time_model(library: str, shapes: dict[str, list[int]], runs: int, outputs: str) -> None:
    import tvm
    from tvm import relax

    device = tvm.cpu()
    vm = relax.VirtualMachine(tvm.runtime.load_module(library), device)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes.values()]
    inputs = [tvm.runtime.tensor(a, device) for a in arrays]
    result = vm["main"](*inputs)
    results = [result] if hasattr(result, "numpy") else list(result)  # one tensor or a tuple
    np.savez(outputs, *[np.asarray(r.numpy()) for r in results],
             **{f"input_{i}": a for i, a in enumerate(arrays)})
    timer = vm.time_evaluator("main", device, number=1, repeat=runs, min_repeat_ms=0)
    print(f"median_ms {timer(*inputs).median * 1e3:.4f}")


def main(argv: list[str]) -> int:
    command, args = argv[0], argv[1:]
    if command == "compile":
        compile_model(args[0], args[1], json.loads(args[2]))
    elif command == "time":
        time_model(args[0], json.loads(args[1]), int(args[2]), args[3])
    else:
        print(f"tvm_bench: unknown command {command!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
