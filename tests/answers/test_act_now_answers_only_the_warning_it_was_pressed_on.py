""" "Act now" answers the warning it was pressed on. When that warning has ended (the owner
used the notebook) and a newer one has been sent since, a late delivery of the old press
must not cut the new warning's grace period short: the owner has not answered it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from costguard.domain.answers import Answer, AnswerRequest
from costguard.domain.decisions import Action, Step
from costguard.services.answering import AnswerTaker, Taken
from costguard.services.executor import Executor
from tests.answers.test_answers_taken import KEY, MARIA, T0, World, idle
from tests.support.fakes import RecordingNotifier


@pytest.mark.xfail(
    strict=True,
    reason=(
        "the button and the link name the guard and the resource, not the warning: the "
        "taker answers whichever warning the resource carries when the answer arrives. "
        "Fix: sign the warning's deadline into the button value and the link (ButtonClaims, "
        "LinkClaims; AnswerTo already carries it since the e-mail links), carry it in AnswerRequest "
        "and the answer event, and have the taker refuse (privately) an act now whose "
        "deadline is not the one the resource carries now"
    ),
)
def test_a_late_act_now_from_an_ended_warning_does_not_answer_the_next_one() -> None:
    """GIVEN a notebook warned at T0 (W1), its owner pressing "Act now" at T0 + 1 min, and
    that answer's delivery delayed (the guard's Lambda throttled: asynchronous events wait
    up to the configured hour)
    AND meanwhile the owner used the notebook (W1 withdrawn at T0 + 5 min), and it went
    idle again and was warned anew at T0 + 40 min (W2, deadline T0 + 40 min + 24 h)
    WHEN the old press is finally taken at T0 + 50 min
    THEN it is not an answer to W2: nothing is stopped before W2's deadline.

    Defect: the taker recorded "act now" against W2's deadline, and the guard's run stopped
    the notebook at once: W2's owner never had its grace period, nor pressed anything on it.
    """
    w = World()
    assert w.guard_run(T0) is Step.WARNED
    withdrawn = T0 + timedelta(minutes=5)
    busy = replace(idle(withdrawn), action=Action.NONE)
    executor = Executor([w.actuator], w.ledger, RecordingNotifier([]), w.settings)
    assert [o.step for o in executor.run([busy], withdrawn).outcomes] == [Step.CLEARED]
    assert w.guard_run(T0 + timedelta(minutes=40)) is Step.WARNED
    pressed = T0 + timedelta(minutes=1)
    taken_at = T0 + timedelta(minutes=50)
    taker = AnswerTaker("idle-notebooks", [w.actuator], w.ledger, w.settings)
    request = AnswerRequest(
        "idle-notebooks", KEY, Answer.ACT_NOW, MARIA, pressed, request_id="late"
    )
    taken = taker.take(request, taken_at)
    assert taken.outcome is not Taken.ACT_NOW
    assert w.guard_run(taken_at + timedelta(seconds=5)) is Step.WAITING
    assert w.resources["nb-1"].state == "InService"
