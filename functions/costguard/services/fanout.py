"""The Organization hub's tick, and the queue consumer's three kinds of work.

- :class:`Fanout` (the scheduled fan-out Lambda): load the directory (one Query), refresh
  the account list at most daily, plan the tick's scans (active slices only), enqueue
  scan, probe and regions items, report the accounts that cannot be entered, and
  aggregate the times whose deadline passed.
- :class:`OrgWork` (the queue consumer): route a work item by kind. A scan is
  :class:`~costguard.services.org.SliceWork`, then the directory learns whether the slice
  still holds anything; a probe (:class:`ProbeWork`) marks a slice active or empty; a
  regions item (:class:`RegionsWork`) reads an account's opted-in regions.

Wired from ports only: the benchmark and the tests run both over fakes
(tests/support/org_fakes.py), the Lambdas over DynamoDB, SQS, STS and the member roles.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

from costguard.domain.calendar import require_utc
from costguard.domain.directory import (
    ACTIVE_ACCOUNT,
    AccountListing,
    AccountRegions,
    Directory,
    DiscoveryError,
    ProbeAnswer,
    SliceState,
    SliceStatus,
    TickPolicy,
    TickWork,
    Unreachable,
    Work,
    WorkKind,
    after_departure,
    after_probe,
    after_probe_failure,
    after_regions,
    after_regions_failure,
    after_scan,
    listing_due,
    not_scanned_findings,
    plan_tick,
    select_accounts,
    unreachable,
    unreachable_alert,
    unreachable_findings,
    untagged_findings,
)
from costguard.domain.findings import Finding
from costguard.domain.org import Slice
from costguard.ports import FindingStore, SourceError
from costguard.retry import exponential, retrying
from costguard.services.org import (
    Aggregation,
    AggregationError,
    OrgReport,
    SliceBook,
    SliceResult,
    SliceWork,
    plausible,
)

R = TypeVar("R")

# -- ports ------------------------------------------------------------------------------


class AccountSource(Protocol):
    """The Organization's accounts (``organizations:ListAccounts``) and their tags."""

    def accounts(self) -> list[tuple[str, str]]:
        """(account id, state) of every account; raises DiscoveryError."""
        ...

    def tags(self, account: str) -> Mapping[str, str]: ...


SliceChange = Callable[[SliceStatus], SliceStatus | None]
RegionsChange = Callable[[AccountRegions], AccountRegions | None]


class DirectoryStore(Protocol):
    """The directory, with compare-and-set updates: ``change`` gets the stored value and
    returns the new one (None: nothing to write); a concurrent writer makes it run again
    on the newer value, so no update is lost and none is applied to a stale one."""

    def load(self) -> Directory: ...
    def listing(self) -> AccountListing | None: ...
    def save_listing(self, listing: AccountListing) -> None: ...
    def update_slice(self, s: Slice, change: SliceChange) -> SliceStatus | None: ...
    def update_regions(self, account: str, change: RegionsChange) -> AccountRegions | None: ...


class WorkQueue(Protocol):
    def send(self, items: Sequence[Work]) -> int:
        """Enqueue every item (deduplicated per tick, kind and slice); the count sent."""
        ...


class Prober(Protocol):
    """A few cheap calls in one account-region: does it hold anything the scan prices?"""

    def probe(self, region: str) -> ProbeAnswer: ...


class RegionReader(Protocol):
    def opted_in(self, region: str) -> tuple[str, ...]:
        """The account's enabled regions (DescribeRegions from ``region``)."""
        ...


class AlertSink(Protocol):
    def attempt_delivery(self, alerts: Sequence[Any]) -> Any: ...


# -- the fan-out --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FanoutSettings:
    scope: str
    policy: TickPolicy
    #: The aggregation's deadline after each tick.
    deadline: timedelta
    #: The configured accounts; None: discovered through the Organization.
    accounts: tuple[str, ...] | None = None
    opt_out_tag: str = "costguard:opt-out"
    #: How far back the sweep looks for times to aggregate.
    sweep_lookback: timedelta = timedelta(hours=6)
    #: The first pause before an account's throttled ListTagsForResource is tried again
    #: (doubled each time, :data:`TAG_ATTEMPTS` tries in all, after the SDK's own retries).
    tag_backoff_s: float = 0.5


