"""Notebooks on moto with back-dated CloudWatch metrics, for the idle guard's tests,
benchmark and demo-like scenarios (test-only: never shipped)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from costguard.domain.tags import Tags

REGION = "us-east-1"
STEP = timedelta(minutes=5)


def launch(
    session: Any,
    tags: dict[str, str],
    instance_type: str = "g5.xlarge",
    *,
    at: datetime,
    count: int = 1,
) -> list[str]:
    """Running instances launched at ``at`` (moto's LaunchTime, set on its backend)."""
    from costguard_demo.fleet import backdate_instances

    ec2 = session.client("ec2", region_name=REGION)
    made = ec2.run_instances(
        ImageId="ami-12345678",
        InstanceType=instance_type,
        MinCount=count,
        MaxCount=count,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )["Instances"]
    ids = [str(i["InstanceId"]) for i in made]
    backdate_instances(REGION, dict.fromkeys(ids, at))
    return ids


def notebook_tags(project: str = "vision", **extra: str) -> dict[str, str]:
    return {
        Tags.PROJECT: project,
        Tags.ROLE: "notebook",
        Tags.OWNER: "alice@example.com",
        **extra,
    }


def points(start: datetime, end: datetime, value: float) -> list[tuple[datetime, float]]:
    out = []
    t = start
    while t < end:
        out.append((t, value))
        t += STEP
    return out


def put(
    session: Any,
    namespace: str,
    metric: str,
    dims: dict[str, str],
    data: Iterable[tuple[datetime, float]],
) -> None:
    """Datapoints for one series, stored in moto's CloudWatch as ``PutMetricData`` stores them.

    They go straight to moto's backend for the session's account (the tests' moto runs in
    this process, in-process or as its threaded server): through the API each datapoint
    costs about a millisecond of botocore's validation and serialization and moto's parsing,
    and a fleet's setup is tens of thousands of them (the idle handler's 200 notebooks:
    57,600, most of their tests' time). The backend's own ``put_metric_data`` is what the
    API calls, with what its parser hands it: naive UTC timestamps and float values. This is
    setup, not the guard's reads: those still go through the API."""
    from moto.cloudwatch.models import cloudwatch_backends
    from moto.iam.models import get_account_id_from

    account = get_account_id_from(session.get_credentials().access_key)
    members = [
        {
            "MetricName": metric,
            "Dimensions": [{"Name": k, "Value": val} for k, val in dims.items()],
            "Timestamp": t.astimezone(UTC).replace(tzinfo=None),
            "Value": float(v),
        }
        for t, v in data
    ]
    if members:
        cloudwatch_backends[account][REGION].put_metric_data(namespace, members)


def gpu_dims(iid: str, index: int, host: str | None = None) -> dict[str, str]:
    return {
        "InstanceId": iid,
        "index": str(index),
        "name": "NVIDIA A10G",
        "host": host or f"ip-10-0-0-{index}.ec2.internal",
    }


def publish_ec2(
    session: Any,
    iid: str,
    start: datetime,
    end: datetime,
    *,
    gpu: Sequence[float] = (0.0,),
    cpu: float = 1.0,
    net: float = 10_000.0,
) -> None:
    """The agent's GPU series (one per value) and EC2's CPU and network, every 5 minutes."""
    for index, value in enumerate(gpu):
        put(
            session,
            "CWAgent",
            "nvidia_smi_utilization_gpu",
            gpu_dims(iid, index),
            points(start, end, value),
        )
    put(session, "AWS/EC2", "CPUUtilization", {"InstanceId": iid}, points(start, end, cpu))
    for metric in ("NetworkIn", "NetworkOut"):
        put(session, "AWS/EC2", metric, {"InstanceId": iid}, points(start, end, net))


def idle_guard_settings(topic: str, *, dry_run: bool, account: str = "123456789012") -> Any:
    """The act Lambda's settings for the idle-notebook guard on moto: per-resource SageMaker
    tags (moto's tagging API has none) and Studio off (moto does not implement it)."""
    from costguard.env import Env
    from costguard.settings import Settings

    return Settings.from_env(
        {
            Env.REGIONS: REGION,
            Env.TABLE_NAME: "ledger",
            Env.SCOPE: account,
            Env.TOPIC_ARN: topic,
            Env.DRY_RUN: "true" if dry_run else "false",
            Env.GUARD: "idle-notebooks",
            Env.SAGEMAKER_TAGS: "per-resource",
            Env.SAGEMAKER_STUDIO: "false",
        }
    )
