"""The demo's simulated scans stay within one UTC day whenever they can (daily alerts
are deduplicated per day: a run across midnight would show them twice)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard_demo.plumbing import INTERVAL, demo_window


@pytest.mark.parametrize(
    "now",
    [
        datetime(2026, 11, 30, 0, 36, 12, tzinfo=UTC),
        datetime(2026, 12, 1, 0, 0, tzinfo=UTC),
        datetime(2027, 1, 1, 1, 14, tzinfo=UTC),
    ],
)
def test_keeps_six_scans_in_one_utc_day_when_started_just_after_midnight(now: datetime) -> None:
    # GIVEN a demo started less than 75 minutes after midnight UTC
    # WHEN its window is chosen
    start, end = demo_window(now, 6)
    # THEN its six scans fall on one UTC day, 15 minutes apart, never after now
    assert start.date() == end.date()
    assert end - start == INTERVAL * 5
    assert end <= now


def test_ends_at_now_in_the_middle_of_the_day() -> None:
    now = datetime(2026, 11, 29, 12, 0, 40, tzinfo=UTC)
    start, end = demo_window(now, 6)
    assert end == now.replace(second=0)
    assert start == end - timedelta(minutes=75)


def test_a_run_longer_than_a_day_still_ends_at_now() -> None:
    now = datetime(2026, 11, 30, 0, 30, tzinfo=UTC)
    start, end = demo_window(now, 200)
    assert end == now
    assert end - start == INTERVAL * 199
