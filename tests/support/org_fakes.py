"""An Organization in memory, for the fan-out's tests and benchmarks.

:class:`OrgWorld` is N accounts x R regions, some of which hold accelerators; its fakes
stand in for Organizations, the member probe, DescribeRegions and a slice's scan, and
count the AWS calls the real adapters would make for the same answers
(adapters/member.py, adapters/organizations.py, adapters/directory.py).

:class:`OrgSimulation` wires the real services (:class:`~costguard.services.fanout.Fanout`,
:class:`~costguard.services.fanout.OrgWork`, the in-memory directory and slice book) over
them and runs ticks: the fan-out, then every enqueued item through the consumer, as SQS
and Lambda would (each item once; a failing one is recorded, not retried here).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from costguard.adapters.directory import InMemoryDirectory
from costguard.adapters.slices import InMemorySliceBook
from costguard.domain.directory import (
    AccountListing,
    AccountRegions,
    Directory,
    ProbeAnswer,
    SliceStatus,
    TickPolicy,
    Work,
    WorkKind,
)
from costguard.domain.org import Slice
from costguard.ports import CommitOutcome, ThrottledError
from costguard.services.fanout import (
    Fanout,
    FanoutSettings,
    OrgWork,
    ProbeWork,
    RegionsWork,
    TickSummary,
)
from costguard.services.org import SliceWork

#: The calls a real scan of one account-region makes when it holds a few GPUs (EC2
#: instances, their types and volumes, spot prices, EKS, SageMaker, the tagging API),
#: for counting; a benchmark may measure and pass its own.
SCAN_CALLS_PER_SLICE = 9
#: DynamoDB answers a Query with at most 1 MB a page: about 6,000 directory items.
DIRECTORY_ITEMS_PER_PAGE = 6000


class FakeAccessError(Exception):
    """What entering an account without its member role raises (AccountAccessError)."""

    def __init__(self, account: str) -> None:
        super().__init__(f"account {account}: AccessDenied: no role costguard-member-read")
        self.account = account
        self.code = "AccessDenied"
        self.detail = "no role costguard-member-read"


@dataclass
class FakeReport:
    resource_count: int
    failed_sources: frozenset[tuple[str, str]] = frozenset()
    ledger: CommitOutcome = CommitOutcome.APPLIED
    #: The scan's project reports (none: no tagged budget for the roll-up).
    projects: tuple[Any, ...] = ()
    #: The scan's teams (none: no tagged team budget for the roll-up).
    teams: tuple[Any, ...] = ()
    #: The scan's endpoint variants' cost per prediction (none: no endpoint).
    prediction_costs: tuple[Any, ...] = ()


@dataclass
class OrgWorld:
    accounts: list[str]
    regions: list[str]
    #: Account-regions that hold accelerators now (tests launch and stop GPUs here).
    holding: set[Slice] = field(default_factory=set)
    missing_role: set[str] = field(default_factory=set)
    throttled: set[str] = field(default_factory=set)
    suspended: set[str] = field(default_factory=set)
    opted_out: set[str] = field(default_factory=set)
    scan_calls: int = SCAN_CALLS_PER_SLICE
    calls: Counter[str] = field(default_factory=Counter)

    @classmethod
    def build(cls, accounts: int, regions: Sequence[str], holding_fraction: float) -> OrgWorld:
        """``accounts`` x ``regions``, the first ``holding_fraction`` of slices holding GPUs
        (spread over accounts: every k-th slice in account-major order)."""
        ids = [f"{100000000000 + n:012d}" for n in range(accounts)]
        world = cls(ids, list(regions))
        slices = [Slice(a, r) for a in ids for r in regions]
        if holding_fraction > 0:
            step = max(1, round(1 / holding_fraction))
            world.holding = {s for i, s in enumerate(slices) if i % step == 0}
        return world

    # -- Organizations ---------------------------------------------------------------------

    def accounts_listed(self) -> list[tuple[str, str]]:
        self.calls["organizations.ListAccounts"] += math.ceil(len(self.accounts) / 20) or 1
        return [(a, "SUSPENDED" if a in self.suspended else "ACTIVE") for a in self.accounts]

    def tags(self, account: str) -> Mapping[str, str]:
        self.calls["organizations.ListTagsForResource"] += 1
        return {"costguard:opt-out": "true"} if account in self.opted_out else {}

    # -- inside a member account --------------------------------------------------------------

    def _enter(self, s: Slice) -> None:
        self.calls["sts.AssumeRole"] += 1
        if s.account in self.missing_role:
            raise FakeAccessError(s.account)

    def prober_for(self, s: Slice) -> FakeProber:
        self._enter(s)
        return FakeProber(self, s.account)

    def reader_for(self, s: Slice) -> FakeRegions:
        self._enter(s)
        return FakeRegions(self, s.account)

    def scan_for(self, s: Slice) -> FakeScan:
        self._enter(s)
        return FakeScan(self, s)


@dataclass
class FakeProber:
    world: OrgWorld
    account: str

    def probe(self, region: str) -> ProbeAnswer:
        """The real probe's calls: DescribeInstances first (a GPU ends it), then EKS and
        three SageMaker lists when nothing is found."""
        self.world.calls["ec2.DescribeInstances"] += 1
        if self.account in self.world.throttled:
            raise ThrottledError(
                "ec2",
                region,
                "DescribeInstances",
                "RequestLimitExceeded",
                "Request limit exceeded.",
            )
        if Slice(self.account, region) in self.world.holding:
            return ProbeAnswer(("ec2:g5.xlarge",))
        for op in (
            "eks.ListClusters",
            "sagemaker.ListNotebookInstances",
            "sagemaker.ListEndpoints",
            "sagemaker.ListTrainingJobs",
        ):
            self.world.calls[op] += 1
        return ProbeAnswer()


@dataclass
class FakeRegions:
    world: OrgWorld
    account: str

    def opted_in(self, region: str) -> tuple[str, ...]:
        self.world.calls["ec2.DescribeRegions"] += 1
        return tuple(self.world.regions)


@dataclass
class FakeScan:
    world: OrgWorld
    slice: Slice

    def run(self, now: datetime) -> FakeReport:
        self.world.calls["scan.calls"] += self.world.scan_calls
        if self.slice.account in self.world.throttled:
            # The scan reports a throttled source as a finding and goes on.
            return FakeReport(0, frozenset({(self.slice.region, "ec2")}))
        return FakeReport(3 if self.slice in self.world.holding else 0)


class CountingDirectory:
    """The in-memory directory, counting the DynamoDB calls the real store would make."""

    def __init__(self, calls: Counter[str]) -> None:
        self._inner = InMemoryDirectory()
        self._calls = calls

    def load(self) -> Directory:
        d = self._inner.load()
        items = 1 + len(d.regions) + len(d.slices)
        self._calls["dynamodb.Query"] += math.ceil(items / DIRECTORY_ITEMS_PER_PAGE)
        return d

    def listing(self) -> AccountListing | None:
        self._calls["dynamodb.GetItem"] += 1
        return self._inner.listing()

    def save_listing(self, listing: AccountListing) -> None:
        self._calls["dynamodb.PutItem"] += 1
        self._inner.save_listing(listing)

    def update_slice(
        self, s: Slice, change: Callable[[SliceStatus], SliceStatus | None]
    ) -> SliceStatus | None:
        self._calls["dynamodb.GetItem"] += 1
        new = self._inner.update_slice(s, change)
        self._calls["dynamodb.PutItem"] += new is not None
        return new

    def update_regions(
        self, account: str, change: Callable[[AccountRegions], AccountRegions | None]
    ) -> AccountRegions | None:
        self._calls["dynamodb.GetItem"] += 1
        new = self._inner.update_regions(account, change)
        self._calls["dynamodb.PutItem"] += new is not None
        return new


class RecordingQueue:
    """A work queue that keeps what was sent (deduplicated like SQS FIFO)."""

    def __init__(self, calls: Counter[str]) -> None:
        self.pending: list[Work] = []
        self._seen: set[Work] = set()
        self._calls = calls

    def send(self, items: Sequence[Work]) -> int:
        self._calls["sqs.SendMessageBatch"] += math.ceil(len(items) / 10)
        fresh = [w for w in items if w not in self._seen]
        self._seen.update(fresh)
        self.pending.extend(fresh)
        return len(items)

    def drain(self) -> list[Work]:
        out, self.pending = self.pending, []
        return out


@dataclass(frozen=True)
class TickStats:
    tick: datetime
    summary: TickSummary
    items: tuple[Work, ...]
    calls: Mapping[str, int]
    failures: tuple[tuple[Work, Exception], ...]

    def count(self, kind: WorkKind) -> int:
        return sum(1 for w in self.items if w.kind is kind)

    @property
    def member_calls(self) -> int:
        """AWS calls made in member accounts (STS, probes, regions, scans)."""
        return sum(v for k, v in self.calls.items() if not k.startswith(("dynamodb.", "sqs.")))

    def invocations(self, batch_size: int = 10) -> int:
        """Consumer invocations if every batch is full (FIFO batches mix groups), plus the
        fan-out's one."""
        return 1 + math.ceil(len(self.items) / batch_size)


