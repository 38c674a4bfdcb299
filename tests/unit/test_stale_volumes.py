"""Stale EBS, the pure part: the first-seen clock, TTL edges, tags, savings; and the
executor's two small generalisations the multi-run delete needs (NotYet, not_before)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.decisions import Action, Decision, NotYet, Observed, Step, Target
from costguard.domain.findings import FindingCode
from costguard.domain.stale_volumes import (
    ATTACH_MARGIN,
    MAX_TRACKED,
    AttachRecord,
    SnapshotView,
    VolumeRules,
    VolumeView,
    advance_clock,
    from_stamp,
    judge_snapshots,
    judge_volumes,
    merge_clock,
    unproven,
    volume_savings,
)
from costguard.domain.tags import Tags
from costguard.services.executor import Executor, ExecutorSettings
from tests.support.fakes import RecordingNotifier

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TTL = timedelta(hours=48)
GRACE = timedelta(hours=24)
RULES = VolumeRules(default_ttl=TTL, grace=GRACE)
PRICES = {"gp3": Decimal("0.08")}
SNAP = Decimal("0.05")


def vol(vid: str = "vol-1", state: str = "available", size: int = 100, **tags: str) -> VolumeView:
    return VolumeView(
        id=vid,
        region="us-east-1",
        state=state,
        tags={Tags.PROJECT: "vision", Tags.OWNER: "alice@example.com", **tags},
        size_gib=size,
        volume_type="gp3",
        account="123456789012",
    )


def stamp(moment: datetime) -> int:
    return int(moment.timestamp())


def judge(v: VolumeView, first_seen: datetime, now: datetime) -> Decision:
    (d,) = judge_volumes([v], {v.id: stamp(first_seen)}, now, RULES, PRICES, SNAP).decisions
    return d


# -- the first-seen clock ------------------------------------------------------------


def test_starts_the_clock_when_a_volume_is_first_seen_unattached_and_keeps_it() -> None:
    clock, left = advance_clock({}, [vol()], T0)
    assert clock == {"vol-1": stamp(T0)} and left == ()
    later, _ = advance_clock(clock, [vol()], T0 + timedelta(hours=5))
    assert later == {"vol-1": stamp(T0)}


def test_restarts_the_clock_when_the_volume_was_seen_attached_in_between() -> None:
    # GIVEN a volume unattached for 40 hours
    clock, _ = advance_clock({}, [vol()], T0)
    # WHEN a run sees it attached, and a later run unattached again
    clock, left = advance_clock(clock, [vol(state="in-use")], T0 + timedelta(hours=40))
    assert clock == {} and left == ("vol-1",)
    clock, _ = advance_clock(clock, [vol()], T0 + timedelta(hours=41))
    # THEN its clock starts over: a new attachment generation
    assert clock == {"vol-1": stamp(T0 + timedelta(hours=41))}


@pytest.mark.parametrize("gone", [[], [vol(state="deleting")], [vol(**{Tags.PROJECT: ""})][:0]])
def test_a_volume_not_seen_unattached_leaves_the_clock(gone: list[VolumeView]) -> None:
    clock, left = advance_clock({"vol-1": stamp(T0)}, gone, T0 + timedelta(hours=1))
    assert clock == {} and left == ("vol-1",)


def test_a_volume_without_the_project_tag_is_not_clocked() -> None:
    v = VolumeView("vol-9", "us-east-1", "available", {"Project": "vision"}, 10, "gp3")
    assert advance_clock({}, [v], T0) == ({}, ())


def test_a_first_seen_time_in_the_future_is_reset_to_now_never_trusted() -> None:
    clock, _ = advance_clock({"vol-1": stamp(T0 + timedelta(days=3))}, [vol()], T0)
    assert clock == {"vol-1": stamp(T0)}


def test_merging_with_an_overlapping_run_can_only_postpone() -> None:
    stored = {"vol-1": stamp(T0), "vol-2": stamp(T0), "vol-3": stamp(T0)}
    mine = {"vol-1": stamp(T0 + timedelta(hours=1)), "vol-2": stamp(T0)}
    merged = merge_clock(stored, mine, left=("vol-3",))
    assert merged == {"vol-1": stamp(T0 + timedelta(hours=1)), "vol-2": stamp(T0)}


def test_past_the_tracking_cap_the_oldest_are_kept_and_the_rest_wait() -> None:
    volumes = [vol(f"vol-{i:05d}") for i in range(MAX_TRACKED + 3)]
    clock, _ = advance_clock({"vol-00007": stamp(T0 - timedelta(days=1))}, volumes, T0)
    assert len(clock) == MAX_TRACKED and "vol-00007" in clock


# -- the judgement: TTL edges --------------------------------------------------------


def test_warns_a_grace_period_before_the_ttl_and_deletes_not_before_it() -> None:
    # GIVEN a volume first seen unattached at T0 with the default 48 h TTL
    # WHEN judged exactly at TTL - grace, and one second before
    at = judge(vol(), T0, T0 + TTL - GRACE)
    before = judge(vol(), T0, T0 + TTL - GRACE - timedelta(seconds=1))
    # THEN the delete is decided at that instant, not a second earlier, and its earliest
    # moment is the TTL itself
    assert at.action is Action.DELETE_VOLUME and at.not_before == T0 + TTL
    assert at.deadline(T0 + TTL - GRACE) == T0 + TTL
    assert before.action is Action.NONE and "23.9997h of 48h" in before.reason


def test_a_late_first_warning_still_gives_the_owner_the_whole_grace() -> None:
    d = judge(vol(), T0, T0 + timedelta(days=10))
    assert d.deadline(T0 + timedelta(days=10)) == T0 + timedelta(days=11)


def test_the_ttl_tag_on_the_volume_overrides_the_default() -> None:
    v = vol(**{Tags.TTL: "7d"})
    assert judge(v, T0, T0 + timedelta(days=6) - timedelta(seconds=1)).action is Action.NONE
    d = judge(v, T0, T0 + timedelta(days=6))
    assert d.action is Action.DELETE_VOLUME and d.not_before == T0 + timedelta(days=7)


@pytest.mark.parametrize("raw", ["48", "2w", "0h", "", "４８h", "99999d", "48h; rm"])
def test_a_malformed_ttl_is_a_finding_and_the_volume_is_left_alone(raw: str) -> None:
    judged = judge_volumes(
        [vol(**{Tags.TTL: raw})], {"vol-1": stamp(T0)}, T0 + timedelta(days=400), RULES
    )
    assert [d.action for d in judged.decisions] == [Action.NONE]
    assert [f.code for f in judged.findings] == [FindingCode.MALFORMED_TTL]


@pytest.mark.parametrize(
    ("exempt", "acts"),
    [
        ("true", False),
        ("2026-11-30", False),  # until a future day
        ("2026-11-01", True),  # expired
        ("", False),  # malformed: read as exempt
        ("no", True),
    ],
)
def test_exemptions_are_honoured_when_judging(exempt: str, acts: bool) -> None:
    d = judge(vol(**{Tags.EXEMPT: exempt}), T0 - timedelta(days=5), T0)
    assert (d.action is Action.DELETE_VOLUME) is acts


def test_attached_and_untracked_volumes_are_judged_busy() -> None:
    attached = judge(vol(state="in-use"), T0 - timedelta(days=9), T0)
    assert attached.action is Action.NONE
    (untracked,) = judge_volumes([vol()], {}, T0, RULES).decisions
    assert untracked.action is Action.NONE


def test_the_saving_is_the_volume_less_its_snapshot_at_allocated_size() -> None:
    d = judge(vol(size=1000), T0, T0 + TTL)
    # 1000 GiB gp3 at $0.08 = $80/month; the snapshot at most 1000 GiB at $0.05 = $50
    assert d.evidence["volume_usd_per_month"] == "80.00"
    assert d.evidence["snapshot_usd_per_month"].startswith("50.00")
    assert d.usd_per_month_saved == Decimal("30.00")
    off = volume_savings(vol(size=1000), PRICES, SNAP, snapshot=False)[0]
    assert round(off * 730, 2) == Decimal("80.00")


def test_the_saving_counts_provisioned_iops_and_throughput_as_the_scan_prices_them() -> None:
    """GIVEN an unattached gp3 volume of 500 GiB at 6,000 IOPS and 250 MiB/s
    WHEN its deletion's saving is computed without a backup snapshot
    THEN it is the volume as the scan prices it: 500 x 0.08 + 3,000 x 0.005 + 125 x 0.04
    = $60 a month, the provisioned part ($20) in the evidence; without the provisioned
    rates, the GiB alone ($40), and the evidence says the saving is a lower bound."""
    fast = replace(vol(size=500), iops=6000, throughput_mibps=250)
    tiers = {
        "gp3": {"iops": [(3000, Decimal("0.005"))], "throughput_mibps": [(125, Decimal("0.04"))]}
    }
    usd, evidence = volume_savings(fast, PRICES, SNAP, snapshot=False, provisioned=tiers)
    assert round(usd * 730, 6) == Decimal(60)
    assert Decimal(evidence["provisioned_usd_per_month"]) == Decimal(20)
    bare, said = volume_savings(fast, PRICES, SNAP, snapshot=False)
    assert round(bare * 730, 6) == Decimal(40)
    assert "lower bound" in said["provisioned_usd_per_month"]


def test_an_unpriced_volume_type_says_so_rather_than_a_made_up_rate() -> None:
    usd, evidence = volume_savings(vol(), {}, SNAP, snapshot=True)
    assert usd == 0 and evidence["volume_usd_per_month"] == "unpriced"


# -- snapshots -----------------------------------------------------------------------


def snap(sid: str = "snap-1", age: timedelta = timedelta(days=8), **tags: str) -> SnapshotView:
    return SnapshotView(
        sid,
        "us-east-1",
        "completed",
        T0 - age,
        {Tags.PROJECT: "vision", **tags},
        volume_id="vol-1",
        volume_size_gib=100,
    )


def test_deletes_a_snapshot_past_its_ttl_from_its_start_time() -> None:
    judged = judge_snapshots(
        [snap(**{Tags.TTL: "7d"}), snap("snap-2", timedelta(days=5), **{Tags.TTL: "7d"})],
        T0,
        RULES,
        {"us-east-1": SNAP},
    )
    old, young = judged.decisions
    assert old.action is Action.DELETE_SNAPSHOT and old.not_before == T0 - timedelta(days=1)
    assert old.usd_per_month_saved == Decimal("5.00")
    assert young.action is Action.NONE


def test_a_snapshot_started_after_the_runs_now_is_not_said_to_be_negative_hours_old() -> None:
    """GIVEN a snapshot whose start is after the run's "now" (clock skew between the run
    and EC2, or a snapshot started by another run meanwhile)
    WHEN it is judged
    THEN it is kept, and its age reads 0h, never a negative age.

    Defect: the Organization demo read "completed, -346.362h old"."""
    judged = judge_snapshots([snap(age=-timedelta(hours=2), **{Tags.TTL: "7d"})], T0, RULES)
    (young,) = judged.decisions
    assert young.action is Action.NONE and young.reason == "completed, 0h old"


def test_a_snapshot_needs_both_a_ttl_and_a_project_and_a_valid_ttl() -> None:
    no_project = SnapshotView("snap-3", "us-east-1", "completed", T0, {Tags.TTL: "1h"})
    no_ttl = snap("snap-4")
    judged = judge_snapshots(
        [no_project, no_ttl, snap("snap-5", **{Tags.TTL: "seven days"})], T0, RULES
    )
    assert [d.action for d in judged.decisions] == [Action.NONE]
    assert [f.code for f in judged.findings] == [FindingCode.MALFORMED_TTL]


def test_a_warned_snapshot_that_left_scope_gets_a_none_decision_to_withdraw_it() -> None:
    # GIVEN warned snapshots, one whose project and one whose time to live was removed
    warned = {Tags.ACTION_AFTER: "2026-11-21T12:00:00Z"}
    no_project = SnapshotView("snap-7", "us-east-1", "completed", T0, {Tags.TTL: "1h", **warned})
    no_ttl = snap("snap-8", **warned)
    # WHEN judged
    judged = judge_snapshots([no_project, no_ttl], T0, RULES)
    # THEN each gets a NONE decision (the executor withdraws the warning), saying why
    assert [(d.target.id, d.action) for d in judged.decisions] == [
        ("snap-7", Action.NONE),
        ("snap-8", Action.NONE),
    ]
    assert "costguard:project" in judged.decisions[0].reason
    assert "costguard:ttl" in judged.decisions[1].reason
    assert judged.decisions[0].target.tags_seen == no_project.tags


def test_a_warned_volume_that_left_scope_gets_a_none_decision_to_withdraw_it() -> None:
    # GIVEN a warned volume whose project tag was removed, and an unwarned one likewise
    warned = VolumeView(
        "vol-9", "us-east-1", "available", {Tags.ACTION_AFTER: "2026-11-21T12:00:00Z"}
    )
    quiet = VolumeView("vol-10", "us-east-1", "available", {})
    # WHEN judged
    judged = judge_volumes([warned, quiet], {}, T0, RULES)
    # THEN only the warned one gets a decision: NONE, so the executor withdraws it
    assert [(d.target.id, d.action) for d in judged.decisions] == [("vol-9", Action.NONE)]


def test_an_exempt_or_pending_snapshot_is_not_deleted() -> None:
    exempt = snap(**{Tags.TTL: "1d", Tags.EXEMPT: "yes"})
    pending = SnapshotView(
        "snap-6",
        "us-east-1",
        "pending",
        T0 - timedelta(days=9),
        {Tags.PROJECT: "v", Tags.TTL: "1d"},
    )
    assert [d.action for d in judge_snapshots([exempt, pending], T0, RULES).decisions] == [
        Action.NONE,
        Action.NONE,
    ]


# -- the executor: multi-run actions and not_before ------------------------------------


class StagedActuator:
    """Answers apply() from a script: NotYet values, then a string."""

    kind = "ebs-volume"
    opt_in_tags: tuple[str, ...] = ()

    def __init__(self, *answers: str | NotYet) -> None:
        self.answers = list(answers)
        self.tags: dict[str, str] = {Tags.PROJECT: "vision"}
        self.applied = 0

    def inspect(self, targets: Sequence[Target]) -> dict[str, Observed]:
        return {t.key: Observed("available", dict(self.tags)) for t in targets}

    def mark(self, target: Target, key: str, value: str) -> None:
        self.tags[key] = value

    def unmark(self, target: Target, key: str) -> None:
        self.tags.pop(key, None)

    def apply(self, decision: Decision) -> str | NotYet:
        self.applied += 1
        return self.answers.pop(0)


def _delete(now: datetime, not_before: datetime | None = None) -> Decision:
    return Decision(
        Action.DELETE_VOLUME,
        Target("us-east-1/ebs-volume/vol-1", "ebs-volume", "us-east-1", "vol-1", "1", "vision"),
        "unattached past its TTL",
        now,
        usd_per_hour_saved=Decimal("0.1"),
        grace=GRACE,
        not_before=not_before,
    )


def _executor(actuator: StagedActuator, ledger: InMemoryLedger, sent: list[object]) -> Executor:
    return Executor([actuator], ledger, RecordingNotifier(sent), ExecutorSettings("1", False))


def test_a_not_yet_action_counts_nothing_keeps_the_warning_and_is_retried() -> None:
    # GIVEN a warned volume whose actuator needs three runs (start, wait, done)
    a = StagedActuator(
        NotYet("snapshot snap-1 started", started=True), NotYet("waiting for snap-1"), "deleted"
    )
    ledger, sent = InMemoryLedger(), []
    ex = _executor(a, ledger, sent)
    assert [o.step for o in ex.run([_delete(T0)], T0).outcomes] == [Step.WARNED]
    due = T0 + GRACE
    # WHEN the runs come after the deadline
    first = ex.run([_delete(due)], due).outcomes[0]
    # THEN a started step is audited, and keeps its claim for the lease: an overlapping
    # run does not call apply again
    assert first.step is Step.WAITING and first.detail == "snapshot snap-1 started"
    again = ex.run([_delete(due)], due + timedelta(minutes=1)).outcomes[0]
    assert again.step is Step.CLAIMED_ELSEWHERE and a.applied == 1
    # a plain wait releases its claim at once
    later = due + timedelta(minutes=20)
    assert ex.run([_delete(later)], later).outcomes[0].step is Step.WAITING
    assert ex.run([_delete(later)], later).outcomes[0].step is Step.ACTED
    assert a.applied == 3
    # the warning stayed on until the action was done; one taken alert, for the delete
    assert Tags.ACTION_AFTER not in a.tags
    audit = [e.outcome for e in ledger.audit_trail("1", "2026-11")]
    assert audit == ["warned", "waiting", "acted"]
    assert [getattr(s, "kind", None) for s in sent].count("action-taken") == 1


def test_never_acts_before_not_before_even_on_an_older_valid_deadline() -> None:
    # GIVEN a volume warned with a deadline that passed (its earlier unattached spell)
    a = StagedActuator("deleted")
    ledger, sent = InMemoryLedger(), []
    ex = _executor(a, ledger, sent)
    ex.run([_delete(T0)], T0)
    # WHEN the policy now says "not before" a later time (its clock restarted)
    restart = T0 + GRACE + timedelta(hours=1)
    not_before = restart + TTL
    d = _delete(restart, not_before=not_before)
    # THEN it waits until then, to the second
    step = ex.run([d], not_before - timedelta(seconds=1)).outcomes[0]
    assert step.step is Step.WAITING and a.applied == 0
    assert ex.run([d], not_before).outcomes[0].step is Step.ACTED


def test_first_seen_clock_round_trips_through_epoch_seconds() -> None:
    assert from_stamp(stamp(T0)) == T0


# -- the backup's proof: no attachment since the snapshot began ----------------------------


BEGAN = T0 + TTL


@pytest.mark.parametrize(
    ("record", "proved"),
    [
        # read from the margin before the backup began, every event, no attachment: proved
        (AttachRecord(BEGAN - ATTACH_MARGIN, True), True),
        (AttachRecord(BEGAN - 2 * ATTACH_MARGIN, True), True),
        # an attachment after it began, or in the margin before it (the volume was inspected
        # unattached just before CreateSnapshot): not proved, even from an incomplete read
        (AttachRecord(BEGAN - ATTACH_MARGIN, True, BEGAN + timedelta(hours=1)), False),
        (AttachRecord(BEGAN - ATTACH_MARGIN, True, BEGAN - timedelta(minutes=1)), False),
        (AttachRecord(BEGAN - ATTACH_MARGIN, False, BEGAN + timedelta(hours=1)), False),
        # a read that began too late, or was cut short: not proved
        (AttachRecord(BEGAN, True), False),
        (AttachRecord(BEGAN - ATTACH_MARGIN, False), False),
    ],
)
def test_a_backup_holds_everything_only_if_no_attachment_can_have_followed_it(
    record: AttachRecord, proved: bool
) -> None:
    why = unproven(BEGAN, record)
    assert (why is None) is proved
    if record.last_attach is not None:
        assert why is not None and "attached at" in why
