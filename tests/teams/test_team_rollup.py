"""Teams: which team a project belongs to, a team's budget, and its figures as the sum of its
projects' (domain/teams.py through attribution), with hand-computed values."""

from __future__ import annotations

from decimal import Decimal

from costguard.domain.attribution import ProjectConfig, attribute
from costguard.domain.findings import FindingCode
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.pricing import PricedResource
from costguard.domain.spend import BudgetStatus, forecast_month_end
from costguard.domain.tags import TagKeys
from costguard.domain.teams import ProjectFigure, TeamBudget, TeamConfig, team_reports
from tests.support.clock import MIDDAY


def priced(id_: str, **tags: str) -> PricedResource:
    res = Resource(
        id=id_,
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        tags={k.replace("_", ":", 1).replace("_", "-"): v for k, v in tags.items()},
    )
    return PricedResource(res, Decimal(1), "test")


def test_team_tag_rolls_a_project_into_its_team() -> None:
    # GIVEN two projects whose resources carry costguard:team=research, one typed full-width
    a = priced("i-a", costguard_project="vision", costguard_team="research")
    b = priced("i-b", costguard_project="nlp", costguard_team="ｒｅｓｅａｒｃｈ")
    # WHEN attributed
    result = attribute([a, b], TagKeys())
    # THEN both belong to the one team, and nothing is wrong
    assert result.teams == {"vision": "research", "nlp": "research"}
    assert result.team_budgets["research"] == TeamBudget(None, "none")
    assert not result.findings


def test_two_teams_tagged_on_one_project_is_a_finding_and_the_alphabetically_first_applies() -> (
    None
):
    # GIVEN project vision tagged research on one resource and platform on another
    a = priced("i-a", costguard_project="vision", costguard_team="research")
    b = priced("i-b", costguard_project="vision", costguard_team="platform")
    # WHEN attributed
    result = attribute([a, b], TagKeys())
    # THEN platform (alphabetically first) applies, and the finding names both and why
    assert result.teams == {"vision": "platform"}
    (conflict,) = [f for f in result.findings if f.code is FindingCode.TEAM_CONFLICT]
    assert conflict.resource == "project/vision"
    assert conflict.message == (
        "project 'vision' is given 2 teams ('platform' on us-east-1/ec2-instance/i-b; "
        "'research' on us-east-1/ec2-instance/i-a); the alphabetically first, 'platform', applies"
    )


def test_the_central_project_table_wins_over_a_team_tag_and_says_so() -> None:
    # GIVEN a project tagged research, and the central table putting it in platform
    a = priced("i-a", costguard_project="vision", costguard_team="research")
    table = {"vision": ProjectConfig(team="platform")}
    # WHEN attributed
    result = attribute([a], TagKeys(), table)
    # THEN the table's team applies, and the disagreement is a finding naming both
    assert result.teams == {"vision": "platform"}
    (conflict,) = [f for f in result.findings if f.code is FindingCode.TEAM_CONFLICT]
    assert "'research' on us-east-1/ec2-instance/i-a" in conflict.message
    assert "'platform' in the central project table" in conflict.message
    assert conflict.message.endswith("the central project table's team, 'platform', applies")


def test_a_project_only_in_the_central_table_has_its_team_and_no_finding() -> None:
    a = priced("i-a", costguard_project="vision")
    result = attribute([a], TagKeys(), {"vision": ProjectConfig(team="research")})
    assert result.teams == {"vision": "research"}
    assert not [f for f in result.findings if f.code is FindingCode.TEAM_CONFLICT]


def test_a_malformed_team_name_is_a_finding_and_no_team_is_read() -> None:
    # GIVEN a team tag with a zero-width space (a lookalike of "research")
    a = priced("i-a", costguard_project="vision", costguard_team="re\u200bsearch")
    # WHEN attributed
    result = attribute([a], TagKeys())
    # THEN no team, and a malformed-team finding naming the resource and the tag
    assert result.teams == {}
    (bad,) = result.findings
    assert bad.code is FindingCode.MALFORMED_TEAM
    assert bad.resource == "us-east-1/ec2-instance/i-a"
    assert "costguard:team=" in bad.message and "U+200B" in bad.message


