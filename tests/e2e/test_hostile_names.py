"""A model is data: hostile names in an ONNX file never choose code.

Every name below passes `onnx.checker`. Each is used as a graph input, an intermediate
tensor, a graph output, a node name and the graph name, and the model's file and folder
carry some too. The model is built for the `c` host and the composite CPU target (and,
where nvcc exists, compiled for the CUDA device target): every build must succeed, no
payload may run (the constructor payload would create MARKER; an injected `#error` would
stop the compile), the library's name tables must hold the names byte for byte, the outputs
must match onnxruntime, and every generated text file must keep the names inert
(JSON parses back to them, Markdown shows them in code spans, HTML escapes them).

Names that change how text reads (control characters, bidi overrides, line separators,
huge names) are refused at import with the model, the name and the character.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

import buildgen.runtime

MARKER = "PWNED"
ACCEPTED = {
    "comment_end":
        f'x*/ __attribute__((constructor)) static void f(void){{creat("{MARKER}",0644);}} /*',
    "error_directive": "*/ #error injected /*",
    "string_break": '"); #error injected ("',
    "trailing_backslash": "name\\",
    "trigraph": "q??/",
    "shell": f"$x ${{y}} $(touch {MARKER}) `touch {MARKER}`; rm -rf /",
    "preprocessor": "#define int float",
    "markup": "<script>alert(1)</script> | [a](javascript:x) `b` &amp;",
    "quotes": "it's \"quoted\"",
    "unicode": "caf\u00e9 \U0001f600 \u4e2d",
    "ten_kb": "*/#" * 3400,
}
REFUSED = {
    "newline": ("x\n#error injected", "U+000A"),
    "nul": ("a\0b", "U+0000"),
    "escape": ("\x1b[2Jx", "U+001B"),
    "bidi_override": ("admin\u202e\u2066// check\u2069\u2066", "U+202E"),
    "line_separator": ("a\u2028b", "U+2028"),
    "huge": ("n" * 20000, "20000 characters"),
}
CPU = {"kind": "composite", "host": {"kind": "c"},
       "accelerators": [{"kind": "onednn"}, {"kind": "openblas"}]}
# Kernel labels (profile: true) carry node names into C strings and the driver's lines.
PROFILED = {"kind": "c", "profile": True}
GPU = {"kind": "composite", "host": {"kind": "c"}, "device": {"kind": "cuda", "arch": "sm_90"},
       "accelerators": [{"kind": "cudnn"}, {"kind": "cublas"}]}


def hostile_model(names: list[str], graph_name: str) -> onnx.ModelProto:
    """One chain per name: input NAME -> MatMul -> 'NAME mid' -> Relu -> 'NAME out'."""
    rng = np.random.default_rng(0)
    nodes, inputs, outputs, weights = [], [], [], []
    for name in names:
        weight = f"{name} weight"
        weights.append(numpy_helper.from_array(rng.random((4, 3), dtype=np.float32), weight))
        nodes.append(helper.make_node("MatMul", [name, weight], [f"{name} mid"], name=name))
        nodes.append(helper.make_node("Relu", [f"{name} mid"], [f"{name} out"],
                                      name=f"{name} relu"))
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 4]))
        outputs.append(helper.make_tensor_value_info(f"{name} out", TensorProto.FLOAT, [2, 3]))
    graph = helper.make_graph(nodes, graph_name, inputs, outputs, weights,
                              doc_string="*/ #error doc")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def run_buildgen(folder: Path, targets: dict[str, dict[str, object]], source: str,
                 ) -> subprocess.CompletedProcess[str]:
    """Build model 'hostile' for the `c` kind and each of `targets` (name -> definition)."""
    manifest = {"buildgen": 1, "targets": targets,
                "models": {"hostile": {"source": source, "targets": ["c", *sorted(targets)]}}}
    (folder / "BUILD.yaml").write_text(yaml.safe_dump(manifest))
    return subprocess.run([sys.executable, "-m", "buildgen", "build"], cwd=folder,
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def hostile_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    models = folder / "models 'q' #h"
    models.mkdir()
    names = list(ACCEPTED.values())
    onnx.save(hostile_model(names, ACCEPTED["comment_end"]), models / "m *#'(x).onnx")
    targets: dict[str, dict[str, object]] = {"cpu": CPU, "prof": PROFILED}
    if shutil.which("nvcc"):
        targets["gpu"] = GPU
    done = run_buildgen(folder, targets, f"{models.name}/m *#'(x).onnx")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return folder


@pytest.mark.slow
def test_no_payload_runs_and_names_survive(hostile_build: Path) -> None:
    import onnxruntime

    names = list(ACCEPTED.values())
    model = hostile_build / "models 'q' #h" / "m *#'(x).onnx"
    rng = np.random.default_rng(1)
    feeds = {name: rng.standard_normal((2, 4), dtype=np.float32) for name in names}
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds),
                        strict=True))
    for target in ("c", "cpu", "prof"):
        library = hostile_build / "build" / "hostile" / target / "libhostile.so"
        loaded = buildgen.runtime.load(library)
        assert [i.name for i in loaded.inputs] == names  # the C string tables hold the exact bytes
        got = loaded(*(feeds[name] for name in names))
        for info, value in zip(loaded.outputs, got, strict=True):
            np.testing.assert_allclose(value, expected[info.name], rtol=1e-5, atol=1e-6)
    assert not list(hostile_build.rglob(MARKER)), "a payload ran"
    assert not Path(os.getcwd(), MARKER).exists()


@pytest.mark.slow
def test_kernel_labels_name_the_nodes_as_printable_text(hostile_build: Path) -> None:
    import ctypes

    library = hostile_build / "build" / "hostile" / "prof" / "libhostile.so"
    loaded = buildgen.runtime.load(library)
    try:
        lib = ctypes.CDLL(str(library))
        lib.hostile_profile_kernel.restype = ctypes.c_char_p
        count = lib.hostile_profile_kernel_count(loaded._handle)
        labels = [lib.hostile_profile_kernel(loaded._handle, k).decode("ascii")
                  for k in range(count)]
    finally:
        loaded.close()
    assert count >= len(ACCEPTED), labels
    assert all(label.isprintable() and re.match(r"r\d+ k\d+_\w+: ", label) for label in labels)
    # Names keep their text (cut past 200 characters), non-ASCII shown as escapes.
    assert any("MatMul 'it\\'s \"quoted\"'" in label for label in labels), labels
    assert any("caf\\u00e9" in label for label in labels), labels


@pytest.mark.slow
def test_generated_text_keeps_names_inert(hostile_build: Path) -> None:
    names = set(ACCEPTED.values())
    build = hostile_build / "build"
    for path in build.rglob("*.json"):
        json.loads(path.read_text())  # parses: no name broke out of a string
    report = json.loads((build / "hostile" / "cpu" / "report.json").read_text())
    assert {t["name"] for t in report["inputs"]} == names
    for path in [*build.rglob("*.md")]:
        text = path.read_text()
        outside_code = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)
        assert "<script>" not in outside_code and "](javascript" not in outside_code
        for line in text.splitlines():
            if line.startswith("|"):  # a table row keeps its five cells
                assert line.replace("\\|", "").count("|") == 6, line
    for path in [*build.rglob("*.c"), *build.rglob("*.h"), *build.rglob("*.cu")]:
        for line in path.read_text().splitlines():
            # A directive needs a line of its own: a name never starts one.
            assert not line.lstrip().startswith(("#error", "#define int")), f"{path}: {line}"


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_unreadable_names_are_refused_at_import(tmp_path: Path, case: str) -> None:
    name, shown = REFUSED[case]
    model = hostile_model([name], "g")
    onnx.save(model, tmp_path / "m.onnx")
    done = run_buildgen(tmp_path, {}, "m.onnx")
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    assert "model 'hostile'" in output and shown in output, output[-2000:]
    assert name not in output  # the message shows the character, never carries it
    assert not list(tmp_path.rglob("*.so"))
