"""A team's month-to-date and its split into compute and storage, in the scan JSON, beside
its projects' as the same JSON shows them. Figures by hand, half a cent at a time."""

from __future__ import annotations

from decimal import Decimal

from costguard.cli.scan_output import project_json, team_json
from costguard.domain.spend import BudgetStatus, month_split
from costguard.domain.teams import ProjectFigure, TeamBudget, team_reports
from costguard.services.scan import ProjectReport


def project(name: str, compute: str, storage: str) -> ProjectReport:
    total = Decimal(compute) + Decimal(storage)
    return ProjectReport(
        project=name,
        budget_usd=None,
        budget_source="none",
        run_rate_usd_per_hour=Decimal(0),
        month_to_date_usd=total,
        estimated_usd=Decimal(0),
        forecast_month_usd=total,
        status=BudgetStatus.NO_BUDGET,
        owners=(),
        resources=(),
        unpriced=0,
        team="research",
        month_to_date_by_category=month_split(
            total, {"compute": Decimal(compute), "storage": Decimal(storage)}
        ),
    )


def test_a_teams_compute_in_the_scan_json_is_the_sum_of_its_projects_as_shown() -> None:
    """Defect: the scan JSON says each team is "the sum of its projects" (docs/cli.md), and
    the report makes every team figure the sum of its projects' rows as shown, to the cent;
    but the scan JSON rounds the team's full-precision sums instead. Two projects each half a
    cent over a cent show $1,234.57 and $500.13 of compute; their team shows $1,734.69, a
    cent less than its projects (and its month-to-date a cent less too). A reader who adds
    the projects up, or a dashboard fed from the JSON, finds the team does not add up."""
    # GIVEN team research: llm with $1,234.565 of compute and $10 of storage, vision with
    # $500.125 of compute and nothing stored
    llm = project("llm", "1234.565", "10")
    vision = project("vision", "500.125", "0")
    [team] = team_reports(
        [
            ProjectFigure(
                p.project or "",
                p.month_to_date_usd,
                p.estimated_usd,
                p.run_rate_usd_per_hour,
                p.forecast_month_usd,
                month_to_date_by_category=p.month_to_date_by_category,
            )
            for p in (llm, vision)
        ],
        {"llm": "research", "vision": "research"},
        {"research": TeamBudget(None, "none")},
        {},
    )
    # WHEN the scan JSON shows the projects and the team
    shown = [project_json(p) for p in (llm, vision)]
    team_shown = team_json(team)
    # THEN each project shows its figures to the cent: $1,234.57 and $500.13 of compute
    assert [p["month_to_date_by_category"]["compute"] for p in shown] == [1234.57, 500.13]
    assert [p["month_to_date_usd"] for p in shown] == [1244.57, 500.13]
    # AND the team's are their sums: $1,734.70 of compute, $1,744.70 in all
    assert team_shown["month_to_date_by_category"]["compute"] == 1734.70
    assert team_shown["month_to_date_usd"] == 1744.70
