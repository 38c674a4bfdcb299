"""Guarding an Organization: slices scanned exactly once, aggregated once per scheduled time.

- :class:`SliceWork` (the queue consumer's use case) scans one account-region into its own
  ledger scope (:func:`costguard.domain.org.slice_scope`) with the single-account
  :class:`~costguard.services.scan.ScanService`, then marks the slice done in the plan.
  The ledger's watermark compare-and-set makes the slice exactly-once; the slice's
  conditional "done" put makes "done" exactly-once; the one call that completes the plan
  aggregates.
- :class:`Aggregation` rolls every slice's month totals and run-rates up per project,
  across accounts, and runs the budget alerts on the result, once per scheduled time
  (a two-phase claim in the plan: claimed with a lease, marked done only after the
  reads, findings and alerts; a failure gives the claim back and a crash loses it when
  the lease runs out, so the deadline sweep aggregates the time all the same): when the
  last slice comes in, or at the deadline, whichever is first. Slices still missing then
  are reported (a finding and an alert naming the account); when they come in later
  their spend is in the next aggregation, never twice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol

from costguard.domain.attribution import ProjectConfig
from costguard.domain.calendar import month_key, require_utc
from costguard.domain.decisions import Savings
from costguard.domain.findings import Finding
from costguard.domain.money import ZERO
from costguard.domain.org import (
    ProjectAdvice,
    ProjectRollup,
    Slice,
    TickPlan,
    missing_slice_findings,
    missing_slices_alert,
    roll_up,
    rolled_up_predictions,
    settle_org_teams,
    settle_tag_budgets,
    settle_tag_owners,
    slice_scope,
    unreported_predictions,
)
from costguard.domain.predictions import PredictionCost
from costguard.domain.spend import budget_status, forecast_month_end
from costguard.domain.teams import TeamConfig, TeamReport
from costguard.domain.text import plural
from costguard.ports import CommitOutcome, Ledger
from costguard.services.alerts import AlertService
from costguard.services.scan import ProjectReport, ScanReport, ScanService, rolled_up_teams


class SliceBook(Protocol):
    """The plans of scheduled times: which slices are expected, done, failing, aggregated."""

    def plan(
        self,
        tick: datetime,
        slices: Iterable[Slice],
        deadline: datetime,
        carried: Iterable[Slice] = (),
    ) -> bool: ...
    def mark_done(
        self,
        tick: datetime,
        s: Slice,
        tag_budgets: Mapping[str, Decimal] | None = None,
        tag_owners: Mapping[str, Sequence[str]] | None = None,
        advice: Sequence[ProjectAdvice] = (),
        tag_teams: Mapping[str, str] | None = None,
        tag_team_budgets: Mapping[str, Decimal] | None = None,
        predictions: Sequence[PredictionCost] | None = None,
    ) -> tuple[bool, TickPlan | None]:
        """Add ``s`` to the time's done slices (and, with it, the budgets and owners its
        scan found tagged, its endpoint variants' cost per prediction, and its advice on
        the digest hour's times); True only for the call that added it. ``predictions``
        None: not reported (the roll-up says so), unlike an empty sequence (no variant).

        The plan comes back (read in full) only when every expected slice is done, so
        that the caller may aggregate; None while some are missing, or when nothing is
        planned. A mark costs the same whatever the plan's size."""
        ...

    def mark_failed(self, tick: datetime, s: Slice, code: str, message: str) -> None: ...
    def get(self, tick: datetime) -> TickPlan | None: ...
    def due(self, since: datetime, now: datetime) -> list[TickPlan]:
        """Plans of times in [since, now] whose deadline passed and that are not done
        (a held aggregation is listed too: its claim refuses until its lease runs out)."""
        ...

    def claim_aggregation(self, tick: datetime, now: datetime, lease: timedelta) -> bool:
        """Phase one: True for the one caller that may aggregate ``tick`` now (not done,
        and not held by a claim whose lease is still running)."""
        ...

    def confirm_aggregation(self, tick: datetime, now: datetime) -> None:
        """Phase two: the time is aggregated; it is never claimable again."""
        ...

    def release_aggregation(self, tick: datetime, claimed_at: datetime) -> None:
        """The aggregation failed: claimable again at once; fenced by the claim's time."""
        ...


