"""A project's month-to-date split into compute and storage beside its total: accrued by
category, kept by the ledger in the row it keeps the total in, shown to the cent so that
the parts add up to the total, and "not split" for spend an older version accrued.

The hand-computed fleet: project llm, a g5.xlarge at $1.00/h and a 730 GiB gp3 volume at
$0.10/h (730 x $0.10 / 730 h), both created one hour before the first scan, scanned three
times an hour apart. The accrual rule (``domain/spend.accrue``): a first sighting is
back-filled from its launch (1 h, estimated), each later scan adds rate x hours since the
last one (1 h). So: compute 3 x $1.00 = $3.00, storage 3 x $0.10 = $0.30, total $3.30.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from costguard.adapters.memory import InMemoryLedger, ReadOnlyLedger
from costguard.cli.scan_output import report_json, report_table
from costguard.domain.attribution import AttributedResource
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.money import cents, cents_adding_up
from costguard.domain.pricing import PricedResource
from costguard.domain.spend import Increment, accrue, month_split, month_split_cents
from costguard.ports import ProjectMonth, ScanCommit
from tests.support.by_category import llm, scan
from tests.support.clock import MIDDAY

D = Decimal
#: The last instant of November and the first hours of December (the month boundary).
MONTH_END = datetime(2026, 11, 30, 23, 30, tzinfo=UTC)


# -- accrual by category ----------------------------------------------------------------


def test_three_hourly_scans_accrue_three_dollars_of_compute_and_thirty_cents_of_storage() -> None:
    """GIVEN the $1.00/h GPU and the $0.10/h gp3 volume of llm, created an hour before
    WHEN three scans run an hour apart
    THEN llm's month is compute $3.00 and storage $0.30, exactly, and they are its $3.30."""
    ledger = InMemoryLedger()
    created = MIDDAY - timedelta(hours=1)
    for n in range(3):
        report = scan(ledger, MIDDAY + timedelta(hours=n), created)
    p = llm(report)
    assert p.month_to_date_usd == D("3.30")
    assert p.month_to_date_by_category == {
        "compute": D(3),
        "storage": D("0.30"),
        "not_split": D(0),
    }
    assert p.run_rate_usd_per_hour == D("1.10")
    # The JSON carries it beside the run-rate's split, to the cent.
    (shown,) = [x for x in report_json(report)["projects"] if x["project"] == "llm"]
    assert shown["month_to_date_by_category"] == {"compute": 3.0, "storage": 0.3, "not_split": 0.0}
    assert shown["run_rate_by_category"] == {"compute": 1.0, "storage": 0.1}


def test_a_repeated_scan_counts_nothing_twice_in_either_category() -> None:
    """GIVEN two scans an hour apart committed
    WHEN the second is delivered again (a retry with the same instant)
    THEN compute and storage are what they were: $2.00 and $0.20."""
    ledger = InMemoryLedger()
    created = MIDDAY - timedelta(hours=1)
    scan(ledger, MIDDAY, created)
    scan(ledger, MIDDAY + timedelta(hours=1), created)
    again = scan(ledger, MIDDAY + timedelta(hours=1), created)
    assert again.ledger.value == "already-applied"
    assert llm(again).month_to_date_by_category == {
        "compute": D(2),
        "storage": D("0.20"),
        "not_split": D(0),
    }


def test_a_scan_across_the_month_end_splits_each_category_between_the_months() -> None:
    """GIVEN the fleet created at 23:00 on 30 November, scanned at 23:30
    WHEN the next scan runs at 00:30 on 1 December
    THEN November holds 1 h of each (back-fill 0.5 h, then 0.5 h): compute $1.00,
    storage $0.10; December starts with the other 0.5 h: compute $0.50, storage $0.05."""
    ledger = InMemoryLedger()
    created = MONTH_END - timedelta(minutes=30)
    scan(ledger, MONTH_END, created)
    december = scan(ledger, MONTH_END + timedelta(hours=1), created)
    assert december.month == "2026-12"
    assert llm(december).month_to_date_by_category == {
        "compute": D("0.5"),
        "storage": D("0.05"),
        "not_split": D(0),
    }
    november = ledger.month_totals("acct", "2026-11")["llm"]
    assert november.by_category == {"compute": D(1), "storage": D("0.10")}
    assert november.usd == D("1.10")


