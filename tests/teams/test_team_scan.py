"""Two teams through the scan Lambda on moto: tags and the central tables in, the teams in
the handler's summary, the scan JSON and text, the dashboard's log lines, and a team over
its budget alerted on the topic."""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from costguard.env import Env
from tests.support.clock import MIDDAY
from tests.support.ec2 import run_instance


@dataclass
class Context:
    function_name: str = "costguard-scan"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:costguard-scan"
    aws_request_id: str = "req-1"


@pytest.fixture
def two_teams(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """GIVEN team research (vision and nlp, by costguard:team tags, a $100,000 team budget
    tagged) and team platform (serving, by the central project table, a $1,000 budget in the
    central team table), and an alert topic with a queue on it."""
    from costguard import events
    from costguard_demo.plumbing import create_alert_channels, create_ledger_table

    monkeypatch.setattr(events, "CLOCK", lambda: MIDDAY + timedelta(minutes=5))
    create_ledger_table(aws, "ledger", "us-east-1")
    topic, queue = create_alert_channels(aws, "us-east-1")
    for key, value in {
        Env.REGIONS: "us-east-1",
        Env.TABLE_NAME: "ledger",
        Env.SCOPE: "123456789012",
        Env.SAGEMAKER_TAGS: "per-resource",
        Env.SAGEMAKER_STUDIO: "false",
        Env.TOPIC_ARN: topic,
        Env.PROJECTS_JSON: json.dumps({"serving": {"team": "platform"}}),
        Env.TEAMS_JSON: json.dumps({"platform": {"budget": 1000, "owners": ["ops@example.com"]}}),
    }.items():
        monkeypatch.setenv(key, value)
    ec2 = aws.client("ec2", region_name="us-east-1")
    research = {"costguard:team": "research"}
    run_instance(ec2, {"costguard:project": "vision", **research})
    run_instance(ec2, {"costguard:project": "nlp", "costguard:team-budget": "100000", **research})
    run_instance(ec2, {"costguard:project": "serving"}, "p5.48xlarge")
    return aws, queue


def test_a_scan_rolls_two_teams_up_from_tags_and_the_central_tables(
    two_teams: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aws_lambda_powertools import Logger

    from costguard.handlers import scan
    from costguard.handlers.scan import handler
    from costguard.telemetry import Figures
    from costguard_demo.plumbing import drain

    aws, queue = two_teams
    log = io.StringIO()
    monkeypatch.setattr(scan, "logger", Logger(service="teams-under-test", stream=log))
    # WHEN the scheduled scan runs
    result = handler({"time": MIDDAY.isoformat()}, Context())
    # THEN each project names its team, and each team is the sum of its projects
    teams = {t["team"]: t for t in result["teams"]}
    projects = {p["project"]: p for p in result["projects"]}
    assert {p: projects[p]["team"] for p in projects} == {
        "nlp": "research",
        "serving": "platform",
        "vision": "research",
    }
    assert teams["research"]["projects"] == ["nlp", "vision"]
    assert teams["platform"]["projects"] == ["serving"]
    for name, members in (("research", ("nlp", "vision")), ("platform", ("serving",))):
        assert teams[name]["forecast_month_usd"] == pytest.approx(
            sum(projects[p]["forecast_month_usd"] for p in members), abs=0.011
        )
    # AND platform (a p5 and its root volume, $55.0411/h, for the 252 hours left in November:
    # $13,870.36 against $1,000) is heading over budget; research (two g5s, $2.0142/h) is not
    assert teams["platform"]["forecast_month_usd"] == 13870.36
    assert teams["research"]["forecast_month_usd"] == 507.58
    assert (teams["platform"]["status"], teams["research"]["status"]) == ("over", "ok")
    # AND its forecast alert went to the topic, naming the team and its owners
    alerts = [a for a in drain(aws, queue, "us-east-1") if a["kind"] == "budget-forecast"]
    (platform,) = alerts
    assert platform["alert_id"] == "budget-forecast/2026-11/team/platform"
    assert platform["title"].startswith("team platform: forecast $")
    assert platform["owners"] == ["ops@example.com"]
    assert platform["facts"]["projects"] == "serving"
    # AND the dashboard's log lines carry the team: one per project, one per team
    lines = [json.loads(line) for line in log.getvalue().splitlines() if line.startswith("{")]
    project_lines = {
        d[Figures.PROJECT]: d[Figures.TEAM] for d in lines if d.get("event") == Figures.EVENT
    }
    assert project_lines == {"nlp": "research", "serving": "platform", "vision": "research"}
    team_lines = {d[Figures.TEAM]: d for d in lines if d.get("event") == Figures.TEAM_EVENT}
    assert set(team_lines) == {"platform", "research"}
    assert team_lines["platform"][Figures.BUDGET] == 1000.0
    assert team_lines["platform"][Figures.STATUS] == "over"


def test_the_scan_json_and_text_show_the_teams(two_teams: Any) -> None:
    from costguard.cli.scan_output import report_json, report_table
    from costguard.handlers.scan import process
    from costguard.settings import Settings

    aws, _queue = two_teams

    # WHEN scanned
    outcome = process({"time": MIDDAY.isoformat()}, Settings.from_env(os.environ), aws)
    doc = report_json(outcome.report)
    # THEN the JSON lists both teams, with their budgets' sources
    teams = {t["team"]: t for t in doc["teams"]}
    assert teams["platform"]["budget_usd"] == 1000.0
    assert teams["platform"]["budget_source"] == "table"
    assert teams["platform"]["owners"] == ["ops@example.com"]
    assert teams["research"]["budget_usd"] == 100000.0
    assert teams["research"]["budget_source"] == "tag"
    assert {p["project"]: p["team"] for p in doc["projects"]}["serving"] == "platform"
    # AND the text has a team table with each team's projects
    text = report_table(outcome.report, colour=False)
    assert "Teams (2), each the sum of its projects:" in text
    (platform_row,) = [line for line in text.splitlines() if line.startswith("platform ")]
    assert platform_row.split()[1] == "$1,000.00"
    assert platform_row.endswith("  over    serving")
