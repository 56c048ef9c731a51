"""Whether an ELF file a tool wrote is whole: what a linker's exit status does not promise.

GNU ld (binutils 2.40) exited 0 after the disk filled while it flushed a shared library:
the file ended short of its section header table, and the next build trusted it
(tests/faults/test_disk_full.py: a libtiny.so cut at 69,632 of its 69,848 bytes). An ELF
file's headers say where its program and section header tables lie; a file that ends
before them was cut short. Archives, text and other files are not checked.
"""

from __future__ import annotations

import os
import struct

# (offsets of e_phoff, e_shoff, e_phentsize, e_phnum, e_shentsize, e_shnum; offset format)
_LAYOUT = {1: ((28, 32, 42, 44, 46, 48), "I"), 2: ((32, 40, 54, 56, 58, 60), "Q")}


def incomplete_elf(path: str) -> str | None:
    """Why the ELF file at `path` is cut short, or None (whole, or not ELF, or gone)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return None
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
