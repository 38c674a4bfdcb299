"""Hostile, late, repeated and reordered launch events, through the on-launch handler's
``run`` (moto in-process, the check as ``wiring.launch`` builds it).

EventBridge delivers at least once, late, and out of order, and anyone who can put an event
on a bus the rule reads can shape its ``detail``. The check trusts an event only to name a
resource: it reads that resource back, and a refused event costs no AWS call at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from costguard.handlers.on_launch import run
from tests.support.clock import MIDDAY
from tests.support.events import load_event
from tests.support.launch import FOREIGN, REGION, Calls, LaunchWorld, running, state_event

NOW = MIDDAY


@pytest.fixture
def world(aws: Any) -> Iterator[LaunchWorld]:
    yield LaunchWorld.create(aws)


def outcomes(result: dict[str, Any]) -> list[str]:
    return [v["outcome"] for v in result["launches"]]


# -- refused before any AWS call ------------------------------------------------------------

MALFORMED: dict[str, Any] = {
    "detail is a string": {"detail": "i-0123456789abcdef0"},
    "detail is a list": {"detail": [{"instance-id": "i-0123456789abcdef0"}]},
    "detail is null": {"detail": None},
    "no instance id": {"detail": {"state": "running"}},
    "instance id is a number": {"detail": {"instance-id": 1234567890, "state": "running"}},
    "instance id is an object": {"detail": {"instance-id": {"S": "i-1"}, "state": "running"}},
    "instance id with a filter injected": {
        "detail": {"instance-id": "i-0123456789abcdef0,i-0fedcba9876543210", "state": "running"}
    },
    "instance id of 10 KB": {"detail": {"instance-id": "i-" + "a" * 10_000, "state": "running"}},
    "state is a list": {"detail": {"instance-id": "i-0123456789abcdef0", "state": ["running"]}},
    "time is not a time": {"time": "yesterday"},
    "time is a number": {"time": 1_700_000_000},
    "account is short": {"account": "12345"},
    "region is a path": {"region": "../../us-east-1"},
    "source is someone else's": {"source": "my.app"},
}


def malformed(case: str) -> dict[str, Any]:
    event = running("i-0123456789abcdef0", NOW)
    change = MALFORMED[case]
    if "detail" in change:
        event["detail"] = change["detail"]
        change = {k: v for k, v in change.items() if k != "detail"}
    event.update(change)
    return event


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_event_is_refused_without_an_aws_call_or_an_alert(
    world: LaunchWorld, case: str
) -> None:
    """Defect guarded: a malformed event that raised would be retried by Lambda and land in
    the DLQ (a poison message that alarms every time); one that reached a Describe call
    with its text would let an event's author choose what CostGuard reads."""
    # GIVEN the check, its calls counted
    calls = Calls()
    check = world.check(calls)
    # WHEN the event is handed to it
    result = run(check, malformed(case), NOW)
    # THEN it is refused or ignored, no exception, no AWS call, nothing published
    assert outcomes(result)[0] in {"refused", "ignored"}, result
    assert calls.total() == 0, calls.calls
    assert world.published() == []


@pytest.mark.parametrize(
    "event",
    [None, [], ["a"], "running", 42, 4.2, True, {}, {"detail": {}}, {"Records": []}],
    ids=repr,
)
def test_an_event_that_is_not_an_object_is_refused(world: LaunchWorld, event: Any) -> None:
    """Defect guarded: ``event.get`` on a list or a string raises AttributeError: a retry
    storm and a DLQ entry for an event no retry can fix."""
    calls = Calls()
    result = run(world.check(calls), event, NOW)
    assert outcomes(result) == ["refused"], result
    assert calls.total() == 0


def test_an_event_from_a_foreign_account_is_refused_without_an_aws_call(
    world: LaunchWorld,
) -> None:
    """Defect guarded: an event whose ``account`` is not this deployment's names an
    instance there; reading it (in this account, under the same id) and alerting would let
    another account's bus write to this team's alert channel.

    GIVEN an untagged p5 in this account WHEN an event names it from another account THEN
    the event is refused, no AWS call is made, nothing is published."""
    (p5,) = world.run_instances("p5.48xlarge")
    calls = Calls()
    result = run(world.check(calls), running(p5, NOW, account=FOREIGN), NOW)
    (verdict,) = result["launches"]
    assert verdict["outcome"] == "refused"
    assert FOREIGN in verdict["reason"]
    assert calls.total() == 0, calls.calls
    assert world.published() == []


