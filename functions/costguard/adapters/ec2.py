"""EC2: accelerator instances, their EBS volumes, project-tagged volumes and snapshots,
and spot prices.

Which types carry accelerators comes from ``DescribeInstanceTypes`` (GpuInfo,
NeuronInfo, InferenceAcceleratorInfo), never from name prefixes, so a new family
is recognised the day AWS launches it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from costguard.adapters.aws import ClientFor, chunks, reading, tags_of
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.models import (
    Accelerator,
    AcceleratorKind,
    Lifecycle,
    Resource,
    ResourceKind,
)
from costguard.domain.tags import Tags
from costguard.ports import Inventory, SourceError

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.literals import InstanceTypeType
    from mypy_boto3_ec2.type_defs import InstanceTypeInfoTypeDef

    from costguard.domain.pricing import SpotKey

#: DescribeInstanceTypes takes at most 100 types per call.
INSTANCE_TYPES_PER_CALL = 100
#: EC2 filters take at most 200 values.
FILTER_VALUES_PER_CALL = 199
_UNKNOWN = object()
GIB = 2**30


def accelerator_of(info: InstanceTypeInfoTypeDef) -> Accelerator | None:
    """Read the accelerators of one ``InstanceTypeInfo``; None for a plain CPU type."""
    gpu = info.get("GpuInfo") or {}
    for g in gpu.get("Gpus", []):
        manufacturer = str(g.get("Manufacturer", ""))
        name = str(g.get("Name", ""))
        kind = AcceleratorKind.GAUDI if "gaudi" in name.lower() else AcceleratorKind.GPU
        return Accelerator(
            kind, name, int(g.get("Count", 0)), int(gpu.get("TotalGpuMemoryInMiB", 0)), manufacturer
        )
    neuron = info.get("NeuronInfo") or {}
    for d in neuron.get("NeuronDevices", []):
        name = str(d.get("Name", ""))
        kind = (
            AcceleratorKind.TRAINIUM if "trainium" in name.lower() else AcceleratorKind.INFERENTIA
        )
        return Accelerator(
            kind,
            name,
            int(d.get("Count", 0)),
            int(neuron.get("TotalNeuronDeviceMemoryInMiB", 0)),
            "AWS",
        )
    inference = info.get("InferenceAcceleratorInfo") or {}
    for a in inference.get("Accelerators", []):
        return Accelerator(
            AcceleratorKind.INFERENTIA,
            str(a.get("Name", "")),
            int(a.get("Count", 0)),
            0,
            str(a.get("Manufacturer", "")),
        )
    return None


class InstanceTypeCache:
    """Accelerator info per instance type, fetched in batches once per run and region.

    An unknown type (``InvalidInstanceType``) is found by bisecting the batch, so a
    single bad name costs log2(100) extra calls rather than one call per type.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], Accelerator | object | None] = {}

    def resolve(
        self, ec2: EC2Client, region: str, types: Sequence[str]
    ) -> dict[str, Accelerator | object | None]:
        missing = sorted({t for t in types if (region, t) not in self._known})
        for batch in chunks(missing, INSTANCE_TYPES_PER_CALL):
            self._fetch(ec2, region, batch)
        return {t: self._known[(region, t)] for t in types}

    def _fetch(self, ec2: EC2Client, region: str, batch: list[str]) -> None:
        try:
            with reading("ec2", region, "DescribeInstanceTypes"):
                # The stubs list the types known when they were built; newer types are
                # valid at run time (and unknown ones are what the bisection finds).
                pages = ec2.get_paginator("describe_instance_types").paginate(
                    InstanceTypes=cast("list[InstanceTypeType]", batch)
                )
                found = {
                    str(info["InstanceType"]): accelerator_of(info)
                    for page in pages
                    for info in page.get("InstanceTypes", [])
                }
        except SourceError as exc:
            if exc.code == "InvalidInstanceType":
                if len(batch) == 1:
                    self._known[(region, batch[0])] = _UNKNOWN
                    return
                middle = len(batch) // 2
                self._fetch(ec2, region, batch[:middle])
                self._fetch(ec2, region, batch[middle:])
                return
            raise
        for itype in batch:
            self._known[(region, itype)] = found.get(itype, _UNKNOWN)


#: Accelerator info per instance type outlives one invocation: a warm Lambda asks once.
#: Shared by the scan, the idle-notebook guard and the Organization probe, which all judge
#: accelerators the same way.
INSTANCE_TYPES = InstanceTypeCache()


