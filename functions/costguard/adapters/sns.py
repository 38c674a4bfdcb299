"""Publish alerts to the CostGuard topic: one rendering per protocol, routing attributes.

The stack grants ``sns:Publish`` (and the key use it needs) on CostGuard's own topic only.

SNS refuses a message over 256 KiB, counted in bytes over the whole ``Message`` (with
``MessageStructure=json`` that is every protocol's rendering together) plus the
message attributes. A refused alert would fail the scan that raised it, every 15
minutes, so the notifier measures each request first and, when it is too large,
sends the first of the alert's smaller forms (:func:`shrink_steps`) that fits: fewer
resources and details, never a failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from costguard.domain.alerts import Alert, shrink_steps
from costguard.domain.answer_links import EmailAnswers
from costguard.rendering import email_subject, sns_attributes, sns_message

if TYPE_CHECKING:
    from mypy_boto3_sns.client import SNSClient
    from mypy_boto3_sns.type_defs import MessageAttributeValueTypeDef

#: SNS's limit for one message, attributes included: 256 KiB.
SNS_MAX_BYTES = 262_144


class MessageTooLargeError(Exception):
    """Even the smallest form of an alert is over the SNS limit (a pathological id)."""


def request_size(
    message: str, subject: str, attributes: dict[str, MessageAttributeValueTypeDef]
) -> int:
    """Bytes SNS counts against :data:`SNS_MAX_BYTES` (the subject too, to be safe)."""
    size = len(message.encode()) + len(subject.encode())
    for name, value in attributes.items():
        size += len(name.encode()) + len(value["DataType"].encode())
        size += len(value.get("StringValue", "").encode())
    return size


#: An answerable warning's e-mailed answer links (signed), or None for none.
AnswerLinks = Callable[[Alert], EmailAnswers | None]


class SnsNotifier:
    """``answer_links``: makes an action warning's signed links for its e-mail text (one
    set per warning, whichever form of it is sent); None, or None from it, for none."""

    def __init__(
        self, client: SNSClient, topic_arn: str, answer_links: AnswerLinks | None = None
    ) -> None:
        self._sns = client
        self._topic = topic_arn
        self._answer_links = answer_links

    def publish(self, alert: Alert) -> str:
        answers = None
        if self._answer_links is not None and alert.answer_to is not None:
            answers = self._answer_links(alert)
        for form in shrink_steps(alert):
            subject, message = email_subject(form), sns_message(form, answers)
            attributes = cast("dict[str, MessageAttributeValueTypeDef]", sns_attributes(form))
            if request_size(message, subject, attributes) <= SNS_MAX_BYTES:
                break
        else:
            raise MessageTooLargeError(
                f"alert {alert.alert_id[:200]} is over {SNS_MAX_BYTES} bytes in its smallest form"
            )
        response = self._sns.publish(
            TopicArn=self._topic,
            Subject=subject,
            Message=message,
            MessageStructure="json",
            MessageAttributes=attributes,
        )
        return str(response["MessageId"])
