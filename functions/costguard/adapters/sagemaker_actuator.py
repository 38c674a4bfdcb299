"""Stop SageMaker notebook instances and delete idle Studio apps, through the executor only.

Never a notebook instance is deleted, nor a Studio space or its storage:

- a notebook instance is *stopped* (``StopNotebookInstance``): its ML storage volume is
  kept, and ``StartNotebookInstance`` brings it back with its files;
- a Studio JupyterLab or CodeEditor app is deleted (``DeleteApp``, the only way to stop
  one): the space, its EBS volume and the domain's EFS are kept, and opening the space
  in Studio starts a new app on the same files.

IAM (Service Authorization Reference, "Actions, resources, and condition keys for
Amazon SageMaker"): ``StopNotebookInstance`` acts on the ``notebook-instance`` resource
type and ``DeleteApp`` on ``app``; both resource types support ``aws:ResourceTag/${TagKey}``,
so both are tag-conditioned like the EC2 stop. ``AddTags`` and ``DeleteTags`` support
``aws:TagKeys``, so the warning tag is the only tag CostGuard can write or remove.

A Studio app carries the space's tags only when the domain propagates them
(``TagPropagation=ENABLED``, applied when the app is created). IAM checks the *app*'s
tags, so the actuator reports the app's tags (what IAM will see) and acts on apps
whose own tags put them in scope; the space's ``costguard:exempt`` also counts, since
an exemption can only ever hold CostGuard back. The Studio inventory reports domains
that do not propagate tags.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from costguard.adapters.aws import ClientFor, OneLookActuator, reading, tags_of
from costguard.domain.decisions import Decision, Observed, Target
from costguard.domain.models import ResourceKind
from costguard.domain.studio import parse_app_target_id
from costguard.domain.tags import Tags
from costguard.iam import (
    IN_SCOPE_NOT_EXEMPT,
    WARNING_TAGS,
    Permission,
    warning_tag_permissions,
)
from costguard.ports import SourceError

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

#: NotebookInstanceStatus values in which there is nothing left to stop (a Failed
#: instance runs no compute; StopNotebookInstance refuses it).
NOTEBOOK_SETTLED = frozenset({"Stopping", "Stopped", "Deleting", "Failed"})
#: AppStatus values in which the app is gone or going.
APP_SETTLED = frozenset({"Deleting", "Deleted", "Failed"})
#: The codes SageMaker answers for a name that does not exist (DescribeNotebookInstance
#: says ValidationException "RecordNotFound"; DescribeApp says ResourceNotFound).
NOT_FOUND = frozenset({"ResourceNotFound", "ResourceNotFoundException"})

#: TrainingJobStatus values in which nothing runs any more (StopTrainingJob refuses them).
TRAINING_SETTLED = frozenset({"Stopping", "Stopped", "Completed", "Failed"})

NOTEBOOK_ARN = "arn:{partition}:sagemaker:*:{account}:notebook-instance/*"
TRAINING_JOB_ARN = "arn:{partition}:sagemaker:*:{account}:training-job/*"
APP_ARN = "arn:{partition}:sagemaker:*:{account}:app/*"
SPACE_ARN = "arn:{partition}:sagemaker:*:{account}:space/*"


def _missing(exc: SourceError) -> bool:
    return exc.code in NOT_FOUND or (
        exc.code == "ValidationException" and "notfound" in exc.detail.lower().replace(" ", "")
    )


class _SageMakerActuator(OneLookActuator):
    def __init__(self, clients: ClientFor) -> None:
        super().__init__(clients)
        #: ARN by target id, from ``inspect`` (which the executor always calls first).
        self._arns: dict[str, str] = {}

    def _sm(self, region: str) -> SageMakerClient:
        return self._clients.sagemaker(region)

    def _tags(self, region: str, arn: str) -> dict[str, str]:
        with reading("sagemaker", region, "ListTags"):
            return tags_of(
                t
                for page in self._sm(region).get_paginator("list_tags").paginate(ResourceArn=arn)
                for t in page.get("Tags", [])
            )


class _TaggedByArn(_SageMakerActuator):
    """A SageMaker resource tagged by its ARN, which :meth:`_arn` looks up once."""

    def _arn(self, target: Target) -> str:
        raise NotImplementedError

    def mark(self, target: Target, key: str, value: str) -> None:
        arn = self._arn(target)
        with reading("sagemaker", target.region, "AddTags"):
            self._sm(target.region).add_tags(ResourceArn=arn, Tags=[{"Key": key, "Value": value}])

    def unmark(self, target: Target, key: str) -> None:
        arn = self._arn(target)
        with reading("sagemaker", target.region, "DeleteTags"):
            self._sm(target.region).delete_tags(ResourceArn=arn, TagKeys=[key])


class SageMakerNotebookActuator(_TaggedByArn):
    """``Target.id`` is the notebook instance's name."""

    kind = ResourceKind.SAGEMAKER_NOTEBOOK.value
    permissions = (
        Permission(
            ("sagemaker:DescribeNotebookInstance", "sagemaker:ListTags"),
            "read a notebook instance's status and tags just before acting",
            resources=(NOTEBOOK_ARN,),
        ),
        Permission(
            ("sagemaker:StopNotebookInstance",),
            "stop an idle notebook instance after its owner was warned (its storage volume "
            "is kept); only instances tagged with a project and not permanently exempt",
            resources=(NOTEBOOK_ARN,),
            conditions=IN_SCOPE_NOT_EXEMPT,
        ),
        *warning_tag_permissions(
            "sagemaker", "notebook instances", (NOTEBOOK_ARN,), tag_verb="AddTags"
        ),
    )

    def _inspect_one(self, target: Target) -> Observed | None:
        try:
            with reading("sagemaker", target.region, "DescribeNotebookInstance"):
                found = self._sm(target.region).describe_notebook_instance(
                    NotebookInstanceName=target.id
                )
        except SourceError as exc:
            if _missing(exc):
                return None
            raise
        arn = str(found["NotebookInstanceArn"])
        self._arns[target.id] = arn
        state = str(found.get("NotebookInstanceStatus", "unknown"))
        return Observed(state, self._tags(target.region, arn), settled=state in NOTEBOOK_SETTLED)

    def _arn(self, target: Target) -> str:
        if target.id not in self._arns:
            with reading("sagemaker", target.region, "DescribeNotebookInstance"):
                found = self._sm(target.region).describe_notebook_instance(
                    NotebookInstanceName=target.id
                )
            self._arns[target.id] = str(found["NotebookInstanceArn"])
        return self._arns[target.id]

    def apply(self, decision: Decision) -> str:
        t = decision.target
        with reading("sagemaker", t.region, "StopNotebookInstance"):
            self._sm(t.region).stop_notebook_instance(NotebookInstanceName=t.id)
        return (
            f"stopped notebook instance {t.id}; its storage volume is kept: start it again "
            "from the SageMaker console when you need it"
        )


