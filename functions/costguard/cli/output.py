"""How a command prints its results: one ``--format`` flag, one JSON envelope, one table.

Every command that prints results takes ``--format table|json|csv|markdown`` (``--json``
stays as a synonym of ``--format json``). A command builds its results once, as JSON data
and as :class:`Table` rows, and this module writes them in the format asked for:

- ``json``: the envelope ``{"schema_version", "kind", "generated_at", "data"}``, the same
  for every command, so a script reads ``kind`` before it reads ``data``;
- ``csv``: RFC 4180, a header row of the column keys (stable names for a spreadsheet or
  a script), one row per table row. Money is a plain number in the unit its column names
  (``usd_per_hour`` to four places, ``*_usd`` to the cent, rounded as the text rounds);
  unpriced is the word ``unpriced``, never 0. A text cell that a spreadsheet would run as
  a formula (``=``, ``+``, ``-``, ``@``, a tab or a carriage return first) gets a leading
  ``'``: project names come from tags, which anyone who may tag may write;
- ``markdown``: a short heading line and GitHub-flavoured pipe tables, ready to paste
  into a pull-request comment or Slack, with markup, ``|`` and line breaks in cells
  escaped; money as the text shows it (``$1,234.56``, ``$0.5260/h``);
- ``table``: aligned plain text for a person.

``--json`` and ``--format`` set the same thing: given both, the last one on the command
line wins, as with any repeated option (``--json --format csv`` prints CSV).
"""

from __future__ import annotations

import csv
import io
import json
import sys
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from functools import cache
from typing import Any, Literal, NamedTuple

from costguard.domain.money import cents, per_hour, rate

#: The envelope's version. Version 1 was the scan's own document (its fields at the top
#: level) and bare arrays for ``alerts`` and ``actions``; version 2 puts every command's
#: results under ``data``.
SCHEMA_VERSION = 2


class Format(StrEnum):
    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    MARKDOWN = "markdown"


def envelope(kind: str, data: Any, generated_at: datetime) -> dict[str, Any]:
    """The one JSON document every command prints: what it is, when, and the results."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "generated_at": generated_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "data": data,
    }


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    header: str
    align: Literal["left", "right"] = "left"


class Cell(NamedTuple):
    """A cell shown one way to people (``text``: table, markdown) and another to tools
    (``value``: CSV), as money is: ``$1,234.56`` and ``1234.56``. A NamedTuple: a scan
    of 100,000 resources makes a few of them per resource."""

    text: str
    value: str


#: What a row holds: plain text (the same everywhere), or a :class:`Cell`.
Row = Mapping[str, "str | Cell"]

#: The cell of a resource nobody can price: the same word for people and tools, never 0.
UNPRICED = "unpriced"


@cache
def usd_cell(value: Decimal | None, missing: str = "") -> Cell:
    """Dollars to the cent, as the text output shows them; ``missing`` when None."""
    if value is None:
        return Cell(missing or "-", missing)
    return Cell(f"${cents(value):,}", str(cents(value)))


@cache  # a fleet has few distinct rates: each is formatted once
def rate_cell(value: Decimal | None) -> Cell:
    """A $/h rate as the text shows it (``$55.04/h``, ``$0.5260/h``); None is unpriced."""
    if value is None:
        return Cell(UNPRICED, UNPRICED)
    return Cell(per_hour(value), str(rate(value)))


@dataclass(frozen=True, slots=True)
class Table:
    """Rows of cells under named columns; a missing cell is empty."""

    columns: tuple[Column, ...]
    rows: Sequence[Row]
    #: Said above the table in markdown (``**Projects**``); nothing in the other formats.
    title: str = ""

    def cells(self, row: Row, *, for_tools: bool = False) -> list[str]:
        out = []
        for c in self.columns:
            cell = row.get(c.key, "")
            if isinstance(cell, str):
                out.append(_csv_safe(cell) if for_tools and cell else cell)
            else:
                out.append(_csv_safe(cell.value) if for_tools else cell.text)
        return out


#: What a spreadsheet takes for the start of a formula (OWASP's CSV-injection list).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_safe(text: str) -> str:
    """``text``, or ``'text`` when a spreadsheet would run it; a number (``-1.50``) is kept."""
    if not text or not text.startswith(_FORMULA_START):
        return text
    try:
        number = Decimal(text)
    except ArithmeticError:
        return "'" + text
    return text if number.is_finite() else "'" + text


