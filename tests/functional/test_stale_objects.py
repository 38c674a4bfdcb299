"""The stale-objects guard on moto: the handler, the executor, S3, the ledger, back-dated."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.domain.tags import Tags
from tests.support.clock import MIDDAY
from tests.support.sweep import deleted_keys, sweep_settings

OWNER_RULE = {
    "ID": "owner-logs",
    "Status": "Enabled",
    "Filter": {"Prefix": "logs/"},
    "Expiration": {"Days": 30},
}


def _put(s3: Any, bucket: str, key: str, age_hours: float) -> None:
    from costguard_demo.server import backdate_object

    s3.put_object(Bucket=bucket, Key=key, Body=b"x" * 100)
    backdate_object(bucket, key, MIDDAY - timedelta(hours=age_hours))


@pytest.fixture
def account(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from costguard import events
    from costguard_demo.plumbing import create_ledger_table

    monkeypatch.setattr(events, "CLOCK", lambda: MIDDAY)
    create_ledger_table(aws, "ledger", "us-east-1")
    s3 = aws.client("s3", region_name="us-east-1")
    for bucket, tags in (
        ("scratch", {Tags.TTL: "48h", Tags.PROJECT: "vision"}),
        ("untagged", {Tags.PROJECT: "vision"}),
        ("typo", {Tags.TTL: "48 hours"}),
    ):
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_tagging(
            Bucket=bucket, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]}
        )
    s3.put_bucket_lifecycle_configuration(
        Bucket="scratch", LifecycleConfiguration={"Rules": [OWNER_RULE]}
    )
    for i in range(3):
        _put(s3, "scratch", f"tmp/old-{i}", 72)
    for key, age in (("tmp/young", 47), ("keep/model.pt", 500), ("tmp/mid", 49), ("a", 1)):
        _put(s3, "scratch", key, age)
    for i in range(8):
        _put(s3, "scratch", f"tmp/new-{i}", 2)
    _put(s3, "untagged", "old", 500)
    _put(s3, "typo", "old", 500)
    return aws


def _run(account: Any, at: datetime, dry_run: bool = False) -> Any:
    from costguard import events
    from costguard.handlers.act import process

    events.CLOCK = lambda: at
    return process(
        {"time": at.isoformat(), "guard": "stale-objects"}, sweep_settings(dry_run=dry_run), account
    )


def _keys(s3: Any, bucket: str) -> set[str]:
    return {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}


def test_deletes_only_objects_past_their_ttl_after_warning_and_keeps_the_rest(account: Any) -> None:
    s3 = account.client("s3", region_name="us-east-1")
    before = {b: _keys(s3, b) for b in ("scratch", "untagged", "typo")}
    # GIVEN a dry run first: it reports exactly what would go, and deletes nothing
    report = _run(account, MIDDAY, dry_run=True)
    (outcome,) = [o for o in report.outcomes if o.decision.target.id == "scratch"]
    assert outcome.step.value == "would-warn"
    assert outcome.decision.evidence["objects_to_delete"] == "4"
    assert outcome.decision.evidence["bytes_to_delete"] == "400"
    assert {b: _keys(s3, b) for b in before} == before
    # WHEN live: the first run warns, and nothing is deleted during the grace period
    first = _run(account, MIDDAY + timedelta(hours=1))
    assert [o.step.value for o in first.outcomes] == ["warned"]
    assert _run(account, MIDDAY + timedelta(hours=2)).outcomes[0].step.value == "waiting"
    assert {b: _keys(s3, b) for b in before} == before
    # THEN after it, the sweep deletes exactly what is past 48 h under tmp/
    after = MIDDAY + timedelta(hours=26)
    acted = _run(account, after)
    assert acted.outcomes[0].step.value == "acted", acted.outcomes[0].detail
    assert _keys(s3, "scratch") == {"a", "keep/model.pt", *(f"tmp/new-{i}" for i in range(8))}
    assert _keys(s3, "untagged") == before["untagged"]
    assert _keys(s3, "typo") == before["typo"]
    # the owner's lifecycle rule survived next to CostGuard's backstop
    rules = s3.get_bucket_lifecycle_configuration(Bucket="scratch")["Rules"]
    assert OWNER_RULE in rules
    assert [r["ID"] for r in rules if r["ID"].startswith("costguard")] == ["costguard-ttl-0"]
    # the manifest names every deleted key
    from costguard.adapters.dynamodb import DynamoDbLedger

    deleted = deleted_keys(account, "2026-11")
    ledger = DynamoDbLedger(account.client("dynamodb", region_name="us-east-1"), "ledger")
    assert sorted(deleted) == ["tmp/mid", "tmp/old-0", "tmp/old-1", "tmp/old-2", "tmp/young"]
    # and the malformed ttl is a finding, the bucket left alone
    findings = ledger.findings("123456789012", "2026-11-20")
    assert [f.code.value for f in findings] == ["malformed-ttl"]


def test_an_exempt_bucket_is_never_swept(account: Any) -> None:
    s3 = account.client("s3", region_name="us-east-1")
    _run(account, MIDDAY)  # survey, warn
    tags = {Tags.TTL: "48h", Tags.PROJECT: "vision", Tags.EXEMPT: "true"}
    s3.put_bucket_tagging(
        Bucket="scratch", Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]}
    )
    before = _keys(s3, "scratch")
    report = _run(account, MIDDAY + timedelta(hours=30))
    assert report.outcomes[0].step.value == "cleared"
    assert _keys(s3, "scratch") == before
