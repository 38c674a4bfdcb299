"""The max-lifetime guard's Lambda: its role stops only tagged, unexempt instances,
notebooks and training jobs, writes only its own warning tag, and runs every 15 minutes."""

from __future__ import annotations

import json
from typing import Any

from costguard.env import Env
from tests.infra.iam_model import as_list


def _function(template: Any) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, f)
        for k, f in template.find_resources("AWS::Lambda::Function").items()
        if f["Properties"].get("Environment", {}).get("Variables", {}).get(Env.GUARD)
        == "max-lifetime"
    ]
    return found


def _statements(template: Any) -> list[dict[str, Any]]:
    _, fn = _function(template)
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    return [
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        if any(r.get("Ref") == role for r in p["Properties"].get("Roles", []))
        for s in as_list(p["Properties"]["PolicyDocument"]["Statement"])
    ]


def test_it_stops_only_tagged_unexempt_resources_and_deletes_nothing(template: Any) -> None:
    statements = _statements(template)
    actions = {a for s in statements for a in as_list(s["Action"])}
    # GIVEN its role THEN it stops the three kinds, each stop tag-conditioned
    stops = {"ec2:StopInstances", "sagemaker:StopNotebookInstance", "sagemaker:StopTrainingJob"}
    assert stops <= actions
    for s in statements:
        if set(as_list(s["Action"])) & stops:
            assert s["Condition"]["Null"] == {"aws:ResourceTag/costguard:project": "false"}
            assert "aws:ResourceTag/costguard:exempt" in s["Condition"]["StringNotEqualsIgnoreCase"]
    # AND never terminates or deletes anything but its warning tag
    assert not {a for a in actions if "Terminate" in a or "Delete" in a} - {
        "ec2:DeleteTags",
        "sagemaker:DeleteTags",
    }


def test_it_writes_and_removes_only_costguard_stop_after(template: Any) -> None:
    """Defect guarded: with the idle guard's tag, its role could withdraw idle warnings."""
    tagging = [
        s
        for s in _statements(template)
        if {a.split(":")[1] for a in as_list(s["Action"])} & {"CreateTags", "AddTags", "DeleteTags"}
    ]
    assert len(tagging) == 6  # write and remove, on instances, notebooks and training jobs
    for s in tagging:
        assert s["Condition"]["ForAllValues:StringEquals"] == {
            "aws:TagKeys": ["costguard:stop-after"]
        }
        assert s["Condition"]["Null"]["aws:TagKeys"] == "false"


def test_it_runs_every_15_minutes_with_the_default_lifetime_off(template: Any) -> None:
    logical, fn = _function(template)
    (schedule,) = [
        s
        for s in template.find_resources("AWS::Scheduler::Schedule").values()
        if '"max-lifetime"' in s["Properties"]["Target"].get("Input", "")
    ]
    assert schedule["Properties"]["ScheduleExpression"] == "rate(15 minutes)"
    assert logical in json.dumps(schedule["Properties"]["Target"]["Arn"])
    variables = fn["Properties"]["Environment"]["Variables"]
    assert variables[Env.MAX_GPU_HOURS] == "0"
    assert variables[Env.LIFETIME_GRACE_MINUTES] == "60"
