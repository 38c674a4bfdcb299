"""A warning answered from Slack, over HTTP: the idle guard's handler on moto's server warns
through the alert topic and the Slack notifier; the Slack stand-in signs each button press
as Slack does and sends it to the answer endpoint's handler behind a real HTTP server; the
guard's own handler takes the answer (the demo's answer chapter, asserted)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from costguard.domain.tags import Tags
from tests.support.clock import MIDDAY

pytestmark = [pytest.mark.e2e, pytest.mark.story]
REGION = "us-east-1"
TABLE = "ledger"


@pytest.fixture
def world() -> Iterator[tuple[Any, Any, str, str]]:
    import boto3

    from costguard_demo.answers import put_secrets
    from costguard_demo.plumbing import create_alert_channels, create_ledger_table
    from costguard_demo.server import embedded_aws
    from costguard_demo.slack_standin import SlackStandIn

    with embedded_aws(), SlackStandIn() as slack:
        session = boto3.Session()
        create_ledger_table(session, TABLE, REGION)
        topic, queue = create_alert_channels(session, REGION)
        put_secrets(session, REGION)
        yield session, slack, topic, queue


def test_keep_4_hours_then_act_now_from_slack(world: tuple[Any, Any, str, str]) -> None:
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.handlers.slack_notifier import button_signer
    from costguard.handlers.slack_notifier import process as notify_slack
    from costguard_demo.answers import OWNER, SIGNING_SECRET_NAME, run_answer_chapter
    from costguard_demo.plumbing import drain
    from costguard_demo.slack_standin import sns_event

    session, slack, topic, queue = world
    webhook, sign = slack.webhook(), button_signer(SIGNING_SECRET_NAME)

    def deliver() -> None:
        # As SNS invokes the Slack notifier, for every alert the topic's subscriber holds.
        for message in drain(session, queue, REGION):
            notify_slack(sns_event(json.dumps(message)), webhook, sign)

    # GIVEN an idle GPU notebook owned by a Slack member, watched by the idle guard
    # WHEN it is warned, its owner presses "Keep 4 hours", the deadline passes, it is warned
    # again after the 4 hours, and the owner presses "Act now"
    story = run_answer_chapter(
        session,
        REGION,
        lambda _line: None,
        MIDDAY,
        slack=slack,
        table=TABLE,
        topic=topic,
        deliver=deliver,
    )
    # THEN each press was accepted by the endpoint
    assert story.statuses == [200, 200]
    # AND both warnings reached Slack with their four answers
    assert len(story.warnings) == 2
    for warning in story.warnings:
        actions = [b for b in warning["blocks"] if b["type"] == "actions"]
        assert [e["action_id"] for e in actions[0]["elements"]] == [
            "keep-4h",
            "keep-until-tomorrow",
            "act-now",
            "exempt",
        ]
    # AND the keep tagged the notebook exempt for 4 hours, and the guard left it running
    # past the warning's deadline
    running, tags = story.states[0]
    kept_until = (MIDDAY + timedelta(minutes=10, hours=4)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert running == "running" and tags[Tags.EXEMPT] == kept_until
    # AND the message said so, in place, naming who answered
    name = "ec2-instance answered-gpu-notebook"
    assert story.updates[0] == f"{name}: kept until 16:10 UTC on Fri 20 Nov by @alice"
    # AND the guard warned, left it at the deadline, warned again after the 4 hours, and
    # the owner's "act now" on the second warning stopped it at once
    assert story.runs[:3] == ["warned", "cleared", "warned"]
    assert story.states[-1][0] == "stopped"
    assert story.updates[1] == f"{name}: @alice answered act now: stopped now"
    # AND the audit trail names the owner for each answer
    trail = DynamoDbLedger(session.client("dynamodb", region_name=REGION), TABLE).audit_trail(
        "123456789012", MIDDAY.strftime("%Y-%m")
    )
    answered = [(e.action, e.details["by"]) for e in trail if e.action.startswith("answer-")]
    assert sorted(answered) == [("answer-act-now", OWNER), ("answer-keep-4h", OWNER)]
    stopped = [e for e in trail if e.action == "stop-instance" and e.outcome == "acted"]
    assert [e.resource for e in stopped] == [f"123456789012/{REGION}/ec2-instance/{story.notebook}"]