@dataclass(frozen=True, slots=True)
class SliceResult:
    slice: Slice
    tick: datetime
    ledger: CommitOutcome
    #: True only for the call that marked the slice done (False: a duplicate or a retry).
    newly_done: bool
    resources: int
    aggregated: OrgReport | None = None
    #: False when a source of the slice could not be read: "no resource" is then unknown.
    complete: bool = True


@dataclass(frozen=True, slots=True)
class OrgReport:
    scope: str
    tick: datetime
    projects: tuple[ProjectReport, ...]
    rollups: Mapping[str | None, ProjectRollup]
    missing: tuple[Slice, ...]
    findings: tuple[Finding, ...]
    alerts: tuple[str, ...] = ()
    #: The teams, each the sum of its projects across every account and region.
    teams: tuple[TeamReport, ...] = ()
    #: Every done slice's endpoint variants' cost per 1,000 predictions, as its scan
    #: computed them (keys carry the account and region), in key order.
    prediction_costs: tuple[PredictionCost, ...] = ()
    #: Done slices that did not report their cost per prediction (an older version's
    #: done item): their endpoints' figures are unknown, not absent and not $0.
    predictions_unreported: tuple[Slice, ...] = ()
    #: Variants left out of the slices' done items (past MAX_PREDICTIONS, or unreadable).
    predictions_cut: int = 0


@dataclass(frozen=True, slots=True)
class OrgSettings:
    scope: str
    projects: Mapping[str, ProjectConfig] = field(default_factory=dict)
    #: The central team table; a project's team comes from ``projects`` (its ``team``).
    teams: Mapping[str, TeamConfig] = field(default_factory=dict)
    warning_pct: Decimal = Decimal(80)
    #: How many slices' ledgers the aggregation reads at once.
    read_workers: int = 16


ScanFor = Callable[[Slice], ScanService]


def plausible(tick: datetime, now: datetime, what: str, refused: str = "not run") -> datetime:
    """A work item's time, refused (``UnplannedSliceError``) when it is implausibly old or new."""
    tick = require_utc(tick)
    if not (now - MAX_SLICE_AGE <= tick <= now + MAX_SLICE_LEAD):
        raise UnplannedSliceError(
            f"{what} at {tick.isoformat()} is more than {MAX_SLICE_AGE} before or "
            f"{MAX_SLICE_LEAD} after now; {refused}"
        )
    return tick


class SliceWork:
    """One work item: scan one account-region at one scheduled time, exactly once."""

    def __init__(
        self,
        book: SliceBook,
        scan_for: ScanFor,
        aggregation: Aggregation | None,
        access_errors: tuple[type[Exception], ...],
        *,
        keeps_advice: Callable[[datetime], bool] = lambda _tick: False,
    ) -> None:
        #: Whether a slice of this time keeps its advice for the roll-up's daily digest.
        self._keeps_advice = keeps_advice
        self._book = book
        self._scan_for = scan_for
        self._aggregation = aggregation
        self._access_errors = access_errors

    def run(self, tick: datetime, s: Slice, now: datetime) -> SliceResult:
        """Raises when the slice fails (after recording why), so that the queue retries it
        and dead-letters it after its last attempt; other slices are not affected."""
        # A message's time is trusted only while it is plausible (the scan's own event
        # check): a DLQ redrive days later or a hand-sent message would otherwise re-accrue,
        # or freeze, a member account's spend. Within the bounds, a slice whose plan is gone
        # is committed by the ledger alone and aggregates nothing.
        tick = plausible(tick, now, f"slice {s}", "not scanned")
        try:
            report = self._scan_for(s).run(tick)
        except self._access_errors as exc:
            self._book.mark_failed(tick, s, str(getattr(exc, "code", type(exc).__name__)), str(exc))
            raise
        newly, plan = self._book.mark_done(
            tick,
            s,
            tagged_budgets(report),
            tagged_owners(report),
            project_advice(report) if self._keeps_advice(tick) else (),
            tag_teams=tagged_teams(report),
            tag_team_budgets=tagged_team_budgets(report),
            predictions=report.prediction_costs,
        )
        aggregated = None
        # Not only the call that completed the plan: a retry of it (its aggregation
        # failed after the claim, which was given back) aggregates too. The claim keeps
        # it to one at a time, and a duplicate finds the time held or done.
        if (
            plan is not None
            and plan.complete
            and plan.aggregated_at is None
            and self._aggregation is not None
        ):
            aggregated = self._aggregation.run(tick, now)
        return SliceResult(
            s,
            tick,
            report.ledger,
            newly,
            report.resource_count,
            aggregated,
            complete=not report.failed_sources,
        )


