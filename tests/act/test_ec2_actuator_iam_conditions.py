"""The executor and the EC2 actuator on moto, with the actuator's IAM *conditions* enforced.

moto checks actions, not conditions (FIELD-NOTES), so this file evaluates the conditions
that ``Ec2InstanceActuator.permissions`` declares (the exact statements the stack puts on
the actuator role) against the instance's tags at the moment of each call, and refuses the
call as AWS would (``UnauthorizedOperation``). A call the code makes that its own role
refuses is a permanent failure: every run fails the same way, forever.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.aws import ClientFactory
from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.adapters.memory import InMemoryLedger
from costguard.domain.decisions import Action, Decision, Step, Target
from costguard.domain.tags import Tags
from costguard.iam import Permission
from costguard.services.executor import Executor, ExecutorSettings
from tests.support.ec2 import run_instance
from tests.support.ec2_conditions import enforce_ec2_conditions
from tests.support.fakes import RecordingNotifier

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
GRACE = timedelta(hours=24)
SCOPE = "123456789012"
REGION = "us-east-1"


def enforce_conditions(session: Any, permissions: Sequence[Permission]) -> list[str]:
    """Refuse, on ``session``'s EC2 clients, every call the declared statements refuse."""
    return enforce_ec2_conditions(session, permissions, region=REGION, account=SCOPE)


@pytest.fixture
def ec2(aws: Any) -> Any:
    return aws.client("ec2", region_name=REGION)


def launch(ec2: Any, tags: Mapping[str, str]) -> str:
    return run_instance(ec2, tags)


def decision(iid: str, now: datetime, action: Action = Action.STOP_INSTANCE) -> Decision:
    return Decision(
        action,
        Target(
            key=f"{REGION}/ec2-instance/{iid}",
            kind="ec2-instance",
            region=REGION,
            id=iid,
            account=SCOPE,
            project="vision",
            owners=("alice@example.com",),
        ),
        "GPU under 5% for 60 minutes" if action is not Action.NONE else "GPU at 40%",
        now,
        usd_per_hour_saved=Decimal("1.006"),
        grace=GRACE,
    )


class Rig:
    """An enforcing executor whose EC2 calls go through the role's conditions."""

    def __init__(self, opt_in_tags: tuple[str, ...] = ()) -> None:
        import boto3

        self.session = boto3.Session()
        self.refused = enforce_conditions(self.session, Ec2InstanceActuator.permissions)
        self.ledger = InMemoryLedger()
        self.sent: list[Any] = []
        self.executor = Executor(
            [Ec2InstanceActuator(ClientFactory(self.session))],
            self.ledger,
            RecordingNotifier(self.sent),
            ExecutorSettings(SCOPE, dry_run=False, opt_in_tags=opt_in_tags),
        )

    def run(self, d: Decision, now: datetime) -> tuple[list[Step], list[str | None]]:
        report = self.executor.run([d], now)
        return [o.step for o in report.outcomes], [o.error for o in report.outcomes]


def test_taking_a_warned_instance_out_of_scope_does_not_fail_every_run_forever(ec2: Any) -> None:
    # GIVEN an idle instance of project vision that CostGuard warned about
    iid = launch(ec2, {Tags.PROJECT: "vision"})
    rig = Rig()
    assert rig.run(decision(iid, T0), T0)[0] == [Step.WARNED]
    # WHEN its owner takes it out of CostGuard's scope by removing costguard:project
    # (the README: in scope means "a project tag, or opted in")
    ec2.delete_tags(Resources=[iid], Tags=[{"Key": Tags.PROJECT}])
    # THEN the following runs withdraw the warning or leave it, but do not fail on every
    # run: the DeleteTags of the withdrawal is refused by the role's own condition
    # (Null aws:ResourceTag/costguard:project = false), so each run fails again
    errors = []
    for n in range(1, 4):
        _steps, errs = rig.run(
            decision(iid, T0 + n * timedelta(minutes=15)), T0 + n * timedelta(minutes=15)
        )
        errors += [e for e in errs if e]
    assert not errors, f"{len(errors)} failed runs in a row: {errors[0]}; refused: {rig.refused}"


def test_an_opted_in_resource_without_a_project_is_not_warned_with_a_call_its_role_refuses(
    ec2: Any,
) -> None:
    # GIVEN a guard with an opt-in tag (ExecutorSettings.opt_in_tags, Guard.opt_in_tags:
    # "Tag keys whose presence puts a resource without a project in scope"), and an idle
    # instance that opted in with it but has no costguard:project
    iid = launch(ec2, {"costguard:ttl": "48h"})
    rig = Rig(opt_in_tags=("costguard:ttl",))
    # WHEN the executor judges it, run after run
    outcomes = [rig.run(decision(iid, T0 + n * GRACE), T0 + n * GRACE) for n in range(3)]
    # THEN it either handles it within its role (warn, then stop) or leaves it alone;
    # it never fails every run on a CreateTags its own role refuses
    errors = [e for _, errs in outcomes for e in errs if e]
    assert not errors, f"{len(errors)} failed runs in a row: {errors[0]}; refused: {rig.refused}"
