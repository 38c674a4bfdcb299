"""The demo's stale-volume chapter: an unattached volume is snapshotted, then deleted.

Seeds three volumes of project ``vision`` in ``region`` (through ``session``, the
embedded AWS): one unattached, one attached to an instance, one unattached but
exempt. Then runs the stale-volume guard (policy and executor, enforcing) across
simulated time: the clock starts, the owner is warned, the snapshot is taken at the
TTL, and the volume is deleted once the snapshot has completed.

The simulated runs end at ``now``. moto stamps a snapshot and a volume with the real
clock; the chapter sets both to the simulated time they happen at, so the story holds
whatever the wall clock reads.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from costguard.ports import Ledger

from costguard.adapters.aws import ClientFactory
from costguard.adapters.catalog import load_catalog
from costguard.adapters.ebs import EbsInventory, EbsSnapshotActuator, EbsVolumeActuator
from costguard.adapters.memory import InMemoryLedger
from costguard.domain.decisions import Step
from costguard.domain.stale_volumes import VolumeRules
from costguard.domain.tags import Tags
from costguard.domain.text import labelled
from costguard.services.action_records import from_outcome
from costguard.services.executor import Executor, ExecutorSettings
from costguard.services.stale_volumes import StaleVolumePolicy
from costguard_demo.cloudtrail import attach_events
from costguard_demo.fleet import backdate_instances
from costguard_demo.server import backdate_volumes, snapshot_ids, stamp_new_snapshots

ACCOUNT = "123456789012"
PROJECT = "vision-research"
OWNER = "alice@example.com"


def _volume(ec2: Any, region: str, size: int, name: str, **extra: str) -> str:
    tags = {Tags.PROJECT: PROJECT, Tags.OWNER: OWNER, "Name": name, **extra}
    return str(
        ec2.create_volume(
            AvailabilityZone=f"{region}a",
            Size=size,
            VolumeType="gp3",
            TagSpecifications=[
                {
                    "ResourceType": "volume",
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                }
            ],
        )["VolumeId"]
    )


def run_volume_chapter(
    session: Any,
    region: str,
    say: Callable[[str], None],
    now: datetime,
    ledger: Ledger | None = None,
) -> list[dict[str, Any]]:
    """Run the chapter; return ``actions[]`` entries for the JSON report."""
    ec2 = session.client("ec2", region_name=region)
    scratch = _volume(ec2, region, 500, "scratch-checkpoints")
    attached = _volume(ec2, region, 200, "training-data")
    instance = ec2.run_instances(
        ImageId="ami-12345678", InstanceType="t3.micro", MinCount=1, MaxCount=1
    )["Instances"][0]["InstanceId"]
    ec2.attach_volume(VolumeId=attached, InstanceId=instance, Device="/dev/sdf")
    exempt = _volume(ec2, region, 300, "golden-dataset", **{Tags.EXEMPT: "true"})
    say(
        f"EBS: {scratch} (500 GiB, unattached), {attached} (attached to {instance}), "
        f"{exempt} (unattached, exempt)"
    )

    clients = ClientFactory(session, account=ACCOUNT)
    catalog = load_catalog()
    ledger = ledger or InMemoryLedger()
    policy = StaleVolumePolicy(
        EbsInventory(clients),
        ledger,
        ACCOUNT,
        [region],
        VolumeRules(),
        catalog.ebs_gb_month,
        catalog.ebs_snapshot_gb_month,
    )
    executor = Executor(
        [EbsVolumeActuator(clients), EbsSnapshotActuator(clients)],
        ledger,
        None,
        ExecutorSettings(ACCOUNT, dry_run=False),
    )
    start = now - timedelta(hours=49)
    # Created (and the instance launched) an hour before the guard first looks.
    backdate_volumes(region, [scratch, attached, exempt], start - timedelta(hours=1))
    backdate_instances(region, {instance: start - timedelta(hours=1)})
    attach_events(ACCOUNT, region)[-1]["at"] = start - timedelta(hours=1)
    actions: list[dict[str, Any]] = []
    snapshots = snapshot_ids(region)
    for offset, label in (
        (timedelta(0), "first seen unattached: its clock starts"),
        (timedelta(hours=24), "24 h before its 48 h TTL: the owner is warned"),
        (timedelta(hours=48), "at the TTL: snapshot first"),
        (timedelta(hours=49), "the snapshot has completed: delete"),
    ):
        at = start + offset
        report = executor.run(policy.decide(at), at)
        snapshots = stamp_new_snapshots(region, snapshots, at)
        say(f"  +{int(offset.total_seconds() // 3600)} h, {label}")
        for o in report.outcomes:
            t = o.decision.target
            say(f"    {t.id}: {labelled(o.step.value, o.error or o.detail)}")
            # What changed the account: the snapshot started (waiting), the deletion.
            started = o.step is Step.WAITING and "started" in o.detail
            if o.step is Step.ACTED or started:
                actions.append(from_outcome(o, report.dry_run))
    left = {v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]}
    say(
        f"EBS: {scratch} {'deleted' if scratch not in left else 'still there'}; "
        f"{attached} {'untouched' if attached in left else 'GONE'}; "
        f"{exempt} {'skipped (exempt)' if exempt in left else 'GONE'}"
    )
    return actions
