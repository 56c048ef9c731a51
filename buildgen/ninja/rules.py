"""The fixed set of ninja rules buildgen emits.

Every rule takes its description from the action (`$desc`) and its arguments from
per-action variables that are argument lists (`$args`, `$cflags`, ...), shell-quoted once
by the writer. Stage rules are `restat`: stages write their outputs only when the bytes
change, so an unchanged output stops the wave of rebuilds there.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from buildgen.cache.model import ARCHIVE_RULE, ARCHIVE_STAGING
from buildgen.ninja.plan import Rule

if TYPE_CHECKING:
    from buildgen.targets.model import Toolchain

# File-level variables the rules use; their values come from the plan.
PYTHON = "python"  # the interpreter (and PYTHONPATH when buildgen is not installed)
STAGES = "stages"  # $python -m buildgen.stages --buildgen-version <v>

GEN = Rule(
    "gen",
    command=f"${PYTHON} -m buildgen gen $args",
    generator=True,
    # gen rewrites build.ninja and its option files only when their bytes change; restat
    # lets a touched-but-unchanged manifest cost nothing beyond gen itself.
    restat=True,
)


def _stage(name: str, depfile: str | None = None, deps: str | None = None) -> Rule:
    return Rule(
        name, command=f"${STAGES} {name} $args", depfile=depfile, deps=deps, restat=True
    )


IMPORT = _stage("import", depfile="$dep", deps="gcc")
PARTITION = _stage("partition", depfile="$dep", deps="gcc")
# codegen and report read constants.bin; their depfile adds weights.bin when they read a
# large weight after all (buildgen/ir/constants.py).
CODEGEN = _stage("codegen", depfile="$dep", deps="gcc")
EXECUTOR = _stage("executor")
REPORT = _stage("report", depfile="$dep", deps="gcc")
# Manifest-wide: every model's instantiation list -> a kind's kernel shards (shared_modules.py).
SHARED_KERNELS = _stage("shared_kernels")
# A module's list of fixed kernels sources -> its libraries' dyndep and response files.
LINK_KERNELS = _stage("link_kernels")

# Flags live on the command line, so changing one re-runs exactly the compiles it touches.
# gcc, clang and nvcc all understand -MD -MF; `deps = gcc` moves the depfile into
# .ninja_deps (and deletes it), keeping the build dir small.
COMPILE = Rule(
    "cc",
    command="$cc $cflags $includes -MD -MF $out.d -c $in -o $out",
    depfile="$out.d",
    deps="gcc",
)
# rcsD: D stores zero timestamps/uids so the archive is the same bytes every time. The old
# archive is removed first because `ar r` would keep members that are no longer inputs.
_AR = "ar rcsD $out $in $response_files"
# GNU ar writes a temp file ("stXXXXXX") beside the archive and renames it: killed, it
# leaves that file in the build folder for good. So it writes in a folder of its own,
# which the next run of the action removes whole, and the archive is moved into place.
_STAGED = f"$out{ARCHIVE_STAGING}"
ARCHIVE = Rule(ARCHIVE_RULE, command=(
    f"rm -rf $out {_STAGED} && mkdir {_STAGED} && ar rcsD {_STAGED}/a $in $response_files"
    f" && mv {_STAGED}/a $out && rmdir {_STAGED}"
))
# $response_files: `@file` words naming files that list more objects (Action.response_files:
# the c host's kernels objects its modules call, known once they are generated).
_LINK = "$ld -shared -o $out $in $response_files $ldflags"
# GNU ld can exit 0 with the library cut short at a full disk: the output is checked and
# removed if so (buildgen/cache/elf_check.py), as the cache wrapper does after every action.
LINK_SHARED = Rule("link_shared", command=f"{_LINK} && ${PYTHON} -m buildgen.cache.elf_check $out")



def compile_variables(toolchain: Toolchain, includes: tuple[str, ...]
                      ) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A compile edge's variables: the command's words, the kind its workers serve, and
    whether the command may be stopped midway (Toolchain.stoppable)."""
    return (
        ("cc", (*toolchain.launcher, toolchain.cc)),
        ("cflags", toolchain.cflags),
        ("includes", includes),
        (COMPILE_KIND, (toolchain.kind,)),
        (STOPPABLE, ("--stoppable",) if toolchain.stoppable else ()),
    )


ALL_RULES = (
    GEN, IMPORT, PARTITION, CODEGEN, EXECUTOR, REPORT, SHARED_KERNELS, LINK_KERNELS, COMPILE,
    ARCHIVE, LINK_SHARED,
)

# The action cache (buildgen/cache) wraps every rule but gen, which writes build.ninja
# itself. File-level: `$python -m buildgen.cache exec --root <source root>`.
CACHE = "cache"
# Per action: its implicit inputs, which `$in` leaves out but the cache must hash.
IMPLICIT_IN = "implicit_in"
# Per link or archive: `@file` arguments (Action.response_files).
RESPONSE_FILES = "response_files"
# Per compile: its backend kind; `--stoppable` where its command may be stopped midway.
COMPILE_KIND = "kind"
STOPPABLE = "stoppable"
UNCACHED = frozenset({GEN.name})
# The command the wrapper runs, where it differs from the rule's: the wrapper removes a
# non-restat rule's outputs before running it, checks ELF outputs after it, and runs one
# program, not shell syntax.
_WRAPPED_COMMAND = {ARCHIVE.name: _AR, LINK_SHARED.name: _LINK}


def cached(rule: Rule) -> Rule:
    """`rule` with its command run through the action cache's wrapper, which is told the
    action's outputs, inputs and depfile so it needs to parse no command line."""
    if rule.name in UNCACHED:
        return rule
    head = [f"${CACHE}", "--rule", rule.name]
    if rule.restat:
        head.append("--restat")
    if rule.depfile:
        head += ["--depfile", rule.depfile]
    if rule.name == COMPILE.name:  # which workers may run it (buildgen.remote.settings)
        head += [f"--kind=${COMPILE_KIND}", f"${STOPPABLE}"]
    head += ["--out", "$out", "--in", "$in", f"${IMPLICIT_IN}", "--"]
    command = _WRAPPED_COMMAND.get(rule.name, rule.command)
    return dataclasses.replace(rule, command=" ".join([*head, command]))
