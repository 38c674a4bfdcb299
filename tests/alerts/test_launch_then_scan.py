"""What the on-launch check sent, the next scan does not send again: an untagged
accelerator and the volumes attached to it (fakes, no moto)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.alerts import AlertKind, AlertResource
from costguard.domain.launch import launch_unattributed_alert
from costguard.domain.models import Resource, ResourceKind
from costguard.ports import Inventory
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.scan import ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.fakes import RecordingNotifier, StaticInventory, StaticSpotPrices

LAUNCH = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SCOPE = "123456789012"

INSTANCE = Resource(
    id="i-0123456789abcdef0",
    kind=ResourceKind.EC2_INSTANCE,
    region="us-east-1",
    account=SCOPE,
    instance_type="p5.48xlarge",
    launched_at=LAUNCH - timedelta(seconds=14),
    state="running",
)
ROOT_VOLUME = Resource(
    id="vol-0123456789abcdef0",
    kind=ResourceKind.EBS_VOLUME,
    region="us-east-1",
    account=SCOPE,
    launched_at=LAUNCH - timedelta(seconds=14),
    state="in-use",
    volume_type="gp3",
    size_gib=100,
    attached_to=INSTANCE.id,
)


class Account:
    def __init__(self) -> None:
        self.ledger = InMemoryLedger()
        self.notifier = RecordingNotifier([])
        self.alerts = AlertService(self.ledger, self.notifier, AlertSettings(scope=SCOPE))

    def launch_alert(self, now: datetime) -> None:
        """What the on-launch check sends for the instance alone (it reads no volume)."""
        resource = AlertResource(
            INSTANCE.key, INSTANCE.kind.value, "us-east-1", "p5.48xlarge", None, None
        )
        alert = launch_unattributed_alert(resource, now, None)
        assert alert is not None
        assert self.alerts.attempt_delivery([alert]).sent

    def scan(self, now: datetime) -> list[str]:
        """The scan's unattributed-spend alerts: the resource keys each one names."""
        report = ScanService(
            [StaticInventory("ec2", {"us-east-1": Inventory((INSTANCE, ROOT_VOLUME))})],
            StaticSpotPrices({}),
            fixture_catalog(),
            self.ledger,
            ScanSettings(scope=SCOPE, regions=("us-east-1",)),
        ).run(now)
        sent = self.alerts.run(report, report.previous, now)
        return [
            r.key.rsplit("/", 1)[1]
            for a in sent
            if a.kind is AlertKind.UNATTRIBUTED
            for r in a.resources
        ]


def test_the_scan_after_a_launch_alert_does_not_send_the_instances_root_volume_as_news() -> None:
    """Defect: the on-launch check claims the instance alone; the next scan, the same UTC
    day, found the instance claimed and its root volume not, and sent "1 resource with no
    project: $0.01/h" about the volume of an instance the team had just been told about.

    GIVEN an untagged p5 alerted at launch WHEN the scan runs 15 minutes later THEN it
    sends no unattributed-spend alert (the volume goes with its instance) AND the next
    day's scan reports both, as every day."""
    account = Account()
    account.launch_alert(LAUNCH)
    assert account.scan(LAUNCH + timedelta(minutes=15)) == []
    assert sorted(account.scan(LAUNCH + timedelta(days=1))) == sorted([INSTANCE.id, ROOT_VOLUME.id])


def test_without_a_launch_alert_the_scan_sends_the_instance_with_its_volume() -> None:
    account = Account()
    assert sorted(account.scan(LAUNCH)) == sorted([INSTANCE.id, ROOT_VOLUME.id])
    assert account.scan(LAUNCH + timedelta(minutes=15)) == []
