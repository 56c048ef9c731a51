"""Where every file of a build lives, relative to the build directory (ninja's cwd).

    <model>/graph.json, <model>/weights.bin          import
    _targets/<target>/target.json                    gen: the canonical resolved target
    _targets/<target>/options/target.json            gen: the target, code-affecting attributes only
    _targets/<target>/options/<backend>.json         gen: one backend's codegen options
    <model>/<target>/partition.json                  partition
    <model>/<target>/src/<backend>.<ext>             codegen, one per backend of the target
    <model>/<target>/src/model.c, src/weights.S      executor
    <model>/<target>/include/<model>.h               executor
    <model>/<target>/obj/<name>.o                    compile
    <model>/<target>/lib<model>.so, lib<model>.a     link
    <model>/<target>/report.json, report.md          report

One place for these names keeps the planner, the stages' command lines and the tests in
agreement. Model names are C identifiers and target names are [A-Za-z][A-Za-z0-9_-]*
(the manifest checks both), so they are safe as folder names; the manifest refuses a model
named like one of the build dir's own folders (BUILD_FOLDERS).

A target's files are the same for every model that names it, so gen writes them once per
target, not once per model and target (at 1,000 models: 3 files instead of 3,000).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from buildgen.targets import Toolchain

BUILD_NINJA = "build.ninja"
# Kernels compiled once for every library of a build (shared_modules.py): _shared/<kind>-<id>/.
SHARED_DIR = "_shared"
# What gen writes once per target (TargetFiles.target_file, .options).
TARGETS_DIR = "_targets"
BUILD_FOLDERS = (SHARED_DIR, TARGETS_DIR)


def shared_kernels_folder(kind: str, toolchain_id: str) -> str:
    """The folder of a kind's shared kernels for one toolchain (its id: a digest)."""
    return f"{SHARED_DIR}/{kind}-{toolchain_id}"


def shared_kernels_kind(path: str) -> str:
    """The kind whose shared kernels `path` (a file in such a folder) belongs to."""
    return path.split("/")[1].split("-", 1)[0]

# The extension of a generated source, by the language its toolchain compiles.
SOURCE_EXTENSIONS = {"c": "c", "cxx": "cc", "cuda": "cu"}


@dataclass(frozen=True)
class ModelFiles:
    model: str

    @property
    def graph(self) -> str:
        return f"{self.model}/graph.json"

    @property
    def weights(self) -> str:
        return f"{self.model}/weights.bin"

    @property
    def constants(self) -> str:
        """The small weights again: what codegen reads (buildgen/ir/constants.py)."""
        return f"{self.model}/constants.bin"

    @property
    def import_depfile(self) -> str:
        return f"{self.model}/graph.json.d"


@dataclass(frozen=True)
class TargetFiles:
    model: str
    target: str

    def _at(self, name: str) -> str:
        return f"{self.model}/{self.target}/{name}"

    def _of_target(self, name: str) -> str:
        return f"{TARGETS_DIR}/{self.target}/{name}"

    @property
    def label(self) -> str:
        """How descriptions and phony targets name this pair."""
        return f"{self.model}/{self.target}"

    @property
    def phony(self) -> str:
        return f"{self.model}-{self.target}"

    @property
    def target_file(self) -> str:
        return self._of_target("target.json")

    @property
    def codegen_target_file(self) -> str:
        return self._of_target("options/target.json")

    def options(self, backend: str) -> str:
        return self._of_target(f"options/{backend}.json")

    @property
    def partition(self) -> str:
        return self._at("partition.json")

    def backend_source(self, backend: str, language: str) -> str:
        return self._at(f"src/{backend}.{SOURCE_EXTENSIONS[language]}")

    def kernels_objects(self, backend: str) -> str:
        """A target's (gen's) list of each fixed shared kernels source's objects, one
        `source=object` a line: the same for every model of the target."""
        return self._of_target(f"kernels/{backend}.objects")

    def kernels_sources(self, backend: str) -> str:
        """The fixed shared kernels sources a backend's module needs (its codegen writes it)."""
        return self._at(f"src/{backend}.kernels.txt")

    def kernels_links(self, backend: str) -> tuple[str, str]:
        """The dyndep file and the response file naming the shared kernels objects that a
        backend's module makes the libraries link (buildgen/ninja/shared_modules.py)."""
        return self._at(f"src/{backend}.link.dd"), self._at(f"src/{backend}.link.rsp")

    @property
    def executor_source(self) -> str:
        return self._at("src/model.c")

    @property
    def weights_asm(self) -> str:
        return self._at("src/weights.S")

    @property
    def header(self) -> str:
        return self._at(f"include/{self.model}.h")

    @property
    def include_dir(self) -> str:
        return self._at("include")

    def obj(self, stem: str) -> str:
        return self._at(f"obj/{stem}.o")

    @property
    def shared_lib(self) -> str:
        return self._at(f"lib{self.model}.so")

    @property
    def static_lib(self) -> str:
        return self._at(f"lib{self.model}.a")

    @property
    def report_json(self) -> str:
        return self._at("report.json")

    @property
    def report_md(self) -> str:
        return self._at("report.md")


def compile_units(obj: str, toolchain: Toolchain) -> tuple[tuple[str, Toolchain], ...]:
    """The compiles of one module: (object, toolchain) once, or once per ISA level: obj/c.o
    becomes obj/c.x86-64.o, obj/c.x86-64-v3.o, ..., each with the level's flags and the
    -DBG_ISA_SUFFIX its exported names take (buildgen_abi.h)."""
    return tuple((unit_object(obj, level), unit) for level, unit in unit_toolchains(toolchain))


def unit_toolchains(toolchain: Toolchain) -> tuple[tuple[str | None, Toolchain], ...]:
    """compile_units without the object names: (ISA level or None, toolchain) per compile,
    the same for every model built with `toolchain`."""
    if not toolchain.variants:
        return ((None, toolchain),)
    return tuple(
        (v.level,
         replace(toolchain, cflags=(*toolchain.cflags, *v.cflags, f"-DBG_ISA_SUFFIX={v.suffix}")))
        for v in toolchain.variants
    )


def unit_object(obj: str, level: str | None) -> str:
    """The object of one ISA level's compile of the module `obj` (None: the only one)."""
    return obj if level is None else f"{obj.removesuffix('.o')}.{level}.o"
