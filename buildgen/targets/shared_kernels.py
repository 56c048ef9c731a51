"""A kind's `shared_kernels:` rules block: kernels compiled once for every model of a build.

Only the declaration lives here; buildgen.ninja.shared_modules plans the actions and
buildgen.stages.shared_kernels_stage renders the shards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SharedKernelsSpec:
    render: str  # "module:function" rendering one shard's source from its instantiations
    shards: int  # how many translation units hold the manifest's kernels


def load_shared_kernels(data: dict[str, Any] | None) -> SharedKernelsSpec | None:
    if data is None:
        return None
    return SharedKernelsSpec(str(data["render"]), int(data["shards"]))
