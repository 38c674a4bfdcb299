"""Hostile tests of the tag contract and the central project table."""

from __future__ import annotations

from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.ports import Inventory
from costguard.services.scan import ScanService, ScanSettings
from costguard.settings import Settings
from tests.support.catalog import fixture_catalog
from tests.support.fakes import StaticInventory, StaticSpotPrices
from tests.unit.test_alert_service import T0, gpu


def test_the_central_table_and_the_tags_name_one_project_however_it_is_typed() -> None:
    # GIVEN a central project table whose name was pasted with a no-break space (as wikis
    # and chat apps produce), and an instance tagged with the same name typed normally;
    # the README promises "a no-break space and a space" are one project
    settings = Settings(
        regions=("us-east-1",),
        projects={"Vision\u00a0Research": {"budget": 100, "owners": ["alice@example.com"]}},
    )
    fleet = (gpu("i-1", "p4d.24xlarge", project="Vision Research", budget=None),)
    # WHEN the account is scanned
    report = ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory(fleet)})],
        StaticSpotPrices({}),
        fixture_catalog(),
        InMemoryLedger(),
        ScanSettings(scope="acct", regions=("us-east-1",), projects=settings.project_table()),
    ).run(T0)
    # THEN there is one project, and the table's $100 budget applies to its spend
    by_name = {p.project: p for p in report.projects}
    assert len(by_name) == 1, f"two projects for one name: {sorted(map(repr, by_name))}"
    (project,) = by_name.values()
    assert project.budget_usd == Decimal(100)
    assert project.month_to_date_usd > 0
