"""Hostile tests of the act Lambda's scheduled events: late and repeated times."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.functional.test_act_handler import account, settings, toy_guard
from tests.support.clock import MIDDAY

__all__ = ["account"]


def _states(session: Any) -> dict[str, str]:
    ec2 = session.client("ec2", region_name="us-east-1")
    return {
        i["InstanceId"]: i["State"]["Name"]
        for r in ec2.describe_instances()["Reservations"]
        for i in r["Instances"]
    }


def test_a_late_scheduled_event_does_not_shorten_the_owners_warning(
    account: Any,
) -> None:
    """Defect: the act Lambda warns "as of" the event's time, not when the owner is told.

    A schedule retry arriving 2 h 30 min late (accepted: MAX_EVENT_AGE is 3 h) warns
    the owner *now* but records a deadline of event-time + grace (1 h), which is
    already 1 h 30 min in the past. The next on-time run, 15 minutes later, stops the
    instance: the owner had 15 minutes instead of the promised grace period.
    """
    from costguard.handlers.act import process

    # GIVEN an idle instance and a guard whose grace period is 1 h
    late = MIDDAY - timedelta(hours=2, minutes=30)
    # WHEN a 2 h 30 min late schedule retry reaches the guard Lambda at MIDDAY
    first = process(
        {"time": late.isoformat(), "guard": "toy"},
        settings(dry_run=False),
        account,
        guards=toy_guard(account),
        clock=MIDDAY,
    )
    assert {o.step.value for o in first.outcomes} == {"warned"}
    # AND the next on-time run comes 15 minutes later
    then = MIDDAY + timedelta(minutes=15)
    process(
        {"time": then.isoformat(), "guard": "toy"},
        settings(dry_run=False),
        account,
        guards=toy_guard(account),
        clock=then,
    )
    # THEN nothing is stopped: the owner was told only 15 minutes ago (grace is 1 h)
    assert set(_states(account).values()) == {"running"}, (
        f"stopped 15 min after the owner was warned: {_states(account)}"
    )


def test_the_same_scheduled_time_twice_warns_the_owner_once(account: Any) -> None:
    """Control: a repeated event (same time) neither warns twice nor acts."""
    from costguard.handlers.act import process

    event = {"time": MIDDAY.isoformat(), "guard": "toy"}
    a = process(event, settings(False), account, guards=toy_guard(account), clock=MIDDAY)
    b = process(event, settings(False), account, guards=toy_guard(account), clock=MIDDAY)
    assert [o.step.value for o in a.outcomes] == ["warned", "warned"]
    assert "acted" not in {o.step.value for o in b.outcomes}
    assert set(_states(account).values()) == {"running"}


@pytest.mark.parametrize("guard", ["", " toy", "TOY"])
def test_an_odd_guard_name_is_refused_before_any_call(account: Any, guard: str) -> None:
    """Control: an empty or differently spelled guard is an error, never another guard."""
    from costguard.handlers.act import process

    with pytest.raises(ValueError):
        process(
            {"time": MIDDAY.isoformat(), "guard": guard},
            settings(True),
            account,
            guards=toy_guard(account),
        )
