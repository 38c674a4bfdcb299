"""Hostile tests of the executor with a flaky ledger (in-memory actuator and ledger)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.alerts import AlertKind
from costguard.domain.decisions import Step
from costguard.ports import AuditEvent
from tests.unit.test_executor import T0, World, idle


class FlakyLedger(InMemoryLedger):
    """Fails the next ``n`` calls of one method (optionally for one namespace only)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail: dict[tuple[str, str | None], int] = {}

    def _maybe_fail(self, method: str, namespace: str | None = None) -> None:
        for key in ((method, namespace), (method, None)):
            if self.fail.get(key, 0) > 0:
                self.fail[key] -= 1
                raise RuntimeError(f"ProvisionedThroughputExceededException ({method})")

    def put_once(self, namespace: str, key: str, now: datetime, attrs: Mapping[str, Any]) -> bool:
        self._maybe_fail("put_once", namespace)
        return super().put_once(namespace, key, now, attrs)

    def audit(self, event: AuditEvent) -> bool:
        self._maybe_fail("audit")
        return super().audit(event)

    def confirm(self, namespace: str, key: str, now: datetime) -> None:
        self._maybe_fail("confirm", namespace)
        super().confirm(namespace, key, now)


def test_a_ledger_hiccup_after_the_owner_was_warned_does_not_warn_them_again_with_a_new_deadline() -> (
    None
):
    # GIVEN an idle notebook, and the ledger throttling the one write that records the
    # warning ("warned"), after the tag was written and the owner was told
    w = World("nb-1")
    flaky = FlakyLedger()
    flaky.fail[("put_once", "warned")] = 1
    w.ledger = flaky
    first = w.run(idle())
    # WHEN the next run, 15 minutes later, judges it idle again
    second = w.run(idle(), now=T0 + timedelta(minutes=15))
    # THEN the owner has one warning and one deadline, not two contradicting ones
    warnings = [a for a in w.sent if a.kind is AlertKind.ACTION_WARNING]
    assert len(warnings) == 1, (
        f"runs {first} then {second}; the owner got {len(warnings)} warnings: "
        + " / ".join(a.title for a in warnings)
    )


def test_a_dry_run_report_whose_audit_write_failed_is_written_by_a_later_run_that_day() -> None:
    # GIVEN a dry-run deployment (the default) and one throttled audit write
    w = World("nb-1", dry_run=True)
    flaky = FlakyLedger()
    flaky.fail[("audit", None)] = 1
    w.ledger = flaky
    first = w.run(idle())
    # WHEN the next runs of the day judge the notebook idle again and the ledger is fine
    later = w.run(idle(), now=T0 + timedelta(minutes=15)) + w.run(
        idle(), now=T0 + timedelta(hours=1)
    )
    # THEN the audit trail holds the day's "would-warn" report (what dry-run is for:
    # "It records what it would do and what that would save in the audit trail, once
    # per resource a day")
    assert "would-warn" in w.trail(), (
        f"runs {first} then {later}; audit trail for the day: {w.trail()} "
        "(the once-a-day marker was written before the audit row, which failed)"
    )


def test_a_warning_withdrawn_by_activity_during_dry_run_is_not_acted_on_when_enforcement_resumes() -> (
    None
):
    from tests.unit.test_executor import GRACE, busy

    # GIVEN a notebook warned by an enforcing deployment (deadline T0 + 24 h)
    w = World("nb-1")
    assert w.run(idle()) == [Step.WARNED]
    # WHEN the operator turns dryRun back on, and the owner uses the notebook before the
    # deadline (the warning said: "activity before the deadline withdraws the warning")
    w.dry_run = True
    withdrawn = w.run(busy(), now=T0 + timedelta(hours=2))
    assert withdrawn == [Step.CLEARED]
    # AND a week later, enforcement resumes and the notebook is idle again
    w.dry_run = False
    later = T0 + 7 * GRACE
    steps = w.run(idle(now=later), now=later)
    # THEN the owner is warned afresh, not stopped at once on the withdrawn warning
    # (a stop wipes local instance store: "one reason every stop is warned first")
    assert w.resources["nb-1"].state == "InService", (
        f"dry-run reported {withdrawn} (would withdraw), then enforcement did {steps} "
        "with no warning since the owner used it"
    )


def test_a_delivered_and_recorded_warning_is_audited_as_warned_even_if_a_claim_confirm_fails() -> (
    None
):
    # GIVEN an idle notebook, and the ledger throttling the confirm of the warn claim,
    # the last step after the tag, the message and the "warned" record all succeeded
    w = World("nb-1")
    flaky = FlakyLedger()
    flaky.fail[("confirm", "action")] = 1
    w.ledger = flaky
    first = w.run(idle())
    warned = [a for a in w.sent if a.kind is AlertKind.ACTION_WARNING]
    assert len(warned) == 1  # the owner was told, and the deadline counts from here
    # WHEN the grace period runs out and the notebook is stopped
    from tests.unit.test_executor import GRACE

    w.run(idle(), now=T0 + GRACE)
    assert w.resources["nb-1"].state == "Stopped"
    # THEN the audit trail shows the warning that preceded the stop, not a failure
    trail = w.trail()
    assert trail[0] == "warned", (
        f"first run reported {first}; the audit trail says {trail}: the stop has no "
        "recorded warning, and a 'failed' for a warning that was delivered"
    )
