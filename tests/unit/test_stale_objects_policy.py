"""The stale-object policy on an in-memory S3: one failing bucket is a finding, not a stop."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.decisions import Action
from costguard.domain.findings import FindingCode, Severity
from costguard.domain.tags import Tags
from costguard.services.stale_objects import StaleObjectsPolicy, SweepOptions, TimeLeftHolder
from costguard.services.sweep import SweepService, SweepSettings
from tests.support.clock import MIDDAY
from tests.support.fake_s3 import FakeBucket, FakeS3, obj


def test_reports_a_failing_bucket_as_a_finding_and_judges_the_others() -> None:
    # GIVEN three opted-in buckets, the middle one failing on every call
    s3 = FakeS3()
    names = ("a", "b-denied", "c")
    for name in names:
        bucket = FakeBucket(tags={Tags.TTL: "48h", Tags.PROJECT: "vision"})
        bucket.objects["old"] = obj("old", 10, MIDDAY - timedelta(days=5))
        bucket.objects["new"] = obj("new", 10, MIDDAY)
        bucket.objects["new2"] = obj("new2", 10, MIDDAY)
        s3.buckets[name] = bucket
    s3.fail_on.add("b-denied")
    ledger = InMemoryLedger()
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
        time_left=TimeLeftHolder(),
        usd_per_gb_month=lambda region: Decimal("0.023"),
        list_buckets=lambda: [(n, "us-east-1") for n in names],
    )
    # WHEN the policy judges them
    decisions = policy.decide(MIDDAY)
    # THEN the healthy buckets (before and after it) are judged, the failing one not at all
    assert {d.target.id: d.action for d in decisions} == {
        "a": Action.DELETE_OBJECTS,
        "c": Action.DELETE_OBJECTS,
    }
    # AND the failure is an error finding naming the bucket, kept and exposed to the log
    (finding,) = policy.found
    assert finding.code is FindingCode.SCAN_FAILED and finding.severity is Severity.ERROR
    assert finding.resource == "123456789012/us-east-1/s3-bucket/b-denied"
    assert "failed on b-denied" in finding.message
    assert [f.resource for f in ledger.findings("s", "2026-11-20")] == [finding.resource]
    # AND the reason, which the warning reads before "CostGuard will delete objects in it",
    # names the bucket's TTL. Defect: "1 object (10 bytes) is older than their costguard:ttl".
    reasons = {d.reason for d in decisions}
    assert reasons == {"1 object (10 bytes) is older than the bucket's costguard:ttl"}, reasons
