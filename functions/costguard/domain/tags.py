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

from costguard.domain.findings import Finding, FindingCode
from costguard.names import Tags

MAX_PROJECT_LEN = 256
#: Budgets above this are a typo, not a budget.
MAX_BUDGET = Decimal("1000000000")

_PLAIN = re.compile(r"^\d+(\.\d+)?$")
_GROUPED = re.compile(r"^\d{1,3}(,\d{3})+(\.\d+)?$")


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


@dataclass(frozen=True, slots=True)
class ResourceTags:
    """What a resource's tags say, once parsed; ``findings`` lists what was wrong."""

    project: str | None
    budget: Decimal | None
    owner: str | None
    exemption: Exemption | None
    findings: tuple[Finding, ...] = ()


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


def normalise_project(raw: str) -> str | None:
    """Project names are free text; keep them exactly, minus edge whitespace.

    Unicode is normalised to NFC so that the same name typed on two keyboards
    lands in one ledger row.
    """
    text = unicodedata.normalize("NFC", raw.strip())
    if not text or len(text) > MAX_PROJECT_LEN:
        return None
    if any(unicodedata.category(ch) == "Cc" for ch in text):
        return None
    return text


def read_tags(resource_ref: str, tags: Mapping[str, str], keys: TagKeys) -> ResourceTags:
    """Parse a resource's tags into what CostGuard needs, collecting findings."""
    findings: list[Finding] = []
    project: str | None = None
    for key in keys.project:
        if key in tags:
            project = normalise_project(tags[key])
            if project is None:
                findings.append(
                    Finding(
                        FindingCode.MALFORMED_PROJECT,
                        resource_ref,
                        f"tag {key}={tags[key]!r} is not a project name "
                        f"(1-{MAX_PROJECT_LEN} printable characters); resource left unattributed",
                    )
                )
            break

    budget: Decimal | None = None
    if keys.budget in tags:
        parsed = parse_budget(tags[keys.budget])
        if isinstance(parsed, Decimal):
            budget = parsed
        else:
            findings.append(
                Finding(
                    FindingCode.MALFORMED_BUDGET,
                    resource_ref,
                    f"tag {keys.budget}={tags[keys.budget]!r} {parsed}; budget ignored",
                )
            )

    exemption: Exemption | None = None
    if keys.exempt in tags:
        parsed_exempt = parse_exempt(tags[keys.exempt])
        if isinstance(parsed_exempt, str):
            # Fail safe: a resource whose owner *tried* to exempt it is treated as exempt.
            exemption = Exemption()
            findings.append(
                Finding(
                    FindingCode.MALFORMED_EXEMPT,
                    resource_ref,
                    f"tag {keys.exempt}={tags[keys.exempt]!r} {parsed_exempt}; "
                    "treated as exempt until fixed",
                )
            )
        else:
            exemption = parsed_exempt

    owner = tags.get(keys.owner, "").strip() or None
    return ResourceTags(project, budget, owner, exemption, tuple(findings))
