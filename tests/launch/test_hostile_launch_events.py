"""The on-launch check under attack: odd events, garbled state left by the scan, bursts,
redelivery in parallel, and what a demanding user expects of repeated launches.

Each test here was written against a failure first seen on the check (or a design gap,
marked ``xfail(strict=True)`` with its reason)."""

from __future__ import annotations

from typing import Any

import pytest

from costguard.domain.launch import (
    Refused,
    parse_launch_event,
)
from tests.launch.test_launch_check import NOW
from tests.support.events import load_event

# -- events that are not what they claim to be ------------------------------------------------


@pytest.mark.parametrize("field", ["responseElements", "instancesSet"])
@pytest.mark.parametrize("value", ["x", [1], 5, True])
def test_a_runinstances_event_whose_response_is_not_an_object_is_refused(
    field: str, value: Any
) -> None:
    """GIVEN a CloudTrail RunInstances event whose responseElements (or its instancesSet) is
    a string, a list, a number or a boolean instead of an object
    WHEN it is parsed
    THEN it is refused with a reason, never an AttributeError (the parser is total: a crash
    would be retried twice and land in the dead-letter queue, alarming on a bad event)."""
    raw = load_event("cloudtrail-runinstances")
    if field == "responseElements":
        raw["detail"]["responseElements"] = value
    else:
        raw["detail"]["responseElements"]["instancesSet"] = value
    found = parse_launch_event(raw, NOW)
    assert isinstance(found, Refused) and found.hostile


@pytest.mark.parametrize(
    "time",
    [
        "0001-01-01T00:30:00+01:00",  # before year 1 in UTC
        "9999-12-31T23:59:59-01:00",  # after year 9999 in UTC
    ],
)
def test_an_event_time_whose_offset_leaves_the_calendar_is_refused(time: str) -> None:
    """GIVEN an event whose time is valid ISO-8601 but falls outside years 1-9999 once moved
    to UTC by its offset
    WHEN it is parsed
    THEN it is refused as hostile, not an OverflowError."""
    raw = load_event("ec2-instance-state-running")
    raw["time"] = time
    found = parse_launch_event(raw, NOW)
    assert isinstance(found, Refused) and found.hostile
