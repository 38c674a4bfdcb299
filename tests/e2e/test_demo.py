"""`costguard demo --json` end to end: moto's HTTP server, SQS subscriber, Slack stand-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.story]


def test_demo_runs_a_whole_guard_cycle_and_delivers_alerts_everywhere(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "costguard.cli", "demo", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "COSTGUARD_DEMO_REPORT": str(page)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    envelope = json.loads(done.stdout)
    assert (envelope["schema_version"], envelope["kind"]) == (2, "demo")
    demo = envelope["data"]
    report = demo["report"]
    statuses = {p["project"]: p["status"] for p in report["projects"]}
    assert statuses["llm-pretraining"] == "over"
    assert {"malformed-budget", "unpriced", "unattributed", "budget-conflict"} <= {
        f["code"] for f in report["findings"]
    }

    kinds = [(a["kind"], a["project"]) for a in demo["alerts"]]
    assert ("budget-threshold", "llm-pretraining") in kinds
    assert ("budget-forecast", "llm-pretraining") in kinds
    assert ("burn-rate-anomaly", "vision-research") in kinds
    # AND the p5 started mid-story was alerted by its launch event, before the next scan's
    # burn-rate anomaly: over the project's $/h limit, and its forecast over budget
    at_launch = kinds.index(("launch-policy", "vision-research"))
    assert kinds.index(("budget-forecast", "vision-research")) < kinds.index(
        ("burn-rate-anomaly", "vision-research")
    )
    assert at_launch < kinds.index(("burn-rate-anomaly", "vision-research"))
    [launch] = demo["launches"]
    assert launch["outcome"] == "alerted"
    assert {a["kind"] for a in launch["alerts"]} == {"launch-policy", "budget-forecast"}
    assert ("burn-rate-recovered", "vision-research") in kinds
    assert ("unattributed-spend", None) in kinds
    # Daily alerts (digests, unattributed spend) are new alerts on a new UTC day: the six
    # scans span 75 minutes, which may cross midnight. Each alert id goes out once.
    scans = [a["alert_id"] for a in demo["alerts"] if a["kind"] != "action-warning"]
    assert len(scans) == len(set(scans)), "every alert exactly once across six scans"
    # AND the guards that act warned their owners through the same topic (one warning per
    # bucket of the sweep, and the breaker's stop), and list their actions
    assert kinds.count(("action-warning", "vision-research")) >= 2
    outcomes = {(a["resource_kind"], a["outcome"]) for a in demo["actions"]}
    assert ("ec2-instance", "acted") in outcomes and ("ec2-instance", "warned") in outcomes
    assert ("ebs-volume", "acted") in outcomes and ("ebs-volume", "waiting") in outcomes
    assert ("s3-bucket", "acted") in outcomes and ("s3-bucket", "skipped") in outcomes
    for a in demo["actions"]:
        # One vocabulary for every guard (docs/actions.md): no `kind`, always an action
        assert {
            "resource", "resource_kind", "action", "outcome", "detail", "project", "reason",
            "usd_per_hour_saved", "usd_per_month_saved", "dry_run",
        } <= set(a) and "kind" not in a  # fmt: skip
        assert a["action"] and a["detail"]
    # AND every project the guards acted for is one of the scan's projects: the report
    # names them side by side (it named a project "vision" beside "vision-research")
    assert {a["project"] for a in demo["actions"]} <= set(statuses)
    assert demo["alerts_delivered"]["sqs"] == demo["alerts_delivered"]["slack"] == len(kinds)
    # AND one idle warning was answered from the Slack stand-in: kept 4 hours, left past its
    # deadline, warned again, then "act now" stopped it
    steps = [a["step"] for a in demo["answers"]]
    assert [s for s in steps if "presses" in s] == [
        '@alice presses "Keep 4 hours" in Slack; the message now reads:',
        '@alice presses "Act now" in Slack; the message now reads:',
    ]
    assert steps[-1] == "the notebook is stopped"
    assert "the notebook is running: kept past the warning's deadline" in steps
    assert all(a["alert_id"] and a["severity"] and a["summary"] for a in demo["alerts"])
    assert [c["ledger"] for c in demo["cycles"]] == ["applied"] * 6
    # AND the month's page shows what AWS billed beside what the scan saw (the demo's Cost
    # Explorer stand-in: costguard_demo/cost_explorer.py), with the data transfer
    html = page.read_text()
    assert "Billed by AWS beside what the scan saw" in html
    assert "$508.92" in html  # llm-pretraining's data transfer: $412.80 + $96.12
    # AND the research team (llm-pretraining and vision-research) heads over its budget
    [team] = report["teams"]
    assert (team["team"], team["status"]) == ("research", "over")
    assert team["projects"] == ["llm-pretraining", "vision-research"]
    assert any(
        a["kind"] == "budget-forecast" and "team research" in a["summary"] for a in demo["alerts"]
    )
    # AND ranker-prod's cost per 1,000 predictions doubled on the last day (traffic halved on
    # the same two instances), which is advised with its saving
    [ranker] = report["cost_per_prediction"]
    assert ranker["usd_per_1000_predictions"] == 0.2
    assert {d["usd_per_1000_predictions"] for d in ranker["days"][:-2]} == {0.1}
    jump = [a for a in report["advice"] if a["code"] == "prediction-cost-jump"]
    assert len(jump) == 1 and jump[0]["usd_per_month_saving"] == 686.2
    # AND llm-pretraining's storage is in its month: its gp3 volumes and its datasets bucket
    # (12 TiB Standard and 80 TiB Glacier Flexible Retrieval), priced by storage class
    llm = next(p for p in report["projects"] if p["project"] == "llm-pretraining")
    bucket = next(r for r in llm["resources"] if r["kind"] == "s3-bucket")
    assert bucket["category"] == "storage" and bucket["id"] == "llm-pretraining-datasets"
    assert bucket["usd_per_hour"] == pytest.approx(
        (12 * 1024 * 0.023 + 80 * 1024 * 0.0036) / 730, abs=1e-4
    )
    assert llm["run_rate_by_category"]["storage"] > bucket["usd_per_hour"]