def instance_resource(
    inst: Any, region: str, account: str, info: Accelerator | object | None
) -> Resource:
    """One instance as DescribeInstances gives it (``info``: its type's accelerator)."""
    tags = tags_of(inst.get("Tags"))
    return Resource(
        id=str(inst["InstanceId"]),
        kind=ResourceKind.EC2_INSTANCE,
        region=region,
        account=account,
        tags=tags,
        instance_type=str(inst["InstanceType"]),
        lifecycle=Lifecycle.SPOT
        if inst.get("InstanceLifecycle") == "spot"
        else Lifecycle.ON_DEMAND,
        availability_zone=(inst.get("Placement") or {}).get("AvailabilityZone"),
        launched_at=inst.get("LaunchTime"),
        state=str((inst.get("State") or {}).get("Name", "")),
        name=tags.get("Name"),
        accelerator=info if isinstance(info, Accelerator) else None,
        eks_cluster=tags.get(Tags.EKS_CLUSTER) or tags.get(Tags.AWS_EKS_CLUSTER),
        eks_nodegroup=tags.get(Tags.EKS_NODEGROUP),
    )


def unknown_type_finding(res: Resource) -> Finding:
    return Finding(
        FindingCode.UNKNOWN_INSTANCE_TYPE,
        res.key,
        f"instance type {res.instance_type!r} is not known to DescribeInstanceTypes in "
        f"{res.region}; kept in scope in case it carries accelerators",
        Severity.WARNING,
    )


def is_unknown(info: object) -> bool:
    """True for a type DescribeInstanceTypes does not know (kept in scope)."""
    return info is _UNKNOWN