def tagged_budgets(report: ScanReport) -> dict[str, Decimal]:
    """The budgets a slice's scan settled from its resources' tags (not the table's): the
    aggregation settles them across slices as one account's scan does."""
    return {
        p.project: p.budget_usd
        for p in report.projects
        if p.project is not None and p.budget_source == "tag" and p.budget_usd is not None
    }


def tagged_teams(report: ScanReport) -> dict[str, str]:
    """The team a slice's scan settled for each of its projects: the aggregation settles
    them across slices as one account's scan does."""
    return {p.project: p.team for p in report.projects if p.project is not None and p.team}


def tagged_team_budgets(report: ScanReport) -> dict[str, Decimal]:
    """The team budgets a slice's scan settled from its resources' tags (not the table's)."""
    return {
        t.team: t.budget_usd
        for t in report.teams
        if t.budget_source == "tag" and t.budget_usd is not None
    }


def project_advice(report: ScanReport) -> list[ProjectAdvice]:
    """The slice's advice, each piece with the project of the resource it is about (the
    roll-up has no resources to look it up in)."""
    project_of = {
        a.priced.resource.key: p.project
        for p in (*report.projects, report.unattributed)
        for a in p.resources
    }
    return [ProjectAdvice(project_of.get(a.resource), a) for a in report.advice]


def tagged_owners(report: ScanReport) -> dict[str, tuple[str, ...]]:
    """The owners a slice's scan found for its projects (tagged, or the table's): the
    aggregation unions them across accounts, and the table's still win there."""
    return {p.project: p.owners for p in report.projects if p.project is not None and p.owners}


class UnplannedSliceError(ValueError):
    """A work item for an implausible time (too old, or ahead): refused before any call."""


#: The same bounds as a scheduled scan's event time (costguard/events.py).
MAX_SLICE_AGE = timedelta(hours=3)
MAX_SLICE_LEAD = timedelta(minutes=5)
#: How long an aggregation's claim holds before another run may take it over: a Lambda
#: runs at most 15 minutes, so a holder still at work is never overtaken, and one that
#: crashed delays its time by at most this (plus one fan-out tick for the sweep).
AGGREGATION_LEASE = timedelta(minutes=15)


class AggregationError(RuntimeError):
    """Some due times could not be aggregated (each is retried by the next sweep);
    ``reports`` holds those that were."""

    def __init__(
        self, reports: tuple[OrgReport, ...], failures: tuple[tuple[datetime, Exception], ...]
    ) -> None:
        shown = "; ".join(
            f"{tick.isoformat()}: {type(exc).__name__}: {exc}" for tick, exc in failures[:5]
        )
        more = f"; and {len(failures) - 5} more" if len(failures) > 5 else ""
        super().__init__(f"{plural(len(failures), 'time')} not aggregated: {shown}{more}")
        self.reports = reports
        self.failures = failures


