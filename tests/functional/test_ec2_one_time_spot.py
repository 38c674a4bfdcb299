"""A one-time spot instance cannot be stopped (EC2 refuses) and is never terminated: its
owner gets a notice, recorded as notice-only, never as a saving. moto sets no spot
request id on instances and stops any spot instance, so EC2 is stubbed (Stubber checks
every request against the EC2 model)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import boto3
from botocore.stub import Stubber

from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.adapters.memory import InMemoryLedger
from costguard.domain.decisions import Action, ApplyResult, Decision, Step, Target
from costguard.domain.tags import Tags
from costguard.services.executor import Executor, ExecutorSettings
from tests.support.actuators import FakeResource, InMemoryActuator
from tests.support.fakes import RecordingNotifier

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
REGION = "us-east-1"
IID = "i-0123456789abcdef0"


class OneClient:
    account = "123456789012"

    def __init__(self, client: Any) -> None:
        self.client = client

    def ec2(self, region: str) -> Any:
        return self.client


def decision(kind: str = "ec2-instance", rid: str = IID) -> Decision:
    return Decision(
        Action.STOP_INSTANCE,
        Target(key=f"{REGION}/{kind}/{rid}", kind=kind, region=REGION, id=rid, project="vision"),
        "GPU under 5% for 60 minutes",
        T0,
        usd_per_hour_saved=Decimal("1.006"),
        grace=timedelta(hours=1),
    )


def instance(**extra: Any) -> dict[str, Any]:
    return {
        "Reservations": [
            {
                "Instances": [
                    {
                        "InstanceId": IID,
                        "State": {"Code": 16, "Name": "running"},
                        "Tags": [{"Key": Tags.PROJECT, "Value": "vision"}],
                        **extra,
                    }
                ]
            }
        ]
    }


def stubbed() -> tuple[Ec2InstanceActuator, Stubber]:
    client = boto3.client("ec2", region_name=REGION)
    return Ec2InstanceActuator(OneClient(client)), Stubber(client)


def test_does_not_stop_a_one_time_spot_instance_and_says_why() -> None:
    # GIVEN a running spot instance of a one-time spot request
    actuator, stub = stubbed()
    stub.add_response(
        "describe_instances", instance(InstanceLifecycle="spot", SpotInstanceRequestId="sir-1")
    )
    stub.add_response(
        "describe_spot_instance_requests",
        {
            "SpotInstanceRequests": [
                {"SpotInstanceRequestId": "sir-1", "Type": "one-time", "InstanceId": IID}
            ]
        },
        {"SpotInstanceRequestIds": ["sir-1"]},
    )
    # WHEN the actuator is asked to stop it (no StopInstances, let alone Terminate, is stubbed:
    # the Stubber fails on any call not queued)
    with stub:
        assert decision().target.key in actuator.inspect([decision().target])
        result = actuator.apply(decision())
        stub.assert_no_pending_responses()
    # THEN it is a notice, not an action
    assert isinstance(result, ApplyResult) and result.acted is False
    assert "one-time spot" in result.detail and "never terminates" in result.detail


def test_stops_a_persistent_spot_instance() -> None:
    actuator, stub = stubbed()
    stub.add_response(
        "describe_instances", instance(InstanceLifecycle="spot", SpotInstanceRequestId="sir-2")
    )
    stub.add_response(
        "describe_spot_instance_requests",
        {"SpotInstanceRequests": [{"SpotInstanceRequestId": "sir-2", "Type": "persistent"}]},
    )
    stub.add_response(
        "stop_instances",
        {
            "StoppingInstances": [
                {"InstanceId": IID, "PreviousState": {"Code": 16, "Name": "running"}}
            ]
        },
        {"InstanceIds": [IID]},
    )
    with stub:
        actuator.inspect([decision().target])
        assert actuator.apply(decision()) == f"stopped {IID} (was running)"


def test_ec2s_refusal_to_stop_a_spot_instance_of_unknown_request_is_a_notice() -> None:
    # GIVEN a spot instance whose request EC2 no longer lists, and EC2 refusing the stop
    actuator, stub = stubbed()
    stub.add_response(
        "describe_instances", instance(InstanceLifecycle="spot", SpotInstanceRequestId="sir-old")
    )
    stub.add_client_error(
        "describe_spot_instance_requests", "InvalidSpotInstanceRequestID.NotFound", "gone"
    )
    stub.add_client_error(
        "stop_instances",
        "UnsupportedOperation",
        f"You can't stop the Spot Instance '{IID}' because it is associated with a one-time Spot Instance request.",
    )
    with stub:
        actuator.inspect([decision().target])
        result = actuator.apply(decision())
    assert isinstance(result, ApplyResult) and not result.acted


def test_executor_records_a_notice_only_outcome_that_saves_nothing() -> None:
    # GIVEN a warned resource whose actuator can only give notice
    class NoticeOnly(InMemoryActuator):
        def apply(self, decision: Decision) -> ApplyResult:  # type: ignore[override]
            self.calls.append(("apply", decision.target.id))
            return ApplyResult("cannot be stopped: terminate it yourself or exempt it", acted=False)

    actuator = NoticeOnly("ec2-instance", {IID: FakeResource("running", {Tags.PROJECT: "vision"})})
    ledger, sent = InMemoryLedger(), []
    executor = Executor(
        [actuator], ledger, RecordingNotifier(sent), ExecutorSettings("acct", dry_run=False)
    )
    executor.run([decision()], T0)
    # WHEN the grace period is over
    report = executor.run([decision()], T0 + timedelta(hours=2))
    # THEN the outcome is notice-only, no saving is claimed, the owner is told it could not
    # be stopped, the audit says so, and the warning tag is cleared
    (o,) = report.outcomes
    assert o.step is Step.NOTICE_ONLY and o.error is None
    assert report.saved_usd_per_month(Step.ACTED) == 0
    assert sent[-1].title.startswith("CostGuard could not stop")
    trail = ledger.audit_trail("acct", "2026-11")
    assert [e.outcome for e in trail][-1] == "notice-only"
    assert Tags.ACTION_AFTER not in actuator.resources[IID].tags
