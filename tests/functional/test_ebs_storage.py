"""EBS storage in the scan, on moto: the volumes of a GPU instance priced with their IOPS and
throughput, volumes and snapshots tagged with a project wherever they are, each counted as
storage in its project's run-rate; read a page at a time, never a call per volume."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

from costguard.adapters.aws import ClientFactory
from costguard.adapters.ec2 import Ec2Inventory
from costguard.adapters.memory import InMemoryLedger
from costguard.domain.models import ResourceKind
from costguard.domain.tags import Tags
from costguard.services.scan import ScanService, ScanSettings
from tests.support.catalog import storage_catalog
from tests.support.clock import MIDDAY
from tests.support.ec2 import run_instance

PROJECT_KEYS = (Tags.PROJECT, *Tags.PROJECT_FALLBACKS)
D = Decimal


def counted(session: Any) -> tuple[ClientFactory, Counter[str]]:
    calls: Counter[str] = Counter()
    session.events.register("before-call", lambda model, **_: calls.update([model.name]))
    return ClientFactory(session), calls


def tagged(kind: str, **tags: str) -> list[Any]:
    return [{"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]


def gpu_with_fast_scratch(ec2: Any) -> tuple[str, str]:
    """A g5.xlarge of project llm with a gp3 scratch volume of 500 GiB at 6,000 IOPS and
    250 MiB/s attached; returns (instance, volume)."""
    iid = run_instance(ec2, {"costguard:project": "llm"})
    vol = ec2.create_volume(
        AvailabilityZone="us-east-1a", Size=500, VolumeType="gp3", Iops=6000, Throughput=250
    )["VolumeId"]
    ec2.attach_volume(VolumeId=vol, InstanceId=iid, Device="/dev/sdf")
    return iid, vol


def test_volumes_of_a_gpu_instance_are_priced_with_their_iops_and_throughput(aws: Any) -> None:
    """GIVEN a GPU instance of project llm with an untagged gp3 volume of 500 GiB at 6,000
    IOPS and 250 MiB/s attached
    WHEN the scan runs
    THEN the volume is in llm, labelled storage, at (500 x 0.08 + 3,000 x 0.005 + 125 x
    0.04) / 730 = $60/730 an hour, and that is in llm's run-rate."""
    ec2 = aws.client("ec2", region_name="us-east-1")
    iid, vol = gpu_with_fast_scratch(ec2)
    inv = Ec2Inventory(ClientFactory(aws), project_keys=PROJECT_KEYS).collect("us-east-1", MIDDAY)
    (scratch,) = [r for r in inv.resources if r.id == vol]
    assert (scratch.iops, scratch.throughput_mibps, scratch.attached_to) == (6000, 250, iid)

    report = scan(aws)
    (llm,) = [p for p in report.projects if p.project == "llm"]
    by_id = {a.priced.resource.id: a for a in llm.resources}
    assert by_id[vol].priced.usd_per_hour == D(60) / 730
    assert by_id[vol].priced.resource.category == "storage"
    assert by_id[iid].priced.resource.category == "compute"
    assert llm.run_rate_usd_per_hour == sum(
        (a.priced.usd_per_hour or D(0) for a in llm.resources), D(0)
    )
    assert D(60) / 730 < llm.run_rate_usd_per_hour


