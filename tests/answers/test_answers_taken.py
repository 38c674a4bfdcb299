"""An answer on the act path (service level): keep, exempt and act now, taken through the
executor's rules with the guard's actuators, and audited naming who answered."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.answers import Answer, Answerer, AnswerRequest
from costguard.domain.decisions import Action, Decision, Step, Target
from costguard.domain.tags import Tags
from costguard.services.answering import AnswerTaker, Taken
from costguard.services.executor import Executor, ExecutorSettings
from tests.support.actuators import FakeResource, InMemoryActuator
from tests.support.fakes import RecordingNotifier
from tests.unit.test_executor import GRACE, KIND, T0

KEY = f"123456789012/us-east-1/{KIND}/nb-1"


def idle(now: datetime) -> Decision:
    """The idle guard's decision about nb-1, keyed as the guards key resources (the account
    first, as the scan's resource keys)."""
    return Decision(
        action=Action.STOP_NOTEBOOK,
        target=Target(KEY, KIND, "us-east-1", "nb-1", "123456789012", "vision", ("U024BE7LH",)),
        reason="GPU under 5% for 60 minutes",
        decided_at=now,
        usd_per_hour_saved=Decimal("1.41"),
        grace=GRACE,
    )


MARIA = Answerer("U024BE7LH", "slack", "@maria")


class World:
    """One notebook of vision, owned by @maria, its guard's executor and answers."""

    def __init__(self, *, dry_run: bool = False, owner: str = "U024BE7LH") -> None:
        self.resources = {"nb-1": FakeResource(tags={Tags.PROJECT: "vision", Tags.OWNER: owner})}
        self.actuator = InMemoryActuator(KIND, self.resources)
        self.ledger = InMemoryLedger()
        self.sent: list[object] = []
        self.settings = ExecutorSettings(scope="123456789012", dry_run=dry_run)
        self.asked = 0

    def guard_run(self, at: object) -> Step:
        executor = Executor(
            [self.actuator], self.ledger, RecordingNotifier(self.sent), self.settings
        )
        [outcome] = executor.run([idle(at)], at).outcomes  # type: ignore[arg-type]
        return outcome.step

    def answer(self, answer: Answer, at: object, who: Answerer = MARIA, **kw: object) -> object:
        taker = AnswerTaker(
            "idle-notebooks", [self.actuator], self.ledger, self.settings, admins={"W0ADMIN12"}
        )
        request = AnswerRequest(
            "idle-notebooks",
            KEY,
            answer,
            who,
            at,
            request_id=f"r-{self.asked}",
            **kw,  # type: ignore[arg-type]
        )
        self.asked += 1
        return taker.take(request, at)  # type: ignore[arg-type]

    def trail(self) -> list[tuple[str, str, str]]:
        return [
            (e.action, e.outcome, str(e.details.get("by", "")))
            for e in self.ledger.audit_trail("123456789012", "2026-11")
        ]


def test_keep_4_hours_holds_the_stop_off_and_the_guard_warns_again_after() -> None:
    # GIVEN an idle notebook warned at T0 (stop after T0 + 24 h)
    w = World()
    assert w.guard_run(T0) is Step.WARNED
    # WHEN its owner answers "keep 4 hours" just before the deadline
    at = T0 + GRACE - timedelta(minutes=10)
    taken = w.answer(Answer.KEEP_4H, at, until=at + timedelta(hours=4))
    # THEN it carries costguard:exempt until then, and the answer is audited naming @maria
    assert taken.outcome is Taken.KEPT  # type: ignore[attr-defined]
    assert w.resources["nb-1"].tags[Tags.EXEMPT] == "2026-11-21T15:50:00Z"
    assert ("answer-keep-4h", "kept", "U024BE7LH") in w.trail()
    # WHEN the guard runs at the deadline  THEN it does not stop it: the warning is withdrawn
    assert w.guard_run(T0 + GRACE) is Step.CLEARED
    assert w.resources["nb-1"].state == "InService"
    # WHEN the guard runs after the 4 hours, the notebook still idle  THEN a new warning
    assert w.guard_run(at + timedelta(hours=4, minutes=5)) is Step.WARNED


def test_act_now_stops_at_the_guards_next_run_not_at_the_deadline() -> None:
    w = World()
    assert w.guard_run(T0) is Step.WARNED
    # WHEN the owner answers "act now" an hour after the warning
    at = T0 + timedelta(hours=1)
    taken = w.answer(Answer.ACT_NOW, at)
    assert taken.outcome is Taken.ACT_NOW and taken.run_guard  # type: ignore[attr-defined]
    # THEN the guard's run right after acts, 23 hours before the deadline
    assert w.guard_run(at + timedelta(seconds=5)) is Step.ACTED
    assert w.resources["nb-1"].state == "Stopped"
    assert ("answer-act-now", "act-now", "U024BE7LH") in w.trail()


def test_act_now_on_an_exempt_or_unwarned_resource_acts_on_nothing() -> None:
    w = World()
    taken = w.answer(Answer.ACT_NOW, T0)
    assert taken.outcome is Taken.REFUSED and "no warning" in taken.detail  # type: ignore[attr-defined]
    w.resources["nb-1"].tags[Tags.EXEMPT] = "true"
    assert w.answer(Answer.ACT_NOW, T0 + timedelta(minutes=1)).outcome is Taken.REFUSED  # type: ignore[attr-defined]
    assert ("apply", "nb-1") not in w.actuator.calls


