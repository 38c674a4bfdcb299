"""Organization mode on moto: a project's budget tagged on its resources in member accounts
is the budget of its roll-up, as it is in one account (the central table still wins)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.slices import DynamoDbSliceBook
from costguard.domain.findings import FindingCode
from costguard.domain.org import Slice
from costguard.domain.spend import BudgetStatus
from costguard.domain.tags import Tags
from costguard.settings import Settings
from costguard.wiring.org import build_slice_work
from tests.functional.test_org_slices import HUB, REGIONS, T0, A, B, _member_session

EAST, WEST = Slice(A, "us-east-1"), Slice(B, "us-west-2")


@pytest.fixture
def hub(aws: Any) -> Iterator[Any]:
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    yield aws


def _gpu(base: Any, s: Slice, **tags: str) -> None:
    """A g5.xlarge in ``s`` carrying ``tags``, running since an hour before T0."""
    from moto.ec2.models import ec2_backends

    ec2 = _member_session(base, s.account, s.region).client("ec2")
    instance = ec2.run_instances(
        ImageId="ami-12345678",
        MinCount=1,
        MaxCount=1,
        InstanceType="g5.xlarge",
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )["Instances"][0]
    backend = ec2_backends[s.account][s.region]
    launched = (T0 - timedelta(hours=1)).replace(tzinfo=None)
    backend.get_instance(instance["InstanceId"]).launch_time = launched


def _settings(projects: dict[str, Any]) -> Settings:
    return Settings(
        table_name="ledger",
        scope=HUB,
        regions=REGIONS,
        projects=projects,
        sagemaker_studio=False,
    )


def _aggregate(hub: Any, settings: Settings) -> Any:
    DynamoDbSliceBook(hub.client("dynamodb", region_name="us-east-1"), "ledger", HUB).plan(
        T0, [EAST, WEST], T0 + timedelta(minutes=10)
    )
    work = build_slice_work(settings, hub)
    first = work.run(T0, EAST, T0)
    last = work.run(T0, WEST, T0)
    assert first.aggregated is None and last.aggregated is not None
    return last.aggregated


def test_a_budget_tagged_in_member_accounts_is_the_rolled_up_project_s_budget(
    hub: Any,
) -> None:
    # GIVEN project vision's GPUs in two accounts, each tagged with a budget (50 and 80
    # USD), and no budget for it in the central table
    _gpu(hub, EAST, **{Tags.PROJECT: "vision", Tags.BUDGET: "50"})
    _gpu(hub, WEST, **{Tags.PROJECT: "vision", Tags.BUDGET: "80"})
    # WHEN the two slices of T0 come in and the last one aggregates the time
    report = _aggregate(hub, _settings({}))
    # THEN the roll-up has the lowest tagged budget, as one account's scan would, and the
    # forecast of two g5s for the rest of the month is over it
    (vision,) = [p for p in report.projects if p.project == "vision"]
    assert (vision.budget_usd, vision.budget_source) == (Decimal(50), "tag")
    assert vision.status is BudgetStatus.OVER
    # AND the two accounts' disagreement is a finding naming both slices
    conflicts = [f for f in report.findings if f.code is FindingCode.BUDGET_CONFLICT]
    assert len(conflicts) == 1 and conflicts[0].resource == "project/vision"
    assert A in conflicts[0].message and B in conflicts[0].message


def test_the_central_table_wins_over_budgets_tagged_in_member_accounts(hub: Any) -> None:
    # GIVEN a tagged budget of 50 USD in one account, and 5,000 in the central table
    _gpu(hub, EAST, **{Tags.PROJECT: "vision", Tags.BUDGET: "50"})
    _gpu(hub, WEST, **{Tags.PROJECT: "vision"})
    # WHEN the time is aggregated
    report = _aggregate(hub, _settings({"vision": {"budget": 5000}}))
    # THEN the table's budget applies, and no tag conflicts with anything
    (vision,) = [p for p in report.projects if p.project == "vision"]
    assert (vision.budget_usd, vision.budget_source) == (Decimal(5000), "config")
    assert not [f for f in report.findings if f.code is FindingCode.BUDGET_CONFLICT]


def test_owners_tagged_in_member_accounts_are_the_rolled_up_project_s_owners(
    hub: Any,
) -> None:
    # GIVEN project vision's GPUs in two accounts, each tagged with an owner, and no
    # owners in the central table
    _gpu(hub, EAST, **{Tags.PROJECT: "vision", Tags.OWNER: "ana@example.com"})
    _gpu(hub, WEST, **{Tags.PROJECT: "vision", Tags.OWNER: "bo@example.com"})
    # WHEN the time is aggregated
    report = _aggregate(hub, _settings({}))
    # THEN the roll-up's owners are both, as one account's scan would union them, so
    # the budget alerts reach the people of both accounts
    (vision,) = [p for p in report.projects if p.project == "vision"]
    assert set(vision.owners) == {"ana@example.com", "bo@example.com"}


def test_the_central_table_s_owners_win_over_owners_tagged_in_member_accounts(
    hub: Any,
) -> None:
    _gpu(hub, EAST, **{Tags.PROJECT: "vision", Tags.OWNER: "ana@example.com"})
    _gpu(hub, WEST, **{Tags.PROJECT: "vision"})
    report = _aggregate(hub, _settings({"vision": {"owners": ["lead@example.com"]}}))
    (vision,) = [p for p in report.projects if p.project == "vision"]
    assert vision.owners == ("lead@example.com",)


def test_the_roll_up_sends_one_advice_digest_per_project_across_accounts(hub: Any) -> None:
    import json

    from moto.ec2.models import ec2_backends

    # GIVEN project llm's on-demand GPUs running for three days in two accounts (spot with
    # checkpointing would save money on each), and the digest hour is the scheduled time's
    sqs = hub.client("sqs", region_name="us-east-1")
    sns = hub.client("sns", region_name="us-east-1")
    topic = sns.create_topic(Name="alerts")["TopicArn"]
    inbox = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn["QueueArn"])
    for s in (EAST, WEST):
        _gpu(hub, s, **{Tags.PROJECT: "llm"})
        for r in ec2_backends[s.account][s.region].reservations.values():
            for i in r.instances:
                i.launch_time = (T0 - timedelta(days=3)).replace(tzinfo=None)
    settings = _settings({}).model_copy(
        update={
            "topic_arn": topic,
            "digest_hour_utc": T0.hour,
            "advice_min_monthly_usd": Decimal(1),
        }
    )
    # WHEN the two slices of T0 come in and the last one aggregates the time
    report = _aggregate(hub, settings)
    # THEN one advice digest is sent for llm, naming both accounts' instances
    digests = [a for a in report.alerts if a.startswith("advice-digest")]
    assert len(digests) == 1, report.alerts
    bodies = []
    while got := sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages"):
        bodies += [json.loads(json.loads(m["Body"])["Message"]) for m in got]
        for m in got:
            sqs.delete_message(QueueUrl=inbox, ReceiptHandle=m["ReceiptHandle"])
    (digest,) = [b for b in bodies if b["kind"] == "advice-digest"]
    assert digest["project"] == "llm"
    text = json.dumps(digest)
    assert A in text and B in text
