"""The real-model corpus: compiles?, max error and latency vs onnxruntime, both targets.

    python bench/bench_corpus.py                 # every corpus model (VGG/AlexNet too)
    python bench/bench_corpus.py --ci            # the subset tests/corpus builds
    python bench/bench_corpus.py bert gpt2       # some models
    python bench/bench_corpus.py --markdown      # the table as Markdown (docs/backends/c.md)

The models and their inputs are tests/corpus/corpus_models.py; all are built in one
keep-going `buildgen build` for the `c` host (defaults: no march) and the composite CPU
target (c + onednn + openblas), then each library runs on the same inputs as onnxruntime
(1 intra-op thread, as buildgen's libraries are single-threaded). A latency column is
buildgen's median time over onnxruntime's, measured in the same run; a model that does not
build or does not match is reported with its first error, never timed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import onnx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "corpus"))
from corpus_build import (  # noqa: E402
    TARGETS,
    build_all,
    check,
    latency,
    library,
    ort_session,
    write_manifest,  # noqa: E402
)
from corpus_models import BY_NAME, CI, MODELS, CorpusModel, feeds, model_path  # noqa: E402


def row(model: CorpusModel, build_dir: Path, errors: dict[str, str]) -> list[str]:
    from buildgen import runtime

    path = model_path(model)
    ops = len(onnx.load(str(path), load_external_data=False).graph.node)
    inputs = feeds(model)
    session = ort_session(path)
    ort_s = latency(lambda: session.run(None, inputs))
    cells = [model.name, model.family, str(ops), f"{ort_s * 1e3:.2f}"]
    for target in sorted(TARGETS):
        outcome = check(model, target, build_dir, errors)
        if outcome.error is not None:
            cells += [outcome.error[:60], "-"]
            continue
        compiled = runtime.load(library(build_dir, model.name, target))
        args = [inputs[i.name] for i in compiled.inputs]
        ours = latency(lambda c=compiled, a=args: c(*a))
        compiled.close()
        cells += [f"ok ({outcome.max_rel:.1e})", f"{ours / ort_s:.2f}"]
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="corpus model names (default: all)")
    parser.add_argument("--ci", action="store_true", help="only the models CI builds")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--keep", type=Path, help="build here and keep it")
    args = parser.parse_args()
    chosen = [BY_NAME[n] for n in args.models] if args.models else list(CI if args.ci
                                                                          else MODELS)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        manifest = write_manifest(chosen, folder)
        _, errors = build_all(manifest, folder / "build")
        head = ["model", "family", "ops", "ort ms"]
        for target in sorted(TARGETS):
            head += [f"{target}: matches (max rel err)", f"{target} / ort"]
        rows = [row(m, folder / "build", errors) for m in chosen]
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for cells in rows:
            print("| " + " | ".join(cells) + " |")
    else:
        widths = [max(len(c[i]) for c in [head, *rows]) for i in range(len(head))]
        for cells in [head, *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))
    ok = sum(1 for cells in rows for c in cells if c.startswith("ok"))
    print(f"\n{ok} of {len(rows) * len(TARGETS)} model x target builds compile and match")


if __name__ == "__main__":
    main()
