"""Hostile tests of the Organization hub's aggregation, discovery and probes.

Everything here runs the real services (SliceWork, Aggregation, Fanout, ProbeWork,
MemberProbe) over in-memory stores, with one AWS-shaped failure injected.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from costguard.adapters.directory import InMemoryDirectory
from costguard.adapters.member import MemberProbe
from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.slices import InMemorySliceBook
from costguard.domain.alerts import AlertKind
from costguard.domain.directory import (
    AccountRegions,
    DiscoveryError,
    SliceState,
    TickPolicy,
    WorkKind,
    plan_tick,
    unreachable,
)
from costguard.domain.org import Slice
from costguard.ports import CommitOutcome, ThrottledError
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.fanout import Fanout, FanoutSettings, ProbeWork
from costguard.services.org import Aggregation, OrgSettings, SliceWork, alert_after
from tests.support.fakes import RecordingNotifier
from tests.support.org_fakes import RecordingQueue

HUB = "999999999999"
A, B, C = "111111111111", "222222222222", "333333333333"
REGION = "us-east-1"
T0 = datetime(2028, 2, 29, 12, 0, tzinfo=UTC)  # a leap day, for good measure
DEADLINE = timedelta(minutes=10)


@dataclass
class _Report:
    resource_count: int = 1
    failed_sources: frozenset[tuple[str, str]] = frozenset()
    ledger: CommitOutcome = CommitOutcome.APPLIED
    projects: tuple[Any, ...] = ()
    teams: tuple[Any, ...] = ()
    prediction_costs: tuple[Any, ...] = ()


class _Scan:
    def run(self, now: datetime) -> _Report:
        return _Report()


class _ThrottledOnce:
    """The ledger, with DynamoDB throttling the first ``month_totals`` read (as a busy table
    does under 800 concurrent slice reads) and answering normally afterwards."""

    def __init__(self, inner: InMemoryLedger) -> None:
        self._inner = inner
        self.failures_left = 1

    def month_totals(self, scope: str, month: str) -> Any:
        if self.failures_left:
            self.failures_left -= 1
            raise ThrottledError(
                "dynamodb", REGION, "Query", "ProvisionedThroughputExceededException", "slow down"
            )
        return self._inner.month_totals(scope, month)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_an_aggregation_that_crashed_after_its_claim_is_aggregated_later() -> None:
    """Defect: ``Aggregation.run`` claims the time (``SET aggregated_at``) *before* it reads
    the slices' ledgers, records the findings and sends the alerts. One throttled read
    after the claim (a crash between two writes) and the time is never aggregated: the
    retried message finds the slice already done (``newly_done`` False, so no aggregation),
    and the deadline sweep skips every plan with ``aggregated_at`` set. The user loses that
    scheduled time's budget alerts and missing-account report with no trace; if it happens
    at the tick where a project crosses its budget, the over-budget alert is never sent.
    """
    # GIVEN a time planned for two accounts, and a ledger that throttles once
    book = InMemorySliceBook()
    ledger = _ThrottledOnce(InMemoryLedger())
    aggregation = Aggregation(book, ledger, OrgSettings(scope=HUB))  # type: ignore[arg-type]
    work = SliceWork(book, lambda s: _Scan(), aggregation, ())  # type: ignore[arg-type,return-value]
    sa, sb = Slice(A, REGION), Slice(B, REGION)
    book.plan(T0, [sa, sb], T0 + DEADLINE)
    reports = []
    work.run(T0, sa, T0 + timedelta(minutes=1))
    # WHEN the last slice's aggregation is throttled, SQS retries the message, and the
    # fan-out's sweep runs after the deadline
    with pytest.raises(ThrottledError):
        work.run(T0, sb, T0 + timedelta(minutes=2))
    retried = work.run(T0, sb, T0 + timedelta(minutes=3))
    if retried.aggregated is not None:
        reports.append(retried.aggregated)
    reports += aggregation.sweep(T0 + timedelta(minutes=15), timedelta(hours=6))
    # THEN the time is aggregated once all the same
    assert [r.tick for r in reports] == [T0], (
        f"the time was claimed by the crashed aggregation and never aggregated: {book.get(T0)}"
    )


def test_an_account_that_fails_every_tick_is_alerted_once_a_day_not_every_tick() -> None:
    """Defect: the missing-slice alert is deduplicated per (time, account, region), so an
    account whose member role was deleted sends a new ``scan-failed`` alert at *every*
    scheduled time: 96 a day at the default 15 minutes, per broken account, until someone
    fixes it. The README promises a failing account is "reported by name (finding and one
    alert)", and the fan-out's own unreachable-account alert is kept to once per account
    per day; this one floods the channel (and pages whoever is on it) instead.
    """
    # GIVEN an Organization of two accounts whose second cannot be entered
    book = InMemorySliceBook()
    ledger = InMemoryLedger()
    notifier = RecordingNotifier([])
    alerts = AlertService(ledger, notifier, AlertSettings(scope=HUB))
    aggregation = Aggregation(book, ledger, OrgSettings(scope=HUB), after=alert_after(alerts))
    sa, sb = Slice(A, REGION), Slice(B, REGION)
    # WHEN four scheduled times in one hour each see B fail and reach their deadline
    for n in range(4):
        tick = T0 + timedelta(minutes=15 * n)
        book.plan(tick, [sa, sb], tick + DEADLINE)
        book.mark_done(tick, sa)
        book.mark_failed(tick, sb, "AccessDenied", "no role costguard-member-read")
        aggregation.sweep(tick + DEADLINE, timedelta(hours=6))
    # THEN B's failure was alerted once, not once per tick
    about_b = [
        a
        for a in notifier.published
        if a.kind is AlertKind.SCAN_FAILED and B in (a.title + a.summary)
    ]
    assert len(about_b) == 1, (
        f"{len(about_b)} scan-failed alerts about account {B} in one hour: "
        f"{[a.alert_id for a in about_b]}"
    )


class _Accounts:
    """Organizations with ListTagsForResource throttled for one account (after the
    SDK's retries): what an Organization of hundreds of accounts sees at 1 TPS."""

    def accounts(self) -> list[tuple[str, str]]:
        return [(A, "ACTIVE"), (B, "ACTIVE"), (C, "ACTIVE")]

    def tags(self, account: str) -> dict[str, str]:
        if account == B:
            raise DiscoveryError("TooManyRequestsException", "ListTagsForResource: Rate exceeded")
        return {}


def test_one_accounts_unreadable_tags_do_not_stop_the_others_being_guarded() -> None:
    """Defect: ``Fanout.discover`` reads every ACTIVE account's tags in one comprehension;
    one ``ListTagsForResource`` that fails (throttled: Organizations allows about one call
    a second, and the fan-out makes one per account) raises ``DiscoveryError`` for the
    whole listing. On a new hub (no stored list) the tick fails and *no* account is
    guarded; on a running hub the daily refresh fails every tick and new accounts are never
    added. One broken account must never block the others.
    """
    # GIVEN a new hub discovering a three-account Organization
    fanout = Fanout(
        InMemoryDirectory(),
        InMemorySliceBook(),
        RecordingQueue(Counter()),
        FanoutSettings(HUB, TickPolicy(timedelta(hours=6), REGION), DEADLINE),
        source=_Accounts(),
    )
    # WHEN the first tick runs and B's tags cannot be read
    summary = fanout.tick(T0)
    # THEN A and C are guarded (their regions are read)
    read = {w.slice.account for w in summary.work.items() if w.kind is WorkKind.REGIONS}
    assert {A, C} <= read


class _Denied:
    def __getattr__(self, name: str) -> Any:
        def refuse(*_a: Any, **_k: Any) -> Any:
            raise ClientError(
                {
                    "Error": {
                        "Code": "UnauthorizedOperation",
                        "Message": "You are not authorized to perform this operation.",
                    }
                },
                "DescribeInstances",
            )

        return refuse


class _EmptyEks:
    def list_clusters(self, **_: Any) -> dict[str, Any]:
        return {"clusters": []}


class _EmptySageMaker:
    def list_notebook_instances(self, **_: Any) -> dict[str, Any]:
        return {"NotebookInstances": []}

    def list_endpoints(self, **_: Any) -> dict[str, Any]:
        return {"Endpoints": []}

    def list_training_jobs(self, **_: Any) -> dict[str, Any]:
        return {"TrainingJobSummaries": []}


class _MemberWithoutEc2:
    """A member role that an outdated StackSet instance left without ec2:DescribeInstances
    (or a service control policy denying EC2 reads), while SageMaker and EKS answer."""

    def ec2(self, region: str) -> Any:
        class _Ec2(_Denied):
            def get_paginator(self, name: str) -> Any:
                class _P:
                    def paginate(self, **_: Any) -> Any:
                        _Denied().describe_instances()

                return _P()

        return _Ec2()

    def eks(self, region: str) -> Any:
        return _EmptyEks()

    def sagemaker(self, region: str) -> Any:
        return _EmptySageMaker()


def test_a_probe_refused_by_ec2_never_marks_the_region_empty_unreported() -> None:
    """Defect: a probe whose ``DescribeInstances`` is denied, while EKS and SageMaker answer
    "nothing", is taken as *empty*: the slice is marked EMPTY (not scanned again until the
    next probe window, which is refused the same way, forever), and neither a finding nor
    the unreachable-account alert names it. A GPU instance running there is invisible to
    budgets and forecasts: missing data read as $0, silently.
    """
    # GIVEN an account whose member role cannot describe EC2 instances in us-east-1
    store = InMemoryDirectory()
    s = Slice(A, REGION)
    store.update_regions(A, lambda e: AccountRegions(A, (REGION,), T0 - timedelta(hours=1)))
    probes = ProbeWork(store, lambda _s: MemberProbe(_MemberWithoutEc2()))  # type: ignore[arg-type]
    # WHEN the region is probed
    probes.run(T0, s, T0 + timedelta(minutes=1))
    # THEN it is not silently empty: still probed/scanned, or reported as unreachable
    directory = store.load()
    status = directory.status(s)
    reported = [u for u in unreachable(directory, [A]) if u.region == REGION]
    assert status.state is not SliceState.EMPTY or reported, (
        f"EC2 unreadable, yet the slice is {status.state} and nothing reports it"
    )
    # (and the next tick does not scan it)
    nxt = plan_tick(
        directory, [A], T0 + timedelta(minutes=15), TickPolicy(timedelta(hours=6), REGION)
    )
    assert s in nxt.scans or s in nxt.probes or reported
