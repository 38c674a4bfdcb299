"""Inventory as the domain sees it: what runs, where, and what it is tagged with."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple


class ResourceKind(StrEnum):
    EC2_INSTANCE = "ec2-instance"
    EBS_VOLUME = "ebs-volume"
    EBS_SNAPSHOT = "ebs-snapshot"
    S3_BUCKET = "s3-bucket"
    EKS_CLUSTER = "eks-cluster"
    EKS_NODEGROUP = "eks-nodegroup"
    SAGEMAKER_NOTEBOOK = "sagemaker-notebook"
    SAGEMAKER_ENDPOINT = "sagemaker-endpoint"
    SAGEMAKER_TRAINING_JOB = "sagemaker-training-job"
    SAGEMAKER_STUDIO_APP = "sagemaker-studio-app"


class Lifecycle(StrEnum):
    ON_DEMAND = "on-demand"
    SPOT = "spot"


class AcceleratorKind(StrEnum):
    GPU = "gpu"
    TRAINIUM = "trainium"
    INFERENTIA = "inferentia"
    GAUDI = "gaudi"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Accelerator:
    """What an instance type carries, as `DescribeInstanceTypes` reports it."""

    kind: AcceleratorKind
    name: str
    count: int
    memory_mib: int = 0
    manufacturer: str = ""


@dataclass(frozen=True, slots=True)
class Resource:
    """One thing that costs money, as found by an inventory source.

    ``id`` is unique within ``account``, ``region`` and ``kind``.
    """

    id: str
    kind: ResourceKind
    region: str
    #: The AWS account (12 digits); empty when unknown (a local scan without a ledger).
    account: str = ""
    tags: Mapping[str, str] = field(default_factory=dict, hash=False)
    instance_type: str | None = None
    count: int = 1
    lifecycle: Lifecycle = Lifecycle.ON_DEMAND
    availability_zone: str | None = None
    launched_at: datetime | None = None
    #: SageMaker endpoints: since when the current configuration (instance type and
    #: count) has been in place: the later of the endpoint's last update and its endpoint
    #: config's creation. None when unknown. ``launched_at`` stays the creation: an
    #: update is not a restart, and the endpoint has billed since it was created.
    config_since: datetime | None = None
    state: str = ""
    name: str | None = None
    accelerator: Accelerator | None = None
    #: EBS only. A snapshot's ``size_gib`` is the size it is charged at (see
    #: :mod:`costguard.domain.storage`); its ``volume_type`` is None.
    volume_type: str | None = None
    size_gib: int = 0
    attached_to: str | None = None
    #: EBS volumes: provisioned IOPS and throughput (MiB/s); 0 where the type has none.
    iops: int = 0
    throughput_mibps: int = 0
    #: EBS snapshots: ``standard`` or ``archive``.
    storage_tier: str | None = None
    #: S3 buckets: bytes stored per CloudWatch storage type (``StandardStorage``, ...),
    #: sorted, from the day's ``BucketSizeBytes`` metric.
    stored_bytes: tuple[tuple[str, int], ...] = ()
    #: EKS: the cluster (and node group) a resource belongs to.
    eks_cluster: str | None = None
    eks_nodegroup: str | None = None
    #: EKS clusters: the Kubernetes version, which decides standard or extended support.
    version: str | None = None
    #: EKS node groups: scaling config.
    desired_size: int = 0
    #: SageMaker endpoint variants served asynchronously (``AsyncInferenceConfig``): billed
    #: by the instance like real-time ones, scaling to zero, counted by no ``Invocations``.
    asynchronous: bool = False
    #: ``account/region/kind/id`` (``region/kind/id`` when the account is unknown): unique
    #: across accounts, so an organization's resources share one ledger without migration.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", resource_key(self.account, self.region, self.kind, self.id))

    @property
    def billable(self) -> bool:
        """Node groups are not priced: their EC2 instances are the priced units."""
        return self.kind is not _NODEGROUP

    @property
    def category(self) -> str:
        """``storage`` (EBS volumes and snapshots, S3 buckets) or ``compute``: how the
        scan JSON and the report label a resource's share of a project's spend."""
        return STORAGE if self.kind in STORAGE_KINDS else COMPUTE


_NODEGROUP = ResourceKind.EKS_NODEGROUP
STORAGE = "storage"
COMPUTE = "compute"
#: The kinds whose spend is storage: billed per GB-month, not per instance-hour.
STORAGE_KINDS = frozenset(
    {ResourceKind.EBS_VOLUME, ResourceKind.EBS_SNAPSHOT, ResourceKind.S3_BUCKET}
)


ACCOUNT_ID = re.compile(r"[0-9]{12}")


class KeyParts(NamedTuple):
    account: str
    region: str
    kind: str
    id: str


def resource_key(account: str, region: str, kind: str, rid: str) -> str:
    base = f"{region}/{kind}/{rid}"
    return f"{account}/{base}" if account else base


def parse_key(key: str) -> KeyParts | None:
    """Split a resource key, with or without its account; None if it is not one.

    A region is never twelve digits, so the first segment tells the two forms apart.
    """
    first, _, rest = key.partition("/")
    account = ""
    if ACCOUNT_ID.fullmatch(first):
        account, key = first, rest
    parts = key.split("/", 2)
    if len(parts) != 3 or not all(parts):
        return None
    return KeyParts(account, parts[0], parts[1], parts[2])


def with_account(key: str, account: str) -> str:
    """A key from before keys carried the account, given the account it belongs to."""
    parts = parse_key(key)
    if parts is None or parts.account or not account:
        return key
    return resource_key(account, parts.region, parts.kind, parts.id)


def without_account(key: str) -> str:
    """The key as it was written before keys carried the account."""
    parts = parse_key(key)
    if parts is None:
        return key
    return resource_key("", parts.region, parts.kind, parts.id)
