"""The demo's sweep chapter on moto, through the act handler: warn first, then old objects
go, young and keep/ stay, the untagged bucket is untouched, and the breaker trips."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

pytestmark = pytest.mark.story


def test_the_sweep_chapter_warns_then_deletes_old_keeps_young_and_trips_on_an_all_old_bucket(
    aws: Any,
) -> None:
    from costguard_demo.sweep import run_sweep_chapter

    now = datetime(2026, 11, 20, 12, tzinfo=UTC)
    said: list[str] = []
    actions = run_sweep_chapter(aws, "us-east-1", said.append, now)
    s3 = aws.client("s3", region_name="us-east-1")

    def keys(b: str) -> set[str]:
        return {o["Key"] for o in s3.list_objects_v2(Bucket=b).get("Contents", [])}

    # THEN the owner was warned before anything went
    first = [a for a in actions if a["outcome"] == "warned"]
    assert {a["resource"].rsplit("/", 1)[1] for a in first} == {"demo-scratch", "demo-all-old"}
    # AND after the grace period only the objects past 48 h went; keep/ and young stay
    assert keys("demo-scratch") == {"tmp/young-1", "tmp/young-2", "tmp/young-3", "keep/model.pt"}
    assert keys("demo-untagged") == {"old"}
    # AND the bucket that would be emptied tripped the breaker: nothing deleted
    assert len(keys("demo-all-old")) == 5
    (tripped,) = [
        a for a in actions if a["resource"].endswith("demo-all-old") and a["outcome"] != "warned"
    ]
    assert "breaker tripped" in tripped["detail"]
    # AND a trip is no action and no saving (it was reported as "acted" before)
    assert tripped["outcome"] == "skipped"
    (swept,) = [a for a in actions if a["resource"].endswith("demo-scratch") and a is not first[0]]
    assert swept["outcome"] == "acted"
    assert all(a["dry_run"] is False and a["project"] == "vision-research" for a in actions)