def test_accrue_splits_each_increment_by_the_resources_category() -> None:
    """GIVEN a $2/h GPU, a $0.25/h volume and a $0.05/h bucket of p, seen 2 h ago
    WHEN accrued now (a first sighting: back-filled from their launch)
    THEN the increment is compute $4, storage $0.60, and its total is their $4.60."""

    def of(kind: ResourceKind, rid: str, rate: str) -> AttributedResource:
        res = Resource(
            id=rid, kind=kind, region="us-east-1", launched_at=MIDDAY - timedelta(hours=2)
        )
        return AttributedResource(PricedResource(res, D(rate), "t"), "p", None, None, "tag")

    inc = accrue(
        [
            of(ResourceKind.EC2_INSTANCE, "i-1", "2"),
            of(ResourceKind.EBS_VOLUME, "vol-1", "0.25"),
            of(ResourceKind.S3_BUCKET, "b-1", "0.05"),
        ],
        {},
        MIDDAY,
    ).increments[("p", "2026-11")]
    assert inc.by_category == {"compute": D(4), "storage": D("0.60")}
    assert inc.usd == D("4.60")


# -- a month begun by an older version ------------------------------------------------------


def test_a_month_begun_before_the_split_shows_that_part_as_not_split() -> None:
    """GIVEN llm's November row as an older version left it: $40, no categories
    WHEN this version's scans accrue to it (three hourly scans)
    THEN the $40 is "not split" (never compute), the new spend is split, and the three
    add up to the month-to-date: $40 + $3.00 + $0.30 = $43.30."""
    ledger = InMemoryLedger()
    old = ProjectMonth("llm", "2026-11", D(40), D(0), {1: D(40)})  # no by_category
    ledger._months[("acct", "2026-11", "llm")] = old  # what the older version stored
    created = MIDDAY - timedelta(hours=1)
    for n in range(3):
        report = scan(ledger, MIDDAY + timedelta(hours=n), created)
    p = llm(report)
    assert p.month_to_date_usd == D("43.30")
    assert p.month_to_date_by_category == {
        "compute": D(3),
        "storage": D("0.30"),
        "not_split": D(40),
    }
    text = report_table(report, colour=False)
    assert (
        "    month-to-date: compute $3.00, storage $0.30, "
        "not split $40.00 (accrued before the split)" in text.splitlines()
    )


def test_an_increment_without_categories_is_not_split_never_compute() -> None:
    """GIVEN an increment made without categories (as a ledger row of an older version)
    WHEN it is kept
    THEN all of it reads as not split."""
    ledger = InMemoryLedger()
    ledger.commit(ScanCommit("acct", None, MIDDAY, {("p", "2026-11"): Increment(D(7), D(0))}, []))
    row = ledger.month_totals("acct", "2026-11")["p"]
    assert month_split(row.usd, row.by_category) == {
        "compute": D(0),
        "storage": D(0),
        "not_split": D(7),
    }
    # A row with no split at all reads the same.
    assert month_split(D(7), None)["not_split"] == D(7)


def test_a_read_only_view_splits_its_own_accrual_and_leaves_the_old_part_not_split() -> None:
    """GIVEN a stored row of an older version ($40, no categories) and a read-only local
    scan's overlay of compute $1 and storage $0.10
    THEN the view reads $41.10: compute $1, storage $0.10, not split $40."""
    inner = InMemoryLedger()
    inner._months[("acct", "2026-11", "llm")] = ProjectMonth("llm", "2026-11", D(40), D(0))
    view = ReadOnlyLedger(inner)
    split = {"compute": D(1), "storage": D("0.10")}
    view.commit(
        ScanCommit(
            "acct", None, MIDDAY, {("llm", "2026-11"): Increment(D("1.10"), D(0), {}, split)}, []
        )
    )
    row = view.month_totals("acct", "2026-11")["llm"]
    assert month_split(row.usd, row.by_category) == {
        "compute": D(1),
        "storage": D("0.10"),
        "not_split": D(40),
    }


# -- to the cent ------------------------------------------------------------------------------


def test_parts_shown_to_the_cent_add_up_to_the_total_shown() -> None:
    """GIVEN compute $1.005 and storage $1.005 of a $2.01 month (each alone rounds to $1.01)
    THEN they are shown $1.00 and $1.01: the cent over comes off the first of the two
    rounded up as far, and the parts add up to $2.01."""
    shown = cents_adding_up(D("2.01"), {"compute": D("1.005"), "storage": D("1.005")})
    assert shown == {"compute": D("1.00"), "storage": D("1.01")}
    # Three thirds of a dollar: each $0.33, one gets the missing cent.
    thirds = cents_adding_up(D(1), {"a": D(1) / 3, "b": D(1) / 3, "c": D(1) / 3})
    assert sum(thirds.values()) == D("1.00")
    assert sorted(thirds.values()) == [D("0.33"), D("0.33"), D("0.34")]


