from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costguard.domain.attribution import AttributedResource
from costguard.domain.calendar import hours_left_in_month, split_by_month
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.pricing import PricedResource
from costguard.domain.spend import (
    BudgetStatus,
    Observation,
    accrue,
    budget_status,
    forecast_month_end,
)

NOV20 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def running(
    rate: str, launched: datetime, project: str | None = "p", id_: str = "i-1"
) -> AttributedResource:
    res = Resource(id=id_, kind=ResourceKind.EC2_INSTANCE, region="us-east-1", launched_at=launched)
    return AttributedResource(PricedResource(res, Decimal(rate), "t"), project, None, None, "tag")


def test_first_observation_backfills_from_launch_and_is_estimated() -> None:
    item = running("10", NOV20 - timedelta(hours=5))
    result = accrue([item], {}, NOV20)
    inc = result.increments[("p", "2026-11")]
    assert inc.usd == Decimal(50)
    assert inc.estimated_usd == Decimal(50)
    assert result.observations[0].first_seen_at == NOV20


def test_backfill_is_bounded_by_the_month_start() -> None:
    item = running("10", datetime(2026, 10, 15, tzinfo=UTC))
    now = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
    result = accrue([item], {}, now)
    assert result.increments == {("p", "2026-11"): result.increments[("p", "2026-11")]}
    assert result.increments[("p", "2026-11")].usd == Decimal(
        240
    )  # Nov 1 00:00 to Nov 2 00:00 x $10


def test_later_scans_add_rate_times_time_since_last_observation_exactly() -> None:
    item = running("4", NOV20 - timedelta(days=1))
    seen = {
        item.priced.resource.key: Observation(
            item.priced.resource.key, "p", Decimal(4), NOV20, NOV20
        )
    }
    result = accrue([item], seen, NOV20 + timedelta(minutes=15))
    inc = result.increments[("p", "2026-11")]
    assert inc.usd == Decimal(1)
    assert inc.estimated_usd == 0


def test_interval_across_month_end_is_split_between_the_months() -> None:
    last = datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
    item = running("2", last - timedelta(days=3))
    seen = {
        item.priced.resource.key: Observation(item.priced.resource.key, "p", Decimal(2), last, last)
    }
    result = accrue([item], seen, datetime(2026, 12, 1, 0, 15, tzinfo=UTC))
    assert result.increments[("p", "2026-11")].usd == Decimal(1)
    assert result.increments[("p", "2026-12")].usd == Decimal("0.5")


def test_restarted_instance_accrues_only_from_its_new_launch() -> None:
    item = running("10", NOV20 - timedelta(minutes=6))
    old = NOV20 - timedelta(hours=3)
    seen = {
        item.priced.resource.key: Observation(item.priced.resource.key, "p", Decimal(10), old, old)
    }
    result = accrue([item], seen, NOV20)
    assert result.increments[("p", "2026-11")].usd == Decimal(1)


def test_long_gap_between_scans_is_marked_estimated() -> None:
    item = running("1", NOV20 - timedelta(days=5))
    old = NOV20 - timedelta(hours=6)
    seen = {
        item.priced.resource.key: Observation(item.priced.resource.key, "p", Decimal(1), old, old)
    }
    inc = accrue([item], seen, NOV20).increments[("p", "2026-11")]
    assert inc.usd == inc.estimated_usd == Decimal(6)


def test_unpriced_resources_accrue_nothing_but_are_observed() -> None:
    res = Resource(
        id="i-u",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        launched_at=NOV20 - timedelta(hours=1),
    )
    item = AttributedResource(PricedResource(res, None, "unpriced"), "p", None, None, "tag")
    result = accrue([item], {}, NOV20)
    assert result.increments == {}
    assert len(result.observations) == 1


def test_forecast_is_month_to_date_plus_run_rate_for_the_hours_left() -> None:
    now = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)
    assert hours_left_in_month(now) == 24
    assert forecast_month_end(Decimal(100), Decimal(2), now) == Decimal(148)


@pytest.mark.parametrize(
    ("forecast", "status"),
    [
        ("79.99", BudgetStatus.OK),
        ("80", BudgetStatus.WARNING),
        ("99.99", BudgetStatus.WARNING),
        ("100", BudgetStatus.OVER),
    ],
)
def test_budget_status_thresholds(forecast: str, status: BudgetStatus) -> None:
    assert budget_status(Decimal(100), Decimal(forecast)) is status


def test_no_budget_is_its_own_status() -> None:
    assert budget_status(None, Decimal(1)) is BudgetStatus.NO_BUDGET


@given(
    st.datetimes(
        min_value=datetime(2020, 1, 1),  # noqa: DTZ001 - hypothesis wants naive bounds
        max_value=datetime(2030, 1, 1),  # noqa: DTZ001
        timezones=st.just(UTC),
    ),
    st.integers(min_value=0, max_value=24 * 90 * 60),
)
def test_month_split_never_loses_or_invents_time(start: datetime, minutes: int) -> None:
    end = start + timedelta(minutes=minutes)
    parts = split_by_month(start, end)
    total = sum((h for _, h in parts), Decimal(0))
    assert abs(total - Decimal(minutes) / 60) < Decimal("1e-9")
    assert [m for m, _ in parts] == sorted({m for m, _ in parts})
