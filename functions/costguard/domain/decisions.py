"""Decisions are data: what CostGuard would do to a resource, why, and what it saves.

Policies (idle notebooks, stale data, ...) are pure functions that return a
:class:`Decision` for every resource they judged, including the ones they leave
alone (``Action.NONE``): that is how the executor learns that a warned resource
became active again and clears its warning. The executor, not the policy, decides
*when* to act (warn first, act after the grace period), re-checks scope and
exemption at execution time, and applies dry-run; so a policy is only a judgement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum

from costguard.domain.alerts import Alert, AlertKind, AlertSeverity, AnswerTo
from costguard.domain.money import HOURS_PER_PRICING_MONTH, ZERO, cents, per_hour
from costguard.domain.tags import Exemption, ResourceTags, Tags, parse_exempt


class Action(StrEnum):
    NONE = "none"
    STOP_NOTEBOOK = "stop-notebook"
    STOP_INSTANCE = "stop-instance"
    DELETE_APP = "delete-app"
    DELETE_OBJECTS = "delete-objects"
    DELETE_VOLUME = "delete-volume"
    DELETE_SNAPSHOT = "delete-snapshot"
    STOP_TRAINING_JOB = "stop-training-job"


class Step(StrEnum):
    """What the executor did with one decision (the audit trail's ``outcome``)."""

    WARNED = "warned"
    WAITING = "waiting"  # warned before; the grace period has not run out
    ACTED = "acted"
    WOULD_WARN = "would-warn"  # dry-run
    WOULD_ACT = "would-act"  # dry-run
    CLEARED = "cleared"  # the resource became active or exempt: the warning is withdrawn
    SKIPPED = "skipped"  # out of scope, exempt, gone, or already in the wanted state
    CLAIMED_ELSEWHERE = "claimed-elsewhere"  # an overlapping run is acting on it
    #: The action cannot be done to this resource (a one-time spot instance cannot be
    #: stopped): the owner was told, nothing changed, and nothing is counted as saved.
    NOTICE_ONLY = "notice-only"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Target:
    """The resource a decision is about, as the scan saw it."""

    key: str  # ``[account/]region/kind/id``
    kind: str
    region: str
    id: str
    account: str = ""
    project: str | None = None
    owners: tuple[str, ...] = ()
    name: str | None = None
    #: The tags the policy read, when it read them in this run. A busy resource that
    #: carried no warning then needs no look at execution time: the executor's calls
    #: grow with the candidates for action, not with the fleet.
    tags_seen: Mapping[str, str] | None = field(default=None, hash=False, compare=False)
    #: The state the policy listed it in, in this run (with ``tags_seen``): what the
    #: executor works from, without a look of its own, for everything but an action,
    #: which re-reads the resource just before it acts. Only for a resource the policy
    #: lists as not settled (running, InService).
    state_seen: str | None = field(default=None, hash=False, compare=False)


@dataclass(frozen=True, slots=True)
class Decision:
    """One judgement of a policy, carried unchanged to the executor and the audit trail.

    ``grace`` is how long the owner is warned before the action; zero acts at once
    (only sensible for actions that are themselves harmless, which none are today).
    """

    action: Action
    target: Target
    reason: str
    decided_at: datetime
    evidence: Mapping[str, str] = field(default_factory=dict)
    usd_per_hour_saved: Decimal = ZERO
    grace: timedelta = timedelta(hours=24)
    #: The earliest the action may happen, when the policy knows it (a time to live runs
    #: out at a known time); the executor acts at the later of this and the warning's
    #: grace period, never before the owner was warned.
    not_before: datetime | None = None
    #: Policy-specific detail the actuator needs (e.g. the object keys to delete).
    params: Mapping[str, str] = field(default_factory=dict)
    #: A standing warning (a sweep that recurs): what the owner was warned about (e.g. a
    #: configuration fingerprint). The owner is warned once per value; after the grace
    #: period the action runs on every run, one run at a time, until the value changes
    #: or the warning is withdrawn. None: a one-shot action, warned before each time.
    standing: str | None = None
    #: When the resource's current session began (an instance's launch, a notebook's last
    #: InService), when the policy knows it. A warning given before it (deadline less the
    #: grace period) was about an earlier session, stopped and started since: it counts
    #: for nothing, and the owner is warned afresh (once a day per session).
    session_start: datetime | None = None
    #: What withdraws the warning, in its words ("it is used or exempted" when None),
    #: and what the owner can do (the idle guard's advice when empty).
    unless: str | None = None
    next_steps: tuple[str, ...] = ()

    def deadline(self, warned_at: datetime) -> datetime:
        """When the action may happen if the owner is warned at ``warned_at``."""
        after_grace = warned_at + self.grace
        return max(after_grace, self.not_before) if self.not_before else after_grace

    @property
    def acts(self) -> bool:
        return self.action is not Action.NONE

    @property
    def usd_per_month_saved(self) -> Decimal:
        return self.usd_per_hour_saved * HOURS_PER_PRICING_MONTH


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What an actuator's ``apply`` did. A plain string means "done, as described".

    ``acted=False`` says the action could not be done and nothing changed (the owner
    is told ``detail`` instead): the executor records it as a notice, never a saving.
    """

    detail: str
    acted: bool = True
    #: What this application saved, where it is not the decision's estimate: a standing
    #: action's run saves what it did (a sweep pass, the bytes it deleted), so that runs
    #: after one warning add up to what was done, each counted once. None: the decision's.
    usd_per_hour_saved: Decimal | None = None


@dataclass(frozen=True, slots=True)
class NotYet:
    """What an actuator returns when its action spans runs and is not done yet.

    Deleting a volume waits for its backup snapshot to complete: the executor reports
    the decision as waiting, counts no action, and tries again on a later run.
    """

    detail: str
    #: Something was started this run (the snapshot was created): it is audited, and
    #: the claim is kept until its lease runs out, so that an overlapping run, reading
    #: an eventually consistent listing, cannot start it a second time.
    started: bool = False


@dataclass(frozen=True, slots=True)
class Observed:
    """What the actuator found on the resource at execution time."""

    state: str
    tags: Mapping[str, str]
    #: Already in the state the action leads to (stopped, deleted): nothing to do.
    settled: bool = False


class Gate(StrEnum):
    OUT_OF_SCOPE = "out-of-scope"
    EXEMPT = "exempt"
    ALLOWED = "allowed"


def gate(tags: ResourceTags, opted_in: bool, now: datetime) -> Gate:
    """Scope and exemption, re-checked on the resource's tags *at execution time*.

    In scope means tagged with a project, or explicitly opted in. An exemption that
    is active, or malformed (read as exempt), always wins.
    """
    if tags.exemption is not None and tags.exemption.active(now):
        return Gate.EXEMPT
    if tags.project is None and not opted_in:
        return Gate.OUT_OF_SCOPE
    return Gate.ALLOWED


def action_after(tags: Mapping[str, str], key: str = Tags.ACTION_AFTER) -> datetime | str | None:
    """The warning deadline CostGuard tagged on the resource; a string says why it is bad.

    It reuses the exemption date grammar, so a person who edits the tag by hand gets
    the same rules. A malformed deadline is treated as "not warned": the executor
    warns again, which only postpones the action.
    """
    raw = tags.get(key)
    if raw is None:
        return None
    parsed = parse_exempt(raw)
    if isinstance(parsed, Exemption) and parsed.until is not None:
        return parsed.until
    return "is not a UTC time such as 2026-12-01T08:00:00Z"


def deadline_tag(moment: datetime) -> str:
    """The ``costguard:action-after`` value: UTC, to the second, unambiguous."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def warning_key(target: Target, deadline: datetime) -> str:
    """One warning of one resource: what a later "used again" or "exempted" withdraws,
    whichever action it was about (a busy verdict carries no action)."""
    return f"{target.account or '-'}/{target.key}/{deadline_tag(deadline)}"


def claim_key(decision: Decision, deadline: datetime | None) -> str:
    """Two overlapping runs acting on the same warning claim the same key."""
    stamp = deadline_tag(deadline) if deadline else "now"
    account = decision.target.account or "-"
    return f"{decision.action.value}/{account}/{decision.target.key}/{stamp}"


_VERBS = {
    Action.STOP_NOTEBOOK: "stop",
    Action.STOP_INSTANCE: "stop",
    Action.DELETE_APP: "delete",
    Action.DELETE_OBJECTS: "delete objects in",
    Action.DELETE_VOLUME: "delete",
    Action.DELETE_SNAPSHOT: "delete",
    Action.STOP_TRAINING_JOB: "stop",
}


def done(action: Action) -> str:
    """What an action did, in words: "stopped", "deleted"."""
    verb = _VERBS.get(action, action.value)
    first, _, rest = verb.partition(" ")
    return " ".join(filter(None, (first + ("ped" if first == "stop" else "d"), rest)))


def _label(t: Target) -> str:
    return f"{t.kind} {t.name or t.id}"


def warning_alert(d: Decision, deadline: datetime, now: datetime, guard: str = "") -> Alert:
    """Tell the owner before acting: what, when, why, and how to keep the resource.
    ``guard``: the guard that warns, whose answers the warning then carries."""
    t = d.target
    verb = _VERBS.get(d.action, d.action.value)
    when = deadline_tag(deadline)
    return Alert(
        alert_id=f"{AlertKind.ACTION_WARNING}/{d.action.value}/{t.account or '-'}/{t.key}/{when}",
        kind=AlertKind.ACTION_WARNING,
        project=t.project,
        severity=AlertSeverity.WARNING,
        title=f"CostGuard will {verb} {_label(t)} after {when}",
        summary=(
            f"{d.reason}. CostGuard will {verb} it after {when} unless "
            f"{d.unless or 'it is used or exempted'}; that saves about "
            f"${cents(d.usd_per_month_saved):,} a month "
            f"({per_hour(d.usd_per_hour_saved)})."
        ),
        at=now,
        why=d.reason,
        next_steps=d.next_steps
        or (
            "If you still need it, use it: activity before the deadline withdraws the warning.",
            f"Or exempt it: tag {Tags.EXEMPT}=true, or {Tags.EXEMPT}=YYYY-MM-DD until a date.",
        ),
        owners=t.owners,
        facts={k: v for k, v in d.evidence.items()},
        answer_to=AnswerTo(guard, t.key, deadline) if guard else None,
    )


def taken_alert(d: Decision, detail: str, found: str, now: datetime) -> Alert:
    t = d.target
    verb = _VERBS.get(d.action, d.action.value)
    return Alert(
        alert_id=f"{AlertKind.ACTION_TAKEN}/{d.action.value}/{t.account or '-'}/{t.key}/{deadline_tag(now)}",
        kind=AlertKind.ACTION_TAKEN,
        project=t.project,
        severity=AlertSeverity.INFO,
        title=f"CostGuard did {verb} {_label(t)}",
        summary=(
            f"{detail}. It was {found} and {d.reason.lower()}; this saves about "
            f"${cents(d.usd_per_month_saved):,} a month."
        ),
        at=now,
        why=d.reason,
        owners=t.owners,
        facts={k: v for k, v in d.evidence.items()},
    )


def notice_alert(d: Decision, detail: str, found: str, now: datetime) -> Alert:
    """The action could not be done: say why, and what the owner can do; claim no saving."""
    t = d.target
    verb = _VERBS.get(d.action, d.action.value)
    return Alert(
        alert_id=f"{AlertKind.ACTION_TAKEN}/notice/{d.action.value}/{t.account or '-'}/{t.key}/{deadline_tag(now)}",
        kind=AlertKind.ACTION_TAKEN,
        project=t.project,
        severity=AlertSeverity.WARNING,
        title=f"CostGuard could not {verb} {_label(t)}",
        summary=(
            f"{detail}. It was {found} and {d.reason.lower()}; it still costs about "
            f"${cents(d.usd_per_month_saved):,} a month ({per_hour(d.usd_per_hour_saved)})."
        ),
        at=now,
        why=d.reason,
        next_steps=(
            "If you no longer need it, shut it down yourself: CostGuard never terminates.",
            f"Or exempt it: tag {Tags.EXEMPT}=true, or {Tags.EXEMPT}=YYYY-MM-DD until a date.",
        ),
        owners=t.owners,
        facts={k: v for k, v in d.evidence.items()},
    )


@dataclass(frozen=True, slots=True)
class Savings:
    """What a project's actions this month save: a rate, and an estimate so far."""

    actions: int = 0
    usd_per_hour: Decimal = ZERO
    #: Each action's $/h times the hours since it, this month: an upper bound, since a
    #: stopped resource may have been started again since.
    month_to_date_usd_estimated: Decimal = ZERO


def savings_this_month(
    acted: Sequence[tuple[str | None, datetime, Decimal, str]], now: datetime
) -> dict[str | None, Savings]:
    """Per project, from ``(project, acted at, $/h saved, resource)`` of this month's actions.

    A resource acted on twice (stopped, restarted by its owner, stopped again) saves its
    rate once, counted from the first action: an upper bound, as documented.
    """
    month_start = now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    first: dict[str, tuple[str | None, datetime, Decimal]] = {}
    actions: dict[str | None, int] = {}
    for project, at, usd_per_hour, resource in sorted(acted, key=lambda a: a[1]):
        first.setdefault(resource, (project, at, usd_per_hour))
        actions[project] = actions.get(project, 0) + 1
    out: dict[str | None, Savings] = {}
    for project, at, usd_per_hour in first.values():
        since = max(at, month_start)
        hours = Decimal(max((now - since).total_seconds(), 0)) / Decimal(3600)
        old = out.get(project, Savings())
        out[project] = Savings(
            actions[project],
            old.usd_per_hour + usd_per_hour,
            old.month_to_date_usd_estimated + usd_per_hour * hours,
        )
    return out
