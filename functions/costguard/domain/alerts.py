"""Alerts as data: what to tell whom, decided by pure functions from a scan's numbers.

Each alert carries a ``dedupe`` key. The alert service claims that key in the
ledger with a conditional write before publishing, which is what makes budget
thresholds fire at most once per project, threshold and month, even when two
scans run at the same time.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

from costguard.domain.calendar import month_key
from costguard.domain.findings import Finding, Severity
from costguard.domain.money import ZERO, cents, per_hour


class AlertKind(StrEnum):
    BUDGET_THRESHOLD = "budget-threshold"
    BUDGET_FORECAST = "budget-forecast"
    BURN_RATE_ANOMALY = "burn-rate-anomaly"
    BURN_RATE_RECOVERED = "burn-rate-recovered"
    UNATTRIBUTED = "unattributed-spend"
    FINDINGS_DIGEST = "findings-digest"
    AWS_COST_ANOMALY = "aws-cost-anomaly"
    ACTION_WARNING = "action-warning"
    ACTION_TAKEN = "action-taken"


class AlertSeverity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass(frozen=True, slots=True)
class AlertResource:
    key: str
    kind: str
    region: str
    instance_type: str | None
    usd_per_hour: Decimal | None
    owner: str | None = None
    change: str = ""  # "new", "+$12.00/h", ...


@dataclass(frozen=True, slots=True)
class Alert:
    """One message. ``alert_id`` is stable: the same event always has the same id."""

    alert_id: str
    kind: AlertKind
    project: str | None
    severity: AlertSeverity
    title: str
    summary: str
    at: datetime
    why: str = ""
    next_steps: tuple[str, ...] = ()
    owners: tuple[str, ...] = ()
    resources: tuple[AlertResource, ...] = ()
    facts: Mapping[str, str] = field(default_factory=dict)
    details: tuple[str, ...] = ()
    #: Claimed once in the ledger before publishing; several keys may be claimed at once.
    dedupe: tuple[str, ...] = ()


# -- budgets ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProjectNumbers:
    """What the alert rules need to know about a project after a scan."""

    project: str
    budget: Decimal | None
    month_to_date: Decimal
    forecast: Decimal
    run_rate: Decimal
    owners: tuple[str, ...] = ()
    resources: tuple[AlertResource, ...] = ()


def money_severity(
    at_stake_usd: Decimal, floor: AlertSeverity = AlertSeverity.INFO
) -> AlertSeverity:
    """Severity follows the money: $10k+ a month at stake is critical, $1k+ a warning."""
    found = (
        AlertSeverity.CRITICAL
        if at_stake_usd >= 10_000
        else AlertSeverity.WARNING
        if at_stake_usd >= 1_000
        else AlertSeverity.INFO
    )
    order = list(AlertSeverity)
    return max(found, floor, key=order.index)


def budget_alerts(p: ProjectNumbers, thresholds: Sequence[int], now: datetime) -> list[Alert]:
    """Month-to-date thresholds crossed and a forecast over budget, as candidate alerts.

    All crossed thresholds are claimed, but only the highest is sent: a project that
    jumps from 0 to 120% gets one message, not three.
    """
    if p.budget is None or p.budget <= 0:
        return []
    month = month_key(now)
    used = p.month_to_date * 100 / p.budget
    crossed = [t for t in sorted(thresholds) if used >= t]
    alerts: list[Alert] = []
    top = sorted(p.resources, key=lambda r: -(r.usd_per_hour or ZERO))[:5]
    if crossed:
        highest = crossed[-1]
        over = p.month_to_date - p.budget
        floor = (
            AlertSeverity.CRITICAL
            if highest >= 100
            else AlertSeverity.WARNING
            if highest >= 80
            else AlertSeverity.INFO
        )
        alerts.append(
            Alert(
                alert_id=f"{AlertKind.BUDGET_THRESHOLD}/{month}/{highest}/{p.project}",
                kind=AlertKind.BUDGET_THRESHOLD,
                project=p.project,
                severity=money_severity(max(over, p.forecast - p.budget, ZERO), floor),
                title=f"{p.project}: {highest}% of the monthly budget spent",
                summary=(
                    f"{p.project} has spent ${cents(p.month_to_date):,} of its ${cents(p.budget):,} budget "
                    f"for {month} ({used:.0f}%); at {per_hour(p.run_rate)} it ends the month at "
                    f"${cents(p.forecast):,}."
                ),
                at=now,
                why=f"month-to-date crossed {highest}% of the budget",
                next_steps=_budget_steps(p),
                owners=p.owners,
                resources=tuple(top),
                facts=_facts(p, used),
                dedupe=tuple(f"budget/{p.project}/{month}/mtd-{t}" for t in crossed),
            )
        )
    if p.forecast >= p.budget:
        overrun = p.forecast - p.budget
        alerts.append(
            Alert(
                alert_id=f"{AlertKind.BUDGET_FORECAST}/{month}/{p.project}",
                kind=AlertKind.BUDGET_FORECAST,
                project=p.project,
                severity=money_severity(overrun, AlertSeverity.WARNING),
                title=f"{p.project}: forecast ${cents(p.forecast):,} exceeds the ${cents(p.budget):,} budget",
                summary=(
                    f"At the current {per_hour(p.run_rate)}, {p.project} will spend ${cents(p.forecast):,} in "
                    f"{month}, ${cents(overrun):,} over its ${cents(p.budget):,} budget."
                ),
                at=now,
                why="month-to-date plus the current run-rate for the rest of the month exceeds the budget",
                next_steps=_budget_steps(p),
                owners=p.owners,
                resources=tuple(top),
                facts=_facts(p, used),
                dedupe=(f"budget/{p.project}/{month}/forecast-100",),
            )
        )
    return alerts


def _facts(p: ProjectNumbers, used: Decimal) -> dict[str, str]:
    return {
        "budget": f"${cents(p.budget or ZERO):,}",
        "month_to_date": f"${cents(p.month_to_date):,}",
        "budget_used": f"{used:.1f}%",
        "forecast": f"${cents(p.forecast):,}",
        "run_rate": f"{per_hour(p.run_rate)}",
    }


def _budget_steps(p: ProjectNumbers) -> tuple[str, ...]:
    return (
        "Stop or scale down what is not needed: the largest resources are listed below.",
        "Move interruptible training to spot capacity.",
        f"If the spend is expected, raise the budget (tag costguard:budget) for {p.project}.",
    )


# -- burn-rate anomalies --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnomalyPolicy:
    """A spike must be both relative and absolute: a defensible default is >= 2x and >= $10/h."""

    min_ratio: Decimal = Decimal(2)
    min_delta_usd_per_hour: Decimal = Decimal(10)
    #: Baseline samples needed before judging; a project's first scans set its baseline.
    min_samples: int = 3
    #: Recovered once the rate is back under this multiple of the frozen baseline.
    recovery_ratio: Decimal = Decimal("1.25")
    cooldown: timedelta = timedelta(hours=1)
    #: Samples this recent are "now", not baseline.
    exclude_recent: timedelta = timedelta(minutes=1)
    window: timedelta = timedelta(hours=24)


def baseline_rate(
    history: Iterable[tuple[datetime, Decimal]], now: datetime, policy: AnomalyPolicy
) -> tuple[Decimal, int] | None:
    """Median $/h of the project's samples in the window before now: robust to one-off spikes."""
    samples = [r for t, r in history if now - policy.window <= t < now - policy.exclude_recent]
    if len(samples) < policy.min_samples:
        return None
    return statistics.median(samples), len(samples)


