"""``costguard demo --org``'s guards run at simulated times: the same story whatever the
wall clock (a day boundary between two times meant for one day would send a second
once-a-day warning or alert; a time after the real clock would make moto's snapshot,
stamped with the real clock, older than the volume's first-seen time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard_demo.org import DEFAULT_TICKS
from costguard_demo.org_guards import CONSUMER_DELAY, SCHEDULE, STALE_VOLUMES, first_day
from costguard_demo.plumbing import demo_window

MINUTE = timedelta(minutes=1)


def _nows() -> list[datetime]:
    """Every minute of a day at a month's and a year's end, and a leap day."""
    out = []
    for day in (datetime(2026, 11, 30, tzinfo=UTC), datetime(2027, 12, 31, tzinfo=UTC)):
        out += [day + MINUTE * n for n in range(24 * 60)]
    return [*out, datetime(2028, 2, 29, 0, 7, tzinfo=UTC), datetime(2028, 3, 1, 0, 0, tzinfo=UTC)]


def test_every_guard_time_is_a_fixed_hour_of_three_days_before_the_scans_at_any_wall_clock() -> (
    None
):
    shapes = set()
    for now in _nows():
        # GIVEN the demo started at any minute: its scans' window, then the guards' times
        start, _end = demo_window(now, DEFAULT_TICKS)
        day = first_day(start)
        runs = [day + t.offset + CONSUMER_DELAY for t in SCHEDULE]
        # THEN every run (the consumer's time included) is before the scans and the clock
        assert max(runs) < start <= now
        # AND each falls on the day and hour it is meant for, so the story is the same
        shapes.add(tuple(((r - day).days, f"{r:%H:%M}") for r in runs))
    assert len(shapes) == 1


def test_the_stale_volume_times_are_first_seen_the_warning_and_the_ttl() -> None:
    # The guard's TTL is 48 h by default, warned 24 h before: the warning falls on the run
    # exactly 24 h after the volume was first seen (so its deadline is the TTL itself),
    # and the delete a run after the snapshot started at the TTL.
    times = [t.offset for t in SCHEDULE if t.guard == STALE_VOLUMES]
    first = times[0]
    assert [t - first for t in times] == [
        timedelta(0),
        timedelta(hours=24),
        timedelta(hours=48),
        timedelta(hours=48, minutes=30),
    ]


@pytest.mark.parametrize("hour", [0, 23])
def test_the_first_day_is_midnight_three_days_before(hour: int) -> None:
    start = datetime(2026, 3, 1, hour, 59, tzinfo=UTC)
    assert first_day(start) == datetime(2026, 2, 26, tzinfo=UTC)
