"""Hostile test of the idle guard's SageMaker heartbeat: a silent agent is missing data."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from costguard.adapters.aws import ClientFactory
from costguard.adapters.catalog import load_catalog
from costguard.adapters.cloudwatch import CloudWatchMetrics
from costguard.adapters.notebooks import NotebookCandidateSource
from costguard.adapters.sagemaker import PerResourceTags
from costguard.domain.decisions import Action
from costguard.domain.idle import GpuDiscovery, Heartbeat
from costguard.domain.tags import Tags
from costguard.services.idle import IdlePolicy, IdleSettings
from tests.support.clock import MIDDAY
from tests.support.idle_fleet import REGION, points, put

ACCOUNT = "123456789012"


def test_a_notebook_whose_heartbeat_went_silent_is_unknown_not_idle(aws: Any) -> None:
    """Defect: names.Heartbeat's contract says "No datapoint means 'unknown', never idle",
    and the rule is "missing metric data is unknown, never idle". But domain/idle.py
    judge_heartbeat treats an empty JupyterActivity window as "no heartbeat at all" and
    falls back to the maximum runtime (_max_runtime): a notebook whose agent published
    busy heartbeats until 2 hours ago (GPU at 95 %, a kernel running) and then went
    silent (the agent killed by the OOM killer under the user's own training job) is
    judged IDLE once InService 12 hours, warned, and stopped an hour later."""
    from costguard_demo.fleet import backdate_sagemaker

    sm = aws.client("sagemaker", region_name=REGION)
    sm.create_notebook_instance(
        NotebookInstanceName="train-nb",
        InstanceType="ml.p3.2xlarge",
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/notebook",
        Tags=[
            {"Key": Tags.PROJECT, "Value": "vision"},
            {"Key": Tags.OWNER, "Value": "alice@example.com"},
        ],
    )
    # GIVEN a notebook InService for 13 hours, whose heartbeat said "busy" until 2 h ago
    backdate_sagemaker(REGION, {"train-nb": MIDDAY - timedelta(hours=13)}, {})
    dims = {Heartbeat.DIMENSION: "train-nb"}
    busy_until = MIDDAY - timedelta(hours=2)
    put(aws, Heartbeat.NAMESPACE, Heartbeat.JUPYTER_ACTIVITY, dims,
        points(MIDDAY - timedelta(hours=13), busy_until, 1.0))  # fmt: skip
    put(aws, Heartbeat.NAMESPACE, Heartbeat.GPU_UTILIZATION, dims,
        points(MIDDAY - timedelta(hours=13), busy_until, 95.0))  # fmt: skip
    clients = ClientFactory(aws, account=ACCOUNT)
    policy = IdlePolicy(
        NotebookCandidateSource(clients, PerResourceTags(clients)),
        CloudWatchMetrics(clients.cloudwatch),
        load_catalog(),
        IdleSettings(
            regions=(REGION,),
            account=ACCOUNT,
            gpu_discovery=GpuDiscovery.LIST,  # moto does not evaluate SEARCH
        ),
    )
    # WHEN the idle guard judges it
    decisions = [d for d in policy.decide(MIDDAY) if d.target.id == "train-nb"]
    # THEN the silent heartbeat is unknown: no stop is decided
    assert [d.action for d in decisions] == [Action.NONE], [(d.action, d.reason) for d in decisions]
