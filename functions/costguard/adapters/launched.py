"""One launched resource, described on its own: what the on-launch check reads.

A launch event names one resource; this reads it in one or two calls, never a scan:

- an EC2 instance: ``DescribeInstances`` of its id (and ``DescribeInstanceTypes`` once per
  type and warm container); an EKS node whose instance carries no project, its node group's
  tags (``DescribeNodegroup``), and its cluster's only when the node group has none;
- a SageMaker notebook or training job: its ``Describe*`` and its tags (``ListTags``);
- a SageMaker endpoint: ``DescribeEndpoint``, its config, and its tags.

A resource that no longer exists is None (the event was late, or redelivered): no harm.
Who launched it is read, best effort, from CloudTrail's event history: one
``LookupEvents`` call with no retries (the API allows two calls a second per account and
region; a burst of launches must not turn into a storm of retries), and an answer only
once CloudTrail has recorded the call, typically some minutes after it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.config import Config

from costguard.adapters.aws import reading
from costguard.adapters.ec2 import (
    INSTANCE_TYPES,
    Ec2SpotPrices,
    InstanceTypeCache,
    instance_resource,
    is_unknown,
    unknown_type_finding,
)
from costguard.adapters.sagemaker import (
    TagReader,
    endpoint_variants,
    training_job_resource,
)
from costguard.domain.launch_events import identity_of
from costguard.domain.models import Lifecycle, Resource, ResourceKind
from costguard.domain.tags import Tags
from costguard.iam import Permission
from costguard.ports import Described, SourceError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from decimal import Decimal

    from costguard.adapters.aws import ClientFactory
    from costguard.domain.pricing import SpotKey

#: The calls that mean "no such resource" (gone since the event, or never was).
_GONE = frozenset(
    {
        "InvalidInstanceID.NotFound",
        "InvalidInstanceID.Malformed",
        "ResourceNotFound",
        "ResourceNotFoundException",
    }
)
#: SageMaker answers a missing notebook, endpoint or training job with a ValidationException.
_SAGEMAKER_GONE = frozenset({"ValidationException", *_GONE})
#: The calls whose CloudTrail record names who launched a resource.
LAUNCH_CALLS = frozenset({"RunInstances", "StartInstances"})
#: One quick try, no retries: the answer is a nicety, the alert is not held for it.
#: (``total_max_attempts``: botocore reads a client's ``max_attempts`` as retries, so
#: ``max_attempts=1`` made two attempts of every throttled lookup.)
LOOKUP_CONFIG = Config(
    retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=2, read_timeout=3
)

READS = (
    Permission(
        ("ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeSpotPriceHistory"),
        "describe the one instance a launch event names, its type, and its spot price; EC2 "
        "Describe* calls have no resource-level permissions",
    ),
    Permission(
        ("eks:DescribeNodegroup", "eks:DescribeCluster"),
        "read the tags of a launched node's node group (and cluster) to find its project",
        resources=(
            "arn:{partition}:eks:*:{account}:cluster/*",
            "arn:{partition}:eks:*:{account}:nodegroup/*",
        ),
    ),
    Permission(
        (
            "sagemaker:DescribeNotebookInstance",
            "sagemaker:DescribeEndpoint",
            "sagemaker:DescribeEndpointConfig",
            "sagemaker:DescribeTrainingJob",
            "sagemaker:ListTags",
        ),
        "describe the one notebook, endpoint or training job a launch event names, and its tags",
        resources=("arn:{partition}:sagemaker:*:{account}:*",),
    ),
    Permission(
        ("cloudtrail:LookupEvents",),
        "name who launched an instance, when CloudTrail has recorded the call (best effort, "
        "one call, no retries); LookupEvents has no resource-level permissions",
    ),
)


class LaunchedResources:
    """Describes one resource in the account of ``clients``."""

    def __init__(
        self,
        clients: ClientFactory,
        tags: TagReader,
        types: InstanceTypeCache = INSTANCE_TYPES,
    ) -> None:
        self._clients = clients
        self._tags = tags
        self._types = types
        self._trails: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def account(self) -> str:
        return self._clients.account

    def describe(self, kind: ResourceKind, region: str, resource_id: str) -> Described | None:
        """The resource as it is now; None when it no longer exists."""
        try:
            if kind is ResourceKind.EC2_INSTANCE:
                return self._instance(region, resource_id)
            if kind is ResourceKind.SAGEMAKER_NOTEBOOK:
                return self._notebook(region, resource_id)
            if kind is ResourceKind.SAGEMAKER_TRAINING_JOB:
                return self._training_job(region, resource_id)
            if kind is ResourceKind.SAGEMAKER_ENDPOINT:
                return self._endpoint(region, resource_id)
        except SourceError as exc:
            gone = _GONE if exc.service == "ec2" else _SAGEMAKER_GONE
            if exc.code in gone and exc.service in {"ec2", "sagemaker"}:
                return None
            raise
        raise ValueError(f"not a kind a launch event names: {kind}")

    def spot_prices(
        self, region: str, instance_types: Sequence[str], now: datetime
    ) -> Mapping[SpotKey, Decimal]:
        return Ec2SpotPrices(self._clients).latest(region, instance_types, now)

    def launcher(self, resource: Resource, now: datetime) -> str | None:
        """Who made the call that launched an instance, if CloudTrail has it yet (else None)."""
        if resource.kind is not ResourceKind.EC2_INSTANCE:
            return None
        since = (resource.launched_at or now) - timedelta(minutes=5)
        try:
            answer = self._trail(resource.region).lookup_events(
                LookupAttributes=[{"AttributeKey": "ResourceName", "AttributeValue": resource.id}],
                StartTime=since,
                EndTime=now + timedelta(minutes=5),
                MaxResults=10,
            )
        except Exception:  # a nicety: throttled, denied or slow is "not known yet"
            return None
        for event in answer.get("Events") or []:
            if event.get("EventName") not in LAUNCH_CALLS:
                continue
            try:
                record = json.loads(event.get("CloudTrailEvent") or "{}")
            except ValueError:
                record = {}
            who = identity_of(record) if isinstance(record, dict) else None
            if who or event.get("Username"):
                return who or str(event["Username"])[:200]
        return None

    # -- one resource of each kind ----------------------------------------------------------

    def _trail(self, region: str) -> Any:
        with self._lock:
            if region not in self._trails:
                self._trails[region] = self._clients.session.client(
                    "cloudtrail", region_name=region, config=LOOKUP_CONFIG
                )
            return self._trails[region]

    def _instance(self, region: str, instance_id: str) -> Described | None:
        ec2 = self._clients.ec2(region)
        with reading("ec2", region, "DescribeInstances"):
            answer = ec2.describe_instances(InstanceIds=[instance_id])
        found = [i for r in answer.get("Reservations", []) for i in r.get("Instances", [])]
        if not found:
            return None
        inst = found[0]
        itype = str(inst["InstanceType"])
        info = self._types.resolve(ec2, region, [itype])[itype]
        if info is None:
            return Described(why=f"{itype} carries no accelerator")
        res = instance_resource(inst, region, self.account, info)
        findings = (unknown_type_finding(res),) if is_unknown(info) else ()
        return Described((res,), self._eks_parents(res), findings)

    def _eks_parents(self, res: Resource) -> tuple[Resource, ...]:
        """A node's node group (and, if that has no project, its cluster): what the scan's
        attribution inherits a project from. Untagged nodes only. One that is gone is no
        parent; one that cannot be read (denied, throttled) raises: judged without it, the
        node would be paged as having no project."""
        if not (res.eks_cluster and res.eks_nodegroup) or any(
            k in res.tags for k in (Tags.PROJECT, *Tags.PROJECT_FALLBACKS)
        ):
            return ()
        eks = self._clients.eks(res.region)
        try:
            with reading("eks", res.region, "DescribeNodegroup"):
                ng = eks.describe_nodegroup(
                    clusterName=res.eks_cluster, nodegroupName=res.eks_nodegroup
                )["nodegroup"]
        except SourceError as exc:
            if exc.code in _GONE:
                return ()
            raise
        tags = dict(ng.get("tags") or {})
        group = Resource(
            id=f"{res.eks_cluster}/{res.eks_nodegroup}",
            kind=ResourceKind.EKS_NODEGROUP,
            region=res.region,
            account=self.account,
            tags=tags,
            lifecycle=Lifecycle.SPOT if ng.get("capacityType") == "SPOT" else Lifecycle.ON_DEMAND,
            name=res.eks_nodegroup,
            eks_cluster=res.eks_cluster,
            eks_nodegroup=res.eks_nodegroup,
        )
        if any(k in tags for k in (Tags.PROJECT, *Tags.PROJECT_FALLBACKS)):
            return (group,)
        try:
            with reading("eks", res.region, "DescribeCluster"):
                cluster = eks.describe_cluster(name=res.eks_cluster)["cluster"]
        except SourceError as exc:
            if exc.code in _GONE:
                return (group,)
            raise
        return (
            group,
            Resource(
                id=res.eks_cluster,
                kind=ResourceKind.EKS_CLUSTER,
                region=res.region,
                account=self.account,
                tags=dict(cluster.get("tags") or {}),
                name=res.eks_cluster,
                eks_cluster=res.eks_cluster,
            ),
        )

    def _tagged(self, region: str, arn: str, resources: Sequence[Resource]) -> tuple[Resource, ...]:
        tags = self._tags.tags(region, [arn]).get(arn, {})
        return tuple(replace(r, tags=tags, account=self.account) for r in resources)

    def _notebook(self, region: str, name: str) -> Described | None:
        sm = self._clients.sagemaker(region)
        with reading("sagemaker", region, "DescribeNotebookInstance"):
            nb = sm.describe_notebook_instance(NotebookInstanceName=name)
        res = Resource(
            id=str(nb["NotebookInstanceName"]),
            kind=ResourceKind.SAGEMAKER_NOTEBOOK,
            region=region,
            instance_type=nb.get("InstanceType"),
            # An InService notebook was last modified when it last started.
            launched_at=nb.get("LastModifiedTime") or nb.get("CreationTime"),
            state=str(nb.get("NotebookInstanceStatus", "")),
        )
        return Described(self._tagged(region, str(nb["NotebookInstanceArn"]), [res]))

    def _training_job(self, region: str, name: str) -> Described | None:
        sm = self._clients.sagemaker(region)
        with reading("sagemaker", region, "DescribeTrainingJob"):
            job = sm.describe_training_job(TrainingJobName=name)
        res = training_job_resource(job, region)
        return Described(self._tagged(region, str(job["TrainingJobArn"]), [res]))

    def _endpoint(self, region: str, name: str) -> Described | None:
        sm = self._clients.sagemaker(region)
        with reading("sagemaker", region, "DescribeEndpoint"):
            ep = sm.describe_endpoint(EndpointName=name)
        with reading("sagemaker", region, "DescribeEndpointConfig"):
            config = sm.describe_endpoint_config(EndpointConfigName=ep["EndpointConfigName"])
        variants = endpoint_variants(ep, config, region)
        if not variants:
            return Described(why="its variants are serverless: billed per request, not per hour")
        return Described(self._tagged(region, str(ep["EndpointArn"]), variants))
