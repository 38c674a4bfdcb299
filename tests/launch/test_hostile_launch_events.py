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
