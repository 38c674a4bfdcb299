"""Hostile test of the stale-snapshot guard on moto: a warning withdrawn by leaving scope.

README (Actions): "a withdrawal (activity, exemption, or the project tag removed) is
recorded too ... so a tag left in place can never start an action later".
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from costguard.adapters.aws import ClientFactory
from costguard.adapters.ebs import EbsInventory, EbsSnapshotActuator, EbsVolumeActuator
from costguard.adapters.memory import InMemoryLedger
from costguard.domain.decisions import Step
from costguard.domain.stale_volumes import VolumeRules
from costguard.domain.tags import Tags
from costguard.services.executor import Executor, ExecutorSettings
from costguard.services.stale_volumes import StaleVolumePolicy
from tests.support.fakes import RecordingNotifier

ACCOUNT = "123456789012"
REGION = "us-east-1"


def _run(session: Any, ledger: Any, sent: list[Any], now: datetime) -> dict[str, Step]:
    clients = ClientFactory(session, account=ACCOUNT)
    policy = StaleVolumePolicy(
        EbsInventory(clients),
        ledger,
        ACCOUNT,
        [REGION],
        VolumeRules(),
        {REGION: {"gp3": Decimal("0.08")}},
        {REGION: Decimal("0.05")},
        ledger,
    )
    executor = Executor(
        [EbsVolumeActuator(clients), EbsSnapshotActuator(clients)],
        ledger,
        RecordingNotifier(sent),
        ExecutorSettings(ACCOUNT, dry_run=False),
    )
    report = executor.run(policy.decide(now), now)
    return {o.decision.target.id: o.step for o in report.outcomes}


def test_a_snapshot_warned_then_taken_out_of_scope_is_warned_afresh_when_back_in_scope(
    aws: Any,
) -> None:
    """Defect: domain/stale_volumes.py judge_snapshots skips (no decision at all) a snapshot
    without costguard:project or costguard:ttl, and EbsInventory.snapshots lists only those
    with costguard:ttl; so removing either tag after the warning never withdraws it (no
    NONE decision reaches the executor): the costguard:action-after tag and the ledger's
    'warned' record stay. When the tag comes back (a month later, by a tagging policy or a
    copy of the tags), services/executor.py _deadline accepts the month-old deadline and
    the snapshot is deleted in that very run, without a new warning."""
    ec2 = aws.client("ec2", region_name=REGION)
    volume = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=10, VolumeType="gp3")
    snap = ec2.create_snapshot(
        VolumeId=volume["VolumeId"],
        TagSpecifications=[
            {
                "ResourceType": "snapshot",
                "Tags": [
                    {"Key": Tags.PROJECT, "Value": "vision"},
                    {"Key": Tags.TTL, "Value": "1h"},
                    {"Key": Tags.OWNER, "Value": "alice@example.com"},
                ],
            }
        ],
    )["SnapshotId"]
    started = ec2.describe_snapshots(SnapshotIds=[snap])["Snapshots"][0]["StartTime"]
    t0 = started.astimezone(UTC) + timedelta(hours=2)
    ledger, sent = InMemoryLedger(), []
    # GIVEN a snapshot past its time to live, whose owner is warned
    assert _run(aws, ledger, sent, t0)[snap] is Step.WARNED
    # AND whose project tag is then removed (it leaves CostGuard's scope)
    ec2.delete_tags(Resources=[snap], Tags=[{"Key": Tags.PROJECT}])
    _run(aws, ledger, sent, t0 + timedelta(hours=1))
    # WHEN the project tag comes back a month later
    ec2.create_tags(Resources=[snap], Tags=[{"Key": Tags.PROJECT, "Value": "vision"}])
    later = t0 + timedelta(days=30)
    steps = _run(aws, ledger, sent, later)
    # THEN the owner is warned again before it is deleted
    assert steps[snap] is Step.WARNED, steps
    assert [s["SnapshotId"] for s in ec2.describe_snapshots(SnapshotIds=[snap])["Snapshots"]] == [
        snap
    ]
