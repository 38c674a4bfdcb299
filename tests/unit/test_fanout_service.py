"""The hub's tick and consumer over an in-memory Organization: what is enqueued, what is
skipped, how state moves, and what a tick costs as the Organization grows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.domain.directory import AccountListing, DiscoveryError, SliceState, WorkKind
from costguard.domain.org import Slice
from tests.support.org_fakes import (
    SCAN_CALLS_PER_SLICE,
    FakeAccessError,
    OrgSimulation,
    OrgWorld,
    directory_of,
)

T0 = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)
TICK = timedelta(minutes=15)
REGIONS = ("us-east-1", "us-west-2")
A, B, C = "222222222222", "333333333333", "444444444444"


def _settle(sim: OrgSimulation, start: datetime = T0) -> datetime:
    """Three ticks: regions read, slices probed, active ones scanned. The next tick."""
    for n in range(3):
        stats = sim.tick(start + n * TICK)
        assert stats.failures == () or all(
            w.slice.account in sim.world.missing_role | sim.world.throttled
            for w, _ in stats.failures
        )
    return start + 3 * TICK


def test_a_new_account_is_read_then_probed_then_only_its_gpu_region_scanned() -> None:
    # GIVEN three accounts x two regions, a GPU in A's us-east-1 only
    world = OrgWorld([A, B, C], list(REGIONS), holding={Slice(A, "us-east-1")})
    sim = OrgSimulation(world)
    # WHEN the first tick runs: the accounts' regions are read
    first = sim.tick(T0)
    assert first.count(WorkKind.REGIONS) == 3 and first.count(WorkKind.SCAN) == 0
    # AND the second: the six new account-regions are probed (an account whose regions
    # window turns now is read again: reads are phased per account over the interval)
    second = sim.tick(T0 + TICK)
    assert second.count(WorkKind.PROBE) == 6 and second.count(WorkKind.SCAN) == 0
    # THEN from the third tick on, only A's GPU region is scanned, nothing else is enqueued
    third = sim.tick(T0 + 2 * TICK)
    assert [w.slice for w in third.items] == [Slice(A, "us-east-1")]
    assert third.items[0].kind is WorkKind.SCAN
    states = {s: st.state for s, st in directory_of(sim).slices.items()}
    assert states[Slice(A, "us-east-1")] is SliceState.ACTIVE
    assert sum(st is SliceState.EMPTY for st in states.values()) == 5


def test_a_gpu_launched_in_an_empty_region_is_scanned_within_the_probe_interval() -> None:
    # GIVEN a settled Organization where C's us-west-2 is empty
    world = OrgWorld([A, B, C], list(REGIONS), holding={Slice(A, "us-east-1")})
    sim = OrgSimulation(world)
    tick = _settle(sim)
    # WHEN a GPU starts there
    launched = tick
    world.holding.add(Slice(C, "us-west-2"))
    # THEN within 6 hours (and a tick) the slice is probed, and scanned at the next tick
    scanned_at = None
    while tick <= launched + timedelta(hours=7):
        stats = sim.tick(tick)
        if any(w.kind is WorkKind.SCAN and w.slice == Slice(C, "us-west-2") for w in stats.items):
            scanned_at = tick
            break
        tick += TICK
    assert scanned_at is not None
    assert scanned_at - launched <= timedelta(hours=6) + 2 * TICK


def test_a_region_whose_gpus_stopped_is_no_longer_scanned_but_its_month_is_rolled_up() -> None:
    world = OrgWorld([A], list(REGIONS), holding={Slice(A, "us-east-1")})
    sim = OrgSimulation(world)
    tick = _settle(sim)
    # WHEN the GPU stops: the next scan finds nothing at all
    world.holding.clear()
    assert sim.tick(tick).count(WorkKind.SCAN) == 1
    # THEN the slice is empty: no scan the tick after, and it is carried for the month
    after = sim.tick(tick + TICK)
    assert after.count(WorkKind.SCAN) == 0
    assert after.summary.work.carried == (Slice(A, "us-east-1"),)


def test_a_scan_with_a_failed_source_does_not_empty_the_slice() -> None:
    world = OrgWorld([A], ["us-east-1"], holding={Slice(A, "us-east-1")})
    sim = OrgSimulation(world)
    tick = _settle(sim)
    world.throttled.add(A)  # the scan reads nothing, with a failed source
    for n in range(3):
        assert sim.tick(tick + n * TICK).count(WorkKind.SCAN) == 1


def test_a_poison_account_is_named_backed_off_and_never_blocks_the_others() -> None:
    # GIVEN account B without the member role
    world = OrgWorld([A, B, C], list(REGIONS), holding={Slice(A, "us-east-1")})
    world.missing_role.add(B)
    sim = OrgSimulation(world)
    # WHEN the Organization settles
    first = sim.tick(T0)
    assert [w.slice.account for w, _ in first.failures] == [B]
    assert isinstance(first.failures[0][1], FakeAccessError)
    tick = _settle(sim, T0 + TICK)
    # THEN A and C are probed and scanned, B is named by every tick's summary
    stats = sim.tick(tick)
    assert [w.slice for w in stats.items if w.kind is WorkKind.SCAN] == [Slice(A, "us-east-1")]
    assert [(u.account, u.failure) for u in stats.summary.unreachable] == [
        (B, "AccessDenied: no role costguard-member-read")
    ]
    # AND B's regions are tried again once per probe window, not every tick
    retries = [
        n
        for n in range(1, 30)
        if any(
            w.kind is WorkKind.REGIONS and w.slice.account == B
            for w in sim.tick(tick + n * TICK).items
        )
    ]
    assert len(retries) == 1


def test_a_throttled_member_is_recorded_and_retried_while_the_others_complete() -> None:
    # GIVEN account B whose EC2 calls are throttled beyond the adaptive retries
    world = OrgWorld([A, B], list(REGIONS), holding={Slice(A, "us-east-1"), Slice(B, "us-east-1")})
    world.throttled.add(B)
    sim = OrgSimulation(world)
    sim.tick(T0)
    # WHEN the probes run
    probes = sim.tick(T0 + TICK)
    # THEN B's two probes fail (the queue retries them), A's complete
    assert sorted(w.slice for w, _ in probes.failures) == [
        Slice(B, "us-east-1"),
        Slice(B, "us-west-2"),
    ]
    assert "RequestLimitExceeded" in str(probes.failures[0][1])
    d = directory_of(sim)
    assert d.slices[Slice(A, "us-east-1")].state is SliceState.ACTIVE
    assert d.slices[Slice(B, "us-east-1")].failure.startswith("RequestLimitExceeded")
    # AND the next tick reports B, scans A
    stats = sim.tick(T0 + 2 * TICK)
    assert {u.account for u in stats.summary.unreachable} == {B}
    assert [w.slice for w in stats.items if w.kind is WorkKind.SCAN] == [Slice(A, "us-east-1")]
    # AND once the throttling stops, B's GPU is found within the probe interval
    world.throttled.clear()
    found = None
    for n in range(3, 30):
        sim.tick(T0 + n * TICK)
        if directory_of(sim).slices[Slice(B, "us-east-1")].state is SliceState.ACTIVE:
            found = n
            break
    assert found is not None and found * TICK <= timedelta(hours=6) + 3 * TICK


def test_discovery_skips_suspended_and_opted_out_accounts_and_runs_once_a_day() -> None:
    world = OrgWorld([A, B, C], list(REGIONS))
    world.suspended.add(B)
    world.opted_out.add(C)
    sim = OrgSimulation(world)
    stats = sim.run(T0, 96 + 1, TICK)  # a day and a tick
    assert stats[0].summary.accounts == 1
    assert {w.slice.account for s in stats for w in s.items} == {A}
    listed_on = [s.tick for s in stats if s.calls.get("organizations.ListAccounts")]
    assert listed_on == [T0, T0 + timedelta(days=1)]
    tag_reads = sum(s.calls.get("organizations.ListTagsForResource", 0) for s in stats)
    assert tag_reads == 4  # A and C (the ACTIVE ones), twice


def test_a_failed_refresh_keeps_the_stored_list_but_a_first_listing_must_succeed() -> None:
    world = OrgWorld([A], list(REGIONS))
    sim = OrgSimulation(world)
    sim.tick(T0)

    def refuse() -> list[tuple[str, str]]:
        raise DiscoveryError("AccessDeniedException", "not the management account")

    world.accounts_listed = refuse  # type: ignore[method-assign]
    later = sim.tick(T0 + timedelta(days=1))
    assert later.summary.accounts == 1
    assert later.summary.discovery_error is not None
    assert "AccessDeniedException" in later.summary.discovery_error
    fresh = OrgSimulation(world)
    with pytest.raises(DiscoveryError):
        fresh.tick(T0)


def test_a_configured_list_needs_no_organizations_call() -> None:
    world = OrgWorld([A, B, C], list(REGIONS))
    sim = OrgSimulation(world, configured=(A, C))
    stats = sim.tick(T0)
    assert {w.slice.account for w in stats.items} == {A, C}
    assert "organizations.ListAccounts" not in stats.calls
    assert isinstance(directory_of(sim).listing, type(None) | AccountListing)


def test_a_retried_tick_enqueues_nothing_new_and_plans_once() -> None:
    world = OrgWorld([A], list(REGIONS), holding={Slice(A, "us-east-1")})
    sim = OrgSimulation(world)
    tick = _settle(sim)
    first = sim.tick(tick, deliver=False)
    again = sim.tick(tick, deliver=False)
    assert first.summary.planned and not again.summary.planned
    assert len(again.items) == 0  # SQS's deduplication (same ids) drops the re-sent ones


@pytest.mark.parametrize("fraction", [0.05, 0.10, 0.25])
def test_a_tick_costs_the_active_slices_plus_a_small_probe_term_not_every_slice(
    fraction: float,
) -> None:
    # GIVEN 200 accounts x 4 regions (800 account-regions), a fraction holding GPUs
    regions = ("us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1")
    world = OrgWorld.build(200, regions, fraction)
    sim = OrgSimulation(world)
    # WHEN a day of 15-minute ticks runs after the Organization settled
    _settle(sim)
    day = sim.run(T0 + 3 * TICK, 96, TICK)
    active = len(world.holding)
    empty = 800 - active
    # THEN every tick scans exactly the active slices, and probes about empty / 24
    assert all(s.count(WorkKind.SCAN) == active for s in day)
    probes = [s.count(WorkKind.PROBE) for s in day]
    assert sum(probes) == pytest.approx(empty * 4, rel=0.05)  # each empty one, every 6 h
    assert max(probes) <= 2.5 * empty / 24
    # AND the calls in member accounts follow: scans (with their AssumeRole) plus probes
    # (5 calls each when empty), plus each account's DescribeRegions once per probe
    # interval (with its AssumeRole: 2 calls x 200 accounts every 24 ticks)
    per_tick = sum(s.member_calls for s in day) / len(day)
    expected = active * (SCAN_CALLS_PER_SLICE + 1) + (empty / 24) * 6 + 200 * 2 / 24
    assert per_tick == pytest.approx(expected, rel=0.1)
    assert per_tick < 0.45 * 800 * (SCAN_CALLS_PER_SLICE + 1)  # scanning all 800 every tick
    # AND the directory is written only when something changes: no write per scan
    writes = sum(s.calls.get("dynamodb.PutItem", 0) for s in day)
    # probes of empty slices, and each account's regions read 4 (or 5) times a day
    assert writes <= sum(probes) + 200 * 5


def test_a_region_where_every_probe_call_is_refused_is_reported_not_read_as_empty() -> None:
    # GIVEN account A whose us-west-2 refuses every call (a service control policy)
    from costguard.domain.directory import ProbeAnswer

    world = OrgWorld([A], list(REGIONS))
    real = world.prober_for

    class Blind:
        def probe(self, region: str) -> ProbeAnswer:
            if region == "us-west-2":
                return ProbeAnswer((), ("ec2:DescribeInstances", "eks:ListClusters"), blind=True)
            return real(Slice(A, region)).probe(region)

    world.prober_for = lambda s: Blind()  # type: ignore[assignment, method-assign, return-value]
    sim = OrgSimulation(world)
    sim.tick(T0)
    # WHEN it is probed
    probes = sim.tick(T0 + TICK)
    # THEN the item does not fail (a retry would be refused again), the slice is not
    # marked empty, and the next tick names the account-region
    assert probes.failures == ()
    d = directory_of(sim)
    assert d.slices[Slice(A, "us-west-2")].state is SliceState.UNPROBED
    assert d.slices[Slice(A, "us-east-1")].state is SliceState.EMPTY
    lost = sim.tick(T0 + 2 * TICK).summary.unreachable
    assert [(u.account, u.region) for u in lost] == [(A, "us-west-2")]
    assert "every probe call was refused" in lost[0].failure


def test_a_probe_with_one_refused_call_is_unknown_and_a_hit_elsewhere_still_counts() -> None:
    # GIVEN A's us-west-2 refusing ec2:DescribeInstances (an outdated member role) with
    # nothing else there, and B's us-west-2 refusing it too but running an endpoint
    from costguard.domain.directory import ProbeAnswer

    world = OrgWorld([A, B], list(REGIONS))
    real = world.prober_for

    class Ec2Refused:
        def __init__(self, s: Slice) -> None:
            self._s = s

        def probe(self, region: str) -> ProbeAnswer:
            if region != "us-west-2":
                return real(self._s).probe(region)
            found = ("sagemaker-endpoint:chat",) if self._s.account == B else ()
            return ProbeAnswer(found, ("ec2:DescribeInstances",))

    world.prober_for = Ec2Refused  # type: ignore[assignment, method-assign]
    sim = OrgSimulation(world)
    sim.tick(T0)
    # WHEN the regions are probed
    probes = sim.tick(T0 + TICK)
    # THEN A's us-west-2 is neither empty nor a failed item, and the next tick names it
    assert probes.failures == ()
    d = directory_of(sim)
    assert d.slices[Slice(A, "us-west-2")].state is SliceState.UNPROBED
    # AND B's endpoint makes its region active: a refusal elsewhere does not hide a hit
    assert d.slices[Slice(B, "us-west-2")].state is SliceState.ACTIVE
    nxt = sim.tick(T0 + 2 * TICK)
    assert [(u.account, u.region) for u in nxt.summary.unreachable] == [(A, "us-west-2")]
    assert "ec2:DescribeInstances" in nxt.summary.unreachable[0].failure
    assert Slice(B, "us-west-2") in {w.slice for w in nxt.items if w.kind is WorkKind.SCAN}


def test_a_suspended_account_is_carried_to_the_month_end_and_probed_if_it_returns() -> None:
    # GIVEN GPUs in A's and B's us-east-1, settled
    from costguard.domain.directory import TickPolicy, plan_tick

    world = OrgWorld([A, B], list(REGIONS), holding={Slice(A, "us-east-1"), Slice(B, "us-east-1")})
    sim = OrgSimulation(world)
    _settle(sim)
    sb = Slice(B, "us-east-1")
    # WHEN B is suspended, and the next daily listing sees it
    world.suspended.add(B)
    refresh = T0 + timedelta(days=1)
    stats = sim.tick(refresh)
    # THEN B is no longer scanned, but its slice is carried in the tick's plan
    assert stats.summary.listing_refreshed and stats.summary.accounts == 1
    assert sb not in {w.slice for w in stats.items}
    assert sb in stats.summary.work.carried and stats.summary.work.departed == (sb,)
    plan = sim.book.get(refresh)
    assert plan is not None and sb in plan.carried and sb not in plan.expected
    assert stats.summary.as_dict()["not_scanned"] == [B]
    # AND it is marked, so that the carry ends with the month
    status = directory_of(sim).slices[sb]
    assert status.state is SliceState.UNPROBED and status.active_until == refresh
    policy = TickPolicy(timedelta(hours=6), "us-east-1")
    last = plan_tick(directory_of(sim), [A], datetime(2026, 11, 30, 23, 45, tzinfo=UTC), policy)
    first = plan_tick(directory_of(sim), [A], datetime(2026, 12, 1, tzinfo=UTC), policy)
    assert sb in last.carried and sb not in first.carried and first.out_of_scope == ()
    again = sim.tick(refresh + TICK)
    assert sb in again.summary.work.carried and again.summary.work.departed == ()
    # WHEN B is reactivated and listed again THEN it is probed at once, then scanned
    world.suspended.discard(B)
    back = sim.tick(refresh + timedelta(days=1))
    assert sb in {w.slice for w in back.items if w.kind is WorkKind.PROBE}
    scanned = sim.tick(refresh + timedelta(days=1) + TICK)
    assert sb in {w.slice for w in scanned.items if w.kind is WorkKind.SCAN}


def test_an_account_no_longer_listed_is_reported_as_not_scanned_by_a_finding() -> None:
    # GIVEN a hub configured for A alone, whose directory still holds B's active slice
    from collections import Counter

    from costguard.adapters.directory import InMemoryDirectory
    from costguard.adapters.memory import InMemoryLedger
    from costguard.adapters.slices import InMemorySliceBook
    from costguard.domain.directory import AccountRegions, TickPolicy, after_probe
    from costguard.domain.findings import FindingCode
    from costguard.services.fanout import Fanout, FanoutSettings
    from tests.support.org_fakes import RecordingQueue

    store = InMemoryDirectory()
    for account in (A, B):
        store.update_regions(account, lambda e: AccountRegions(e.account, REGIONS, T0))
    sb = Slice(B, "eu-west-1")
    store.update_slice(sb, lambda st: after_probe(st, T0, True))
    ledger = InMemoryLedger()
    fanout = Fanout(
        store,
        InMemorySliceBook(),
        RecordingQueue(Counter()),
        FanoutSettings(A, TickPolicy(timedelta(hours=6), "us-east-1"), timedelta(minutes=10), (A,)),
        findings=ledger,
    )
    # WHEN the hub ticks
    summary = fanout.tick(T0 + TICK)
    # THEN B's slice is carried and B is named as no longer scanned, once a day
    assert sb in summary.work.carried
    (finding,) = [f for f in ledger.findings(A, "2026-11-20") if f.code is FindingCode.NOT_SCANNED]
    assert finding.resource == f"account/{B}" and "eu-west-1" in finding.message
    assert "still counted" in finding.message