def test_tagged_volumes_and_snapshots_are_storage_of_their_project_wherever_they_are(
    aws: Any,
) -> None:
    """GIVEN an unattached io2 volume tagged project data (100 GiB, 20,000 IOPS), a
    snapshot tagged Project=data, an untagged unattached volume and an untagged snapshot
    WHEN the scan runs
    THEN data holds the volume ($1,312.50 a month) and the snapshot (its size at $0.05),
    labelled storage; the untagged ones are not in the scan at all."""
    ec2 = aws.client("ec2", region_name="us-east-1")
    io2 = ec2.create_volume(
        AvailabilityZone="us-east-1a",
        Size=100,
        VolumeType="io2",
        Iops=20000,
        TagSpecifications=tagged("volume", **{"costguard:project": "data"}),
    )["VolumeId"]
    loose = ec2.create_volume(AvailabilityZone="us-east-1a", Size=50, VolumeType="gp3")["VolumeId"]
    snap = ec2.create_snapshot(VolumeId=io2, TagSpecifications=tagged("snapshot", Project="data"))[
        "SnapshotId"
    ]
    untagged_snap = ec2.create_snapshot(VolumeId=loose)["SnapshotId"]

    report = scan(aws)
    (data,) = [p for p in report.projects if p.project == "data"]
    found = {a.priced.resource.id: a.priced for a in data.resources}
    assert set(found) == {io2, snap}
    assert found[io2].usd_per_hour == D("1312.5") / 730
    snapshot = found[snap].resource
    assert snapshot.kind is ResourceKind.EBS_SNAPSHOT and snapshot.category == "storage"
    assert found[snap].usd_per_hour == D("0.05") * snapshot.size_gib / 730
    assert snapshot.size_gib == 100  # moto gives no full size: the source volume's
    everywhere = {a.priced.resource.id for p in report.projects for a in p.resources}
    everywhere |= {a.priced.resource.id for a in report.unattributed.resources}
    assert loose not in everywhere and untagged_snap not in everywhere


def test_a_tagged_volume_of_a_gpu_instance_is_counted_once(aws: Any) -> None:
    """GIVEN a GPU instance whose attached volume also carries costguard:project
    WHEN the inventory runs
    THEN the volume is found once (attached to its instance), not twice."""
    ec2 = aws.client("ec2", region_name="us-east-1")
    _, vol = gpu_with_fast_scratch(ec2)
    ec2.create_tags(Resources=[vol], Tags=[{"Key": "costguard:project", "Value": "llm"}])
    inv = Ec2Inventory(ClientFactory(aws), project_keys=PROJECT_KEYS).collect("us-east-1", MIDDAY)
    assert [r.id for r in inv.resources].count(vol) == 1


def test_storage_reads_grow_with_pages_not_with_volumes(aws: Any) -> None:
    """GIVEN 60 tagged volumes and 30 tagged snapshots
    WHEN the inventory runs
    THEN it makes one DescribeVolumes and one DescribeSnapshots for every project tag key
    (one page each), plus the attached-volume read: never one call per volume or snapshot."""
    ec2 = aws.client("ec2", region_name="us-east-1")
    run_instance(ec2, {"costguard:project": "llm"})
    for n in range(60):
        vid = ec2.create_volume(
            AvailabilityZone="us-east-1a",
            Size=10,
            VolumeType="gp3",
            TagSpecifications=tagged("volume", **{"costguard:project": f"p{n % 3}"}),
        )["VolumeId"]
        if n % 2:
            ec2.create_snapshot(
                VolumeId=vid, TagSpecifications=tagged("snapshot", **{"costguard:project": "p"})
            )
    factory, calls = counted(aws)
    inv = Ec2Inventory(factory, project_keys=PROJECT_KEYS).collect("us-east-1", MIDDAY)
    assert sum(r.kind is ResourceKind.EBS_SNAPSHOT for r in inv.resources) == 30
    assert sum(r.kind is ResourceKind.EBS_VOLUME for r in inv.resources) == 61
    assert calls == Counter(
        {
            "DescribeInstances": 1,
            "DescribeInstanceTypes": 1,
            "DescribeVolumes": 2,
            "DescribeSnapshots": 1,
        }
    )


def scan(aws: Any) -> Any:
    clients = ClientFactory(aws)
    service = ScanService(
        sources=[Ec2Inventory(clients, project_keys=PROJECT_KEYS)],
        spot_prices=_NoSpot(),
        catalog=storage_catalog(),
        ledger=InMemoryLedger(),
        settings=ScanSettings(scope="test", regions=("us-east-1",)),
    )
    return service.run(MIDDAY)


class _NoSpot:
    def latest(self, region: str, instance_types: Any, now: Any) -> dict[Any, Decimal]:
        return {}
