"""What an answer's in-place message carries from tags and people (a resource's Name, an
exemption's reason) is shown as text: it can never ping the channel, draw a link, or start
a new line in Slack."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from costguard.domain.answers import Answer
from costguard.domain.tags import Tags
from costguard_demo.slack_standin import SlackStandIn
from tests.answers.test_answers_in_the_act_lambda import account, answer, settings, toy
from tests.support.clock import MIDDAY
from tests.support.ec2 import run_instance
from tests.support.toy import TOY

__all__ = ["account"]

NAME = "train\u2028box <!channel> <https://evil.example/login|sign in again>\nfake line"


def test_a_resource_name_cannot_ping_the_channel_or_draw_a_link(account: Any) -> None:
    """GIVEN an idle instance named (by anyone who may tag it) with a line separator, a
    ``<!channel>`` and a ``<https://…|…>`` link, warned by the guard
    WHEN its owner keeps it from Slack
    THEN the in-place message shows those characters as text: escaped ``&lt;…&gt;``, on
    one line.

    Defect: the text was posted to the response URL as it was; Slack reads a message's
    text as mrkdwn, so the Name pinged the whole channel and drew a phishing link in
    CostGuard's own message.
    """
    from costguard.handlers.act import process, take_answer

    ec2 = account.client("ec2", region_name="us-east-1")
    instance = run_instance(
        ec2,
        {Tags.PROJECT: "vision", TOY: "idle", Tags.OWNER: "alice@example.com", "Name": NAME},
    )
    process({"time": MIDDAY.isoformat(), "guard": "toy"}, settings(), account, guards=toy(account))
    at = MIDDAY + timedelta(minutes=10)
    with SlackStandIn() as slack:
        take_answer(
            answer(
                instance,
                Answer.KEEP_4H,
                at,
                url=slack.origin + "/actions/T1/1/abc",
                until=at + timedelta(hours=4),
            ),
            settings(),
            account,
            at,
            guards=toy(account),
            slack_origin=slack.origin,
        )
        [(_, body)] = slack.responses
    text = body["text"]
    assert "<!channel>" not in text and "<https://" not in text
    assert "&lt;!channel&gt;" in text
    assert "\n" not in text and "\u2028" not in text
    assert "kept until 16:10 UTC" in text
