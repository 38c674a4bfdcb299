"""The notebook-instance actuator on moto, through the executor, with its declared IAM
conditions evaluated on every mutating call as AWS would (moto checks none)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError

from costguard.adapters.aws import ClientFactory
from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.sagemaker_actuator import SageMakerNotebookActuator
from costguard.domain.decisions import Action, Decision, Step, Target
from costguard.domain.tags import Tags
from costguard.iam import tag_conditioned
from costguard.services.executor import Executor, ExecutorSettings
from tests.support.fakes import RecordingNotifier
from tests.support.iam_eval import allowed

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
GRACE = timedelta(hours=24)
REGION = "us-east-1"
ACCOUNT = "123456789012"
MUTATING = {"StopNotebookInstance", "AddTags", "DeleteTags"}


class Rig:
    """An executor whose SageMaker calls are refused when the declared statements refuse them."""

    def __init__(self) -> None:
        import boto3

        self.session = boto3.Session()
        self.calls: list[str] = []
        self.refused: list[str] = []
        observer = boto3.Session().client("sagemaker", region_name=REGION)

        def check(params: dict[str, Any], model: Any, **_: Any) -> None:
            self.calls.append(model.name)
            if model.name not in MUTATING:
                return
            arn = (
                params.get("ResourceArn")
                or observer.describe_notebook_instance(
                    NotebookInstanceName=params["NotebookInstanceName"]
                )["NotebookInstanceArn"]
            )
            tags = {t["Key"]: t["Value"] for t in observer.list_tags(ResourceArn=arn)["Tags"]}
            keys = [t["Key"] for t in params.get("Tags", [])] + list(params.get("TagKeys", []))
            action = f"sagemaker:{model.name}"
            if not allowed(SageMakerNotebookActuator.permissions, action, arn, tags, keys):
                self.refused.append(f"{action} on {arn} with {sorted(tags)}")
                raise ClientError(
                    {"Error": {"Code": "AccessDeniedException", "Message": "denied"}}, model.name
                )

        self.session.events.register("before-parameter-build.sagemaker", check)
        self.sent: list[Any] = []
        self.executor = Executor(
            [SageMakerNotebookActuator(ClientFactory(self.session, account=ACCOUNT))],
            InMemoryLedger(),
            RecordingNotifier(self.sent),
            ExecutorSettings(ACCOUNT, dry_run=False),
        )

    def run(self, d: Decision, now: datetime) -> tuple[Step, str, str | None]:
        (o,) = self.executor.run([d], now).outcomes
        return o.step, o.detail, o.error


@pytest.fixture
def sm(aws: Any) -> Any:
    return aws.client("sagemaker", region_name=REGION)


def notebook(sm: Any, name: str, tags: Mapping[str, str]) -> str:
    return str(
        sm.create_notebook_instance(
            NotebookInstanceName=name,
            InstanceType="ml.p3.2xlarge",
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/notebook",
            Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
        )["NotebookInstanceArn"]
    )


def decision(name: str, now: datetime, action: Action = Action.STOP_NOTEBOOK) -> Decision:
    return Decision(
        action,
        Target(
            key=f"{REGION}/sagemaker-notebook/{name}",
            kind="sagemaker-notebook",
            region=REGION,
            id=name,
            account=ACCOUNT,
            project="vision",
            owners=("alice@example.com",),
        ),
        "no Jupyter activity and GPU under 5% for 60 minutes",
        now,
        usd_per_hour_saved=Decimal("3.825"),
        grace=GRACE,
    )


def status(sm: Any, name: str) -> str:
    return str(sm.describe_notebook_instance(NotebookInstanceName=name)["NotebookInstanceStatus"])


def tags_of(sm: Any, arn: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}


def test_stops_notebook_after_grace_period_when_idle_and_never_deletes_it(sm: Any) -> None:
    # GIVEN an idle notebook instance of project vision
    arn = notebook(sm, "nb-idle", {Tags.PROJECT: "vision"})
    rig = Rig()
    # WHEN the guard runs at T0 (warns: tags the deadline) and again after the grace period
    warned = rig.run(decision("nb-idle", T0), T0)
    assert warned[0] is Step.WARNED
    assert tags_of(sm, arn)[Tags.ACTION_AFTER] == "2026-11-21T12:00:00Z"
    assert status(sm, "nb-idle") == "InService"
    step, detail, error = rig.run(decision("nb-idle", T0 + GRACE), T0 + GRACE)
    # THEN it is stopped (not deleted), the warning tag is removed, the owner is told that
    # the storage is kept, and no call was one its own role refuses
    assert (step, error) == (Step.ACTED, None)
    assert status(sm, "nb-idle") == "Stopped"
    assert Tags.ACTION_AFTER not in tags_of(sm, arn)
    assert "storage volume is kept" in detail
    assert "storage volume is kept" in rig.sent[-1].summary
    assert not [c for c in rig.calls if c.startswith("Delete") and c != "DeleteTags"]
    assert rig.refused == []


def test_skips_a_notebook_without_a_project_and_an_exempt_one_without_a_refused_call(
    sm: Any,
) -> None:
    # GIVEN a notebook with no project tag and one permanently exempt
    notebook(sm, "nb-orphan", {"team": "x"})
    notebook(sm, "nb-exempt", {Tags.PROJECT: "vision", Tags.EXEMPT: "TRUE"})
    rig = Rig()
    # WHEN the guard judges both idle, run after run
    outcomes = [
        rig.run(decision(n, T0 + k * GRACE), T0 + k * GRACE)
        for k in range(2)
        for n in ("nb-orphan", "nb-exempt")
    ]
    # THEN neither is touched, and nothing the role refuses was attempted
    assert {o[0] for o in outcomes} == {Step.SKIPPED}
    assert status(sm, "nb-orphan") == status(sm, "nb-exempt") == "InService"
    assert rig.refused == []


def test_a_warning_is_withdrawn_after_the_project_tag_is_removed(sm: Any) -> None:
    # GIVEN a warned notebook whose owner then removes its project tag
    arn = notebook(sm, "nb-leaving", {Tags.PROJECT: "vision"})
    rig = Rig()
    assert rig.run(decision("nb-leaving", T0), T0)[0] is Step.WARNED
    sm.delete_tags(ResourceArn=arn, TagKeys=[Tags.PROJECT])
    # WHEN the next run sees it
    step, _detail, error = rig.run(decision("nb-leaving", T0 + GRACE), T0 + GRACE)
    # THEN the warning is withdrawn (DeleteTags of the warning key only is allowed on any
    # notebook), the notebook keeps running, and no run fails
    assert (step, error) == (Step.CLEARED, None)
    assert Tags.ACTION_AFTER not in tags_of(sm, arn)
    assert status(sm, "nb-leaving") == "InService"
    assert rig.refused == []


def test_a_notebook_that_no_longer_exists_is_skipped_not_failed(sm: Any) -> None:
    # GIVEN a decision about a notebook deleted since the policy saw it
    rig = Rig()
    # WHEN the executor runs it
    step, detail, error = rig.run(decision("nb-gone", T0), T0)
    # THEN it is skipped: SageMaker's ValidationException "RecordNotFound" means gone
    assert (step, error) == (Step.SKIPPED, None)
    assert "no longer exists" in detail


def test_every_mutating_statement_is_tag_conditioned_and_scoped_to_notebook_instances() -> None:
    for p in SageMakerNotebookActuator.permissions:
        assert all(":notebook-instance/" in r for r in p.resources), p
        if p.mutating:
            assert tag_conditioned(p.conditions), p
    # The role may write no tag but the warning, and stop nothing without a project.
    arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:notebook-instance/nb"
    perms = SageMakerNotebookActuator.permissions
    assert not allowed(perms, "sagemaker:AddTags", arn, {Tags.PROJECT: "v"}, [Tags.PROJECT])
    assert not allowed(perms, "sagemaker:StopNotebookInstance", arn, {})
    assert not allowed(
        perms, "sagemaker:StopNotebookInstance", arn, {Tags.PROJECT: "v", Tags.EXEMPT: "Yes"}
    )
    assert allowed(
        perms, "sagemaker:StopNotebookInstance", arn, {Tags.PROJECT: "v", Tags.EXEMPT: "2027-01-01"}
    )
    assert not allowed(perms, "sagemaker:DeleteNotebookInstance", arn, {Tags.PROJECT: "v"})
    assert not allowed(
        perms,
        "sagemaker:StopNotebookInstance",
        arn.replace("notebook-instance", "endpoint"),
        {Tags.PROJECT: "v"},
    )
