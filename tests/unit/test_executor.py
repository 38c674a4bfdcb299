"""The executor: warn, wait, act, audit, tell; dry-run, exemptions, claims, failures."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.alerts import AlertKind
from costguard.domain.decisions import Action, Decision, Observed, Step, Target
from costguard.domain.tags import Tags
from costguard.ports import AuditEvent
from costguard.services.executor import Executor, ExecutorSettings
from tests.support.actuators import FakeResource, InMemoryActuator
from tests.support.fakes import RecordingNotifier

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
GRACE = timedelta(hours=24)
KIND = "sagemaker-notebook"


def target(rid: str = "nb-1", project: str | None = "vision") -> Target:
    return Target(
        key=f"us-east-1/{KIND}/{rid}",
        kind=KIND,
        region="us-east-1",
        id=rid,
        account="123456789012",
        project=project,
        owners=("alice@example.com",),
    )


def idle(rid: str = "nb-1", now: datetime = T0, action: Action = Action.STOP_NOTEBOOK) -> Decision:
    return Decision(
        action=action,
        target=target(rid),
        reason="GPU under 5% for 60 minutes",
        decided_at=now,
        evidence={"gpu_max_pct": "1.2"},
        usd_per_hour_saved=Decimal("1.41"),
        grace=GRACE,
    )


def busy(rid: str = "nb-1", now: datetime = T0) -> Decision:
    return Decision(Action.NONE, target(rid), "GPU at 43%", now)


class World:
    def __init__(self, *ids: str, dry_run: bool = False, **tags: dict[str, str]) -> None:
        self.resources = {
            rid: FakeResource(tags={Tags.PROJECT: "vision", **tags.get(rid, {})}) for rid in ids
        }
        self.actuator = InMemoryActuator(KIND, self.resources)
        self.ledger = InMemoryLedger()
        self.sent: list[object] = []
        self.notifier = RecordingNotifier(self.sent)
        self.dry_run = dry_run

    def executor(self) -> Executor:
        return Executor(
            [self.actuator],
            self.ledger,
            self.notifier,
            ExecutorSettings(scope="123456789012", dry_run=self.dry_run),
        )

    def run(self, *decisions: Decision, now: datetime = T0) -> list[Step]:
        return [o.step for o in self.executor().run(decisions, now).outcomes]

    def warned(self, *ids: str, ago: timedelta = GRACE + timedelta(hours=1)) -> None:
        """Have CostGuard itself warn about these, long enough ago that they are due."""
        enforce = Executor(
            [self.actuator], self.ledger, self.notifier, ExecutorSettings("123456789012", False)
        )
        report = enforce.run([idle(rid, now=T0 - ago) for rid in ids], T0 - ago)
        assert [o.step for o in report.outcomes] == [Step.WARNED] * len(ids)
        self.sent.clear()

    def trail(self) -> list[str]:
        return [e.outcome for e in self.ledger.audit_trail("123456789012", "2026-11")]


def test_warns_first_then_waits_then_stops_after_the_grace_period() -> None:
    w = World("nb-1")
    # WHEN an idle notebook is first judged
    assert w.run(idle()) == [Step.WARNED]
    # THEN it is tagged with the deadline and the owner is told
    assert w.resources["nb-1"].tags[Tags.ACTION_AFTER] == "2026-11-21T12:00:00Z"
    assert w.resources["nb-1"].state == "InService"
    (warning,) = w.sent
    assert warning.kind is AlertKind.ACTION_WARNING
    assert warning.owners == ("alice@example.com",)
    # WHEN it is still idle before the deadline, THEN nothing happens
    assert w.run(idle(), now=T0 + GRACE - timedelta(seconds=1)) == [Step.WAITING]
    # WHEN it is still idle at the deadline, THEN it is stopped, audited and the owner told
    assert w.run(idle(), now=T0 + GRACE) == [Step.ACTED]
    assert w.resources["nb-1"].state == "Stopped"
    assert Tags.ACTION_AFTER not in w.resources["nb-1"].tags
    assert [a.kind for a in w.sent] == [AlertKind.ACTION_WARNING, AlertKind.ACTION_TAKEN]
    acted = w.ledger.audit_trail("123456789012", "2026-11")[-1]
    assert acted.outcome == "acted"
    assert acted.details["state_found"] == "InService"
    assert acted.details["evidence"] == {"gpu_max_pct": "1.2"}
    assert acted.details["reason"] == "GPU under 5% for 60 minutes"
    assert Decimal(acted.details["usd_per_month_saved"]) == Decimal("1029.30")


def test_running_again_after_acting_stops_nothing_more() -> None:
    w = World("nb-1")
    w.run(idle())
    w.run(idle(), now=T0 + GRACE)
    applies = [c for c in w.actuator.calls if c[0] == "apply"]
    assert w.run(idle(), now=T0 + GRACE + timedelta(minutes=15)) == [Step.SKIPPED]
    assert [c for c in w.actuator.calls if c[0] == "apply"] == applies


def test_activity_before_the_deadline_withdraws_the_warning() -> None:
    w = World("nb-1")
    w.run(idle())
    assert w.run(busy(), now=T0 + timedelta(hours=2)) == [Step.CLEARED]
    assert Tags.ACTION_AFTER not in w.resources["nb-1"].tags
    # THEN a later idle spell starts a new grace period instead of acting at once
    assert w.run(idle(), now=T0 + GRACE) == [Step.WARNED]
    assert w.resources["nb-1"].state == "InService"


def test_an_exemption_added_before_the_deadline_withdraws_the_warning() -> None:
    w = World("nb-1")
    w.run(idle())
    w.resources["nb-1"].tags[Tags.EXEMPT] = "2026-12-31"
    assert w.run(idle(), now=T0 + GRACE) == [Step.CLEARED]
    assert w.resources["nb-1"].state == "InService"
    assert Tags.ACTION_AFTER not in w.resources["nb-1"].tags


@pytest.mark.parametrize("exempt", ["true", "9999-12-31", "20261231", "not a date"])
def test_exempt_resources_are_never_touched(exempt: str) -> None:
    w = World("nb-1", **{"nb-1": {Tags.EXEMPT: exempt}})
    assert w.run(idle()) == [Step.SKIPPED]
    assert w.actuator.calls == []


def test_an_expired_exemption_no_longer_protects() -> None:
    w = World("nb-1", **{"nb-1": {Tags.EXEMPT: "2026-11-01"}})
    assert w.run(idle()) == [Step.WARNED]


def test_resources_without_a_project_are_out_of_scope_unless_opted_in() -> None:
    w = World("nb-1")
    w.resources["nb-1"].tags.pop(Tags.PROJECT)
    assert w.run(idle()) == [Step.SKIPPED]
    assert w.actuator.calls == []
    w.resources["nb-1"].tags["costguard:ttl"] = "48h"
    settings = ExecutorSettings("s", False, opt_in_tags=("costguard:ttl",))
    # An opt-in the actuator's IAM conditions do not allow does not count...
    refused = Executor([w.actuator], w.ledger, w.notifier, settings)
    assert [o.step for o in refused.run([idle()], T0).outcomes] == [Step.SKIPPED]
    # ...one they do, does.
    w.actuator.opt_in_tags = ("costguard:ttl",)
    opted = Executor(
        [w.actuator],
        w.ledger,
        w.notifier,
        ExecutorSettings("s", False, opt_in_tags=("costguard:ttl",)),
    )
    assert [o.step for o in opted.run([idle()], T0).outcomes] == [Step.WARNED]


def test_dry_run_changes_nothing_and_reports_the_saving() -> None:
    w = World("nb-1", "nb-2", dry_run=True)
    report = w.executor().run([idle("nb-1"), idle("nb-2")], T0)
    assert [o.step for o in report.outcomes] == [Step.WOULD_WARN, Step.WOULD_WARN]
    assert report.saved_usd_per_month(Step.WOULD_WARN) == Decimal("2058.60")
    assert w.actuator.calls == []
    assert w.sent == []
    # AND the audit trail says what would happen, once however often it runs
    w.executor().run([idle("nb-1")], T0 + timedelta(minutes=15))
    assert w.trail() == ["would-warn", "would-warn"]


def test_dry_run_never_acts_even_on_a_resource_warned_before() -> None:
    w = World("nb-1", dry_run=True)
    w.warned("nb-1")  # by an enforcing deployment, before dryRun was turned back on
    w.actuator.calls.clear()
    assert w.run(idle()) == [Step.WOULD_ACT]
    assert w.actuator.calls == []


def test_overlapping_runs_act_once() -> None:
    w = World("nb-1")
    w.warned("nb-1")
    barrier = threading.Barrier(6)
    w.actuator.inspect_barrier = threading.Barrier(6)  # all six see it running
    steps: list[Step] = []

    def run() -> None:
        barrier.wait()
        steps.extend(w.run(idle()))

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [c for c in w.actuator.calls if c[0] == "apply"] == [("apply", "nb-1")]
    assert steps.count(Step.ACTED) == 1
    assert set(steps) <= {Step.ACTED, Step.CLAIMED_ELSEWHERE, Step.SKIPPED}


def test_a_failure_on_one_resource_is_recorded_and_the_rest_proceed() -> None:
    w = World("nb-1", "nb-2")
    w.warned("nb-1", "nb-2")
    w.actuator.fail_on.add("nb-1")
    report = w.executor().run([idle("nb-1"), idle("nb-2")], T0)
    assert [o.step for o in report.outcomes] == [Step.FAILED, Step.ACTED]
    assert len(report.failures) == 1
    assert "cannot stop nb-1" in (report.failures[0].error or "")
    assert "failed" in w.trail()
    # AND the failed action is retried by the next run, not lost to its claim
    w.actuator.fail_on.clear()
    assert w.run(idle("nb-1"), now=T0 + timedelta(minutes=15)) == [Step.ACTED]


def test_a_resource_that_disappeared_is_skipped() -> None:
    w = World("nb-1")
    assert w.run(idle("gone")) == [Step.SKIPPED]


def test_a_hand_edited_malformed_deadline_means_warn_again_not_act() -> None:
    w = World("nb-1", **{"nb-1": {Tags.ACTION_AFTER: "soon"}})
    assert w.run(idle()) == [Step.WARNED]
    assert w.resources["nb-1"].state == "InService"


def test_a_resource_attributed_by_a_fallback_key_is_not_acted_on() -> None:
    # IAM lets the actuator act only where costguard:project is set; Project=... is not.
    w = World("nb-1")
    w.resources["nb-1"].tags.pop(Tags.PROJECT)
    w.resources["nb-1"].tags["Project"] = "vision"
    assert w.run(idle()) == [Step.SKIPPED]
    assert w.actuator.calls == []


def test_the_scan_report_shows_what_actions_saved_this_month() -> None:
    from costguard.ports import Inventory
    from costguard.services.scan import ScanService, ScanSettings
    from tests.support.catalog import fixture_catalog
    from tests.support.fakes import StaticInventory, StaticSpotPrices

    # GIVEN a notebook stopped after its grace period, two hours before the scan
    w = World("nb-1")
    w.warned("nb-1", ago=GRACE)
    assert w.run(idle()) == [Step.ACTED]
    w.run(idle("nb-1"), now=T0)  # settled: nothing more
    from costguard.domain.models import Resource, ResourceKind

    running = Resource(
        id="i-1",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="g5.xlarge",
        launched_at=T0,
        tags={Tags.PROJECT: "vision"},
    )
    report = ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory((running,))})],
        StaticSpotPrices({}),
        fixture_catalog(),
        w.ledger,
        ScanSettings(scope="123456789012", regions=("us-east-1",)),
    ).run(T0 + timedelta(hours=2))
    (vision,) = report.projects
    # THEN its savings are the action's rate, and the rate times the two hours since
    assert vision.savings.actions == 1
    assert vision.savings.usd_per_hour == Decimal("1.41")
    assert vision.savings.month_to_date_usd_estimated == Decimal("2.82")


def test_a_policy_that_knows_when_acts_no_sooner_than_the_grace_period_allows() -> None:
    from dataclasses import replace

    w = World("nb-1", "nb-2")
    later = T0 + 3 * GRACE  # e.g. a time to live that runs out in three days
    sooner = T0 + timedelta(hours=1)  # one that has (almost) run out already
    w.run(replace(idle("nb-1"), not_before=later), replace(idle("nb-2"), not_before=sooner))
    assert w.resources["nb-1"].tags[Tags.ACTION_AFTER] == "2026-11-23T12:00:00Z"
    # the warning's grace period still holds when the policy's time comes first
    assert w.resources["nb-2"].tags[Tags.ACTION_AFTER] == "2026-11-21T12:00:00Z"


def test_a_warning_from_before_a_restart_is_void_and_the_new_session_is_warned() -> None:
    from dataclasses import replace

    # GIVEN a notebook warned this morning, stopped by its owner and started again an
    # hour ago (the same day: the one-warning-a-day limit is per session)
    w = World("nb-1")
    w.warned("nb-1", ago=timedelta(hours=3))
    restarted = replace(idle(), session_start=T0 - timedelta(hours=1))
    # WHEN the policy judges the new session idle
    steps = w.run(restarted)
    # THEN the old deadline is not acted on: the owner is warned about this session
    assert steps == [Step.WARNED]
    assert w.resources["nb-1"].state == "InService"
    assert w.resources["nb-1"].tags[Tags.ACTION_AFTER] == "2026-11-21T12:00:00Z"
    # AND that new warning is the one acted on, once its grace period has run
    assert w.run(restarted, now=T0 + GRACE) == [Step.ACTED]


def test_a_warning_within_the_current_session_still_counts() -> None:
    from dataclasses import replace

    w = World("nb-1")
    w.warned("nb-1", ago=GRACE + timedelta(hours=1))
    same = replace(idle(), session_start=T0 - GRACE - timedelta(hours=3))
    assert w.run(same) == [Step.ACTED]


def test_a_busy_resource_the_policy_saw_unwarned_costs_no_call() -> None:
    from dataclasses import replace

    w = World("nb-1", "nb-2")
    w.run(idle("nb-2"))  # nb-2 is warned; nb-1 never was
    calls_before = len(w.actuator.calls)
    w.actuator.looks.clear()
    busy1 = busy("nb-1")
    busy2 = busy("nb-2")
    fresh = replace(busy1, target=replace(busy1.target, tags_seen={Tags.PROJECT: "vision"}))
    warned = replace(
        busy2,
        target=replace(busy2.target, tags_seen=dict(w.resources["nb-2"].tags)),
    )
    assert w.run(fresh, warned) == [Step.CLEARED]
    # THEN only the resource that carried a warning was looked at (and its tag removed)
    assert w.actuator.looks == [("nb-2",)]
    assert len(w.actuator.calls) == calls_before + 1


# -- a claim ends with the warning it guards ----------------------------------------------


def test_a_notebook_used_after_its_warning_is_warned_again_at_once_when_idle() -> None:
    """Defect: a notebook was warned, used, cleared an hour later, and then reported
    every hour as "claimed-elsewhere: another run is warning about it" while idle, until
    the next UTC day: the withdrawn warning's claim outlived it.

    GIVEN a notebook warned at 12:00 WHEN it is used at 13:00 (cleared) and idle again
    at 14:00 THEN it is warned again at 14:00, once; and that warning is acted on."""
    w = World("nb-1")
    assert w.run(idle()) == [Step.WARNED]
    assert w.run(busy(), now=T0 + timedelta(hours=1)) == [Step.CLEARED]
    again = T0 + timedelta(hours=2)
    assert w.run(idle(now=again), now=again) == [Step.WARNED]
    assert w.resources["nb-1"].tags[Tags.ACTION_AFTER] == "2026-11-21T14:00:00Z"
    assert [a.kind for a in w.sent].count(AlertKind.ACTION_WARNING) == 2
    # AND a rerun of the same hour does not warn a third time
    assert w.run(idle(now=again), now=again + timedelta(minutes=5)) == [Step.WAITING]
    assert w.run(idle(), now=again + GRACE) == [Step.ACTED]


def test_a_resource_whose_project_tag_came_back_starts_a_new_warning_at_once() -> None:
    """Defect: a volume whose project tag came back waited 10.5 hours for its new
    warning (the next UTC day), where the README says restoring the tag "starts a new
    warning".

    GIVEN a resource warned at 12:00 WHEN its project tag is removed (the warning is
    withdrawn) and put back half an hour later THEN the next run warns it afresh."""
    w = World("nb-1")
    assert w.run(idle()) == [Step.WARNED]
    w.resources["nb-1"].tags.pop(Tags.PROJECT)
    assert w.run(idle(), now=T0 + timedelta(minutes=30)) == [Step.CLEARED]
    w.resources["nb-1"].tags[Tags.PROJECT] = "vision"
    back = T0 + timedelta(hours=1)
    assert w.run(idle(now=back), now=back) == [Step.WARNED]


def test_a_withdrawal_in_dry_run_ends_the_claim_too() -> None:
    """GIVEN a warning given while enforcing, WHEN dry-run is turned on and the notebook
    is used (the warning withdrawn in the ledger, its tag left), and enforcing is turned
    back on while it is idle, THEN it is warned afresh the same day."""
    w = World("nb-1")
    assert w.run(idle()) == [Step.WARNED]
    w.dry_run = True
    assert w.run(busy(), now=T0 + timedelta(hours=1)) == [Step.CLEARED]
    w.dry_run = False
    back = T0 + timedelta(hours=2)
    assert w.run(idle(now=back), now=back) == [Step.WARNED]


def test_without_a_withdrawal_it_is_still_one_warning_a_day() -> None:
    """GIVEN a warning whose tag the owner deleted by hand (not withdrawn by CostGuard)
    WHEN the notebook is still idle THEN it is not warned again that day."""
    w = World("nb-1")
    assert w.run(idle()) == [Step.WARNED]
    w.resources["nb-1"].tags.pop(Tags.ACTION_AFTER)
    later = T0 + timedelta(hours=1)
    assert w.run(idle(now=later), now=later) == [Step.CLAIMED_ELSEWHERE]


def test_overlapping_runs_after_a_withdrawal_warn_once() -> None:
    """GIVEN a withdrawn warning WHEN six overlapping runs find the notebook idle again
    at once THEN exactly one warns it, and the owner gets one new warning."""
    w = World("nb-1")
    w.run(idle())
    w.run(busy(), now=T0 + timedelta(hours=1))
    w.sent.clear()
    again = T0 + timedelta(hours=2)
    barrier = threading.Barrier(6)
    w.actuator.inspect_barrier = threading.Barrier(6)
    steps: list[Step] = []

    def run() -> None:
        barrier.wait()
        steps.extend(w.run(idle(now=again), now=again))

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert steps.count(Step.WARNED) == 1
    assert set(steps) <= {Step.WARNED, Step.CLAIMED_ELSEWHERE, Step.WAITING}
    assert len(w.sent) == 1


# -- one pass costs reads per page, not per resource --------------------------------------


class CountingLedger(InMemoryLedger):
    """The in-memory ledger, counting the calls a run makes to it (one call each)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def audit(self, event: object) -> bool:  # type: ignore[override]
        self.calls.append("audit")
        return super().audit(event)  # type: ignore[arg-type]

    def audit_many(self, events: object) -> None:  # type: ignore[override]
        self.calls.append("audit_many")
        super().audit_many(events)  # type: ignore[arg-type]

    def status(self, namespace: str, key: str) -> str | None:
        self.calls.append("status")
        return super().status(namespace, key)

    def statuses(self, keys: object) -> dict[tuple[str, str], str]:  # type: ignore[override]
        self.calls.append("statuses")
        return super().statuses(keys)  # type: ignore[arg-type]

    def get_state(self, scope: str, name: str) -> tuple[dict[str, object], int]:
        self.calls.append("get_state")
        return super().get_state(scope, name)

    def put_state(self, scope: str, name: str, value: object, expected_version: int) -> bool:  # type: ignore[override]
        self.calls.append("put_state")
        return super().put_state(scope, name, value, expected_version)  # type: ignore[arg-type]


