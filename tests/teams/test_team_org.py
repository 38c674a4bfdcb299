"""Organization mode on moto: a team whose projects run in two member accounts is the sum
of its projects across both (each project itself summed over its accounts and regions)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from costguard.domain.findings import FindingCode
from costguard.domain.spend import BudgetStatus
from costguard.domain.tags import Tags
from costguard.settings import Settings
from tests.functional.test_org_budgets import EAST, WEST, _aggregate, _gpu, hub
from tests.functional.test_org_slices import HUB, REGIONS, A, B

__all__ = ["hub"]  # the fixture


def _settings(projects: dict[str, Any], teams: dict[str, Any]) -> Settings:
    return Settings(
        table_name="ledger",
        scope=HUB,
        regions=REGIONS,
        projects=projects,
        teams=teams,
        sagemaker_studio=False,
    )


def test_a_team_spanning_two_accounts_is_the_sum_of_its_projects_across_them(hub: Any) -> None:
    # GIVEN vision's g5 in account A (us-east-1) and llm's g5 in account B (us-west-2), both
    # of team research by the central project table, whose budget is $100; ops in B, no team
    _gpu(hub, EAST, **{Tags.PROJECT: "vision"})
    _gpu(hub, WEST, **{Tags.PROJECT: "llm"})
    _gpu(hub, WEST, **{Tags.PROJECT: "ops"})
    settings = _settings(
        {"vision": {"team": "research"}, "llm": {"team": "research"}},
        {"research": {"budget": 100, "owners": ["lead@example.com"]}},
    )
    # WHEN the two slices come in and the time is aggregated
    report = _aggregate(hub, settings)
    # THEN research holds both projects, from both accounts
    (research,) = report.teams
    assert research.projects == ("llm", "vision")
    assert research.accounts == frozenset({A, B})
    projects = {p.project: p for p in report.projects}
    assert projects["vision"].team == "research" and projects["ops"].team is None
    # AND its figures are the sums of its projects': two g5s ($1.006/h) with their 8 GiB
    # gp2 root volumes ($0.10 a GiB-month over 730 h), forecast over its $100 budget
    assert research.run_rate_usd_per_hour == 2 * (Decimal("1.006") + 8 * Decimal("0.10") / 730)
    for field in ("month_to_date_usd", "run_rate_usd_per_hour", "forecast_month_usd"):
        assert getattr(research, field) == sum(
            (getattr(projects[p], field) for p in ("llm", "vision")), Decimal(0)
        )
    assert (research.budget_usd, research.budget_source) == (Decimal(100), "table")
    assert research.status is BudgetStatus.OVER
    assert research.owners == ("lead@example.com",)


def test_teams_tagged_in_member_accounts_roll_up_and_disagree_as_a_finding(hub: Any) -> None:
    # GIVEN vision tagged team research in account A and team platform in account B, llm of
    # research in B, and team budgets of $50 (A) and $80 (B) tagged, no central table
    _gpu(
        hub,
        EAST,
        **{Tags.PROJECT: "vision", Tags.TEAM: "research", Tags.TEAM_BUDGET: "50"},
    )
    _gpu(hub, WEST, **{Tags.PROJECT: "vision", Tags.TEAM: "platform"})
    _gpu(hub, WEST, **{Tags.PROJECT: "llm", Tags.TEAM: "research", Tags.TEAM_BUDGET: "80"})
    # WHEN the time is aggregated
    report = _aggregate(hub, _settings({}, {}))
    # THEN vision belongs to platform (alphabetically first), named in a finding with both
    # slices; llm to research
    teams = {t.team: t for t in report.teams}
    assert teams["platform"].projects == ("vision",)
    assert teams["research"].projects == ("llm",)
    (conflict,) = [f for f in report.findings if f.code is FindingCode.TEAM_CONFLICT]
    assert conflict.resource == "project/vision"
    assert f"'platform' on {B}/us-west-2" in conflict.message
    assert f"'research' on {A}/us-east-1" in conflict.message
    assert conflict.message.endswith("the alphabetically first, 'platform', applies")
    # AND research's budget is the lowest tagged in any account, and disagreement is a finding
    assert (teams["research"].budget_usd, teams["research"].budget_source) == (Decimal(50), "tag")
    budget_conflicts = [f for f in report.findings if f.resource == "team/research"]
    assert len(budget_conflicts) == 1 and budget_conflicts[0].code is FindingCode.BUDGET_CONFLICT
