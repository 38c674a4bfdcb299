"""The maximum-lifetime guard: warns, then stops GPU instances, notebook instances and
training jobs that outlive their ``costguard:max-hours`` or ``costguard:expires`` (or the
deployment's ``maxGpuHours``, for accelerators without either tag).

It acts through the idle guard's actuators (and the training-job one), but warns with its
own tag, ``costguard:stop-after``: an idle warning and a lifetime warning on one notebook
are two warnings, and neither may withdraw the other. Its role may write and remove only
that tag.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, cast

from costguard.adapters import ec2
from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.adapters.notebooks import NotebookCandidateSource
from costguard.adapters.sagemaker import TrainingJobSource, tag_reader
from costguard.adapters.sagemaker_actuator import (
    SageMakerNotebookActuator,
    SageMakerTrainingJobActuator,
)
from costguard.domain.tags import Tags
from costguard.guards.spec import GuardSpec
from costguard.iam import SAGEMAKER_TAGS_TAGGING_API, Permission, with_warning_tag
from costguard.services.guard import Guard, GuardContext
from costguard.services.lifetime import LifetimePolicy, LifetimeSettings

if TYPE_CHECKING:
    from costguard.adapters.aws import ClientFactory
    from costguard.guards.spec import DeclaresPermissions
    from costguard.settings import Settings

NAME = "max-lifetime"
WARNING_TAG = Tags.STOP_AFTER
#: Its cadence: a lifetime ends at a known time, so the stop is at most this late.
EVERY_MINUTES = 15

READS = (
    Permission(
        ("ec2:DescribeInstances", "ec2:DescribeInstanceTypes"),
        "find running accelerator instances, their launch times and tags; EC2 Describe* "
        "calls have no resource-level permissions",
    ),
    Permission(
        ("sagemaker:ListNotebookInstances", "sagemaker:ListTrainingJobs"),
        "find InService notebook instances and InProgress training jobs; List* calls have "
        "no resource-level permissions",
    ),
    *SAGEMAKER_TAGS_TAGGING_API,
)


class _Declared:
    """An actuator's permissions as this guard holds them: its tagging statements name
    ``costguard:stop-after``, not the idle guard's ``costguard:action-after``."""

    def __init__(self, permissions: tuple[Permission, ...]) -> None:
        self.permissions = permissions


def lifetime_settings(settings: Settings, account: str) -> LifetimeSettings:
    """The policy's settings, from the deployment's (``config_spec``)."""
    return LifetimeSettings(
        regions=settings.regions,
        account=account,
        default_hours=settings.max_gpu_hours,
        grace=timedelta(minutes=settings.lifetime_grace_minutes),
        every=timedelta(minutes=EVERY_MINUTES),
        tag_keys=settings.tag_keys,
    )


def build(settings: Settings, clients: ClientFactory, context: GuardContext) -> Guard:
    """Every running accelerator instance, InService notebook instance and (where an
    actuator exists) training job, judged on its tags and launch time alone."""
    candidates = NotebookCandidateSource(
        clients,
        tag_reader(clients, settings.sagemaker_tags),
        types=ec2.INSTANCE_TYPES,
        all_accelerators=True,
    )
    tags = tag_reader(clients, settings.sagemaker_tags)
    policy = LifetimePolicy(
        candidates,
        context.catalog,
        lifetime_settings(settings, clients.account),
        training=TrainingJobSource(clients, tags),
    )
    return Guard(
        NAME,
        policy,
        [
            Ec2InstanceActuator(clients),
            SageMakerNotebookActuator(clients),
            SageMakerTrainingJobActuator(clients),
        ],
        findings=lambda: policy.findings,
        warning_tag=WARNING_TAG,
    )


MAX_LIFETIME = GuardSpec(
    name=NAME,
    construct_id="MaxLifetime",
    description="warns, then stops GPU instances, notebooks and training jobs past their "
    "costguard:max-hours "
    "or costguard:expires (or the deployment's maxGpuHours)",
    build=build,
    actuators=(
        _Declared(with_warning_tag(Ec2InstanceActuator.permissions, WARNING_TAG)),
        _Declared(with_warning_tag(SageMakerNotebookActuator.permissions, WARNING_TAG)),
        cast("DeclaresPermissions", SageMakerTrainingJobActuator),
    ),
    reads=READS,
    every_minutes=EVERY_MINUTES,
)
