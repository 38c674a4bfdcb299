"""The budgets file of ``estimate train --budgets-file``: project → monthly budget and the
month's spend so far, for a CI budget gate that runs without a deployed ledger.

JSON, or a small safe subset of YAML (PyYAML is not a dependency, and a budgets file needs
no more than this)::

    # USD a month
    llm-pretraining:
      budget: 50000
      spent: 12000.50
    vision: 8000          # a budget alone: nothing spent yet

The JSON twin: ``{"llm-pretraining": {"budget": 50000, "spent": 12000.5}, "vision": 8000}``.
Amounts are written as tags write budgets (``5000``, ``5,000.50``, ``$5000``). Anything else
(lists, anchors, flow or block scalars, tabs, unknown keys) is refused with its line: a
guessed budget is worse than none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import partial
from pathlib import Path
from typing import Any

from costguard.domain.tags import MAX_BUDGET, parse_budget, parse_project

#: A budgets file larger than this is not a budgets file.
MAX_BYTES = 1_000_000
_KEYS = frozenset({"budget", "spent"})
_SUBSET = (
    "the YAML of a budgets file is a subset: 'project: amount', or 'project:' with "
    "'budget: amount' and 'spent: amount' indented below it (use JSON for anything else)"
)


class BudgetsFileError(ValueError):
    """The file cannot be read as budgets; the message names the file and the place."""


@dataclass(frozen=True, slots=True)
class BudgetEntry:
    budget: Decimal
    spent: Decimal = Decimal(0)


def load_budgets(path: Path) -> dict[str, BudgetEntry]:
    """The budgets ``path`` holds, by project."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BudgetsFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_BYTES:
        raise BudgetsFileError(f"{path}: larger than {MAX_BYTES:,} bytes: not a budgets file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BudgetsFileError(f"{path}: not UTF-8 text") from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            doc = json.loads(text, object_pairs_hook=partial(_once, str(path)))
        except json.JSONDecodeError as exc:
            raise BudgetsFileError(
                f"{path}: not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
        except BudgetsFileError:
            raise
        except ValueError as exc:  # a number longer than Python reads (4,300 digits)
            raise BudgetsFileError(f"{path}: not JSON: {str(exc).split(':')[0]}") from None
    else:
        doc = parse_yaml_subset(text, str(path))
    return budgets_from(doc, str(path))


def _once(where: str, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key twice as the YAML form does: JSON would keep the last,
    and a budget chosen by the order of a merge is a guess."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BudgetsFileError(f"{where}: {key!r} is in the file twice")
        out[key] = value
    return out


def budgets_from(doc: Any, where: str) -> dict[str, BudgetEntry]:
    """Validate a parsed document: a mapping of project to an amount or ``{budget, spent}``."""
    if not isinstance(doc, dict):
        raise BudgetsFileError(f"{where}: must map each project to its monthly budget")
    out: dict[str, BudgetEntry] = {}
    for project, value in doc.items():
        # The scan's name for the project (NFKC, spaces collapsed), which --project and
        # the ledger use: a key typed `ｌｌｍ` or `"llm "` is llm's budget.
        name, why = parse_project(str(project))
        if name is None:
            raise BudgetsFileError(f"{where}: project {str(project)[:60]!r} {why}")
        if name in out:
            raise BudgetsFileError(f"{where}: project {name!r} is in the file twice")
        if isinstance(value, dict):
            unknown = sorted(set(map(str, value)) - _KEYS)
            if unknown:
                raise BudgetsFileError(
                    f"{where}: project {name!r}: unknown key {', '.join(map(repr, unknown))} "
                    "(a project holds 'budget' and 'spent')"
                )
            if "budget" not in value:
                raise BudgetsFileError(f"{where}: project {name!r} has no 'budget'")
            budget = _budget(value["budget"], where, name)
            spent = _spent(value.get("spent", 0), where, name)
        else:
            budget, spent = _budget(value, where, name), Decimal(0)
        out[name] = BudgetEntry(budget, spent)
    return out


def _text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | str):
        return str(value)
    return None


def _budget(value: Any, where: str, project: str) -> Decimal:
    text = _text(value)
    amount = parse_budget(text) if text is not None else "is not an amount in USD"
    if isinstance(amount, str):
        raise BudgetsFileError(f"{where}: project {project!r}: budget {value!r} {amount}")
    return amount


def _spent(value: Any, where: str, project: str) -> Decimal:
    text = _text(value)
    try:
        amount = Decimal((text or "").strip().removeprefix("$").replace(",", ""))
    except InvalidOperation:
        amount = Decimal("NaN")
    if not (amount.is_finite() and 0 <= amount <= MAX_BUDGET * 100):
        raise BudgetsFileError(
            f"{where}: project {project!r}: spent {value!r} is not an amount in USD from 0"
        )
    return amount


def parse_yaml_subset(text: str, where: str) -> dict[str, Any]:
    """Two levels of ``key: scalar`` mappings, comments and blank lines; nothing else."""
    doc: dict[str, Any] = {}
    current: dict[str, Any] | None = None
    nested_indent: int | None = None
    for number, line in enumerate(text.splitlines(), 1):
        body = _strip_comment(line).rstrip()
        if not body.strip() or body.strip() in ("---", "..."):
            continue
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise BudgetsFileError(f"{where}: line {number}: a tab in the indentation")
        indent = len(body) - len(body.lstrip(" "))
        key, value = _pair(body.strip(), where, number)
        if indent == 0:
            if key in doc:
                raise BudgetsFileError(f"{where}: line {number}: project {key!r} again")
            if value == "":
                current, nested_indent = {}, None
                doc[key] = current
            else:
                current = None
                doc[key] = value
            continue
        if current is None:
            raise BudgetsFileError(f"{where}: line {number}: indented under no project; {_SUBSET}")
        if nested_indent is None:
            nested_indent = indent
        if indent != nested_indent or value == "":
            raise BudgetsFileError(f"{where}: line {number}: {_SUBSET}")
        if key in current:
            raise BudgetsFileError(f"{where}: line {number}: {key!r} again")
        current[key] = value
    return doc


def _strip_comment(line: str) -> str:
    """``line`` without a ``#`` comment (at the start, or after a space, outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _pair(body: str, where: str, number: int) -> tuple[str, str]:
    if body.startswith(("- ", "{", "[", "&", "*", "!", "|", ">", "?")) or body == "-":
        raise BudgetsFileError(f"{where}: line {number}: {_SUBSET}")
    key, sep, value = _split_key(body)
    if not sep or not key:
        raise BudgetsFileError(f"{where}: line {number}: no 'key: value'; {_SUBSET}")
    value = value.strip()
    if value[:1] in ("{", "[", "&", "*", "!", "|", ">"):
        raise BudgetsFileError(f"{where}: line {number}: {_SUBSET}")
    return key, _unquote(value, where, number)


def _split_key(body: str) -> tuple[str, str, str]:
    """``key``, ``":"``, ``rest``: the key may be quoted (and hold a colon then)."""
    if body[:1] in ("'", '"'):
        end = body.find(body[0], 1)
        if end > 0 and body[end + 1 : end + 2] == ":":
            return body[1:end], ":", body[end + 2 :]
        return "", "", ""
    key, sep, rest = body.partition(": ")
    if not sep and body.endswith(":"):
        key, sep, rest = body[:-1], ":", ""
    return key.strip(), sep.strip(), rest


def _unquote(value: str, where: str, number: int) -> str:
    if value[:1] in ("'", '"'):
        if len(value) < 2 or value[-1] != value[0]:
            raise BudgetsFileError(f"{where}: line {number}: an unclosed quote")
        return value[1:-1]
    return value
