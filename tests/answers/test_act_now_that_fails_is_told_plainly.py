""" "Act now" whose action fails (a permission not yet deployed, a throttle): the channel is
told in plain words that it could not be done now and that CostGuard tries again; the
exception, its type and AWS's error text stay in the log."""

from __future__ import annotations

from datetime import timedelta

from costguard.domain.answers import Answer
from costguard.domain.decisions import Step
from costguard.handlers.act import after_act_now
from costguard.services.executor import Executor
from tests.answers.test_answers_taken import KEY, T0, World, idle
from tests.support.fakes import RecordingNotifier

AWS_TEXT = (
    "An error occurred (UnauthorizedOperation) when calling the StopNotebookInstance "
    "operation: Encoded authorization failure message: 4bXyZ0123456789"
)


def test_a_failed_act_now_is_told_without_the_exception() -> None:
    """GIVEN a warned notebook answered "act now", whose stop is refused by AWS
    WHEN the guard's run that follows fails to stop it
    THEN the message says it could not be stopped now and will be tried again, without the
    exception's type or AWS's error text (which go to the log and the audit).

    Defect: the message read "nothing was done: failed (RuntimeError: An error occurred
    (UnauthorizedOperation) … Encoded authorization failure message: …)", posted in the
    channel for everyone.
    """
    w = World()
    w.guard_run(T0)
    at = T0 + timedelta(hours=1)
    assert w.answer(Answer.ACT_NOW, at).run_guard  # type: ignore[attr-defined]

    def refused(*_args: object) -> None:
        raise RuntimeError(AWS_TEXT)

    w.actuator.apply = refused  # type: ignore[method-assign]
    report = Executor([w.actuator], w.ledger, RecordingNotifier([]), w.settings).run([idle(at)], at)
    assert [o.step for o in report.outcomes] == [Step.FAILED]
    text = after_act_now(KEY, report)
    assert "RuntimeError" not in text and "UnauthorizedOperation" not in text
    assert "Encoded" not in text
    assert "could not" in text and "again" in text
    # AND what it promises holds: the guard's next run, the refusal lifted, stops it
    del w.actuator.apply
    later = at + timedelta(minutes=10)
    again = Executor([w.actuator], w.ledger, RecordingNotifier([]), w.settings).run(
        [idle(later)], later
    )
    assert [o.step for o in again.outcomes] == [Step.ACTED]


def test_act_now_that_another_run_is_carrying_out_is_told_in_words() -> None:
    """GIVEN two "Act now" presses (a double click: two requests) whose guard runs race,
    and the second run finds the first one acting on the notebook
    WHEN the second run's outcome is told
    THEN it says another run is acting on it, in words: no step name of CostGuard's
    ("claimed-elsewhere", "skipped", "waiting") in the channel.

    Defect: the message read "nothing was done: claimed-elsewhere (another run is acting
    on it)", and it could replace the first press's "stopped now".
    """
    from costguard.services.executor import ExecutionReport, Outcome

    d = idle(T0)
    for step, detail in (
        (Step.CLAIMED_ELSEWHERE, "another run is acting on it"),
        (Step.SKIPPED, "already Stopped"),
        (Step.WAITING, "warned; acting after 2026-11-21T12:00:00Z"),
    ):
        text = after_act_now(KEY, ExecutionReport(False, (Outcome(d, step, detail),)))
        assert step.value not in text
        assert detail in text