class SageMakerTrainingJobActuator(_TaggedByArn):
    """``Target.id`` is the training job's name. Only the maximum-lifetime guard stops
    training jobs, so its warning tag is that guard's, ``costguard:stop-after``.

    ``StopTrainingJob`` is not a delete: SageMaker sends the algorithm SIGTERM, waits up to
    120 seconds, and ends the job as ``Stopped``. The job record, its logs, the model
    artifacts SageMaker saves on a stop, and every checkpoint written to S3 so far are
    kept; it is billed up to the stop. A stopped job cannot be resumed as such: a new job
    can start from its last checkpoint.
    """

    kind = ResourceKind.SAGEMAKER_TRAINING_JOB.value
    permissions = (
        Permission(
            ("sagemaker:DescribeTrainingJob", "sagemaker:ListTags"),
            "read a training job's status and tags just before acting",
            resources=(TRAINING_JOB_ARN,),
        ),
        Permission(
            ("sagemaker:StopTrainingJob",),
            "stop (never delete) a training job past its maximum lifetime after its owner was "
            "warned; only jobs tagged with a project and not permanently exempt",
            resources=(TRAINING_JOB_ARN,),
            conditions=IN_SCOPE_NOT_EXEMPT,
        ),
        *warning_tag_permissions(
            "sagemaker",
            "training jobs",
            (TRAINING_JOB_ARN,),
            tag_verb="AddTags",
            tag=WARNING_TAGS[1],
        ),
    )

    def _inspect_one(self, target: Target) -> Observed | None:
        try:
            with reading("sagemaker", target.region, "DescribeTrainingJob"):
                found = self._sm(target.region).describe_training_job(TrainingJobName=target.id)
        except SourceError as exc:
            if _missing(exc):
                return None
            raise
        arn = str(found["TrainingJobArn"])
        self._arns[target.id] = arn
        state = str(found.get("TrainingJobStatus", "unknown"))
        return Observed(state, self._tags(target.region, arn), settled=state in TRAINING_SETTLED)

    def _arn(self, target: Target) -> str:
        if target.id not in self._arns:
            with reading("sagemaker", target.region, "DescribeTrainingJob"):
                found = self._sm(target.region).describe_training_job(TrainingJobName=target.id)
            self._arns[target.id] = str(found["TrainingJobArn"])
        return self._arns[target.id]

    def apply(self, decision: Decision) -> str:
        t = decision.target
        with reading("sagemaker", t.region, "StopTrainingJob"):
            self._sm(t.region).stop_training_job(TrainingJobName=t.id)
        return (
            f"stopped training job {t.id} (not deleted): its logs, its record, the model "
            "artifacts SageMaker saves on a stop and the checkpoints written to S3 are kept; "
            "start a new job from its last checkpoint if you need more"
        )