@pytest.mark.parametrize(
    "instance_id",
    [
        "i-０１２３４５６７８９abcdef",  # fullwidth digits (str.isdigit says yes)
        "i-0123456789abcdef\u200b",  # zero-width space
        "i-0123456789abc\u202edef",  # right-to-left override
        "i-0123456789abcdef\x00",  # NUL
        "і-0123456789abcdef0",  # Cyrillic i
        "i-0123456789abcdef0\n",  # a trailing newline ($ would accept it)
        "i-٠١٢٣٤٥٦٧٨٩abcdef",  # Arabic-Indic digits
    ],
    ids=["fullwidth", "zero-width", "rtl-override", "nul", "cyrillic", "newline", "arabic-indic"],
)
def test_odd_unicode_in_an_instance_id_is_refused_without_an_aws_call(
    world: LaunchWorld, instance_id: str
) -> None:
    """Defect guarded: ``\\d`` and ``$`` in Python match far more than ASCII digits and an
    end: an id that looks right to a regex but is not one would reach DescribeInstances."""
    calls = Calls()
    result = run(world.check(calls), running(instance_id, NOW), NOW)
    assert outcomes(result) == ["refused"], result
    assert calls.total() == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("account", "１２３４５６７８９０１２"),
        ("account", "12345678901２"),
        ("region", "us-east-１"),
    ],
)
def test_odd_unicode_in_the_account_or_region_is_refused(
    world: LaunchWorld, field: str, value: str
) -> None:
    calls = Calls()
    event = running("i-0123456789abcdef0", NOW)
    event[field] = value
    result = run(world.check(calls), event, NOW)
    assert outcomes(result) == ["refused"], result
    assert calls.total() == 0


def test_odd_unicode_in_a_sagemaker_name_is_refused_without_an_aws_call(
    world: LaunchWorld,
) -> None:
    calls = Calls()
    event = load_event(
        "sagemaker-notebook-inservice",
        resource_id="nb-\u202eexe.txt",
        time=NOW.isoformat(),
    )
    result = run(world.check(calls), event, NOW)
    assert outcomes(result) == ["refused"], result
    assert calls.total() == 0


# -- out of time -----------------------------------------------------------------------------


def test_an_event_older_than_three_hours_is_ignored(world: LaunchWorld) -> None:
    """GIVEN an untagged p5 WHEN its running event arrives 3 h 1 min late THEN it is
    ignored (the scan has judged it since), without an AWS call or an alert; at 2 h 59 min
    it is still judged."""
    (p5,) = world.run_instances("p5.48xlarge")
    calls = Calls()
    check = world.check(calls)
    late = run(check, running(p5, NOW - timedelta(hours=3, minutes=1)), NOW)
    assert outcomes(late) == ["ignored"], late
    assert calls.total() == 0
    assert world.published() == []
    in_time = run(check, running(p5, NOW - timedelta(hours=2, minutes=59)), NOW)
    assert outcomes(in_time) == ["alerted"], in_time


def test_an_event_from_the_future_is_refused(world: LaunchWorld) -> None:
    """Defect guarded: an event dated ahead claims a time no clock has reached; its
    ``time`` is not trusted to decide a day's claim."""
    (p5,) = world.run_instances("p5.48xlarge")
    calls = Calls()
    result = run(world.check(calls), running(p5, NOW + timedelta(minutes=6)), NOW)
    assert outcomes(result) == ["refused"], result
    assert calls.total() == 0
    assert world.published() == []


# -- the resource is read back: gone, stopped ------------------------------------------------


def test_an_event_for_a_missing_instance_is_ignored(world: LaunchWorld) -> None:
    """Defect guarded: DescribeInstances answers a missing id with
    InvalidInstanceID.NotFound; raised, it would be retried to the DLQ for an instance
    that will never exist."""
    calls = Calls()
    result = run(world.check(calls), running("i-0123456789abcdef0", NOW), NOW)
    (verdict,) = result["launches"]
    assert verdict["outcome"] == "ignored"
    assert "no longer exists" in verdict["reason"]
    assert calls.calls["ec2.DescribeInstances"] == 1
    assert world.published() == []


def test_a_terminated_instance_is_ignored(world: LaunchWorld) -> None:
    (p5,) = world.run_instances("p5.48xlarge")
    world.session.client("ec2", region_name=REGION).terminate_instances(InstanceIds=[p5])
    result = run(world.check(), running(p5, NOW), NOW)
    assert outcomes(result) == ["ignored"], result
    assert world.published() == []


