"""The demo's idle chapter: warned, then stopped; busy left; exempt skipped; unknown reported."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.clock import MIDDAY

pytestmark = pytest.mark.story


def test_the_idle_chapter_warns_then_stops_and_leaves_the_rest(aws: Any) -> None:
    from costguard_demo.idle import run_idle_chapter

    said: list[str] = []
    actions = run_idle_chapter(aws, "us-east-1", said.append, MIDDAY)
    assert [a["outcome"] for a in actions] == ["warned", "acted"]
    for a in actions:
        assert a["resource_kind"] == "ec2-instance" and a["project"] == "vision-research"
        assert a["action"] == "stop-instance"
        assert a["usd_per_hour_saved"] > 0 and a["dry_run"] is False
    text = "\n".join(said)
    assert "busy-gpu-notebook: busy" in text
    assert "exempt-notebook: skipped" in text
    assert "no-metrics-notebook: unknown" in text
    assert "owner told" in text
