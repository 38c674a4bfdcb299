"""The same answer given twice by different requests (a dialog submitted twice, two owners
choosing the same end date, a double click within one second): the second is the same
answer, told as such, never "already exempt" over the message that says what was done."""

from __future__ import annotations

from datetime import datetime, timedelta

from costguard.domain.answers import Answer, AnswerRequest, exemption_until
from costguard.services.answering import Taken, TakenAnswer, told
from tests.answers.test_answers_taken import KEY, MARIA, T0, World


def test_an_exemption_submitted_twice_is_told_as_the_exemption_both_times() -> None:
    """GIVEN a warned notebook, and its owner's Exempt… dialog (reason, end date 30 days on)
    WHEN the dialog's submission reaches the guard twice, as two requests (Slack sends a
    second submission when the person presses Exempt again while the first is slow)
    THEN both are told "exempted until … (reason)".

    Defect: an exemption ends at midnight exactly, so the second found the tag the first
    wrote "at least as long" and answered "it is already exempt at least as long", which
    replaced the message that said who exempted it, until when and why.
    """
    w = World()
    w.guard_run(T0)
    at = T0 + timedelta(hours=1)
    until = exemption_until((at + timedelta(days=30)).date(), at)
    assert isinstance(until, datetime)
    texts = []
    for _ in range(2):
        taken = w.answer(Answer.EXEMPT, at, until=until, reason="benchmark week")
        assert isinstance(taken, TakenAnswer)
        assert taken.outcome is Taken.EXEMPTED
        request = AnswerRequest(
            "idle-notebooks", KEY, Answer.EXEMPT, MARIA, at, until, "benchmark week"
        )
        texts.append(told(request, taken))
    assert texts[0] == texts[1]
    assert "exempted until" in texts[1] and "(benchmark week)" in texts[1]
