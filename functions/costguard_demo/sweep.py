"""The stale-object chapter of `costguard demo`: scratch buckets of mixed ages, swept.

Seeds (against the demo's embedded S3) a bucket with objects past and within 48 h and a
``keep/`` object; an untagged bucket; and a bucket whose every object is old, which
trips the breaker. Runs the sweep service directly (the executor's warning and grace
are shown by the idle chapter): survey, then sweep, and returns ``actions[]`` entries.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.s3 import S3ObjectStore
from costguard.domain.sweep import SweepConfig, usd_per_hour
from costguard.names import Tags
from costguard.services.sweep import BucketRef, SweepService, SweepSettings

RATE = Decimal("0.023")


class _Unlimited:
    def seconds_left(self) -> float:
        return 1e9


def _seed(
    s3: Any, bucket: str, tags: dict[str, str], objects: dict[str, int], now: datetime
) -> None:
    s3.create_bucket(Bucket=bucket)
    if tags:
        s3.put_bucket_tagging(
            Bucket=bucket, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]}
        )
    from costguard_demo.server import backdate_object

    for key, age_hours in objects.items():
        s3.put_object(Bucket=bucket, Key=key, Body=b"x" * 1024)
        backdate_object(bucket, key, now - timedelta(hours=age_hours))


def run_sweep_chapter(
    session: Any, region: str, say: Callable[[str], None], now: datetime
) -> list[dict[str, Any]]:
    s3 = session.client("s3", region_name=region)
    ttl = {Tags.TTL: "48h", Tags.PROJECT: "vision"}
    _seed(s3, "demo-scratch", ttl, {
        "tmp/old-1": 72, "tmp/old-2": 50, "tmp/young-1": 10, "tmp/young-2": 47,
        "tmp/young-3": 1, "keep/model.pt": 500,
    }, now)  # fmt: skip
    _seed(s3, "demo-untagged", {Tags.PROJECT: "vision"}, {"old": 500}, now)
    _seed(s3, "demo-all-old", ttl, {f"ckpt-{i}": 100 for i in range(5)}, now)
    ledger = InMemoryLedger()
    store = S3ObjectStore(lambda _r: s3, lambda _b: region)
    service = SweepService(store, ledger, ledger, None, SweepSettings("demo", RATE, dry_run=False))
    config = SweepConfig(timedelta(hours=48))
    actions: list[dict[str, Any]] = []
    for bucket in ("demo-scratch", "demo-all-old"):
        ref = BucketRef(bucket, f"{region}/s3-bucket/{bucket}", project="vision")
        service.survey(ref, config, now, _Unlimited())
        result = service.sweep(ref, config, now, _Unlimited(), ttl)
        say(f"s3://{bucket}: {result.detail}")
        actions.append(
            {
                "kind": "delete-objects" if result.phase != "tripped" else "breaker-tripped",
                "resource": ref.resource,
                "project": "vision",
                "reason": result.detail,
                "usd_per_hour_saved": float(usd_per_hour(result.deleted.bytes, RATE)),
                "dry_run": False,
            }
        )
    say("s3://demo-untagged: no costguard:ttl tag, untouched")
    return actions
