"""Publish alerts to the CostGuard topic: one rendering per protocol, routing attributes.

The stack grants ``sns:Publish`` (and the key use it needs) on CostGuard's own topic only.
"""

from __future__ import annotations

from typing import Any

from costguard.domain.alerts import Alert
from costguard.rendering import email_subject, sns_attributes, sns_message


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
