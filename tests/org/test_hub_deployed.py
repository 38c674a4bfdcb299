"""The Organization hub as deployed, against what its Lambdas actually call.

Each test is GIVEN/WHEN/THEN and fails on the current code; the docstring names the
user's impact in production.
"""

from __future__ import annotations

import json
import tempfile
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from moto import mock_aws

from costguard.adapters.assume import MemberClients
from costguard.adapters.work_queue import SqsWorkQueue, message_group
from costguard.domain.directory import Work, WorkKind
from costguard.domain.org import Slice
from costguard.handlers.org import consume
from costguard.services.fanout import OrgWork

HUB = "111111111111"
MEMBER = "222222222222"
ORG_ID = "o-abc1234567"
TICK = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


# -- 1. a custom orgMemberRole has no member stack that creates it ------------------------


def _member_roles(context: dict[str, Any]) -> set[str]:
    from costguard_infra.member import build_member_app

    outdir = tempfile.mkdtemp(prefix="costguard-hub-deployed-member-")
    app, _stack = build_member_app(context, outdir=outdir)
    app.synth()
    body = json.loads((Path(outdir) / "CostGuardMember.template.json").read_text())
    return {
        r["Properties"].get("RoleName")
        for r in body["Resources"].values()
        if r["Type"] == "AWS::IAM::Role"
    }


@pytest.mark.infra
def test_member_stack_creates_the_role_a_custom_org_member_role_names() -> None:
    """GIVEN a hub deployed with ``-c orgMemberRole=team-reader`` (README: "the role the
    hub's consumers assume in each member account (the member stack's)"), whose consumers
    are granted ``sts:AssumeRole`` only on ``role/team-reader`` and call it,
    WHEN the operator synthesizes the member StackSet template with the same context,
    THEN it must create ``team-reader``.

    Impact: the member stack ignores ``orgMemberRole`` and always creates
    ``costguard-member-read``, a role the hub is not even allowed to assume. Every work
    item of every account fails AssumeRole (NoSuchEntity/AccessDenied), is dead-lettered,
    and every account is reported ``scan-failed``: the Organization is not guarded at all,
    and there is no supported way to deploy a matching member role.
    """
    roles = _member_roles({"hubAccount": HUB, "orgId": ORG_ID, "orgMemberRole": "team-reader"})
    assert "team-reader" in roles, f"member stack creates {sorted(roles)}, hub assumes team-reader"


# -- 2. STS is called in the member's region, which the hub account may not have enabled -----


class _RecordingSession:
    """A boto3-like base session that records where each client is created."""

    region_name = "us-east-1"

    def __init__(self) -> None:
        self.sts_regions: list[str] = []

    def client(self, service: str, region_name: str | None = None, **_: Any) -> Any:
        assert service == "sts"
        self.sts_regions.append(str(region_name))

        class _Sts:
            def assume_role(self, **_kw: Any) -> dict[str, Any]:
                return {
                    "Credentials": {
                        "AccessKeyId": "AKIA",
                        "SecretAccessKey": "s",
                        "SessionToken": "t",
                    }
                }

        return _Sts()


def test_member_role_is_assumed_through_a_region_the_hub_account_has_enabled() -> None:
    """GIVEN a hub in us-east-1 and a member account that opted in to af-south-1 (an
    opt-in region the hub account never enabled; regions are read *per member account*),
    WHEN the consumer enters the member for the af-south-1 scan or probe item,
    THEN the hub's own credentials must be sent to an STS endpoint enabled for the hub
    account (its home region or the partition's always-on region), not the member's.

    Impact: ``member_clients`` calls ``sts.af-south-1`` with the hub Lambda's credentials;
    STS rejects a call made in a region that is disabled for the *calling* account, so
    every opt-in region a member enabled but the hub did not fails AssumeRole on every
    item: dead-lettered, ``scan-failed``, and the GPUs there are never counted -- exactly
    the regions the code already guards against for DescribeRegions
    (``regions_read_from``), but not for AssumeRole.
    """
    base = _RecordingSession()
    MemberClients(base, "costguard-member-read")(Slice(MEMBER, "af-south-1"))
    assert base.sts_regions == ["us-east-1"], base.sts_regions


