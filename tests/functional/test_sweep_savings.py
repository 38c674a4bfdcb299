"""What the sweep saved, as every reader sees it: what each pass deleted, counted once.

The stale-objects guard runs through the act handler on moto, hourly, for three passes
after its warning; the bytes each pass deletes are known. The dashboard's log lines, the
handler's summary, the audit trail (``costguard actions``) and the scan report's savings
must all add up to what was deleted, priced once.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.names import Env, Figures, Tags

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
MIB = 1024**2
#: us-east-1 S3 Standard, $/GB-month, as the shipped catalog prices it.
RATE = Decimal("0.023")


def _put(s3: Any, key: str, size: int, age: timedelta) -> None:
    from costguard_demo.server import backdate_object

    s3.put_object(Bucket="scratch", Key=key, Body=b"x" * size)
    backdate_object("scratch", key, NOW - age)


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """The act handler's structured log (the dashboard's source), into a buffer."""
    from aws_lambda_powertools import Logger

    from costguard.handlers import act

    buffer = io.StringIO()
    monkeypatch.setattr(act, "logger", Logger(service="savings-under-test", stream=buffer))
    return buffer


def _run(aws: Any, at: datetime, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from costguard.handlers import events
    from costguard.handlers.act import process, summary
    from costguard.settings import Settings

    monkeypatch.setattr(events, "CLOCK", lambda: at)
    settings = Settings.from_env(
        {
            Env.REGIONS: "us-east-1",
            Env.TABLE_NAME: "ledger",
            Env.SCOPE: "123456789012",
            Env.DRY_RUN: "false",
        }
    )
    return summary(process({"time": at.isoformat(), "guard": "stale-objects"}, settings, aws))


def _usd_per_month(size: int) -> float:
    return float(Decimal(size) / Decimal(1024**3) * RATE)


def test_each_byte_the_sweep_deletes_is_saved_once_whoever_adds_it_up(
    aws: Any, monkeypatch: pytest.MonkeyPatch, log: io.StringIO
) -> None:
    """Defect: every hourly pass that deleted anything logged "acted" with the whole
    saving of the survey taken at warning time (the decision's usd_per_hour_saved), and
    the dashboard sums those lines: 20 MB deleted showed as 5.5 times that after 11 hours.
    The audit trail repeated it on every pass and again on every batch record."""
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    s3 = aws.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="scratch")
    s3.put_bucket_tagging(
        Bucket="scratch",
        Tagging={
            "TagSet": [{"Key": Tags.TTL, "Value": "48h"}, {"Key": Tags.PROJECT, "Value": "vision"}]
        },
    )
    # GIVEN 3 MiB past the TTL when warned, 2 MiB more an hour after the first pass, and
    # ten young objects kept
    hour = timedelta(hours=1)
    for i in range(3):
        _put(s3, f"first-{i}", MIB, timedelta(hours=50))
    for i in range(2):
        _put(s3, f"second-{i}", MIB, timedelta(hours=23, minutes=30))
    for i in range(10):
        _put(s3, f"young-{i}", MIB, timedelta(hours=1))
    assert _run(aws, NOW, monkeypatch)["counts"] == {"warned": 1}
    # WHEN three hourly passes run after the grace period
    passes = [_run(aws, NOW + timedelta(hours=24) + n * hour, monkeypatch) for n in range(3)]
    # THEN each pass reports what it deleted: 3 MiB, then 2 MiB, then nothing
    assert [p["counts"] for p in passes] == [{"acted": 1}, {"acted": 1}, {"skipped": 1}]
    saved = [p["usd_per_month_saved"] for p in passes]
    assert saved == pytest.approx([_usd_per_month(3 * MIB), _usd_per_month(2 * MIB), 0])
    total = _usd_per_month(5 * MIB)
    # AND the dashboard's sum of acted log lines is the 5 MiB, once
    lines = [json.loads(line) for line in log.getvalue().splitlines() if line.startswith("{")]
    acted = [
        line[Figures.SAVINGS]
        for line in lines
        if line.get(Figures.EVENT_KEY) == Figures.ACTION_EVENT and line[Figures.OUTCOME] == "acted"
    ]
    assert sum(acted) == pytest.approx(total)
    # AND so is the audit trail's (`costguard actions`): one saving per pass, none per batch
    ledger = DynamoDbLedger(aws.client("dynamodb", region_name="us-east-1"), "ledger")
    trail = ledger.audit_trail("123456789012", "2026-11")
    passes_saved = [float(e.details["usd_per_month_saved"]) for e in trail if e.outcome == "acted"]
    assert sum(passes_saved) == pytest.approx(total)
    batches = [e for e in trail if e.outcome in {"deleting", "deleted"}]
    assert batches and all("usd_per_month_saved" not in e.details for e in batches)
    # AND the scan report's savings for the project count each pass's bytes once
    from costguard.services.scan import ScanService, ScanSettings
    from tests.support.catalog import fixture_catalog
    from tests.support.fakes import StaticInventory, StaticSpotPrices

    report = ScanService(
        [StaticInventory("ec2", {})],
        StaticSpotPrices({}),
        fixture_catalog(),
        ledger,
        ScanSettings(scope="123456789012", regions=("us-east-1",)),
    )
    savings = report._savings("2026-11", NOW + timedelta(days=2))
    assert float(savings["vision"].usd_per_hour * 730) == pytest.approx(total)


def test_a_run_that_fails_after_deleting_still_counts_what_it_deleted(
    aws: Any, monkeypatch: pytest.MonkeyPatch, log: io.StringIO
) -> None:
    """Defect: a pass deletes batch by batch; when a later call of the run fails (here S3
    throttles the second DeleteObjects), the executor records the run as failed, and a
    failed outcome saves nothing. The next run resumes the pass and saves only what it
    deleted itself, so the bytes of the batches before the failure are never counted:
    200 objects deleted, 14 of them saved (services/executor.py _act, adapters/s3.py apply).
    The README: "the runs after one warning add up to what went, each byte once"."""
    from botocore.exceptions import ClientError

    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    s3 = aws.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="scratch")
    s3.put_bucket_tagging(
        Bucket="scratch",
        Tagging={
            "TagSet": [{"Key": Tags.TTL, "Value": "48h"}, {"Key": Tags.PROJECT, "Value": "vision"}]
        },
    )
    # GIVEN 200 objects past their TTL, with 1 KB keys (two DeleteObjects batches by
    # manifest size), and 210 young ones, warned
    size = 10_000
    for i in range(200):
        _put(s3, f"old-{i:04d}-" + "k" * 1000, size, timedelta(hours=30))
    for i in range(210):
        _put(s3, f"young-{i}", size, timedelta(hours=1))
    assert _run(aws, NOW, monkeypatch)["counts"] == {"warned": 1}
    calls: list[str] = []

    def throttle_the_second(**_: Any) -> None:
        calls.append("DeleteObjects")
        if len(calls) == 2:
            raise ClientError(
                {"Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."}},
                "DeleteObjects",
            )

    aws.events.register("before-call.s3.DeleteObjects", throttle_the_second)
    # WHEN the first pass fails at its second batch, and the next run finishes it
    with pytest.raises(Exception, match="SlowDown"):
        _run(aws, NOW + timedelta(hours=25), monkeypatch)
    _run(aws, NOW + timedelta(hours=26), monkeypatch)
    assert s3.list_objects_v2(Bucket="scratch", Prefix="old-")["KeyCount"] == 0
    # THEN the audit trail saves the 200 objects deleted, once
    ledger = DynamoDbLedger(aws.client("dynamodb", region_name="us-east-1"), "ledger")
    trail = ledger.audit_trail("123456789012", "2026-11")
    saved = [float(e.details["usd_per_month_saved"]) for e in trail if e.outcome == "acted"]
    assert sum(saved) == pytest.approx(_usd_per_month(200 * size))