class StudioAppActuator(_SageMakerActuator):
    """``Target.id`` is ``<domain id>/<space name>/<app type>/<app name>``
    (:func:`costguard.domain.studio.app_target_id`); only apps in spaces."""

    kind = ResourceKind.SAGEMAKER_STUDIO_APP.value
    permissions = (
        Permission(
            ("sagemaker:DescribeApp",),
            "read a Studio app's status and ARN just before acting",
            resources=(APP_ARN,),
        ),
        Permission(
            ("sagemaker:ListTags",),
            "read the app's tags (what IAM checks) and its space's exemption",
            resources=(APP_ARN, SPACE_ARN),
        ),
        Permission(
            ("sagemaker:DeleteApp",),
            "delete (the only way to stop) an idle JupyterLab or CodeEditor app after its "
            "owner was warned; the space and its storage are kept; only apps tagged with a "
            "project and not permanently exempt",
            resources=(APP_ARN,),
            conditions=IN_SCOPE_NOT_EXEMPT,
        ),
        *warning_tag_permissions("sagemaker", "Studio apps", (APP_ARN,), tag_verb="AddTags"),
    )

    def _describe(self, target: Target) -> dict[str, object] | None:
        domain_id, space, app_type, app_name = parse_app_target_id(target.id)
        try:
            with reading("sagemaker", target.region, "DescribeApp"):
                found = self._sm(target.region).describe_app(
                    DomainId=domain_id,
                    SpaceName=space,
                    AppType=app_type,  # type: ignore[arg-type]  # checked by SageMaker
                    AppName=app_name,
                )
        except SourceError as exc:
            if _missing(exc):
                return None
            raise
        if found.get("AppArn"):
            self._arns[target.id] = str(found["AppArn"])
        return dict(found)

    def _inspect_one(self, target: Target) -> Observed | None:
        found = self._describe(target)
        if found is None:
            return None
        state = str(found.get("Status", "unknown"))
        settled = state in APP_SETTLED
        arn = self._arns.get(target.id)
        if arn is None:
            return Observed(state, {}, settled=settled)
        try:
            tags = self._tags(target.region, arn)
        except SourceError as exc:
            if settled and (_missing(exc) or exc.code == "ValidationException"):
                return Observed(state, {}, settled=True)  # going, and its tags with it
            raise
        space_exempt = self._tags(target.region, space_arn(arn)).get(Tags.EXEMPT)
        return Observed(state, with_space_exemption(tags, space_exempt), settled=settled)

    def _arn(self, target: Target) -> str | None:
        if target.id not in self._arns:
            self._describe(target)
        return self._arns.get(target.id)

    def mark(self, target: Target, key: str, value: str) -> None:
        arn = self._arn(target)
        if arn is None:
            raise LookupError(f"Studio app {target.id} no longer exists")
        with reading("sagemaker", target.region, "AddTags"):
            self._sm(target.region).add_tags(ResourceArn=arn, Tags=[{"Key": key, "Value": value}])

    def unmark(self, target: Target, key: str) -> None:
        arn = self._arn(target)
        if arn is None:
            return  # the app is gone, and its tags with it
        try:
            with reading("sagemaker", target.region, "DeleteTags"):
                self._sm(target.region).delete_tags(ResourceArn=arn, TagKeys=[key])
        except SourceError as exc:
            # Just after DeleteApp the app is Deleting and may refuse tag changes: its
            # tags go with it. Anything else is a real failure.
            if not (_missing(exc) or exc.code == "ValidationException"):
                raise
            found = self._describe(target)
            if found is not None and str(found.get("Status")) not in APP_SETTLED:
                raise

    def apply(self, decision: Decision) -> str:
        t = decision.target
        domain_id, space, app_type, app_name = parse_app_target_id(t.id)
        with reading("sagemaker", t.region, "DeleteApp"):
            self._sm(t.region).delete_app(
                DomainId=domain_id,
                SpaceName=space,
                AppType=app_type,  # type: ignore[arg-type]  # checked by SageMaker
                AppName=app_name,
            )
        return (
            f"stopped the {app_type} app of space {space} (domain {domain_id}) by deleting "
            "the app; the space and its storage are kept: open the space in Studio to "
            "start it again with your files"
        )


def space_arn(app_arn: str) -> str:
    """``arn:...:app/<domain>/<space>/<type>/<name>`` -> ``arn:...:space/<domain>/<space>``."""
    head, _, tail = app_arn.partition(":app/")
    domain_id, space = tail.split("/")[:2]
    return f"{head}:space/{domain_id}/{space}"


def with_space_exemption(app_tags: dict[str, str], space_exempt: str | None) -> dict[str, str]:
    """The app's tags, with the space's ``costguard:exempt`` where it is the live intent.

    The app's tags are a copy of the space's taken when the app was created; the space's
    exemption is what its owner says *now*, so it wins, unless the app's own value is
    one IAM refuses to act on (``true``/``yes``): then the executor must see it too, or
    it would make a call its role refuses on every run.
    """
    if space_exempt is None:
        return dict(app_tags)
    own = app_tags.get(Tags.EXEMPT)
    if own is not None and own.strip().lower() in {"true", "yes"}:
        return dict(app_tags)
    return {**app_tags, Tags.EXEMPT: space_exempt}
