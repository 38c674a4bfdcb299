"""The sweep's pure rules and the executor's standing warnings (fakes, no moto)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.decisions import Action, Decision, Observed, Step, Target
from costguard.domain.sweep import (
    SweepConfig,
    Tally,
    backstop,
    breaker_reason,
    confirmation_key,
    confirms,
    merge_lifecycle,
    normalise_prefixes,
)
from costguard.services.executor import Executor, ExecutorSettings
from costguard.services.sweep import BucketRef, SweepService, SweepSettings
from tests.support.fake_s3 import Countdown, FakeBucket, FakeS3, Unlimited, obj

#: The day the sweeps below run on, at noon: the confirmation tags name it ("2026-11-05").
SWEEP_DAY = datetime(2026, 11, 5, 12, tzinfo=UTC)
OWNER_RULE = {
    "ID": "owner-logs",
    "Status": "Enabled",
    "Filter": {"Prefix": "logs/"},
    "Expiration": {"Days": 7},
}


def test_keeps_every_owner_rule_when_merging_the_backstop() -> None:
    # GIVEN an owner rule and a stale CostGuard rule
    ours = backstop(SweepConfig(timedelta(hours=48), ("tmp/",)), object_lock=False).rules
    stale = {**ours[0], "Expiration": {"Days": 1}}
    # WHEN merged
    merged = merge_lifecycle([OWNER_RULE, stale], ours)
    # THEN the owner rule survives unchanged, ours is restored, and the drift reported
    assert merged.rules[0] == OWNER_RULE
    assert merged.rules[1] == ours[0] and merged.changed
    assert merged.drift == ("rule costguard-ttl-0 differs from what CostGuard wrote",)
    assert ours[0]["Expiration"] == {"Days": 3}  # 48 h, and a day's margin for the sweep


def test_withdraws_rules_an_earlier_version_wrote_and_keeps_owner_rules_named_like_ours() -> None:
    """GIVEN a rule an earlier CostGuard wrote (no margin day, noncurrent versions purged),
    an owner's rule named costguard-ttl-archive, and an owner's costguard-ttl-1 that
    transitions; WHEN CostGuard withdraws its rules, and then installs them again; THEN the
    old rule goes, the owner's stay, and a taken ID is reported rather than written twice."""
    old = {
        "ID": "costguard-ttl-0",
        "Status": "Enabled",
        "Filter": {"Prefix": "tmp/"},
        "Expiration": {"Days": 2},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        "NoncurrentVersionExpiration": {"NoncurrentDays": 2},
    }
    archive = {"ID": "costguard-ttl-archive", "Status": "Enabled", "Filter": {"Prefix": "a/"},
               "Expiration": {"Days": 9}}  # fmt: skip
    moving = {
        **old,
        "ID": "costguard-ttl-1",
        "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}],
    }
    withdrawn = merge_lifecycle([old, archive, moving], ())
    assert withdrawn.rules == (archive, moving) and withdrawn.changed
    ours = backstop(SweepConfig(timedelta(hours=48), ("tmp/", "x/")), object_lock=False).rules
    merged = merge_lifecycle([archive, moving], ours)
    assert merged.rules == (archive, moving, ours[0])
    assert merged.drift == ("rule ID costguard-ttl-1 is taken by a rule CostGuard did not write; "
                            "not installed",)  # fmt: skip


def test_installs_no_backstop_where_it_could_reach_the_keep_prefix() -> None:
    whole = backstop(SweepConfig(timedelta(hours=48)), object_lock=False)
    assert whole.rules == () and "keep" in whole.skipped[0]
    assert backstop(SweepConfig(timedelta(hours=1), ("tmp/",)), object_lock=True).rules == ()
    rounded = backstop(SweepConfig(timedelta(hours=49), ("tmp/",)), object_lock=False)
    assert rounded.rules[0]["Expiration"] == {"Days": 4}  # rounded up, never ahead


def test_lists_each_key_once_when_prefixes_overlap() -> None:
    assert normalise_prefixes(["a/b/", "a/", "a/"]) == ("a/",)
    assert normalise_prefixes([]) == ("",)


def test_trips_the_breaker_over_its_share_or_bytes() -> None:
    config = SweepConfig(timedelta(hours=48), breaker_pct=50, breaker_max_bytes=100)
    assert breaker_reason(Tally(5, 10), Tally(10, 20), config) is None
    assert breaker_reason(Tally(6, 10), Tally(10, 20), config) is not None
    assert breaker_reason(Tally(1, 101), Tally(10, 200), config) is not None