def is_spike(baseline: Decimal, current: Decimal, policy: AnomalyPolicy) -> bool:
    """Relative *and* absolute: 2x of $0.50/h is noise; +$10/h on $500/h is noise too."""
    delta = current - baseline
    return delta >= policy.min_delta_usd_per_hour and current >= baseline * policy.min_ratio


def has_recovered(baseline: Decimal, current: Decimal, policy: AnomalyPolicy) -> bool:
    return (
        current - baseline < policy.min_delta_usd_per_hour
        or current <= baseline * policy.recovery_ratio
    )


def root_cause(
    current: Sequence[AlertResource],
    previous_rates: Mapping[str, Decimal],
    first_seen: Mapping[str, datetime],
    since: datetime,
) -> tuple[AlertResource, ...]:
    """Resources that appeared or got dearer since ``since``, ranked by the $/h they added."""
    ranked: list[tuple[Decimal, AlertResource]] = []
    for r in current:
        now_rate = r.usd_per_hour or ZERO
        seen = first_seen.get(r.key)
        if seen is None or seen >= since:
            ranked.append((now_rate, _with_change(r, "new")))
            continue
        before = previous_rates.get(r.key)
        if before is not None and now_rate > before:
            ranked.append((now_rate - before, _with_change(r, f"+{per_hour(now_rate - before)}")))
    ranked.sort(key=lambda pair: (-pair[0], pair[1].key))
    return tuple(r for delta, r in ranked if delta > 0)[:10]


