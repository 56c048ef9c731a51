"""The files gen writes besides build.ninja: per target, the resolved target and what code
generation may depend on (the same for every model that names the target).

They are written with write_if_changed: a manifest edit that does not change a target's
meaning leaves them (and everything built from them) untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from buildgen.manifest import ModelSpec
from buildgen.ninja.layout import TargetFiles
from buildgen.ninja.options_file import dump_options
from buildgen.ninja.shared_modules import kernels_objects_texts
from buildgen.targets import ResolvedTarget


def gen_files(
    models: Sequence[ModelSpec], targets: Mapping[str, ResolvedTarget]
) -> dict[str, str]:
    """Path (relative to the build dir) -> text, for every target a model names."""
    out: dict[str, str] = {}
    for name in sorted({name for model in models for name in model.targets}):
        files = TargetFiles("", name)  # the target's own files name no model
        whole, view, options = _target_texts(targets[name])
        out[files.target_file] = whole
        out[files.codegen_target_file] = view
        for backend, text in options:
            out[files.options(backend)] = text
        for kind, text in kernels_objects_texts(targets[name]):
            out[files.kernels_objects(kind)] = text
    return dict(sorted(out.items()))


def _target_texts(target: ResolvedTarget) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """A target's files: the whole target, its partition view, each backend's options."""
    options = tuple((backend, dump_options(backend, target.codegen_options(backend)))
                    for backend in target.backends)
    return target.canonical_json(), codegen_view(target).canonical_json(), options


def codegen_view(target: ResolvedTarget) -> ResolvedTarget:
    """`target` keeping only the attributes that can change the partition.

    The partition stage reads this instead of target.json: a compile-only attribute
    (opt_level, cflags, cc) or one backend's codegen option (cutlass split_k_slices) then
    re-runs compiles or that backend's codegen, never the partition.
    """
    return target.partition_view()