@dataclass(frozen=True, slots=True)
class TickSummary:
    tick: datetime
    accounts: int
    known: int
    work: TickWork
    planned: bool
    sent: int
    listing_refreshed: bool = False
    discovery_error: str | None = None
    unreachable: tuple[Unreachable, ...] = ()
    aggregated: tuple[OrgReport, ...] = ()
    alerts: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    #: Guarded accounts whose tags could not be read at the last listing (reported).
    untagged: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The fan-out Lambda's JSON answer."""
        return {
            "tick": self.tick.isoformat(),
            "accounts": self.accounts,
            "account_regions": self.known,
            "scans": len(self.work.scans),
            "probes": len(self.work.probes),
            "regions": len(self.work.regions),
            "carried": len(self.work.carried),
            "not_scanned": sorted({s.account for s in self.work.out_of_scope})[:100],
            "planned": self.planned,
            "sent": self.sent,
            "listing_refreshed": self.listing_refreshed,
            "discovery_error": self.discovery_error,
            "unreachable": [
                {"account": u.account, "region": u.region, "failure": u.failure}
                for u in self.unreachable
            ],
            "aggregated": [r.tick.isoformat() for r in self.aggregated],
            "alerts": list(self.alerts),
            "failures": list(self.failures),
            "untagged_accounts": list(self.untagged),
        }


#: Tries of one account's tags while Organizations throttles (about 1 call a second).
TAG_ATTEMPTS = 3


class FanoutError(RuntimeError):
    """A step after the enqueue failed (reporting, aggregation); the work was enqueued."""


