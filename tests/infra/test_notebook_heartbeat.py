"""The stack's notebook lifecycle configuration is the tested heartbeat script, and the
policy notebooks need can publish CostGuard's heartbeat and nothing else."""

from __future__ import annotations

import base64
from typing import Any

from costguard.domain.idle import Heartbeat
from costguard_agent.lifecycle import on_start_script


def test_the_lifecycle_configuration_runs_the_tested_on_start_script(body: dict[str, Any]) -> None:
    configs = [
        r
        for r in body["Resources"].values()
        if r["Type"] == "AWS::SageMaker::NotebookInstanceLifecycleConfig"
    ]
    assert len(configs) == 1
    (hook,) = configs[0]["Properties"]["OnStart"]
    assert base64.b64decode(hook["Content"]).decode() == on_start_script()
    assert "OnCreate" not in configs[0]["Properties"]


def test_its_name_is_an_output_users_attach_by(body: dict[str, Any]) -> None:
    (logical,) = [
        k
        for k, r in body["Resources"].items()
        if r["Type"] == "AWS::SageMaker::NotebookInstanceLifecycleConfig"
    ]
    output = body["Outputs"]["NotebookLifecycleConfig"]["Value"]
    assert output == {"Fn::GetAtt": [logical, "NotebookInstanceLifecycleConfigName"]}
    assert "NotebookHeartbeatPolicyArn" in body["Outputs"]


def test_the_heartbeat_policy_may_only_put_metrics_in_the_heartbeat_namespace(
    body: dict[str, Any],
) -> None:
    (policy,) = [r for r in body["Resources"].values() if r["Type"] == "AWS::IAM::ManagedPolicy"]
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "cloudwatch:PutMetricData"
    assert statement["Condition"] == {"StringEquals": {"cloudwatch:namespace": Heartbeat.NAMESPACE}}
    # Attached to nothing of CostGuard's own: it is for users' notebook execution roles.
    assert not policy["Properties"].get("Roles")
