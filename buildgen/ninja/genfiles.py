"""The files gen writes besides build.ninja: per model and target, the resolved target and
what code generation may depend on.

They are written with write_if_changed: a manifest edit that does not change a target's
meaning leaves them (and everything built from them) untouched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from buildgen.manifest import ModelSpec
from buildgen.ninja.layout import TargetFiles
from buildgen.ninja.options_file import dump_options
from buildgen.targets import ResolvedTarget, TargetInstance, get_kind


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
    """`target` keeping only the attributes that change generated code.

    The partition stage reads this instead of target.json: a compile-only attribute
    (opt_level, cflags, cc) then re-runs compiles, never the partition.
    """

    def keep(instance: TargetInstance) -> TargetInstance:
        affects = {a.name: a.affects for a in get_kind(instance.kind).attributes}
        attrs = tuple((k, v) for k, v in instance.attrs if affects.get(k) == "codegen")
        return TargetInstance(instance.kind, attrs)

    return dataclasses.replace(
        target,
        host=keep(target.host),
        device=keep(target.device) if target.device else None,
        accelerators=tuple(keep(a) for a in target.accelerators),
    )
