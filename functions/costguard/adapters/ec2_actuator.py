"""Stop EC2 instances, through the executor only. Every call is tag-conditioned in IAM.

Stopping (not terminating) keeps the instance and its EBS volumes: the owner starts
it again when needed. Local NVMe instance store (p4d, p5, g5 ...) is wiped by a stop;
the warning says so, which is one reason every stop is warned first.

A spot instance launched by a *one-time* spot request cannot be stopped (EC2 refuses
with ``UnsupportedOperation``), nor can an instance whose root device is instance store
(an old AMI type), and CostGuard never terminates: the owner gets a notice instead,
recorded as ``notice-only`` and never counted as a saving.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from costguard.adapters.aws import ClientFor, chunks, reading, tags_of
from costguard.domain.decisions import ApplyResult, Decision, Observed, Target
from costguard.domain.models import ResourceKind
from costguard.iam import (
    IN_SCOPE_NOT_EXEMPT,
    Permission,
    warning_tag_permissions,
)
from costguard.ports import SourceError

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import InstanceTypeDef

#: States in which there is nothing left to stop.
SETTLED = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
#: Instance ids in one ``DescribeInstances`` (the API takes 1,000 without paging).
DESCRIBE_IDS_PER_CALL = 1000
#: What EC2 answers when an id in ``InstanceIds`` does not exist (or is malformed).
MISSING_IDS = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})


def one_time_spot_notice(instance_id: str) -> str:
    return (
        f"{instance_id} is a one-time spot instance, which EC2 cannot stop, and CostGuard "
        "never terminates: it is still running. Terminate it yourself if you no longer "
        "need it, or exempt it"
    )


def instance_store_root_notice(instance_id: str) -> str:
    return (
        f"{instance_id} boots from instance store, which EC2 cannot stop, and CostGuard "
        "never terminates: it is still running. Terminate it yourself if you no longer "
        "need it, or exempt it"
    )


class Ec2InstanceActuator:
    kind = ResourceKind.EC2_INSTANCE.value
    permissions = (
        Permission(
            ("ec2:DescribeInstances",),
            "read the instances' state and tags just before acting (1,000 a call); "
            "Describe* has no resource-level permissions",
        ),
        Permission(
            ("ec2:DescribeSpotInstanceRequests",),
            "tell a one-time spot instance (which cannot be stopped: its owner gets a notice "
            "instead) from a persistent one before stopping; Describe* has no resource-level "
            "permissions",
        ),
        Permission(
            ("ec2:StopInstances",),
            "stop an idle instance after its owner was warned; only instances tagged "
            "with a project and not permanently exempt",
            resources=("arn:{partition}:ec2:*:{account}:instance/*",),
            conditions=IN_SCOPE_NOT_EXEMPT,
        ),
        *warning_tag_permissions(
            "ec2", "instances", ("arn:{partition}:ec2:*:{account}:instance/*",)
        ),
    )
    opt_in_tags: tuple[str, ...] = ()

    def __init__(self, clients: ClientFor) -> None:
        self._clients = clients
        #: What ``inspect`` found, by instance id: ``apply`` follows it in the same run.
        self._seen: dict[str, InstanceTypeDef] = {}

    def _ec2(self, region: str) -> EC2Client:
        return self._clients.ec2(region)

    def inspect(self, targets: Sequence[Target]) -> Mapping[str, Observed]:
        """One ``DescribeInstances`` per region and 1,000 instances.

        ``InstanceIds`` (no page limit with it) refuses the whole call when one id no
        longer exists: the batch is then split in two until that id stands alone, so a
        vanished instance costs log2 extra calls, never one call per instance.
        """
        found: dict[str, Observed] = {}
        by_region: dict[str, dict[str, Target]] = {}
        for t in targets:
            by_region.setdefault(t.region, {})[t.id] = t
        for region, wanted in by_region.items():
            for batch in chunks(sorted(wanted), DESCRIBE_IDS_PER_CALL):
                for instance in self._describe(region, batch):
                    iid = str(instance.get("InstanceId"))
                    target = wanted.get(iid)
                    if target is None:
                        continue
                    state = str(instance.get("State", {}).get("Name", "unknown"))
                    self._seen[iid] = instance
                    found[target.key] = Observed(
                        state, tags_of(instance.get("Tags")), settled=state in SETTLED
                    )
        return found

    def _describe(self, region: str, ids: list[str]) -> list[InstanceTypeDef]:
        try:
            with reading("ec2", region, "DescribeInstances"):
                answer = self._ec2(region).describe_instances(InstanceIds=ids)
        except SourceError as exc:
            if exc.code not in MISSING_IDS:
                raise
            if len(ids) == 1:
                return []  # gone
            middle = len(ids) // 2
            return self._describe(region, ids[:middle]) + self._describe(region, ids[middle:])
        return [i for r in answer.get("Reservations", []) for i in r.get("Instances", [])]

    def mark(self, target: Target, key: str, value: str) -> None:
        with reading("ec2", target.region, "CreateTags"):
            self._ec2(target.region).create_tags(
                Resources=[target.id], Tags=[{"Key": key, "Value": value}]
            )

    def unmark(self, target: Target, key: str) -> None:
        with reading("ec2", target.region, "DeleteTags"):
            self._ec2(target.region).delete_tags(Resources=[target.id], Tags=[{"Key": key}])

    def apply(self, decision: Decision) -> str | ApplyResult:
        t = decision.target
        if self._instance_store_root(t):
            return ApplyResult(instance_store_root_notice(t.id), acted=False)
        if self._one_time_spot(t):
            return ApplyResult(one_time_spot_notice(t.id), acted=False)
        try:
            with reading("ec2", t.region, "StopInstances"):
                result = self._ec2(t.region).stop_instances(InstanceIds=[t.id])
        except SourceError as exc:
            # The backstop, should the request type be unknown (a request EC2 no longer
            # lists): EC2's own refusal to stop a one-time spot instance is a notice too.
            if exc.code == "UnsupportedOperation" and "spot" in exc.detail.lower():
                return ApplyResult(one_time_spot_notice(t.id), acted=False)
            if exc.code == "UnsupportedOperation" and "instance store" in exc.detail.lower():
                return ApplyResult(instance_store_root_notice(t.id), acted=False)
            raise
        changes = result.get("StoppingInstances", [])
        previous = changes[0].get("PreviousState", {}).get("Name", "?") if changes else "?"
        return f"stopped {t.id} (was {previous})"

    def _instance(self, t: Target) -> InstanceTypeDef | None:
        instance = self._seen.get(t.id)
        if instance is None:
            instance = next(iter(self._describe(t.region, [t.id])), None)
            if instance is not None:
                self._seen[t.id] = instance
        return instance

    def _instance_store_root(self, t: Target) -> bool:
        """True for an instance whose root device is instance store: it cannot be stopped."""
        instance = self._instance(t)
        return instance is not None and instance.get("RootDeviceType") == "instance-store"

    def _one_time_spot(self, t: Target) -> bool:
        """True for a spot instance whose request is one-time (which EC2 cannot stop).

        A spot instance with no request id, or whose request EC2 no longer lists, is
        tried: EC2's refusal is caught in ``apply``.
        """
        instance = self._instance(t)
        if instance is None or instance.get("InstanceLifecycle") != "spot":
            return False
        request_id = instance.get("SpotInstanceRequestId")
        if not request_id:
            return False
        try:
            with reading("ec2", t.region, "DescribeSpotInstanceRequests"):
                requests = self._ec2(t.region).describe_spot_instance_requests(
                    SpotInstanceRequestIds=[request_id]
                )
        except SourceError as exc:
            if exc.code.startswith("InvalidSpotInstanceRequestID"):
                return False
            raise
        types = {r.get("Type") for r in requests.get("SpotInstanceRequests", [])}
        return "one-time" in types
