"""The Slack notifier against a real HTTP server on loopback that plays Slack."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.slack import CachedSecret, SlackDeliveryError, SlackWebhook
from costguard.demo.slack_standin import SlackStandIn
from costguard.domain.alerts import Alert, AlertKind, AlertResource, AlertSeverity
from costguard.rendering import machine_json

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def hostile_alert() -> dict[str, Any]:
    alert = Alert(
        alert_id="burn-rate-anomaly/<!channel>/20261120T1200",
        kind=AlertKind.BURN_RATE_ANOMALY,
        project="<!channel> & <http://evil.example|click me>",
        severity=AlertSeverity.CRITICAL,
        title="spend jumped",
        summary="owner <@U123> said <!here> & left",
        at=NOW,
        owners=("<!everyone>",),
        resources=(
            AlertResource(
                "us-east-1/ec2-instance/i-1",
                "ec2-instance",
                "us-east-1",
                "p5.48xlarge",
                Decimal("55.04"),
                "<!channel>",
                "new",
            ),
        ),
    )
    return machine_json(alert)


def sns_event(*alerts: dict[str, Any]) -> dict[str, Any]:
    return {
        "Records": [{"EventSource": "aws:sns", "Sns": {"Message": json.dumps(a)}} for a in alerts]
    }


def test_notifier_posts_block_kit_with_every_user_string_escaped() -> None:
    from costguard.handlers.slack_notifier import process

    with SlackStandIn() as slack:
        result = process(
            sns_event(hostile_alert()), SlackWebhook(lambda: slack.url, sleep=lambda _s: None)
        )
    assert result["posted"] == ["burn-rate-anomaly/<!channel>/20261120T1200"]
    (payload,) = slack.received
    assert payload["blocks"][0]["type"] == "header"
    text = json.dumps(payload)
    for raw in (
        "<!channel>",
        "<!here>",
        "<!everyone>",
        "<http://evil.example|click me>",
        "<@U123>",
    ):
        assert raw not in text
    assert "&lt;!channel&gt; &amp; &lt;http://evil.example|click me&gt;" in text
    # Links CostGuard itself builds stay links.
    assert (
        "<https://us-east-1.console.aws.amazon.com/ec2/home?region=us-east-1#InstanceDetails:instanceId=i-1|"
        in text
    )


def test_429_is_retried_after_the_time_slack_asks_for() -> None:
    waits: list[float] = []
    with SlackStandIn(script=[429, 429, 200], retry_after="2") as slack:
        attempts = SlackWebhook(lambda: slack.url, sleep=waits.append).post({"text": "hi"})
    assert attempts == 3
    assert waits == [2.0, 2.0]
    assert slack.received == [{"text": "hi"}]


def test_5xx_is_retried_with_backoff() -> None:
    waits: list[float] = []
    with SlackStandIn(script=[500, 503, 200]) as slack:
        assert SlackWebhook(lambda: slack.url, sleep=waits.append).post({"text": "hi"}) == 3
    assert waits == [0.5, 1.0]


def test_persistent_failure_raises_for_the_dlq() -> None:
    from costguard.handlers.slack_notifier import process

    with (
        SlackStandIn(script=[500] * 10) as slack,
        pytest.raises(SlackDeliveryError, match="after 5 attempts"),
    ):
        process(sns_event(hostile_alert()), SlackWebhook(lambda: slack.url, sleep=lambda _s: None))
    assert slack.attempts == 5


def test_a_rejected_message_is_not_retried() -> None:
    with SlackStandIn(script=[400]) as slack, pytest.raises(SlackDeliveryError, match="rejected"):
        SlackWebhook(lambda: slack.url, sleep=lambda _s: None).post({"text": "hi"})
    assert slack.attempts == 1


def test_webhook_url_comes_from_secrets_manager_and_is_cached(aws: Any) -> None:
    sm = aws.client("secretsmanager", region_name="us-east-1")
    sm.create_secret(
        Name="costguard/slack-webhook", SecretString="https://hooks.slack.com/services/T/B/X"
    )
    calls: list[str] = []
    aws.events.register(
        "before-call.secrets-manager.GetSecretValue", lambda **_: calls.append("get")
    )
    clock = iter([0.0, 1.0, 1000.0, 1000.0]).__next__
    secret = CachedSecret(
        aws.client("secretsmanager", region_name="us-east-1"),
        "costguard/slack-webhook",
        ttl_s=300,
        clock=clock,
    )
    assert secret.get() == secret.get() == "https://hooks.slack.com/services/T/B/X"
    secret.get()
    assert len(calls) == 2  # read once, then again after the TTL
