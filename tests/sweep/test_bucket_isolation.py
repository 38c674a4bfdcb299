"""Hostile tests of the stale-object policy: one bad bucket must not stop the others."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.decisions import Action
from costguard.domain.tags import Tags
from costguard.services.stale_objects import StaleObjectsPolicy, SweepOptions, TimeLeftHolder
from costguard.services.sweep import SweepService, SweepSettings
from tests.support.clock import MIDDAY
from tests.support.fake_s3 import FakeBucket, FakeS3, obj


def test_a_bucket_that_cannot_be_listed_does_not_stop_the_other_buckets() -> None:
    """Defect: adapters/s3.py StaleObjectsPolicy.decide surveys every costguard:ttl bucket
    in one loop with no containment. One bucket whose ListObjectsV2 fails (a bucket
    policy denying CostGuard, a throttled or misbehaving bucket) raises out of decide(),
    so handlers/act.py never reaches the executor: no other bucket is warned, swept or
    withdrawn in that run, nor in any later run while that bucket keeps failing. The rule
    is "a failure on one resource doesn't stop the rest" (the EBS guard turns a failed
    read into a finding; this one does not)."""
    s3 = FakeS3()
    for name in ("a-denied", "b-scratch"):
        bucket = FakeBucket(tags={Tags.TTL: "48h", Tags.PROJECT: "vision"})
        bucket.objects["tmp/old"] = obj("tmp/old", 10, MIDDAY - timedelta(days=5))
        bucket.objects["tmp/new"] = obj("tmp/new", 10, MIDDAY - timedelta(hours=1))
        bucket.objects["tmp/new2"] = obj("tmp/new2", 10, MIDDAY - timedelta(hours=1))
        s3.buckets[name] = bucket
    s3.fail_on.add("a-denied")  # every call on it fails, like an AccessDenied
    ledger = InMemoryLedger()
    time_left = TimeLeftHolder()
    sweeps = SweepService(s3, ledger, ledger, None, SweepSettings("s", Decimal("0.023"), False))
    policy = StaleObjectsPolicy(
        store=s3,  # type: ignore[arg-type]
        sweeps=sweeps,
        state=ledger,
        findings=ledger,
        scope="s",
        account="123456789012",
        regions=("us-east-1",),
        options=SweepOptions(),
        time_left=time_left,
        usd_per_gb_month=lambda region: Decimal("0.023"),
        list_buckets=lambda: [("a-denied", "us-east-1"), ("b-scratch", "us-east-1")],
    )
    # WHEN the policy judges the account's buckets
    try:
        decisions = policy.decide(MIDDAY)
    except Exception as exc:  # the defect: the whole pass is lost
        raise AssertionError(f"one bucket's failure stopped every bucket: {exc!r}") from exc
    # THEN the healthy bucket is still judged (and the failing one left alone)
    by_bucket = {d.target.id: d for d in decisions}
    assert by_bucket["b-scratch"].action is Action.DELETE_OBJECTS
    assert by_bucket.get("a-denied") is None or not by_bucket["a-denied"].acts