class Fanout:
    """One scheduled time of the Organization hub."""

    def __init__(
        self,
        store: DirectoryStore,
        book: SliceBook,
        queue: WorkQueue,
        settings: FanoutSettings,
        *,
        source: AccountSource | None = None,
        aggregation: Aggregation | None = None,
        findings: FindingStore | None = None,
        alerts: AlertSink | None = None,
        log: Callable[[str, Mapping[str, Any]], None] = lambda _m, _x: None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if settings.accounts is None and source is None:
            raise ValueError("discovering accounts needs an AccountSource")
        self._store = store
        self._book = book
        self._queue = queue
        self._s = settings
        self._source = source
        self._aggregation = aggregation
        self._findings = findings
        self._alerts = alerts
        self._log = log
        self._sleep = sleep

    def listing(self, directory: Directory, tick: datetime) -> tuple[AccountListing, bool]:
        """The accounts of this tick, and whether they were listed afresh.

        A failed refresh keeps the stored list (the guard goes on with what it knew);
        only the very first listing's failure fails the tick.
        """
        if self._s.accounts is not None:
            return AccountListing(self._s.accounts, tick), False
        stored = directory.listing
        if not listing_due(stored, tick):
            assert stored is not None
            return stored, False
        fresh = self.discover(tick, stored)
        self._store.save_listing(fresh)
        return fresh, True

    def discover(self, now: datetime, previous: AccountListing | None = None) -> AccountListing:
        """ListAccounts, then the tags of the ACTIVE accounts only.

        A failing ListAccounts fails the listing (the stored one is kept). One account's
        tags that cannot be read (throttled after the SDK's and our retries, or denied)
        fail nothing: that account keeps its ``previous`` decision (see
        :func:`~costguard.domain.directory.select_accounts`) and is reported.
        """
        assert self._source is not None
        listed = self._source.accounts()
        tags: dict[str, Mapping[str, str]] = {}
        unreadable: dict[str, str] = {}
        for account, state in listed:
            if state != ACTIVE_ACCOUNT or account in tags or account in unreadable:
                continue
            try:
                tags[account] = self._tags(account)
            except DiscoveryError as exc:
                unreadable[account] = str(exc)
        if unreadable:
            self._log(
                "account tags could not be read; those accounts keep their last decision",
                {"accounts": sorted(unreadable)[:20], "count": len(unreadable)},
            )
        return select_accounts(
            listed,
            tags,
            self._s.opt_out_tag,
            now,
            unreadable=unreadable,
            previous=previous,
        )

    def _tags(self, account: str) -> Mapping[str, str]:
        """One account's tags, tried again with backoff while Organizations throttles."""
        source, backoff = self._source, exponential(self._s.tag_backoff_s)
        assert source is not None
        return retrying(
            lambda: source.tags(account),
            attempts=TAG_ATTEMPTS,
            delay=lambda e, n: (
                backoff(n) if isinstance(e, DiscoveryError) and e.throttled else None
            ),
            sleep=self._sleep,
        )

    def tick(self, tick: datetime) -> TickSummary:
        tick = require_utc(tick)
        directory = self._store.load()
        discovery_error = None
        try:
            listing, refreshed = self.listing(directory, tick)
        except DiscoveryError as exc:
            if directory.listing is None:
                raise
            listing, refreshed, discovery_error = directory.listing, False, str(exc)
            self._log("account discovery failed; the stored list is used", {"error": str(exc)})
        work = plan_tick(directory, listing.accounts, tick, self._s.policy)
        planned = self._book.plan(tick, work.scans, tick + self._s.deadline, work.carried)
        sent = self._queue.send(work.items())
        failures: list[str] = []
        lost = tuple(unreachable(directory, listing.accounts))
        alerts: list[str] = []
        if lost:
            self._log(
                "accounts cannot be entered",
                {"accounts": sorted({u.account for u in lost}), "count": len(lost)},
            )
        for s in work.departed:
            # Out of scope while still active: marked so that its carry ends with the
            # month (this tick already carries it; a failed mark is tried next tick).
            try:
                self._store.update_slice(s, partial(after_departure, at=tick))
            except Exception as exc:
                failures.append(f"departure of {s.key}: {type(exc).__name__}: {exc}")
        if work.out_of_scope:
            self._log(
                "account-regions no longer scanned; their month-to-date is still counted",
                {
                    "slices": [s.key for s in work.out_of_scope[:20]],
                    "count": len(work.out_of_scope),
                },
            )
        also = [*untagged_findings(listing), *not_scanned_findings(work)]
        if lost or also:
            try:
                alerts += self._report(lost, tick, also)
            except Exception as exc:
                failures.append(f"report: {type(exc).__name__}: {exc}")
        aggregated: list[OrgReport] = []
        if self._aggregation is not None:
            try:
                aggregated = self._aggregation.sweep(tick, self._s.sweep_lookback)
            except AggregationError as exc:
                aggregated = list(exc.reports)
                failures.append(f"aggregation: {exc}")
            except Exception as exc:
                failures.append(f"aggregation: {type(exc).__name__}: {exc}")
        summary = TickSummary(
            tick,
            len(listing.accounts),
            work.known,
            work,
            planned,
            sent,
            refreshed,
            discovery_error,
            lost,
            tuple(aggregated),
            tuple(alerts) + tuple(a for r in aggregated for a in r.alerts),
            tuple(failures),
            tuple(sorted(listing.untagged)),
        )
        if failures:
            # The work is enqueued; the schedule's retry re-plans nothing and SQS
            # deduplicates the messages, while the failed step runs again.
            raise FanoutError("; ".join(failures))
        return summary

    def _report(
        self, lost: Sequence[Unreachable], tick: datetime, also: Sequence[Finding] = ()
    ) -> list[str]:
        if self._findings is not None:
            self._findings.record_findings(
                self._s.scope, tick, [*unreachable_findings(lost), *also]
            )
        alert = unreachable_alert(lost, tick)
        if self._alerts is None or alert is None:
            return []
        run = self._alerts.attempt_delivery([alert])
        run.raise_if_failed()
        return [a.alert_id for a in run.sent]


# -- the consumer ---------------------------------------------------------------------------


def _failure(exc: Exception) -> str:
    code = str(getattr(exc, "code", "") or type(exc).__name__)
    detail = str(getattr(exc, "detail", "") or exc)
    return f"{code}: {detail}"


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    slice: Slice
    tick: datetime
    answer: ProbeAnswer
    #: The stored state after this probe (None: a late or duplicate answer, ignored).
    state: SliceState | None


class _InAccount(Generic[R]):
    """Work done in a member account through ``enter`` (its prober or region reader).

    A failure is recorded in the directory (the next try waits for the next window; the
    fan-out reports the account) and raised, so that SQS retries the item and dead-letters
    it after its last attempt; no other account's item is affected.
    """

    def __init__(
        self,
        store: DirectoryStore,
        enter: Callable[[Slice], R],
        access_errors: tuple[type[Exception], ...] = (),
    ) -> None:
        self._store = store
        self._enter = enter
        self._errors: tuple[type[Exception], ...] = (*access_errors, SourceError)


class ProbeWork(_InAccount[Prober]):
    """Probe one account-region; mark it active or empty (or record why it failed)."""

    def run(self, tick: datetime, s: Slice, now: datetime) -> ProbeOutcome:
        tick = plausible(tick, now, f"probe of {s}")
        try:
            answer = self._enter(s).probe(s.region)
        except self._errors as exc:
            why = _failure(exc)
            self._store.update_slice(s, lambda st: after_probe_failure(st, tick, why))
            raise
        if answer.unknown:
            # A call was refused and nothing else was found (a service control policy, an
            # outdated member role without ec2:DescribeInstances): not "empty", since what
            # the refused call reads is unknown. Recorded as a failure, which the fan-out
            # reports by account and region; the state stays as it was (an active slice
            # is still scanned); not retried now (it would be refused again): the next
            # window tries again.
            why = (
                f"AccessDenied: every probe call was refused ({', '.join(answer.denied)})"
                if answer.blind
                else f"AccessDenied: {'probe call' if len(answer.denied) == 1 else 'probe calls'} refused ({', '.join(answer.denied)}); "
                "what they read is unknown, so the region is not taken as empty"
            )
            self._store.update_slice(s, lambda st: after_probe_failure(st, tick, why))
            return ProbeOutcome(s, tick, answer, None)
        new = self._store.update_slice(s, lambda st: after_probe(st, tick, bool(answer.found)))
        return ProbeOutcome(s, tick, answer, new.state if new else None)


@dataclass(frozen=True, slots=True)
class RegionsOutcome:
    account: str
    tick: datetime
    regions: tuple[str, ...]
    stored: bool


class RegionsWork(_InAccount[RegionReader]):
    """Read one account's opted-in regions (DescribeRegions, in the account itself)."""

    def run(self, tick: datetime, s: Slice, now: datetime) -> RegionsOutcome:
        tick = plausible(tick, now, f"regions of {s.account}")
        try:
            regions = self._enter(s).opted_in(s.region)
        except self._errors as exc:
            why = _failure(exc)
            self._store.update_regions(s.account, lambda e: after_regions_failure(e, tick, why))
            raise
        new = self._store.update_regions(s.account, lambda e: after_regions(e, tick, regions))
        return RegionsOutcome(s.account, tick, tuple(sorted(set(regions))), new is not None)


@dataclass(frozen=True, slots=True)
class WorkOutcome:
    work: Work
    scan: SliceResult | None = None
    probe: ProbeOutcome | None = None
    regions: RegionsOutcome | None = None
    #: The slice's state after a scan, when the scan changed it.
    state: SliceState | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


class UnroutableWorkError(ValueError):
    """A work item of a kind this consumer was not built for."""


class OrgWork:
    """The consumer's router: one work item, by kind."""

    def __init__(
        self,
        scans: SliceWork,
        store: DirectoryStore | None = None,
        probes: ProbeWork | None = None,
        regions: RegionsWork | None = None,
    ) -> None:
        self.scans = scans
        self._store = store
        self._probes = probes
        self._regions = regions

    def run(self, work: Work, now: datetime) -> WorkOutcome:
        if work.kind is WorkKind.SCAN:
            result = self.scans.run(work.tick, work.slice, now)
            state = None
            if self._store is not None:
                new = self._store.update_slice(
                    work.slice,
                    lambda st: after_scan(st, result.tick, result.resources, result.complete),
                )
                state = new.state if new else None
            return WorkOutcome(work, scan=result, state=state)
        if work.kind is WorkKind.PROBE and self._probes is not None:
            return WorkOutcome(work, probe=self._probes.run(work.tick, work.slice, now))
        if work.kind is WorkKind.REGIONS and self._regions is not None:
            return WorkOutcome(work, regions=self._regions.run(work.tick, work.slice, now))
        raise UnroutableWorkError(f"this consumer does not run {work.kind} items")
