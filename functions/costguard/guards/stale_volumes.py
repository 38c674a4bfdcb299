"""The stale-volume guard: snapshot, then delete, EBS volumes unattached past their time
to live; delete snapshots past their ``costguard:ttl``."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from costguard.adapters.ebs import READS as EBS_READS
from costguard.adapters.ebs import EbsInventory, EbsSnapshotActuator, EbsVolumeActuator
from costguard.domain.org_act import Reach
from costguard.domain.stale_volumes import VolumeRules
from costguard.guards.spec import GuardSpec
from costguard.services.guard import Guard, GuardContext
from costguard.services.stale_volumes import StaleVolumePolicy

if TYPE_CHECKING:
    from costguard.adapters.aws import ClientFactory
    from costguard.settings import Settings

NAME = "stale-volumes"


def build(settings: Settings, clients: ClientFactory, context: GuardContext) -> Guard:
    """Unattached EBS volumes past their TTL (snapshotted first), and expired snapshots."""
    catalog = context.catalog
    ledger = context.ledger
    policy = StaleVolumePolicy(
        EbsInventory(clients),
        ledger,
        settings.scope,
        settings.regions,
        VolumeRules(
            default_ttl=timedelta(hours=settings.ttl_hours),
            snapshot_before_delete=settings.ebs_snapshot_before_delete,
            snapshot_ttl=settings.ebs_snapshot_ttl,
            tag_keys=settings.tag_keys,
        ),
        catalog.ebs_gb_month,
        catalog.ebs_snapshot_gb_month,
        ledger,
        provisioned_prices=catalog.ebs_provisioned_month,
    )
    return Guard(
        NAME,
        policy,
        [EbsVolumeActuator(clients), EbsSnapshotActuator(clients)],
        findings=lambda: policy.findings,
    )


STALE_VOLUMES = GuardSpec(
    name=NAME,
    construct_id="StaleVolumes",
    description="snapshot, then delete, EBS volumes unattached past their time to live; "
    "delete snapshots past their costguard:ttl",
    build=build,
    actuators=(EbsVolumeActuator, EbsSnapshotActuator),
    reads=EBS_READS,
    reach=Reach.DATA,
    records_findings=True,
    # An attach-and-detach shorter than this is invisible to the unattached clock.
    every_minutes=30,
)
