"""Publish alerts to the CostGuard topic: one rendering per protocol, routing attributes."""

from __future__ import annotations

from typing import Any

from costguard.domain.alerts import Alert
from costguard.iam import Permission
from costguard.rendering import email_subject, sns_attributes, sns_message

PERMISSIONS = (Permission(("sns:Publish",), "publish alerts", resources=("{topic}",)),)


class SnsNotifier:
    def __init__(self, client: Any, topic_arn: str) -> None:
        self._sns = client
        self._topic = topic_arn

    def publish(self, alert: Alert) -> str:
        response = self._sns.publish(
            TopicArn=self._topic,
            Subject=email_subject(alert),
            Message=sns_message(alert),
            MessageStructure="json",
            MessageAttributes=sns_attributes(alert),
        )
        return str(response["MessageId"])
