"""Stale EBS: unattached volumes past their time to live, and snapshots past theirs.

Pure judgement; the service reads the inventory and the clock, the executor acts.

**The first-seen clock.** AWS does not say when a volume was detached. CostGuard
records when it *first saw* each in-scope volume ``available`` and keeps that time
while every run sees it ``available``. A volume seen in any other state (attached,
creating, being deleted), or not seen at all, leaves the clock: when it is next seen
unattached, its clock starts over (a new attachment generation). The clock is only
ever lost towards "later": a lost or trimmed clock postpones a deletion, never
brings one forward.

**What the clock cannot see.** ``DescribeVolumes`` shows an attachment only while it
lasts (``Attachments[].AttachTime``); no field survives a detach (``CreateTime`` is
the creation, and EC2 keeps no attachment history). A volume attached *and* detached
again between two runs looks, to CostGuard, as if it never moved: the volume's current
state is no proof of anything that happened between runs.

**The backup's proof.** With snapshot-before-delete on (the default) the snapshot is
taken in one run and the volume deleted in a later one, once the snapshot completed.
A write in between (attach, write, detach) would be in no snapshot. So the volume is
deleted only when CloudTrail's event history shows no ``AttachVolume`` of it since
the snapshot began (less :data:`ATTACH_MARGIN`): an instance writes to a volume only
through an attachment, and every attachment of an existing volume is an
``AttachVolume`` call. Otherwise it is snapshotted again (:func:`unproven`). What is
left: CloudTrail delivers an event about 5 minutes after the call (not guaranteed), so
an attachment that begins *and* ends in the last minutes before the deleting run can
still go unseen (it was a whole run interval). With snapshot-before-delete off, an
attachment between two runs goes unseen as before: the data written during it may be
deleted at the TTL (never before the owner was warned).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.domain.decisions import Action, Decision, Target
from costguard.domain.findings import Finding, FindingCode
from costguard.domain.models import resource_key
from costguard.domain.money import HOURS_PER_PRICING_MONTH, ZERO
from costguard.domain.storage import Tier, volume_price
from costguard.domain.tags import ResourceTags, TagKeys, Tags, parse_ttl, read_tags
from costguard.domain.windows import before

VOLUME_KIND = "ebs-volume"
SNAPSHOT_KIND = "ebs-snapshot"
#: The state in which a volume is unattached (and so in scope for its clock).
AVAILABLE = "available"
#: A region's clock is one ledger document (DynamoDB caps an item at 400 KB; an entry
#: is ~35 bytes). Volumes past this are not tracked, so never deleted, and reported.
MAX_TRACKED = 8000


@dataclass(frozen=True, slots=True)
class VolumeView:
    """One EBS volume as ``DescribeVolumes`` shows it."""

    id: str
    region: str
    state: str
    tags: Mapping[str, str] = field(default_factory=dict, hash=False)
    size_gib: int = 0
    volume_type: str = ""
    account: str = ""
    created_at: datetime | None = None
    #: Provisioned IOPS and throughput (MiB/s): part of what deleting it saves.
    iops: int = 0
    throughput_mibps: int = 0


@dataclass(frozen=True, slots=True)
class SnapshotView:
    """One EBS snapshot owned by this account, as ``DescribeSnapshots`` shows it."""

    id: str
    region: str
    state: str  # pending | completed | error | recoverable | recovering
    started_at: datetime
    tags: Mapping[str, str] = field(default_factory=dict, hash=False)
    volume_id: str = ""
    volume_size_gib: int = 0
    account: str = ""
    #: What EBS reports the snapshot holds, when it does (``FullSnapshotSizeInBytes``).
    full_size_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class VolumeRules:
    """The deployment's settings for the stale-volume guard."""

    default_ttl: timedelta = timedelta(hours=48)
    grace: timedelta = timedelta(hours=24)
    snapshot_before_delete: bool = True
    #: The costguard:ttl written on the backup snapshot: it is swept in its turn.
    snapshot_ttl: str = "30d"
    tag_keys: TagKeys = field(default_factory=TagKeys)


