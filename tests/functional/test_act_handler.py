"""The actuator Lambda's handler on moto: a guard by name, the executor, a summary back."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.domain.tags import Tags
from costguard.env import Env
from costguard.services.guard import Guard
from tests.support.clock import MIDDAY
from tests.support.ec2 import run_instance
from tests.support.toy import TOY, ToyPolicy


@pytest.fixture
def account(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from costguard import events
    from costguard_demo.plumbing import create_ledger_table

    monkeypatch.setattr(events, "CLOCK", lambda: MIDDAY)
    create_ledger_table(aws, "ledger", "us-east-1")
    ec2 = aws.client("ec2", region_name="us-east-1")
    for tags in ({Tags.PROJECT: "vision", TOY: "idle"}, {Tags.PROJECT: "cv", TOY: "idle"}):
        run_instance(ec2, tags)
    return aws


def settings(dry_run: bool) -> Any:
    from costguard.settings import Settings

    return Settings.from_env(
        {
            Env.REGIONS: "us-east-1",
            Env.TABLE_NAME: "ledger",
            Env.SCOPE: "123456789012",
            Env.DRY_RUN: "true" if dry_run else "false",
        }
    )


def toy_guard(session: Any) -> dict[str, Any]:
    return {
        "toy": lambda _settings, clients, _context: Guard(
            "toy", ToyPolicy(session), [Ec2InstanceActuator(clients)]
        )
    }


def test_runs_the_named_guard_through_the_executor(account: Any) -> None:
    from costguard.handlers.act import process, summary

    report = process(
        {"time": MIDDAY.isoformat(), "guard": "toy"},
        settings(dry_run=True),
        account,
        guards=toy_guard(account),
    )
    result = summary(report)
    assert result["dry_run"] is True
    assert result["counts"] == {"would-warn": 2}
    assert result["usd_per_month_would_save"] == pytest.approx(2 * 1.006 * 730)


def test_an_unknown_guard_is_a_clear_error(account: Any) -> None:
    from costguard.handlers.act import process

    with pytest.raises(ValueError, match="unknown guard 'idle'"):
        process({"time": MIDDAY.isoformat(), "guard": "idle"}, settings(True), account, guards={})


def test_a_guard_lambda_runs_only_the_guard_it_is_bound_to(account: Any) -> None:
    # GIVEN the Lambda of the toy guard (COSTGUARD_GUARD=toy: its role holds toy's permissions)
    from costguard.handlers.act import process
    from costguard.settings import Settings

    bound = Settings.from_env(
        {
            Env.REGIONS: "us-east-1",
            Env.TABLE_NAME: "ledger",
            Env.SCOPE: "123456789012",
            Env.GUARD: "toy",
        }
    )
    guards = {**toy_guard(account), "other": toy_guard(account)["toy"]}
    # WHEN an event names another guard THEN it is refused before any call
    with pytest.raises(ValueError, match="runs the 'toy' guard, not 'other'"):
        process({"time": MIDDAY.isoformat(), "guard": "other"}, bound, account, guards=guards)
    # AND an event that names no guard runs the bound one
    report = process({"time": MIDDAY.isoformat()}, bound, account, guards=guards)
    assert report.counts == {"would-warn": 2}


def test_an_event_naming_no_guard_for_an_unbound_lambda_is_a_clear_error(account: Any) -> None:
    from costguard.handlers.act import process

    with pytest.raises(ValueError, match="no guard named"):
        process({"time": MIDDAY.isoformat()}, settings(True), account, guards=toy_guard(account))


def test_a_failed_action_fails_the_invocation_after_the_others_ran(
    account: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.handlers.act import ActionsFailedError, process

    # (warned two hours ago, when that run ran: a guard acts at the clock's time)
    event = {"time": (MIDDAY - timedelta(hours=2)).isoformat(), "guard": "toy"}
    earlier = MIDDAY - timedelta(hours=2)
    process(event, settings(False), account, guards=toy_guard(account), clock=earlier)
    original = Ec2InstanceActuator.apply
    stopped: list[str] = []

    def flaky(self: Ec2InstanceActuator, decision: Any) -> str:
        if decision.target.project == "vision":
            raise RuntimeError("StopInstances throttled")
        stopped.append(decision.target.id)
        return original(self, decision)

    monkeypatch.setattr(Ec2InstanceActuator, "apply", flaky)
    with pytest.raises(ActionsFailedError, match="1 of 2 actions failed"):
        process(
            {"time": MIDDAY.isoformat(), "guard": "toy"},
            settings(False),
            account,
            guards=toy_guard(account),
        )
    assert len(stopped) == 1  # the other instance was still stopped


def test_the_handler_refuses_an_implausible_time(
    account: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.handlers.act import handler

    for key, value in {Env.REGIONS: "us-east-1", Env.TABLE_NAME: "ledger"}.items():
        monkeypatch.setenv(key, value)

    class Context:
        function_name = "costguard-act"
        memory_limit_in_mb = 256
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:costguard-act"
        aws_request_id = "req-1"

    result = handler({"time": "1970-01-01T00:00:00Z", "guard": "toy"}, Context())
    assert "refused" in result


@pytest.mark.parametrize(
    "offset",
    [timedelta(minutes=3), timedelta(minutes=5), timedelta(seconds=1), -timedelta(hours=2)],
    ids=["3-min-ahead", "5-min-ahead", "1-s-ahead", "2-h-late"],
)
def test_a_guard_acts_at_the_clock_never_at_an_event_time_ahead_of_it(
    account: Any, offset: timedelta
) -> None:
    """GIVEN the Lambda's clock at MIDDAY and a schedule event whose time is ``offset`` from it
    (ahead: clock skew or a hand-written event, within the 5 minutes accepted)
    WHEN the actuator Lambda runs a guard
    THEN the guard's "now" is the clock's, never later: nothing can act before its time.

    Defect: an event time up to 5 minutes ahead of the clock became the guard's "now"
    (``max(event time, clock)``): an object was deleted 3 minutes before its TTL.
    """
    from costguard.handlers.act import process

    seen: list[datetime] = []

    class Recording:
        def decide(self, now: datetime) -> list[Any]:
            seen.append(now)
            return []

    guards = {"clock": lambda _s, clients, _c: Guard("clock", Recording(), [])}
    process(
        {"time": (MIDDAY + offset).isoformat(), "guard": "clock"},
        settings(False),
        account,
        guards=guards,
    )
    assert seen == [MIDDAY]