def test_confirms_only_with_a_date_on_or_after_the_trip() -> None:
    assert confirms("2026-11-05", SWEEP_DAY, SWEEP_DAY)
    assert not confirms("2026-11-04", SWEEP_DAY, SWEEP_DAY)  # left from an earlier trip
    assert not confirms("2099-01-01", SWEEP_DAY, SWEEP_DAY)  # would confirm trips not yet seen
    assert not confirms("yes", SWEEP_DAY, SWEEP_DAY)
    assert not confirms(None, SWEEP_DAY, SWEEP_DAY)


def test_confirms_one_trip_with_its_stamp_and_never_with_a_spent_value() -> None:
    trip = SWEEP_DAY.replace(hour=4, minute=0, second=12)
    # a trip's stamp confirms that trip (seconds and Z optional), not one a minute later
    assert confirms("2026-11-05T04:00Z", trip, SWEEP_DAY)
    assert confirms(" 2026-11-05T04:00:59", trip, SWEEP_DAY)
    assert not confirms("2026-11-05T04:00Z", trip + timedelta(minutes=1), SWEEP_DAY)
    assert not confirms("2026-11-05T25:00Z", trip, SWEEP_DAY)  # not a time
    # a value that already unlocked a pass confirms nothing more, however it is written
    assert confirmation_key(" 2026-11-05 ") == "2026-11-05"
    assert confirmation_key("2026-11-05T04:00:30") == "2026-11-05T04:00Z"
    assert not confirms("2026-11-05", trip, SWEEP_DAY, used="2026-11-05")
    assert not confirms("2026-11-05T04:00", trip, SWEEP_DAY, used="2026-11-05T04:00Z")
    # but a later value does: tomorrow's date, or this trip's stamp
    assert confirms("2026-11-06", trip, SWEEP_DAY, used="2026-11-05")
    assert confirms("2026-11-05T04:00Z", trip, SWEEP_DAY, used="2026-11-05")


def test_a_trip_stamp_unlocks_a_second_trip_the_same_day() -> None:
    # GIVEN a first trip confirmed by today's date, and a second trip later that day
    s3 = _bucket_with([100] * 10)
    ledger = InMemoryLedger()
    service = SweepService(s3, ledger, ledger, None, SweepSettings("s", Decimal("0.023"), False))
    config = SweepConfig(timedelta(hours=48))
    service.survey(REF, config, SWEEP_DAY, Unlimited())
    assert service.sweep(REF, config, SWEEP_DAY, Unlimited(), {}).phase == "tripped"
    day = {"costguard:confirm-delete": "2026-11-05"}
    service.sweep(REF, config, SWEEP_DAY + timedelta(minutes=5), Unlimited(), day)
    assert len(s3.deleted) == 10
    for i in range(30):
        s3.buckets["b"].objects[f"n{i:03}"] = obj(f"n{i:03}", 10, SWEEP_DAY - timedelta(days=3))
    second = service.sweep(REF, config, SWEEP_DAY + timedelta(hours=1, seconds=7), Unlimited(), day)
    assert second.phase == "tripped" and "2026-11-05T13:00Z" in second.detail
    # WHEN the owner tags the second trip's stamp (as its alert says); THEN it goes on
    stamp = {"costguard:confirm-delete": "2026-11-05T13:00Z"}
    service.sweep(REF, config, SWEEP_DAY + timedelta(hours=2), Unlimited(), stamp)
    assert len(s3.deleted) == 40
    # AND a configuration change does not revive the spent value
    changed = SweepConfig(timedelta(hours=47))
    assert service.load("b", changed)[0]["confirm_used"] == "2026-11-05T13:00Z"


def _bucket_with(ages: list[int]) -> FakeS3:
    s3 = FakeS3()
    b = FakeBucket(tags={"costguard:ttl": "48h"})
    for i, age in enumerate(ages):
        b.objects[f"k{i:03}"] = obj(f"k{i:03}", 10, SWEEP_DAY - timedelta(hours=age))
    b.objects["keep/old"] = obj("keep/old", 10, SWEEP_DAY - timedelta(days=30))
    s3.buckets["b"] = b
    return s3


