"""The Organization's directory: which accounts are guarded, which of their regions hold
anything, and what one scheduled time (a *tick*) has to do about it.

Pure: no clock, no I/O. The store is :class:`costguard.services.fanout.DirectoryStore`.

Why a directory at all: the cost of a tick must grow with the account-regions that hold
accelerators, not with accounts x regions. So only **active** slices are scanned every
tick; **empty** ones are re-probed (a handful of cheap calls) once per probe interval, and
**unprobed** ones (new accounts, new regions) are probed at once::

    unprobed --probe finds something--> active --scan finds nothing at all--> empty
    unprobed --probe finds nothing-----> empty  --probe finds something-----> active

Every observation carries the scheduled time it belongs to (``as_of``). An observation
that is not newer than the one the state rests on is ignored, so a duplicate or late
message (SQS delivers at least once, and a retry may arrive after a newer tick) can never
move the state backwards. A scan that still sees resources changes nothing, so an active
slice costs no directory write per scan.

Probes of empty slices are spread evenly over the interval: each slice has a fixed phase
(a stable hash of its key), and is due once its tick enters a later interval window than
its last probe. Two probes of a slice are therefore never more than one interval (plus
one tick) apart, and the probes of 800 slices do not all land on the same tick.
"""

from __future__ import annotations

import unicodedata
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from costguard.domain.alerts import (
    MAX_LINE_CHARS,
    Alert,
    AlertKind,
    AlertSeverity,
    clip,
    utc_label,
    utc_stamp,
)
from costguard.domain.calendar import month_key, require_utc
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.org import Slice
from costguard.domain.text import plural

#: An Organization account's state (``State``; the older ``Status`` has the same values).
ACTIVE_ACCOUNT = "ACTIVE"
#: How long a discovered account list is trusted before ListAccounts runs again.
LISTING_MAX_AGE = timedelta(days=1)
#: Failure messages are kept to this length.
FAILURE_CHARS = 300


class DiscoveryError(Exception):
    """The Organization's accounts could not be listed (ListAccounts, ListTagsForResource)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.detail = message

    @property
    def throttled(self) -> bool:
        """Organizations' rate limit (about one call a second): worth another try."""
        return self.code in THROTTLED_CODES


#: Error codes that mean "too fast", not "no": a call refused with one is tried again.
THROTTLED_CODES = frozenset(
    {"TooManyRequestsException", "ThrottlingException", "Throttling", "RequestLimitExceeded"}
)


class SliceState(StrEnum):
    UNPROBED = "unprobed"
    ACTIVE = "active"
    EMPTY = "empty"


class WorkKind(StrEnum):
    SCAN = "scan"
    PROBE = "probe"
    REGIONS = "regions"


@dataclass(frozen=True, slots=True, order=True)
class Work:
    """One work item: ``kind`` for ``slice`` at scheduled time ``tick``.

    A ``regions`` item's slice is (account, the region DescribeRegions is called in).
    """

    tick: datetime
    kind: WorkKind
    slice: Slice


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    """What a probe saw: ``found`` (e.g. ``ec2:g5.xlarge``), and the calls refused."""

    found: tuple[str, ...] = ()
    denied: tuple[str, ...] = ()
    #: Every call was refused: nothing could be seen, which is not "empty".
    blind: bool = False

    @property
    def unknown(self) -> bool:
        """Nothing found, but a call was refused: what it would have read is unknown, so
        the slice is not empty (a GPU behind a refused DescribeInstances is not $0)."""
        return not self.found and bool(self.denied)


@dataclass(frozen=True, slots=True)
class SliceStatus:
    """What the directory knows of one account-region."""

    slice: Slice
    state: SliceState = SliceState.UNPROBED
    #: The scheduled time of the observation the state rests on.
    as_of: datetime | None = None
    #: The last probe, or scan that found nothing: the clock of an empty slice's probes.
    checked_at: datetime | None = None
    #: The last failed probe and why (backs the next one off to the next window).
    failed_at: datetime | None = None
    failure: str = ""
    #: The time an active slice was last seen active (when it turned empty): its spend of
    #: that month is still rolled up although it is no longer scanned.
    active_until: datetime | None = None
    #: Optimistic-concurrency counter of the store (0: never stored).
    version: int = 0


@dataclass(frozen=True, slots=True)
class AccountRegions:
    """An account's opted-in regions, as its own DescribeRegions answered."""

    account: str
    regions: tuple[str, ...] = ()
    discovered_at: datetime | None = None
    failed_at: datetime | None = None
    failure: str = ""
    version: int = 0


