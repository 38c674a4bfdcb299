"""An answer whose invocation fails after its tag was written (the audit write throttled):
the invocation's retry finishes it, and the audit trail and the message say what was done
("kept"), never only "this answer was already taken"."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.answers import Answer, AnswerRequest
from costguard.domain.tags import Tags
from costguard.ports import AuditEvent
from costguard.services.answering import AnswerTaker, Taken
from tests.answers.test_answers_taken import KEY, MARIA, T0, World


class ThrottledOnce(InMemoryLedger):
    """The ledger's first audit write of an answer is throttled (DynamoDB's
    ProvisionedThroughputExceeded, after botocore's own retries)."""

    def __init__(self) -> None:
        super().__init__()
        self.throttle = True

    def audit(self, event: AuditEvent) -> bool:
        if self.throttle and event.action.startswith("answer-"):
            self.throttle = False
            raise RuntimeError("ProvisionedThroughputExceededException")
        return super().audit(event)


@pytest.mark.parametrize("answer", [Answer.KEEP_4H, Answer.ACT_NOW])
def test_an_audit_throttled_after_the_answer_is_finished_by_the_retry(answer: Answer) -> None:
    """GIVEN a warned notebook, and a ledger that throttles the answer's audit write once
    WHEN its owner's answer is taken, fails on the audit, and the invocation is retried
    THEN the retry's outcome is the answer's own ("kept", or "act now" with the guard run
    at once), and the audit trail holds that outcome naming the owner.

    Defect: the claim was confirmed before the audit, so the retry found it taken: its
    outcome was "already" ("this answer was already taken"), the trail never held "kept",
    the message said "already taken", and an "act now" never ran the guard at once.
    """
    w = World()
    w.guard_run(T0)
    w.ledger = ThrottledOnce()
    w.guard_run(T0)  # the new ledger learns of the delivered warning
    w.ledger.throttle = True
    assert Tags.ACTION_AFTER in w.resources["nb-1"].tags
    taker = AnswerTaker("idle-notebooks", [w.actuator], w.ledger, w.settings)
    at = T0 + timedelta(hours=1)
    until = at + timedelta(hours=4) if answer is Answer.KEEP_4H else None
    request = AnswerRequest("idle-notebooks", KEY, answer, MARIA, at, until, request_id="r-7")
    with pytest.raises(RuntimeError):
        taker.take(request, at)
    retried = taker.take(request, at + timedelta(seconds=30))
    expected = Taken.KEPT if answer is Answer.KEEP_4H else Taken.ACT_NOW
    assert retried.outcome is expected
    assert retried.run_guard is (answer is Answer.ACT_NOW)
    trail = {
        (e.action, e.outcome, e.details.get("by"))
        for e in w.ledger.audit_trail("123456789012", "2026-11")
    }
    assert (f"answer-{answer.value}", expected.value, "U024BE7LH") in trail


class ConfirmThrottledOnce(InMemoryLedger):
    """The ledger's first confirmation of an answer's claim is throttled."""

    def __init__(self) -> None:
        super().__init__()
        self.throttle = True

    def confirm(self, namespace: str, key: str, now: datetime, fence: str | None = None) -> None:
        if self.throttle and namespace == "answered":
            self.throttle = False
            raise RuntimeError("ProvisionedThroughputExceededException")
        super().confirm(namespace, key, now, fence)


def test_a_confirmation_throttled_after_the_answer_does_not_lose_what_was_done() -> None:
    """GIVEN a warned notebook, and a ledger that throttles the answer claim's confirmation
    WHEN its owner's "Keep 4 hours" is taken: tag written, audit written, then the
    confirmation fails
    THEN the answer is reported as kept (so its message is updated in place), not raised.

    Defect: the failure was raised after the tag and the audit were written; the
    invocation's retry, a minute later, found the claim still held (its 15-minute lease)
    and took the answer as a repeat: nothing was told, and the warning's message went on
    offering buttons for an answer already given.
    """
    w = World()
    w.ledger = ConfirmThrottledOnce()
    w.guard_run(T0)
    taker = AnswerTaker("idle-notebooks", [w.actuator], w.ledger, w.settings)
    at = T0 + timedelta(hours=1)
    request = AnswerRequest(
        "idle-notebooks", KEY, Answer.KEEP_4H, MARIA, at, at + timedelta(hours=4), request_id="r-8"
    )
    taken = taker.take(request, at)
    assert taken.outcome is Taken.KEPT
    assert w.resources["nb-1"].tags[Tags.EXEMPT] == "2026-11-20T17:00:00Z"
