"""The organization adapters' calls against their permission declarations (read from the
source, as tests/infra/test_permissions.py does for the ledger)."""

from __future__ import annotations

import ast
import inspect

import boto3

from costguard.adapters import member, organizations, work_queue
from costguard.iam import ORG_DISCOVERY, ORG_MEMBER_EXTRA, PROBE_ACTIONS, all_actions


def _calls(module: object, service: str, attribute: str) -> set[str]:
    """``self.<attribute>.<method>(…)`` and ``get_paginator("<method>")`` as IAM actions."""
    api = boto3.client(service, region_name="us-east-1").meta.method_to_api_mapping
    found: set[str] = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):  # type: ignore[arg-type]
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        target = node.func.value
        if not (isinstance(target, ast.Attribute) and target.attr == attribute):
            continue
        method = node.func.attr
        if method == "get_paginator":
            (arg,) = node.args
            assert isinstance(arg, ast.Constant)
            method = str(arg.value)
        found.add(f"{service}:{api[method]}")
    return found


def test_discovery_is_granted_exactly_what_it_calls() -> None:
    assert _calls(organizations, "organizations", "_org") == all_actions(ORG_DISCOVERY)


def test_the_work_queue_sends_only_batches_authorized_as_send_message() -> None:
    # IAM authorizes SendMessageBatch entry by entry as sqs:SendMessage
    assert _calls(work_queue, "sqs", "_sqs") == {"sqs:SendMessageBatch"}
    assert work_queue.QUEUE_ACTIONS == ("sqs:SendMessage",)


def test_the_member_role_s_extra_is_what_the_regions_item_calls() -> None:
    source = inspect.getsource(member.MemberRegions)
    assert "describe_regions(" in source
    assert all_actions(ORG_MEMBER_EXTRA) == {"ec2:DescribeRegions"}
    assert "ec2:DescribeRegions" not in PROBE_ACTIONS