def _with_change(r: AlertResource, change: str) -> AlertResource:
    return AlertResource(r.key, r.kind, r.region, r.instance_type, r.usd_per_hour, r.owner, change)


def anomaly_alert(
    project: str,
    baseline: Decimal,
    current: Decimal,
    causes: Sequence[AlertResource],
    owners: Sequence[str],
    now: datetime,
    episode: str,
    policy: AnomalyPolicy | None = None,
) -> Alert:
    policy = policy or AnomalyPolicy()
    delta = current - baseline
    monthly = delta * 730
    cause_owners = tuple(dict.fromkeys([*owners, *(c.owner for c in causes if c.owner)]))
    top = causes[0] if causes else None
    because = (
        f" Largest change: {top.instance_type or top.kind} {top.key} ({top.change}, {per_hour(top.usd_per_hour or ZERO)})."
        if top
        else ""
    )
    ratio = (current / baseline) if baseline > 0 else None
    return Alert(
        alert_id=f"{AlertKind.BURN_RATE_ANOMALY}/{project}/{episode}",
        kind=AlertKind.BURN_RATE_ANOMALY,
        project=project,
        severity=money_severity(monthly, AlertSeverity.WARNING),
        title=f"{project}: spend jumped to {per_hour(current)} from a {per_hour(baseline)} baseline",
        summary=(
            f"{project} now burns {per_hour(current)}, "
            + (f"{ratio:.1f}x " if ratio is not None else "")
            + f"its usual {per_hour(baseline)} (+{per_hour(delta)}, about ${cents(monthly):,} a month if it stays)."
            + because
        ),
        at=now,
        why=(
            f"run-rate is at least {policy.min_ratio}x the project's median over the last "
            f"{policy.window.total_seconds() / 3600:.0f} h and at least {per_hour(policy.min_delta_usd_per_hour)} above it"
        ),
        next_steps=(
            "Check that the new resources below are meant to run, and for how long.",
            "Stop what was left running; use spot for interruptible training.",
        ),
        owners=cause_owners,
        resources=tuple(causes),
        facts={
            "baseline": f"{per_hour(baseline)}",
            "current": f"{per_hour(current)}",
            "delta": f"+{per_hour(delta)}",
        },
        dedupe=(f"anomaly/{project}/{episode}",),
    )


def recovery_alert(
    project: str,
    baseline: Decimal,
    current: Decimal,
    since: datetime,
    now: datetime,
    episode: str,
    owners: Sequence[str],
) -> Alert:
    return Alert(
        alert_id=f"{AlertKind.BURN_RATE_RECOVERED}/{project}/{episode}",
        kind=AlertKind.BURN_RATE_RECOVERED,
        project=project,
        severity=AlertSeverity.INFO,
        title=f"{project}: spend back to {per_hour(current)}",
        summary=(
            f"{project}'s run-rate is back to {per_hour(current)} (baseline {per_hour(baseline)}) "
            f"after the spike that started {since:%Y-%m-%d %H:%M} UTC."
        ),
        at=now,
        why="run-rate fell back near the baseline",
        owners=tuple(owners),
        facts={"baseline": f"{per_hour(baseline)}", "current": f"{per_hour(current)}"},
        dedupe=(f"anomaly-recovered/{project}/{episode}",),
    )


# -- unattributed spend and findings ---------------------------------------------------


