"""How a command prints its results: one ``--format`` flag, one JSON envelope, one table.

Every command that prints results takes ``--format table|json|csv|markdown`` (``--json``
stays as a synonym of ``--format json``). A command builds its results once, as JSON data
and as :class:`Table` rows, and this module writes them in the format asked for:

- ``json``: the envelope ``{"schema_version", "kind", "generated_at", "data"}``, the same
  for every command, so a script reads ``kind`` before it reads ``data``;
- ``csv``: RFC 4180, a header row of the column keys (stable names for a spreadsheet or
  a script), one row per table row;
- ``markdown``: a GitHub-flavoured pipe table, ready to paste into a pull-request comment
  or Slack, with ``|`` and line breaks in cells escaped;
- ``table``: aligned plain text for a person.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from costguard.cli.common import Parser

#: The envelope's version. Version 1 was the scan's own document (its fields at the top
#: level) and bare arrays for ``alerts`` and ``actions``; version 2 puts every command's
#: results under ``data``.
SCHEMA_VERSION = 2


class Format(StrEnum):
    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    MARKDOWN = "markdown"


def format_flag() -> Parser:
    """The parent parser holding ``--format`` and its synonym ``--json`` (dest ``format``)."""
    parent = Parser(add_help=False)
    parent.add_argument(
        "--format",
        choices=[f.value for f in Format],
        default=Format.TABLE.value,
        help="how to print the results (default table; json, csv and markdown for tools)",
    )
    parent.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const=Format.JSON.value,
        help="the same as --format json",
    )
    return parent


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


@dataclass(frozen=True, slots=True)
class Table:
    """Rows of cell text under named columns; a missing cell is empty."""

    columns: tuple[Column, ...]
    rows: Sequence[Mapping[str, str]]

    def cells(self, row: Mapping[str, str]) -> list[str]:
        return [row.get(c.key, "") for c in self.columns]


def csv_text(table: Table) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([c.key for c in table.columns])
    for row in table.rows:
        writer.writerow(table.cells(row))
    return out.getvalue()


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def markdown_text(table: Table) -> str:
    head = "| " + " | ".join(_md_cell(c.header) for c in table.columns) + " |"
    rule = "|" + "|".join("---:" if c.align == "right" else "---" for c in table.columns) + "|"
    body = ["| " + " | ".join(_md_cell(x) for x in table.cells(row)) + " |" for row in table.rows]
    return "\n".join([head, rule, *body]) + "\n"


def plain_text(table: Table) -> str:
    grid = [[c.header for c in table.columns], *(table.cells(r) for r in table.rows)]
    widths = [max(len(line[i]) for line in grid) for i in range(len(table.columns))]
    lines = []
    for line in grid:
        cells = [
            text.rjust(width) if column.align == "right" else text.ljust(width)
            for text, width, column in zip(line, widths, table.columns, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def write(
    fmt: str,
    *,
    kind: str,
    data: Any,
    table: Table,
    generated_at: datetime,
    text: str | None = None,
) -> None:
    """Print the results on stdout in ``fmt``; ``text`` replaces the plain table when a
    command reads better as prose than as one grid (the scan's report, say)."""
    if fmt == Format.JSON:
        json.dump(envelope(kind, data, generated_at), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif fmt == Format.CSV:
        sys.stdout.write(csv_text(table))
    elif fmt == Format.MARKDOWN:
        sys.stdout.write(markdown_text(table))
    else:
        sys.stdout.write(text if text is not None else plain_text(table))
