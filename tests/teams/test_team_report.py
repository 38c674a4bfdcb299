"""`costguard report` with teams: a team row is the sum of its projects' rows, in the JSON,
the text and the page; ``--team`` narrows to the team the scan settled."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.cli.report import report_data, report_table, team_table
from costguard.cli.report_html import render
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.report import Report
from costguard.domain.spend import BudgetStatus
from costguard.domain.teams import TeamConfig
from costguard.ports import Inventory
from costguard.services.report import ReportRequest, build_report
from costguard.services.scan import ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.fakes import StaticInventory, StaticSpotPrices

#: 09:00 on the 20th: 255 hours left in November.
T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def _instance(id_: str, itype: str, tags: dict[str, str]) -> Resource:
    return Resource(
        id=id_,
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type=itype,
        launched_at=T0 - timedelta(hours=48),
        tags=tags,
    )


def month_report(team: str | None = None) -> Report:
    """GIVEN llm (a p4d, $21.957642/h) and vision (a g5, $1.006/h) of team research (a
    $5,000 budget in the central team table), and ops (a g5) of no team, up 48 hours."""
    fleet = (
        _instance(
            "i-llm", "p4d.24xlarge", {"costguard:project": "llm", "costguard:team": "research"}
        ),
        _instance(
            "i-vis", "g5.xlarge", {"costguard:project": "vision", "costguard:team": "research"}
        ),
        _instance("i-ops", "g5.xlarge", {"costguard:project": "ops"}),
    )
    ledger = InMemoryLedger()
    scan = ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory(fleet)})],
        StaticSpotPrices({}),
        fixture_catalog(),
        ledger,
        ScanSettings(
            scope="acct",
            regions=("us-east-1",),
            teams={"research": TeamConfig(Decimal(5000))},
        ),
    ).run(T0)
    return build_report(scan, ledger, ReportRequest("2026-11", team=team), T0)


def test_a_team_row_is_the_sum_of_its_projects_rows() -> None:
    # WHEN the month's report is built
    r = month_report()
    # THEN research holds llm and vision: spent 48 h x $21.957642 = $1,053.97 and
    # 48 h x $1.006 = $48.29, $1,102.26; forecast $1,053.966816 + 255 h x $21.957642 =
    # $6,653.17 and $48.288 + 255 h x $1.006 = $304.82, $6,957.99: over its $5,000
    (research,) = r.teams
    assert research.projects == ("llm", "vision")
    assert research.month_to_date == Decimal("1102.26")
    assert research.forecast == Decimal("6957.99")
    assert research.budget == Decimal(5000)
    assert research.status is BudgetStatus.OVER
    # AND the JSON says each project's team, and the team's row
    data = report_data(r)
    assert {p["project"]: p["team"] for p in data["projects"]} == {
        "llm": "research",
        "vision": "research",
        "ops": None,
    }
    assert data["teams"][0]["month_to_date_usd"] == 1102.26
    assert data["teams"][0]["forecast_usd"] == 6957.99
    # AND the text tables have a team column and a team table
    assert "team" in [c.key for c in report_table(r).columns]
    (row,) = team_table(r).rows
    assert row["projects"] == "llm, vision" and row["status"] == "over"
    # AND the page has a team section, and says the team is heading over: its forecast is
    # over the budget, its spend ($1,102.26 of $5,000) not yet
    page = render(r)
    assert "<h2>Spend by team (each the sum of its projects)</h2>" in page
    assert "<strong>Team <bdi>research</bdi> is heading over budget.</strong>" in page
    # AND once the spend itself has passed the budget, it says over budget
    spent = replace(r, teams=(replace(research, budget=Decimal(1000)),))
    assert "<strong>Team <bdi>research</bdi> is over budget.</strong>" in render(spent)


def test_team_narrows_the_report_to_the_settled_team() -> None:
    # WHEN the report is narrowed to research, typed full-width
    r = month_report(team="ｒｅｓｅａｒｃｈ")
    # THEN only its projects are shown, and its row
    assert sorted(b.project or "" for b in r.burns) == ["llm", "vision"]
    assert [t.team for t in r.teams] == ["research"]
