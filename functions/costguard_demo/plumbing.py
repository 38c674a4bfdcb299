"""What every demo chapter shares, at the bottom of the demo package: the ledger table,
the alert channels and their queue, the simulated window, the narrator and the
environment a chapter borrows. Chapters import this module; it imports none of them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

INTERVAL = timedelta(minutes=15)


#: ``--cycles`` with ``--org``: the scheduled times of the Organization demo (regions, then
#: probes, then scans: three at least; a day of them at most).
ORG_TICKS = range(3, 97)


def create_ledger_table(session: Any, name: str, region: str) -> None:
    ddb = session.client("dynamodb", region_name=region)
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.get_waiter("table_exists").wait(TableName=name)


def create_alert_channels(session: Any, region: str) -> tuple[str, str]:
    """The alert topic and a queue subscribed to it (what a `sqs` subscriber receives)."""
    sns = session.client("sns", region_name=region)
    sqs = session.client("sqs", region_name=region)
    topic = sns.create_topic(Name="costguard-alerts")["TopicArn"]
    url = sqs.create_queue(QueueName="costguard-alerts-demo")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"}
    )
    return topic, url


def drain(session: Any, url: str, region: str, sqs: Any = None) -> list[dict[str, Any]]:
    sqs = sqs or session.client("sqs", region_name=region)
    found: list[dict[str, Any]] = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
            "Messages", []
        )
        if not messages:
            return found
        for m in messages:
            found.append(json.loads(m["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def demo_window(now: datetime, cycles: int) -> tuple[datetime, datetime]:
    """The simulated scans' first and last time: ``cycles`` scans 15 minutes apart, ending
    at ``now``, or, when that would span two UTC days, ending just before today began.

    Daily alerts (unattributed spend, the findings digest) are deduplicated per UTC day, so
    a run across midnight would rightly send them twice and the demo would show the same
    alert twice; a demo started at 00:30 UTC tells the same story as one started at noon.
    (A run of more than a day of cycles spans days whatever the time: it shows each day's.)
    """
    end = now.astimezone(UTC).replace(second=0, microsecond=0)
    start = end - INTERVAL * (cycles - 1)
    if start.date() != end.date() and end - start < timedelta(days=1):
        end = end.replace(hour=0, minute=0) - timedelta(minutes=1)
        start = end - INTERVAL * (cycles - 1)
    return start, end


def narrator(quiet: bool) -> Callable[[str], None]:
    """The story's voice on stderr; silent with ``--json`` (``quiet``)."""

    def say(message: str) -> None:
        if not quiet:
            print(message, file=sys.stderr, flush=True)

    return say


@contextmanager
def borrowed_environ(keys: Iterable[str]) -> Iterator[None]:
    """Whatever a chapter sets of ``keys`` in the environment, put back as it was."""
    saved = {k: os.environ.get(k) for k in keys}
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
