"""What the command does only for a person at a terminal: colour, and lines cut to its width.

Colour only when stdout is a terminal, ``NO_COLOR`` is unset or empty (https://no-color.org)
and ``TERM`` is not ``dumb``: a pipe, a file or a CI log gets plain text, byte for byte the
same wherever it runs. Columns are aligned on the text a person sees, before any colour, so
escape codes never shift them. Piped output is never cut: a script or ``grep`` reads every
word; on a terminal, long lines are cut between words (:func:`costguard.domain.text.truncate`).
"""

from __future__ import annotations

import os
import shutil
import sys
import unicodedata
from collections.abc import Mapping, Sequence
from typing import TextIO

from costguard.domain.text import truncate

_STYLES = {
    "red": "\033[31m",
    "yellow": "\033[33m",
    "green": "\033[32m",
    "bold": "\033[1m",
    "dim": "\033[2m",
}
_RESET = "\033[0m"
#: The colour of a status or severity word, where one is shown.
STATUS_STYLE = {
    "over": "red",
    "critical": "red",
    "error": "red",
    "warning": "yellow",
    "ok": "green",
    "info": "dim",
}


def is_terminal(stream: TextIO | None = None) -> bool:
    stream = sys.stdout if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def colour_enabled(stream: TextIO | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour what goes to ``stream`` (stdout by default)."""
    environ = os.environ if environ is None else environ
    if environ.get("NO_COLOR", ""):
        return False
    if environ.get("TERM") == "dumb":
        return False
    return is_terminal(stream)


def paint(text: str, style: str | None, enabled: bool) -> str:
    """``text`` in ``style`` when ``enabled`` (an unknown or no style: unchanged)."""
    code = _STYLES.get(style or "")
    return f"{code}{text}{_RESET}" if enabled and code and text else text


def status(text: str, enabled: bool, width: int = 0) -> str:
    """A status or severity word padded to ``width`` first, then coloured: alignment holds."""
    word = text.strip().strip("[]").strip()
    return paint(text.ljust(width), STATUS_STYLE.get(word), enabled)


def width(stream: TextIO | None = None) -> int | None:
    """The terminal's width in columns, or None when ``stream`` is not a terminal."""
    if not is_terminal(stream):
        return None
    return shutil.get_terminal_size((100, 24)).columns


def fit(text: str, room: int | None, floor: int = 20) -> str:
    """``text`` cut between words to ``room`` columns (at least ``floor``); None: uncut."""
    return text if room is None else truncate(text, max(room, floor))


def cell_width(text: str) -> int:
    """The columns ``text`` takes on a terminal: a CJK character or an emoji takes two, a
    combining mark or a format character none. ``len`` counts code points, so a project
    named in Japanese pushed every column after it out of line."""
    return sum(
        0
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf")
        else 2
        if unicodedata.east_asian_width(ch) in ("W", "F")
        else 1
        for ch in text
    )


def pad(text: str, width: int, *, right: bool = False) -> str:
    """``text`` padded with spaces to ``width`` terminal columns (on the left if ``right``)."""
    room = " " * max(width - cell_width(text), 0)
    return room + text if right else text + room


def columns(rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()) -> list[str]:
    """Rows of cells aligned in columns two spaces apart; ``right`` holds the indexes of the
    columns aligned to the right (amounts). Widths come from the longest cell, so a long
    resource key widens its column instead of pushing the next one out of line; they are
    measured in terminal columns (:func:`cell_width`), not characters."""
    if not rows:
        return []
    count = max(len(r) for r in rows)
    grid = [[*r, *[""] * (count - len(r))] for r in rows]
    widths = [max(cell_width(r[i]) for r in grid) for i in range(count)]
    return [
        "  ".join(
            pad(cell, w, right=i in right)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in grid
    ]
