"""Real models compile for the `c` host and the composite CPU target and match onnxruntime.

The corpus (corpus_models.py) is what users bring: the onnx package's model zoo, models
shipped in PyPI packages, transformers architectures. One keep-going build of all of them
for both targets, then one check per model and target. bench/bench_corpus.py prints the
same results as a table with latencies.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_build import TARGETS, build_all, check, write_manifest  # noqa: E402
from corpus_models import BY_NAME, CI, MODELS  # noqa: E402

pytestmark = pytest.mark.slow

# As bench_corpus builds them, except that the composite's host module is compiled once, for
# this machine (march: native): the `c` target already compiles every ISA level of every
# model, and a second set of per-level compiles would double the suite's longest build.
TEST_TARGETS = {
    **TARGETS,
    "cpu": {**(TARGETS["cpu"] or {}), "host": {"kind": "c", "march": "native"}},
}


@pytest.fixture(scope="module")
def corpus_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    folder = tmp_path_factory.mktemp("corpus")
    manifest = write_manifest(CI, folder, TEST_TARGETS)
    result, errors = build_all(manifest, folder / "build")
    if result.returncode != 0 and not errors:
        pytest.fail(f"buildgen build failed before building:\n{result.stdout[-3000:]}\n"
                    f"{result.stderr[-3000:]}")
    return folder / "build", errors


def test_the_corpus_is_wide() -> None:
    """At least 25 models across vision, language, audio and recurrent families."""
    assert len(MODELS) >= 25 and len(CI) >= 25
    families = {m.family.split("/")[0] for m in CI}
    assert {"vision", "language", "audio", "bytes"} <= families
    assert any("recurrent" in m.family for m in CI)
    assert any("causal" in m.family for m in CI)
    assert any("detection" in m.family for m in CI)
    assert any("segmentation" in m.family for m in CI)


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("name", [m.name for m in CI])
def test_model_compiles_and_matches_onnxruntime(
    corpus_build: tuple[Path, dict[str, str]], name: str, target: str
) -> None:
    build_dir, errors = corpus_build
    outcome = check(BY_NAME[name], target, build_dir, errors)
    assert outcome.error is None, f"{name} for {target}: {outcome.error}"