class OrgSimulation:
    """The real fan-out and consumer services over an :class:`OrgWorld`."""

    def __init__(
        self,
        world: OrgWorld,
        *,
        probe_interval: timedelta = timedelta(hours=6),
        deadline: timedelta = timedelta(minutes=10),
        home_region: str = "us-east-1",
        allow: frozenset[str] | None = None,
        configured: tuple[str, ...] | None = None,
    ) -> None:
        self.world = world
        self.store = CountingDirectory(world.calls)
        self.book = InMemorySliceBook()
        self.queue = RecordingQueue(world.calls)
        self.fanout = Fanout(
            self.store,
            self.book,
            self.queue,
            FanoutSettings(
                scope="111111111111",
                policy=TickPolicy(probe_interval, home_region, allow),
                deadline=deadline,
                accounts=configured,
            ),
            source=_Source(world),
        )
        errors = (FakeAccessError,)
        self.work = OrgWork(
            SliceWork(self.book, world.scan_for, None, errors),
            self.store,
            ProbeWork(self.store, world.prober_for, errors),
            RegionsWork(self.store, world.reader_for, errors),
        )

    def tick(self, tick: datetime, *, deliver: bool = True) -> TickStats:
        before = Counter(self.world.calls)
        summary = self.fanout.tick(tick)
        items = tuple(self.queue.drain())
        failures: list[tuple[Work, Exception]] = []
        if deliver:
            for w in items:
                try:
                    self.work.run(w, tick)
                except Exception as exc:  # recorded: one account never stops the others
                    failures.append((w, exc))
        calls = {k: v - before.get(k, 0) for k, v in self.world.calls.items()}
        return TickStats(
            tick, summary, items, {k: v for k, v in calls.items() if v}, tuple(failures)
        )

    def run(self, start: datetime, ticks: int, every: timedelta) -> list[TickStats]:
        return [self.tick(start + n * every) for n in range(ticks)]


