"""Hostile tests of the stale-object sweep's lifecycle backstop on moto.

The backstop is a lifecycle rule CostGuard merges into a swept bucket: S3 itself then
expires objects, with no executor, no exemption check and no costguard:ttl check. It
must therefore not outlive the owner's consent to be swept.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.names import Env, Tags

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def _put(s3: Any, bucket: str, key: str, age_hours: float) -> None:
    from costguard_demo.server import backdate_object

    s3.put_object(Bucket=bucket, Key=key, Body=b"x" * 100)
    backdate_object(bucket, key, NOW - timedelta(hours=age_hours))


def _tag(s3: Any, bucket: str, tags: dict[str, str]) -> None:
    s3.put_bucket_tagging(
        Bucket=bucket, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]}
    )


@pytest.fixture
def account(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from costguard.handlers import events
    from costguard_demo.plumbing import create_ledger_table

    monkeypatch.setattr(events, "CLOCK", lambda: NOW)
    create_ledger_table(aws, "ledger", "us-east-1")
    s3 = aws.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="scratch")
    _tag(s3, "scratch", {Tags.TTL: "48h", Tags.PROJECT: "vision"})
    for i in range(3):
        _put(s3, "scratch", f"tmp/old-{i}", 72)
    for i in range(8):
        _put(s3, "scratch", f"tmp/new-{i}", 2)
    return aws


def _run(account: Any, at: datetime, monkeypatch: pytest.MonkeyPatch) -> Any:
    from costguard.handlers import events
    from costguard.handlers.act import process
    from costguard.settings import Settings

    monkeypatch.setattr(events, "CLOCK", lambda: at)
    settings = Settings.from_env(
        {
            Env.REGIONS: "us-east-1",
            Env.TABLE_NAME: "ledger",
            Env.SCOPE: "123456789012",
            Env.DRY_RUN: "false",
            Env.S3_SWEEP_PREFIXES: "tmp/",
        }
    )
    return process({"time": at.isoformat(), "guard": "stale-objects"}, settings, account)


def _ours(s3: Any) -> list[dict[str, Any]]:
    try:
        rules = s3.get_bucket_lifecycle_configuration(Bucket="scratch")["Rules"]
    except s3.exceptions.ClientError:
        return []
    return [r for r in rules if str(r.get("ID", "")).startswith("costguard")]


def _swept_once(account: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Warn, wait out the grace period, sweep: the backstop rule is now on the bucket."""
    s3 = account.client("s3", region_name="us-east-1")
    assert [o.step.value for o in _run(account, NOW, monkeypatch).outcomes] == ["warned"]
    acted = _run(account, NOW + timedelta(hours=25), monkeypatch)
    assert acted.outcomes[0].step.value == "acted", acted.outcomes[0].detail
    assert [r["Expiration"] for r in _ours(s3)] == [{"Days": 3}]
    return s3


def test_exempting_a_swept_bucket_removes_costguards_lifecycle_rule(
    account: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: once a bucket was swept, its costguard-ttl-* lifecycle rule stays on it
    after the owner exempts the bucket. The executor withdraws the warning (outcome
    "cleared") but S3 keeps expiring the bucket's objects every day through CostGuard's
    rule: costguard:exempt is not honoured by the backstop (services/executor.py
    _withdraw -> adapters/s3.py S3BucketActuator.unmark only forgets the ledger deadline;
    nothing ever removes the rule written by services/sweep.py _backstop)."""
    # GIVEN a bucket swept once, so CostGuard's backstop rule is on it
    s3 = _swept_once(account, monkeypatch)
    # WHEN its owner exempts it and the guard runs again
    _tag(s3, "scratch", {Tags.TTL: "48h", Tags.PROJECT: "vision", Tags.EXEMPT: "true"})
    report = _run(account, NOW + timedelta(hours=26), monkeypatch)
    assert report.outcomes[0].step.value == "cleared"
    # THEN no CostGuard rule is left to expire its objects behind the exemption
    assert _ours(s3) == []


def test_removing_the_ttl_tag_removes_costguards_lifecycle_rule(
    account: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: a bucket whose costguard:ttl tag is removed ("a bucket without costguard:ttl
    is never touched") keeps CostGuard's lifecycle rule, so S3 goes on deleting its objects
    after 2 days. adapters/s3.py StaleObjectsPolicy.decide emits NONE, the executor
    withdraws the warning, and the backstop rule is never taken off."""
    s3 = _swept_once(account, monkeypatch)
    # WHEN the owner opts out by removing costguard:ttl
    _tag(s3, "scratch", {Tags.PROJECT: "vision"})
    report = _run(account, NOW + timedelta(hours=26), monkeypatch)
    assert report.outcomes[0].step.value == "cleared"
    # THEN CostGuard no longer expires anything in it
    assert _ours(s3) == []


def test_raising_the_ttl_stops_the_old_lifecycle_rule_before_it_deletes(
    account: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: raising costguard:ttl from 48h to 30d (to keep data longer) changes the
    sweep's fingerprint, so the sweep re-surveys and re-warns; but CostGuard's old rule
    (expire after 2 days) stays on the bucket through the new warning's grace period and
    until the next deletion pass, deleting objects aged 2-30 days that the owner has just
    asked to keep. services/sweep.py only rewrites the rule in a deletion pass
    (backstop_due), and a configuration change never touches it."""
    s3 = _swept_once(account, monkeypatch)
    # WHEN the owner raises the time to live
    _tag(s3, "scratch", {Tags.TTL: "30d", Tags.PROJECT: "vision"})
    report = _run(account, NOW + timedelta(hours=26), monkeypatch)
    assert report.outcomes[0].step.value in {"warned", "would-warn", "waiting"}
    # THEN no CostGuard rule expires objects younger than 30 days
    assert all(r["Expiration"]["Days"] >= 30 for r in _ours(s3)), _ours(s3)
