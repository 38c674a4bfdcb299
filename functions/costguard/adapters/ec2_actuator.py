"""Stop EC2 instances, through the executor only. Every call is tag-conditioned in IAM.

Stopping (not terminating) keeps the instance and its EBS volumes: the owner starts
it again when needed. Local NVMe instance store (p4d, p5, g5 ...) is wiped by a stop;
the warning says so, which is one reason every stop is warned first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from costguard.adapters.aws import ClientFor, reading, tags_of
from costguard.domain.decisions import Decision, Observed, Target
from costguard.domain.models import ResourceKind
from costguard.iam import (
    IN_SCOPE_NOT_EXEMPT,
    ONLY_THE_WARNING_TAG,
    REMOVE_ONLY_THE_WARNING_TAG,
    Permission,
)

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

#: States in which there is nothing left to stop.
SETTLED = frozenset({"stopping", "stopped", "shutting-down", "terminated"})


class Ec2InstanceActuator:
    kind = ResourceKind.EC2_INSTANCE.value
    permissions = (
        Permission(
            ("ec2:DescribeInstances",),
            "read the instance's state and tags just before acting; Describe* has no "
            "resource-level permissions",
        ),
        Permission(
            ("ec2:StopInstances",),
            "stop an idle instance after its owner was warned; only instances tagged "
            "with a project and not permanently exempt",
            resources=("arn:{partition}:ec2:*:{account}:instance/*",),
            conditions=IN_SCOPE_NOT_EXEMPT,
        ),
        Permission(
            ("ec2:CreateTags",),
            "write the costguard:action-after warning tag, and no other tag, on instances "
            "tagged with a project",
            resources=("arn:{partition}:ec2:*:{account}:instance/*",),
            conditions=ONLY_THE_WARNING_TAG,
        ),
        Permission(
            ("ec2:DeleteTags",),
            "remove the costguard:action-after warning tag, and no other tag, from any "
            "instance: a warning must be withdrawable after the project tag is removed",
            resources=("arn:{partition}:ec2:*:{account}:instance/*",),
            conditions=REMOVE_ONLY_THE_WARNING_TAG,
        ),
    )
    opt_in_tags: tuple[str, ...] = ()

    def __init__(self, clients: ClientFor) -> None:
        self._clients = clients

    def _ec2(self, region: str) -> EC2Client:
        return self._clients.ec2(region)

    def inspect(self, target: Target) -> Observed | None:
        with reading("ec2", target.region, "DescribeInstances"):
            pages = self._ec2(target.region).describe_instances(
                Filters=[{"Name": "instance-id", "Values": [target.id]}]
            )
        for reservation in pages.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                state = str(instance.get("State", {}).get("Name", "unknown"))
                return Observed(
                    state,
                    tags_of(instance.get("Tags")),
                    settled=state in SETTLED,
                )
        return None

    def mark(self, target: Target, key: str, value: str) -> None:
        with reading("ec2", target.region, "CreateTags"):
            self._ec2(target.region).create_tags(
                Resources=[target.id], Tags=[{"Key": key, "Value": value}]
            )

    def unmark(self, target: Target, key: str) -> None:
        with reading("ec2", target.region, "DeleteTags"):
            self._ec2(target.region).delete_tags(Resources=[target.id], Tags=[{"Key": key}])

    def apply(self, decision: Decision) -> str:
        t = decision.target
        with reading("ec2", t.region, "StopInstances"):
            result = self._ec2(t.region).stop_instances(InstanceIds=[t.id])
        changes = result.get("StoppingInstances", [])
        previous = changes[0].get("PreviousState", {}).get("Name", "?") if changes else "?"
        return f"stopped {t.id} (was {previous})"