@dataclass
class _Source:
    world: OrgWorld

    def accounts(self) -> list[tuple[str, str]]:
        return self.world.accounts_listed()

    def tags(self, account: str) -> Mapping[str, str]:
        return self.world.tags(account)


def directory_of(sim: OrgSimulation) -> Directory:
    return sim.store._inner.load()


def simulate(
    accounts: int,
    regions: Sequence[str],
    holding_fraction: float,
    *,
    start: datetime,
    hours: float = 24,
    every: timedelta = timedelta(minutes=15),
    probe_interval: timedelta = timedelta(hours=6),
    settle: int = 3,
) -> tuple[OrgWorld, list[TickStats]]:
    """The benchmark's entry point: an Organization of ``accounts`` x ``regions`` where
    ``holding_fraction`` of the account-regions hold accelerators, settled (``settle``
    ticks: regions read, then probed, then scanned), then ``hours`` of ticks every
    ``every``. Each :class:`TickStats` holds the tick's work items by kind, the AWS calls
    by operation (member accounts, DynamoDB, SQS, Organizations) and its invocations."""
    world = OrgWorld.build(accounts, regions, holding_fraction)
    sim = OrgSimulation(world, probe_interval=probe_interval)
    sim.run(start, settle, every)
    ticks = int(timedelta(hours=hours) / every)
    return world, sim.run(start + settle * every, ticks, every)