def test_a_figure_summed_without_its_split_shows_the_rest_as_not_split() -> None:
    """GIVEN a $50 month-to-date whose split accounts for $3.00 compute and $0.30 storage
    (a sum that lost the split of the rest, or no split at all)
    THEN the $46.70 left is not split: never pushed into compute by the rounding."""
    assert month_split_cents(D(50), {"compute": D(3), "storage": D("0.30")}) == {
        "compute": D("3.00"),
        "storage": D("0.30"),
        "not_split": D("46.70"),
    }
    assert month_split_cents(D(50), {})["not_split"] == D("50.00")


def test_a_part_of_nothing_is_never_minus_zero() -> None:
    """GIVEN storage of $0.30000000000000000000000001 in a $3.30 month (a 28-digit sum
    off in its last digit), so that not split is -1E-26
    THEN it is shown $0.00, not -$0.00."""
    shown = month_split_cents(
        D("3.30"), {"compute": D(3), "storage": D("0.30000000000000000000000001")}
    )
    assert str(shown["not_split"]) == "0.00"
    assert sum(shown.values()) == D("3.30")


@given(
    st.lists(
        st.decimals(min_value=0, max_value=10**6, places=6, allow_nan=False), min_size=1, max_size=4
    )
)
def test_a_split_to_the_cent_always_adds_up_to_its_total(amounts: list[Decimal]) -> None:
    parts = {f"c{i}": a for i, a in enumerate(amounts)}
    total = sum(amounts, D(0))
    shown = cents_adding_up(total, parts)
    assert sum(shown.values(), D(0)) == cents(total)
    assert all(abs(shown[k] - parts[k]) < D("0.02") for k in parts)


# -- teams ------------------------------------------------------------------------------------


def test_a_teams_month_by_category_is_the_sum_of_its_projects() -> None:
    """GIVEN llm tagged team research, scanned three times an hour apart
    THEN research's month is llm's: compute $3.00, storage $0.30, in the JSON too."""
    ledger = InMemoryLedger()
    created = MIDDAY - timedelta(hours=1)
    for n in range(3):
        report = scan(ledger, MIDDAY + timedelta(hours=n), created, "research")
    (team,) = report.teams
    assert team.month_to_date_by_category == {
        "compute": D(3),
        "storage": D("0.30"),
        "not_split": D(0),
    }
    (shown,) = report_json(report)["teams"]
    assert shown["month_to_date_by_category"] == {"compute": 3.0, "storage": 0.3, "not_split": 0.0}


# -- the dashboard's log lines --------------------------------------------------------------


def test_the_dashboards_log_lines_carry_the_month_by_category(monkeypatch: Any) -> None:
    """GIVEN llm (team research) after three hourly scans: compute $3.00, storage $0.30
    WHEN the scan Lambda writes its figures
    THEN the project's line and the team's carry compute, storage and not split, adding up
    to their month-to-date."""
    from aws_lambda_powertools import Logger

    from costguard.handlers import scan as handler
    from costguard.telemetry import Figures

    ledger = InMemoryLedger()
    created = MIDDAY - timedelta(hours=1)
    for n in range(3):
        report = scan(ledger, MIDDAY + timedelta(hours=n), created, "research")
    log = io.StringIO()
    monkeypatch.setattr(handler, "logger", Logger(service="by-category-under-test", stream=log))
    handler.log_project_figures(report)
    handler.log_team_figures(report)
    lines = [json.loads(line) for line in log.getvalue().splitlines() if line.startswith("{")]
    figures = {d["event"]: d for d in lines}
    for event in (Figures.EVENT, Figures.TEAM_EVENT):
        line = figures[event]
        assert line[Figures.MONTH_TO_DATE] == 3.3
        assert (
            line[Figures.MONTH_TO_DATE_COMPUTE],
            line[Figures.MONTH_TO_DATE_STORAGE],
            line[Figures.MONTH_TO_DATE_NOT_SPLIT],
        ) == (3.0, 0.3, 0.0)


# -- an Organization's roll-up ---------------------------------------------------------------


def test_an_organizations_roll_up_adds_each_slices_categories_and_keeps_the_unsplit_apart() -> None:
    """GIVEN llm in two accounts: one slice's row split (compute $3.00, storage $0.30 of
    $3.30), the other's written by an older version ($40, no categories)
    WHEN the hub rolls them up
    THEN llm is $43.30: compute $3.00, storage $0.30, not split $40 (never compute)."""
    from costguard.domain.org import Slice, roll_up

    split = {"compute": D(3), "storage": D("0.30")}
    rolled = roll_up(
        [
            (Slice("111111111111", "us-east-1"), {"llm": (D("3.30"), D(0), D("1.10"), split)}),
            (Slice("222222222222", "us-east-1"), {"llm": (D(40), D(0), D(0), None)}),
        ]
    )["llm"]
    assert rolled.month_to_date_usd == D("43.30")
    assert rolled.month_to_date_by_category == {
        "compute": D(3),
        "storage": D("0.30"),
        "not_split": D(40),
    }