def test_a_dry_run_records_a_report_when_it_changes_not_every_run() -> None:
    """Defect: a dry-run wrote an audit item per idle notebook every pass (500 PutItem a
    pass on a half-idle 1,000-notebook fleet), to say the same "would stop" again.

    GIVEN 30 idle notebooks in dry-run WHEN the guard runs every hour THEN the first run
    records 30 reports in one shared write, the next runs write nothing (one read of what
    was reported), and a notebook busy in between is reported again when idle again."""
    ids = [f"nb-{n}" for n in range(30)]
    w = World(*ids, dry_run=True)
    ledger = CountingLedger()
    w.ledger = ledger
    assert w.run(*(idle(i) for i in ids)) == [Step.WOULD_WARN] * 30
    assert ledger.calls == ["get_state", "audit_many", "put_state"]
    assert len(w.trail()) == 30
    for hour in (1, 2, 25):
        ledger.calls.clear()
        at = T0 + timedelta(hours=hour)
        assert w.run(*(idle(i, now=at) for i in ids), now=at) == [Step.WOULD_WARN] * 30
        assert ledger.calls == ["get_state"], hour
    assert len(w.trail()) == 30
    # WHEN nb-0 is busy for a run and idle again THEN it is reported anew (once)
    at = T0 + timedelta(hours=26)
    w.run(busy("nb-0", now=at), *(idle(i, now=at) for i in ids[1:]), now=at)
    at += timedelta(hours=1)
    w.run(*(idle(i, now=at) for i in ids), now=at)
    w.run(*(idle(i, now=at) for i in ids), now=at + timedelta(hours=1))
    assert len(w.trail()) == 31


