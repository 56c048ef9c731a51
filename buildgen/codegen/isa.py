"""Which instruction-set levels a library's CPU modules hold, and the C that picks one.

A module compiled once per level (rules' `isa_variants`) is declared to model.c as a table
of its variants, best first; create asks the CPU (bg_cpu.h) and takes the best row it runs.
A library pinned to one x86-64 level checks at create that the CPU runs it. The executor
(buildgen.codegen.executor) places these pieces; the plan travels to the executor and report
stages on their command lines (isa_arguments / parse_isa_arguments).
"""

from __future__ import annotations

from dataclasses import dataclass

from buildgen.codegen import cnames
from buildgen.targets import ResolvedTarget, get_kind
from buildgen.targets.kinds import HOST_DEVICE


@dataclass(frozen=True)
class IsaPlan:
    """How the CPU modules were compiled. `variants`: backend -> the instruction-set levels
    its module was compiled for, one object each, best last (rules' `isa_variants`); create
    runs the best one the CPU supports. `pinned`: the host's one ISA otherwise (its march,
    "" for the compiler's default)."""

    variants: tuple[tuple[str, tuple[str, ...]], ...] = ()
    pinned: str = ""

    def levels(self, backend: str) -> tuple[str, ...]:
        return dict(self.variants).get(backend, ())

    @property
    def checks_cpu(self) -> bool:
        """Whether create asks the CPU: to pick a level, or whether it runs the pinned one
        (an x86-64 level bg_cpu.h knows; `native` or another architecture's march is taken
        on trust)."""
        return bool(self.variants) or self.pinned in X86_LEVELS


# The levels bg_cpu.h tests (bg_isa_known).
X86_LEVELS = ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")


# One compile per module, for the compiler's default ISA (what callers without a target get).
ONE_ISA = IsaPlan()


def isa_plan(target: ResolvedTarget) -> IsaPlan:
    """The target's plan: its CPU backends' toolchains say which compile per level."""
    variants = tuple(
        (kind, tuple(v.level for v in target.toolchain(kind).variants))
        for kind in target.backends
        if get_kind(kind).device == HOST_DEVICE and target.toolchain(kind).variants
    )
    return IsaPlan(variants, target.toolchain(target.host_kind).pinned_isa)


def isa_arguments(isa: IsaPlan) -> tuple[str, ...]:
    """The executor stage's command-line form of `isa` (parse_isa_arguments reads it)."""
    args: list[str] = []
    for kind, levels in isa.variants:
        args += ["--isa-variants", f"{kind}={','.join(levels)}"]
    # An empty argument would not survive CMake's command lines: "" is left out.
    return (*args, "--pinned-isa", isa.pinned) if isa.pinned else tuple(args)


def parse_isa_arguments(variants: list[str] | None, pinned: str) -> IsaPlan:
    pairs = (item.partition("=") for item in variants or ())
    return IsaPlan(tuple((kind, tuple(levels.split(","))) for kind, _, levels in pairs), pinned)


def suffix(level: str) -> str:
    from buildgen.targets.model import IsaVariant

    return IsaVariant(level, ()).suffix


def variant_table(p: str, backend: str, levels: tuple[str, ...],
                  functions: list[tuple[str, str, str]]) -> list[str]:
    """A module compiled once per ISA level: every variant's functions, and a table of them
    (best level first) that create picks a row of."""
    best_first = levels[::-1]
    lines = [f"/* backend module {backend}, compiled for {len(levels)} instruction-set levels: "
             "create picks the best this CPU runs (bg_cpu.h) */"]
    for level in best_first:
        lines.append(f"extern const size_t {p}_scratch_bytes{suffix(level)};")
        lines += [f"{t} {p}_{f}{suffix(level)}({a});" for t, f, a in functions]
    lines += [
        f"typedef struct {p}_module {{",
        *(f"    {t} (*{f})({a});" for t, f, a in functions),
        f"}} {p}_module;",
        f"static const char *const {p}_levels[] = {{"
        + ", ".join(cnames.c_string(level) for level in best_first) + "};",
        f"static const {p}_module {p}_variants[] = {{",
        *("    {" + ", ".join(f"{p}_{f}{suffix(level)}" for _, f, _ in functions) + "},"
          for level in best_first),
        "};",
    ]
    return lines


def pick_variant(model: str, backend: str, host: bool) -> list[str]:
    p = f"{model}__{backend}"
    return [
        "    {",
        f"        const int count = (int)(sizeof {p}_levels / sizeof {p}_levels[0]);",
        f"        const int v = bg_isa_pick({p}_levels, count, m->error, sizeof m->error);",
        "        if (v < 0) {",
        "            set_create_error(m->error);",
        f"            {model}_destroy(m);",
        "            return -1;",
        "        }",
        f"        m->{backend} = &{p}_variants[v];",
        *([f"        m->cpu_isa = {p}_levels[v];"] if host else []),
        "    }",
    ]


def check_pinned(isa: IsaPlan) -> list[str]:
    """A library pinned to an x86-64 level refuses, at create, a CPU without it: a clear
    error instead of an illegal instruction somewhere in a run. First thing, before any code
    the compiler may have given the level's instructions (allocating, zeroing)."""
    if isa.variants or not isa.checks_cpu:
        return []
    level = cnames.c_string(isa.pinned)
    message = cnames.c_string(
        f"this library was built for {isa.pinned} (the target's march), which this CPU "
        "does not run; build it without march (one object per level, the best picked at "
        "create) or for a level this CPU runs")
    return [
        f"    if (!bg_cpu_runs(bg_isa_rank({level}))) {{",
        f"        bg_cpu_refuse(create_error, sizeof create_error, {message});",
        "        return -1;",
        "    }",
    ]
