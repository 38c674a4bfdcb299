"""Hostile tests of what the guards publish to SNS: sizes and odd characters."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.sns import SNS_MAX_BYTES, SnsNotifier
from costguard.domain.decisions import (
    Action,
    Decision,
    Target,
    notice_alert,
    taken_alert,
    warning_alert,
)
from tests.support.clock import MIDDAY

#: Characters SNS accepts in a message body and String attribute values (XML 1.0).
_INVALID = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class StrictSns:
    """Refuses what SNS refuses: over 256 KiB, characters outside XML 1.0, empty values."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def publish(self, **kw: Any) -> dict[str, str]:
        size = len(kw["Message"].encode())
        for name, value in kw["MessageAttributes"].items():
            v = value["StringValue"]
            assert v, f"empty attribute {name}"
            assert not _INVALID.search(v), f"attribute {name} has invalid characters: {v!r}"
            size += len(name.encode()) + len(value["DataType"].encode()) + len(v.encode())
        assert size <= SNS_MAX_BYTES, f"{size} bytes"
        assert not _INVALID.search(kw["Message"]), "message has invalid characters"
        assert json.loads(kw["Message"])["default"]
        assert len(kw["Subject"]) <= 100 and kw["Subject"].isascii()
        self.sent.append(kw)
        return {"MessageId": "m"}


def _decision(project: str, owner: str, name: str, detail: str) -> Decision:
    return Decision(
        action=Action.DELETE_OBJECTS,
        target=Target(
            key="us-east-1/s3-bucket/scratch",
            kind="s3-bucket",
            region="us-east-1",
            id="scratch",
            name=name,
            account="123456789012",
            project=project,
            owners=(owner,),
        ),
        reason="objects untouched for 90 days",
        decided_at=MIDDAY,
        evidence={f"prefix-{i}": detail for i in range(40)},
        usd_per_hour_saved=Decimal("0.5"),
    )


ODD = "\u200b\u202e\U0001f600\r\nx"


@pytest.mark.parametrize(
    "project",
    ["vision" + ODD, "v" * 256, "vision\ufffe", "vision\uffff"],
    ids=["zero-width-rtl-emoji-crlf", "256-chars", "U+FFFE", "U+FFFF"],
)
def test_guard_alerts_with_huge_or_odd_user_text_are_published_within_sns_rules(
    project: str,
) -> None:
    """Defect (for U+FFFE/U+FFFF): the project attribute and JSON bodies carry
    noncharacters raw (``json.dumps(ensure_ascii=False)`` does not escape them, and
    ``sns_attributes`` does not clean the project), which SNS refuses as invalid
    characters: the warning, and with it the action, fails on every run.
    """
    # GIVEN a decision whose project, owner, name and S3 survey details are huge or odd
    d = _decision(project, ("o" + ODD) * 40, ("n" + ODD) * 40, ("d" + ODD) * 1000)
    sns = StrictSns()
    notifier = SnsNotifier(sns, "arn:aws:sns:us-east-1:123456789012:costguard")  # type: ignore[arg-type]
    # WHEN each guard alert is published THEN SNS accepts every one
    for alert in (
        warning_alert(d, MIDDAY + timedelta(hours=24), MIDDAY),
        taken_alert(d, "deleted 3 objects " + ODD * 2000, "present", MIDDAY),
        notice_alert(d, "could not " + ODD * 2000, "present", MIDDAY),
    ):
        notifier.publish(alert)
    assert len(sns.sent) == 3