@dataclass(frozen=True, slots=True)
class AccountListing:
    """The accounts a tick covers: discovered (refreshed at most daily) or configured."""

    accounts: tuple[str, ...]
    refreshed_at: datetime
    source: str = "configured"
    #: Skipped: tagged ``costguard:opt-out=true``.
    opted_out: tuple[str, ...] = ()
    #: Skipped: not ACTIVE (suspended, closing, pending activation).
    inactive: tuple[str, ...] = ()
    #: Not skipped, but carrying an opt-out tag whose value is neither true nor false.
    unclear: Mapping[str, str] = field(default_factory=dict)
    #: ACTIVE accounts whose tags could not be read (account -> why): each keeps the
    #: previous listing's decision (an opted-out account stays out), and a new one is
    #: guarded, since a scan is read-only and missing data is not $0. Reported, and read
    #: again at the next refresh.
    untagged: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Directory:
    listing: AccountListing | None = None
    regions: Mapping[str, AccountRegions] = field(default_factory=dict)
    slices: Mapping[Slice, SliceStatus] = field(default_factory=dict)

    def status(self, s: Slice) -> SliceStatus:
        return self.slices.get(s) or SliceStatus(s)


# -- accounts ---------------------------------------------------------------------------


def opt_out_value(raw: str) -> bool | None:
    """``true`` (any case, surrounding blanks, full-width letters): opted out; ``false`` or
    empty: not; anything else: None (not understood, so *not* opted out, and reported).

    NFKC folds full-width and compatibility letters to ASCII; a zero-width or other
    invisible character is not folded away, so ``tr\u200bue`` is reported, not obeyed.
    """
    text = unicodedata.normalize("NFKC", raw).strip().casefold()
    if text == "true":
        return True
    if text in ("false", ""):
        return False
    return None


def select_accounts(
    listed: Iterable[tuple[str, str]],
    tags: Mapping[str, Mapping[str, str]],
    opt_out_tag: str,
    now: datetime,
    *,
    unreadable: Mapping[str, str] | None = None,
    previous: AccountListing | None = None,
) -> AccountListing:
    """The accounts to guard: ACTIVE ones whose opt-out tag is not ``true``.

    ``listed`` is (account id, state) as ListAccounts returned them; ``tags`` holds the
    tags of the ACTIVE ones. The tag key is matched without regard to case, so that
    ``CostGuard:Opt-Out`` is obeyed too; any matching key set to true opts out.

    ``unreadable`` names the ACTIVE accounts whose tags could not be read (and why). One
    such account never fails the listing: it keeps its decision of the ``previous``
    listing (opted out stays out: the user's known intent), and an account not opted out
    before, or new, is guarded (a scan is read-only, and an unguarded account's GPUs
    would be missing from the budgets); either way it is in :attr:`AccountListing.untagged`.
    """
    accounts: list[str] = []
    opted_out: list[str] = []
    inactive: list[str] = []
    unclear: dict[str, str] = {}
    untagged: dict[str, str] = {}
    was_out = frozenset(previous.opted_out) if previous is not None else frozenset()
    wanted = opt_out_tag.strip().casefold()
    for account, state in dict.fromkeys(listed):
        Slice(account, "us-east-1")  # a 12-digit id, or ValueError
        if state != ACTIVE_ACCOUNT:
            inactive.append(account)
            continue
        if unreadable and account in unreadable:
            untagged[account] = unreadable[account][:FAILURE_CHARS]
            (opted_out if account in was_out else accounts).append(account)
            continue
        values = [v for k, v in (tags.get(account) or {}).items() if k.strip().casefold() == wanted]
        readings = [opt_out_value(v) for v in values]
        if any(r is True for r in readings):
            opted_out.append(account)
            continue
        odd = [v for v, r in zip(values, readings, strict=True) if r is None]
        if odd:
            unclear[account] = odd[0][:64]
        accounts.append(account)
    return AccountListing(
        tuple(sorted(set(accounts))),
        require_utc(now),
        "discover",
        tuple(sorted(set(opted_out))),
        tuple(sorted(set(inactive))),
        unclear,
        untagged,
    )


def listing_due(listing: AccountListing | None, tick: datetime) -> bool:
    return listing is None or tick >= listing.refreshed_at + LISTING_MAX_AGE


# -- the clock of probes ----------------------------------------------------------------