def test_one_look_serves_the_whole_pass_and_an_action_looks_again_just_before() -> None:
    """GIVEN 20 notebooks warned long enough ago to be due, and 20 fresh idle ones
    WHEN one enforcing run handles all 40 THEN the actuator is asked once for all 40,
    the ledger records of the 20 warnings are read in one call, and each of the 20 stops
    re-reads its own resource (scope, exemption, state) and whether its warning was
    withdrawn, just before acting."""
    due = [f"due-{n}" for n in range(20)]
    new = [f"new-{n}" for n in range(20)]
    w = World(*due, *new)
    w.ledger = ledger_calls = CountingLedger()
    w.warned(*due)
    ledger_calls.calls.clear()
    w.actuator.looks.clear()
    steps = w.run(*(idle(i) for i in due + new))
    assert steps == [Step.ACTED] * 20 + [Step.WARNED] * 20
    assert w.actuator.looks[0] == tuple(due + new)
    assert sorted(w.actuator.looks[1:]) == sorted((i,) for i in due)
    assert ledger_calls.calls.count("statuses") == 1
    # (each stop reads again, just before it acts, whether its warning was withdrawn)
    assert ledger_calls.calls.count("status") == 20


def test_an_exemption_added_after_the_shared_look_stops_the_action() -> None:
    """GIVEN a due notebook WHEN its owner exempts it after the run's shared look THEN
    the look just before acting sees the exemption: withdrawn, never stopped."""
    w = World("nb-1")
    w.warned("nb-1")
    inspect = w.actuator.inspect

    def exempted_meanwhile(targets: Sequence[Target]) -> dict[str, Observed]:
        seen = inspect(targets)
        w.resources["nb-1"].tags[Tags.EXEMPT] = "true"
        return seen

    w.actuator.inspect = exempted_meanwhile  # type: ignore[method-assign]
    assert w.run(idle()) == [Step.CLEARED]
    assert w.resources["nb-1"].state == "InService"


