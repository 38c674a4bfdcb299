"""The Organization's directory, pure: accounts, slice states and what a tick must do."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from costguard.domain.directory import (
    AccountRegions,
    Directory,
    SliceState,
    SliceStatus,
    TickPolicy,
    WorkKind,
    after_departure,
    after_probe,
    after_probe_failure,
    after_regions,
    after_scan,
    opt_out_value,
    plan_tick,
    probe_due,
    regions_due,
    select_accounts,
    unreachable,
    unreachable_alert,
)
from costguard.domain.org import Slice

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TICK = timedelta(minutes=15)
SIX_HOURS = timedelta(hours=6)
A, B, C, D = "222222222222", "333333333333", "444444444444", "555555555555"
S = Slice(A, "us-east-1")
POLICY = TickPolicy(SIX_HOURS, "us-east-1")


# -- accounts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("  True\n", True),
        ("ｔｒｕｅ", True),  # full-width letters fold to ASCII
        ("false", False),
        ("", False),
        ("tr\u200bue", None),  # a zero-width space is not folded away: reported, not obeyed
        ("yes", None),
        ("1", None),
        ("truе", None),  # Cyrillic e
    ],
)
def test_reads_the_opt_out_tag_value(raw: str, expected: bool | None) -> None:
    assert opt_out_value(raw) is expected


def test_skips_suspended_and_opted_out_accounts_and_reports_unclear_tags() -> None:
    # GIVEN four accounts: one suspended, one opted out (key in another case), one unclear
    listed = [(A, "ACTIVE"), (B, "SUSPENDED"), (C, "ACTIVE"), (D, "ACTIVE"), (A, "ACTIVE")]
    tags = {C: {"CostGuard:Opt-Out": " TRUE "}, D: {"costguard:opt-out": "yes please"}}
    # WHEN the accounts are selected
    listing = select_accounts(listed, tags, "costguard:opt-out", T0)
    # THEN A and D are guarded (D with its odd value reported), B and C are skipped
    assert listing.accounts == (A, D)
    assert listing.inactive == (B,) and listing.opted_out == (C,)
    assert listing.unclear == {D: "yes please"}
    assert listing.refreshed_at == T0 and listing.source == "discover"


# -- slice states --------------------------------------------------------------------------


def test_a_probe_marks_an_unprobed_slice_active_or_empty() -> None:
    found = after_probe(SliceStatus(S), T0, True)
    nothing = after_probe(SliceStatus(S), T0, False)
    assert found is not None and found.state is SliceState.ACTIVE and found.as_of == T0
    assert nothing is not None and nothing.state is SliceState.EMPTY
    assert nothing.checked_at == T0


def test_a_late_probe_is_ignored_and_a_duplicate_changes_nothing() -> None:
    # GIVEN a slice made active by a scan at T0+2h (after an empty probe at T0)
    empty = after_probe(SliceStatus(S), T0, False)
    assert empty is not None
    active = after_scan(empty, T0 + timedelta(hours=2), 2, True)
    assert active is not None and active.state is SliceState.ACTIVE
    # WHEN the T0 probe's message comes again (late, older than the state)
    # THEN nothing is written
    assert after_probe(active, T0, False) is None
    # AND a duplicate of the T0 empty answer on the empty state is nothing new
    assert after_probe(empty, T0, False) is None


def test_a_duplicate_probe_that_finds_something_wins_over_one_that_did_not() -> None:
    # Two deliveries of one probe item, a GPU started in between: finding wins.
    empty = after_probe(SliceStatus(S), T0, False)
    assert empty is not None
    again = after_probe(empty, T0, True)
    assert again is not None and again.state is SliceState.ACTIVE
    # and the reverse order does not demote it
    assert after_probe(again, T0, False) is None


def test_a_scan_that_still_finds_resources_writes_nothing() -> None:
    active = after_probe(SliceStatus(S), T0, True)
    assert active is not None
    for n in range(1, 50):
        assert after_scan(active, T0 + n * TICK, 3, True) is None


def test_a_complete_scan_that_finds_nothing_empties_the_slice_and_counts_as_its_probe() -> None:
    active = after_probe(SliceStatus(S), T0, True)
    assert active is not None
    empty = after_scan(active, T0 + TICK, 0, True)
    assert empty is not None and empty.state is SliceState.EMPTY
    assert empty.checked_at == T0 + TICK and empty.active_until == T0 + TICK
    # and a scan with a failed source proves nothing
    assert after_scan(active, T0 + TICK, 0, False) is None


def test_a_late_scan_cannot_undo_a_newer_state() -> None:
    active = after_probe(SliceStatus(S), T0, True)
    assert active is not None
    empty = after_scan(active, T0 + 2 * TICK, 0, True)
    assert empty is not None
    # the scan of T0+1 tick (it found the GPU before it stopped) arrives after T0+2
    assert after_scan(empty, T0 + TICK, 3, True) is None
    # while a newer scan that finds something revives it
    revived = after_scan(empty, T0 + 3 * TICK, 1, True)
    assert revived is not None and revived.state is SliceState.ACTIVE


def test_a_failed_probe_is_recorded_once_per_time_and_never_over_a_newer_answer() -> None:
    status = SliceStatus(S)
    failed = after_probe_failure(status, T0, "Throttling: slow down")
    assert failed is not None and failed.failed_at == T0 and failed.state is SliceState.UNPROBED
    assert after_probe_failure(failed, T0, "Throttling: again") is None  # the queue's retry
    answered = after_probe(failed, T0 + TICK, False)
    assert answered is not None and answered.failed_at is None
    assert after_probe_failure(answered, T0 + TICK, "late") is None


# -- what is due ---------------------------------------------------------------------------


def test_an_empty_slice_is_probed_once_per_interval_never_further_apart() -> None:
    # GIVEN an empty slice probed at T0, and a tick every 15 minutes for three days
    status = after_probe(SliceStatus(S), T0, False)
    assert status is not None
    probes = [T0]
    tick = T0
    while tick < T0 + timedelta(days=3):
        tick += TICK
        if probe_due(status, tick, SIX_HOURS):
            probes.append(tick)
            status = after_probe(status, tick, False)
            assert status is not None
    # THEN it is probed about every 6 hours: never more than 6 h (plus a tick) apart
    gaps = [b - a for a, b in itertools.pairwise(probes)]
    assert max(gaps) <= SIX_HOURS + TICK
    assert 11 <= len(probes) <= 14


def test_probes_of_many_empty_slices_are_spread_over_the_interval() -> None:
    # GIVEN 800 slices all found empty at the same tick
    statuses = [
        after_probe(SliceStatus(Slice(f"{100000000000 + n:012d}", "eu-west-1")), T0, False)
        for n in range(800)
    ]
    per_tick: Counter[int] = Counter()
    for n in range(1, 25):  # the 24 ticks of the next 6 hours
        per_tick[n] = sum(1 for st in statuses if st and probe_due(st, T0 + n * TICK, SIX_HOURS))
        statuses = [
            after_probe(st, T0 + n * TICK, False) or st
            if st and probe_due(st, T0 + n * TICK, SIX_HOURS)
            else st
            for st in statuses
        ]
    # THEN each is probed once in the interval, about 800/24 a tick, never all at once
    assert sum(per_tick.values()) == 800
    assert max(per_tick.values()) < 80


def test_active_slices_are_never_probed_and_unprobed_ones_at_once() -> None:
    active = after_probe(SliceStatus(S), T0, True)
    assert active is not None
    assert not any(probe_due(active, T0 + n * TICK, SIX_HOURS) for n in range(100))
    assert probe_due(SliceStatus(S), T0, SIX_HOURS)


def test_an_account_s_regions_are_read_at_once_then_per_interval_or_after_a_failure() -> None:
    assert regions_due(None, T0, SIX_HOURS, SIX_HOURS)
    read = after_regions(AccountRegions(A), T0, ["us-east-1"])
    assert read is not None
    reads, tick = [T0], T0
    while tick < T0 + timedelta(days=4):
        tick += TICK
        if regions_due(read, tick, SIX_HOURS, SIX_HOURS):
            reads.append(tick)
            read = after_regions(read, tick, ["us-east-1"])
            assert read is not None
    # once per 6 h window: 16 or 17 reads in 4 days, never more than 6 h (+ a tick) apart
    assert 16 <= len(reads) <= 17
    assert max(b - a for a, b in itertools.pairwise(reads)) <= SIX_HOURS + TICK
    failed = AccountRegions(A, failed_at=T0, failure="AccessDenied: no role")
    assert not regions_due(failed, T0 + TICK, SIX_HOURS, SIX_HOURS)
    assert regions_due(failed, T0 + SIX_HOURS + TICK, SIX_HOURS, SIX_HOURS)


def test_a_region_enabled_after_a_read_is_probed_within_the_interval_and_two_ticks() -> None:
    # GIVEN account A read at T0 with one region, which then enables eu-south-2
    policy = TickPolicy(SIX_HOURS, "us-east-1")
    d = Directory(regions={A: AccountRegions(A, ("us-east-1",), T0)})
    tick = T0
    while not any(w.kind is WorkKind.REGIONS for w in plan_tick(d, [A], tick, policy).items()):
        tick += TICK
    # WHEN the next read sees it
    entry = after_regions(d.regions[A], tick, ["us-east-1", "eu-south-2"])
    assert entry is not None
    d = replace(d, regions={A: entry})
    # THEN the next tick probes it: within one interval and two ticks of the last read
    nxt = plan_tick(d, [A], tick + TICK, policy)
    assert Slice(A, "eu-south-2") in nxt.probes
    assert tick + TICK - T0 <= SIX_HOURS + 2 * TICK


# -- one tick ------------------------------------------------------------------------------


def _directory(*statuses: SliceStatus, regions: dict[str, tuple[str, ...]]) -> Directory:
    return Directory(
        None,
        {a: AccountRegions(a, r, discovered_at=T0 - TICK) for a, r in regions.items()},
        {st.slice: st for st in statuses},
    )


def test_a_tick_scans_only_active_slices_and_probes_the_due_ones() -> None:
    # GIVEN A with an active, an empty (probed just now) and an unprobed region; B is new
    active = SliceStatus(Slice(A, "us-east-1"), SliceState.ACTIVE, T0 - TICK)
    empty = SliceStatus(Slice(A, "us-west-2"), SliceState.EMPTY, T0 - TICK, T0 - TICK)
    directory = _directory(active, empty, regions={A: ("us-east-1", "us-west-2", "eu-west-1")})
    # WHEN the tick is planned
    work = plan_tick(directory, [A, B], T0, POLICY)
    # THEN it scans the active slice, probes the unprobed one, reads B's regions
    assert work.scans == (Slice(A, "us-east-1"),)
    assert work.probes == (Slice(A, "eu-west-1"),)
    assert work.regions == (Slice(B, "us-east-1"),)
    assert work.known == 3 and work.carried == ()


def test_a_tick_ignores_regions_outside_the_allow_list_and_accounts_not_listed() -> None:
    directory = _directory(
        SliceStatus(Slice(A, "eu-west-1"), SliceState.ACTIVE, T0 - TICK),
        SliceStatus(Slice(C, "us-east-1"), SliceState.ACTIVE, T0 - TICK),
        regions={A: ("us-east-1", "eu-west-1"), C: ("us-east-1",)},
    )
    policy = TickPolicy(SIX_HOURS, "us-east-1", frozenset({"us-east-1"}))
    work = plan_tick(directory, [A], T0, policy)
    assert work.scans == ()
    assert work.probes == (Slice(A, "us-east-1"),)


def test_a_slice_that_went_empty_is_carried_in_its_month_only() -> None:
    gone = SliceStatus(
        Slice(A, "us-east-1"), SliceState.EMPTY, T0 - TICK, T0 - TICK, active_until=T0 - TICK
    )
    directory = _directory(gone, regions={A: ("us-east-1",)})
    assert plan_tick(directory, [A], T0, POLICY).carried == (gone.slice,)
    december = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
    assert plan_tick(directory, [A], december, POLICY).carried == ()


def test_accounts_that_cannot_be_entered_are_named_once_a_day() -> None:
    directory = Directory(
        None,
        {
            A: AccountRegions(A, failed_at=T0, failure="AccessDenied: no role"),
            B: AccountRegions(B, ("us-east-1",), discovered_at=T0),
        },
        {
            Slice(B, "us-east-1"): SliceStatus(
                Slice(B, "us-east-1"), failed_at=T0, failure="Throttling: slow"
            )
        },
    )
    lost = unreachable(directory, [A, B])
    assert [(u.account, u.region) for u in lost] == [(A, None), (B, "us-east-1")]
    alert = unreachable_alert(lost, T0)
    assert alert is not None and A in alert.summary and B in alert.summary
    assert set(alert.dedupe) == {f"unreachable/20261120/{A}", f"unreachable/20261120/{B}"}
    assert unreachable(directory, [B])[0].account == B  # A is no longer listed


def test_a_region_that_leaves_the_allow_list_or_is_disabled_keeps_its_month_in_the_roll_up() -> (
    None
):
    # GIVEN A active in us-east-1 and eu-south-2; eu-south-2 then disabled by the account,
    # and us-east-1 left out of the configured regions
    east, south = Slice(A, "us-east-1"), Slice(A, "eu-south-2")
    d = Directory(
        regions={A: AccountRegions(A, ("us-east-1", "us-west-2"), T0)},
        slices={
            east: SliceStatus(east, SliceState.ACTIVE, as_of=T0 - timedelta(days=40)),
            south: SliceStatus(south, SliceState.ACTIVE, as_of=T0 - timedelta(days=3)),
        },
    )
    allow = TickPolicy(SIX_HOURS, "us-east-1", frozenset({"us-west-2"}))
    # WHEN a tick is planned
    work = plan_tick(d, [A], T0, allow)
    # THEN neither is scanned, both are carried, out of scope, and to be marked
    assert work.scans == ()
    assert set(work.carried) == {east, south} == set(work.out_of_scope) == set(work.departed)
    # AND once marked, the carry ends with the month
    marked = {s: after_departure(d.slices[s], T0) for s in (east, south)}
    assert all(m is not None and m.active_until == T0 for m in marked.values())
    d = replace(d, slices={s: m for s, m in marked.items() if m is not None})
    assert set(plan_tick(d, [A], T0 + TICK, allow).carried) == {east, south}
    assert plan_tick(d, [A], datetime(2026, 12, 1, tzinfo=UTC), allow).carried == ()
    # AND a late or repeated mark changes nothing
    assert after_departure(d.slices[east], T0 + TICK) is None
