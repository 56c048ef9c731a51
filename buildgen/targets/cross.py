"""Cross builds: a host whose `triple` names another machine (rules' `cross`).

A triple's first part is the architecture the library runs on; it, not the build
machine's, picks the default ISA levels (toolchain.py) and decides whether external codegens
that link a library installed for the build machine can take part (compose.py). Running a
cross-built program needs an emulator: `emulator_for` says which, for `buildgen run` and the
tests. Nothing here changes a command line except through toolchain.py.
"""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from buildgen.targets.kinds import CrossRule
    from buildgen.targets.model import ResolvedTarget

# Other spellings of one architecture: platform.machine() says arm64 on macOS, and triples
# may say arm64 (Apple) or amd64.
_ARCH_ALIASES = {"arm64": "aarch64", "amd64": "x86_64", "x64": "x86_64"}

# qemu-user's program per architecture (Debian's qemu-user package installs them all).
_QEMU = {"aarch64": "qemu-aarch64", "riscv64": "qemu-riscv64", "x86_64": "qemu-x86_64",
         "arm": "qemu-arm", "armhf": "qemu-arm", "ppc64le": "qemu-ppc64le",
         "s390x": "qemu-s390x"}

# The Debian/Ubuntu package of each triple's gcc (`<triple>-gcc`).
_GCC_PACKAGES = {"aarch64-linux-gnu": "gcc-aarch64-linux-gnu",
                 "riscv64-linux-gnu": "gcc-riscv64-linux-gnu",
                 "x86_64-linux-gnu": "gcc",
                 "arm-linux-gnueabihf": "gcc-arm-linux-gnueabihf"}


@dataclass(frozen=True)
class ProjectToolchain:
    """The toolchain of the build that a target follows when its host names no triple: a
    CMake cross build's (buildgen_add_models passes CMAKE_C_COMPILER's triple, the compiler,
    CMAKE_SYSROOT and CMAKE_CROSSCOMPILING_EMULATOR). A host whose manifest names a triple
    keeps it; any other gets `triple`, `cc` (when given), and `sysroot`/`emulator` where it
    sets none, before the cross checks of compose.py run, so a kind that cannot cross is
    rejected as for a triple written in the manifest."""

    triple: str
    cc: str | None = None
    sysroot: str | None = None
    emulator: tuple[str, ...] | None = None
    origin: str = "the build's toolchain"  # where the triple came from, for messages
    leave_out: str = ""  # how to leave a target out of that build, for hints

    @property
    def arch(self) -> str:
        return triple_arch(self.triple)


def normalized_arch(name: str) -> str:
    return _ARCH_ALIASES.get(name.lower(), name.lower())


def build_arch() -> str:
    """The build machine's architecture (x86_64, aarch64, ...)."""
    return normalized_arch(platform.machine())


def triple_arch(triple: str) -> str:
    """`aarch64-linux-gnu` -> `aarch64`."""
    return normalized_arch(triple.split("-", 1)[0])


def rule_triple(rule: CrossRule | None, attrs: Mapping[str, Any]) -> str | None:
    """The triple a kind's attributes name, or None (no cross rule, or unset)."""
    if rule is None:
        return None
    value = attrs.get(rule.triple_attr)
    return str(value) if value else None


def target_arch(triple: str | None) -> str:
    """The architecture a library built for `triple` runs on (None: the build machine)."""
    return triple_arch(triple) if triple else build_arch()


def is_foreign(triple: str | None) -> bool:
    """Whether `triple` names another architecture than the build machine's: its programs
    need an emulator here, and libraries installed for this machine cannot be linked."""
    return triple is not None and triple_arch(triple) != build_arch()


def host_triple(target: ResolvedTarget) -> str | None:
    """The triple of `target`'s host, or None when it names none (or its kind has no
    `cross` rule)."""
    from buildgen.targets.registry import get_kind

    rule = get_kind(target.host_kind).toolchain.cross
    return rule_triple(rule, dict(target.host.attrs))


def compiler_install_hint(triple: str) -> str:
    """How to get `<triple>-gcc`, or to use another compiler."""
    package = _GCC_PACKAGES.get(triple, f"gcc-{triple}")
    return (f"install it: `apt-get install {package}` (Debian/Ubuntu); or set cc to a "
            f"compiler for {triple} (clang is given --target={triple}; add sysroot)")


def emulator_for(target: ResolvedTarget) -> tuple[str, ...] | None:
    """The command prefix that runs `target`'s programs on this (the build) machine.

    - `()`: run them directly: the host names no triple, or one of this machine's
      architecture (x86_64-linux-gnu on an x86-64 machine), or `emulator: []`.
    - the host's `emulator` attribute as written, when set (e.g.
      `("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu")`); it is not checked here.
    - for another architecture's triple and no `emulator`: `qemu-<arch>` when qemu-user
      installed it on PATH, with `-L <root>` where `<root>` is the host's `sysroot`, else
      `/usr/<triple>` when that folder exists (where Debian's cross packages put the target's
      libc and dynamic loader, which qemu needs to start a dynamically linked program).
    - `None`: another architecture's triple, no `emulator`, and no qemu found: the caller
      cannot run the program here and should say so (install qemu-user, or set `emulator`).

    Never part of a build: the emulator reaches no command line and no cache key.
    """
    emulator = dict(target.host.attrs).get("emulator")
    if emulator is not None:
        return tuple(emulator)
    triple = host_triple(target)
    if triple is None or not is_foreign(triple):
        return ()
    qemu = _QEMU.get(triple_arch(triple))
    if qemu is None or shutil.which(qemu) is None:
        return None
    sysroot = dict(target.host.attrs).get("sysroot") or f"/usr/{triple}"
    return (qemu, "-L", sysroot) if os.path.isdir(sysroot) else (qemu,)


def is_clang(compiler: str) -> bool:
    """Whether `compiler` (a name or path) is a clang: clang, clang-17, /opt/llvm/bin/clang."""
    name = os.path.basename(compiler)
    return name == "clang" or (name.startswith("clang-") and name[6:].isdigit())
