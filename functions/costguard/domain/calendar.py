"""Billing-month arithmetic in UTC, the calendar AWS bills in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import lru_cache

#: How far in the past an event's ``time`` may be, for every Lambda that takes events (the
#: scan's and the guards' schedules, the on-launch check's EventBridge rules). The schedule
#: retries for up to 1 h (``max_event_age``) and Lambda's asynchronous retries for up to 1 h
#: more, so a genuine retry is at most about 2 h late; 3 h leaves a margin.
MAX_EVENT_AGE = timedelta(hours=3)
#: How far ahead of the Lambda's clock an event's ``time`` may be (clock skew).
MAX_EVENT_LEAD = timedelta(minutes=5)


def require_utc(moment: datetime) -> datetime:
    if moment.tzinfo is UTC:
        return moment
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment.isoformat()}: pass a timezone-aware UTC time")
    return moment.astimezone(UTC)


def month_key(moment: datetime) -> str:
    moment = require_utc(moment)
    return _month_key(moment.year, moment.month)


@lru_cache(maxsize=256)
def _month_key(year: int, month: int) -> str:
    return f"{year:04d}-{month:02d}"


def month_start(moment: datetime) -> datetime:
    moment = require_utc(moment)
    return datetime(moment.year, moment.month, 1, tzinfo=UTC)


def next_month_start(moment: datetime) -> datetime:
    start = month_start(moment)
    return (start + timedelta(days=32)).replace(day=1)


_MICROSECONDS_PER_HOUR = Decimal(3_600_000_000)


def hours_between(start: datetime, end: datetime) -> Decimal:
    """Exact hours from ``start`` to ``end`` (0 if ``end`` is earlier), to the microsecond."""
    delta = end - start
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return Decimal(max(micros, 0)) / _MICROSECONDS_PER_HOUR


def hours_left_in_month(now: datetime) -> Decimal:
    return hours_between(require_utc(now), next_month_start(now))


def split_by_month(start: datetime, end: datetime) -> list[tuple[str, Decimal]]:
    """Hours of [start, end) that fall in each calendar month, oldest first."""
    start, end = require_utc(start), require_utc(end)
    if start >= end:
        return []
    if (start.year, start.month) == (end.year, end.month):
        return [(month_key(start), hours_between(start, end))]
    parts: list[tuple[str, Decimal]] = []
    cursor = start
    while cursor < end:
        boundary = min(next_month_start(cursor), end)
        parts.append((month_key(cursor), hours_between(cursor, boundary)))
        cursor = boundary
    return parts


def split_by_day(start: datetime, end: datetime) -> list[tuple[str, int, Decimal]]:
    """Hours of [start, end) that fall in each UTC day, oldest first, as
    ``(month "YYYY-MM", day of the month, hours)``: a day's spend for the burn-down."""
    start, end = require_utc(start), require_utc(end)
    parts: list[tuple[str, int, Decimal]] = []
    cursor = start
    while cursor < end:
        midnight = datetime(cursor.year, cursor.month, cursor.day, tzinfo=UTC) + timedelta(days=1)
        boundary = min(midnight, end)
        parts.append((month_key(cursor), cursor.day, hours_between(cursor, boundary)))
        cursor = boundary
    return parts
