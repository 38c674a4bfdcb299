"""SNS on moto: one publish, per-protocol renderings, routing by MessageAttributes."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.sns import SNS_MAX_BYTES, SnsNotifier
from costguard.domain.alerts import (
    Alert,
    AlertKind,
    AlertResource,
    AlertSeverity,
    ProjectNumbers,
    budget_alerts,
)
from costguard.domain.models import Resource, ResourceKind
from costguard.ports import Inventory
from costguard.rendering import sns_message
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.scan import ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.clock import MIDDAY
from tests.support.fakes import StaticInventory, StaticSpotPrices


def queue(aws: Any, topic: str, name: str, filter_policy: dict[str, Any] | None = None) -> str:
    sqs = aws.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    attrs = {"RawMessageDelivery": "true"}
    if filter_policy:
        attrs["FilterPolicy"] = json.dumps(filter_policy)
    aws.client("sns", region_name="us-east-1").subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes=attrs
    )
    return str(url)


def test_queues_get_the_machine_json_and_filter_policies_route_by_project(aws: Any) -> None:
    sns = aws.client("sns", region_name="us-east-1")
    topic = sns.create_topic(Name="costguard-alerts")["TopicArn"]
    everything = queue(aws, topic, "all")
    vision_only = queue(aws, topic, "vision", {"project": ["vision"]})
    critical_only = queue(aws, topic, "critical", {"severity": ["critical"]})

    numbers = ProjectNumbers("llm", Decimal(1000), Decimal(1200), Decimal(5000), Decimal(55))
    alerts = budget_alerts(numbers, (50, 80, 100), MIDDAY)
    notifier = SnsNotifier(sns, topic)
    for a in alerts:
        assert notifier.publish(a)

    sqs = aws.client("sqs", region_name="us-east-1")

    def drain(url: str) -> list[dict[str, Any]]:
        msgs = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        ).get("Messages", [])
        return [json.loads(m["Body"]) for m in msgs]

    received = drain(everything)
    assert sorted(m["kind"] for m in received) == ["budget-forecast", "budget-threshold"]
    assert all(m["schema"] == "costguard.alert/v1" and m["project"] == "llm" for m in received)
    assert drain(vision_only) == []
    assert {m["alert_id"] for m in drain(critical_only)} == {
        a.alert_id for a in alerts if a.severity.value == "critical"
    }


# -- size: no alert is too big to send ---------------------------------------------------------

LONG_NAME = "東京の学習クラスタ-🚀-" * 12  # 14 characters x 12, 3-4 bytes each in UTF-8


def drain(aws: Any, url: str) -> list[dict[str, Any]]:
    sqs = aws.client("sqs", region_name="us-east-1")
    msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in msgs]


def huge_alert(n: int) -> Alert:
    """An alert built by hand, past the domain's own cap: the adapter must still send it."""
    resources = tuple(
        AlertResource(
            f"us-east-1/ec2-instance/i-{i:017x}",
            "ec2-instance",
            "us-east-1",
            "p5.48xlarge" if i % 50 == 0 else "g5.xlarge",
            Decimal("98.32") if i % 50 == 0 else Decimal("1.006"),
            f"{LONG_NAME}{i}@example.com",
        )
        for i in range(n)
    )
    return Alert(
        alert_id="unattributed-spend/2026-11-20/x",
        kind=AlertKind.UNATTRIBUTED,
        project=None,
        severity=AlertSeverity.CRITICAL,
        title=f"{LONG_NAME}: {n} resources",
        summary=LONG_NAME * 20,
        at=MIDDAY,
        owners=tuple(r.owner for r in resources if r.owner),
        resources=resources,
        details=tuple(f"{LONG_NAME} {i}" for i in range(2000)),
    )


