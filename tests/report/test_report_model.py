"""The report's model: a project's burn-down, its forecast range and threshold crossings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.report import actions_of, burn, group_findings, unpriced_types
from costguard.domain.spend import BudgetStatus

#: The 4th of November at noon: three whole days behind, 26.5 ahead.
FOURTH_NOON = datetime(2026, 11, 4, 12, 0, tzinfo=UTC)
MONTH_FIRST_INSTANT = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)


def test_the_series_is_cumulative_by_day_and_ends_at_the_month_to_date() -> None:
    # GIVEN $30 spent on each of the 1st to 3rd and $15 so far on the 4th
    days = {1: Decimal(30), 2: Decimal(30), 3: Decimal(30), 4: Decimal(15)}
    # WHEN the burn-down is built at noon on the 4th
    b = burn(
        "p", "2026-11", FOURTH_NOON, budget=Decimal(100), month_to_date=Decimal(105), days=days
    )
    # THEN each day's end holds what was spent by then, and today ends at the month-to-date
    assert [(p.day, p.usd) for p in b.series] == [
        (0.0, 0),
        (1.0, 30),
        (2.0, 60),
        (3.0, 90),
        (3.5, 105),
    ]


def test_thresholds_are_marked_where_the_line_crosses_them() -> None:
    days = {1: Decimal(30), 2: Decimal(30), 3: Decimal(30), 4: Decimal(15)}
    b = burn(
        "p",
        "2026-11",
        FOURTH_NOON,
        budget=Decimal(100),
        month_to_date=Decimal(105),
        days=days,
        thresholds=(50, 80, 100),
    )
    # THEN 50% ($50) is reached two thirds into the 2nd, 80% a third into the 3rd, 100% on the 4th
    got = {c.pct: (round(c.day or 0, 3), c.projected) for c in b.crossings}
    assert got == {50: (1.667, False), 80: (2.667, False), 100: (3.333, False)}
    assert b.status is BudgetStatus.OVER


def test_a_threshold_only_the_forecast_reaches_is_marked_as_projected() -> None:
    # GIVEN $10 spent by noon on the 4th, at $1/h: the forecast is $646
    b = burn(
        "p",
        "2026-11",
        FOURTH_NOON,
        budget=Decimal(1000),
        month_to_date=Decimal(10),
        days={1: Decimal(2), 2: Decimal(3), 3: Decimal(3), 4: Decimal(2)},
        run_rate=Decimal(1),
    )
    # THEN 50% ($500) lies on the forecast's line, later this month; 80% and 100% not at all
    assert [(c.pct, c.projected) for c in b.crossings] == [(50, True)]
    day = b.crossings[0].day or 0
    assert 3.5 < day < 30
    assert b.forecast == Decimal(10) + Decimal(1) * Decimal(26 * 24 + 12)


def test_the_forecast_range_spans_the_lowest_and_highest_recent_rate() -> None:
    # GIVEN run-rate samples of $1/h and $4/h in the last three days, and $2/h now
    samples = [
        (FOURTH_NOON - timedelta(hours=30), Decimal(1)),
        (FOURTH_NOON - timedelta(hours=6), Decimal(4)),
        (FOURTH_NOON - timedelta(days=5), Decimal(100)),  # older than the lookback
    ]
    b = burn(
        "p",
        "2026-11",
        FOURTH_NOON,
        budget=None,
        month_to_date=Decimal(50),
        days=None,
        run_rate=Decimal(2),
        rate_samples=samples,
    )
    hours_left = Decimal(26 * 24 + 12)
    # THEN the point uses today's rate and the range the lowest and highest recent ones
    assert b.forecast == 50 + 2 * hours_left
    assert (b.forecast_low, b.forecast_high) == (50 + 1 * hours_left, 50 + 4 * hours_left)
    assert b.range_basis == 2


def test_days_before_the_project_began_do_not_pull_the_range_down() -> None:
    # GIVEN a project whose first spend was midday on the 2nd, at $24 a day since
    days = {2: Decimal(12), 3: Decimal(24), 4: Decimal(12)}
    b = burn(
        "p",
        "2026-11",
        FOURTH_NOON,
        budget=None,
        month_to_date=Decimal(48),
        days=days,
        run_rate=Decimal(1),
    )
    # THEN the range is the steady $1/h, not the $0 of the 1st nor the half day of the 2nd
    assert b.forecast_low == b.forecast == b.forecast_high


def test_the_first_instant_of_a_month_is_an_empty_month_not_an_error() -> None:
    # GIVEN the 1st at 00:00: no scan has accrued anything this month
    b = burn(
        "p",
        "2026-12",
        MONTH_FIRST_INSTANT,
        budget=Decimal(500),
        month_to_date=Decimal(0),
        days={},
        run_rate=Decimal(1),
    )
    # THEN nothing is spent, the forecast is a month at today's rate, nothing is crossed yet
    assert b.elapsed == 0
    assert [(p.day, p.usd) for p in b.series] == [(0.0, 0)]
    assert b.forecast == 31 * 24
    assert [(c.pct, c.projected) for c in b.crossings] == [(50, True), (80, True), (100, True)]


def test_a_row_written_before_days_were_kept_shows_the_month_to_date_only() -> None:
    # GIVEN a ledger row without a day map (an older version wrote it)
    b = burn("p", "2026-11", FOURTH_NOON, budget=Decimal(100), month_to_date=Decimal(60), days=None)
    # THEN there is no line through days nobody recorded, and the crossing has no day
    assert b.series == ()
    assert not b.has_days
    assert [(c.pct, c.day) for c in b.crossings] == [(50, None)]


def test_spend_from_before_the_day_map_is_drawn_at_the_month_start() -> None:
    # GIVEN $40 recorded before the upgrade, then $10 on the 3rd and $5 on the 4th
    b = burn(
        "p",
        "2026-11",
        FOURTH_NOON,
        budget=None,
        month_to_date=Decimal(55),
        days={3: Decimal(10), 4: Decimal(5)},
        undated_usd=Decimal(40),
    )
    # THEN the line starts at $40 and still ends at the month-to-date
    assert b.series[0].usd == 40
    assert b.series[-1].usd == 55


def test_a_closed_month_forecasts_what_it_spent() -> None:
    b = burn(
        "p",
        "2026-10",
        FOURTH_NOON,
        budget=Decimal(100),
        month_to_date=Decimal(80),
        days={31: Decimal(80)},
        run_rate=Decimal(9),
    )
    assert b.elapsed == 31
    assert b.forecast == b.forecast_low == b.forecast_high == 80


def test_without_a_budget_nothing_is_crossed_and_the_status_says_so() -> None:
    b = burn("p", "2026-11", FOURTH_NOON, budget=None, month_to_date=Decimal(9), days={})
    assert b.crossings == ()
    assert b.status is BudgetStatus.NO_BUDGET


def test_an_unpriced_type_is_counted_never_priced_at_zero() -> None:
    got = unpriced_types([("p9.96xlarge", None), ("g5.xlarge", Decimal(1)), ("p9.96xlarge", None)])
    assert got == {"p9.96xlarge": 2}


def test_actions_show_where_each_resource_stands_last() -> None:
    at = FOURTH_NOON
    events = [
        (at, "stop", "r1", "warned", {"project": "p", "deadline": "2026-11-05T12:00:00Z"}),
        (
            at + timedelta(days=1),
            "stop",
            "r1",
            "acted",
            {"project": "p", "usd_per_month_saved": "100"},
        ),
        (
            at,
            "stop",
            "r2",
            "warned",
            {"project": "p", "deadline": "2026-11-06T12:00:00Z", "usd_per_month_saved": "7"},
        ),
        (at, "stop", "r3", "would-act", {"project": "q", "usd_per_month_saved": "5"}),
    ]
    a = actions_of(events)
    assert [x.resource for x in a.taken] == ["r1"]
    assert [(x.resource, x.deadline) for x in a.pending] == [("r2", "2026-11-06T12:00:00Z")]
    assert (a.saved_usd_per_month, a.would_save_usd_per_month) == (100, 5)


def test_findings_are_grouped_by_code_the_most_severe_first() -> None:
    found = [
        Finding(FindingCode.UNATTRIBUTED, "a", "x", Severity.WARNING),
        Finding(FindingCode.UNATTRIBUTED, "b", "x", Severity.WARNING),
        Finding(FindingCode.SCAN_FAILED, "us-west-2/ec2", "x", Severity.ERROR),
    ]
    groups = group_findings(found)
    assert [(g.code, g.count) for g in groups] == [("scan-failed", 1), ("unattributed", 2)]
