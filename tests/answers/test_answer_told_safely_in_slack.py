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


def test_what_the_person_sees_names_the_button_not_its_action_id() -> None:
    """GIVEN an answer that is not taken as asked (already exempt longer; dry-run)
    WHEN the message says so
    THEN it names the button the person pressed ("Keep 4 hours"), and says until when the
    longer exemption holds; never the internal action id ("keep-4h").

    Defect: the message read "@maria answered keep-4h: it is already exempt at least as
    long": an identifier of CostGuard's, and no date to check it against.
    """
    from datetime import UTC, datetime

    from costguard.domain.answers import AnswerRequest
    from costguard.services.answering import Taken
    from tests.answers.test_answers_taken import KEY, MARIA, T0, World

    w = World()
    w.resources["nb-1"].tags[Tags.EXEMPT] = "2026-12-31"
    until = T0 + timedelta(hours=4)
    taken = w.answer(Answer.KEEP_4H, T0, until=until)
    assert taken.outcome is Taken.ALREADY  # type: ignore[attr-defined]
    from costguard.services.answering import told

    text = told(AnswerRequest("idle-notebooks", KEY, Answer.KEEP_4H, MARIA, T0, until), taken)  # type: ignore[arg-type]
    assert "keep-4h" not in text and "Keep 4 hours" in text
    assert "Fri 01 Jan" in text or "2027-01-01" in text or "31 Dec" in text
    dry = World(dry_run=True)
    taken = dry.answer(Answer.KEEP_UNTIL_TOMORROW, T0, until=datetime(2026, 11, 21, 9, tzinfo=UTC))
    text = told(
        AnswerRequest("idle-notebooks", KEY, Answer.KEEP_UNTIL_TOMORROW, MARIA, T0, until),
        taken,  # type: ignore[arg-type]
    )
    assert "keep-until-tomorrow" not in text and "Keep until tomorrow 09:00" in text
    # and dry-run is said once ("(dry-run: would … (dry-run: no tag is written))" before)
    assert text.count("dry-run") == 1