def test_an_audit_write_that_fails_fails_the_outcomes_it_was_for() -> None:
    """GIVEN the ledger refusing audit writes WHEN a dry-run reports two notebooks
    THEN both outcomes carry the error (the run fails, so the retry writes them)."""
    w = World("nb-1", "nb-2", dry_run=True)

    def refuse(events: object) -> None:
        raise RuntimeError("throttled")

    w.ledger.audit_many = refuse  # type: ignore[method-assign]
    report = w.executor().run([idle("nb-1"), idle("nb-2")], T0)
    assert len(report.failures) == 2
    assert all("audit write failed" in (o.error or "") for o in report.failures)
    # AND nothing is remembered as reported: the next run writes them
    w.ledger.audit_many = InMemoryLedger.audit_many.__get__(w.ledger)  # type: ignore[method-assign]
    assert not w.executor().run([idle("nb-1"), idle("nb-2")], T0 + GRACE).failures
    assert len(w.trail()) == 2


def test_a_shared_read_that_fails_leaves_each_decision_to_read_its_own() -> None:
    """GIVEN two due notebooks and the ledger's batched read failing WHEN the run acts
    THEN each reads its own warning records and is stopped: the run is not lost."""
    w = World("nb-1", "nb-2")
    w.warned("nb-1", "nb-2")

    def refuse(keys: object) -> dict[tuple[str, str], str]:
        raise RuntimeError("throttled")

    w.ledger.statuses = refuse  # type: ignore[method-assign]
    assert w.run(idle("nb-1"), idle("nb-2")) == [Step.ACTED, Step.ACTED]


