"""The month report's model: per project a burn-down against the budget, and the rest of
what a person reviewing the month wants on one page. Pure: the caller reads the ledger and
the scan; these functions only arrange what they read.

The forecast's point is :func:`~costguard.domain.spend.forecast_month_end` (spent, plus
the current run-rate for the hours left). Its range is the same sum at the lowest and the
highest hourly rate the project ran at lately: the run-rate samples of the last
:data:`RATE_LOOKBACK` (one a scan), each complete day of the last :data:`DAY_LOOKBACK` in
the ledger's day map (that day's spend / 24), and the current run-rate. A steady project
gets a narrow range; one that spiked gets a range as wide as what it did. Without any
history the range is the point, and the report says so.
"""

from __future__ import annotations

import calendar
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from functools import reduce
from itertools import pairwise

from costguard.domain.billed import BilledMonth
from costguard.domain.calendar import hours_left_in_month, month_key, require_utc
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.money import ZERO, cents
from costguard.domain.predictions import PredictionCost
from costguard.domain.spend import (
    NOT_SPLIT,
    BudgetStatus,
    add_days,
    budget_status,
    forecast_month_end,
    month_split,
    month_split_cents,
)

#: Run-rate samples this old and newer widen the forecast's range.
RATE_LOOKBACK = timedelta(days=3)
#: Complete days of the day map this far back widen it too.
DAY_LOOKBACK = 7
HOURS_PER_MONTH = Decimal(730)
TOP_RESOURCES = 20


class Kind(StrEnum):
    """The report's resource families (what a bill groups by)."""

    EC2 = "EC2"
    EKS = "EKS"
    SAGEMAKER = "SageMaker"
    STORAGE = "Storage"


def kind_of(kind: str, eks_cluster: str | None) -> Kind:
    """An inventory kind (``ec2-instance``, ...) as the report groups it; an EC2 instance
    of an EKS node group counts as EKS."""
    if kind.startswith("sagemaker-"):
        return Kind.SAGEMAKER
    if kind.startswith("eks-") or (kind == "ec2-instance" and eks_cluster):
        return Kind.EKS
    if kind in ("ebs-volume", "ebs-snapshot", "s3-bucket"):
        return Kind.STORAGE
    return Kind.EC2


@dataclass(frozen=True, slots=True)
class Point:
    """``day``: days since the month began (fractional); ``usd``: spent by then."""

    day: float
    usd: Decimal


@dataclass(frozen=True, slots=True)
class Crossing:
    """A budget threshold (percent) and when the month reaches it: ``day`` (days since the
    month began, None when a row without days cannot say), ``projected`` when only the
    forecast reaches it."""

    pct: int
    usd: Decimal
    day: float | None
    projected: bool


@dataclass(frozen=True, slots=True)
class Burn:
    """One project's month: spent by day, the budget and where the month is heading."""

    project: str | None
    month: str
    days_in_month: int
    #: Days since the month began at the report's instant (the month's length if closed).
    elapsed: float
    budget: Decimal | None
    month_to_date: Decimal
    #: Cumulative spend at the end of each day, then at ``elapsed``; empty when the ledger
    #: kept no days for this month (a row written before it did): month-to-date only.
    series: tuple[Point, ...]
    has_days: bool
    #: Spend the ledger holds for the month in no day (written before it kept days).
    undated_usd: Decimal
    run_rate: Decimal
    forecast: Decimal
    forecast_low: Decimal
    forecast_high: Decimal
    #: How many rates the range rests on (0: no history, the range is the point).
    range_basis: int
    crossings: tuple[Crossing, ...]
    status: BudgetStatus
    unpriced: int
    owners: tuple[str, ...] = ()
    #: ``month_to_date`` split into compute, storage and not_split (accrued before the
    #: ledger split months by category), at full precision.
    by_category: Mapping[str, Decimal] = field(default_factory=dict)

    @property
    def by_category_cents(self) -> dict[str, Decimal]:
        """The split to the cent, adding up to the month-to-date as shown."""
        return month_split_cents(self.month_to_date, self.by_category)

    @property
    def not_split(self) -> Decimal:
        """What the month holds in no category, to the cent (0: all of it is split)."""
        return self.by_category_cents[NOT_SPLIT]


