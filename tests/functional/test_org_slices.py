"""Organization mode on moto: member accounts through assumed roles, slices exactly once,
aggregation once per scheduled time, a poison account isolated and reported."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.exceptions import ClientError

from costguard.adapters.dynamodb import DynamoDbLedger
from costguard.adapters.slices import DynamoDbSliceBook
from costguard.adapters.work_queue import SqsWorkQueue, message_group
from costguard.domain.directory import Work, WorkKind
from costguard.domain.org import Slice, slice_scope
from costguard.handlers.org import consume
from costguard.services.org import SliceBook
from costguard.settings import Settings
from costguard.wiring.org import build_slice_work

HUB = "111111111111"
A, B, C = "222222222222", "333333333333", "444444444444"
REGIONS = ("us-east-1", "us-west-2")
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=15)


def plan_and_enqueue(
    book: SliceBook,
    sqs: Any,
    queue_url: str,
    tick: datetime,
    slices: Sequence[Slice],
    deadline: timedelta,
    per_account_cap: int = 1,
) -> int:
    """The fan-out of a fixed list of slices (no directory): plan the time (once), then
    one scan message per slice (deduplicated)."""
    book.plan(tick, slices, tick + deadline)
    queue = SqsWorkQueue(sqs, queue_url, per_account_cap)
    return queue.send([Work(tick, WorkKind.SCAN, s) for s in slices])


def slices_of(accounts: Iterable[str], regions: Iterable[str]) -> list[Slice]:
    return [Slice(a, r) for a in dict.fromkeys(accounts) for r in dict.fromkeys(regions)]


def _member_session(base: Any, account: str, region: str) -> Any:
    import boto3

    creds = base.client("sts").assume_role(
        RoleArn=f"arn:aws:iam::{account}:role/setup", RoleSessionName="setup"
    )["Credentials"]
    return boto3.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=region,
    )


def _launch(base: Any, account: str, region: str, project: str, when: datetime) -> None:
    """A tagged GPU in ``account``, launched at ``when`` (back-dated on moto's backend: freezegun
    would leak frozen time into later tests)."""
    from moto.ec2.models import ec2_backends

    ec2 = _member_session(base, account, region).client("ec2")
    instance = ec2.run_instances(
        ImageId="ami-12345678",
        MinCount=1,
        MaxCount=1,
        InstanceType="g5.xlarge",
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "costguard:project", "Value": project}]}
        ],
    )["Instances"][0]
    backend = ec2_backends[account][region]
    backend.get_instance(instance["InstanceId"]).launch_time = when.replace(tzinfo=None)


def _deny_assume(base: Any, account: str) -> None:
    """The member stack is missing in ``account``: STS refuses the hub (moto does not check)."""

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if f"::{account}:" in params.get("RoleArn", ""):
            raise ClientError(
                {"Error": {"Code": "AccessDenied", "Message": f"not authorized on {account}"}},
                "AssumeRole",
            )

    base.events.register("provide-client-params.sts.AssumeRole", refuse)


@pytest.fixture
def hub(aws: Any) -> Iterator[Any]:
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    yield aws


def _settings(**extra: Any) -> Settings:
    return Settings(
        table_name="ledger",
        scope=HUB,
        regions=REGIONS,
        projects={"llm": {"budget": 100}},
        sagemaker_studio=False,
        **extra,
    )


def _event(*items: tuple[datetime, Slice], ids: list[str] | None = None) -> dict[str, Any]:
    records = []
    for i, (tick, s) in enumerate(items):
        records.append(
            {
                "messageId": (ids or [f"m{i}" for i in range(len(items))])[i],
                "receiptHandle": "r",
                "body": json.dumps(
                    {"time": tick.isoformat(), "account": s.account, "region": s.region}
                ),
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "0",
                    "SenderId": "x",
                    "ApproximateFirstReceiveTimestamp": "0",
                    "MessageGroupId": message_group(s, 1),
                    "MessageDeduplicationId": f"{i}",
                    "SequenceNumber": str(i),
                },
                "messageAttributes": {},
                "md5OfBody": "x",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:111111111111:work.fifo",
                "awsRegion": "us-east-1",
            }
        )
    return {"Records": records}


def _book(session: Any) -> DynamoDbSliceBook:
    return DynamoDbSliceBook(session.client("dynamodb", region_name="us-east-1"), "ledger", HUB)


def _ledger(session: Any) -> DynamoDbLedger:
    return DynamoDbLedger(session.client("dynamodb", region_name="us-east-1"), "ledger")


def test_accounts_are_scanned_through_their_own_assumed_credentials(hub: Any) -> None:
    # GIVEN a GPU in account A only, and a plan of A and B in one region
    _launch(hub, A, "us-east-1", "llm", T0 - timedelta(hours=1))
    slices = [Slice(A, "us-east-1"), Slice(B, "us-east-1")]
    _book(hub).plan(T0, slices, T0 + timedelta(minutes=10))
    # WHEN both slices are consumed
    out = consume(_event((T0, slices[0]), (T0, slices[1])), build_slice_work(_settings(), hub), T0)
    # THEN both succeed, A's ledger holds the GPU and B's holds nothing
    assert out["batchItemFailures"] == []
    a = _ledger(hub).observations(slice_scope(HUB, slices[0]))
    instances = [k for k in a if "/ec2-instance/" in k]
    assert len(instances) == 1 and all(k.startswith(f"{A}/us-east-1/") for k in a)
    assert _ledger(hub).observations(slice_scope(HUB, slices[1])) == {}


def test_a_duplicate_message_adds_nothing_and_a_late_slice_is_counted_once(hub: Any) -> None:
    # GIVEN a GPU in account A, running since an hour before T0
    _launch(hub, A, "us-east-1", "llm", T0 - timedelta(hours=1))
    s = Slice(A, "us-east-1")
    book, ledger = _book(hub), _ledger(hub)
    scope = slice_scope(HUB, s)
    work = build_slice_work(_settings(), hub)
    for tick in (T0, T1):
        book.plan(tick, [s], tick + timedelta(minutes=10))
    # WHEN T0's message is delivered twice, in one batch and again later
    consume(_event((T0, s), (T0, s)), work, T0)
    first = ledger.month_totals(scope, "2026-11")["llm"].usd
    again = consume(_event((T0, s)), build_slice_work(_settings(), hub), T0)
    # THEN the second delivery changes nothing
    assert again["batchItemFailures"] == []
    assert ledger.month_totals(scope, "2026-11")["llm"].usd == first
    # WHEN T1 is committed, then T0 arrives once more (late, after T1)
    consume(_event((T1, s)), work, T1)
    after_t1 = ledger.month_totals(scope, "2026-11")["llm"].usd
    consume(_event((T0, s)), work, T1 + timedelta(minutes=1))
    # THEN the late slice is refused by the ledger: counted once, by T1
    assert ledger.month_totals(scope, "2026-11")["llm"].usd == after_t1
    g5 = after_t1 / Decimal("1.25")  # one hour and a quarter at the g5.xlarge rate
    assert first < after_t1 and g5 > 0


def test_a_late_slice_of_an_aggregated_time_counts_in_the_next_aggregation(hub: Any) -> None:
    # GIVEN two slices for T0, one of which is late: T0 is aggregated at its deadline without it
    _launch(hub, A, "us-east-1", "llm", T0 - timedelta(hours=1))
    _launch(hub, B, "us-east-1", "llm", T0 - timedelta(hours=1))
    a, b = Slice(A, "us-east-1"), Slice(B, "us-east-1")
    book = _book(hub)
    book.plan(T0, [a, b], T0 + timedelta(minutes=10))
    work = build_slice_work(_settings(), hub)
    consume(_event((T0, a)), work, T0)
    from costguard.wiring.org import build_slice_work as build

    aggregation = build(_settings(), hub)._aggregation
    assert aggregation is not None
    (at_deadline,) = aggregation.sweep(T0 + timedelta(minutes=11), timedelta(hours=1))
    assert at_deadline.missing == (b,)
    mtd_t0 = next(p for p in at_deadline.projects if p.project == "llm").month_to_date_usd
    # WHEN B's T0 slice comes in late, then T1 runs for both
    consume(_event((T0, b)), work, T0 + timedelta(minutes=12))
    book.plan(T1, [a, b], T1 + timedelta(minutes=10))
    result = consume(_event((T1, a), (T1, b)), work, T1)
    assert result["batchItemFailures"] == []
    # THEN T1's aggregation (run by the slice that completed it) holds B once, and T0
    # is not aggregated twice
    assert aggregation.sweep(T1 + timedelta(hours=1), timedelta(hours=2)) == []
    plan = book.get(T1)
    assert plan is not None and plan.complete and plan.aggregated_at is not None
    ledger = _ledger(hub)
    total = sum(ledger.month_totals(slice_scope(HUB, s), "2026-11")["llm"].usd for s in (a, b))
    # each account ran 1h15m by T1: the roll-up is exactly the two slices' ledgers
    assert total > mtd_t0 * 2


def test_a_poison_account_is_retried_reported_and_never_blocks_the_others(hub: Any) -> None:
    # GIVEN three accounts, where B has no member role (STS refuses the hub)
    for account in (A, C):
        _launch(hub, account, "us-east-1", "llm", T0 - timedelta(hours=2))
    _deny_assume(hub, B)
    slices = [Slice(x, "us-east-1") for x in (A, B, C)]
    book = _book(hub)
    book.plan(T0, slices, T0 + timedelta(minutes=10))
    work = build_slice_work(_settings(), hub)
    # WHEN the batch is delivered three times (SQS redelivers only the failed message)
    out = consume(_event(*[(T0, s) for s in slices], ids=["a", "b", "c"]), work, T0)
    assert out["batchItemFailures"] == [{"itemIdentifier": "b"}]
    for _ in range(2):  # a batch of failures only fails the invocation: SQS retries it
        with pytest.raises(BatchProcessingError):
            consume(_event((T0, slices[1]), ids=["b"]), work, T0)
    # THEN A and C are done, B is recorded with its error and attempts
    plan = book.get(T0)
    assert plan is not None and plan.done == {slices[0], slices[2]}
    assert plan.failures[slices[1]].code == "AccessDenied"
    assert plan.failures[slices[1]].attempts == 3
    # AND at the deadline the aggregation reports B by account, and rolls A and C up
    aggregation = work._aggregation
    assert aggregation is not None
    (report,) = aggregation.sweep(T0 + timedelta(minutes=10), timedelta(hours=1))
    assert report.missing == (slices[1],)
    (finding,) = report.findings
    assert (
        B in finding.message and "AccessDenied" in finding.message and "3 time" in finding.message
    )
    llm = report.rollups["llm"]
    assert llm.accounts == {A, C}
    assert llm.run_rate_usd_per_hour > 0
    # AND the finding is in the hub's ledger for the day
    assert any(B in f.resource for f in _ledger(hub).findings(HUB, "2026-11-20"))


def test_the_missing_account_is_alerted_once_by_name(hub: Any) -> None:
    # GIVEN an alert topic, and account B refusing the hub
    sns = hub.client("sns", region_name="us-east-1")
    topic = sns.create_topic(Name="alerts")["TopicArn"]
    sqs = hub.client("sqs", region_name="us-east-1")
    inbox = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn)
    _deny_assume(hub, B)
    slices = [Slice(A, "us-east-1"), Slice(B, "us-east-1")]
    book = _book(hub)
    book.plan(T0, slices, T0 + timedelta(minutes=10))
    work = build_slice_work(_settings(topic_arn=topic), hub)
    consume(_event(*[(T0, s) for s in slices]), work, T0)
    aggregation = work._aggregation
    assert aggregation is not None
    # WHEN the deadline passes, and the sweep runs twice (a retried fan-out)
    (report,) = aggregation.sweep(T0 + timedelta(minutes=10), timedelta(hours=1))
    assert aggregation.sweep(T0 + timedelta(minutes=11), timedelta(hours=1)) == []
    # THEN one alert names account B
    messages = sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10)["Messages"]
    titles = [json.loads(m["Body"])["Subject"] for m in messages]
    assert [t for t in titles if B in t] != [], titles
    assert len([a for a in report.alerts if a.startswith("scan-failed/org/")]) == 1


def test_fan_out_plans_once_and_caps_each_account_with_message_groups(hub: Any) -> None:
    # GIVEN a FIFO work queue and 3 accounts x 2 regions
    sqs = hub.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="work.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    slices = slices_of([A, B, C, A], REGIONS)
    book = _book(hub)
    # WHEN the fan-out runs twice for the same time (a retried schedule)
    for _ in range(2):
        plan_and_enqueue(book, sqs, url, T0, slices, timedelta(minutes=10), per_account_cap=1)
    # THEN the plan holds 6 slices, and SQS holds 6 messages (deduplicated), grouped by account
    plan = book.get(T0)
    assert plan is not None and len(plan.expected) == 6
    bodies, groups = [], set()
    while True:
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"]
        ).get("Messages", [])
        if not got:
            break
        for m in got:
            bodies.append(m["Body"])
            groups.add(m["Attributes"]["MessageGroupId"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert len(bodies) == 6
    assert groups == {A, B, C}


def test_per_account_cap_spreads_regions_over_at_most_cap_groups() -> None:
    regions = ["us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1"]
    for cap in (1, 2, 3):
        groups = {message_group(Slice(A, r), cap) for r in regions}
        assert 1 <= len(groups) <= cap
        assert all(g.split("#")[0] == A for g in groups)
    assert message_group(Slice(A, "us-east-1"), 2) == message_group(Slice(A, "us-east-1"), 2)


def test_a_slice_without_plan_still_commits_its_ledger_once(hub: Any) -> None:
    # A message whose plan expired (a very late redelivery) is scanned and refused or
    # committed by the ledger alone; it aggregates nothing.
    _launch(hub, A, "us-east-1", "llm", T0 - timedelta(hours=1))
    s = Slice(A, "us-east-1")
    out = consume(_event((T0, s)), build_slice_work(_settings(), hub), T0)
    assert out["batchItemFailures"] == []
    assert _ledger(hub).watermark(slice_scope(HUB, s)) == T0
