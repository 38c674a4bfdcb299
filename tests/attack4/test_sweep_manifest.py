"""Hostile test of the sweep's audit manifest on moto: odd keys must be audited as deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.names import Env, Tags

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def test_an_object_whose_key_ends_in_a_carriage_return_is_in_the_deleted_manifest(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: DeleteObjects answers each deleted key in XML, where a carriage return in
    a key reads back as a line feed (XML end-of-line normalisation; botocore escapes it in
    the request, nothing unescapes the answer). services/sweep.py _delete matches the
    answer's keys against the batch by exact string, so an object CostGuard really
    deleted ('tmp/old\\r') is missing from the 'deleted' audit manifest and from the
    pass's deleted counts (which also feed the in-pass breaker): "every action is
    audited" fails for it. (S3 asks clients to use EncodingType=url for such keys;
    DeleteObjects has no such option, so the answer must be matched leniently or the
    keys deleted one by one.)"""
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.handlers import events
    from costguard.handlers.act import process
    from costguard.services.sweep import decode_manifest
    from costguard.settings import Settings
    from costguard_demo.plumbing import create_ledger_table
    from costguard_demo.server import backdate_object

    create_ledger_table(aws, "ledger", "us-east-1")
    s3 = aws.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="scratch")
    s3.put_bucket_tagging(
        Bucket="scratch",
        Tagging={
            "TagSet": [{"Key": Tags.TTL, "Value": "48h"}, {"Key": Tags.PROJECT, "Value": "v"}]
        },
    )
    odd = "tmp/old\r"
    for key, age in ((odd, 72), ("tmp/plain", 72), *((f"tmp/new-{i}", 1) for i in range(6))):
        s3.put_object(Bucket="scratch", Key=key, Body=b"x" * 100)
        backdate_object("scratch", key, NOW - timedelta(hours=age))
    settings = Settings.from_env(
        {
            Env.REGIONS: "us-east-1",
            Env.TABLE_NAME: "ledger",
            Env.SCOPE: "123456789012",
            Env.DRY_RUN: "false",
        }
    )

    def run(at: datetime) -> Any:
        monkeypatch.setattr(events, "CLOCK", lambda: at)
        return process({"time": at.isoformat(), "guard": "stale-objects"}, settings, aws)

    # GIVEN a warned bucket; WHEN it is swept after the grace period
    assert run(NOW).outcomes[0].step.value == "warned"
    assert run(NOW + timedelta(hours=25)).outcomes[0].step.value == "acted"
    remaining = {o["Key"] for o in s3.list_objects_v2(Bucket="scratch")["Contents"]}
    assert odd not in remaining and "tmp/plain" not in remaining  # both really deleted
    # THEN the audit trail's 'deleted' manifest names every object that was deleted
    ledger = DynamoDbLedger(aws.client("dynamodb", region_name="us-east-1"), "ledger")
    audited = [
        row[0]
        for e in ledger.audit_trail("123456789012", "2026-11")
        if e.outcome == "deleted"
        for row in decode_manifest(e.details["manifest"])
    ]
    assert sorted(audited) == sorted([odd, "tmp/plain"])
