"""The guards CostGuard ships, and so every actuator and every actuator role, in one list.

The stack builds one Lambda per guard here, its role only from that guard's
declarations (every mutating statement tag-conditioned); adding a guard here is what
lets the deployed guard change that kind of resource. The scan role never gets any of
them. The actuator Lambda finds its guard here by name.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from costguard.adapters.catalog import load_catalog
from costguard.adapters.ebs import READS as EBS_READS
from costguard.adapters.ebs import EbsInventory, EbsSnapshotActuator, EbsVolumeActuator
from costguard.domain.stale_volumes import VolumeRules
from costguard.guards import DeclaresPermissions, GuardSpec
from costguard.iam import Permission
from costguard.services.guard import Guard
from costguard.services.stale_volumes import StaleVolumePolicy

if TYPE_CHECKING:
    from costguard.adapters.aws import ClientFactory
    from costguard.settings import Settings


def _build_stale_volumes(settings: Settings, clients: ClientFactory) -> Guard:
    """Unattached EBS volumes past their TTL (snapshotted first), and expired snapshots."""
    # The ledger is built where the executor's is (wiring imports the adapters).
    from costguard.wiring import build_ledger  # noqa: PLC0415

    catalog = load_catalog()
    ledger = build_ledger(settings, clients)
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
    )
    return Guard(
        STALE_VOLUMES,
        policy,
        [EbsVolumeActuator(clients), EbsSnapshotActuator(clients)],
    )


STALE_VOLUMES = "stale-volumes"

#: Shipped guards, in the order the stack builds them.
SHIPPED: tuple[GuardSpec, ...] = (
    GuardSpec(
        name=STALE_VOLUMES,
        construct_id="StaleVolumes",
        description="snapshot, then delete, EBS volumes unattached past their time to live; "
        "delete snapshots past their costguard:ttl",
        build=_build_stale_volumes,
        actuators=(EbsVolumeActuator, EbsSnapshotActuator),
        reads=EBS_READS,
        # An attach-and-detach shorter than this is invisible to the unattached clock.
        every_minutes=30,
    ),
)

#: By name: what the actuator Lambda runs (tests may register a test-only guard here).
SPECS: dict[str, GuardSpec] = {spec.name: spec for spec in SHIPPED}


def actuators() -> tuple[DeclaresPermissions, ...]:
    found: list[DeclaresPermissions] = []
    for spec in SPECS.values():
        found.extend(a for a in spec.actuators if a not in found)
    return tuple(found)


def actuator_permissions() -> tuple[Permission, ...]:
    """Every permission any guard role may hold (the stack grants each role its own)."""
    seen: list[Permission] = []
    for spec in SPECS.values():
        seen.extend(p for p in spec.permissions() if p not in seen)
    return tuple(seen)
