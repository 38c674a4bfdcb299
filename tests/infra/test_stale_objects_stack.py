"""The stale-object guard (the S3 janitor) as deployed: its own Lambda, hourly schedule and
role, and what that role may and may not do."""

from __future__ import annotations

import json
from typing import Any

from costguard.env import Env
from costguard.iam import THIS_ACCOUNT_ONLY
from tests.infra.guard_template import actions, guard_function, role_statements


def _guard(template: Any) -> tuple[str, dict[str, Any]]:
    return guard_function(template, "stale-objects")


def test_the_sweep_runs_hourly_within_the_claim_lease_on_its_own_lambda(template: Any) -> None:
    # GIVEN the synthesized stack
    logical, fn = _guard(template)
    # THEN the janitor is the act handler bound to stale-objects, with a timeout under the
    # executor's 15-minute claim lease (two runs never sweep one bucket at once)
    assert fn["Properties"]["Handler"] == "costguard.handlers.act.handler"
    assert fn["Properties"]["Timeout"] == 600
    assert fn["Properties"]["Environment"]["Variables"][Env.DRY_RUN] == "true"
    (schedule,) = [
        s
        for s in template.find_resources("AWS::Scheduler::Schedule").values()
        if json.loads(s["Properties"]["Target"].get("Input", "{}")).get("guard") == "stale-objects"
    ]
    assert schedule["Properties"]["ScheduleExpression"] == "rate(1 hour)"
    assert logical in json.dumps(schedule["Properties"]["Target"]["Arn"])


def test_its_role_deletes_only_current_objects_of_this_accounts_buckets_and_nothing_else(
    template: Any,
) -> None:
    _, fn = _guard(template)
    statements = role_statements(template, fn["Properties"]["Role"]["Fn::GetAtt"][0])
    granted = {a for s in statements for a in actions(s)}
    # No version purge, no bucket tagging or policy, no other guard's verbs
    for never in (
        "s3:DeleteObjectVersion",
        "s3:PutBucketTagging",
        "s3:PutBucketPolicy",
        "s3:DeleteBucket",
        "ec2:StopInstances",
        "ec2:DeleteVolume",
        "sagemaker:StopNotebookInstance",
    ):
        assert never not in granted, never
    # Every S3 mutation is limited to this account's buckets (S3 cannot tag-condition them)
    mutations = [
        s
        for s in statements
        if any(a in {"s3:DeleteObject", "s3:PutLifecycleConfiguration"} for a in actions(s))
    ]
    assert {a for s in mutations for a in actions(s)} == {
        "s3:DeleteObject",
        "s3:PutLifecycleConfiguration",
    }
    for s in mutations:
        assert s["Condition"] == dict(THIS_ACCOUNT_ONLY), s