def csv_text(table: Table) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([c.key for c in table.columns])
    for row in table.rows:
        writer.writerow(table.cells(row, for_tools=True))
    return out.getvalue()


#: Characters that end a line, or reorder or hide text, in some renderer: a line break
#: would end the table row, a bidi override would make a name read as another.
_INVISIBLE = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}
#: Markdown that would change a cell's meaning: a pipe ends the cell, ``*`` is emphasis,
#: ``[`` a link, ``<`` HTML. A backtick is left: a code span makes the markup inside it
#: inert (and CostGuard's own advice quotes commands in one); ``_`` is left: inside a word
#: it is no emphasis in GitHub's Markdown, and names such as ``my_project`` stay
#: readable; so is ``>``, a quote only at a line's start, which a cell never is.
_MARKUP = str.maketrans({ch: "\\" + ch for ch in "\\|*[]<"})


def _md_cell(text: str) -> str:
    visible = "".join(
        " " if unicodedata.category(ch) in _INVISIBLE and ch != "\u200d" else ch for ch in text
    )
    return " ".join(visible.split()).translate(_MARKUP)


def markdown_table(table: Table) -> str:
    head = "| " + " | ".join(_md_cell(c.header) for c in table.columns) + " |"
    rule = "|" + "|".join("---:" if c.align == "right" else "---" for c in table.columns) + "|"
    body = ["| " + " | ".join(_md_cell(x) for x in table.cells(row)) + " |" for row in table.rows]
    return "\n".join([head, rule, *body]) + "\n"


def markdown_text(tables: Sequence[Table], heading: str = "", *, empty: str = "") -> str:
    """``heading`` in bold, then each table (with its title); ``empty`` instead of a table
    with no rows (a header row alone reads as a broken table in a PR comment)."""
    parts = [f"**{_md_cell(heading)}**\n"] if heading else []
    for t in tables:
        if t.title:
            parts.append(f"{_md_cell(t.title)}\n")
        parts.append(markdown_table(t) if t.rows or not empty else f"_{_md_cell(empty)}_\n")
    return "\n".join(parts)


def plain_text(table: Table) -> str:
    from costguard.cli.terminal import columns

    grid = [[c.header for c in table.columns], *(table.cells(r) for r in table.rows)]
    right = frozenset(i for i, c in enumerate(table.columns) if c.align == "right")
    return "\n".join(columns(grid, right)) + "\n"


def render(
    fmt: str,
    *,
    kind: str,
    data: Any,
    table: Table | Callable[[], Table],
    generated_at: datetime,
    text: str | Callable[[], str] | None = None,
    heading: str = "",
    empty: str = "",
    views: Sequence[Table] | Callable[[], Sequence[Table]] = (),
) -> str:
    """The results in ``fmt``, as the command prints them.

    ``table`` is the CSV (one table: a file a spreadsheet opens); ``views``, when given,
    are what markdown shows instead (the scan: its projects, then its resources).
    ``text`` replaces the plain table when a command reads better as prose than as one
    grid (the scan's report, say); ``heading`` is markdown's first line; ``empty`` is
    said instead of an empty table (in markdown, and in the text when ``text`` is not
    given).

    ``data``, ``table``, ``views`` and ``text`` may each be a function of no argument,
    called only by the format that prints it: a scan of 100,000 resources builds its
    JSON document only for ``json``, and its rows only for ``csv`` and ``markdown``.
    """
    if fmt == Format.JSON:
        document = envelope(kind, _now(data), generated_at)
        return json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n"
    if fmt == Format.CSV:
        return csv_text(_now(table))
    if fmt == Format.MARKDOWN:
        return markdown_text(_now(views) or (_now(table),), heading, empty=empty)
    prose: str | None = _now(text)
    if prose is not None:
        return prose + ("\n" if prose and not prose.endswith("\n") else "")
    grid: Table = _now(table)
    if not grid.rows and empty:
        return empty + "\n"
    return "\n".join(plain_text(t) for t in (_now(views) or (grid,)))


def _now(value: Any) -> Any:
    """A part of the output: given, or made now by the function given."""
    return value() if callable(value) else value


def write(fmt: str, **kwargs: Any) -> None:
    """:func:`render` on stdout, flushed (a closed pipe is reported by the caller)."""
    sys.stdout.write(render(fmt, **kwargs))
    sys.stdout.flush()
