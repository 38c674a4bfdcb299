"""The idle-notebook guard's Lambda: its role (reads, tag-conditioned stops), its schedule."""

from __future__ import annotations

import json
from typing import Any

from costguard.env import Env
from tests.infra.iam_model import as_list


def _resources(template: Any, kind: str) -> dict[str, Any]:
    found: dict[str, Any] = template.find_resources(kind)
    return found


def _idle_function(template: Any) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, f)
        for k, f in _resources(template, "AWS::Lambda::Function").items()
        if f["Properties"].get("Environment", {}).get("Variables", {}).get(Env.GUARD)
        == "idle-notebooks"
    ]
    return found


def _statements(template: Any, role: str) -> list[dict[str, Any]]:
    return [
        s
        for p in _resources(template, "AWS::IAM::Policy").values()
        if any(r.get("Ref") == role for r in p["Properties"].get("Roles", []))
        for s in as_list(p["Properties"]["PolicyDocument"]["Statement"])
    ]


def test_the_idle_guard_role_reads_metrics_and_stops_only_tagged_instances(template: Any) -> None:
    _, fn = _idle_function(template)
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = _statements(template, role)
    actions = {a for s in statements for a in as_list(s["Action"])}
    assert {"cloudwatch:GetMetricData", "cloudwatch:ListMetrics"} <= actions
    assert {"ec2:DescribeInstances", "ec2:DescribeInstanceTypes"} <= actions
    (stop,) = [s for s in statements if "ec2:StopInstances" in as_list(s["Action"])]
    assert stop["Condition"]["Null"] == {"aws:ResourceTag/costguard:project": "false"}
    assert "aws:ResourceTag/costguard:exempt" in stop["Condition"]["StringNotEqualsIgnoreCase"]
    # never terminate or delete a notebook, never touch data
    assert not {a for a in actions if "Terminate" in a or a.startswith("s3:")}
    assert "ec2:TerminateInstances" not in actions


def test_the_idle_guard_runs_every_window_and_names_itself(template: Any) -> None:
    logical, _ = _idle_function(template)
    (schedule,) = [
        s
        for s in _resources(template, "AWS::Scheduler::Schedule").values()
        if '"idle-notebooks"' in s["Properties"]["Target"].get("Input", "")
    ]
    assert schedule["Properties"]["ScheduleExpression"] == "rate(1 hour)"
    assert json.loads(schedule["Properties"]["Target"]["Input"])["guard"] == "idle-notebooks"
    assert logical in json.dumps(schedule["Properties"]["Target"]["Arn"])


def test_the_idle_guard_reads_its_thresholds_from_its_environment(template: Any) -> None:
    _, fn = _idle_function(template)
    variables = fn["Properties"]["Environment"]["Variables"]
    assert variables[Env.IDLE_MINUTES] == "60"
    assert variables[Env.IDLE_GPU_PCT] == "5"
    assert variables[Env.IDLE_GRACE_MINUTES] == "60"
    assert variables[Env.IDLE_GPU_DISCOVERY] == "search"


def test_the_idle_rate_setting_sets_the_cadence() -> None:
    from costguard_infra.config import CostGuardConfig

    assert CostGuardConfig.from_context({"idleRate": "2 hours"}).idle_rate == "2 hours"
