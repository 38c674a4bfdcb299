"""Hostile tests of the sweep's circuit breaker (SweepService on an in-memory S3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.sweep import SweepConfig
from costguard.domain.tags import Tags
from costguard.services.sweep import BucketRef, SweepService, SweepSettings
from tests.support.fake_s3 import FakeBucket, FakeS3, Unlimited, obj

#: Early in a UTC day, so that both trips below fall on the same date.
T0 = datetime(2026, 11, 5, 1, 0, tzinfo=UTC)
REF = BucketRef("b", "us-east-1/s3-bucket/b", "123456789012", "vision", ("alice@example.com",))


def test_a_confirmation_answers_one_trip_not_a_later_trip_the_same_day() -> None:
    """Defect: costguard:confirm-delete=<today> written to let one tripped pass go on
    also confirms every later trip of that UTC day. A second mass deletion (here 100
    objects when the last pass counted 10 in scope, ten times the breaker's 50 %)
    trips the breaker, and the very next run deletes all of it on the stale tag, with no
    new confirmation from the owner. domain/sweep.py confirms() only compares the tag's
    date with the trip's date (tripped_at.date() <= day), never whether the tag was
    written after *this* trip; services/sweep.py sweep() 'tripped' branch relies on it."""
    s3 = FakeS3()
    bucket = FakeBucket(tags={Tags.TTL: "1h"})
    for i in range(10):
        bucket.objects[f"a{i:03}"] = obj(f"a{i:03}", 10, T0 - timedelta(hours=3))
    s3.buckets["b"] = bucket
    ledger = InMemoryLedger()
    service = SweepService(s3, ledger, ledger, None, SweepSettings("s", Decimal("0.023"), False))
    config = SweepConfig(timedelta(hours=1))
    # GIVEN a first trip (every object is old), confirmed by the owner, and the pass done
    service.survey(REF, config, T0, Unlimited())
    assert service.sweep(REF, config, T0, Unlimited(), {}).phase == "tripped"
    confirmed = {Tags.CONFIRM_DELETE: f"{T0:%Y-%m-%d}"}
    service.sweep(REF, config, T0 + timedelta(minutes=30), Unlimited(), confirmed)
    assert len(s3.deleted) == 10
    # AND later that day, ten times as many objects are past their time to live
    for i in range(100):
        bucket.objects[f"b{i:03}"] = obj(f"b{i:03}", 10, T0)
    second_trip = service.sweep(REF, config, T0 + timedelta(hours=3), Unlimited(), confirmed)
    assert second_trip.phase == "tripped", second_trip.detail
    assert len(s3.deleted) == 10
    # WHEN the next run comes, the owner having written nothing new
    service.sweep(REF, config, T0 + timedelta(hours=4), Unlimited(), confirmed)
    # THEN the second mass deletion still waits for a confirmation of its own
    assert len(s3.deleted) == 10, f"{len(s3.deleted) - 10} objects deleted on a stale confirmation"