def _window(moment: datetime, key: str, interval: timedelta) -> int:
    """The interval window ``moment`` falls in, shifted by ``key``'s stable phase."""
    seconds = max(int(interval.total_seconds()), 1)
    phase = zlib.crc32(key.encode()) % seconds
    return int((require_utc(moment).timestamp() - phase) // seconds)


def window_crossed(last: datetime | None, tick: datetime, key: str, interval: timedelta) -> bool:
    """True when ``tick`` is in a later window of ``key`` than ``last`` (or never done)."""
    return last is None or _window(tick, key, interval) > _window(last, key, interval)


def _latest(*moments: datetime | None) -> datetime | None:
    present = [m for m in moments if m is not None]
    return max(present) if present else None


def probe_due(status: SliceStatus, tick: datetime, interval: timedelta) -> bool:
    """An unprobed slice at once; an empty one once per window; an active one never."""
    if status.state is SliceState.ACTIVE:
        return False
    last = _latest(status.checked_at, status.failed_at)
    return window_crossed(last, tick, status.slice.key, interval)


def regions_due(
    entry: AccountRegions | None, tick: datetime, retry: timedelta, refresh: timedelta
) -> bool:
    """Never read: now. Read: once per ``refresh`` window. Last read failed: once per
    ``retry`` window (each window phased per account, so reads spread over the ticks)."""
    if entry is None:
        return True
    key = f"regions/{entry.account}"
    failed_last = entry.failed_at is not None and (
        entry.discovered_at is None or entry.failed_at > entry.discovered_at
    )
    if failed_last:
        return window_crossed(entry.failed_at, tick, key, retry)
    return window_crossed(entry.discovered_at, tick, key, refresh)


# -- transitions: None means "nothing to write" -------------------------------------------


def _not_newer(status: SliceStatus, at: datetime) -> bool:
    return status.as_of is not None and at <= status.as_of


def after_probe(status: SliceStatus, at: datetime, found: bool) -> SliceStatus | None:
    """A probe's answer at scheduled time ``at``.

    Ignored when the state rests on a newer observation (a late probe), or on one of the
    same time, unless this one found something the other did not (a duplicate delivery
    after a GPU started: finding wins, since a needless scan costs less than a missed GPU).
    """
    at = require_utc(at)
    state = SliceState.ACTIVE if found else SliceState.EMPTY
    if status.as_of is not None and (
        at < status.as_of
        or (at == status.as_of and not (found and status.state is not SliceState.ACTIVE))
    ):
        return None
    return replace(status, state=state, as_of=at, checked_at=at, failed_at=None, failure="")


def after_probe_failure(status: SliceStatus, at: datetime, failure: str) -> SliceStatus | None:
    """A probe that could not answer: the state stays, the next try waits a window.

    Written once per scheduled time (the queue's retries of the same item add nothing)."""
    at = require_utc(at)
    if status.failed_at is not None and at <= status.failed_at:
        return None
    if status.checked_at is not None and at <= status.checked_at:
        return None  # an answer of this time or later is in: the failure is stale
    return replace(status, failed_at=at, failure=failure[:FAILURE_CHARS])


def after_scan(
    status: SliceStatus, tick: datetime, resources: int, complete: bool
) -> SliceStatus | None:
    """A scan's outcome: resources keep (or make) the slice active; a *complete* scan that
    found nothing at all makes it empty (and counts as its probe). A scan with a failed
    source proves nothing: what it could not read is unknown, not absent."""
    tick = require_utc(tick)
    if _not_newer(status, tick):
        return None
    if resources > 0:
        if status.state is SliceState.ACTIVE:
            return None  # the common case: no write per scan
        return replace(status, state=SliceState.ACTIVE, as_of=tick, failed_at=None, failure="")
    if not complete or status.state is SliceState.EMPTY:
        return None
    was_active = status.state is SliceState.ACTIVE
    return replace(
        status,
        state=SliceState.EMPTY,
        as_of=tick,
        checked_at=tick,
        active_until=tick if was_active else status.active_until,
    )


def after_departure(status: SliceStatus, at: datetime) -> SliceStatus | None:
    """An active slice out of scope at scheduled time ``at`` (its account unlisted, its
    region disabled or not allowed): carried from ``at`` to the month's end, and
    unprobed, so that if it comes back it is probed at once rather than trusted."""
    at = require_utc(at)
    if status.state is not SliceState.ACTIVE or (status.as_of is not None and at < status.as_of):
        return None
    return replace(
        status,
        state=SliceState.UNPROBED,
        as_of=at,
        checked_at=None,
        failed_at=None,
        failure="",
        active_until=at,
    )


def after_regions(
    entry: AccountRegions, at: datetime, regions: Iterable[str]
) -> AccountRegions | None:
    at = require_utc(at)
    if entry.discovered_at is not None and at <= entry.discovered_at:
        return None
    return replace(
        entry,
        regions=tuple(sorted(set(regions))),
        discovered_at=at,
        failed_at=None,
        failure="",
    )


def after_regions_failure(
    entry: AccountRegions, at: datetime, failure: str
) -> AccountRegions | None:
    at = require_utc(at)
    if entry.failed_at is not None and at <= entry.failed_at:
        return None
    if entry.discovered_at is not None and at <= entry.discovered_at:
        return None
    return replace(entry, failed_at=at, failure=failure[:FAILURE_CHARS])


# -- one tick -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TickPolicy:
    probe_interval: timedelta
    #: Where an account's DescribeRegions is called (the hub's region).
    home_region: str
    #: The configured regions: discovered ones outside it are ignored (None: all).
    allow: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class TickWork:
    """What one tick does: scan the active slices, probe the due ones, read new accounts'
    regions; ``carried`` slices are only read by the aggregation (empty now, but with
    spend earlier this month)."""

    tick: datetime
    scans: tuple[Slice, ...] = ()
    probes: tuple[Slice, ...] = ()
    regions: tuple[Slice, ...] = ()
    carried: tuple[Slice, ...] = ()
    #: Account-regions in scope (scanned, probed or waiting for their window).
    known: int = 0
    #: Carried slices that are out of scope (their account is not listed any more:
    #: suspended, closed, opted out; or their region is disabled or not allowed): no
    #: longer scanned, reported as such, their month-to-date still rolled up.
    out_of_scope: tuple[Slice, ...] = ()
    #: Of those, the ones still stored active: the fan-out marks them (:func:`after_departure`)
    #: so that their carry ends with the month, and a return starts with a probe.
    departed: tuple[Slice, ...] = ()

    def items(self) -> list[Work]:
        return [
            *(Work(self.tick, WorkKind.SCAN, s) for s in self.scans),
            *(Work(self.tick, WorkKind.PROBE, s) for s in self.probes),
            *(Work(self.tick, WorkKind.REGIONS, s) for s in self.regions),
        ]


def plan_tick(
    directory: Directory, accounts: Sequence[str], tick: datetime, policy: TickPolicy
) -> TickWork:
    """Everything this tick must enqueue, from the directory alone (no AWS call).

    A slice that leaves the scope (its account is no longer listed, its region no longer
    enabled or allowed) takes nothing out of the month's roll-up: AWS still bills what it
    ran. It is carried until the month ends (from when it was last active), as a slice
    that went empty is, and reported as no longer scanned.
    """
    tick = require_utc(tick)
    month = month_key(tick)
    scans: list[Slice] = []
    probes: list[Slice] = []
    regions: list[Slice] = []
    carried: list[Slice] = []
    in_scope: set[Slice] = set()
    known = 0
    for account in dict.fromkeys(accounts):
        entry = directory.regions.get(account)
        # An account's regions are read once per probe interval (one DescribeRegions), so
        # a region enabled after the last read is read within one interval (plus a tick)
        # and, new, probed at the next tick: found as soon as a GPU in an empty one.
        if regions_due(entry, tick, policy.probe_interval, policy.probe_interval):
            regions.append(Slice(account, policy.home_region))
        for region in entry.regions if entry else ():
            if policy.allow is not None and region not in policy.allow:
                continue
            status = directory.status(Slice(account, region))
            known += 1
            in_scope.add(status.slice)
            if status.state is SliceState.ACTIVE:
                scans.append(status.slice)
                continue
            if probe_due(status, tick, policy.probe_interval):
                probes.append(status.slice)
            if status.active_until is not None and month_key(status.active_until) == month:
                carried.append(status.slice)
    out_of_scope: list[Slice] = []
    departed: list[Slice] = []
    for s, status in sorted(directory.slices.items()):
        if s in in_scope:
            continue
        if status.state is SliceState.ACTIVE:
            departed.append(s)  # active until this tick: its month is this one
        elif status.active_until is None or month_key(status.active_until) != month:
            continue
        out_of_scope.append(s)
    return TickWork(
        tick,
        tuple(scans),
        tuple(probes),
        tuple(regions),
        tuple(carried) + tuple(out_of_scope),
        known,
        tuple(out_of_scope),
        tuple(departed),
    )


# -- accounts that cannot be entered -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unreachable:
    """An account (or one of its regions) whose last regions read or probe failed."""

    account: str
    region: str | None
    since: datetime
    failure: str


def unreachable(directory: Directory, accounts: Iterable[str]) -> list[Unreachable]:
    """The listed accounts whose last attempt to read their regions or probe failed."""
    wanted = set(accounts)
    out: list[Unreachable] = []
    for account, entry in sorted(directory.regions.items()):
        if account not in wanted or entry.failed_at is None:
            continue
        if entry.discovered_at is None or entry.failed_at > entry.discovered_at:
            out.append(Unreachable(account, None, entry.failed_at, entry.failure))
    for s, status in sorted(directory.slices.items()):
        if s.account not in wanted or status.failed_at is None:
            continue
        regions = directory.regions.get(s.account)
        if regions is None or s.region not in regions.regions:
            continue
        if status.checked_at is None or status.failed_at > status.checked_at:
            out.append(Unreachable(s.account, s.region, status.failed_at, status.failure))
    return out


def unreachable_findings(items: Sequence[Unreachable]) -> list[Finding]:
    """One ``scan-failed`` finding per account (or account-region) that cannot be entered."""
    return [
        Finding(
            FindingCode.SCAN_FAILED,
            f"account/{u.account}" + (f"/{u.region}" if u.region else ""),
            clip(
                (
                    f"account {u.account}"
                    + (f" in {u.region}: the probe" if u.region else ": reading its regions")
                    + f" failed since {utc_label(u.since)} with {u.failure}; what runs there "
                    "is unknown to CostGuard, not $0"
                ),
                MAX_LINE_CHARS,
            ),
            Severity.ERROR,
        )
        for u in items
    ]


def not_scanned_findings(work: TickWork) -> list[Finding]:
    """One finding per account with slices out of scope, whose month is still counted."""
    by_account: dict[str, list[str]] = {}
    for s in work.out_of_scope:
        by_account.setdefault(s.account, []).append(s.region)
    return [
        Finding(
            FindingCode.NOT_SCANNED,
            f"account/{account}",
            clip(
                f"account {account} is no longer scanned in {', '.join(regions[:5])}"
                f"{', ...' if len(regions) > 5 else ''} (the account is suspended, closed, "
                "opted out or no longer listed, or the region is disabled or not allowed); "
                "its spend there earlier this month is still counted until the month ends",
                MAX_LINE_CHARS,
            ),
            Severity.WARNING,
        )
        for account, regions in sorted(by_account.items())
    ]


def untagged_findings(listing: AccountListing) -> list[Finding]:
    """One finding per account whose tags (and so its opt-out) could not be read."""
    out = []
    for account, why in sorted(listing.untagged.items()):
        decision = (
            "left out, as the previous listing had it opted out"
            if account in listing.opted_out
            else "guarded (read-only) until its tags can be read"
        )
        out.append(
            Finding(
                FindingCode.SCAN_FAILED,
                f"account/{account}/tags",
                clip(
                    f"account {account}: its tags (and so its opt-out) could not be read at "
                    f"{utc_label(listing.refreshed_at)} ({why}); {decision}. They are read "
                    "again at the next daily listing",
                    MAX_LINE_CHARS,
                ),
                Severity.WARNING,
            )
        )
    return out


def unreachable_alert(items: Sequence[Unreachable], now: datetime) -> Alert | None:
    """One alert naming the accounts CostGuard cannot enter; each account once a day."""
    if not items:
        return None
    now = require_utc(now)
    accounts = sorted({u.account for u in items})
    day = f"{now:%Y%m%d}"
    lines = [
        clip(f"{u.account} {u.region or '(regions)'}: {u.failure}", MAX_LINE_CHARS)
        for u in items[:20]
    ]
    if len(items) > 20:
        lines.append(f"and {len(items) - 20} more")
    title = (
        f"CostGuard cannot enter account {accounts[0]}"
        if len(accounts) == 1
        else f"CostGuard cannot enter {plural(len(accounts), 'account')}"
    )
    return Alert(
        alert_id=f"{AlertKind.SCAN_FAILED}/org-unreachable/{utc_stamp(now)}",
        kind=AlertKind.SCAN_FAILED,
        project=None,
        severity=AlertSeverity.WARNING,
        title=title,
        summary=(
            f"Reading the regions of, or probing, {', '.join(accounts[:5])}"
            f"{', ...' if len(accounts) > 5 else ''} failed. GPUs there are not found, "
            "priced or budgeted, its idle notebooks are not stopped and its stale data is "
            "not deleted, until it works; the other accounts are guarded."
        ),
        at=now,
        why="the member role is missing, denied, or its calls are throttled",
        next_steps=(
            "Check that the account has the CostGuard member stack (role "
            "costguard-member-read) and that the hub may assume it.",
            "Or tag the account costguard:opt-out=true to leave it out on purpose.",
        ),
        facts={"accounts": ", ".join(accounts[:10])},
        details=tuple(lines),
        dedupe=tuple(f"unreachable/{day}/{a}" for a in accounts),
    )