def test_team_budget_tags_lowest_wins_and_disagreement_is_a_finding() -> None:
    # GIVEN two projects of team research with team budgets 20,000 and 15,000 tagged
    a = priced(
        "i-a", costguard_project="vision", costguard_team="research", costguard_team_budget="20,000"
    )
    b = priced(
        "i-b", costguard_project="nlp", costguard_team="research", costguard_team_budget="$15000"
    )
    # WHEN attributed
    result = attribute([a, b], TagKeys())
    # THEN the lowest applies, as for costguard:budget, and the conflict names both
    assert result.team_budgets["research"] == TeamBudget(Decimal(15000), "tag")
    (conflict,) = [f for f in result.findings if f.code is FindingCode.BUDGET_CONFLICT]
    assert conflict.resource == "team/research"
    assert "15000 on us-east-1/ec2-instance/i-b" in conflict.message
    assert "20000 on us-east-1/ec2-instance/i-a" in conflict.message


def test_the_central_team_table_wins_over_team_budget_tags() -> None:
    a = priced(
        "i-a", costguard_project="vision", costguard_team="research", costguard_team_budget="900"
    )
    result = attribute([a], TagKeys(), {}, {"research": TeamConfig(Decimal(30000))})
    assert result.team_budgets["research"] == TeamBudget(Decimal(30000), "table")


def test_a_malformed_team_budget_is_a_finding_and_ignored() -> None:
    a = priced(
        "i-a", costguard_project="vision", costguard_team="research", costguard_team_budget="lots"
    )
    result = attribute([a], TagKeys())
    assert result.team_budgets["research"] == TeamBudget(None, "none")
    (bad,) = result.findings
    assert bad.code is FindingCode.MALFORMED_BUDGET
    assert "costguard:team-budget=" in bad.message and "team budget ignored" in bad.message


def test_team_figures_are_the_sums_of_its_projects() -> None:
    # GIVEN at MIDDAY (252 hours left in November) vision: $1,000 spent at $2/h, forecast
    # 1,000 + 2 x 252 = $1,504; nlp: $500 at $1/h, forecast 500 + 252 = $752; and a team
    # budget of $2,000
    vision = forecast_month_end(Decimal(1000), Decimal(2), MIDDAY)
    nlp = forecast_month_end(Decimal(500), Decimal(1), MIDDAY)
    assert (vision, nlp) == (Decimal(1504), Decimal(752))
    figures = [
        ProjectFigure("vision", Decimal(1000), Decimal(0), Decimal(2), vision),
        ProjectFigure("nlp", Decimal(500), Decimal(100), Decimal(1), nlp),
        ProjectFigure("alone", Decimal(7), Decimal(0), Decimal(0), Decimal(7)),
    ]
    # WHEN rolled up
    (team,) = team_reports(
        figures,
        {"vision": "research", "nlp": "research"},
        {"research": TeamBudget(Decimal(2000), "table")},
        {"research": ("lead@example.com",)},
    )
    # THEN the team is $1,500 spent at $3/h, forecast $2,256: over its $2,000 budget
    assert team.projects == ("nlp", "vision")
    assert team.month_to_date_usd == Decimal(1500)
    assert team.estimated_usd == Decimal(100)
    assert team.run_rate_usd_per_hour == Decimal(3)
    assert team.forecast_month_usd == Decimal(2256)
    assert team.status is BudgetStatus.OVER
    assert team.owners == ("lead@example.com",)


def test_a_configured_team_without_projects_is_listed_at_zero() -> None:
    (team,) = team_reports([], {}, {"infra": TeamBudget(Decimal(100), "table")}, {})
    assert (team.team, team.projects, team.month_to_date_usd) == ("infra", (), Decimal(0))
    assert team.status is BudgetStatus.OK
