"""The maximum lifetime of a SageMaker training job, on moto through the act handler:
warned, then stopped with StopTrainingJob (never a delete), from its TrainingStartTime.

moto finishes a training job at once and has no StopTrainingJob: the fixture sets the
job InProgress on moto's backend, and gives moto's SageMaker a StopTrainingJob that does
what AWS's does to the job's status (``Stopping``), recording the call.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from costguard.domain.tags import Tags
from tests.support.idle_fleet import REGION
from tests.support.lifetime import (
    AFTER,
    LAUNCHED,
    WARN_AT,
    run,
    tagged,
)

ROLE = "arn:aws:iam::123456789012:role/sm"


@pytest.fixture
def stops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from moto.core.responses import EmptyResult
    from moto.sagemaker.responses import SageMakerResponse

    stopped: list[str] = []

    def stop_training_job(self: Any) -> Any:
        name = self._get_param("TrainingJobName")
        self.sagemaker_backend.training_jobs[name].training_job_status = "Stopping"
        stopped.append(name)
        return EmptyResult()

    monkeypatch.setattr(SageMakerResponse, "stop_training_job", stop_training_job, raising=False)
    return stopped


def training_job(
    session: Any, name: str, tags: dict[str, str], instance_type: str = "ml.p3.2xlarge"
) -> None:
    from costguard_demo.server import moto_backend

    session.client("sagemaker", region_name=REGION).create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1",
            "TrainingInputMode": "File",
        },
        RoleArn=ROLE,
        OutputDataConfig={"S3OutputPath": "s3://out/"},
        ResourceConfig={"InstanceType": instance_type, "InstanceCount": 2, "VolumeSizeInGB": 10},
        StoppingCondition={"MaxRuntimeInSeconds": 7 * 86400},
        Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
    )
    job = moto_backend("sagemaker", REGION).training_jobs[name]
    job.training_job_status = "InProgress"
    job.training_start_time = LAUNCHED.replace(tzinfo=None)
    job.creation_time = (LAUNCHED - timedelta(minutes=5)).replace(tzinfo=None)


def status_and_tags(session: Any, name: str) -> tuple[str, dict[str, str]]:
    sm = session.client("sagemaker", region_name=REGION)
    found = sm.describe_training_job(TrainingJobName=name)
    tags = sm.list_tags(ResourceArn=found["TrainingJobArn"])["Tags"]
    return str(found["TrainingJobStatus"]), {t["Key"]: t["Value"] for t in tags}


def test_a_training_job_is_warned_then_stopped_never_deleted(
    account: Any,
    stops: list[str],
) -> None:
    # GIVEN a training job InProgress since LAUNCHED, with costguard:max-hours=12
    training_job(account, "train", tagged(**{Tags.MAX_HOURS: "12"}))
    # WHEN the guard runs in the warning window
    assert run(account, WARN_AT)["counts"] == {"warned": 1}
    # THEN the job carries the lifetime warning, its deadline the end of its lifetime
    status, tags = status_and_tags(account, "train")
    assert status == "InProgress"
    assert tags[Tags.STOP_AFTER] == "2026-11-20T14:00:00Z"
    # WHEN it runs after the deadline, and again
    assert run(account, AFTER)["counts"] == {"acted": 1}
    assert run(account, AFTER + timedelta(minutes=15))["counts"] == {}
    # THEN StopTrainingJob was called once: the job is Stopping, its record kept
    assert stops == ["train"]
    assert status_and_tags(account, "train")[0] == "Stopping"


def test_the_default_lifetime_covers_accelerated_training_jobs_only(
    account: Any,
    stops: list[str],
) -> None:
    # GIVEN maxGpuHours=8, a GPU job and a CPU job, both running 10 hours
    training_job(account, "gpu", tagged())
    training_job(account, "cpu", tagged(), instance_type="ml.m5.xlarge")
    # WHEN the guard runs
    result = run(account, LAUNCHED + timedelta(hours=10), max_gpu_hours=8)
    # THEN only the GPU job is warned (two instances: its saving counts both)
    assert result["counts"] == {"warned": 1}
    assert Tags.STOP_AFTER in status_and_tags(account, "gpu")[1]
    assert Tags.STOP_AFTER not in status_and_tags(account, "cpu")[1]


def test_an_exempt_training_job_runs_on(account: Any, stops: list[str]) -> None:
    training_job(account, "train", tagged(**{Tags.MAX_HOURS: "1", Tags.EXEMPT: "yes"}))
    assert run(account, AFTER)["counts"] == {}
    assert stops == []


def test_the_training_job_actuator_stops_and_never_deletes() -> None:
    from costguard.adapters.sagemaker_actuator import SageMakerTrainingJobActuator

    # GIVEN its declared permissions
    actions = {a for p in SageMakerTrainingJobActuator.permissions for a in p.actions}
    # THEN it may stop a training job, and delete nothing but its own warning tag
    assert "sagemaker:StopTrainingJob" in actions
    assert not {a for a in actions if "Delete" in a} - {"sagemaker:DeleteTags"}
    tag_conditions = [
        p.conditions for p in SageMakerTrainingJobActuator.permissions if "Tags" in p.actions[0]
    ]
    assert tag_conditions and all(
        c["ForAllValues:StringEquals"] == {"aws:TagKeys": [Tags.STOP_AFTER]} for c in tag_conditions
    )
