"""Alerts as data: what to tell whom, decided by pure functions from a scan's numbers.

Each alert carries a ``dedupe`` key. The alert service claims that key in the
ledger with a conditional write before publishing, which is what makes budget
thresholds fire at most once per project, threshold and month, even when two
scans run at the same time.

Every alert is bounded: it lists at most :data:`MAX_LISTED_RESOURCES` resources (the
dearest) and says how many more there are, because one message per scan must carry
any fleet, and SNS refuses a message over 256 KiB. :func:`shrink_steps` gives the
smaller forms a channel can fall back to. Times are UTC: ``Alert.at`` is always UTC,
whatever offset the caller's ``now`` carried, so no local time is labelled "UTC".
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

from costguard.domain.advice import Advice
from costguard.domain.calendar import month_key, require_utc
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.money import ZERO, cents, per_hour
from costguard.domain.text import plural, truncate

#: An alert names at most this many resources, the dearest first; it counts the rest.
MAX_LISTED_RESOURCES = 20
#: And at most this many owners (a project of per-user notebooks has hundreds).
MAX_LISTED_OWNERS = 20
#: The digest lists at most this many findings, each line at most ``MAX_LINE_CHARS``.
MAX_DIGEST_LINES = 25
MAX_LINE_CHARS = 300
SEE_THE_REST = "run `costguard scan` or see the CostGuard dashboard for the full list"


class AlertKind(StrEnum):
    BUDGET_THRESHOLD = "budget-threshold"
    BUDGET_FORECAST = "budget-forecast"
    BURN_RATE_ANOMALY = "burn-rate-anomaly"
    BURN_RATE_RECOVERED = "burn-rate-recovered"
    UNATTRIBUTED = "unattributed-spend"
    FINDINGS_DIGEST = "findings-digest"
    AWS_COST_ANOMALY = "aws-cost-anomaly"
    SCAN_FAILED = "scan-failed"
    SCAN_RECOVERED = "scan-recovered"
    ACTION_WARNING = "action-warning"
    ACTION_TAKEN = "action-taken"
    ADVICE_DIGEST = "advice-digest"
    #: A running accelerator outside its project's policy ($/h limit, spot, region).
    LAUNCH_POLICY = "launch-policy"


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
    #: When it last started (an instance's last launch): a launch-policy claim is per launch.
    launched_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AnswerTo:
    """What an action warning's answers are about: the guard that warned, and the resource."""

    guard: str
    resource: str
    #: When the guard acts unless answered: an e-mailed answer link expires by then.
    deadline: datetime | None = None


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
    #: Resources the alert is about but does not list. When > 0, the last line of
    #: ``details`` says so (see :func:`list_top`).
    omitted_resources: int = 0
    #: An action warning its owners can answer (keep, act now, exempt): see
    #: docs/answering-warnings.md. None for every other alert.
    answer_to: AnswerTo | None = None


def utc_label(moment: datetime) -> str:
    """``2026-11-20 09:00 UTC``, converted first: a local time is never labelled UTC."""
    return f"{require_utc(moment):%Y-%m-%d %H:%M} UTC"


