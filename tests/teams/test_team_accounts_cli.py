"""`costguard scan --accounts`: each team summed across the accounts its projects run in
(the JSON's top-level ``teams``), with hand-computed values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.cli.org import teams_across
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.spend import BudgetStatus
from costguard.ports import Inventory
from costguard.services.scan import ScanReport, ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.fakes import StaticInventory, StaticSpotPrices

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
A, B = "222222222222", "333333333333"


def _scan(account: str, *fleet: tuple[str, str, dict[str, str]]) -> ScanReport:
    resources = tuple(
        Resource(
            id=id_,
            kind=ResourceKind.EC2_INSTANCE,
            region="us-east-1",
            account=account,
            instance_type=itype,
            launched_at=T0 - timedelta(hours=48),
            tags=tags,
        )
        for id_, itype, tags in fleet
    )
    return ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory(resources)})],
        StaticSpotPrices({}),
        fixture_catalog(),
        InMemoryLedger(),
        ScanSettings(scope=account, regions=("us-east-1",), account=account),
    ).run(T0)


def test_a_team_spanning_two_accounts_sums_its_projects_across_them() -> None:
    # GIVEN vision (a g5) in account A, vision (a g5) and llm (a p4d) in account B, all of
    # team research, with a $1,000 team budget tagged in B; all up 48 hours
    research = {"costguard:team": "research"}
    a = _scan(A, ("i-a", "g5.xlarge", {"costguard:project": "vision", **research}))
    b = _scan(
        B,
        ("i-b", "g5.xlarge", {"costguard:project": "vision", **research}),
        (
            "i-c",
            "p4d.24xlarge",
            {"costguard:project": "llm", "costguard:team-budget": "1000", **research},
        ),
    )
    # WHEN the accounts' teams are rolled up
    (team,) = teams_across([(A, a), (B, b)])
    # THEN research is vision in both accounts (2 x 48 h x $1.006 = $96.576) plus llm
    # (48 h x $21.957642 = $1,053.966816): $1,150.542816, over its $1,000
    assert team.projects == ("llm", "vision")
    assert team.accounts == frozenset({A, B})
    assert team.month_to_date_usd == Decimal("1150.542816")
    assert team.run_rate_usd_per_hour == 2 * Decimal("1.006") + Decimal("21.957642")
    assert (team.budget_usd, team.budget_source) == (Decimal(1000), "tag")
    assert team.status is BudgetStatus.OVER
    # AND all of it is compute (three instances), none of it guessed or left not split
    assert team.month_to_date_by_category == {
        "compute": Decimal("1150.542816"),
        "storage": Decimal(0),
        "not_split": Decimal(0),
    }
