"""The stale-object sweep against moto: listing and deleting throughput, API calls per 1,000.

    PYTHONPATH=functions python benchmarks/sweep.py [objects]   (default 100,000)

Objects are written straight into moto's backend (back-dated), then the sweep lists and
deletes them in one pass. Target: <= 2 S3 calls per 1,000 objects (a list page and a
delete batch).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import boto3
from moto import mock_aws

from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.s3 import S3ObjectStore
from costguard.domain.sweep import SweepConfig
from costguard.services.sweep import BucketRef, SweepService, SweepSettings


class _Unlimited:
    def seconds_left(self) -> float:
        return 1e9


def main(n: int) -> dict[str, Any]:
    now = datetime.now(UTC)
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        calls: Counter[str] = Counter()
        session.events.register("before-call", lambda model, **_: calls.update([model.name]))
        s3 = session.client("s3")
        s3.create_bucket(Bucket="bench")
        s3.put_bucket_tagging(
            Bucket="bench", Tagging={"TagSet": [{"Key": "costguard:ttl", "Value": "48h"}]}
        )
        from moto.s3.models import s3_backends

        backend = s3_backends["123456789012"]["global"]
        for i in range(n):
            backend.put_object("bench", f"tmp/{i:08d}", b"x")
        old = now - timedelta(days=3)
        for key in backend.get_bucket("bench").keys.values():
            key.last_modified = old
        store = S3ObjectStore(lambda _r: s3, lambda _b: "us-east-1")
        ledger = InMemoryLedger()
        service = SweepService(
            store, ledger, ledger, None, SweepSettings("b", Decimal("0.023"), False)
        )
        config = SweepConfig(timedelta(hours=48), keep_prefix="", breaker_pct=100, backstop=False)
        ref = BucketRef("bench", "us-east-1/s3-bucket/bench")
        calls.clear()
        t0 = time.perf_counter()
        service.survey(ref, config, now, _Unlimited())
        t1 = time.perf_counter()
        survey_calls = sum(calls.values())
        calls.clear()
        result = service.sweep(ref, config, now, _Unlimited(), {"costguard:ttl": "48h"})
        t2 = time.perf_counter()
        sweep_calls = dict(calls)
    return {
        "objects": n,
        "deleted": result.deleted.objects,
        "survey_objects_per_s": round(n / (t1 - t0)),
        "sweep_objects_per_s": round(n / (t2 - t1)),
        "survey_calls_per_1000": round(survey_calls * 1000 / n, 3),
        "sweep_calls_per_1000": round(sum(sweep_calls.values()) * 1000 / n, 3),
        "sweep_calls": sweep_calls,
    }


if __name__ == "__main__":
    print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000))
