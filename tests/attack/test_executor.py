"""Hostile tests of the one path to act: executor, decisions and the action-after tag."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.alerts import AlertKind
from costguard.domain.decisions import Step
from costguard.domain.tags import Tags
from costguard.ports import AuditEvent
from tests.unit.test_executor import GRACE, T0, World, idle

SCOPE = "123456789012"


class FlakyAuditLedger(InMemoryLedger):
    """A ledger whose audit write fails ``failures`` times for the outcomes given."""

    def __init__(self, failures: int, outcomes: set[str] | None = None) -> None:
        super().__init__()
        self.failures = failures
        self.outcomes = outcomes

    def audit(self, event: AuditEvent) -> bool:
        if self.failures > 0 and (self.outcomes is None or event.outcome in self.outcomes):
            self.failures -= 1
            raise RuntimeError("ProvisionedThroughputExceededException")
        return super().audit(event)


def test_a_warning_that_never_reached_the_owner_does_not_start_the_countdown() -> None:
    # GIVEN an idle notebook, and SNS failing when CostGuard first warns about it
    w = World("nb-1")
    w.notifier.fail = True
    first = w.executor().run([idle()], T0)
    assert [o.step for o in first.outcomes] == [Step.FAILED]
    left = w.resources["nb-1"].tags.get(Tags.ACTION_AFTER)
    # WHEN SNS is back and later runs judge it idle until the grace period has passed
    w.notifier.fail = False
    w.run(idle(), now=T0 + timedelta(minutes=15))
    w.run(idle(), now=T0 + GRACE + timedelta(minutes=15))
    # THEN it is never stopped before its owner has been told
    warnings = [a for a in w.sent if a.kind is AlertKind.ACTION_WARNING]
    assert warnings or w.resources["nb-1"].state != "Stopped", (
        "stopped with no warning ever delivered; the failed warn left "
        f"{Tags.ACTION_AFTER}={left!r} behind"
    )


def test_a_copied_or_hand_set_past_deadline_does_not_skip_the_warning() -> None:
    # GIVEN a fresh instance that was never warned, but carries an action-after tag in the
    # past (copied by "Launch more like this" / a launch template, or hand-edited)
    w = World("nb-1", **{"nb-1": {Tags.ACTION_AFTER: "2026-01-01"}})
    # WHEN CostGuard first judges it idle
    steps = w.run(idle())
    # THEN it warns first, as for any resource it never warned about
    assert steps == [Step.WARNED], f"got {steps}; state {w.resources['nb-1'].state}"
    assert w.resources["nb-1"].state == "InService"


def test_a_deadline_far_beyond_the_grace_period_is_not_a_silent_exemption() -> None:
    # GIVEN an owner who hand-edits the deadline to the year 9998 instead of exempting
    w = World("nb-1", **{"nb-1": {Tags.ACTION_AFTER: "9998-01-01T00:00:00Z"}})
    # WHEN it is judged idle, run after run
    steps = w.run(idle()) + w.run(idle(), now=T0 + 30 * GRACE)
    # THEN the executor does not wait 7,971 years: a deadline later than any warning it
    # could have set (now + grace) is not one it set, so it warns afresh
    assert Step.WAITING not in steps, steps


def test_an_action_whose_audit_write_fails_is_still_reported_as_done_and_the_owner_told() -> None:
    # GIVEN a notebook whose grace period has run out, and one audit write that fails
    w = World("nb-1")
    w.ledger = FlakyAuditLedger(failures=1, outcomes={"acted"})
    w.warned("nb-1")
    # WHEN the executor stops it
    report = w.executor().run([idle()], T0)
    assert w.resources["nb-1"].state == "Stopped"
    # THEN the outcome says it was stopped (with the error), the owner is told, and the
    # audit trail does not claim the stop failed
    steps = [o.step for o in report.outcomes]
    trail = w.trail()
    taken = [a for a in w.sent if a.kind is AlertKind.ACTION_TAKEN]
    assert steps == [Step.ACTED] and taken and "failed" not in trail, (
        f"the notebook was stopped, yet outcome={steps}, audit trail={trail}, "
        f"owner told={bool(taken)}"
    )


def test_a_ledger_error_while_auditing_one_failure_does_not_abandon_the_other_resources() -> None:
    # GIVEN two overdue notebooks, and the audit write throttled twice in a row
    w = World("nb-1", "nb-2")
    flaky = FlakyAuditLedger(failures=0)
    w.ledger = flaky
    w.warned("nb-1", "nb-2")
    flaky.failures = 2
    # WHEN the executor runs
    try:
        report: Any = w.executor().run([idle("nb-1"), idle("nb-2")], T0)
    except Exception as exc:  # the defect: one resource's error escapes
        report = exc
    # THEN the failure is recorded for nb-1 and nb-2 is still handled
    assert not isinstance(report, Exception), f"run() raised {report!r}; nb-2 never handled"
    assert [o.step for o in report.outcomes][1] == Step.ACTED


def test_two_runs_either_side_of_midnight_warn_the_owner_once() -> None:
    # GIVEN an idle notebook never warned, and two overlapping runs, one at 23:59:59 and
    # one at 00:00:01 UTC (a slow run and the next scheduled one), both inspecting first
    w = World("nb-1")
    midnight = T0.replace(hour=0) + timedelta(days=1)
    w.actuator.inspect_barrier = threading.Barrier(2)
    steps: list[Step] = []

    def run(now: Any) -> None:
        steps.extend(w.run(idle(now=now), now=now))

    threads = [
        threading.Thread(target=run, args=(midnight - timedelta(seconds=1),)),
        threading.Thread(target=run, args=(midnight + timedelta(seconds=1),)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # THEN the owner gets one warning, not two with different deadlines
    warnings = [a for a in w.sent if a.kind is AlertKind.ACTION_WARNING]
    assert len(warnings) == 1, [a.title for a in warnings]


def test_a_key_only_exempt_tag_protects_the_resource() -> None:
    # GIVEN an owner who adds the tag key costguard:exempt with no value (the console's
    # default for a flag tag; opt-in tags are read by presence too), i.e. who tried to
    # exempt the resource; the README: "When an owner tried to exempt a resource,
    # CostGuard never acts on it"
    w = World("nb-1", **{"nb-1": {Tags.EXEMPT: "", Tags.ACTION_AFTER: "2026-11-19T00:00:00Z"}})
    # WHEN the executor judges it idle past its deadline
    steps = w.run(idle())
    # THEN it is left alone
    assert w.resources["nb-1"].state == "InService", f"stopped despite the exempt tag: {steps}"
