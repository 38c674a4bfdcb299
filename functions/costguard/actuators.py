"""The guards CostGuard ships, and so every actuator and every actuator role, in one list.

The stack builds one Lambda per guard here, its role only from that guard's
declarations (every mutating statement tag-conditioned); adding a guard here is what
lets the deployed guard change that kind of resource. The scan role never gets any of
them. The actuator Lambda finds its guard here by name.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, cast

from costguard.adapters.cloudwatch import PERMISSIONS as CLOUDWATCH_READS
from costguard.adapters.ebs import READS as EBS_READS
from costguard.adapters.ebs import EbsSnapshotActuator, EbsVolumeActuator
from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.adapters.s3 import S3BucketActuator, build_stale_objects
from costguard.adapters.sagemaker_actuator import SageMakerNotebookActuator, StudioAppActuator
from costguard.adapters.studio import STUDIO_READS
from costguard.domain.org_act import Reach
from costguard.guards import DeclaresPermissions, GuardSpec
from costguard.iam import SAGEMAKER_TAGS_TAGGING_API, Permission

if TYPE_CHECKING:
    from costguard.adapters.aws import ClientFactory
    from costguard.services.guard import Guard, GuardContext
    from costguard.settings import Settings


def _build_idle(settings: Settings, clients: ClientFactory, context: GuardContext) -> Guard:
    # Imported when a guard is built, not when the stack reads the declarations.
    from costguard.wiring import build_idle_guard  # noqa: PLC0415

    return build_idle_guard(settings, clients, context)


def _build_stale_volumes(
    settings: Settings, clients: ClientFactory, context: GuardContext
) -> Guard:
    """Unattached EBS volumes past their TTL (snapshotted first), and expired snapshots."""
    # Imported when a guard is built, not when the stack reads the declarations.
    from costguard.adapters.ebs import EbsInventory  # noqa: PLC0415
    from costguard.domain.stale_volumes import VolumeRules  # noqa: PLC0415
    from costguard.services.guard import Guard  # noqa: PLC0415
    from costguard.services.stale_volumes import StaleVolumePolicy  # noqa: PLC0415

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
    )
    return Guard(
        STALE_VOLUMES.name,
        policy,
        [EbsVolumeActuator(clients), EbsSnapshotActuator(clients)],
        findings=lambda: policy.findings,
    )


EC2_NOTEBOOK_READS = (
    Permission(
        ("ec2:DescribeInstances", "ec2:DescribeInstanceTypes"),
        "find running notebook instances and their GPUs; EC2 Describe* calls have no "
        "resource-level permissions",
    ),
)
#: For SageMaker notebook instances, granted with their actuator.
SAGEMAKER_NOTEBOOK_READS = (
    Permission(
        ("sagemaker:ListNotebookInstances",),
        "find InService notebook instances; List* calls have no resource-level permissions",
    ),
    *SAGEMAKER_TAGS_TAGGING_API,
)

IDLE_NOTEBOOKS = GuardSpec(
    name="idle-notebooks",
    construct_id="IdleNotebooks",
    description="warns, then stops notebooks idle for their whole window (GPU, CPU, network, "
    "heartbeat); unknown is never idle",
    build=_build_idle,
    actuators=(
        cast("DeclaresPermissions", Ec2InstanceActuator),
        cast("DeclaresPermissions", SageMakerNotebookActuator),
        cast("DeclaresPermissions", StudioAppActuator),
    ),
    reads=(*CLOUDWATCH_READS, *EC2_NOTEBOOK_READS, *SAGEMAKER_NOTEBOOK_READS, *STUDIO_READS),
    every_minutes=60,
    rate_setting="idle_rate",
)

STALE_VOLUMES = GuardSpec(
    name="stale-volumes",
    construct_id="StaleVolumes",
    description="snapshot, then delete, EBS volumes unattached past their time to live; "
    "delete snapshots past their costguard:ttl",
    build=_build_stale_volumes,
    actuators=(
        cast("DeclaresPermissions", EbsVolumeActuator),
        cast("DeclaresPermissions", EbsSnapshotActuator),
    ),
    reads=EBS_READS,
    reach=Reach.DATA,
    records_findings=True,
    # An attach-and-detach shorter than this is invisible to the unattached clock.
    every_minutes=30,
)

STALE_OBJECTS = GuardSpec(
    name="stale-objects",
    construct_id="StaleObjects",
    description="deletes objects older than their bucket's costguard:ttl, to the hour",
    build=build_stale_objects,
    actuators=(S3BucketActuator,),
    reach=Reach.DATA,
    records_findings=True,
    # Hourly: "48h" is kept to the hour. The run stops itself well before its timeout and
    # resumes next hour; the timeout stays under the executor's 15-minute claim lease,
    # so two runs never sweep one bucket at once even when one starts late.
    every_minutes=60,
    timeout_minutes=10,
    memory_mb=512,
)

#: Shipped guards, in the order the stack builds them.
SHIPPED: tuple[GuardSpec, ...] = (IDLE_NOTEBOOKS, STALE_VOLUMES, STALE_OBJECTS)

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


def guard_ledger_actions() -> tuple[str, ...]:
    """What a role that runs every guard (the Organization hub's act consumer) may do on
    the ledger table."""
    seen: list[str] = []
    for spec in SPECS.values():
        seen.extend(a for a in spec.ledger_actions() if a not in seen)
    return tuple(seen)