#: An ``AttachVolume`` this long before a backup began still counts against it: the
#: volume is inspected (``available``) just before ``CreateSnapshot``, so an attachment in
#: between, or CloudTrail's ``eventTime`` (whole seconds) against EBS's ``StartTime``,
#: cannot make an attached volume's snapshot look clean.
ATTACH_MARGIN = timedelta(minutes=5)
#: CloudTrail keeps 90 days of event history; a backup older than this is not proved by
#: reading back that far (the pages would grow with the account's history): it is
#: snapshotted again, which an unchanged volume's incremental snapshot makes cheap.
PROOF_LOOKBACK = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class AttachRecord:
    """What CloudTrail's event history shows of one volume's ``AttachVolume`` calls.

    ``complete``: every ``AttachVolume`` call of the region since ``since`` was read (no
    page budget ran out, nothing older than :data:`PROOF_LOOKBACK` was asked for).
    ``last_attach``: the latest of this volume's seen at or after ``since``, if any; an
    attachment seen counts even when the record is incomplete.
    """

    since: datetime
    complete: bool
    last_attach: datetime | None = None


def unproven(backup_started: datetime, record: AttachRecord) -> str | None:
    """Why a completed backup may miss data written since it began; None if it cannot.

    It cannot when the record covers everything from :data:`ATTACH_MARGIN` before the
    backup began and shows no attachment of the volume in it.
    """
    if record.last_attach is not None:
        return (
            f"it was attached at {record.last_attach:%Y-%m-%d %H:%M:%S} UTC, after its snapshot "
            f"began at {backup_started:%Y-%m-%d %H:%M:%S} UTC (CloudTrail AttachVolume)"
        )
    if record.since > backup_started - ATTACH_MARGIN or not record.complete:
        return (
            f"CloudTrail could not show every AttachVolume since its snapshot began at "
            f"{backup_started:%Y-%m-%d %H:%M:%S} UTC"
        )
    return None


@dataclass(frozen=True, slots=True)
class Judgement:
    decisions: tuple[Decision, ...] = ()
    findings: tuple[Finding, ...] = ()


# -- the clock ------------------------------------------------------------------------


def _stamp(moment: datetime) -> int:
    return int(moment.astimezone(UTC).timestamp())


def from_stamp(value: int) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def in_scope(view: VolumeView) -> bool:
    """Volumes carrying the primary project tag: the only ones IAM lets CostGuard delete."""
    return Tags.PROJECT in view.tags


def advance_clock(
    previous: Mapping[str, int], volumes: Sequence[VolumeView], now: datetime
) -> tuple[dict[str, int], tuple[str, ...]]:
    """The next clock (volume id -> first seen unattached, epoch seconds) and who left it.

    A volume stays only while it is seen ``available`` and in scope; an entry from the
    future (a clock written by a run with a skewed ``now``) is reset to ``now``: never
    trusted to be older than it can be. Past :data:`MAX_TRACKED`, the newest are not
    tracked (sorted by id, so the same ones every run).
    """
    stamp = _stamp(now)
    current: dict[str, int] = {}
    for v in sorted(volumes, key=lambda v: v.id):
        if v.state != AVAILABLE or not in_scope(v):
            continue
        seen = previous.get(v.id)
        if seen is None or seen > stamp:
            seen = stamp
        current[v.id] = seen
    if len(current) > MAX_TRACKED:
        oldest = sorted(current.items(), key=lambda kv: (kv[1], kv[0]))[:MAX_TRACKED]
        current = dict(oldest)
    left = tuple(sorted(set(previous) - set(current)))
    return current, left


def merge_clock(
    stored: Mapping[str, int], mine: Mapping[str, int], left: Sequence[str]
) -> dict[str, int]:
    """Merge this run's clock into one another run wrote meanwhile (an optimistic retry).

    Whatever either run saw leave goes; for the rest the later first-seen wins. Both
    choices can only postpone a deletion.
    """
    merged = {k: v for k, v in stored.items() if k not in left}
    for k, v in mine.items():
        merged[k] = max(v, merged.get(k, v))
    return merged


# -- judgement -------------------------------------------------------------------------


def _ttl(
    ref: str, tags: Mapping[str, str], default: timedelta | None
) -> tuple[timedelta | None, Finding | None]:
    raw = tags.get(Tags.TTL)
    if raw is None:
        return default, None
    parsed = parse_ttl(raw)
    if isinstance(parsed, str):
        return None, Finding(
            FindingCode.MALFORMED_TTL,
            ref,
            f"tag {Tags.TTL}={raw[:80]!r} {parsed}; left alone until it is fixed",
        )
    return parsed, None


def _human(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours / 24:g}d" if hours > 48 and hours % 24 == 0 else f"{hours:g}h"


