"""Answering a warning: keep, snooze, act now or exempt, and who may answer. Pure.

A warning (an idle stop, a stale-data delete, a maximum lifetime) carries its answers. Each
answer becomes a decision the executor carries out like any other: claimed once, scope and
exemption re-checked, audited with who answered and how, reported in dry-run.

- **Keep 4 hours** and **Keep until tomorrow 09:00** (in the deployment's time zone) write
  ``costguard:exempt`` with that instant: the guard's next run skips the resource until
  then, and warns again after it.
- **Act now** acts at once (a confirmation first, in the channel).
- **Exempt…** writes ``costguard:exempt`` with an end date at most 90 days ahead, and the
  reason in the audit record.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from costguard.domain.calendar import require_utc
from costguard.domain.text import truncate

KEEP_FOR = timedelta(hours=4)
#: "Keep until tomorrow" ends at this local time.
MORNING = time(9, 0)
#: The longest exemption an answer may grant: past it, a person edits the tag on purpose.
MAX_EXEMPT_DAYS = 90
MAX_REASON_CHARS = 500


class Answer(StrEnum):
    KEEP_4H = "keep-4h"
    KEEP_UNTIL_TOMORROW = "keep-until-tomorrow"
    ACT_NOW = "act-now"
    EXEMPT = "exempt"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why an answer is not taken; ``status`` is what the endpoint answers with."""

    reason: str
    status: int = 400


def parse_answer(raw: object) -> Answer | Refusal:
    if isinstance(raw, str):
        for a in Answer:
            if raw == a.value:
                return a
    return Refusal(f"not an answer CostGuard knows: {truncate(str(raw), 40)!r}")


def time_zone(name: str) -> ZoneInfo | Refusal:
    """The deployment's time zone (an IANA name such as Europe/Paris), or why not."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return Refusal(f"unknown time zone {truncate(name, 60)!r}", status=500)


def keep_until(answer: Answer, now: datetime, zone: ZoneInfo) -> datetime:
    """Until when a keep answer holds the action off, in UTC.

    "Tomorrow 09:00" is the next day's 09:00 on the wall clocks of ``zone``: across a DST
    change it is still 09:00 there (PEP 495 resolves a wall time that a change skips or
    repeats; no zone changes its clocks at 09:00).
    """
    now = require_utc(now)
    if answer is Answer.KEEP_4H:
        return now + KEEP_FOR
    if answer is not Answer.KEEP_UNTIL_TOMORROW:
        raise ValueError(f"{answer} is not a keep answer")
    local_day = now.astimezone(zone).date() + timedelta(days=1)
    return datetime.combine(local_day, MORNING, tzinfo=zone).astimezone(UTC)


def exemption_until(requested: date, now: datetime) -> datetime | Refusal:
    """The end of an exemption asked for through the dialog: through the end of that UTC day,
    from today to at most :data:`MAX_EXEMPT_DAYS` ahead."""
    today = require_utc(now).date()
    if requested < today:
        return Refusal(f"the end date {requested.isoformat()} is in the past")
    if requested > today + timedelta(days=MAX_EXEMPT_DAYS):
        return Refusal(
            f"an exemption ends at most {MAX_EXEMPT_DAYS} days ahead "
            f"({(today + timedelta(days=MAX_EXEMPT_DAYS)).isoformat()}); "
            "tag costguard:exempt by hand for longer"
        )
    return datetime.combine(requested + timedelta(days=1), time(0), tzinfo=UTC)


def clean_reason(raw: object) -> str | Refusal:
    """An exemption's reason as the audit keeps it: one line of printable text."""
    if not isinstance(raw, str) or not raw.strip():
        return Refusal("an exemption needs a reason")
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in raw).split())
    # Judged after cleaning: zero-width spaces, bidi marks or lone accents are no reason.
    if not any(unicodedata.category(ch)[0] in "LNPS" for ch in text):
        return Refusal("an exemption needs a reason")
    if len(text) > MAX_REASON_CHARS:
        return Refusal(f"the reason is longer than {MAX_REASON_CHARS} characters")
    return text


@dataclass(frozen=True, slots=True)
class Answerer:
    """Who pressed the button or followed the link, as the channel vouches for it."""

    #: The Slack member ID (U…/W…), or the e-mail address the link was sent to.
    id: str
    #: How they answered: "slack" or "email".
    via: str
    #: A display name for the message and the audit ("@maria"); the id when unknown.
    name: str = ""

    def __str__(self) -> str:
        named = f"{self.name} " if self.name and self.name.lstrip("@") != self.id else ""
        return f"{named}({self.id}, {self.via})"


def may_answer(who: Answerer, owners: Sequence[str], admins: Collection[str]) -> bool:
    """The resource's owners (``costguard:owner``: Slack member IDs or e-mail addresses)
    and the deployment's admins may answer; nobody else. E-mail addresses compare without
    case; Slack IDs exactly."""

    def norm(value: str) -> str:
        return value.strip().lower() if "@" in value else value.strip()

    allowed = {norm(o) for o in owners} | {norm(a) for a in admins}
    return norm(who.id) in allowed


@dataclass(frozen=True, slots=True)
class AnswerRequest:
    """One accepted answer, for the act path."""

    guard: str
    resource: str
    answer: Answer
    answerer: Answerer
    at: datetime
    #: Keep and exempt: until when the action is held off.
    until: datetime | None = None
    reason: str = ""
    #: Slack: where the warning's message is updated in place.
    response_url: str | None = None
    #: The same request twice (a retried delivery) is one answer.
    request_id: str = ""
    #: The warning answered, by its deadline as tagged (from the signed button or link);
    #: empty when the button or link predates it.
    deadline: str = ""


def answer_event(request: AnswerRequest) -> dict[str, Any]:
    """The act Lambda's event for one answer (``{"answer": {...}}``): plain JSON."""
    return {
        "answer": {
            "guard": request.guard,
            "resource": request.resource,
            "answer": request.answer.value,
            "by": {
                "id": request.answerer.id,
                "via": request.answerer.via,
                "name": request.answerer.name,
            },
            "at": request.at.isoformat(),
            "until": request.until.isoformat() if request.until else None,
            "reason": request.reason,
            "response_url": request.response_url,
            "request_id": request.request_id,
            "deadline": request.deadline,
        }
    }


def read_answer_event(event: Mapping[str, Any]) -> AnswerRequest | Refusal:
    """An answer event back (the act Lambda's side); a malformed one is a refusal."""
    raw = event.get("answer")
    if not isinstance(raw, Mapping):
        return Refusal("the event carries no answer")
    try:
        answer = parse_answer(raw["answer"])
        if isinstance(answer, Refusal):
            return answer
        by = _mapping(raw["by"])
        until = raw.get("until")
        return AnswerRequest(
            guard=str(raw["guard"]),
            resource=str(raw["resource"]),
            answer=answer,
            answerer=Answerer(str(by["id"]), str(by["via"]), str(by.get("name", ""))),
            at=require_utc(datetime.fromisoformat(str(raw["at"]))),
            until=require_utc(datetime.fromisoformat(str(until))) if until else None,
            reason=str(raw.get("reason") or ""),
            response_url=_text(raw.get("response_url")),
            request_id=str(raw.get("request_id") or ""),
            deadline=str(raw.get("deadline") or ""),
        )
    except (KeyError, TypeError, ValueError) as exc:
        return Refusal(f"the answer event is malformed: {type(exc).__name__}")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