def test_a_running_event_for_an_instance_now_stopped_is_ignored(world: LaunchWorld) -> None:
    """GIVEN an untagged p5 that was started and stopped since WHEN the late ``running``
    event arrives THEN nothing is sent: the instance's state now is what counts."""
    (p5,) = world.run_instances("p5.48xlarge")
    world.session.client("ec2", region_name=REGION).stop_instances(InstanceIds=[p5])
    result = run(world.check(), running(p5, NOW), NOW)
    (verdict,) = result["launches"]
    assert verdict["outcome"] == "ignored"
    assert "stopped" in verdict["reason"] or "stopping" in verdict["reason"]
    assert world.published() == []


def test_a_cpu_instance_is_ignored(world: LaunchWorld) -> None:
    (m5,) = world.run_instances("m5.large")
    result = run(world.check(), running(m5, NOW), NOW)
    assert outcomes(result) == ["ignored"], result
    assert world.published() == []


# -- redelivered and reordered ---------------------------------------------------------------


def test_the_same_event_twice_sends_one_alert(world: LaunchWorld) -> None:
    """GIVEN an untagged p5 WHEN EventBridge delivers its running event twice (at least once
    delivery), to two cold containers THEN one alert is published."""
    (p5,) = world.run_instances("p5.48xlarge")
    event = running(p5, NOW)
    first = run(world.check(), event, NOW)
    second = run(world.check(), event, NOW + timedelta(seconds=40))
    assert outcomes(first) == ["alerted"]
    assert outcomes(second) == ["quiet"], second
    (alert,) = world.published()
    assert alert["kind"] == "unattributed-spend"


def test_pending_and_running_of_one_launch_send_one_alert_in_either_order(
    world: LaunchWorld,
) -> None:
    """GIVEN an untagged p5 WHEN its ``running`` event arrives before its ``pending`` one
    THEN one alert: both name the same launch."""
    (p5,) = world.run_instances("p5.48xlarge")
    check = world.check()
    results = [
        run(check, state_event("running", p5, NOW), NOW),
        run(check, state_event("pending", p5, NOW - timedelta(seconds=13)), NOW),
    ]
    assert [outcomes(r) for r in results] == [["alerted"], ["quiet"]]
    assert len(world.published()) == 1


def test_stopped_then_a_late_running_event_does_nothing(world: LaunchWorld) -> None:
    """GIVEN a p5 launched and stopped WHEN the ``stopped`` event arrives, then the late
    ``running`` one THEN neither sends anything."""
    (p5,) = world.run_instances("p5.48xlarge")
    world.session.client("ec2", region_name=REGION).stop_instances(InstanceIds=[p5])
    check = world.check()
    stopped = run(check, state_event("stopped", p5, NOW), NOW)
    late = run(check, state_event("running", p5, NOW - timedelta(minutes=2)), NOW)
    assert outcomes(stopped) == ["ignored"]
    assert outcomes(late) == ["ignored"]
    assert world.published() == []


def test_a_stop_event_for_a_running_instance_changes_nothing_already_sent(
    world: LaunchWorld,
) -> None:
    """GIVEN a p5 alerted at launch, then stopped and started again WHEN the ``stopped`` and
    the new ``running`` events arrive the same day THEN no second alert that day."""
    (p5,) = world.run_instances("p5.48xlarge")
    check = world.check()
    assert outcomes(run(check, running(p5, NOW), NOW)) == ["alerted"]
    ec2 = world.session.client("ec2", region_name=REGION)
    ec2.stop_instances(InstanceIds=[p5])
    assert outcomes(run(check, state_event("stopped", p5, NOW), NOW)) == ["ignored"]
    ec2.start_instances(InstanceIds=[p5])
    later = NOW + timedelta(minutes=30)
    assert outcomes(run(check, running(p5, later), later)) == ["quiet"]
    assert len(world.published()) == 1


@pytest.mark.parametrize(
    ("sample", "name"),
    [
        ("sagemaker-notebook-inservice", "gone-notebook"),
        ("sagemaker-endpoint-inservice", "gone-endpoint"),
        ("sagemaker-training-inprogress", "gone-training-job"),
    ],
)
def test_an_event_for_a_missing_sagemaker_resource_is_ignored(
    world: LaunchWorld, sample: str, name: str
) -> None:
    """Defect guarded: SageMaker answers a missing notebook, endpoint or training job with
    a ValidationException; raised, it would be retried to the DLQ."""
    calls = Calls()
    event = load_event(sample, resource_id=name, time=NOW.isoformat())
    result = run(world.check(calls), event, NOW)
    (verdict,) = result["launches"]
    assert verdict["outcome"] == "ignored", verdict
    assert "no longer exists" in verdict["reason"]
    assert 1 <= calls.total() <= 2, calls.calls
    assert world.published() == []