def test_a_run_that_read_the_ledger_before_another_runs_warning_landed_never_warns_again() -> None:
    """GIVEN a notebook warned by run A WHEN an overlapping run B, whose shared read of
    the ledger was taken before A's warning was recorded, sees A's tag and takes it for a
    warning that does not count THEN B does not warn a second time: A's claim is never
    reopened by B (only a withdrawal, or another configuration, ends it)."""
    w = World("nb-1")
    assert w.run(idle()) == [Step.WARNED]
    w.ledger.statuses = lambda keys: {}  # type: ignore[method-assign]  # B's stale read
    assert w.run(idle(), now=T0 + timedelta(minutes=5)) == [Step.CLAIMED_ELSEWHERE]
    assert [a.kind for a in w.sent] == [AlertKind.ACTION_WARNING]


def test_a_standing_warning_about_another_configuration_is_superseded_at_once() -> None:
    """GIVEN a standing warning (a sweep's) about configuration c1 WHEN the configuration
    changes to c2 the same day THEN the owner is warned about c2 at once; AND a run whose
    read is stale about the c2 warning (landing right now) does not warn about c2 twice."""
    from dataclasses import replace

    w = World("nb-1")
    c1 = replace(idle(), standing="c1")
    assert w.run(c1) == [Step.WARNED]
    later = T0 + timedelta(hours=1)
    c2 = replace(idle(now=later), standing="c2")
    assert w.run(c2, now=later) == [Step.WARNED]
    w.ledger.statuses = lambda keys: {}  # type: ignore[method-assign]
    assert w.run(c2, now=later + timedelta(minutes=5)) == [Step.CLAIMED_ELSEWHERE]
    assert [a.kind for a in w.sent].count(AlertKind.ACTION_WARNING) == 2