def volume_savings(
    view: VolumeView,
    ebs_gb_month: Mapping[str, Decimal] | None,
    snapshot_gb_month: Decimal | None,
    snapshot: bool,
    provisioned: Mapping[str, Mapping[str, Sequence[Tier]]] | None = None,
) -> tuple[Decimal, dict[str, str]]:
    """$/h saved by deleting the volume, and the evidence behind it.

    Saved: the volume as the scan prices it (its provisioned GiB at its type's rate, plus
    gp3 IOPS and throughput above the baseline and io1/io2 IOPS: see
    :func:`costguard.domain.storage.volume_price`), less the backup snapshot's. Without a
    rate for its provisioned IOPS, the GiB alone (a lower bound, and the evidence says so).
    The snapshot is priced at the volume's *allocated* size: an upper bound on what it
    stores (a first snapshot holds only written blocks), so the saving is a lower bound.
    """
    evidence: dict[str, str] = {"size_gib": str(view.size_gib), "volume_type": view.volume_type}
    rate = (ebs_gb_month or {}).get(view.volume_type)
    if rate is None:
        evidence["volume_usd_per_month"] = "unpriced"
        return ZERO, evidence
    volume = rate * view.size_gib
    priced = volume_price(
        rate,
        (provisioned or {}).get(view.volume_type),
        view.volume_type,
        view.size_gib,
        view.iops,
        view.throughput_mibps,
    ).usd_per_month
    if priced is None:
        evidence["provisioned_usd_per_month"] = "unpriced (not counted: a lower bound)"
    elif priced != volume:
        evidence["provisioned_usd_per_month"] = str(priced - volume)
        volume = priced
    evidence["volume_usd_per_month"] = str(volume)
    snap = ZERO
    if snapshot:
        if snapshot_gb_month is None:
            evidence["snapshot_usd_per_month"] = "unpriced (not subtracted)"
        else:
            snap = snapshot_gb_month * view.size_gib
            evidence["snapshot_usd_per_month"] = f"{snap} (upper bound: allocated size)"
    return max(volume - snap, ZERO) / HOURS_PER_PRICING_MONTH, evidence


def _target(kind: str, view: VolumeView | SnapshotView, tags: ResourceTags | None = None) -> Target:
    return Target(
        key=resource_key(view.account, view.region, kind, view.id),
        kind=kind,
        region=view.region,
        id=view.id,
        account=view.account,
        project=tags.project if tags is not None else None,
        owners=tags.owners if tags is not None else (),
        name=view.tags.get("Name"),
        tags_seen=dict(view.tags),
    )


def _out_of_scope(kind: str, view: VolumeView | SnapshotView, now: datetime) -> Decision:
    """The NONE decision that withdraws the warning on a resource no longer in scope."""
    target = _target(kind, view)
    missing = [k for k in (Tags.PROJECT, Tags.TTL) if k not in view.tags]
    if kind == VOLUME_KIND:
        missing = missing[:1]  # a volume's time to live has a default
    return Decision(Action.NONE, target, f"out of scope: no {' or '.join(missing)} tag", now)


