"""What a build's remote clients share between its action processes: a "down" marker and a
folder of event files under `<build>/.buildgen/remote/`.

Each action runs in its own process, so when a remote service (the HTTP cache, the REAPI
executor) fails, the first action to find out writes the marker, and every later action of
the build sees it and skips the service instead of waiting for its own timeout. Each event
worth a line in the build summary (a fallback, a damaged blob) is one file, written
atomically. `buildgen build` resets both at its start; a build driven by plain `ninja`
never does, so a marker also expires after MARKER_TTL. The files are reports: a build dir
that cannot take them costs the report only, never the build.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

from buildgen.fsutil import write_atomic

MARKER_TTL = 600.0  # s
MAX_SHOWN = 120  # characters of server-provided text in a message
_NOT_PRINTABLE = re.compile(r"[^\x20-\x7e]+")


def printable(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` as one line of printable ASCII (anything else becomes '?'), at most ``limit``
    characters: server-provided text is shown in build logs and terminals only so."""
    text = _NOT_PRINTABLE.sub("?", text)
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


@dataclass(frozen=True)
class SharedState:
    """One service's marker file and events folder in a build's state folder."""

    folder: Path
    marker: str  # the file that says the service is down, and why
    events: str  # the folder of event files

    def is_down(self) -> bool:
        try:
            return time.time() - (self.folder / self.marker).stat().st_mtime < MARKER_TTL
        except OSError:  # none, or no state folder at all
            return False

    def mark_down(self, text: str) -> None:
        """Write the marker unless it is there: the first failure names the cause."""
        if not self.is_down():
            with contextlib.suppress(OSError):
                write_atomic(self.folder / self.marker, text)

    def marker_text(self) -> str | None:
        try:
            return (self.folder / self.marker).read_text(errors="replace").strip()
        except OSError:
            return None

    def record(self, name: str, line: str) -> None:
        with contextlib.suppress(OSError):
            write_atomic(self.folder / self.events / name, printable(line, 400) + "\n")

    def seen(self, name: str) -> bool:
        return (self.folder / self.events / name).exists()

    def event_lines(self) -> list[str]:
        """The events' lines, sorted by file name."""
        lines = []
        events = self.folder / self.events
        if events.is_dir():
            for event in sorted(p for p in events.iterdir() if not p.name.startswith(".")):
                with contextlib.suppress(OSError):
                    lines.append(printable(event.read_text(errors="replace").strip(), 400))
        return lines

    def reset(self) -> None:
        """Forget the previous build's marker and events; called at the start of a build."""
        with contextlib.suppress(FileNotFoundError):
            (self.folder / self.marker).unlink()
        events = self.folder / self.events
        if events.is_dir():
            for event in events.iterdir():
                with contextlib.suppress(FileNotFoundError):
                    event.unlink()