def burn(
    project: str | None,
    month: str,
    now: datetime,
    *,
    budget: Decimal | None,
    month_to_date: Decimal,
    days: Mapping[int, Decimal] | None,
    undated_usd: Decimal = ZERO,
    run_rate: Decimal = ZERO,
    rate_samples: Sequence[tuple[datetime, Decimal]] = (),
    thresholds: Sequence[int] = (50, 80, 100),
    warning_pct: Decimal = Decimal(80),
    unpriced: int = 0,
    owners: tuple[str, ...] = (),
    by_category: Mapping[str, Decimal] | None = None,
) -> Burn:
    """One project's burn-down for ``month`` as seen at ``now``.

    A month before ``now``'s is closed: its forecast is what it spent. Spend a row holds
    in no day (written before the ledger kept days) is drawn at the month's start, so the
    line still ends at the month-to-date.
    """
    now = require_utc(now)
    year, mon = (int(x) for x in month.split("-"))
    start = datetime(year, mon, 1, tzinfo=UTC)
    length = calendar.monthrange(year, mon)[1]
    current = month_key(now) == month
    elapsed = (now - start).total_seconds() / 86400 if current else float(length)
    elapsed = min(max(elapsed, 0.0), float(length))
    series: list[Point] = []
    if days is not None:
        cumulative = undated_usd
        series.append(Point(0.0, cumulative))
        whole = int(elapsed)
        for day in range(1, whole + 1):
            cumulative += days.get(day, ZERO)
            series.append(Point(float(day), cumulative))
        if elapsed > whole:
            series.append(Point(elapsed, month_to_date))
        elif series:
            # The day map is to the micro-dollar; the month's total is exact.
            series[-1] = Point(series[-1].day, month_to_date)
    if current:
        forecast = forecast_month_end(month_to_date, run_rate, now)
        rates = [run_rate]
        rates += [usd for at, usd in rate_samples if now - RATE_LOOKBACK <= at <= now]
        if days is not None:
            # Whole days after the project's first spend: a day before it existed (or the
            # day it began, part of a day) says nothing about its rate.
            today = int(elapsed) + 1
            first = min((d for d, usd in days.items() if usd > 0), default=today)
            rates += [
                days.get(d, ZERO) / 24 for d in range(max(first + 1, today - DAY_LOOKBACK), today)
            ]
        left = hours_left_in_month(now)
        low = month_to_date + min(rates) * left
        high = month_to_date + max(rates) * left
        basis = len(rates) - 1
    else:
        forecast = low = high = month_to_date
        basis = 0
    return Burn(
        project=project,
        month=month,
        days_in_month=length,
        elapsed=elapsed,
        budget=budget,
        month_to_date=month_to_date,
        series=tuple(series),
        has_days=days is not None,
        undated_usd=undated_usd,
        run_rate=run_rate,
        forecast=forecast,
        forecast_low=min(low, forecast),
        forecast_high=max(high, forecast),
        range_basis=basis,
        crossings=crossings(budget, thresholds, series, month_to_date, elapsed, forecast, length),
        status=budget_status(budget, forecast, warning_pct),
        unpriced=unpriced,
        owners=owners,
        # Not given: none of it is known by category (not split), never all compute.
        by_category=by_category or month_split(month_to_date, None),
    )


def crossings(
    budget: Decimal | None,
    thresholds: Sequence[int],
    series: Sequence[Point],
    month_to_date: Decimal,
    elapsed: float,
    forecast: Decimal,
    length: int,
) -> tuple[Crossing, ...]:
    """When the month reached (or, on the forecast's line, will reach) each threshold."""
    if budget is None or budget <= 0:
        return ()
    out = []
    for pct in sorted(set(thresholds)):
        usd = budget * pct / 100
        if month_to_date >= usd:
            out.append(Crossing(pct, usd, _first_reached(series, usd), projected=False))
        elif forecast >= usd and forecast > month_to_date:
            share = float((usd - month_to_date) / (forecast - month_to_date))
            out.append(Crossing(pct, usd, elapsed + share * (length - elapsed), projected=True))
    return tuple(out)


def _first_reached(series: Sequence[Point], usd: Decimal) -> float | None:
    """The day the line first reaches ``usd``, between two points; None without days."""
    for before, after in pairwise(series):
        if after.usd >= usd:
            if before.usd >= usd or after.usd == before.usd:
                return before.day
            share = float((usd - before.usd) / (after.usd - before.usd))
            return before.day + share * (after.day - before.day)
    return series[0].day if series and series[0].usd >= usd else None


# -- the rest of the page -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopResource:
    key: str
    name: str
    kind: Kind
    instance_type: str
    region: str
    project: str | None
    owner: str | None
    #: None: unpriced (never shown as $0).
    usd_per_hour: Decimal | None


