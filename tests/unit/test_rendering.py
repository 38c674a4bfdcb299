"""Golden renderings of one alert per channel. Set UPDATE_GOLDEN=1 to rewrite them."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from costguard.domain.alerts import AlertKind, AlertResource, anomaly_alert
from costguard.rendering import (
    chat_notification,
    email_subject,
    email_text,
    machine_json,
    slack_blocks,
    slack_escape,
    sns_attributes,
    sns_message,
)

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def spike() -> object:
    causes = [
        AlertResource(
            "us-east-1/ec2-instance/i-0abc",
            "ec2-instance",
            "us-east-1",
            "p5.48xlarge",
            Decimal("55.04"),
            "dave@example.com",
            "new",
        ),
        AlertResource(
            "us-east-1/sagemaker-endpoint/ranker/primary",
            "sagemaker-endpoint",
            "us-east-1",
            "ml.g5.xlarge",
            Decimal("4.224"),
            None,
            "+$2.8160/h",
        ),
    ]
    return anomaly_alert(
        "llm-pretraining",
        Decimal("120.40"),
        Decimal("255.30"),
        causes,
        ("alice@example.com",),
        NOW,
        "20261120T1200",
    )


def check(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(actual)
    assert actual == path.read_text(), f"{name} changed; UPDATE_GOLDEN=1 to accept"


def test_email_golden() -> None:
    alert = spike()
    check("anomaly.email.txt", email_subject(alert) + "\n\n" + email_text(alert) + "\n")  # type: ignore[arg-type]


def test_chat_golden_follows_the_amazon_q_custom_notification_schema() -> None:
    payload = chat_notification(spike())  # type: ignore[arg-type]
    assert payload["version"] == "1.0" and payload["source"] == "custom"
    assert set(payload["content"]) >= {"description"}
    check("anomaly.chat.json", json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def test_machine_golden_is_versioned_with_a_stable_alert_id() -> None:
    payload = machine_json(spike())  # type: ignore[arg-type]
    assert payload["schema"] == "costguard.alert/v1"
    assert payload["alert_id"] == "burn-rate-anomaly/llm-pretraining/20261120T1200"
    check("anomaly.machine.json", json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def test_slack_golden() -> None:
    check(
        "anomaly.slack.json",
        json.dumps(slack_blocks(machine_json(spike())), indent=2, ensure_ascii=False) + "\n",
    )  # type: ignore[arg-type]


def test_sns_message_has_a_rendering_for_every_protocol_and_routing_attributes() -> None:
    alert = spike()
    body = json.loads(sns_message(alert))  # type: ignore[arg-type]
    assert set(body) >= {"default", "email", "https", "sqs", "lambda"}
    assert json.loads(body["sqs"])["kind"] == AlertKind.BURN_RATE_ANOMALY.value
    assert json.loads(body["https"])["source"] == "custom"
    assert sns_attributes(alert) == {  # type: ignore[arg-type]
        "project": {"DataType": "String", "StringValue": "llm-pretraining"},
        "severity": {"DataType": "String", "StringValue": "critical"},
        "kind": {"DataType": "String", "StringValue": "burn-rate-anomaly"},
    }


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("<!channel>", "&lt;!channel&gt;"),
        ("<http://evil|click>", "&lt;http://evil|click&gt;"),
        ("R&D", "R&amp;D"),
        ("a > b", "a &gt; b"),
    ],
)
def test_slack_escaping(raw: str, safe: str) -> None:
    assert slack_escape(raw) == safe


def test_email_subject_is_ascii_and_short() -> None:
    alert = anomaly_alert("計算チーム" * 20, Decimal(1), Decimal(50), [], (), NOW, "e")
    subject = email_subject(alert)
    assert len(subject) <= 100
    assert subject.isascii()
    assert "\n" not in subject
