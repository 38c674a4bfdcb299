"""Hostile tests of the stale-object sweep's lifecycle backstop on moto.

The backstop is a lifecycle rule CostGuard merges into a swept bucket: S3 itself then
expires objects, with no executor, no exemption check and no costguard:ttl check. It
must therefore not outlive the owner's consent to be swept.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.domain.tags import Tags
from tests.support.clock import MIDDAY
from tests.support.sweep import put_aged, run_sweep, tag_bucket, tagged_bucket


def _put(s3: Any, bucket: str, key: str, age_hours: float) -> None:
    put_aged(s3, bucket, key, timedelta(hours=age_hours), MIDDAY)


@pytest.fixture
def account(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from costguard import events

    monkeypatch.setattr(events, "CLOCK", lambda: MIDDAY)
    s3 = tagged_bucket(aws, "scratch", {Tags.TTL: "48h", Tags.PROJECT: "vision"})
    for i in range(3):
        _put(s3, "scratch", f"tmp/old-{i}", 72)
    for i in range(8):
        _put(s3, "scratch", f"tmp/new-{i}", 2)
    return aws


def _run(account: Any, at: datetime, monkeypatch: pytest.MonkeyPatch) -> Any:
    return run_sweep(account, at, monkeypatch)


def _ours(s3: Any) -> list[dict[str, Any]]:
    try:
        rules = s3.get_bucket_lifecycle_configuration(Bucket="scratch")["Rules"]
    except s3.exceptions.ClientError:
        return []
    return [r for r in rules if str(r.get("ID", "")).startswith("costguard")]


def _swept_once(account: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Warn, wait out the grace period, sweep: the backstop rule is now on the bucket."""
    s3 = account.client("s3", region_name="us-east-1")
    assert [o.step.value for o in _run(account, MIDDAY, monkeypatch).outcomes] == ["warned"]
    acted = _run(account, MIDDAY + timedelta(hours=25), monkeypatch)
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
    _withdraw -> services/stale_objects.py S3BucketActuator.unmark only forgets the ledger deadline;
    nothing ever removes the rule written by services/sweep.py _backstop)."""
    # GIVEN a bucket swept once, so CostGuard's backstop rule is on it
    s3 = _swept_once(account, monkeypatch)
    # WHEN its owner exempts it and the guard runs again
    tag_bucket(s3, "scratch", {Tags.TTL: "48h", Tags.PROJECT: "vision", Tags.EXEMPT: "true"})
    report = _run(account, MIDDAY + timedelta(hours=26), monkeypatch)
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
    tag_bucket(s3, "scratch", {Tags.PROJECT: "vision"})
    report = _run(account, MIDDAY + timedelta(hours=26), monkeypatch)
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
    tag_bucket(s3, "scratch", {Tags.TTL: "30d", Tags.PROJECT: "vision"})
    report = _run(account, MIDDAY + timedelta(hours=26), monkeypatch)
    assert report.outcomes[0].step.value in {"warned", "would-warn", "waiting"}
    # THEN no CostGuard rule expires objects younger than 30 days
    assert all(r["Expiration"]["Days"] >= 30 for r in _ours(s3)), _ours(s3)