@dataclass(frozen=True, slots=True)
class KindSpend:
    kind: Kind
    resources: int
    usd_per_hour: Decimal
    unpriced: int


@dataclass(frozen=True, slots=True)
class Action:
    """One audit record of the month: done, warned (with its deadline) or dry-run."""

    at: datetime
    action: str
    resource: str
    project: str | None
    outcome: str
    usd_per_month: Decimal
    deadline: str | None
    detail: str


@dataclass(frozen=True, slots=True)
class Actions:
    taken: tuple[Action, ...] = ()
    #: Warned, not yet acted: each with its deadline.
    pending: tuple[Action, ...] = ()
    #: Dry-run: what CostGuard would have done.
    would: tuple[Action, ...] = ()
    saved_usd_per_month: Decimal = ZERO
    would_save_usd_per_month: Decimal = ZERO


@dataclass(frozen=True, slots=True)
class FindingGroup:
    code: str
    severity: str
    count: int
    examples: tuple[Finding, ...]


@dataclass(frozen=True, slots=True)
class BlindSpots:
    """What the report could not see: its numbers are lower bounds where this is not empty."""

    #: ``region/source`` that could not be read.
    unreadable: tuple[str, ...] = ()
    #: instance type -> how many running resources have no price.
    unpriced_types: Mapping[str, int] = field(default_factory=dict)
    #: Projects whose ledger rows keep no days (written by an older version).
    month_to_date_only: tuple[str, ...] = ()
    #: Projects whose month holds spend accrued before the ledger split months by
    #: category (compute, storage): shown as "not split".
    not_split: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TeamBurn:
    """One team's month: the sums of its projects' rows as the report shows them."""

    team: str
    projects: tuple[str, ...]
    budget: Decimal | None
    month_to_date: Decimal
    forecast: Decimal
    forecast_low: Decimal
    forecast_high: Decimal
    run_rate: Decimal
    status: BudgetStatus
    #: The month-to-date by category, to the cent: the sums of its projects' as shown.
    by_category: Mapping[str, Decimal] = field(default_factory=dict)


def team_burns(
    burns: Iterable[Burn],
    team_of: Mapping[str, str],
    budgets: Mapping[str, Decimal | None],
    warning_pct: Decimal = Decimal(80),
) -> tuple[TeamBurn, ...]:
    """Each team with the projects of ``burns`` it holds, summed (to the cent, as the project
    rows are shown, so a team's row is the sum of the rows listed under it). A team of
    ``budgets`` with a budget is listed even with no project in the month."""
    members: dict[str, list[Burn]] = {team: [] for team in budgets}
    for b in burns:
        team = team_of.get(b.project or "") if b.project is not None else None
        if team is not None:
            members.setdefault(team, []).append(b)
    out = []
    for team in sorted(members):
        mine = sorted(members[team], key=lambda b: b.project or "")
        budget = budgets.get(team)
        if not mine and budget is None:
            continue  # a team with no project in this month and no budget says nothing
        forecast = sum((cents(b.forecast) for b in mine), ZERO)
        out.append(
            TeamBurn(
                team=team,
                projects=tuple(b.project for b in mine if b.project is not None),
                budget=budget,
                month_to_date=sum((cents(b.month_to_date) for b in mine), ZERO),
                forecast=forecast,
                forecast_low=sum((cents(b.forecast_low) for b in mine), ZERO),
                forecast_high=sum((cents(b.forecast_high) for b in mine), ZERO),
                run_rate=sum((b.run_rate for b in mine), ZERO),
                status=budget_status(budget, forecast, warning_pct),
                by_category=reduce(
                    add_days, (b.by_category_cents for b in mine), month_split(ZERO, {})
                ),
            )
        )
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Report:
    scope: str
    month: str
    generated_at: datetime
    burns: tuple[Burn, ...]
    unattributed: Burn | None
    kinds: tuple[KindSpend, ...]
    top: tuple[TopResource, ...]
    actions: Actions
    advice: tuple[tuple[str, str, Decimal, str], ...]
    findings: tuple[FindingGroup, ...]
    catalog_as_of: str
    catalog_age_days: int | None
    blind: BlindSpots
    thresholds: tuple[int, ...]
    #: True when the live view (resources, rates, advice) is of another month than ``month``.
    live: bool = True
    #: What the report was narrowed to ("project p", "team t"), for its heading.
    narrowed: tuple[str, ...] = ()
    #: What AWS billed each project this month beside what the scan saw (Cost Explorer,
    #: with ``costExplorer`` on); None when it was never read for this month.
    billed: BilledMonth | None = None
    #: Each endpoint variant's cost per 1,000 predictions, now and per day (live only).
    prediction_costs: tuple[PredictionCost, ...] = ()
    #: The teams, each the sum of its projects' rows (empty: the deployment has none).
    teams: tuple[TeamBurn, ...] = ()
    #: project -> its team, as settled by the scan (tags and the central table, today).
    team_of: Mapping[str, str] = field(default_factory=dict)

    # The totals are sums of the rows as shown, to the cent: the summary card's total is
    # then the sum of the projects listed under it. Defect: the demo's card said
    # $55,447.24, its five projects $55,447.23 (the unrounded figures summed).

    @property
    def month_to_date(self) -> Decimal:
        rows = (*self.burns, *([self.unattributed] if self.unattributed else []))
        return sum((cents(b.month_to_date) for b in rows), ZERO)

    @property
    def forecast(self) -> Decimal:
        rows = (*self.burns, *([self.unattributed] if self.unattributed else []))
        return sum((cents(b.forecast) for b in rows), ZERO)

    @property
    def budget(self) -> Decimal:
        return sum((b.budget for b in self.burns if b.budget is not None), ZERO)


