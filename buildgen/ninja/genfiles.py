"""The files gen writes besides build.ninja: per model and target, the resolved target and
what code generation may depend on.

They are written with write_if_changed: a manifest edit that does not change a target's
meaning leaves them (and everything built from them) untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from buildgen.manifest import ModelSpec
from buildgen.ninja.layout import TargetFiles
from buildgen.ninja.options_file import dump_options
from buildgen.targets import ResolvedTarget


def gen_files(
    models: Sequence[ModelSpec], targets: Mapping[str, ResolvedTarget]
) -> dict[str, str]:
    """Path (relative to the build dir) -> text, for every model and target."""
    out: dict[str, str] = {}
    for model in models:
        for name in model.targets:
            target = targets[name]
            files = TargetFiles(model.name, name)
            out[files.target_file] = target.canonical_json()
            out[files.codegen_target_file] = codegen_view(target).canonical_json()
            for backend in target.backends:
                out[files.options(backend)] = dump_options(
                    backend, target.codegen_options(backend)
                )
    return dict(sorted(out.items()))


def codegen_view(target: ResolvedTarget) -> ResolvedTarget:
    """`target` keeping only the attributes that can change the partition.

    The partition stage reads this instead of target.json: a compile-only attribute
    (opt_level, cflags, cc) or one backend's codegen option (cutlass split_k_slices) then
    re-runs compiles or that backend's codegen, never the partition.
    """
    return target.partition_view()
