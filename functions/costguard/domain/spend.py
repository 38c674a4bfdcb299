"""Month-to-date accrual, forecast and budget status.

Month-to-date is *accrued*, not inferred from the current rate: each scan adds
``rate x time since the resource was last observed`` to the project's month. A
resource seen for the first time is back-filled from its launch time, bounded by
the month start, and that part is marked as estimated.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from costguard.domain.calendar import (
    hours_left_in_month,
    month_key,
    month_start,
    require_utc,
    split_by_day,
    split_by_month,
)
from costguard.domain.money import ZERO

if TYPE_CHECKING:
    from costguard.domain.attribution import AttributedResource

#: A gap longer than this between two observations is accrued but marked estimated:
#: the resource may have stopped and started in between.
DEFAULT_EXACT_GAP = timedelta(hours=1)


class Observation(NamedTuple):
    """The last time the ledger saw a resource, and what it cost then."""

    key: str
    project: str | None
    usd_per_hour: Decimal
    observed_at: datetime
    first_seen_at: datetime


@dataclass(frozen=True, slots=True)
class Increment:
    usd: Decimal = ZERO
    estimated_usd: Decimal = ZERO
    #: The same spend by UTC day of the month (1-31): what the report's burn-down draws.
    days: Mapping[int, Decimal] = field(default_factory=dict)

    def __add__(self, other: Increment) -> Increment:
        return Increment(
            self.usd + other.usd,
            self.estimated_usd + other.estimated_usd,
            add_days(self.days, other.days),
        )


def add_days(a: Mapping[int, Decimal], b: Mapping[int, Decimal]) -> dict[int, Decimal]:
    """Two per-day maps added day by day."""
    out = dict(a)
    for day, usd in b.items():
        out[day] = out.get(day, ZERO) + usd
    return out


AccrualKey = tuple[str | None, str]
"""(project or None for unattributed, month "YYYY-MM")"""


@dataclass(frozen=True, slots=True)
class Accrual:
    increments: Mapping[AccrualKey, Increment]
    observations: tuple[Observation, ...]


def accrue(
    resources: Iterable[AttributedResource],
    last_seen: Mapping[str, Observation],
    now: datetime,
    exact_gap: timedelta = DEFAULT_EXACT_GAP,
) -> Accrual:
    """Compute what this scan adds to each project's months, and the new observations.

    Unpriced resources accrue nothing (their spend is unknown and is reported as a
    finding) but are still observed, so that pricing them later does not back-fill
    from a launch time the ledger has already passed.

    Exactly-once is the ledger's job: a retried scan recomputes the same increments
    and the ledger refuses to add them to a row that already took that scan.
    """
    now = require_utc(now)
    this_month = month_start(now)
    # Resources share few start instants (the last scan's time, the month start): each
    # instant's hours, split by month, are computed once per call.
    spans: dict[datetime, list[tuple[str, Decimal]]] = {}
    usd: dict[AccrualKey, Decimal] = defaultdict(Decimal)
    # The day split is done once per (project, start instant) on the summed rate, not per
    # resource: a first scan back-fills up to 31 days for every resource.
    rate_from: dict[tuple[str | None, datetime], Decimal] = defaultdict(Decimal)
    estimated_usd: dict[AccrualKey, Decimal] = defaultdict(Decimal)
    observations: list[Observation] = []
    for item in resources:
        res, rate, _basis = item.priced
        if not res.billable:
            continue
        project = item.project
        previous = last_seen.get(res.key)
        launched = require_utc(res.launched_at) if res.launched_at else None
        if previous is not None:
            start = require_utc(previous.observed_at)
            if launched is not None and launched > start:
                start = launched  # stopped and started again since: bill from the new launch
            estimated = (now - start) > exact_gap
            first_seen = previous.first_seen_at
        else:
            start = max(launched or now, this_month)
            estimated = True
            first_seen = now
        if rate is not None and start < now:
            parts = spans.get(start)
            if parts is None:
                parts = spans[start] = split_by_month(start, now)
            for month, hours in parts:
                key = (project, month)
                amount = rate * hours
                usd[key] += amount
                if estimated:
                    estimated_usd[key] += amount
            rate_from[(project, start)] += rate
        observations.append(
            Observation(res.key, project, rate if rate is not None else ZERO, now, first_seen)
        )
    days: dict[AccrualKey, dict[int, Decimal]] = defaultdict(dict)
    for (project, start), rate in rate_from.items():
        for month, day, hours in split_by_day(start, now):
            row = days[(project, month)]
            row[day] = row.get(day, ZERO) + rate * hours
    increments = {
        key: Increment(total, estimated_usd.get(key, ZERO), days.get(key, {}))
        for key, total in usd.items()
    }
    return Accrual(increments, tuple(observations))


#: An observation of a resource that no scan has seen for this long is forgotten.
OBSERVATION_RETENTION = timedelta(days=62)


def carry_forward(
    previous: Mapping[str, Observation],
    seen: Iterable[Observation],
    now: datetime,
    retention: timedelta = OBSERVATION_RETENTION,
) -> tuple[Observation, ...]:
    """The ledger's next snapshot: what this scan saw, plus what it did not see.

    A resource missing from one scan (its region failed, or it stopped) keeps its
    last observation, so that when it is seen again the gap is accrued as estimated
    instead of back-filled from its launch time again.
    """
    merged = {key: o for key, o in previous.items() if require_utc(o.observed_at) > now - retention}
    merged.update((o.key, o) for o in seen)
    return tuple(merged[k] for k in sorted(merged))


class BudgetStatus(StrEnum):
    OK = "ok"
    WARNING = "warning"
    OVER = "over"
    NO_BUDGET = "no-budget"


def forecast_month_end(month_to_date: Decimal, run_rate: Decimal, now: datetime) -> Decimal:
    """Month-end forecast: what is spent, plus the current rate for the hours left."""
    return month_to_date + run_rate * hours_left_in_month(now)


def budget_status(
    budget: Decimal | None, forecast: Decimal, warning_pct: Decimal = Decimal(80)
) -> BudgetStatus:
    """``over`` when the forecast reaches the budget; ``warning`` from ``warning_pct``."""
    if budget is None:
        return BudgetStatus.NO_BUDGET
    if forecast >= budget:
        return BudgetStatus.OVER
    if forecast * 100 >= budget * warning_pct:
        return BudgetStatus.WARNING
    return BudgetStatus.OK


def current_month(now: datetime) -> str:
    return month_key(now)
