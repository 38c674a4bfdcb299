"""Inventory as the domain sees it: what runs, where, and what it is tagged with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class ResourceKind(StrEnum):
    EC2_INSTANCE = "ec2-instance"
    EBS_VOLUME = "ebs-volume"
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

    ``id`` is unique within ``region`` and ``kind``.
    """

    id: str
    kind: ResourceKind
    region: str
    tags: Mapping[str, str] = field(default_factory=dict, hash=False)
    instance_type: str | None = None
    count: int = 1
    lifecycle: Lifecycle = Lifecycle.ON_DEMAND
    availability_zone: str | None = None
    launched_at: datetime | None = None
    state: str = ""
    name: str | None = None
    accelerator: Accelerator | None = None
    #: EBS only.
    volume_type: str | None = None
    size_gib: int = 0
    attached_to: str | None = None
    #: EKS: the cluster (and node group) a resource belongs to.
    eks_cluster: str | None = None
    eks_nodegroup: str | None = None
    #: EKS clusters: the Kubernetes version, which decides standard or extended support.
    version: str | None = None
    #: EKS node groups: scaling config.
    desired_size: int = 0
    #: ``region/kind/id``: unique across a scan; what the ledger keys observations by.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.region}/{self.kind.value}/{self.id}")

    @property
    def billable(self) -> bool:
        """Node groups are not priced: their EC2 instances are the priced units."""
        return self.kind is not _NODEGROUP


_NODEGROUP = ResourceKind.EKS_NODEGROUP
