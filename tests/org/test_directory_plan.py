"""Hostile tests of the Organization directory's tick plan (pure domain, no AWS)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from costguard.domain.directory import (
    AccountRegions,
    Directory,
    SliceState,
    SliceStatus,
    TickPolicy,
    WorkKind,
    plan_tick,
)
from costguard.domain.org import Slice

A, B = "111111111111", "222222222222"
HOME = "us-east-1"
POLICY = TickPolicy(timedelta(hours=6), HOME)
T0 = datetime(2028, 2, 29, 0, 0, tzinfo=UTC)  # leap day, UTC midnight


def test_a_suspended_accounts_month_to_date_stays_in_the_project_total() -> None:
    """Defect: ``plan_tick`` only looks at the accounts listed this tick, so when an account
    that ran GPUs for half the month is suspended (or closed, or leaves the allow-list of
    regions), its slices are neither scanned nor ``carried``: the aggregation stops
    reading their ledgers and the project's month-to-date drops by everything they spent.
    AWS still bills that spend; a project over budget suddenly looks under it, and its
    forecast no longer warns. ``carried`` exists for exactly this ("a GPU that stopped does
    not take its month-to-date out of the project's total"), but only for slices that went
    empty, not for accounts that went away.
    """
    # GIVEN account B, active in us-east-1 since the start of the month
    sb = Slice(B, HOME)
    directory = Directory(
        regions={
            A: AccountRegions(A, (HOME,), T0 - timedelta(hours=1)),
            B: AccountRegions(B, (HOME,), T0 - timedelta(hours=1)),
        },
        slices={sb: SliceStatus(sb, SliceState.ACTIVE, as_of=datetime(2028, 2, 1, tzinfo=UTC))},
    )
    # WHEN B is suspended (ListAccounts lists it SUSPENDED, so only A is guarded)
    work = plan_tick(directory, [A], T0, POLICY)
    # THEN B's spend this month is still rolled up
    assert sb in work.carried or sb in work.scans, (
        f"B's slice is neither scanned nor carried: {work}"
    )


def test_a_region_enabled_after_the_daily_read_is_probed_within_the_probe_interval() -> None:
    """Defect: an account's opted-in regions are read once a day (``REGIONS_MAX_AGE``), and
    only regions in that list are ever probed. A team that enables an opt-in region
    (``ap-east-1``, ``me-central-1``) and launches a p5 there an hour after the read is not
    seen for up to a day, although the README promises empty account-regions are probed
    within the probe interval (6 h by default) so a GPU launched in a new region is found.
    A p5.48xlarge costs about $98/h: a day unseen is over $2,000 missing from the budget.
    """
    # GIVEN account A's regions read at 04:00 (before it enabled a new region)
    read_at = T0 + timedelta(hours=4)
    directory = Directory(regions={A: AccountRegions(A, (HOME,), read_at)})
    # WHEN the fan-out ticks every 15 minutes for one probe interval and a tick
    ticks = [read_at + timedelta(minutes=15 * n) for n in range(1, 4 * 6 + 2)]
    reads = [
        t
        for t in ticks
        if any(w.kind is WorkKind.REGIONS for w in plan_tick(directory, [A], t, POLICY).items())
    ]
    # THEN its regions were read again within that time (so the new region gets probed)
    assert reads, "no DescribeRegions for A within the probe interval: a new region stays unseen"
