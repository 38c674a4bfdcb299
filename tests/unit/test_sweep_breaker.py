"""The sweep's circuit breaker decides a whole pass before its first delete.

A pass counts everything in scope (every prefix, every page) at one instant, and only then
deletes, or trips and deletes nothing. Its share is taken of what that same count found in
scope, so the alert's two numbers always come from one listing, and successive passes
cannot empty a bucket behind a bound left over from an earlier, larger count.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.sweep import SweepConfig, Tally
from costguard.domain.tags import Tags
from costguard.services.sweep import BucketRef, SweepService, SweepSettings
from tests.support.fake_s3 import FakeBucket, FakeS3, Unlimited, obj
from tests.support.fakes import RecordingNotifier

T0 = datetime(2026, 11, 5, 1, 0, tzinfo=UTC)
REF = BucketRef("b", "us-east-1/s3-bucket/b", "123456789012", "vision", ("alice@example.com",))
TAGS = {Tags.TTL: "48h"}


def _service(s3: FakeS3, alerts: list[object] | None = None) -> SweepService:
    ledger = InMemoryLedger()
    notifier = RecordingNotifier(alerts) if alerts is not None else None
    return SweepService(s3, ledger, ledger, notifier, SweepSettings("s", Decimal("0.023"), False))


def _bucket(s3: FakeS3, ages: dict[str, float], at: datetime = T0) -> FakeBucket:
    """A bucket of 10-byte objects, each ``ages[key]`` hours old at ``at``."""
    bucket = s3.buckets.setdefault("b", FakeBucket(tags=dict(TAGS)))
    for key, hours in ages.items():
        bucket.objects[key] = obj(key, 10, at - timedelta(hours=hours))
    return bucket


def _counts(text: str) -> tuple[int, int]:
    match = re.search(r"([\d,]+) of ([\d,]+) objects", text)
    assert match is not None, text
    return int(match[1].replace(",", "")), int(match[2].replace(",", ""))


def test_a_pass_over_the_share_deletes_nothing_even_when_its_first_page_is_within_it() -> None:
    """Defect: 2,400 objects, 1,000 of them past their time to live when the bucket was
    warned (42 %). A day later 1,800 are (75 %). The pass judged each page alone against
    half of the day-old survey: it deleted the first page (1,000 objects), then tripped
    with "would delete 1,800 of 2,400" (services/sweep.py _walk, pass_allowance)."""
    s3 = FakeS3(page_size=1000)
    _bucket(s3, {f"k{i:04}": 72 for i in range(1000)})
    _bucket(s3, {f"k{i:04}": 30 for i in range(1000, 1800)})
    _bucket(s3, {f"k{i:04}": 1 for i in range(1800, 2400)})
    alerts: list[object] = []
    service = _service(s3, alerts)
    config = SweepConfig(timedelta(hours=48), keep_prefix="")
    # GIVEN the warning's survey: 1,000 of 2,400 would go, within the breaker's 50 %
    survey = service.survey(REF, config, T0, Unlimited())
    assert survey.would_delete is not None and survey.would_delete.objects == 1000
    # WHEN the first deletion pass comes a day later, when 1,800 are past their TTL
    result = service.sweep(REF, config, T0 + timedelta(hours=25), Unlimited(), TAGS)
    # THEN it trips before its first delete, and says so with one count's numbers
    assert result.phase == "tripped", result.detail
    assert s3.deleted == [] and s3.calls["DeleteObjects"] == 0
    (alert,) = alerts
    assert _counts(alert.summary) == (1800, 2400)  # type: ignore[attr-defined]


def test_a_pass_over_two_prefixes_is_judged_whole_before_deleting_under_the_first() -> None:
    """Defect: with sweepPrefixes a/ and b/, the pass deleted what was due under a/, then
    tripped on b/: each prefix was checked alone as the walk reached it."""
    s3 = FakeS3(page_size=1000)
    _bucket(s3, {"a/old-1": 72, "a/old-2": 72, "a/new-1": 1, "a/new-2": 1})
    _bucket(s3, {f"b/{i}": 30 for i in range(4)})
    service = _service(s3)
    config = SweepConfig(timedelta(hours=48), ("a/", "b/"))
    assert service.survey(REF, config, T0, Unlimited()).would_delete.objects == 2  # type: ignore[union-attr]
    # WHEN the pass comes, b/'s four objects have joined a/'s two: 6 of 8
    result = service.sweep(REF, config, T0 + timedelta(hours=25), Unlimited(), TAGS)
    # THEN nothing is deleted under either prefix
    assert result.phase == "tripped", result.detail
    assert s3.deleted == []


def test_the_trip_alert_never_says_more_would_go_than_is_in_scope() -> None:
    """Defect: an alert read "it would delete 3 of 2 objects in scope": the objects this
    pass would delete were compared with the count of an earlier survey."""
    s3 = FakeS3()
    _bucket(s3, {"x": 30, "y": 1})
    alerts: list[object] = []
    service = _service(s3, alerts)
    config = SweepConfig(timedelta(hours=24), keep_prefix="")
    service.survey(REF, config, T0, Unlimited())  # 1 of 2: within the share
    # AND two objects written just after the survey, all four past 24 h a day later
    _bucket(s3, {"z1": 0, "z2": 0}, at=T0 + timedelta(minutes=10))
    result = service.sweep(REF, config, T0 + timedelta(hours=25), Unlimited(), {Tags.TTL: "24h"})
    assert result.phase == "tripped"
    (alert,) = alerts
    would, in_scope = _counts(alert.summary)  # type: ignore[attr-defined]
    assert (would, in_scope) == (4, 4)
    assert alert.facts["objects"] == "4"  # type: ignore[attr-defined]


def test_successive_passes_never_empty_a_bucket_without_a_trip() -> None:
    """Defect: each pass's share was taken of the previous pass's count: 10 objects, five
    past their TTL at the first pass (5 of 10), the other five at the next (5 of 5, yet
    within half of the previous pass's 10): the bucket was emptied, 10 -> 5 -> 0."""
    s3 = FakeS3()
    _bucket(s3, {f"a{i}": 30 for i in range(5)})
    _bucket(s3, {f"b{i}": 5 for i in range(5)})
    service = _service(s3)
    config = SweepConfig(timedelta(hours=48), keep_prefix="")
    service.survey(REF, config, T0, Unlimited())
    # GIVEN a first pass that deletes half of the bucket (the a-objects, 54 h old)
    first = service.sweep(REF, config, T0 + timedelta(hours=24), Unlimited(), TAGS)
    assert first.deleted.objects == 5, first.detail
    # WHEN the b-objects are past their TTL at the next pass
    second = service.sweep(REF, config, T0 + timedelta(hours=48), Unlimited(), TAGS)
    # THEN that pass would take all that is left: it trips, and the five stay
    assert second.phase == "tripped", second.detail
    assert len(s3.buckets["b"].objects) == 5


def test_a_confirmed_pass_deletes_what_the_trip_counted_and_no_more() -> None:
    # GIVEN a trip over 8 of 10 objects
    s3 = FakeS3()
    _bucket(s3, {f"old-{i}": 72 for i in range(8)})
    _bucket(s3, {"new-1": 1, "new-2": 1})
    service = _service(s3)
    config = SweepConfig(timedelta(hours=48), keep_prefix="")
    service.survey(REF, config, T0, Unlimited())
    trip = service.sweep(REF, config, T0, Unlimited(), TAGS)
    assert trip.phase == "tripped"
    # WHEN the owner confirms two days later, when the two new objects are old too
    later = T0 + timedelta(days=2)
    confirm = {**TAGS, Tags.CONFIRM_DELETE: f"{later:%Y-%m-%d}"}
    service.sweep(REF, config, later, Unlimited(), confirm)
    # THEN the confirmed pass deleted the eight it was confirmed for; the others wait
    assert sorted(k for _, k in s3.deleted) == [f"old-{i}" for i in range(8)]


def test_a_pass_deletes_in_batches_of_a_thousand_with_one_listing_per_page() -> None:
    # GIVEN 2,500 objects, 1,200 of them past their TTL, swept in one run
    s3 = FakeS3(page_size=1000)
    _bucket(s3, {f"k{i:04}": 72 for i in range(1200)})
    _bucket(s3, {f"k{i:04}": 1 for i in range(1200, 2500)})
    service = _service(s3)
    config = SweepConfig(timedelta(hours=48), keep_prefix="")
    service.survey(REF, config, T0, Unlimited())
    s3.calls.clear()
    result = service.sweep(REF, config, T0, Unlimited(), TAGS)
    # THEN every due object went, in two DeleteObjects calls, each page listed once
    assert result.deleted.objects == 1200
    assert s3.calls["DeleteObjects"] == 2 and s3.calls["ListObjectsV2"] == 3


def test_a_trip_whose_rule_cannot_come_off_yet_deletes_nothing_and_retries_and_tells() -> None:
    # GIVEN a bucket swept once (CostGuard's rule on), then half of it due at once
    s3 = FakeS3()
    _bucket(s3, {"tmp/a": 72, "tmp/b": 1, "tmp/c": 1})
    alerts: list[object] = []
    service = _service(s3, alerts)
    config = SweepConfig(timedelta(hours=48), ("tmp/",))
    service.survey(REF, config, T0, Unlimited())
    assert service.sweep(REF, config, T0, Unlimited(), TAGS).deleted.objects == 1
    assert [r["ID"] for r in s3.buckets["b"].rules] == ["costguard-ttl-0"]
    _bucket(s3, {f"tmp/bulk-{i}": 72 for i in range(5)})
    # WHEN the pass trips, and S3 refuses the lifecycle write that run
    real_put = s3.put_lifecycle

    def refused(bucket: str, rules: object) -> None:
        raise RuntimeError("PutBucketLifecycleConfiguration: SlowDown")

    s3.put_lifecycle = refused  # type: ignore[assignment, method-assign]
    later = T0 + timedelta(hours=1)
    with pytest.raises(RuntimeError, match="SlowDown"):  # the run fails, for the retry
        service.sweep(REF, config, later, Unlimited(), TAGS)
    # THEN nothing was deleted; the next run takes the rule off and tells the owner
    assert len(s3.deleted) == 1
    s3.put_lifecycle = real_put  # type: ignore[method-assign]
    result = service.sweep(REF, config, later + timedelta(hours=1), Unlimited(), TAGS)
    assert result.phase == "tripped" and len(s3.deleted) == 1
    assert s3.buckets["b"].rules == []
    (alert,) = alerts
    assert _counts(alert.summary) == (5, 7)  # type: ignore[attr-defined]


def _lifecycle_expiry(s3: FakeS3, at: datetime) -> list[str]:
    """S3's own expiry at ``at`` under CostGuard's rules on bucket ``b``: what it removes."""
    from costguard.domain.sweep import is_ours, lifecycle_expires_at

    bucket = s3.buckets["b"]
    gone: list[str] = []
    for rule in [r for r in bucket.rules if is_ours(r)]:
        prefix, days = rule["Filter"]["Prefix"], rule["Expiration"]["Days"]
        for key, o in list(bucket.objects.items()):
            if key.startswith(prefix) and lifecycle_expires_at(o.last_modified, days) <= at:
                del bucket.objects[key]
                gone.append(key)
    return gone


def test_a_pass_longer_than_the_backstops_margin_never_lets_s3_expire_what_it_did_not_judge() -> (
    None
):
    """Defect: the backstop waits one day beyond the TTL on the promise that "the hourly
    sweep has judged [an object] (and a trip has taken the rule off) at least a day
    earlier". But a pass's cutoff is fixed when it starts, and the rule stays on while a
    pass is under way; a bucket whose pass spans more than a day of runs (a count and its
    deletes resumed run after run) has objects come due after that cutoff, which no
    breaker judges, and S3 expires them at the rule's midnight: here 500 of 702 objects,
    a share that trips the breaker the moment a pass counts it."""
    from tests.support.fake_s3 import Countdown

    # GIVEN a bucket swept once (CostGuard's rule on), listed 10 keys a page
    s3 = FakeS3(page_size=10)
    _bucket(s3, {"tmp/a": 72, "tmp/b": 1, "tmp/c": 1})
    service = _service(s3)
    config = SweepConfig(timedelta(hours=48), ("tmp/",))
    service.survey(REF, config, T0, Unlimited())
    assert service.sweep(REF, config, T0, Unlimited(), TAGS).deleted.objects == 1
    assert [r["ID"] for r in s3.buckets["b"].rules] == ["costguard-ttl-0"]
    # AND 200 new objects, and 500 that come due 7 hours later (S3's rule reaches them at
    # midnight, 47 hours later)
    _bucket(s3, {f"tmp/m{i:03}": 0 for i in range(200)})
    _bucket(s3, {f"tmp/z{i:03}": 41 for i in range(500)})
    # WHEN hourly runs each list one page (a bucket whose pass spans days), and S3
    # applies the lifecycle rules on the bucket as it goes
    expired: list[str] = []
    for hour in range(1, 73):
        at = T0 + timedelta(hours=hour)
        expired += _lifecycle_expiry(s3, at)
        service.sweep(REF, config, at, Countdown(1), TAGS)
    # THEN S3 expired nothing through CostGuard's rule that a breaker had not allowed
    assert expired == []


def test_a_pass_that_stops_between_its_intent_and_its_rule_leaves_stand_downs_looking() -> None:
    """GIVEN a live pass that recorded its intent to write CostGuard's rule, and a
    stand-down that overlapped it before the rule was written; WHEN the pass's write lands
    only after that (and the pass never got to record it: it stopped, or crashed);
    THEN the next stand-down still looks, finds the rule, and takes it off; and until a
    live pass settles the intent, each stand-down looks once more (one read, no write):
    a rule found gone does not prove a late write is not still to come."""
    s3 = FakeS3()
    _bucket(s3, {"tmp/a": 72, "tmp/b": 1, "tmp/c": 1})
    service = _service(s3)
    config = SweepConfig(timedelta(hours=48), ("tmp/",))
    service.survey(REF, config, T0, Unlimited())
    assert service.sweep(REF, config, T0, Unlimited(), TAGS).deleted.objects == 1
    (rule,) = s3.buckets["b"].rules
    state = service._state
    doc, version = state.get_state("s", "s3sweep#b")
    state.put_state("s", "s3sweep#b", {**doc, "backstop_pending": True}, version)
    s3.buckets["b"].rules = []  # the intent is on record; the rule is not written yet
    assert service.stand_down("b") is None  # looked: nothing to withdraw yet
    s3.buckets["b"].rules = [rule]  # the pass's write lands late
    s3.calls.clear()
    assert service.stand_down("b") == "CostGuard's lifecycle rule withdrawn"
    assert s3.buckets["b"].rules == [] and s3.calls["GetBucketLifecycleConfiguration"] == 1
    s3.calls.clear()
    assert service.stand_down("b") is None
    assert dict(s3.calls) == {"GetBucketLifecycleConfiguration": 1}


def test_a_run_that_fails_between_a_pages_batches_leaves_what_it_deleted_to_be_counted() -> None:
    """Defect: within a page, a pass's deletes were on record only once the whole page
    was, so a run that failed at a page's second DeleteObjects lost the first batch's
    bytes; and a failed run counts nothing. GIVEN a pass whose count spanned two runs (its
    deletes list the pages again) and a page of two batches (1 KB keys); WHEN the second
    DeleteObjects fails, and the next run finishes the pass; THEN the runs that return
    count the 200 objects deleted, each once."""
    from tests.support.fake_s3 import Countdown

    s3 = FakeS3(page_size=300)
    _bucket(s3, {f"old-{i:04}-" + "k" * 1000: 72 for i in range(200)})
    _bucket(s3, {f"young-{i:04}": 1 for i in range(210)})
    service = _service(s3)
    config = SweepConfig(timedelta(hours=48), keep_prefix="")
    service.survey(REF, config, T0, Unlimited())
    first = service.sweep(REF, config, T0, Countdown(1), TAGS)  # the count's first page
    assert first.phase == "count" and first.saved.objects == 0
    real_delete, calls = s3.delete, []

    def throttled(bucket: str, objects: object) -> object:
        calls.append(bucket)
        if len(calls) == 2:
            raise RuntimeError("DeleteObjects: SlowDown")
        return real_delete(bucket, objects)  # type: ignore[arg-type]

    s3.delete = throttled  # type: ignore[assignment, method-assign]
    with pytest.raises(RuntimeError, match="SlowDown"):
        service.sweep(REF, config, T0 + timedelta(hours=1), Unlimited(), TAGS)
    s3.delete = real_delete  # type: ignore[method-assign]
    gone_in_failed_run = len(s3.deleted)
    assert 0 < gone_in_failed_run < 200
    last = service.sweep(REF, config, T0 + timedelta(hours=2), Unlimited(), TAGS)
    assert len(s3.deleted) == 200, last.detail
    assert last.deleted.objects == 200 - gone_in_failed_run
    assert last.saved == Tally(200, 200 * 10)
    assert "deleted by an earlier run that failed" in last.detail
    again = service.sweep(REF, config, T0 + timedelta(hours=3), Unlimited(), TAGS)
    assert again.saved == Tally()


def test_the_trip_alert_says_each_count_once() -> None:
    """Defect: the demo's alert read "...: it would delete 5 of 5 objects in scope, more
    than 50 %. It would delete 5 of 5 objects in scope (5,120 bytes, about $0.00 a month)".

    GIVEN a bucket whose every object is past its time to live, WHEN the pass trips, THEN
    the alert gives the count once, and still its bytes and what they cost a month."""
    s3 = FakeS3()
    _bucket(s3, {"a": 72, "b": 72, "c": 72})
    alerts: list[object] = []
    service = _service(s3, alerts)
    config = SweepConfig(timedelta(hours=48), keep_prefix="")
    service.survey(REF, config, T0, Unlimited())
    result = service.sweep(REF, config, T0 + timedelta(hours=25), Unlimited(), TAGS)
    assert result.phase == "tripped", result.detail
    alert = alerts[-1]
    summary: str = alert.summary  # type: ignore[attr-defined]
    assert summary.count("3 of 3 objects in scope") == 1, summary
    assert "30 bytes" in summary and "a month" in summary