class Aggregation:
    """Roll the slices up per project across accounts, once per scheduled time."""

    def __init__(
        self,
        book: SliceBook,
        ledger: Ledger,
        settings: OrgSettings,
        *,
        after: AfterAggregation | None = None,
        savings: SavingsSource | None = None,
    ) -> None:
        self._savings = savings
        self._book = book
        self._ledger = ledger
        self._s = settings
        #: Budget and missing-slice alerts on the rolled-up report (None: report only).
        self._after = after

    def sweep(self, now: datetime, lookback: timedelta) -> list[OrgReport]:
        """Aggregate every time whose deadline has passed and that is not done, including
        one whose aggregation failed or crashed after its claim (once the lease is out).

        Every due time is attempted; if any failed, :class:`AggregationError` is raised
        afterwards (with the reports of those that went through), so a failure is seen
        and retried by the next sweep, and blocks no other time.
        """
        now = require_utc(now)
        reports: list[OrgReport] = []
        failures: list[tuple[datetime, Exception]] = []
        for plan in self._book.due(now - lookback, now):
            try:
                report = self.run(plan.tick, now)
            except Exception as exc:
                failures.append((plan.tick, exc))
                continue
            if report is not None:
                reports.append(report)
        if failures:
            raise AggregationError(tuple(reports), tuple(failures)) from failures[0][1]
        return reports

    def run(self, tick: datetime, now: datetime) -> OrgReport | None:
        """None when this time is aggregated already, or being aggregated by another call
        whose lease is running (or nothing was planned).

        Claimed before the work and marked done only after it: an exception on the way (a
        throttled ledger read, an alert that could not be published) gives the claim back
        and is raised, and a crash leaves it to run out after :data:`AGGREGATION_LEASE`;
        either way the time is aggregated later, never lost. Everything it writes is
        idempotent (findings per day, alerts through their claims), so a second attempt
        adds nothing twice.
        """
        now = require_utc(now)
        if not self._book.claim_aggregation(tick, now, AGGREGATION_LEASE):
            return None
        try:
            report = self._aggregate(tick, now)
        except BaseException:
            with contextlib.suppress(Exception):  # the lease frees it anyway
                self._book.release_aggregation(tick, now)
            raise
        self._book.confirm_aggregation(tick, now)
        return report

    def _aggregate(self, tick: datetime, now: datetime) -> OrgReport:
        plan = self._book.get(tick)
        if plan is None:  # expired between the claim and this read
            raise LookupError(f"the plan of {tick.isoformat()} is gone")
        month = month_key(tick)
        with ThreadPoolExecutor(max_workers=max(1, self._s.read_workers)) as pool:
            per_slice = list(
                pool.map(lambda s: (s, self._slice_figures(s, month)), sorted(plan.rolled_up))
            )
        rollups = roll_up(per_slice)
        names = sorted({p for p in rollups if p is not None} | set(self._s.projects))
        configured = {p for p, c in self._s.projects.items() if c.budget is not None}
        tagged, conflicts = settle_tag_budgets(plan, configured)
        owners = settle_tag_owners(plan)
        saved = self._savings(month, tick) if self._savings is not None else {}
        reports = tuple(
            replace(r, savings=saved[r.project]) if r.project in saved else r
            for r in (
                self._project(name, rollups.get(name), tick, tagged.get(name), owners.get(name, ()))
                for name in names
            )
        )
        # Teams across accounts: a team's figures are the sums of its projects', each
        # already summed over every account and region it was seen in.
        teams_settled = settle_org_teams(
            plan, {p: c.team for p, c in self._s.projects.items() if c.team}, self._s.teams
        )
        reports = tuple(
            replace(r, team=teams_settled.team_of.get(r.project)) if r.project else r
            for r in reports
        )
        teams = rolled_up_teams(
            reports,
            teams_settled.team_of,
            teams_settled.budgets,
            self._s.teams,
            self._s.warning_pct,
            {p: r.accounts for p, r in rollups.items() if p is not None},
        )
        findings = missing_slice_findings(plan) + conflicts + list(teams_settled.findings)
        incomplete = frozenset(
            p for p, r in rollups.items() if r.accounts & {s.account for s in plan.missing}
        )
        report = ScanReport(
            scope=self._s.scope,
            now=tick,
            month=month,
            regions=tuple(sorted({s.region for s in plan.expected})),
            projects=reports,
            unattributed=self._project(None, rollups.get(None), tick),
            pending_capacity=(),
            findings=tuple(findings),
            ledger=CommitOutcome.APPLIED,
            catalog_as_of="",
            duration_s=0.0,
            api_calls={},
            incomplete_projects=incomplete,
            advice=tuple(a.advice for pieces in plan.advice.values() for a in pieces),
            advice_projects={
                a.advice.resource: a.project for pieces in plan.advice.values() for a in pieces
            },
            teams=teams,
            prediction_costs=rolled_up_predictions(plan),
        )
        self._ledger.record_findings(self._s.scope, tick, findings)
        alerts = self._after(report, findings, plan, now) if self._after else ()
        return OrgReport(
            self._s.scope,
            tick,
            reports,
            rollups,
            plan.missing,
            tuple(findings),
            alerts,
            teams,
            prediction_costs=report.prediction_costs,
            predictions_unreported=unreported_predictions(plan),
            predictions_cut=sum(plan.predictions_cut.values()),
        )

    def _slice_figures(
        self, s: Slice, month: str
    ) -> dict[str | None, tuple[Decimal, Decimal, Decimal, Mapping[str, Decimal] | None]]:
        """A slice's (month-to-date, estimated, run-rate, month-to-date by category) per
        project, from its ledger.

        The run-rate counts what its last committed scan saw (observed then), not what
        is only carried forward from earlier scans.
        """
        scope = slice_scope(self._s.scope, s)
        out: dict[str | None, tuple[Decimal, Decimal, Decimal, Mapping[str, Decimal] | None]] = {
            p: (row.usd, row.estimated_usd, ZERO, row.by_category)
            for p, row in self._ledger.month_totals(scope, month).items()
        }
        mark = self._ledger.watermark(scope)
        for o in self._ledger.observations(scope).values():
            if mark is not None and o.observed_at == mark:
                mtd, est, rate, split = out.get(o.project, (ZERO, ZERO, ZERO, {}))
                out[o.project] = (mtd, est, rate + o.usd_per_hour, split)
        return out

    def _project(
        self,
        name: str | None,
        rollup: ProjectRollup | None,
        now: datetime,
        tagged: Decimal | None = None,
        tagged_owners: tuple[str, ...] = (),
    ) -> ProjectReport:
        config = self._s.projects.get(name) if name is not None else None
        budget = config.budget if config else None
        source = "config" if budget is not None else "tag" if tagged is not None else "none"
        if budget is None:
            budget = tagged
        r = rollup or ProjectRollup(name)
        forecast = forecast_month_end(r.month_to_date_usd, r.run_rate_usd_per_hour, now)
        return ProjectReport(
            project=name,
            budget_usd=budget,
            budget_source=source,
            run_rate_usd_per_hour=r.run_rate_usd_per_hour,
            month_to_date_usd=r.month_to_date_usd,
            estimated_usd=r.estimated_usd,
            forecast_month_usd=forecast,
            status=budget_status(budget, forecast, self._s.warning_pct),
            # The central table's owners win, as in one account; else those tagged on the
            # project's resources in any member account.
            owners=config.owners if config and config.owners else tagged_owners,
            resources=(),
            unpriced=0,
            month_to_date_by_category=r.month_to_date_by_category,
        )


#: What the guards saved this month per project, across accounts (month, now).
SavingsSource = Callable[[str, datetime], Mapping[str | None, Savings]]

AfterAggregation = Callable[[ScanReport, Sequence[Finding], TickPlan, datetime], tuple[str, ...]]


def alert_after(alerts: AlertService) -> AfterAggregation:
    """The aggregation's alerts through an :class:`~costguard.services.alerts.AlertService`:
    budgets on the rolled-up projects, and one alert naming the missing accounts."""

    def after(
        report: ScanReport, _findings: Sequence[Finding], plan: TickPlan, now: datetime
    ) -> tuple[str, ...]:
        run = alerts.attempt(report, now)
        missing = missing_slices_alert(plan, now)
        if missing is not None:
            run = run + alerts.attempt_delivery([missing])
        run.raise_if_failed()
        return tuple(a.alert_id for a in run.sent)

    return after
