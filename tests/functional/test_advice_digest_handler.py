"""The scan Lambda on moto: an idle A100 endpoint's advice reaches the topic once a day.

Everything real but AWS itself: the handler reads the endpoint's GPUUtilization from
CloudWatch (back-dated datapoints), advises, claims the digest in the DynamoDB ledger and
publishes it to SNS, whose SQS subscriber receives the machine JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.env import Env
from tests.support.clock import MIDDAY
from tests.support.endpoints import oversized_endpoint, put_gpu

REGION = "us-east-1"


@dataclass
class Context:
    function_name: str = "costguard-scan"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:costguard-scan"
    aws_request_id: str = "req-1"


@pytest.fixture
def deployed(aws: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str]:
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", REGION)
    sns = aws.client("sns", region_name=REGION)
    sqs = aws.client("sqs", region_name=REGION)
    topic = sns.create_topic(Name="alerts")["TopicArn"]
    queue = sqs.create_queue(QueueName="subscriber")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"}
    )
    for key, value in {
        Env.REGIONS: REGION,
        Env.TABLE_NAME: "ledger",
        Env.SCOPE: "123456789012",
        Env.TOPIC_ARN: topic,
        Env.SAGEMAKER_TAGS: "per-resource",
        Env.SAGEMAKER_STUDIO: "false",
    }.items():
        monkeypatch.setenv(key, value)
    oversized_endpoint(aws, "chat", "serving", MIDDAY - timedelta(days=3))
    # 2 % of each of the 8 A100s (16 summed), every 10 minutes for two days
    cw = aws.client("cloudwatch", region_name=REGION)
    points = [(MIDDAY - timedelta(days=1) + timedelta(minutes=10 * n), 16.0) for n in range(288)]
    put_gpu(cw, "chat", "primary", points)
    return aws, queue


def scan_at(at: datetime, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from costguard import events
    from costguard.handlers.scan import handler

    monkeypatch.setattr(events, "CLOCK", lambda: at + timedelta(minutes=1))
    result: dict[str, Any] = handler({"time": at.isoformat()}, Context())
    return result


def advice_received(session: Any, queue: str) -> list[dict[str, Any]]:
    from costguard_demo.plumbing import drain

    return [m for m in drain(session, queue, REGION) if m["kind"] == "advice-digest"]


def test_the_scan_sends_the_days_advice_once_and_again_the_next_day(
    deployed: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, queue = deployed
    # WHEN the scheduled scan runs at 12:00
    scan_at(MIDDAY, monkeypatch)
    # THEN the subscriber receives one info digest naming a smaller type and its saving
    (digest,) = advice_received(session, queue)
    assert digest["project"] == "serving" and digest["severity"] == "info"
    (line,) = digest["details"]
    assert "oversized-endpoint · 123456789012/us-east-1/sagemaker-endpoint/chat/primary" in line
    assert "at 2 % GPU utilization per GPU" in line and "/month" in line and "assuming" in line
    # WHEN it runs again at 12:15 and 13:00 THEN nothing more is received
    scan_at(MIDDAY + timedelta(minutes=15), monkeypatch)
    scan_at(MIDDAY + timedelta(hours=1), monkeypatch)
    assert advice_received(session, queue) == []
    # WHEN the next day's 12:00 scan runs THEN the day's digest is received
    scan_at(MIDDAY + timedelta(days=1), monkeypatch)
    (tomorrow,) = advice_received(session, queue)
    assert tomorrow["alert_id"] == "advice-digest/2026-11-21/p/serving"


@pytest.mark.parametrize(
    ("variable", "value"),
    [(Env.ADVICE_ALERTS, "false"), (Env.ADVICE_MIN_MONTHLY_USD, "1000000")],
)
def test_switched_off_or_under_the_minimum_no_digest_is_sent(
    deployed: tuple[Any, str], monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    session, queue = deployed
    monkeypatch.setenv(variable, value)
    summary = scan_at(MIDDAY, monkeypatch)
    assert advice_received(session, queue) == []
    assert summary["ledger"] == "applied"


def test_a_five_thousand_piece_digest_is_one_message_the_subscriber_receives(aws: Any) -> None:
    # GIVEN a digest of 5,000 pieces of advice, published to SNS as the scan does
    from costguard.adapters.sns import SnsNotifier
    from costguard_demo.plumbing import drain
    from tests.unit.test_advice_alerts import many

    sns = aws.client("sns", region_name=REGION)
    sqs = aws.client("sqs", region_name=REGION)
    topic = sns.create_topic(Name="alerts")["TopicArn"]
    queue = sqs.create_queue(QueueName="subscriber")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"}
    )
    alert = many(5000)
    # WHEN published (moto enforces SNS's 256 KiB, as AWS does)
    SnsNotifier(sns, topic).publish(alert)
    # THEN one message arrives, listing the largest and counting the rest
    (received,) = drain(aws, queue, REGION)
    assert received["alert_id"] == alert.alert_id
    assert received["details"][-1].startswith("and 4,975 more pieces of advice")
