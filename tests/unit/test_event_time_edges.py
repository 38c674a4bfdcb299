"""Hostile scheduled events for the scan and actuator Lambdas (costguard/events.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from costguard.events import EventTimeError, ScheduledEvent, scheduled_now

CLOCK = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("time", ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+01:00"])
def test_an_event_time_at_the_edge_of_the_calendar_is_refused_not_a_crash(time: str) -> None:
    # GIVEN an event whose time is a valid ISO-8601 string at the calendar's edge, with
    # an offset (the README: "An event time of 5, 1970, or next month; an offset:
    # refused with no ledger write"; the handlers catch EventTimeError and return
    # {"refused": ...} so that Lambda does not retry a bad event into the DLQ)
    # WHEN the scan or actuator Lambda reads its "now"
    try:
        scheduled_now(ScheduledEvent, {"time": time}, CLOCK)
    except EventTimeError:
        return  # refused, as documented
    except Exception as exc:
        # THEN it is refused like any other implausible time, not an unhandled crash
        pytest.fail(f"{time!r} crashed the handler with {type(exc).__name__}: {exc}")
    pytest.fail(f"{time!r} was accepted as now")
