"""The demo's sweep chapter on moto: old objects go, young and keep/ stay, breaker trips."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def test_the_sweep_chapter_deletes_old_keeps_young_and_trips_on_an_all_old_bucket(aws: Any) -> None:
    from costguard_demo.sweep import run_sweep_chapter

    now = datetime(2026, 11, 20, 12, tzinfo=UTC)
    said: list[str] = []
    actions = run_sweep_chapter(aws, "us-east-1", said.append, now)
    s3 = aws.client("s3", region_name="us-east-1")

    def keys(b: str) -> set[str]:
        return {o["Key"] for o in s3.list_objects_v2(Bucket=b).get("Contents", [])}

    assert keys("demo-scratch") == {"tmp/young-1", "tmp/young-2", "tmp/young-3", "keep/model.pt"}
    assert keys("demo-untagged") == {"old"}
    assert len(keys("demo-all-old")) == 5
    assert [a["kind"] for a in actions] == ["delete-objects", "breaker-tripped"]