def judge_volumes(
    volumes: Sequence[VolumeView],
    clock: Mapping[str, int],
    now: datetime,
    rules: VolumeRules,
    prices: Mapping[str, Decimal] | None = None,
    snapshot_rate: Decimal | None = None,
    provisioned: Mapping[str, Mapping[str, Sequence[Tier]]] | None = None,
) -> Judgement:
    """One decision per in-scope volume: delete once unattached past its TTL, else none.

    The delete is decided ``grace`` before the TTL runs out, with ``not_before`` at the
    TTL: the owner is warned a grace period ahead and the volume goes at the TTL
    (later if the warning was late). A volume seen attached is judged busy, so a
    warning on it is withdrawn.
    """
    decisions: list[Decision] = []
    findings: list[Finding] = []
    for v in volumes:
        if not in_scope(v):
            # Out of scope, but warned while it was in: a NONE decision withdraws that
            # warning now, so that the old deadline cannot act the day it comes back.
            if Tags.ACTION_AFTER in v.tags:
                decisions.append(_out_of_scope(VOLUME_KIND, v, now))
            continue
        key = resource_key(v.account, v.region, VOLUME_KIND, v.id)
        tags = read_tags(key, v.tags, rules.tag_keys)
        target = _target(VOLUME_KIND, v, tags)

        def none(reason: str, target: Target = target) -> None:
            decisions.append(Decision(Action.NONE, target, reason, now))

        if v.state != AVAILABLE:
            none(f"{v.state}: attached volumes are not stale")
            continue
        if tags.exemption is not None and tags.exemption.active(now):
            none("it is exempt")
            continue
        ttl, problem = _ttl(key, v.tags, rules.default_ttl)
        if problem is not None:
            findings.append(problem)
        if ttl is None:
            none("its costguard:ttl is malformed")
            continue
        first = clock.get(v.id)
        if first is None:
            none("not tracked yet (its unattached clock starts this run)")
            continue
        since = from_stamp(first)
        expires = since + ttl
        unattached = now - since
        if before(now, expires - rules.grace):
            none(f"unattached for {_human(unattached)} of {_human(ttl)}")
            continue
        usd, evidence = volume_savings(
            v, prices, snapshot_rate, rules.snapshot_before_delete, provisioned
        )
        evidence |= {
            "first_seen_unattached": since.isoformat(),
            "ttl": _human(ttl),
            "expires": expires.isoformat(),
            "snapshot_before_delete": str(rules.snapshot_before_delete).lower(),
        }
        decisions.append(
            Decision(
                Action.DELETE_VOLUME,
                target,
                f"Unattached since at least {since:%Y-%m-%d %H:%M} UTC, past its time to live "
                f"of {_human(ttl)}"
                + (" (a snapshot is kept)" if rules.snapshot_before_delete else ""),
                now,
                evidence=evidence,
                usd_per_hour_saved=usd,
                grace=rules.grace,
                not_before=expires,
                params={
                    "first_seen": since.isoformat(),
                    "snapshot": "true" if rules.snapshot_before_delete else "false",
                    "snapshot_ttl": rules.snapshot_ttl,
                },
            )
        )
    return Judgement(tuple(decisions), tuple(findings))


def judge_snapshots(
    snapshots: Sequence[SnapshotView],
    now: datetime,
    rules: VolumeRules,
    snapshot_rate: Mapping[str, Decimal] | None = None,
) -> Judgement:
    """Snapshots tagged costguard:ttl and a project: delete once older than their TTL.

    The age is from ``StartTime``. Only completed snapshots are deleted. The saving is
    the source volume's size at the snapshot rate: an upper bound, since a snapshot
    that shares blocks with others frees only the blocks it alone holds.
    """
    decisions: list[Decision] = []
    findings: list[Finding] = []
    for s in snapshots:
        if Tags.TTL not in s.tags or Tags.PROJECT not in s.tags:
            # Warned, then its project or time to live removed: withdraw that warning
            # (a NONE decision), so that the tag coming back starts a new one.
            if Tags.ACTION_AFTER in s.tags:
                decisions.append(_out_of_scope(SNAPSHOT_KIND, s, now))
            continue
        key = resource_key(s.account, s.region, SNAPSHOT_KIND, s.id)
        tags = read_tags(key, s.tags, rules.tag_keys)
        target = _target(SNAPSHOT_KIND, s, tags)
        ttl, problem = _ttl(key, s.tags, None)
        if problem is not None:
            findings.append(problem)
        if ttl is None:
            decisions.append(Decision(Action.NONE, target, "its costguard:ttl is malformed", now))
            continue
        if tags.exemption is not None and tags.exemption.active(now):
            decisions.append(Decision(Action.NONE, target, "it is exempt", now))
            continue
        expires = s.started_at + ttl
        if s.state != "completed" or before(now, expires - rules.grace):
            decisions.append(
                Decision(
                    Action.NONE,
                    target,
                    f"{s.state}, {_human(max(now - s.started_at, timedelta(0)))} old",
                    now,
                )
            )
            continue
        rate = (snapshot_rate or {}).get(s.region)
        usd = ZERO if rate is None else rate * s.volume_size_gib / HOURS_PER_PRICING_MONTH
        decisions.append(
            Decision(
                Action.DELETE_SNAPSHOT,
                target,
                f"Snapshot taken {s.started_at:%Y-%m-%d %H:%M} UTC, past its time to live of "
                f"{_human(ttl)}",
                now,
                evidence={
                    "started": s.started_at.isoformat(),
                    "ttl": _human(ttl),
                    "expires": expires.isoformat(),
                    "volume_size_gib": str(s.volume_size_gib),
                    "snapshot_usd_per_month": "unpriced"
                    if rate is None
                    else f"{rate * s.volume_size_gib} (upper bound: source volume size)",
                    "source_volume": s.volume_id,
                },
                usd_per_hour_saved=usd,
                grace=rules.grace,
                not_before=expires,
            )
        )
    return Judgement(tuple(decisions), tuple(findings))
