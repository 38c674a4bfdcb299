"""SNS on moto: one publish, per-protocol renderings, routing by MessageAttributes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from costguard.adapters.sns import SnsNotifier
from costguard.domain.alerts import ProjectNumbers, budget_alerts

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


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
    alerts = budget_alerts(numbers, (50, 80, 100), NOW)
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