REF = BucketRef("b", "us-east-1/s3-bucket/b")


def test_stops_a_first_run_over_a_bucket_full_of_old_data_until_confirmed() -> None:
    # GIVEN a bucket whose in-scope objects are all past their time to live
    s3 = _bucket_with([100] * 10)
    ledger = InMemoryLedger()
    service = SweepService(s3, ledger, ledger, None, SweepSettings("s", Decimal("0.023"), False))
    config = SweepConfig(timedelta(hours=48))
    service.survey(REF, config, SWEEP_DAY, Unlimited())
    # WHEN it is swept: THEN the breaker trips and nothing is deleted
    assert service.sweep(REF, config, SWEEP_DAY, Unlimited(), {}).phase == "tripped"
    assert s3.deleted == []
    # and a stale confirmation does nothing, a fresh one lets it go on (never keep/)
    stale = {"costguard:confirm-delete": "2026-11-04"}
    assert service.sweep(REF, config, SWEEP_DAY, Unlimited(), stale).phase == "tripped"
    fresh = {"costguard:confirm-delete": "2026-11-05"}
    service.sweep(REF, config, SWEEP_DAY + timedelta(hours=1), Unlimited(), fresh)
    assert len(s3.deleted) == 10 and "keep/old" in s3.buckets["b"].objects


def test_keeps_an_object_rewritten_after_it_was_listed() -> None:
    s3 = _bucket_with([100, 1])
    ledger = InMemoryLedger()
    service = SweepService(s3, ledger, ledger, None, SweepSettings("s", Decimal("0.023"), False))
    config = SweepConfig(timedelta(hours=48), breaker_pct=100)
    service.survey(REF, config, SWEEP_DAY, Unlimited())
    real_list = s3.list_page

    def list_then_rewrite(bucket: str, prefix: str, after: str):  # type: ignore[no-untyped-def]
        page = real_list(bucket, prefix, after)
        s3.buckets["b"].objects["k000"] = obj("k000", 99, SWEEP_DAY, etag="new")  # rewritten now
        return page

    s3.list_page = list_then_rewrite  # type: ignore[method-assign]
    result = service.sweep(REF, config, SWEEP_DAY, Unlimited(), {})
    assert s3.buckets["b"].objects["k000"].size == 99 and s3.deleted == []
    assert result.errors == {"k000": "PreconditionFailed"}


class _RecordingActuator:
    kind = "s3-bucket"
    opt_in_tags = ("costguard:ttl",)

    def __init__(self) -> None:
        self.tags: dict[str, str] = {"costguard:ttl": "48h"}
        self.applied = 0

    def inspect(self, targets: Sequence[Target]) -> dict[str, Observed]:
        return {t.key: Observed("opted-in", dict(self.tags)) for t in targets}

    def mark(self, target: Target, key: str, value: str) -> None:
        self.tags[key] = value

    def unmark(self, target: Target, key: str) -> None:
        self.tags.pop(key, None)

    def apply(self, decision: Decision) -> str:
        self.applied += 1
        return "swept"


def _decision(now: datetime, standing: str) -> Decision:
    target = Target("us-east-1/s3-bucket/b", "s3-bucket", "us-east-1", "b", "1", "p")
    return Decision(
        Action.DELETE_OBJECTS, target, "old", now, grace=timedelta(hours=1), standing=standing
    )


def test_acts_on_every_run_after_one_standing_warning_and_warns_again_on_a_new_config() -> None:
    # GIVEN a standing decision, warned once
    actuator, ledger = _RecordingActuator(), InMemoryLedger()
    ex = Executor(
        [actuator],
        ledger,
        None,
        ExecutorSettings("s", dry_run=False, opt_in_tags=("costguard:ttl",)),
    )
    assert ex.run([_decision(SWEEP_DAY, "v1")], SWEEP_DAY).outcomes[0].step is Step.WARNED
    # WHEN runs come after the grace period: THEN each acts, one at a time, without re-warning
    steps = [
        ex.run([_decision(SWEEP_DAY + timedelta(hours=h), "v1")], SWEEP_DAY + timedelta(hours=h))
        .outcomes[0]
        .step
        for h in (2, 3, 4)
    ]
    assert steps == [Step.ACTED] * 3 and actuator.applied == 3
    # and a changed configuration is warned about again before any further action
    later = SWEEP_DAY + timedelta(hours=5)
    assert ex.run([_decision(later, "v2")], later).outcomes[0].step is Step.WARNED
    assert actuator.applied == 3


