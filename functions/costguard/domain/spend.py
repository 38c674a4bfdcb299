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
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from costguard.domain.calendar import (
    hours_between,
    hours_left_in_month,
    month_key,
    month_start,
    require_utc,
    split_by_month,
)
from costguard.domain.models import COMPUTE, STORAGE
from costguard.domain.money import ZERO, cents_adding_up

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
    #: The same spend by category (``compute``, ``storage``). Spend an increment does not
    #: place in a category (none made by :func:`accrue`) is "not split", never compute.
    by_category: Mapping[str, Decimal] = field(default_factory=dict)

    def __add__(self, other: Increment) -> Increment:
        return Increment(
            self.usd + other.usd,
            self.estimated_usd + other.estimated_usd,
            add_days(self.days, other.days),
            add_days(self.by_category, other.by_category),
        )


K = TypeVar("K")


def add_days(a: Mapping[K, Decimal], b: Mapping[K, Decimal]) -> dict[K, Decimal]:
    """Two maps of spend (by day, or by category) added key by key."""
    out = dict(a)
    for key, usd in b.items():
        out[key] = out.get(key, ZERO) + usd
    return out


#: The categories a month-to-date is split into, as a resource's ``category`` names them.
CATEGORIES: tuple[str, ...] = (COMPUTE, STORAGE)
#: The part of a month-to-date in no category: accrued before the ledger split months by
#: category (a month begun by an older version). Shown as such, never guessed into compute.
NOT_SPLIT = "not_split"


def month_split(usd: Decimal, by_category: Mapping[str, Decimal] | None) -> dict[str, Decimal]:
    """A month-to-date as ``{compute, storage, not_split}``, at full precision.

    ``by_category`` None: the ledger row predates the split, so all of it is not split.
    Otherwise what the categories do not hold is not split (an older version's spend
    the row held when this one began adding categories). The three add up to ``usd``;
    shown to the cent, :func:`costguard.domain.money.cents_adding_up` keeps them so.
    """
    split = {c: (by_category or {}).get(c, ZERO) for c in CATEGORIES}
    split[NOT_SPLIT] = usd - sum(split.values(), ZERO) if by_category is not None else usd
    return split


def month_split_cents(total: Decimal, split: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """A month-to-date's split (compute, storage, not_split) to the cent, adding up to the
    month-to-date as shown: each part rounded alone could miss it by a cent.

    Not split is what the categories do not account for of ``total``, whatever ``split``
    says of it: a figure summed without its split (or with part of it) shows the rest as
    not split, never as compute.
    """
    known = {c: split.get(c, ZERO) for c in CATEGORIES}
    return cents_adding_up(total, {**known, NOT_SPLIT: total - sum(known.values(), ZERO)})


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
    # Each start instant's split by month, and the rates that start then, summed by
    # project: spend by day is computed from those sums, not per resource (a first scan
    # back-fills up to 31 days for every resource).
    spans: dict[datetime, tuple[list[tuple[str, Decimal]], dict[str | None, Decimal]]] = {}
    usd: dict[AccrualKey, Decimal] = defaultdict(Decimal)
    estimated_usd: dict[AccrualKey, Decimal] = defaultdict(Decimal)
    by_category: dict[AccrualKey, dict[str, Decimal]] = defaultdict(dict)
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
            span = spans.get(start)
            if span is None:
                span = spans[start] = (split_by_month(start, now), {})
            parts, starting = span
            category = res.category
            for month, hours in parts:
                key = (project, month)
                amount = rate * hours
                usd[key] += amount
                split = by_category[key]
                split[category] = split.get(category, ZERO) + amount
                if estimated:
                    estimated_usd[key] += amount
            starting[project] = starting.get(project, ZERO) + rate
        observations.append(
            Observation(res.key, project, rate if rate is not None else ZERO, now, first_seen)
        )
    days = spend_by_day({start: starting for start, (_, starting) in spans.items()}, now)
    increments = {
        key: Increment(
            total, estimated_usd.get(key, ZERO), days.get(key, {}), dict(by_category[key])
        )
        for key, total in usd.items()
    }
    return Accrual(increments, tuple(observations))


def spend_by_day(
    starting: Mapping[datetime, Mapping[str | None, Decimal]], now: datetime
) -> dict[AccrualKey, dict[int, Decimal]]:
    """Spend per (project, month) and UTC day of the month, from the rates that start at
    each instant (``{start: {project: $/h}}``) and run to ``now``.

    One sweep over the days: a day's spend is the rate of everything started before it
    times the day's hours, plus each rate that starts within it, from its start. Its cost
    is the days plus the (start, project) pairs, however many resources share them; the
    hours are computed once per day and once per start. Days with nothing running are
    left out (never a $0 day).
    """
    out: dict[AccrualKey, dict[int, Decimal]] = defaultdict(dict)
    starts = sorted(start for start in starting if start < now)
    if not starts:
        return out
    first = starts[0]
    day = datetime(first.year, first.month, first.day, tzinfo=first.tzinfo)
    # The days, and which starts fall in each, with their hours to the day's end.
    running: dict[str | None, Decimal] = {}
    i = 0
    while day < now:
        end = min(day + timedelta(days=1), now)
        hours = hours_between(day, end)
        spent = {project: rate * hours for project, rate in running.items()}
        while i < len(starts) and starts[i] < end:
            partial = hours_between(starts[i], end)
            for project, rate in starting[starts[i]].items():
                spent[project] = spent.get(project, ZERO) + rate * partial
                running[project] = running.get(project, ZERO) + rate
            i += 1
        month = month_key(day)
        for project, amount in spent.items():
            if amount:
                out[(project, month)][day.day] = amount
        day += timedelta(days=1)
    return out


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
