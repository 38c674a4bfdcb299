"""The idle-notebook guard: warns, then stops notebooks idle for their whole window.

Its policy judges on batched CloudWatch reads; SageMaker notebook instances and Studio
apps are judged only where the guard has an actuator for them (a decision without one
would fail the run).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, cast

from costguard.adapters import ec2
from costguard.adapters.cloudwatch import PERMISSIONS as CLOUDWATCH_READS
from costguard.adapters.cloudwatch import CloudWatchMetrics
from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.adapters.notebooks import NotebookCandidateSource
from costguard.adapters.sagemaker import tag_reader
from costguard.adapters.sagemaker_actuator import SageMakerNotebookActuator, StudioAppActuator
from costguard.adapters.studio import STUDIO_READS, StudioInventory
from costguard.domain.idle import MB, GpuDiscovery, IdleThresholds
from costguard.guards.spec import GuardSpec
from costguard.iam import SAGEMAKER_TAGS_TAGGING_API, Permission
from costguard.services.guard import Guard, GuardContext
from costguard.services.idle import IdlePolicy, IdleSettings

if TYPE_CHECKING:
    from costguard.adapters.aws import ClientFactory
    from costguard.guards.spec import DeclaresPermissions
    from costguard.ports import Actuator
    from costguard.settings import Settings

NAME = "idle-notebooks"

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


def idle_settings(settings: Settings, account: str) -> IdleSettings:
    """The idle-notebook policy's settings, from the deployment's (``config_spec``)."""
    return IdleSettings(
        regions=settings.regions,
        account=account,
        thresholds=IdleThresholds(
            window=timedelta(minutes=settings.idle_minutes),
            gpu_pct=settings.idle_gpu_pct,
            cpu_pct=settings.idle_cpu_pct,
            network_bytes_per_5min=settings.idle_network_mb * MB,
            max_runtime=timedelta(hours=settings.idle_max_runtime_hours),
        ),
        grace=timedelta(minutes=settings.idle_grace_minutes),
        tag_keys=settings.tag_keys,
        gpu_discovery=GpuDiscovery(settings.idle_gpu_discovery),
    )


def build(settings: Settings, clients: ClientFactory, context: GuardContext) -> Guard:
    """The idle-notebook guard: its policy on batched CloudWatch reads, and its actuators."""
    actuators: list[Actuator] = [Ec2InstanceActuator(clients), SageMakerNotebookActuator(clients)]
    if settings.sagemaker_studio:
        actuators.append(StudioAppActuator(clients))
    candidates = NotebookCandidateSource(
        clients,
        tag_reader(clients, settings.sagemaker_tags),
        types=ec2.INSTANCE_TYPES,
        all_accelerators=settings.idle_all_accelerators,
        sagemaker="sagemaker-notebook" in {a.kind for a in actuators},
    )
    policy = IdlePolicy(
        candidates,
        CloudWatchMetrics(clients.cloudwatch),
        context.catalog,
        idle_settings(settings, clients.account),
        studio=StudioInventory(clients) if settings.sagemaker_studio else None,
    )
    return Guard(NAME, policy, actuators, findings=lambda: policy.findings)


IDLE_NOTEBOOKS = GuardSpec(
    name=NAME,
    construct_id="IdleNotebooks",
    description="warns, then stops notebooks idle for their whole window (GPU, CPU, network, "
    "heartbeat); unknown is never idle",
    build=build,
    actuators=(
        cast("DeclaresPermissions", Ec2InstanceActuator),
        cast("DeclaresPermissions", SageMakerNotebookActuator),
        cast("DeclaresPermissions", StudioAppActuator),
    ),
    reads=(*CLOUDWATCH_READS, *EC2_NOTEBOOK_READS, *SAGEMAKER_NOTEBOOK_READS, *STUDIO_READS),
    every_minutes=60,
    rate_setting="idle_rate",
)