_STATUS_ORDER = {
    BudgetStatus.OVER: 0,
    BudgetStatus.WARNING: 1,
    BudgetStatus.OK: 2,
    BudgetStatus.NO_BUDGET: 3,
}


def ordered(burns: Iterable[Burn]) -> tuple[Burn, ...]:
    """Worst first: over budget, then warning, then the rest, each by forecast."""
    return tuple(
        sorted(burns, key=lambda b: (_STATUS_ORDER[b.status], -b.forecast, b.project or ""))
    )


def actions_of(events: Iterable[tuple[datetime, str, str, str, Mapping[str, object]]]) -> Actions:
    """The month's audit records ``(at, action, resource, outcome, details)`` as the report
    shows them: the last record of each resource and action says where it stands."""
    latest: dict[tuple[str, str], Action] = {}
    for at, action, resource, outcome, details in sorted(events, key=lambda e: e[0]):
        project = details.get("project")
        latest[(action, resource)] = Action(
            at=at,
            action=action,
            resource=resource,
            project=project if isinstance(project, str) else None,
            outcome=outcome,
            usd_per_month=_decimal(details.get("usd_per_month_saved")),
            deadline=str(details["deadline"]) if details.get("deadline") else None,
            detail=str(details.get("detail") or ""),
        )
    taken = tuple(a for a in latest.values() if a.outcome == "acted")
    pending = tuple(a for a in latest.values() if a.outcome in ("warned", "waiting"))
    would = tuple(a for a in latest.values() if a.outcome in ("would-act", "would-warn"))
    return Actions(
        taken=taken,
        pending=tuple(sorted(pending, key=lambda a: (a.deadline or "", a.resource))),
        would=would,
        saved_usd_per_month=sum((a.usd_per_month for a in taken), ZERO),
        would_save_usd_per_month=sum((a.usd_per_month for a in would), ZERO),
    )


def _decimal(value: object) -> Decimal:
    try:
        return Decimal(str(value)) if value not in (None, "") else ZERO
    except ArithmeticError:
        return ZERO


def group_findings(findings: Iterable[Finding], examples: int = 5) -> tuple[FindingGroup, ...]:
    """One group per finding code, the most severe first, a few examples each."""
    rank = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    groups: dict[FindingCode, list[Finding]] = defaultdict(list)
    for f in findings:
        groups[f.code].append(f)
    out = [
        FindingGroup(
            code.value,
            min((f.severity for f in found), key=lambda s: rank[s]).value,
            len(found),
            tuple(sorted(found, key=lambda f: f.resource)[:examples]),
        )
        for code, found in groups.items()
    ]
    severity_rank = {s.value: n for s, n in rank.items()}
    return tuple(sorted(out, key=lambda g: (severity_rank[g.severity], -g.count, g.code)))


def unpriced_types(items: Iterable[tuple[str | None, Decimal | None]]) -> dict[str, int]:
    """``(instance type, $/h)`` of billable resources -> how many of each type are unpriced."""
    counts: Counter[str] = Counter(t or "unknown type" for t, usd in items if usd is None)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