def test_an_exemption_from_the_dialog_keeps_its_reason_in_the_audit() -> None:
    w = World()
    w.guard_run(T0)
    taken = w.answer(
        Answer.EXEMPT,
        T0 + timedelta(hours=1),
        until=T0 + timedelta(days=30),
        reason="benchmark week",
    )
    assert taken.outcome is Taken.EXEMPTED  # type: ignore[attr-defined]
    [event] = [
        e for e in w.ledger.audit_trail("123456789012", "2026-11") if e.action == "answer-exempt"
    ]
    assert event.details["reason"] == "benchmark week" and event.details["via"] == "slack"


def test_a_longer_exemption_is_never_shortened_by_a_keep() -> None:
    w = World()
    w.resources["nb-1"].tags[Tags.EXEMPT] = "2026-12-31"
    taken = w.answer(Answer.KEEP_4H, T0, until=T0 + timedelta(hours=4))
    assert taken.outcome is Taken.ALREADY  # type: ignore[attr-defined]
    assert w.resources["nb-1"].tags[Tags.EXEMPT] == "2026-12-31"


def test_an_owner_changed_since_the_warning_cannot_answer_but_an_admin_can() -> None:
    # GIVEN the notebook handed over to bob since the warning was sent to maria
    w = World(owner="bob@example.com")
    refused = w.answer(Answer.KEEP_4H, T0, until=T0 + timedelta(hours=4))
    assert refused.outcome is Taken.REFUSED and "not one of its owners" in refused.detail  # type: ignore[attr-defined]
    assert Tags.EXEMPT not in w.resources["nb-1"].tags
    admin = Answerer("W0ADMIN12", "slack", "@ops")
    assert w.answer(Answer.KEEP_4H, T0, admin, until=T0 + timedelta(hours=4)).outcome is Taken.KEPT  # type: ignore[attr-defined]


def test_dry_run_reports_the_answer_and_writes_nothing() -> None:
    w = World(dry_run=True)
    taken = w.answer(Answer.KEEP_4H, T0, until=T0 + timedelta(hours=4))
    assert taken.outcome is Taken.WOULD  # type: ignore[attr-defined]
    assert w.actuator.calls == []
    assert ("answer-keep-4h", "would", "U024BE7LH") in w.trail()


def test_the_same_request_twice_is_one_answer() -> None:
    w = World()
    taker = AnswerTaker("idle-notebooks", [w.actuator], w.ledger, w.settings)
    request = AnswerRequest(
        "idle-notebooks", KEY, Answer.KEEP_4H, MARIA, T0, T0 + timedelta(hours=4), request_id="r-1"
    )
    assert taker.take(request, T0).outcome is Taken.KEPT
    assert taker.take(request, T0 + timedelta(seconds=1)).outcome is Taken.ALREADY
    assert [c for c in w.actuator.calls if c[0] == "mark"] == [("mark", "nb-1")]


def test_an_answer_to_another_guard_or_a_resource_it_does_not_act_on_is_refused() -> None:
    w = World()
    taker = AnswerTaker("idle-notebooks", [w.actuator], w.ledger, w.settings)
    other = AnswerRequest("stale-volumes", KEY, Answer.ACT_NOW, MARIA, T0, request_id="r-2")
    volume = AnswerRequest(
        "idle-notebooks", "123456789012/us-east-1/ebs-volume/vol-1", Answer.ACT_NOW, MARIA, T0
    )
    assert taker.take(other, T0).outcome is Taken.REFUSED
    assert taker.take(volume, T0).outcome is Taken.REFUSED
    assert w.actuator.calls == []


def test_the_guards_warning_is_addressed_to_it_for_its_answers() -> None:
    from dataclasses import replace

    from costguard.domain.alerts import AnswerTo

    # GIVEN the executor of the idle guard (run_guard names the guard in its settings)
    w = World()
    w.settings = replace(w.settings, guard="idle-notebooks")
    # WHEN it warns
    assert w.guard_run(T0) is Step.WARNED
    # THEN the warning says which guard and resource its answers are about, and until when
    # (its deadline: an e-mailed answer link expires by then)
    [warning] = w.sent
    assert warning.answer_to == AnswerTo("idle-notebooks", KEY, T0 + GRACE)  # type: ignore[attr-defined]


def test_a_tag_write_refused_halfway_leaves_the_answer_to_the_retry() -> None:
    # GIVEN the tag write fails once (a throttle, a permission being deployed)
    import pytest

    w = World()
    taker = AnswerTaker("idle-notebooks", [w.actuator], w.ledger, w.settings)
    request = AnswerRequest(
        "idle-notebooks", KEY, Answer.KEEP_4H, MARIA, T0, T0 + timedelta(hours=4), request_id="r-9"
    )
    real = w.actuator.mark

    def refused(*_args: object) -> None:
        raise RuntimeError("AccessDenied")

    w.actuator.mark = refused  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        taker.take(request, T0)
    # WHEN the invocation is retried  THEN the answer is taken, not "already taken"
    w.actuator.mark = real  # type: ignore[method-assign]
    assert taker.take(request, T0 + timedelta(seconds=30)).outcome is Taken.KEPT
    assert w.resources["nb-1"].tags[Tags.EXEMPT] == "2026-11-20T16:00:00Z"