class Ec2Inventory:
    """Running and pending accelerator instances, the EBS volumes attached to them, and
    (with ``project_keys``) the volumes and snapshots tagged with a project: storage."""

    name = "ec2"

    def __init__(
        self,
        client_for: ClientFor,
        type_cache: InstanceTypeCache | None = None,
        inherit_tags: tuple[str, ...] = (
            Tags.PROJECT,
            *Tags.PROJECT_FALLBACKS,
            Tags.OWNER,
            Tags.EXEMPT,
        ),
        project_keys: tuple[str, ...] = (),
    ) -> None:
        """``project_keys``: the tag keys that name a project; volumes and snapshots
        carrying one are inventoried as storage wherever they are attached. Empty (the
        default): only the volumes of accelerator instances, as before."""
        self._client_for = client_for
        self._types = type_cache or InstanceTypeCache()
        self._inherit = inherit_tags
        self._project_keys = project_keys

    def collect(self, region: str, now: datetime) -> Inventory:
        ec2 = self._client_for.ec2(region)
        with reading("ec2", region, "DescribeInstances"):
            pages = ec2.get_paginator("describe_instances").paginate(
                Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}],
                PaginationConfig={"PageSize": 1000},
            )
            instances = [
                i
                for page in pages
                for r in page.get("Reservations", [])
                for i in r.get("Instances", [])
            ]
        accel = self._types.resolve(ec2, region, [str(i["InstanceType"]) for i in instances])
        resources: list[Resource] = []
        findings: list[Finding] = []
        kept: dict[str, Resource] = {}
        for inst in instances:
            itype = str(inst["InstanceType"])
            info = accel[itype]
            if info is None:
                continue  # a CPU instance: outside CostGuard's scope
            res = instance_resource(inst, region, self._client_for.account, info)
            if info is _UNKNOWN:
                findings.append(unknown_type_finding(res))
            resources.append(res)
            kept[res.id] = res
        volumes = self._volumes(ec2, region, kept)
        resources.extend(volumes)
        if self._project_keys:
            resources.extend(self._tagged_storage(ec2, region, {v.id for v in volumes}))
        return Inventory(tuple(resources), tuple(findings))

    def _volumes(
        self, ec2: EC2Client, region: str, instances: Mapping[str, Resource]
    ) -> list[Resource]:
        volumes: list[Resource] = []
        for batch in chunks(sorted(instances), FILTER_VALUES_PER_CALL):
            with reading("ec2", region, "DescribeVolumes"):
                pages = ec2.get_paginator("describe_volumes").paginate(
                    Filters=[{"Name": "attachment.instance-id", "Values": batch}],
                    PaginationConfig={"PageSize": 500},
                )
                for page in pages:
                    for vol in page.get("Volumes", []):
                        attached = next(
                            (
                                a["InstanceId"]
                                for a in vol.get("Attachments", [])
                                if a.get("InstanceId") in instances
                            ),
                            None,
                        )
                        if attached is None:
                            continue
                        volumes.append(self._volume(vol, region, instances[attached]))
        return volumes

    def _volume(self, vol: Any, region: str, owner: Resource | None) -> Resource:
        """One volume as DescribeVolumes gives it; ``owner``: the accelerator instance it
        is attached to (whose project and owner an untagged volume takes), if any."""
        tags = tags_of(vol.get("Tags"))
        if owner is not None and not any(k in tags for k in self._inherit):
            # An untagged volume belongs to its instance's project and owner,
            # but does not repeat its budget (one budget per tag, not per disk).
            tags.update({k: v for k, v in owner.tags.items() if k in self._inherit})
        attached = owner.id if owner is not None else None
        if attached is None:
            attached = next(
                (str(a["InstanceId"]) for a in vol.get("Attachments", []) if a.get("InstanceId")),
                None,
            )
        return Resource(
            id=str(vol["VolumeId"]),
            kind=ResourceKind.EBS_VOLUME,
            region=region,
            account=self._client_for.account,
            tags=tags,
            availability_zone=vol.get("AvailabilityZone"),
            launched_at=vol.get("CreateTime"),
            state=str(vol.get("State", "")),
            volume_type=str(vol.get("VolumeType", "")),
            size_gib=int(vol.get("Size", 0)),
            attached_to=attached,
            iops=int(vol.get("Iops") or 0),
            throughput_mibps=int(vol.get("Throughput") or 0),
            eks_cluster=owner.eks_cluster if owner is not None else None,
            eks_nodegroup=owner.eks_nodegroup if owner is not None else None,
        )

    def _tagged_storage(self, ec2: EC2Client, region: str, seen: set[str]) -> list[Resource]:
        """Volumes and this account's snapshots tagged with a project, wherever they are
        attached (or not): one paginated pass each (pages of 500), filtered on the server
        by a ``tag-key`` filter naming every project key (its values are ORed); never a
        call per volume or snapshot. ``seen``: volumes already found attached to an
        accelerator instance (kept once).
        """
        found: list[Resource] = []
        keys = list(self._project_keys)
        with reading("ec2", region, "DescribeVolumes"):
            for page in ec2.get_paginator("describe_volumes").paginate(
                Filters=[{"Name": "tag-key", "Values": keys}],
                PaginationConfig={"PageSize": 500},
            ):
                for vol in page.get("Volumes", []):
                    if str(vol["VolumeId"]) not in seen:
                        seen.add(str(vol["VolumeId"]))
                        found.append(self._volume(vol, region, None))
        with reading("ec2", region, "DescribeSnapshots"):
            for snaps in ec2.get_paginator("describe_snapshots").paginate(
                OwnerIds=["self"],
                Filters=[{"Name": "tag-key", "Values": keys}],
                PaginationConfig={"PageSize": 500},
            ):
                for snap in snaps.get("Snapshots", []):
                    if str(snap["SnapshotId"]) not in seen:
                        seen.add(str(snap["SnapshotId"]))
                        found.append(self._snapshot(snap, region))
        return found

    def _snapshot(self, snap: Any, region: str) -> Resource:
        """A snapshot is charged at its full size when EC2 reports it, else its source
        volume's: the incremental size (what it stores beyond its predecessors, what AWS
        bills) is not in the API, so either is an upper bound."""
        full = snap.get("FullSnapshotSizeInBytes")
        gib = -(-int(full) // GIB) if full else int(snap.get("VolumeSize", 0))
        tags = tags_of(snap.get("Tags"))
        return Resource(
            id=str(snap["SnapshotId"]),
            kind=ResourceKind.EBS_SNAPSHOT,
            region=region,
            account=self._client_for.account,
            tags=tags,
            launched_at=snap.get("StartTime"),
            state=str(snap.get("State", "")),
            name=tags.get("Name"),
            size_gib=gib,
            attached_to=str(snap.get("VolumeId") or "") or None,
            storage_tier=str(snap.get("StorageTier") or "standard"),
        )


class Ec2SpotPrices:
    """Latest Linux spot price per (type, AZ), from one paginated, batched query."""

    def __init__(self, client_for: ClientFor) -> None:
        self._client_for = client_for

    def latest(
        self, region: str, instance_types: Sequence[str], now: datetime
    ) -> Mapping[SpotKey, Decimal]:
        if not instance_types:
            return {}
        ec2 = self._client_for.ec2(region)
        best: dict[SpotKey, tuple[datetime, Decimal]] = {}
        with reading("ec2", region, "DescribeSpotPriceHistory"):
            for batch in chunks(sorted(set(instance_types)), INSTANCE_TYPES_PER_CALL):
                pages = ec2.get_paginator("describe_spot_price_history").paginate(
                    InstanceTypes=batch,
                    ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"],
                    StartTime=now,
                    EndTime=now,
                )
                for page in pages:
                    for p in page.get("SpotPriceHistory", []):
                        key = (region, str(p.get("AvailabilityZone", "")), str(p["InstanceType"]))
                        stamp = p.get("Timestamp") or datetime.min.replace(tzinfo=UTC)
                        price = Decimal(str(p["SpotPrice"]))
                        if key not in best or stamp > best[key][0]:
                            best[key] = (stamp, price)
        return {k: v for k, (_, v) in best.items()}
