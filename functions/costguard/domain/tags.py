"""The tag contract: how a resource says which project pays for it.

Every parser returns a value *or* a :class:`Finding`; none raises on user input,
because one bad tag must never stop the scan of a whole account.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import NamedTuple

from costguard.domain.findings import Finding, FindingCode
from costguard.names import Tags

MAX_PROJECT_LEN = 256
#: Budgets above this are a typo, not a budget.
MAX_BUDGET = Decimal("1000000000")

_PLAIN = re.compile(r"^\d+(\.\d+)?$")
_GROUPED = re.compile(r"^\d{1,3}(,\d{3})+(\.\d+)?$")
#: Unicode category Cc is exactly C0, DEL and C1.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True, slots=True)
class TagKeys:
    """Which tag keys mean what. Defaults follow :class:`costguard.names.Tags`."""

    project: tuple[str, ...] = (Tags.PROJECT, *Tags.PROJECT_FALLBACKS)
    budget: str = Tags.BUDGET
    owner: str = Tags.OWNER
    exempt: str = Tags.EXEMPT


@dataclass(frozen=True, slots=True)
class Exemption:
    """``until`` is None for a permanent exemption."""

    until: datetime | None = None

    def active(self, now: datetime) -> bool:
        return self.until is None or now < self.until


class ResourceTags(NamedTuple):
    """What a resource's tags say, once parsed; ``findings`` lists what was wrong."""

    project: str | None
    budget: Decimal | None
    owner: str | None
    exemption: Exemption | None
    findings: tuple[Finding, ...] = ()


@lru_cache(maxsize=4096)
def parse_budget(raw: str) -> Decimal | str:
    """Parse a monthly budget in USD; return the amount, or why it is not one.

    Accepts ``5000``, ``5000.50``, ``5,000`` and ``$5000``. Rejects anything that
    is not a plain positive amount: a guess at a garbled budget is worse than none.
    """
    text = raw.strip()
    if text.startswith("$"):
        text = text[1:].strip()
    if not text:
        return "is empty"
    if not (_PLAIN.match(text) or _GROUPED.match(text)):
        return "is not an amount in USD (use e.g. 5000, 5,000.50 or $5000)"
    try:
        amount = Decimal(text.replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the regexes admit only digits
        return "is not an amount in USD"
    if amount <= 0:
        return "must be greater than zero"
    if amount > MAX_BUDGET:
        return f"is larger than {MAX_BUDGET:,} USD"
    return amount


def parse_exempt(raw: str) -> Exemption | str | None:
    """Parse ``costguard:exempt``: ``true``/``false`` or an ISO-8601 date or time.

    A bare date exempts through the end of that day (UTC). A time without an
    offset is taken as UTC. Returns None for ``false``, or why the value is bad.
    """
    text = raw.strip()
    lowered = text.lower()
    if lowered in {"true", "yes"}:
        return Exemption()
    if lowered in {"false", "no", ""}:
        return None
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return Exemption(datetime.combine(day, time(), tzinfo=UTC) + timedelta(days=1))
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return "is neither true/false nor an ISO-8601 date or time (e.g. 2026-12-31)"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return Exemption(moment.astimezone(UTC))


@lru_cache(maxsize=4096)
def normalise_project(raw: str) -> str | None:
    """Project names are free text; keep them exactly, minus edge whitespace.

    Unicode is normalised to NFC so that the same name typed on two keyboards
    lands in one ledger row.
    """
    text = unicodedata.normalize("NFC", raw.strip())
    if not text or len(text) > MAX_PROJECT_LEN:
        return None
    if _CONTROL.search(text):
        return None
    return text


@dataclass(frozen=True, slots=True)
class _Parsed:
    project: str | None
    budget: Decimal | None
    owner: str | None
    exemption: Exemption | None
    problems: tuple[tuple[FindingCode, str], ...]


@lru_cache(maxsize=8192)
def _parse(
    project_tag: tuple[str, str] | None,
    budget_key: str,
    budget_raw: str | None,
    owner_raw: str | None,
    exempt_key: str,
    exempt_raw: str | None,
) -> _Parsed:
    """The tag values repeat across a fleet; parse each combination once."""
    problems: list[tuple[FindingCode, str]] = []
    project = None
    if project_tag is not None:
        key, raw = project_tag
        project = normalise_project(raw)
        if project is None:
            problems.append(
                (
                    FindingCode.MALFORMED_PROJECT,
                    f"tag {key}={raw!r} is not a project name "
                    f"(1-{MAX_PROJECT_LEN} printable characters); resource left unattributed",
                )
            )
    budget: Decimal | None = None
    if budget_raw is not None:
        parsed = parse_budget(budget_raw)
        if isinstance(parsed, Decimal):
            budget = parsed
        else:
            problems.append(
                (
                    FindingCode.MALFORMED_BUDGET,
                    f"tag {budget_key}={budget_raw!r} {parsed}; budget ignored",
                )
            )
    exemption: Exemption | None = None
    if exempt_raw is not None:
        parsed_exempt = parse_exempt(exempt_raw)
        if isinstance(parsed_exempt, str):
            # Fail safe: a resource whose owner *tried* to exempt it is treated as exempt.
            exemption = Exemption()
            problems.append(
                (
                    FindingCode.MALFORMED_EXEMPT,
                    f"tag {exempt_key}={exempt_raw!r} {parsed_exempt}; treated as exempt until fixed",
                )
            )
        else:
            exemption = parsed_exempt
    owner = (owner_raw or "").strip() or None
    return _Parsed(project, budget, owner, exemption, tuple(problems))


def read_tags(resource_ref: str, tags: Mapping[str, str], keys: TagKeys) -> ResourceTags:
    """Parse a resource's tags into what CostGuard needs, collecting findings."""
    project_tag = None
    for key in keys.project:
        value = tags.get(key)
        if value is not None:
            project_tag = (key, value)
            break
    parsed = _parse(
        project_tag,
        keys.budget,
        tags.get(keys.budget),
        tags.get(keys.owner),
        keys.exempt,
        tags.get(keys.exempt),
    )
    findings = (
        tuple(Finding(code, resource_ref, message) for code, message in parsed.problems)
        if parsed.problems
        else ()
    )
    return ResourceTags(parsed.project, parsed.budget, parsed.owner, parsed.exemption, findings)
