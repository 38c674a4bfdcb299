"""A maximum lifetime: when a GPU instance, notebook or training job must stop, and when
its owner is warned.

Pure: the tags, the resource's start and ``now`` in, a :class:`LifetimeVerdict` out.

Where a lifetime comes from, strictest first:

- ``costguard:max-hours=N``: N whole hours from the resource's start (an EC2 instance's
  ``LaunchTime``, which EC2 resets at every start; a notebook instance's last InService
  transition; a training job's ``TrainingStartTime``);
- ``costguard:expires=<date or time>``: that instant (a bare date: the end of that day, UTC);
- the deployment's ``maxGpuHours`` (0: off), for a resource that carries neither tag.

Both tags on one resource: the earlier end wins. A malformed tag is a finding naming the
resource and the tag, and the resource is left alone (no default either): a guessed
lifetime could stop live work, and the owner said something, just not clearly.

When the guard may not act at all (a finding says why):

- the resource's start is unknown: ``max-hours`` and the default count from it;
- the start is after ``now`` (this clock and AWS's disagree): nothing is judged;
- ``expires`` is before the start: a tag copied from an older resource, or a wrong year.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from costguard.domain.findings import Finding, FindingCode
from costguard.domain.tags import Tags, parse_expires, parse_max_hours


@dataclass(frozen=True, slots=True)
class LifetimeVerdict:
    """What the tags and the clock say about one resource.

    ``ends_at`` None: no lifetime applies (none set, malformed, or not enforceable).
    ``due`` is True from ``ends_at - warn_before`` on: the owner is warned, and the
    resource is stopped at ``ends_at`` (never before the warning's grace period).
    """

    ends_at: datetime | None
    reason: str
    due: bool = False
    evidence: Mapping[str, str] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _hours(delta: timedelta) -> str:
    return f"{delta.total_seconds() / 3600:.1f}"


def judge_lifetime(
    tags: Mapping[str, str],
    started_at: datetime | None,
    now: datetime,
    *,
    default_hours: int,
    warn_before: timedelta,
    resource: str,
) -> LifetimeVerdict:
    """The lifetime of one resource, and whether it is due (see the module docstring).

    ``default_hours`` 0 is off. ``warn_before`` is how long before the end the owner is
    warned (the guard's grace period).
    """
    findings: list[Finding] = []
    evidence: dict[str, str] = {}
    if started_at is not None:
        evidence["started_at"] = _utc(started_at)
        if started_at > now:
            finding = Finding(
                FindingCode.LIFETIME_NOT_ENFORCED,
                resource,
                f"started at {_utc(started_at)}, after this run's time {_utc(now)}: the "
                "clocks disagree, so its lifetime is not judged",
            )
            return LifetimeVerdict(
                None,
                "its start is in the future: not judged",
                evidence=evidence,
                findings=(finding,),
            )
    ends: list[tuple[datetime, str]] = []
    malformed = False
    raw_hours = tags.get(Tags.MAX_HOURS)
    if raw_hours is not None:
        hours = parse_max_hours(raw_hours)
        if isinstance(hours, str):
            malformed = True
            findings.append(
                Finding(
                    FindingCode.MALFORMED_MAX_HOURS,
                    resource,
                    f"tag {Tags.MAX_HOURS}={raw_hours[:80]!r} {hours}; its lifetime is not "
                    "enforced until the tag is fixed",
                )
            )
        elif started_at is None:
            findings.append(_no_start(resource, Tags.MAX_HOURS))
        else:
            ends.append(
                (started_at + timedelta(hours=hours), f"{Tags.MAX_HOURS}={hours}: {hours} hours")
            )
    raw_expires = tags.get(Tags.EXPIRES)
    if raw_expires is not None:
        expires = parse_expires(raw_expires)
        if isinstance(expires, str):
            malformed = True
            findings.append(
                Finding(
                    FindingCode.MALFORMED_EXPIRES,
                    resource,
                    f"tag {Tags.EXPIRES}={raw_expires[:80]!r} {expires}; its lifetime is not "
                    "enforced until the tag is fixed",
                )
            )
        elif expires is not None and started_at is not None and expires <= started_at:
            malformed = True
            findings.append(
                Finding(
                    FindingCode.MALFORMED_EXPIRES,
                    resource,
                    f"tag {Tags.EXPIRES}={raw_expires[:80]!r} is {_utc(expires)}, before the "
                    f"resource started ({_utc(started_at)}): copied from an older resource, "
                    "or a wrong year? Its lifetime is not enforced until the tag is fixed",
                )
            )
        elif expires is not None:
            ends.append((expires, f"{Tags.EXPIRES}={raw_expires.strip()}"))
    if malformed:
        return LifetimeVerdict(
            None, "a malformed lifetime tag: not enforced", evidence=evidence,
            findings=tuple(findings),
        )  # fmt: skip
    if not ends and raw_hours is None and raw_expires is None and default_hours > 0:
        if started_at is None:
            findings.append(_no_start(resource, "maxGpuHours"))
        else:
            ends.append(
                (
                    started_at + timedelta(hours=default_hours),
                    f"the deployment's maxGpuHours: {default_hours} hours",
                )
            )
    if not ends:
        return LifetimeVerdict(
            None, "no maximum lifetime", evidence=evidence, findings=tuple(findings)
        )
    ends_at, source = min(ends)
    evidence["lifetime"] = source
    evidence["ends_at"] = _utc(ends_at)
    if started_at is not None:
        evidence["hours_running"] = _hours(now - started_at)
    due = now >= ends_at - warn_before
    if now >= ends_at:
        reason = f"its maximum lifetime ({source}) ended at {_utc(ends_at)}"
    else:
        reason = f"its maximum lifetime ({source}) ends at {_utc(ends_at)}"
    return LifetimeVerdict(ends_at, reason, due, evidence, tuple(findings))


def _no_start(resource: str, what: str) -> Finding:
    return Finding(
        FindingCode.LIFETIME_NOT_ENFORCED,
        resource,
        f"{what} counts from the resource's start, which AWS did not report: not enforced",
    )


@dataclass(frozen=True, slots=True)
class TrainingJob:
    """An InProgress SageMaker training job, as the maximum-lifetime guard sees it."""

    name: str
    arn: str
    region: str
    instance_type: str | None
    instance_count: int
    #: ``TrainingStartTime`` (when its instances started), else its ``CreationTime``.
    started_at: datetime | None
    tags: Mapping[str, str] = field(default_factory=dict, hash=False)
