"""A toy policy, for tests only: it proves a guard needs only a policy and an actuator.

It stops every running EC2 instance tagged ``costguard:toy=idle``; everything else it
judges busy (``Action.NONE``), which is how a warning gets withdrawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from costguard.adapters.aws import tags_of
from costguard.domain.decisions import Action, Decision, Target
from costguard.domain.tags import Tags

TOY = "costguard:toy"
SCOPE = "123456789012"
GRACE = timedelta(hours=1)


def toy_policy(session: Any, now: datetime) -> list[Decision]:
    """Stop every instance tagged costguard:toy=idle. A test double, never shipped."""
    ec2 = session.client("ec2", region_name="us-east-1")
    decisions = []
    for reservation in ec2.describe_instances()["Reservations"]:
        for i in reservation["Instances"]:
            if i["State"]["Name"] != "running":
                continue
            tags = tags_of(i.get("Tags"))
            target = Target(
                key=f"us-east-1/ec2-instance/{i['InstanceId']}",
                kind="ec2-instance",
                region="us-east-1",
                id=i["InstanceId"],
                account=SCOPE,
                project=tags.get(Tags.PROJECT),
                owners=("alice@example.com",),
                tags_seen=tags,
            )
            idle = tags.get(TOY) == "idle"
            decisions.append(
                Decision(
                    Action.STOP_INSTANCE if idle else Action.NONE,
                    target,
                    "toy: tagged idle" if idle else "toy: busy",
                    now,
                    evidence={"toy": tags.get(TOY, "")},
                    usd_per_hour_saved=Decimal("1.006"),
                    grace=GRACE,
                )
            )
    return decisions


@dataclass
class ToyPolicy:
    session: Any

    def decide(self, now: datetime) -> Sequence[Decision]:
        return toy_policy(self.session, now)


def _build_toy(_settings: Any, clients: Any, _context: Any) -> Any:
    from costguard.adapters.ec2_actuator import Ec2InstanceActuator
    from costguard.services.guard import Guard

    return Guard("toy", ToyPolicy(clients.session), [Ec2InstanceActuator(clients)])


def toy_spec() -> Any:
    """A test-only guard declaration: the stack tests synthesize it beside the shipped ones."""
    from costguard.adapters.ec2_actuator import Ec2InstanceActuator
    from costguard.guards import GuardSpec

    return GuardSpec(
        name="toy",
        construct_id="Toy",
        description="test-only: stops instances tagged costguard:toy=idle",
        build=_build_toy,
        actuators=(Ec2InstanceActuator,),
        every_minutes=60,
    )
