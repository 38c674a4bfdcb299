"""The Slack notifier Lambda, subscribed to the alert topic (protocol ``lambda``).

Each SNS record carries the machine JSON of one alert; it is rendered as Block Kit
(every user string escaped) and posted to the webhook read from Secrets Manager.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from costguard.names import Env

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.adapters.slack import SlackWebhook

logger = Logger(service="costguard-slack")
_webhook: SlackWebhook | None = None


def build_webhook(session: Any, secret_name: str) -> SlackWebhook:
    from costguard.adapters.slack import CachedSecret, SlackWebhook

    secret = CachedSecret(session.client("secretsmanager"), secret_name)
    return SlackWebhook(secret.get)


def process(event: dict[str, Any], webhook: SlackWebhook) -> dict[str, Any]:
    from costguard.rendering import slack_blocks

    posted = []
    for record in event.get("Records", []):
        alert = json.loads(record["Sns"]["Message"])
        attempts = webhook.post(slack_blocks(alert))
        posted.append(alert.get("alert_id"))
        logger.info(
            "posted to Slack", extra={"alert_id": alert.get("alert_id"), "attempts": attempts}
        )
    return {"posted": posted}


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    global _webhook  # noqa: PLW0603 - one cached webhook (and secret) per warm container
    if _webhook is None:
        import boto3

        _webhook = build_webhook(boto3.Session(), os.environ[Env.SLACK_SECRET_NAME])
    return process(event, _webhook)