def test_an_alert_with_thousands_of_unicode_named_resources_is_shrunk_to_fit(aws: Any) -> None:
    sns = aws.client("sns", region_name="us-east-1")
    topic = sns.create_topic(Name="costguard-alerts")["TopicArn"]
    everything = queue(aws, topic, "all")
    alert = huge_alert(5000)
    assert len(sns_message(alert).encode()) > SNS_MAX_BYTES  # as rendered, far too big
    # WHEN it is published
    assert SnsNotifier(sns, topic).publish(alert)
    # THEN it arrived, with the dearest resources first and a count of the rest
    (received,) = drain(aws, everything)
    assert received["alert_id"] == alert.alert_id
    assert 0 < len(received["resources"]) < 5000
    assert received["resources"][0]["usd_per_hour"] == 98.32
    omitted = 5000 - len(received["resources"])
    assert any(f"{omitted:,} more" in d for d in received["details"])


class CapturingSns:
    """Keeps the request; answers like SNS. The size check must not rely on the service."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def publish(self, **request: Any) -> dict[str, str]:
        self.requests.append(request)
        return {"MessageId": "m-1"}


def request_bytes(request: dict[str, Any]) -> int:
    attrs = request.get("MessageAttributes", {})
    return (
        len(request["Message"].encode())
        + len(request.get("Subject", "").encode())
        + sum(
            len(k.encode()) + len(v["DataType"].encode()) + len(v["StringValue"].encode())
            for k, v in attrs.items()
        )
    )


@pytest.mark.parametrize("n", [0, 1, 93, 400, 5000])
def test_the_limit_is_counted_in_bytes_not_characters(n: int) -> None:
    # GIVEN multi-byte text whose character count alone would pass a naive check
    alert = huge_alert(n)
    client = CapturingSns()
    SnsNotifier(client, "arn:aws:sns:us-east-1:123456789012:t").publish(alert)
    (request,) = client.requests
    assert request_bytes(request) <= SNS_MAX_BYTES
    assert request["MessageStructure"] == "json"
    assert set(json.loads(request["Message"])) >= {"default", "email", "sqs", "https", "lambda"}


def test_a_small_alert_is_sent_unchanged() -> None:
    numbers = ProjectNumbers("llm", Decimal(1000), Decimal(1200), Decimal(5000), Decimal(55))
    (alert, _) = budget_alerts(numbers, (50, 80, 100), MIDDAY)
    client = CapturingSns()
    SnsNotifier(client, "arn:aws:sns:us-east-1:123456789012:t").publish(alert)
    assert client.requests[0]["Message"] == sns_message(alert)


def test_thousands_of_untagged_gpus_with_unicode_owners_alert_through_sns(aws: Any) -> None:
    # GIVEN 3,000 untagged GPU instances, each with a long Unicode owner tag
    sns = aws.client("sns", region_name="us-east-1")
    topic = sns.create_topic(Name="costguard-alerts")["TopicArn"]
    everything = queue(aws, topic, "all")
    fleet = tuple(
        Resource(
            id=f"i-{n:017x}",
            kind=ResourceKind.EC2_INSTANCE,
            region="us-east-1",
            instance_type="g5.xlarge",
            launched_at=MIDDAY - timedelta(hours=3),
            tags={"costguard:owner": f"{LONG_NAME}{n}"[:256]},
        )
        for n in range(3000)
    )
    ledger = InMemoryLedger()
    report = ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory(fleet)})],
        StaticSpotPrices({}),
        fixture_catalog(),
        ledger,
        ScanSettings(scope="acct", regions=("us-east-1",)),
    ).run(MIDDAY)
    # WHEN the scan alerts through SNS
    sent = AlertService(ledger, SnsNotifier(sns, topic), AlertSettings(scope="acct")).run(
        report, report.previous, MIDDAY
    )
    # THEN the unattributed alert and the digest went out
    assert sorted(a.kind.value for a in sent) == ["findings-digest", "unattributed-spend"]
    received = drain(aws, everything)
    (unattributed,) = [m for m in received if m["kind"] == "unattributed-spend"]
    assert unattributed["facts"]["resources"] == "3000"
