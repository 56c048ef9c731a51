"""What a worker must have to run buildgen's Python stages: the `buildgen-python` property.

A remote stage ships buildgen's own package in its input root (buildgen.remote.stages):
those are the exact bytes whose digest is in the action's key, and they change with every
edit of buildgen, which no worker image could follow. What does not travel is the
interpreter and buildgen's dependencies (numpy, onnx and its protobuf, PyYAML,
jsonschema): large, compiled, and changed only by an upgrade. They are the worker image's,
and this property, which names their versions, selects the workers whose image has them:
onnx's shape inference or numpy's rounding at another version could make other bytes.

    python -m buildgen.remote.runtime     prints `buildgen-python=<value>` for this machine,
                                          the property a worker pool for it advertises
"""

from __future__ import annotations

import sys
from functools import cache
from importlib import metadata

RUNTIME_PROPERTY = "buildgen-python"
# The distributions the stages import, as pyproject.toml names buildgen's dependencies
# (ninja and cmake run at gen and link time, not in a stage), plus onnx's protobuf.
RUNTIME_DISTRIBUTIONS = ("numpy", "onnx", "protobuf", "PyYAML", "jsonschema")


@cache
def runtime_property() -> str:
    """e.g. `cpython-3.11 numpy-1.26.4 onnx-1.17.0 protobuf-5.28.3 pyyaml-6.0.2 ...`."""
    version = sys.version_info
    words = [f"{sys.implementation.name}-{version.major}.{version.minor}"]
    for name in RUNTIME_DISTRIBUTIONS:
        try:
            words.append(f"{name.lower()}-{metadata.version(name)}")
        except metadata.PackageNotFoundError:
            words.append(f"{name.lower()}-none")
    return " ".join(words)


def main() -> int:
    print(f"{RUNTIME_PROPERTY}={runtime_property()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
