"""Running the driver: directly, or under the target's emulator (a cross target's
`emulator:`, like CMake's CMAKE_CROSSCOMPILING_EMULATOR), with failures said plainly."""

from __future__ import annotations

import errno
import shlex
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from buildgen.errors import BuildgenError, Diagnostic
from buildgen.targets import ResolvedTarget, get_kind

# How to get the emulators a cross target names most often.
_EMULATOR_HINTS = {
    "qemu-": "install it: `apt-get install qemu-user` (Debian/Ubuntu), "
    "`dnf install qemu-user` (Fedora)",
}


def emulator_for(target: ResolvedTarget) -> tuple[str, ...] | None:
    """The command prefix that runs the target's programs: () runs them directly, None
    means the target is another machine's and nothing here can run it."""
    from buildgen.targets.cross import emulator_for as target_emulator

    prefix = target_emulator(target)
    return None if prefix is None else tuple(prefix)


def compile_only(target: ResolvedTarget, label: str) -> None:
    """Refuse a target whose device builds for a host of another architecture (cuda for a
    Jetson): an emulator runs the host's code, not the device's."""
    device = target.device
    if device is None:
        return
    attr = get_kind(device.kind).host_triple_attr
    triple = dict(device.attrs).get(attr) if attr else None
    if triple:
        raise BuildgenError(Diagnostic(
            f"{label}: compile-only here: its {device.kind} device code runs on the GPU of "
            f"the {triple} machine it was built for, which no emulator provides",
            hint="copy the library to that machine (a Jetson) and run it there; `buildgen "
            "run` runs a cross-built target whose composite has no device"))


def no_emulator(label: str) -> BuildgenError:
    """For a target of another architecture with no emulator set and none found."""
    return BuildgenError(Diagnostic(
        f"{label}: the target is for another architecture and has no emulator to run it",
        hint=f"{_EMULATOR_HINTS['qemu-']}; or set the host's `emulator`, "
        "e.g. [qemu-aarch64, -L, /usr/aarch64-linux-gnu]"))


@dataclass(frozen=True)
class Ran:
    runs: int
    seconds: float  # the runs' time as the driver measured it (under an emulator: emulated)
    regions: tuple[float, ...] = ()  # a profiled library's seconds per region, over the runs
    kernels: tuple[tuple[str, float], ...] = ()  # (label, seconds) per timed kernel, likewise
    isa: str = ""  # the instruction set create picked for the host code ("armv8-a")


def run_driver(driver: Path, prefix: Sequence[str], inputs: Path, outputs: Path,
               repeat: int, label: str) -> Ran:
    command = [*prefix, str(driver), str(inputs), str(outputs), str(repeat)]
    if prefix and shutil.which(prefix[0]) is None:
        raise _missing_emulator(prefix[0], label)
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace",
                              check=False)
    except OSError as exc:
        if exc.errno == errno.ENOEXEC:  # built for another machine, and no emulator set
            raise BuildgenError(Diagnostic(
                f"{label}: cannot execute its driver here: {exc.strerror}",
                hint="a target for another architecture needs `emulator:` on its host, "
                "e.g. [qemu-aarch64, -L, /usr/aarch64-linux-gnu]")) from None
        raise
    if done.returncode < 0:
        raise BuildgenError(Diagnostic(
            f"{label}: the driver was killed by {_signal_name(-done.returncode)}"
            f"{_stderr(done.stderr)}\n$ {shlex.join(command)}"))
    if done.returncode != 0:
        raise BuildgenError(Diagnostic(
            f"{label}: the driver failed (exit {done.returncode}){_stderr(done.stderr)}"))
    return _parse_timing(done.stdout, label)


def _missing_emulator(program: str, label: str) -> BuildgenError:
    name = program.rsplit("/", 1)[-1]
    hint = next((h for p, h in _EMULATOR_HINTS.items() if name.startswith(p)),
                f"install {name!r}")
    return BuildgenError(Diagnostic(
        f"{label}: the target's emulator {program!r} is not an executable on PATH",
        hint=f"{hint}; or set the host's `emulator` to one that is"))


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"


def _stderr(text: str) -> str:
    lines = text.rstrip().splitlines()[-20:]
    return ":\n" + "\n".join(lines) if lines else ""


def _parse_timing(stdout: str, label: str) -> Ran:
    timing: tuple[int, float] | None = None
    regions: dict[int, float] = {}
    kernels: dict[int, tuple[str, float]] = {}
    isa = ""
    for line in stdout.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == "isa":
            isa = words[1]
        elif len(words) == 4 and words[0] == "runs" and words[2] == "seconds":
            timing = int(words[1]), float(words[3])
        elif len(words) == 4 and words[0] == "region" and words[2] == "seconds":
            regions[int(words[1])] = float(words[3])
        elif len(words) > 4 and words[0] == "kernel" and words[2] == "seconds":
            kernels[int(words[1])] = line.split(maxsplit=4)[4], float(words[3])
    if timing is None:
        raise BuildgenError(f"{label}: the driver printed no timing line: {stdout[-200:]!r}")
    return Ran(*timing, tuple(regions[k] for k in sorted(regions)),
               tuple(kernels[k] for k in sorted(kernels)), isa)
