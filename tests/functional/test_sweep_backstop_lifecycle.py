"""CostGuard's lifecycle backstop on moto: it goes with the warning, and only it goes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.names import Env, Tags

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
OWNER_RULE = {
    "ID": "owner-logs",
    "Status": "Enabled",
    "Filter": {"Prefix": "logs/"},
    "Expiration": {"Days": 30},
}


def _tag(s3: Any, tags: dict[str, str]) -> None:
    s3.put_bucket_tagging(
        Bucket="scratch", Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]}
    )


def _run(aws: Any, at: datetime, monkeypatch: pytest.MonkeyPatch, dry_run: bool = False) -> Any:
    from costguard.handlers import events
    from costguard.handlers.act import process
    from costguard.settings import Settings

    monkeypatch.setattr(events, "CLOCK", lambda: at)
    settings = Settings.from_env(
        {
            Env.REGIONS: "us-east-1",
            Env.TABLE_NAME: "ledger",
            Env.SCOPE: "123456789012",
            Env.DRY_RUN: "true" if dry_run else "false",
            Env.S3_SWEEP_PREFIXES: "tmp/",
        }
    )
    return process({"time": at.isoformat(), "guard": "stale-objects"}, settings, aws)


def _rules(s3: Any) -> list[dict[str, Any]]:
    try:
        return list(s3.get_bucket_lifecycle_configuration(Bucket="scratch")["Rules"])
    except s3.exceptions.ClientError:
        return []


@pytest.fixture
def swept(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A bucket with an owner's lifecycle rule, warned and swept once: CostGuard's is on."""
    from costguard_demo.run import create_ledger_table
    from costguard_demo.server import backdate_object

    create_ledger_table(aws, "ledger", "us-east-1")
    s3 = aws.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="scratch")
    _tag(s3, {Tags.TTL: "48h", Tags.PROJECT: "vision"})
    s3.put_bucket_lifecycle_configuration(
        Bucket="scratch", LifecycleConfiguration={"Rules": [OWNER_RULE]}
    )
    for i, age in enumerate((72, 2, 2, 2)):
        s3.put_object(Bucket="scratch", Key=f"tmp/{i}", Body=b"x")
        backdate_object("scratch", f"tmp/{i}", NOW - timedelta(hours=age))
    assert _run(aws, NOW, monkeypatch).outcomes[0].step.value == "warned"
    assert _run(aws, NOW + timedelta(hours=25), monkeypatch).outcomes[0].step.value == "acted"
    assert [r["ID"] for r in _rules(s3)] == ["owner-logs", "costguard-ttl-0"]
    return s3


def test_removes_only_costguards_rule_when_the_bucket_is_exempted(
    aws: Any, swept: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # WHEN the owner exempts the bucket
    _tag(swept, {Tags.TTL: "48h", Tags.PROJECT: "vision", Tags.EXEMPT: "true"})
    assert _run(aws, NOW + timedelta(hours=26), monkeypatch).outcomes[0].step.value == "cleared"
    # THEN CostGuard's rule is gone and the owner's is kept as it was
    assert _rules(swept) == [OWNER_RULE]


def test_removes_the_old_rule_when_the_ttl_is_raised_and_installs_the_new_one_after_warning(
    aws: Any, swept: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # WHEN the owner raises the time to live: a new warning, and the old rule goes
    _tag(swept, {Tags.TTL: "30d", Tags.PROJECT: "vision"})
    assert _run(aws, NOW + timedelta(hours=26), monkeypatch).outcomes[0].step.value == "warned"
    assert _rules(swept) == [OWNER_RULE]
    # THEN the first deletion pass after the new grace period installs the new rule
    later = NOW + timedelta(hours=26 + 25)
    assert _run(aws, later, monkeypatch).outcomes[0].step.value in {"acted", "skipped"}
    owner, ours = _rules(swept)
    assert owner == OWNER_RULE
    assert ours["ID"] == "costguard-ttl-0" and ours["Expiration"] == {"Days": 30}


def test_dry_run_leaves_the_lifecycle_alone_when_the_bucket_is_exempted(
    aws: Any, swept: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the deployment switched to dry-run; WHEN the bucket is exempted
    _tag(swept, {Tags.TTL: "48h", Tags.PROJECT: "vision", Tags.EXEMPT: "true"})
    report = _run(aws, NOW + timedelta(hours=26), monkeypatch, dry_run=True)
    assert report.outcomes[0].step.value == "cleared"
    # THEN it reports the withdrawal but writes no lifecycle configuration
    assert [r["ID"] for r in _rules(swept)] == ["owner-logs", "costguard-ttl-0"]
