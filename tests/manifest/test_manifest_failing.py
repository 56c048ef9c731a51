"""The corpus of bad manifests: failing/<case>.yaml must fail with exactly failing/<case>.expected.

Each .expected file is the full rendered error (positions, source lines, carets, hints), with
{dir} standing for the corpus folder in messages that name a resolved path. Manifests are
loaded by bare file name from inside the folder, so positions read as `<case>.yaml:L:C`.
present.onnx is an empty stand-in: this stage only checks that a model file exists.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from buildgen.errors import BuildgenError
from buildgen.manifest import load_manifest

FAILING = Path(__file__).resolve().parent / "failing"
CASES = sorted(path.stem for path in FAILING.glob("*.yaml"))
# Registered kinds and tags a model may name without defining them (the targets stage
# supplies the real list).
KNOWN = frozenset({"c", "x86-onednn"})


def test_every_case_has_an_expectation() -> None:
    assert len(CASES) >= 20
    assert sorted(path.stem for path in FAILING.glob("*.expected")) == CASES


@pytest.mark.parametrize("case", CASES)
def test_failing_manifest(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FAILING)
    with pytest.raises(BuildgenError) as caught:
        load_manifest(f"{case}.yaml", lambda name: name in KNOWN)
    expected = (FAILING / f"{case}.expected").read_text(encoding="utf-8")
    assert str(caught.value) + "\n" == expected.replace("{dir}", str(FAILING))