def unattributed_alert(resources: Sequence[AlertResource], now: datetime) -> Alert | None:
    """Accelerators with no project; each resource is claimed once per day."""
    if not resources:
        return None
    day = now.date().isoformat()
    total = sum((r.usd_per_hour or ZERO for r in resources), ZERO)
    ranked = tuple(sorted(resources, key=lambda r: (-(r.usd_per_hour or ZERO), r.key)))
    return Alert(
        alert_id=f"{AlertKind.UNATTRIBUTED}/{day}/{ranked[0].key}",
        kind=AlertKind.UNATTRIBUTED,
        project=None,
        severity=money_severity(total * 730, AlertSeverity.WARNING),
        title=f"{len(ranked)} resource(s) with no project: {per_hour(total)}",
        summary=(
            f"{len(ranked)} accelerator instance(s) or their volumes run without a costguard:project tag, "
            f"costing {per_hour(total)} (about ${cents(total * 730):,} a month). Nobody's budget sees them."
        ),
        at=now,
        why="no costguard:project (or fallback) tag, and no node group or cluster to inherit one from",
        next_steps=(
            "Tag each resource with costguard:project (and costguard:owner).",
            "Stop it if nobody claims it.",
        ),
        owners=tuple(dict.fromkeys(r.owner for r in ranked if r.owner)),
        resources=ranked,
        facts={"run_rate": f"{per_hour(total)}", "resources": str(len(ranked))},
        dedupe=tuple(f"unattributed/{r.key}/{day}" for r in ranked),
    )


def findings_digest(findings: Sequence[Finding], now: datetime, hour_utc: int = 8) -> Alert | None:
    """Malformed tags, unpriced types and scan failures: once a day, from ``hour_utc``."""
    if now.hour < hour_utc:
        return None
    relevant = [f for f in findings if f.severity is not Severity.INFO]
    if not relevant:
        return None
    day = now.date().isoformat()
    counts: dict[str, int] = {}
    for f in relevant:
        counts[f.code.value] = counts.get(f.code.value, 0) + 1
    lines = tuple(f"{f.code.value}: {f.resource}: {f.message}" for f in relevant[:25])
    return Alert(
        alert_id=f"{AlertKind.FINDINGS_DIGEST}/{day}",
        kind=AlertKind.FINDINGS_DIGEST,
        project=None,
        severity=AlertSeverity.WARNING
        if any(f.severity is Severity.ERROR for f in relevant)
        else AlertSeverity.INFO,
        title=f"CostGuard daily digest: {len(relevant)} configuration finding(s)",
        summary="; ".join(f"{n} {code}" for code, n in sorted(counts.items())),
        at=now,
        why="these make CostGuard's numbers incomplete until they are fixed",
        next_steps=(
            "Fix the tags named below; run `costguard prices refresh` for unpriced types.",
        ),
        facts={code: str(n) for code, n in sorted(counts.items())},
        details=lines,
        dedupe=(f"digest/{day}",),
    )


def cost_anomaly_alert(
    anomaly: Mapping[str, Any], now: datetime, min_impact_usd: Decimal = Decimal(100)
) -> Alert | None:
    """Forward one AWS Cost Anomaly Detection anomaly (``ce:GetAnomalies`` shape)."""
    impact = anomaly.get("Impact") or {}
    total = Decimal(str(impact.get("TotalImpact", impact.get("MaxImpact", 0))))
    if total < min_impact_usd:
        return None
    causes = anomaly.get("RootCauses") or []
    lines = tuple(
        " / ".join(
            str(c[k]) for k in ("Service", "Region", "UsageType", "LinkedAccountName") if c.get(k)
        )
        for c in causes[:5]
    )
    anomaly_id = str(anomaly.get("AnomalyId", ""))
    return Alert(
        alert_id=f"{AlertKind.AWS_COST_ANOMALY}/{anomaly_id}",
        kind=AlertKind.AWS_COST_ANOMALY,
        project=None,
        severity=money_severity(total * 30, AlertSeverity.WARNING),
        title=f"AWS Cost Anomaly Detection: ${cents(total):,} unexpected spend",
        summary=(
            f"AWS Cost Anomaly Detection reports ${cents(total):,} of unexpected spend "
            f"from {anomaly.get('AnomalyStartDate', '?')}"
            + (f"; root cause: {lines[0]}" if lines else "")
            + ". (AWS sees spend 8-24 h late; CostGuard's own alerts are minutes behind.)"
        ),
        at=now,
        why="forwarded from AWS Cost Anomaly Detection",
        facts={
            "total_impact": f"${cents(total):,}",
            "monitor": str(anomaly.get("MonitorArn", ""))[-60:],
        },
        details=lines,
        dedupe=(f"ce-anomaly/{anomaly_id}",),
    )
