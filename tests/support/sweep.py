"""The stale-object guard on moto, as the tests drive it: a tagged bucket holding objects of
known ages, one run of the shipped act handler at a chosen instant, and the keys its audit
trail says it deleted."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.env import Env

LEDGER = "ledger"
SCOPE = "123456789012"
REGION = "us-east-1"


def sweep_settings(
    *, dry_run: bool = False, prefixes: str | None = "tmp/", regions: str = REGION
) -> Any:
    """The act Lambda's settings for the sweep; ``prefixes=None`` leaves the sweep's
    prefixes unset (the whole bucket)."""
    from costguard.settings import Settings

    env = {
        Env.REGIONS: regions,
        Env.TABLE_NAME: LEDGER,
        Env.SCOPE: SCOPE,
        Env.DRY_RUN: "true" if dry_run else "false",
    }
    if prefixes is not None:
        env[Env.S3_SWEEP_PREFIXES] = prefixes
    return Settings.from_env(env)


def run_sweep(
    session: Any,
    at: datetime,
    monkeypatch: pytest.MonkeyPatch,
    *,
    dry_run: bool = False,
    prefixes: str | None = "tmp/",
    regions: str = REGION,
) -> Any:
    """One scheduled run of the stale-objects guard through the act handler, at ``at``."""
    from costguard import events
    from costguard.handlers.act import process

    monkeypatch.setattr(events, "CLOCK", lambda: at)
    settings = sweep_settings(dry_run=dry_run, prefixes=prefixes, regions=regions)
    return process({"time": at.isoformat(), "guard": "stale-objects"}, settings, session)


def tag_bucket(s3: Any, bucket: str, tags: Mapping[str, str]) -> None:
    """Replace the bucket's tags (S3 has no per-key tag call)."""
    s3.put_bucket_tagging(
        Bucket=bucket, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]}
    )


def tagged_bucket(session: Any, bucket: str, tags: Mapping[str, str]) -> Any:
    """The ledger table and one bucket with these tags; returns the S3 client."""
    from costguard_demo.run import create_ledger_table

    create_ledger_table(session, LEDGER, REGION)
    s3 = session.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=bucket)
    tag_bucket(s3, bucket, tags)
    return s3


def put_aged(s3: Any, bucket: str, key: str, age: timedelta, at: datetime, size: int = 100) -> None:
    """An object of ``size`` bytes last modified ``age`` before ``at``."""
    from costguard_demo.server import backdate_object

    s3.put_object(Bucket=bucket, Key=key, Body=b"x" * size)
    backdate_object(bucket, key, at - age)


def deleted_keys(session: Any, month: str) -> list[str]:
    """Every key the audit trail's 'deleted' manifests name for ``month`` ("2026-11")."""
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.services.sweep import decode_manifest

    ledger = DynamoDbLedger(session.client("dynamodb", region_name=REGION), LEDGER)
    return [
        row[0]
        for e in ledger.audit_trail(SCOPE, month)
        if e.outcome == "deleted"
        for row in decode_manifest(e.details["manifest"])
    ]
