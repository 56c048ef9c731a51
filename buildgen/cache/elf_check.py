"""Whether an ELF file a tool wrote is whole: what a linker's exit status does not promise.

GNU ld (binutils 2.40) exited 0 after the disk filled while it flushed a shared library:
the file ended short of its section header table, and the next build trusted it
(tests/faults/test_disk_full.py: a libtiny.so cut at 69,632 of its 69,848 bytes). An ELF
file's headers say where its program and section header tables lie; a file that ends
before them was cut short. Archives, text and other files are not checked.

Checked by the cache wrapper after every action (buildgen/cache/command.py) and, with the
cache off, by the link rule itself: `python -m buildgen.cache.elf_check OUTPUT...` after
the link (buildgen/ninja/rules.py). Standard library only: it runs once a link.
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
from collections.abc import Sequence

# (offsets of e_phoff, e_shoff, e_phentsize, e_phnum, e_shentsize, e_shnum; offset format)
_LAYOUT = {1: ((28, 32, 42, 44, 46, 48), "I"), 2: ((32, 40, 54, 56, 58, 60), "Q")}


def incomplete_elf(path: str) -> str | None:
    """Why the ELF file at `path` is cut short, or None (whole, or not ELF, or gone)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:  # by descriptor: every action's outputs are checked
        head = os.pread(fd, 64, 0)
        size = os.fstat(fd).st_size
    except OSError:
        return None
    finally:
        os.close(fd)
    if not head.startswith(b"\x7fELF") or len(head) < 6 or head[4] not in _LAYOUT:
        return None
    (ph_at, sh_at, phent_at, phnum_at, shent_at, shnum_at), wide = _LAYOUT[head[4]]
    if len(head) < shnum_at + 2:
        return f"{size} bytes, shorter than its ELF header"
    order = "<" if head[5] == 1 else ">"

    def field(at: int, kind: str) -> int:
        return int(struct.unpack_from(order + kind, head, at)[0])

    phoff, shoff = field(ph_at, wide), field(sh_at, wide)
    # e_shnum 0 with a table: the count is in section 0, which must be there at least
    sections = field(shnum_at, "H") or (1 if shoff else 0)
    end = max(phoff + field(phent_at, "H") * field(phnum_at, "H"),
              shoff + field(shent_at, "H") * sections)
    return f"{size} bytes, where its headers reach byte {end}" if end > size else None


def remove_incomplete(outputs: Sequence[str], tool: str) -> int:
    """0, or 1 after removing the first ELF output that `tool` wrote short and saying so:
    a later build must not trust it."""
    for path in outputs:
        if (problem := incomplete_elf(path)) is not None:
            print(f"error: {tool} exited 0 but wrote {path} incomplete ({problem});"
                  " is the disk full?", file=sys.stderr)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            return 1
    return 0


def main(argv: Sequence[str]) -> int:
    if not argv:
        print("usage: python -m buildgen.cache.elf_check OUTPUT...", file=sys.stderr)
        return 2
    return remove_incomplete(argv, "the linker")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
