"""The demo's stale-volume chapter on moto: snapshot, then delete; the others untouched."""

from __future__ import annotations

from typing import Any

import pytest

from costguard.domain.tags import Tags
from costguard_demo.story import STORY_END
from costguard_demo.volumes import run_volume_chapter

pytestmark = pytest.mark.story


def test_the_chapter_snapshots_then_deletes_only_the_unattached_volume(aws: Any) -> None:
    said: list[str] = []
    actions = run_volume_chapter(aws, "us-east-1", said.append, STORY_END)
    # One vocabulary: what the resource is, what is done to it, and what happened.
    assert [(a["resource_kind"], a["action"], a["outcome"]) for a in actions] == [
        ("ebs-volume", "delete-volume", "waiting"),
        ("ebs-volume", "delete-volume", "acted"),
    ]
    assert "snapshot" in actions[0]["detail"] and actions[1]["detail"]
    assert all(a["project"] == "vision-research" and a["dry_run"] is False for a in actions)
    # 500 GiB gp3 ($40/month) less its snapshot at most ($25/month)
    assert actions[1]["usd_per_month_saved"] == 15.0
    ec2 = aws.client("ec2", region_name="us-east-1")
    names = {
        {t["Key"]: t["Value"] for t in v.get("Tags", [])}.get("Name")
        for v in ec2.describe_volumes()["Volumes"]
    }
    assert {"training-data", "golden-dataset"} <= names and "scratch-checkpoints" not in names
    (snapshot,) = ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]
    assert {t["Key"] for t in snapshot["Tags"]} >= {Tags.SOURCE_VOLUME, Tags.TTL, Tags.PROJECT}
    assert any("skipped (exempt)" in line for line in said)