def test_a_withdrawal_landing_after_the_shared_read_stops_the_action() -> None:
    """GIVEN a due notebook whose warning a dry-run withdrew (the tag left in place)
    after this run's shared read of the ledger WHEN the run comes to act THEN it reads
    the withdrawal just before acting: warned afresh, never stopped."""
    w = World("nb-1")
    w.warned("nb-1")
    shared = w.ledger.statuses

    def read_then_withdrawn(keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        found = shared(keys)
        for namespace, key in keys:
            if namespace == "withdrawn":
                w.ledger.put_once(namespace, key, T0, {"why": "it is in use again"})
        return found

    w.ledger.statuses = read_then_withdrawn  # type: ignore[method-assign]
    assert w.run(idle()) == [Step.WARNED]
    assert w.resources["nb-1"].state == "InService"


# -- a failing notifier, a copied or hand-set deadline, a racing run (was tests/attack) --------


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


# -- a flaky ledger: a throttled claim, audit or confirm (was tests/attack2) ---------------


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
    w.run(idle(), now=T0 + GRACE)
    assert w.resources["nb-1"].state == "Stopped"
    # THEN the audit trail shows the warning that preceded the stop, not a failure
    trail = w.trail()
    assert trail[0] == "warned", (
        f"first run reported {first}; the audit trail says {trail}: the stop has no "
        "recorded warning, and a 'failed' for a warning that was delivered"
    )
