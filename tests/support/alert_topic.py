"""The stack's alert topic as the e2e tests "deploy" it on moto: KMS-encrypted, with an SQS
subscriber (raw delivery) that lets a test read what was published."""

from __future__ import annotations

from typing import Any


def encrypted_topic_with_subscriber(session: Any, region: str, key_arn: str) -> tuple[str, str]:
    """``(topic ARN, subscriber queue URL)`` of the ``costguard-alerts`` topic."""
    sns = session.client("sns", region_name=region)
    topic_arn = str(
        sns.create_topic(Name="costguard-alerts", Attributes={"KmsMasterKeyId": key_arn})[
            "TopicArn"
        ]
    )
    sqs = session.client("sqs", region_name=region)
    subscriber = str(sqs.create_queue(QueueName="alert-subscriber")["QueueUrl"])
    subscriber_arn = sqs.get_queue_attributes(QueueUrl=subscriber, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=subscriber_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    return topic_arn, subscriber