def utc_stamp(moment: datetime) -> str:
    """A compact UTC stamp for ids and keys: ``20261120T090000Z``."""
    return f"{require_utc(moment):%Y%m%dT%H%M%SZ}"


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut between words and marked with ``...`` (ASCII:
    subjects are ASCII); never part of an amount or an ARN (:func:`.text.truncate`)."""
    return truncate(text, limit, "...")


def _owners(owners: Iterable[str | None]) -> tuple[str, ...]:
    """Distinct owners, in order, at most :data:`MAX_LISTED_OWNERS`."""
    return tuple(dict.fromkeys(o for o in owners if o))[:MAX_LISTED_OWNERS]


def _by_cost(r: AlertResource) -> tuple[Decimal, str]:
    return (-(r.usd_per_hour or ZERO), r.key)


def _base_details(alert: Alert) -> tuple[str, ...]:
    """``details`` without the "and N more" line that :func:`list_top` maintains."""
    return alert.details[:-1] if alert.omitted_resources else alert.details


def list_top(alert: Alert, limit: int = MAX_LISTED_RESOURCES) -> Alert:
    """Keep the ``limit`` dearest resources and count the rest, in the domain's words.

    The "and N more" line goes last in ``details`` (every channel renders details);
    shrinking again recounts it rather than adding a second line. ``dedupe`` keeps
    every key: the unlisted resources were still announced, as a count.
    """
    if len(alert.resources) <= limit:
        return alert
    ranked = sorted(alert.resources, key=_by_cost)
    kept, dropped = tuple(ranked[:limit]), ranked[limit:]
    omitted = alert.omitted_resources + len(dropped)
    dropped_rate = sum((r.usd_per_hour or ZERO for r in dropped), ZERO)
    more = f"and {plural(omitted, 'more resource')}"
    if dropped_rate > 0 and not alert.omitted_resources:
        more += f" ({per_hour(dropped_rate)})"
    return replace(
        alert,
        resources=kept,
        details=(*_base_details(alert), f"{more}; {SEE_THE_REST}"),
        omitted_resources=omitted,
    )


def _cut_details(alert: Alert, lines: int) -> Alert:
    base = _base_details(alert)
    if len(base) <= lines:
        return alert
    kept = tuple(clip(d, MAX_LINE_CHARS) for d in base[:lines])
    if lines:
        kept += (f"({plural(len(base) - lines, 'more line')} not shown)",)
    tail = alert.details[-1:] if alert.omitted_resources else ()
    return replace(alert, details=(*kept, *tail))


#: (resources listed, detail lines, owners kept), tried in order after the alert as it is.
_SHRINK_LADDER = ((10, 10, 20), (5, 5, 10), (1, 2, 5), (0, 0, 5))


def shrink_steps(alert: Alert) -> Iterator[Alert]:
    """The alert, then smaller and smaller forms of it, always the same ones.

    A channel with a size limit sends the first form that fits. The last form keeps
    the id, kind, severity, project and dedupe keys, the gist of the text and the
    count of resources, and is a few KiB at most whatever the input was.
    """
    yield alert
    current = alert
    for resources, lines, owners in _SHRINK_LADDER:
        current = _cut_details(list_top(current, resources), lines)
        current = replace(current, owners=current.owners[:owners])
        yield current
    yield replace(
        current,
        title=clip(current.title, 150),
        summary=clip(current.summary, 500),
        why=clip(current.why, 300),
        next_steps=tuple(clip(s, 200) for s in current.next_steps[:3]),
        owners=tuple(clip(o, 100) for o in current.owners[:5]),
        facts={clip(k, 40): clip(v, 120) for k, v in list(current.facts.items())[:8]},
        details=tuple(clip(d, MAX_LINE_CHARS) for d in current.details[-1:])
        if current.omitted_resources
        else (),
    )


# -- budgets ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProjectNumbers:
    """What the alert rules need to know about a project (or a team) after a scan."""

    project: str
    budget: Decimal | None
    month_to_date: Decimal
    forecast: Decimal
    run_rate: Decimal
    owners: tuple[str, ...] = ()
    resources: tuple[AlertResource, ...] = ()
    #: The team's projects when these are a team's numbers (``team``); else empty.
    members: tuple[str, ...] = ()
    #: True: ``project`` names a team, whose budget alerts go through the same rules,
    #: claimed under keys of their own (``team-budget/...``, never a project's ``budget/...``).
    team: bool = False


def money_severity(
    at_stake_usd: Decimal, floor: AlertSeverity = AlertSeverity.INFO
) -> AlertSeverity:
    """Severity follows the money: $10k+ a month at stake is critical, $1k+ a warning."""
    found = _rung(at_stake_usd, 10_000, 1_000)
    order = list(AlertSeverity)
    return max(found, floor, key=order.index)


def _rung(value: Decimal | int, critical: int, warning: int) -> AlertSeverity:
    """``critical`` and up: critical; ``warning`` and up: a warning; below: info."""
    if value >= critical:
        return AlertSeverity.CRITICAL
    return AlertSeverity.WARNING if value >= warning else AlertSeverity.INFO


def budget_key(p: ProjectNumbers, month: str, rung: str) -> str:
    """The claim key of one budget rung (``mtd-80``, ``forecast-100``) of a project or a
    team in a month. The budget is part of the key: a budget raised mid-month (as the alert
    suggests) is a new budget, whose thresholds alert when they are crossed. A team's keys
    start ``team-budget/``, so a team and a project of the same name never share a claim."""
    prefix = "team-budget" if p.team else "budget"
    return f"{prefix}/{p.project}/{month}/{cents(p.budget or ZERO)}/{rung}"


def budget_alerts(p: ProjectNumbers, thresholds: Sequence[int], now: datetime) -> list[Alert]:
    """Month-to-date thresholds crossed and a forecast over budget, as candidate alerts.

    All crossed thresholds are claimed, but only the highest is sent: a project that
    jumps from 0 to 120% gets one message, not three. A team's numbers (``p.team``) go
    through the same rules: the alert names the team and its projects.
    """
    if p.budget is None or p.budget <= 0:
        return []
    now = require_utc(now)
    month = month_key(now)
    used = p.month_to_date * 100 / p.budget
    crossed = [t for t in sorted(thresholds) if used >= t]
    alerts: list[Alert] = []
    top = sorted(p.resources, key=_by_cost)[:5]
    name = f"team {p.project}" if p.team else p.project
    ref = f"team/{p.project}" if p.team else p.project
    project = None if p.team else p.project
    if crossed:
        highest = crossed[-1]
        over = p.month_to_date - p.budget
        floor = _rung(highest, 100, 80)
        alerts.append(
            Alert(
                alert_id=f"{AlertKind.BUDGET_THRESHOLD}/{month}/{highest}/{ref}",
                kind=AlertKind.BUDGET_THRESHOLD,
                project=project,
                severity=money_severity(max(over, p.forecast - p.budget, ZERO), floor),
                title=f"{name}: {highest}% of the monthly budget spent",
                summary=(
                    f"{name} has spent ${cents(p.month_to_date):,} of its ${cents(p.budget):,} budget "
                    f"for {month} ({used:.0f}%); at {per_hour(p.run_rate)} it ends the month at "
                    f"${cents(p.forecast):,}."
                ),
                at=now,
                why=f"month-to-date crossed {highest}% of the budget",
                next_steps=_budget_steps(p),
                owners=_owners(p.owners),
                resources=tuple(top),
                facts=_facts(p, used),
                dedupe=tuple(budget_key(p, month, f"mtd-{t}") for t in crossed),
            )
        )
    if p.forecast >= p.budget:
        overrun = p.forecast - p.budget
        alerts.append(
            Alert(
                alert_id=f"{AlertKind.BUDGET_FORECAST}/{month}/{ref}",
                kind=AlertKind.BUDGET_FORECAST,
                project=project,
                severity=money_severity(overrun, AlertSeverity.WARNING),
                title=f"{name}: forecast ${cents(p.forecast):,} exceeds the ${cents(p.budget):,} budget",
                summary=(
                    f"At the current {per_hour(p.run_rate)}, {name} will spend ${cents(p.forecast):,} in "
                    f"{month}, ${cents(overrun):,} over its ${cents(p.budget):,} budget."
                ),
                at=now,
                why="month-to-date plus the current run-rate for the rest of the month exceeds the budget",
                next_steps=_budget_steps(p),
                owners=_owners(p.owners),
                resources=tuple(top),
                facts=_facts(p, used),
                dedupe=(budget_key(p, month, "forecast-100"),),
            )
        )
    return alerts


def _facts(p: ProjectNumbers, used: Decimal) -> dict[str, str]:
    team = {"team": p.project, "projects": ", ".join(p.members) or "none"} if p.team else {}
    return {
        **team,
        "budget": f"${cents(p.budget or ZERO):,}",
        "month_to_date": f"${cents(p.month_to_date):,}",
        "budget_used": f"{used:.1f}%",
        "forecast": f"${cents(p.forecast):,}",
        "run_rate": f"{per_hour(p.run_rate)}",
    }


def _budget_steps(p: ProjectNumbers) -> tuple[str, ...]:
    if p.team:
        return (
            "Stop or scale down what is not needed: the largest resources of the team's "
            "projects are listed below.",
            "Move interruptible training to spot capacity.",
            f"If the spend is expected, raise the team budget (tag costguard:team-budget, or "
            f"the deployment's teams table) for {p.project}.",
        )
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
            ranked.append((now_rate, replace(r, change="new")))
            continue
        before = previous_rates.get(r.key)
        if before is not None and now_rate > before:
            ranked.append((now_rate - before, replace(r, change=f"+{per_hour(now_rate - before)}")))
    ranked.sort(key=lambda pair: (-pair[0], pair[1].key))
    return tuple(r for delta, r in ranked if delta > 0)[:10]


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
    now = require_utc(now)
    delta = current - baseline
    monthly = delta * 730
    cause_owners = _owners([*owners, *(c.owner for c in causes)])
    top = causes[0] if causes else None
    because = (
        f" Largest change: {top.instance_type or top.kind} {top.key} ({top.change}, {per_hour(top.usd_per_hour or ZERO)})."
        if top
        else ""
    )
    ratio = (current / baseline) if baseline > 0 else None
    alert = Alert(
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
    return list_top(alert)


def recovery_alert(
    project: str,
    baseline: Decimal,
    current: Decimal,
    since: datetime,
    now: datetime,
    episode: str,
    owners: Sequence[str],
) -> Alert:
    now = require_utc(now)
    return Alert(
        alert_id=f"{AlertKind.BURN_RATE_RECOVERED}/{project}/{episode}",
        kind=AlertKind.BURN_RATE_RECOVERED,
        project=project,
        severity=AlertSeverity.INFO,
        title=f"{project}: spend back to {per_hour(current)}",
        summary=(
            f"{project}'s run-rate is back to {per_hour(current)} (baseline {per_hour(baseline)}) "
            f"after the spike that started {utc_label(since)}."
        ),
        at=now,
        why="run-rate fell back near the baseline",
        owners=_owners(owners),
        facts={"baseline": f"{per_hour(baseline)}", "current": f"{per_hour(current)}"},
        dedupe=(f"anomaly-recovered/{project}/{episode}",),
    )


# -- unattributed spend and findings ---------------------------------------------------


def unattributed_key(resource_key: str, now: datetime) -> str:
    """The claim that reports one unattributed resource once per UTC day."""
    return f"unattributed/{resource_key}/{require_utc(now).date().isoformat()}"


def unattributed_alert(resources: Sequence[AlertResource], now: datetime) -> Alert | None:
    """Accelerators with no project; each resource is claimed once per (UTC) day.

    One alert for all of them, however many: the dearest are listed, the rest
    counted, and every one of them is claimed.
    """
    if not resources:
        return None
    now = require_utc(now)
    day = now.date().isoformat()
    total = sum((r.usd_per_hour or ZERO for r in resources), ZERO)
    ranked = tuple(sorted(resources, key=_by_cost))
    listed = ranked[:MAX_LISTED_RESOURCES]
    alert = Alert(
        alert_id=f"{AlertKind.UNATTRIBUTED}/{day}/{ranked[0].key}",
        kind=AlertKind.UNATTRIBUTED,
        project=None,
        severity=money_severity(total * 730, AlertSeverity.WARNING),
        title=f"{plural(len(ranked), 'resource')} with no project: {per_hour(total)}",
        summary=(
            f"{plural(len(ranked), 'accelerator instance')} or their volumes run without a costguard:project tag, "
            f"costing {per_hour(total)} (about ${cents(total * 730):,} a month). Nobody's budget sees them."
        ),
        at=now,
        why="no costguard:project (or fallback) tag, and no node group or cluster to inherit one from",
        next_steps=(
            "Tag each resource with costguard:project (and costguard:owner).",
            "Stop it if nobody claims it.",
        ),
        owners=_owners(r.owner for r in listed),
        resources=ranked,
        facts={"run_rate": f"{per_hour(total)}", "resources": str(len(ranked))},
        dedupe=tuple(unattributed_key(r.key, now) for r in ranked),
    )
    return list_top(alert)


_SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def findings_digest(findings: Sequence[Finding], now: datetime, hour_utc: int = 8) -> Alert | None:
    """Malformed tags, unpriced types and scan failures: once a (UTC) day, from ``hour_utc``.

    ``findings`` are what the caller wants summarised (the alert service passes the
    last day's, from the ledger); errors are listed first.
    """
    now = require_utc(now)
    if now.hour < hour_utc:
        return None
    relevant = sorted(
        {(f.code, f.resource): f for f in findings if f.severity is not Severity.INFO}.values(),
        key=lambda f: (_SEVERITY_ORDER[f.severity], f.code.value, f.resource),
    )
    if not relevant:
        return None
    day = now.date().isoformat()
    counts = Counter(f.code.value for f in relevant)
    lines = tuple(
        clip(f"{f.code.value}: {f.resource}: {f.message}", MAX_LINE_CHARS)
        for f in relevant[:MAX_DIGEST_LINES]
    )
    if len(relevant) > MAX_DIGEST_LINES:
        lines += (
            f"and {plural(len(relevant) - MAX_DIGEST_LINES, 'more finding')}; "
            "run `costguard scan` to see them all",
        )
    return Alert(
        alert_id=f"{AlertKind.FINDINGS_DIGEST}/{day}",
        kind=AlertKind.FINDINGS_DIGEST,
        project=None,
        severity=AlertSeverity.WARNING
        if any(f.severity is Severity.ERROR for f in relevant)
        else AlertSeverity.INFO,
        title=f"CostGuard daily digest: {plural(len(relevant), 'configuration finding')}",
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


# -- advice: money a different choice would save ---------------------------------------

#: An advice line keeps its whole ``why`` (what the saving assumes), up to this length.
MAX_ADVICE_LINE_CHARS = 600
#: The advice digest lists this many pieces (the largest savings) and counts the rest.
MAX_ADVICE_LINES = MAX_DIGEST_LINES


def advice_key(project: str | None, now: datetime) -> str:
    """The claim that sends one project's advice once per UTC day.

    Projects and "no project" are told apart by the segment before the name, so no
    project name can take another's key.
    """
    day = require_utc(now).date().isoformat()
    return f"advice/{day}/unattributed" if project is None else f"advice/{day}/p/{project}"


def advice_digest(
    project: str | None,
    advice: Sequence[Advice],
    now: datetime,
    *,
    min_usd_per_month: Decimal = ZERO,
    owners: Sequence[str] = (),
) -> Alert | None:
    """One project's advice of the day, as an ``info`` alert (the lowest severity): what
    would save at least ``min_usd_per_month`` a month each, largest first, each with what
    its saving assumes. None when nothing is worth saying.

    However many pieces there are, the alert lists :data:`MAX_ADVICE_LINES` and counts
    the rest with their total: one message carries any fleet.
    """
    now = require_utc(now)
    kept = sorted(
        (
            a
            for a in advice
            if a.usd_per_month_saving > 0 and a.usd_per_month_saving >= min_usd_per_month
        ),
        key=lambda a: (-a.usd_per_month_saving, a.resource, a.code.value),
    )
    if not kept:
        return None
    day = now.date().isoformat()
    total = sum((a.usd_per_month_saving for a in kept), ZERO)
    top = kept[0]
    who = project if project is not None else "Resources with no project"
    whose = project if project is not None else "resources with no project"
    lines = tuple(
        clip(
            f"${cents(a.usd_per_month_saving):,}/month · {a.code.value} · {a.resource}: {a.why}",
            MAX_ADVICE_LINE_CHARS,
        )
        for a in kept[:MAX_ADVICE_LINES]
    )
    rest = kept[MAX_ADVICE_LINES:]
    if rest:
        more = sum((a.usd_per_month_saving for a in rest), ZERO)
        lines += (
            f"and {plural(len(rest), 'more piece')} of advice, about ${cents(more):,}/month together; "
            "run `costguard scan --json` for all of them",
        )
    facts = {"saving_per_month": f"${cents(total):,}", "pieces_of_advice": str(len(kept))}
    if min_usd_per_month > 0:
        facts["listed_from"] = f"${cents(min_usd_per_month):,}/month"
    return Alert(
        alert_id=f"{AlertKind.ADVICE_DIGEST}/{day}/"
        + ("unattributed" if project is None else f"p/{project}"),
        kind=AlertKind.ADVICE_DIGEST,
        project=project,
        severity=AlertSeverity.INFO,
        title=f"{who}: {plural(len(kept), 'change')} would save about ${cents(total):,}/month",
        summary=(
            f"CostGuard's advice of {day} for {whose}: "
            f"{plural(len(kept), 'change')} that would save about ${cents(total):,} a month together. "
            f"The largest, {top.code.value} on {top.resource}, saves about "
            f"${cents(top.usd_per_month_saving):,}/month."
        ),
        at=now,
        why="advice from today's scan; each line says what its saving assumes, at list prices",
        next_steps=(
            "Check each line's assumption before changing anything: advice is an estimate, "
            "not an action CostGuard takes.",
            "Fewer messages: raise adviceMinMonthlyUsd, or turn them off with adviceAlerts=false.",
        ),
        owners=_owners(owners),
        facts=facts,
        details=lines,
        dedupe=(advice_key(project, now),),
    )


# -- sources the scan cannot read ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SourceFailure:
    """One (region, source) the scan could not read, and how it failed."""

    region: str
    source: str
    operation: str
    code: str
    message: str

    @property
    def key(self) -> str:
        return f"{self.region}/{self.source}"


_FAILED_WITH = re.compile(r"^(?P<operation>\S+) failed with (?P<code>[^\s:;]+)")


def source_failures(
    findings: Iterable[Finding], failed: Iterable[tuple[str, str]]
) -> dict[str, SourceFailure]:
    """The sources a scan could not read, keyed ``region/source``, with the operation
    and error code its ``scan-failed`` finding names ("DescribeInstances failed with
    UnauthorizedOperation: ...")."""
    messages = {f.resource: f.message for f in findings if f.code is FindingCode.SCAN_FAILED}
    out: dict[str, SourceFailure] = {}
    for region, source in sorted(failed):
        message = messages.get(f"{region}/{source}", "")
        match = _FAILED_WITH.match(message)
        out[f"{region}/{source}"] = SourceFailure(
            region,
            source,
            match["operation"] if match else "?",
            match["code"] if match else "?",
            clip(message, MAX_LINE_CHARS),
        )
    return out


def _failure_steps(failures: Sequence[SourceFailure]) -> tuple[str, ...]:
    codes = " ".join(f.code.lower() for f in failures)
    operations = ", ".join(sorted({f.operation for f in failures}))
    steps: list[str] = []
    if "denied" in codes or "unauthorized" in codes or "optin" in codes:
        steps += [
            f"Allow {operations} for CostGuard's scan role (check the role's policy, "
            "SCPs, and whether the region is enabled).",
            "Or remove the region from CostGuard's regions if it is not used.",
        ]
    if "throttl" in codes or "limit" in codes:
        steps.append(
            "Other tools share the same API quota: spread their schedules, or scan less often."
        )
    steps.append("The scan Lambda's log has the full error.")
    return tuple(steps)


@dataclass(frozen=True, slots=True)
class FailureEpisode:
    """A source failing since ``since``, for ``scans`` consecutive scans."""

    failure: SourceFailure
    since: datetime
    scans: int


def scan_failed_key(source_key: str, since: datetime) -> str:
    """The claim for one failure episode: a source's failure is alerted once per episode."""
    return f"scan-failed/{source_key}/{utc_stamp(since)}"


def scan_recovered_key(source_key: str, since: datetime) -> str:
    return f"scan-recovered/{source_key}/{utc_stamp(since)}"


def scan_failed_alert(episodes: Sequence[FailureEpisode], now: datetime) -> Alert | None:
    """Sources unreadable for several scans in a row: their spend is unknown, not $0.

    One alert for all the sources that reached the threshold at this scan (a
    missing permission fails in every region at once), each claimed on its own.
    """
    if not episodes:
        return None
    now = require_utc(now)
    ordered = sorted(episodes, key=lambda e: e.failure.key)
    first = ordered[0]
    f = first.failure
    codes = ", ".join(sorted({e.failure.code for e in ordered}))
    if len(ordered) == 1:
        title = f"CostGuard cannot read {f.source} in {f.region}: {f.code}"
        summary = (
            f"{f.operation} ({f.source}, {f.region}) has failed with {f.code} on "
            f"{plural(first.scans, 'scan')} in a row, since {utc_label(first.since)}. "
        )
        facts = {
            "region": f.region,
            "service": f.source,
            "operation": f.operation,
            "error_code": f.code,
            "failing_since": utc_label(first.since),
            "consecutive_scans": str(first.scans),
        }
    else:
        title = f"CostGuard cannot read {len(ordered)} sources: {codes}"
        summary = (
            f"{len(ordered)} sources have failed on several scans in a row "
            f"({', '.join(e.failure.key for e in ordered[:5])}"
            + (", ..." if len(ordered) > 5 else "")
            + "). "
        )
        facts = {
            "sources": str(len(ordered)),
            "error_codes": codes,
            "failing_since": utc_label(min(e.since for e in ordered)),
        }
    lines = tuple(
        clip(
            f"{e.failure.region} {e.failure.source}: {e.failure.operation} failed with "
            f"{e.failure.code} on {plural(e.scans, 'scan')} since {utc_label(e.since)}"
            + (f" ({e.failure.message})" if e.failure.message else ""),
            MAX_LINE_CHARS,
        )
        for e in ordered[:MAX_DIGEST_LINES]
    )
    if len(ordered) > MAX_DIGEST_LINES:
        lines += (f"and {plural(len(ordered) - MAX_DIGEST_LINES, 'more source')}",)
    return Alert(
        alert_id=f"{AlertKind.SCAN_FAILED}/{f.key}/{utc_stamp(first.since)}",
        kind=AlertKind.SCAN_FAILED,
        project=None,
        severity=AlertSeverity.WARNING,
        title=title,
        summary=summary
        + "Until it works, what runs there is missing from budgets, forecasts and anomaly "
        "alerts: unknown, not $0.",
        at=now,
        why="the same source failed on consecutive scans",
        next_steps=_failure_steps([e.failure for e in ordered]),
        facts=facts,
        details=lines,
        dedupe=tuple(scan_failed_key(e.failure.key, e.since) for e in ordered),
    )


def scan_recovered_alert(recovered: Sequence[tuple[str, datetime]], now: datetime) -> Alert | None:
    """The end of episodes that :func:`scan_failed_alert` announced: ``(region/source, since)``."""
    if not recovered:
        return None
    now = require_utc(now)
    ordered = sorted(recovered)
    key, since = ordered[0]
    names = ", ".join(k for k, _ in ordered[:10]) + (", ..." if len(ordered) > 10 else "")
    return Alert(
        alert_id=f"{AlertKind.SCAN_RECOVERED}/{key}/{utc_stamp(since)}",
        kind=AlertKind.SCAN_RECOVERED,
        project=None,
        severity=AlertSeverity.INFO,
        title=f"CostGuard reads {names} again"
        if len(ordered) == 1
        else f"CostGuard reads {len(ordered)} sources again",
        summary=(
            f"{names} could be read again at {utc_label(now)}, after failing since "
            f"{utc_label(min(s for _, s in ordered))}. What ran meanwhile is now added to "
            "month-to-date, marked as estimated."
        ),
        at=now,
        why="the sources that could not be read were read successfully",
        facts={"sources": str(len(ordered))},
        details=tuple(f"{k}: failing since {utc_label(s)}" for k, s in ordered[:MAX_DIGEST_LINES]),
        dedupe=tuple(scan_recovered_key(k, s) for k, s in ordered),
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
    now = require_utc(now)
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
