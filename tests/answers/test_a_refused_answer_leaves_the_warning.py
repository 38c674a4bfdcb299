"""An answer the guard does not take (refused, or a delivery of one already taken) is told
to the person who pressed, privately; the warning and its buttons stay in the channel for
its owners, and a message that says what was done is never overwritten by a duplicate."""

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


def warned_instance(session: Any, owner: str = "alice@example.com") -> str:
    from costguard.handlers.act import process

    ec2 = session.client("ec2", region_name="us-east-1")
    instance = run_instance(ec2, {Tags.PROJECT: "vision", TOY: "idle", Tags.OWNER: owner})
    report = process(
        {"time": MIDDAY.isoformat(), "guard": "toy"}, settings(), session, guards=toy(session)
    )
    assert report.counts == {"warned": 1}
    return instance


def test_an_answer_refused_is_told_privately_and_the_warning_keeps_its_buttons(
    account: Any,
) -> None:
    """GIVEN an idle instance warned to alice, then handed over to bob (costguard:owner)
    WHEN alice presses "Keep 4 hours" on the warning (her name is still on its button)
    THEN the guard refuses it, and she alone is told why (an ephemeral reply that leaves the
    original message): the warning stays in the channel, with its buttons, for bob.

    Defect: every outcome was posted with ``replace_original: true``, so a refused answer
    replaced the warning with "alice's answer was not taken": the buttons were gone for the
    owner who may answer, and the channel lost the deadline.
    """
    from costguard.handlers.act import take_answer

    instance = warned_instance(account)
    ec2 = account.client("ec2", region_name="us-east-1")
    ec2.create_tags(Resources=[instance], Tags=[{"Key": Tags.OWNER, "Value": "bob@example.com"}])
    at = MIDDAY + timedelta(minutes=10)
    with SlackStandIn() as slack:
        result = take_answer(
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
        responses = [body for _, body in slack.responses]
    assert "not one of its owners" in result["refused"]
    [reply] = responses
    assert reply.get("replace_original") is False
    assert reply.get("response_type") == "ephemeral"
    assert "not taken" in reply["text"]


def test_a_second_delivery_of_an_answer_never_overwrites_what_was_done(account: Any) -> None:
    """GIVEN alice's "Keep 4 hours" taken, and its message replaced by "kept until 16:10"
    WHEN the same answer is delivered again (Lambda's asynchronous retry after a later step
    failed, or a duplicate delivery)
    THEN the channel still reads "kept until 16:10", and the duplicate tells nobody anything.

    Defect: the duplicate's outcome ("this answer was already taken") replaced the message,
    so the channel no longer said the notebook was kept, nor until when.
    """
    from costguard.handlers.act import take_answer

    instance = warned_instance(account)
    at = MIDDAY + timedelta(minutes=10)
    with SlackStandIn() as slack:
        event = answer(
            instance,
            Answer.KEEP_4H,
            at,
            url=slack.origin + "/actions/T1/1/abc",
            until=at + timedelta(hours=4),
        )
        for delivery in range(2):
            take_answer(
                event,
                settings(),
                account,
                at + timedelta(seconds=delivery),
                guards=toy(account),
                slack_origin=slack.origin,
            )
        replaced = [b["text"] for _, b in slack.responses if b.get("replace_original") is True]
        told = len(slack.responses)
    assert replaced == [f"ec2-instance {instance}: kept until 16:10 UTC on Fri 20 Nov by @alice"]
    # AND the person who pressed once is not told twice ("this answer was already taken")
    assert told == 1
