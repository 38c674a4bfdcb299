"""An answer that arrives after the guard already acted (the deadline passed, the notebook
was stopped, the warning still sits in the channel with its buttons): the person is told
what the resource is now, never that it was "kept"."""

from __future__ import annotations

from datetime import timedelta

from costguard.domain.answers import Answer, AnswerRequest
from costguard.domain.decisions import Step
from costguard.services.answering import Taken, TakenAnswer, told
from tests.answers.test_answers_taken import GRACE, KEY, MARIA, T0, World


def stopped_at_its_deadline() -> World:
    w = World()
    assert w.guard_run(T0) is Step.WARNED
    assert w.guard_run(T0 + GRACE + timedelta(minutes=1)) is Step.ACTED
    assert w.resources["nb-1"].state == "Stopped"
    return w


def test_keep_pressed_after_the_stop_says_it_is_already_stopped() -> None:
    """GIVEN an idle notebook stopped at its warning's deadline
    WHEN its owner presses "Keep 4 hours" on the (old) warning an hour later
    THEN the message says the notebook is already stopped, not just "kept until".

    Defect: the answer was told "kept until 17:00 UTC by @maria": the owner read that their
    notebook was kept running, while it had been stopped an hour before.
    """
    w = stopped_at_its_deadline()
    at = T0 + GRACE + timedelta(hours=1)
    until = at + timedelta(hours=4)
    taken = w.answer(Answer.KEEP_4H, at, until=until)
    assert isinstance(taken, TakenAnswer)
    text = told(AnswerRequest("idle-notebooks", KEY, Answer.KEEP_4H, MARIA, at, until), taken)
    assert "already stopped" in text.lower()


def test_act_now_pressed_after_the_stop_says_it_is_already_stopped() -> None:
    """GIVEN an idle notebook stopped at its warning's deadline
    WHEN its owner presses "Act now" on the old warning
    THEN nothing is acted on, and the answer says it is already stopped (the warning, now
    moot, is settled), not "it carries no warning to answer".

    Defect: the refusal read "it carries no warning to answer", which a person holding
    the warning in front of them cannot make sense of.
    """
    w = stopped_at_its_deadline()
    at = T0 + GRACE + timedelta(hours=1)
    taken = w.answer(Answer.ACT_NOW, at)
    assert isinstance(taken, TakenAnswer)
    assert taken.outcome is Taken.ALREADY and not taken.run_guard
    text = told(AnswerRequest("idle-notebooks", KEY, Answer.ACT_NOW, MARIA, at), taken)
    assert "already stopped" in text.lower()
    assert [c for c in w.actuator.calls if c[0] == "apply"] == [("apply", "nb-1")]


def test_an_answer_about_a_resource_gone_since_settles_its_warning() -> None:
    """GIVEN a warned notebook (or volume) deleted since the warning (by the guard at its
    deadline, or by hand)
    WHEN its owner presses "Keep 4 hours" on the warning
    THEN nothing is written, and the answer settles the warning for everyone (the message is
    replaced with "it no longer exists"), rather than being refused to the presser alone.

    Defect (met when refusals became private, so that a non-owner's refusal leaves the
    owners their buttons): as a refusal it was told to the presser alone, and the warning
    about a resource that no longer exists kept offering its buttons in the channel.
    """
    w = World()
    assert w.guard_run(T0) is Step.WARNED
    del w.resources["nb-1"]
    at = T0 + timedelta(hours=1)
    taken = w.answer(Answer.KEEP_4H, at, until=at + timedelta(hours=4))
    assert isinstance(taken, TakenAnswer)
    assert taken.outcome is Taken.ALREADY and not taken.private
    assert "no longer exists" in taken.detail
    assert [c for c in w.actuator.calls if c[0] == "mark"] == [("mark", "nb-1")]  # the warning