# -- 3. FIFO skip_group_on_error burns the receive count of items that never ran ----------


def _same_group_regions(cap: int) -> tuple[str, str]:
    regions = ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-northeast-1"]
    first = regions[0]
    group = zlib.crc32(first.encode()) % cap
    other = next(r for r in regions[1:] if zlib.crc32(r.encode()) % cap == group)
    return first, other


class _Router(OrgWork):
    """The consumer's router, failing one region (e.g. throttled or unreachable)."""

    def __init__(self, failing: str) -> None:
        self.failing = failing
        self.ran: list[str] = []

    def run(self, work: Work, now: datetime) -> Any:  # type: ignore[override]
        if work.slice.region == self.failing:
            raise RuntimeError("ThrottlingException: Rate exceeded")
        self.ran.append(work.slice.region)
        raise _Done


class _Done(Exception):
    pass


def _event(messages: list[dict[str, Any]], arn: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {
                    "ApproximateReceiveCount": m["Attributes"]["ApproximateReceiveCount"],
                    "SentTimestamp": m["Attributes"]["SentTimestamp"],
                    "MessageGroupId": m["Attributes"]["MessageGroupId"],
                    "MessageDeduplicationId": m["Attributes"]["MessageDeduplicationId"],
                    "SequenceNumber": m["Attributes"].get("SequenceNumber", "1"),
                    "SenderId": "x",
                    "ApproximateFirstReceiveTimestamp": "1",
                },
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


@mock_aws
def test_a_healthy_item_behind_a_failing_one_is_run_before_it_is_dead_lettered() -> None:
    """GIVEN the deployed FIFO work queue (maxReceiveCount = orgMaxReceives = 3, default
    per-account cap 2) and two regions of one account that share a message group, the
    first of which keeps failing (throttled, or a region STS refuses),
    WHEN the event source mapping delivers the group's items and ``consume`` reports
    the failure with ``skip_group_on_error=True`` (the healthy item is reported failed
    *without running*), for as many deliveries as SQS allows,
    THEN the healthy item must have been scanned (or still wait in the queue) -- not be
    dead-lettered without ever running.

    Impact: every skipped delivery counts as a receive, so the healthy region reaches
    maxReceiveCount together with the failing one and SQS moves it to the DLQ untried.
    One bad region of an account dead-letters the other regions of its group: their
    spend is never counted (reported "unknown"/``scan-failed`` although their scan would
    have worked), and the DLQ alarm blames healthy work. README: "only the failed
    account's later messages wait" -- they do not wait, they are discarded.
    """
    sqs = boto3.client("sqs", region_name="us-east-1")
    dlq_url = sqs.create_queue(QueueName="dl.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    url = sqs.create_queue(
        QueueName="work.fifo",
        Attributes={
            "FifoQueue": "true",
            "ContentBasedDeduplication": "false",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}),
        },
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    bad, good = _same_group_regions(2)
    assert message_group(Slice(MEMBER, bad), 2) == message_group(Slice(MEMBER, good), 2)
    SqsWorkQueue(sqs, url, 2).send(
        [
            Work(TICK, WorkKind.SCAN, Slice(MEMBER, bad)),
            Work(TICK, WorkKind.SCAN, Slice(MEMBER, good)),
        ]
    )
    router = _Router(failing=bad)
    for _ in range(6):
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], VisibilityTimeout=30
        ).get("Messages", [])
        if not got:
            break
        try:
            response = consume(_event(got, arn), router, TICK)
            failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        except BatchProcessingError:  # every record failed: the invocation fails
            failed = {m["MessageId"] for m in got}
        for m in got:  # what the event source mapping does with the outcome
            if m["MessageId"] in failed:
                sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
                )
            else:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    dead = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10).get("Messages", [])
    dead_regions = sorted(json.loads(m["Body"])["region"] for m in dead)
    assert good in router.ran or good not in dead_regions, (
        f"{good} was dead-lettered without ever running (DLQ: {dead_regions})"
    )