class _StandingActuator(_RecordingActuator):
    """A standing actuator that records each step the executor asks of it, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[str] = []

    def mark(self, target: Target, key: str, value: str) -> None:
        self.steps.append("mark")
        super().mark(target, key, value)

    def unmark(self, target: Target, key: str) -> None:
        self.steps.append("unmark")
        super().unmark(target, key)

    def apply(self, decision: Decision) -> str:
        self.steps.append("apply")
        return super().apply(decision)

    def stand_down(self, target: Target) -> str | None:
        self.steps.append("stand-down")
        return None


def test_a_standing_action_is_stood_down_on_every_path_where_its_decision_does_not_act() -> None:
    # GIVEN a standing actuator, a live and a dry-run executor over one ledger
    actuator, ledger = _StandingActuator(), InMemoryLedger()

    def run(at: datetime, dry_run: bool = False, decision: Decision | None = None) -> list[str]:
        actuator.steps.clear()
        settings = ExecutorSettings("s", dry_run=dry_run, opt_in_tags=("costguard:ttl",))
        Executor([actuator], ledger, None, settings).run([decision or _decision(at, "v1")], at)
        return list(actuator.steps)

    # WHEN it is warned, waits, acts, runs in dry-run, and is exempted; THEN it is stood
    # down on every path but the one that acts, where the actuator's apply keeps it
    assert run(SWEEP_DAY) == ["stand-down", "mark"]  # a new warning: the old machinery first
    assert run(SWEEP_DAY + timedelta(minutes=30)) == ["stand-down"]  # the grace period
    assert run(SWEEP_DAY + timedelta(hours=2)) == ["apply"]  # acting: the actuator keeps it
    assert run(SWEEP_DAY + timedelta(hours=3), dry_run=True) == ["stand-down"]  # would act
    actuator.tags["costguard:exempt"] = "true"
    assert run(SWEEP_DAY + timedelta(hours=4), dry_run=True) == ["stand-down"]  # would withdraw
    assert run(SWEEP_DAY + timedelta(hours=5)) == ["stand-down", "unmark"]  # withdrawn


OURS = ["costguard-ttl-0", "costguard-ttl-1"]


def test_a_stand_down_mid_pass_withdraws_the_rule_until_the_breaker_allows_a_new_pass() -> None:
    # GIVEN a pass under way (stopped for time after its first page), its rule installed
    s3 = _bucket_with([100] * 3 + [1] * 3)
    s3.page_size = 2
    s3.buckets["b"].rules = [dict(OWNER_RULE)]
    ledger = InMemoryLedger()
    service = SweepService(s3, ledger, ledger, None, SweepSettings("s", Decimal("0.023"), False))
    config = SweepConfig(timedelta(hours=48), ("k0", "k1"))
    service.survey(REF, config, SWEEP_DAY, Unlimited())
    service.sweep(REF, config, SWEEP_DAY, Unlimited(), {})
    s3.buckets["b"].objects["k100"] = obj("k100", 10, SWEEP_DAY - timedelta(days=3))
    service.sweep(REF, config, SWEEP_DAY + timedelta(hours=1), Countdown(1), {})
    assert service.load("b", config)[0]["start_after"]  # mid-pass
    assert [r["ID"] for r in s3.buckets["b"].rules] == ["owner-logs", *OURS]
    # WHEN the decision stops acting (the rule goes, the owner's stays)
    assert service.stand_down("b") == "CostGuard's lifecycle rule withdrawn"
    assert s3.buckets["b"].rules == [OWNER_RULE]
    reads = s3.calls["GetBucketLifecycleConfiguration"]
    assert service.stand_down("b") is None  # nothing of CostGuard's left: no call at all
    assert s3.calls["GetBucketLifecycleConfiguration"] == reads
    # THEN the pass under way is abandoned; the next run counts anew, and the rule
    # returns with the pass the breaker allows
    assert service.load("b", config)[0]["phase"] == "ready"
    result = service.sweep(REF, config, SWEEP_DAY + timedelta(hours=2), Unlimited(), {})
    assert result.deleted.objects == 1, result.detail
    assert [r["ID"] for r in s3.buckets["b"].rules] == ["owner-logs", *OURS]
