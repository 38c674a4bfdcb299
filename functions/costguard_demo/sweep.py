"""Demo chapter: the stale-object sweep through the one executor, with simulated time.

Scratch buckets on the embedded AWS: objects of mixed ages, a ``keep/`` object, an
untagged bucket and a bucket of nothing but old checkpoints. The stale-objects guard runs
as its Lambda would (``costguard.handlers.act.process``, the ledger on DynamoDB): the
first run surveys each opted-in bucket and warns its owner; once the grace period has
passed, the sweep deletes what is past its time to live, keeps the rest, and the breaker
stops the bucket that would be emptied.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from costguard.domain.tags import Tags
from costguard.domain.text import duration, labelled
from costguard.env import Env
from costguard_demo.plumbing import create_ledger_table
from costguard_demo.server import DEMO_ACCOUNT, backdate_object

GRACE = timedelta(hours=24)
TABLE = "costguard-demo-sweep"


def _seed(
    s3: Any, bucket: str, tags: dict[str, str], objects: dict[str, int], now: datetime
) -> None:
    s3.create_bucket(Bucket=bucket)
    if tags:
        s3.put_bucket_tagging(
            Bucket=bucket, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]}
        )
    for key, age_hours in objects.items():
        s3.put_object(Bucket=bucket, Key=key, Body=b"x" * 1024)
        backdate_object(bucket, key, now - timedelta(hours=age_hours))


def run_sweep_chapter(
    session: Any,
    region: str,
    say: Callable[[str], None],
    now: datetime,
    *,
    topic_arn: str = "",
) -> list[dict[str, Any]]:
    """Warn, then sweep after the grace period; returns the actions (``actions[]``)."""
    from costguard.handlers.act import actions, process
    from costguard.settings import Settings

    s3 = session.client("s3", region_name=region)
    ttl = {Tags.TTL: "48h", Tags.PROJECT: "vision-research", Tags.OWNER: "alice@example.com"}
    # Ages now; the sweep runs a day later, when 30 h and 50 h are past 48 h, 20 h is not.
    _seed(s3, "demo-scratch", ttl, {
        "tmp/old-1": 50, "tmp/old-2": 30, "tmp/young-1": 20, "tmp/young-2": 10,
        "tmp/young-3": 1, "keep/model.pt": 500,
    }, now)  # fmt: skip
    _seed(s3, "demo-untagged", {Tags.PROJECT: "vision-research"}, {"old": 500}, now)
    _seed(s3, "demo-all-old", ttl, {f"ckpt-{i}": 100 for i in range(5)}, now)
    create_ledger_table(session, TABLE, region)
    settings = Settings.from_env(
        {
            Env.REGIONS: region,
            Env.TABLE_NAME: TABLE,
            Env.SCOPE: DEMO_ACCOUNT,
            Env.DRY_RUN: "false",
            Env.TOPIC_ARN: topic_arn,
            Env.SAGEMAKER_TAGS: "per-resource",
            Env.SAGEMAKER_STUDIO: "false",
        }
    )
    out: list[dict[str, Any]] = []
    later = now + GRACE + timedelta(minutes=1)
    for label, at in (("now", now), (f"{duration(GRACE)} later", later)):
        say(f"Stale objects, {label} ({at:%Y-%m-%d %H:%M} UTC):")
        report = process({"time": at.isoformat(), "guard": "stale-objects"}, settings, session, at)
        for action in actions(report):
            bucket = action["resource"].rsplit("/", 1)[1]
            say(f"  s3://{bucket}: {labelled(action['outcome'], action['detail'])}")
            out.append(action)
    say("  s3://demo-untagged: no costguard:ttl tag, never read beyond its tags")
    return out
