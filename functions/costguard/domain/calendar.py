"""Billing-month arithmetic in UTC, the calendar AWS bills in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

SECONDS_PER_HOUR = Decimal(3600)


def require_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment.isoformat()}: pass a timezone-aware UTC time")
    return moment.astimezone(UTC)


def month_key(moment: datetime) -> str:
    moment = require_utc(moment)
    return f"{moment.year:04d}-{moment.month:02d}"


def month_start(moment: datetime) -> datetime:
    moment = require_utc(moment)
    return datetime(moment.year, moment.month, 1, tzinfo=UTC)


def next_month_start(moment: datetime) -> datetime:
    start = month_start(moment)
    return (start + timedelta(days=32)).replace(day=1)


def hours_between(start: datetime, end: datetime) -> Decimal:
    seconds = Decimal(str((end - start).total_seconds()))
    return max(seconds, Decimal(0)) / SECONDS_PER_HOUR


def hours_left_in_month(now: datetime) -> Decimal:
    return hours_between(require_utc(now), next_month_start(now))


def split_by_month(start: datetime, end: datetime) -> list[tuple[str, Decimal]]:
    """Hours of [start, end) that fall in each calendar month, oldest first."""
    start, end = require_utc(start), require_utc(end)
    parts: list[tuple[str, Decimal]] = []
    cursor = start
    while cursor < end:
        boundary = min(next_month_start(cursor), end)
        parts.append((month_key(cursor), hours_between(cursor, boundary)))
        cursor = boundary
    return parts
