"""The stale-volume guard as deployed: its own Lambda, schedule and role, and what the role
may do (effect, not presence): delete only project volumes, snapshot only with tags."""

from __future__ import annotations

import json
from typing import Any

from costguard.domain.tags import Tags
from costguard.env import Env
from tests.infra.guard_template import actions, guard_function, role_statements


def _guard(template: Any) -> tuple[str, dict[str, Any]]:
    return guard_function(template, "stale-volumes")


def _arns(statement: dict[str, Any]) -> str:
    return json.dumps(statement["Resource"])


def test_the_stale_volume_guard_runs_every_30_minutes_on_its_own_role(template: Any) -> None:
    logical, fn = _guard(template)
    assert fn["Properties"]["Handler"] == "costguard.handlers.act.handler"
    variables = fn["Properties"]["Environment"]["Variables"]
    assert variables[Env.TTL_HOURS] == "48"
    assert variables[Env.EBS_SNAPSHOT_BEFORE_DELETE] == "true"
    assert variables[Env.EBS_SNAPSHOT_TTL] == "30d"
    schedules = [
        s
        for s in template.find_resources("AWS::Scheduler::Schedule").values()
        if json.loads(s["Properties"]["Target"].get("Input", "{}")).get("guard") == "stale-volumes"
    ]
    (schedule,) = schedules
    assert schedule["Properties"]["ScheduleExpression"] == "rate(30 minutes)"
    assert logical in json.dumps(schedule["Properties"]["Target"]["Arn"])


def test_its_role_deletes_and_snapshots_only_project_volumes_and_creates_tagged_snapshots(
    template: Any,
) -> None:
    _, fn = _guard(template)
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = role_statements(template, role)
    by_action: dict[str, list[dict[str, Any]]] = {}
    for s in statements:
        for a in actions(s):
            by_action.setdefault(a, []).append(s)
    # Nothing beyond EBS: no instance stop, no S3, no other guard's verbs
    ec2 = {a for a in by_action if a.startswith("ec2:")}
    assert ec2 == {
        "ec2:DescribeVolumes",
        "ec2:DescribeSnapshots",
        "ec2:DeleteVolume",
        "ec2:CreateSnapshot",
        "ec2:DeleteSnapshot",
        "ec2:CreateTags",
        "ec2:DeleteTags",
    }
    assert not any(a.startswith("s3:") or a == "ec2:StopInstances" for a in by_action)
    (delete_volume,) = by_action["ec2:DeleteVolume"]
    assert delete_volume["Condition"]["Null"] == {f"aws:ResourceTag/{Tags.PROJECT}": "false"}
    assert delete_volume["Condition"]["StringNotEqualsIgnoreCase"] == {
        f"aws:ResourceTag/{Tags.EXEMPT}": ["true", "yes"]
    }
    assert ":volume/*" in _arns(delete_volume)
    on_volume, on_snapshot = sorted(
        by_action["ec2:CreateSnapshot"], key=lambda s: ":snapshot" in _arns(s)
    )
    assert ":volume/*" in _arns(on_volume)
    assert on_volume["Condition"]["Null"] == {f"aws:ResourceTag/{Tags.PROJECT}": "false"}
    assert "::snapshot/*" in _arns(on_snapshot)
    assert on_snapshot["Condition"]["Null"] == {
        f"aws:RequestTag/{Tags.PROJECT}": "false",
        f"aws:RequestTag/{Tags.SOURCE_VOLUME}": "false",
        f"aws:RequestTag/{Tags.TTL}": "false",
    }
    tag_on_create = [
        s for s in by_action["ec2:CreateTags"] if "ec2:CreateAction" in json.dumps(s["Condition"])
    ]
    (create_tags,) = tag_on_create
    assert create_tags["Condition"]["StringEquals"] == {"ec2:CreateAction": "CreateSnapshot"}
    (delete_snapshot,) = by_action["ec2:DeleteSnapshot"]
    assert delete_snapshot["Condition"]["Null"] == {
        f"aws:ResourceTag/{Tags.PROJECT}": "false",
        f"aws:ResourceTag/{Tags.TTL}": "false",
    }
    # every other tag write is CostGuard's warning tag only
    for s in by_action["ec2:CreateTags"] + by_action["ec2:DeleteTags"]:
        if s is create_tags:
            continue
        assert s["Condition"]["ForAllValues:StringEquals"] == {"aws:TagKeys": [Tags.ACTION_AFTER]}


def test_its_role_may_read_cloudtrails_attach_history_and_no_other_guard_may(
    template: Any,
) -> None:
    """The proof before a volume is deleted (no AttachVolume since its snapshot began) is a
    CloudTrail lookup: the stale-volume role may make it, read-only, and nothing else of
    CloudTrail; the other guards' roles may not make it at all."""
    _, fn = _guard(template)
    statements = role_statements(template, fn["Properties"]["Role"]["Fn::GetAtt"][0])
    trail = [(a, s) for s in statements for a in actions(s) if a.startswith("cloudtrail:")]
    assert [a for a, _ in trail] == ["cloudtrail:LookupEvents"]
    ((_, lookup),) = trail
    assert lookup["Effect"] == "Allow" and lookup["Resource"] == "*"
    for other in ("idle-notebooks", "stale-objects"):
        _, fn = guard_function(template, other)
        granted = {
            a
            for s in role_statements(template, fn["Properties"]["Role"]["Fn::GetAtt"][0])
            for a in actions(s)
        }
        assert not {a for a in granted if a.startswith("cloudtrail:")}, other
