"""A team over its budget is alerted through the project budget rules: once per team,
threshold and month, claimed apart from its projects (the in-memory ledger and a recording
notifier, as tests/unit/test_alert_service.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.alerts import Alert
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.teams import TeamConfig
from costguard.ports import Inventory
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.scan import ScanReport, ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.fakes import StaticInventory, StaticSpotPrices
from tests.unit.test_alert_service import ScriptedNotifier

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
STEP = timedelta(minutes=15)
#: The fixture catalog's on-demand rates in us-east-1.
P4D, G5 = Decimal("21.957642"), Decimal("1.006")


def instance(id_: str, itype: str, **tags: str) -> Resource:
    return Resource(
        id=id_,
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type=itype,
        launched_at=T0 - timedelta(hours=48),
        tags={k.replace("_", ":", 1).replace("_", "-"): v for k, v in tags.items()},
    )


class Team:
    """Two projects of team research, scanned and alerted cycle by cycle."""

    def __init__(self, *, teams: dict[str, TeamConfig] | None = None) -> None:
        self.ledger = InMemoryLedger()
        self.sent: list[Alert] = []
        self.notifier = ScriptedNotifier(self.sent)  # type: ignore[arg-type]
        self.teams = teams or {}
        self.fleet = [
            instance("i-llm", "p4d.24xlarge", costguard_project="llm", costguard_team="research"),
            instance(
                "i-vis",
                "g5.xlarge",
                costguard_project="vision",
                costguard_team="research",
                costguard_team_budget="1000",
            ),
        ]

    def scan(self, now: datetime) -> ScanReport:
        return ScanService(
            [StaticInventory("ec2", {"us-east-1": Inventory(tuple(self.fleet))})],
            StaticSpotPrices({}),
            fixture_catalog(),
            self.ledger,
            ScanSettings(scope="acct", regions=("us-east-1",), teams=self.teams),
        ).run(now)

    def cycle(self, now: datetime) -> list[Alert]:
        report = self.scan(now)
        before = len(self.sent)
        AlertService(self.ledger, self.notifier, AlertSettings(scope="acct")).run(
            report, report.previous, now
        )
        return self.sent[before:]


def test_a_team_over_its_budget_is_alerted_once_per_threshold_across_many_scans() -> None:
    # GIVEN team research (llm on a p4d, vision on a g5, both up 48 hours) with a team
    # budget of $1,000 tagged on vision's instance, and no project budget
    team = Team()
    # WHEN the guard scans every 15 minutes for five hours
    first = team.scan(T0)
    for n in range(20):
        team.cycle(T0 + STEP * n)
    # THEN the team's month-to-date was the sum of its projects': 48 h x ($21.957642 +
    # $1.006) = $1,102.254816, 110% of its budget
    (research,) = first.teams
    assert research.projects == ("llm", "vision")
    assert research.month_to_date_usd == 48 * (P4D + G5) == Decimal("1102.254816")
    assert research.run_rate_usd_per_hour == P4D + G5
    # AND the threshold (100%, the highest crossed) and the forecast were each sent once,
    # naming the team, not a project
    assert sorted(a.alert_id for a in team.sent) == [
        "budget-forecast/2026-11/team/research",
        "budget-threshold/2026-11/100/team/research",
    ]
    threshold = next(a for a in team.sent if a.kind.value == "budget-threshold")
    assert threshold.title == "team research: 100% of the monthly budget spent"
    assert threshold.project is None
    assert threshold.facts["team"] == "research"
    assert threshold.facts["projects"] == "llm, vision"
    assert threshold.facts["month_to_date"] == "$1,102.25"
    assert threshold.dedupe == tuple(
        f"team-budget/research/2026-11/1000.00/mtd-{t}" for t in (50, 80, 100)
    )
    # AND the largest resources of its projects are listed, the p4d first
    assert threshold.resources[0].key.endswith("i-llm")


def test_a_team_and_a_project_of_the_same_name_are_claimed_apart() -> None:
    # GIVEN a project named research, over its own $1,000 budget, in a team named research
    # over its $1,000 budget (the central team table): the same name, month and amount
    team = Team(teams={"research": TeamConfig(Decimal(1000))})
    team.fleet = [
        instance(
            "i-r",
            "p4d.24xlarge",
            costguard_project="research",
            costguard_team="research",
            costguard_budget="1000",
        )
    ]
    # WHEN scanned and alerted
    sent = team.cycle(T0)
    # THEN both are told: the project's claims never stand for the team's
    assert sorted(a.alert_id for a in sent) == [
        "budget-forecast/2026-11/research",
        "budget-forecast/2026-11/team/research",
        "budget-threshold/2026-11/100/research",
        "budget-threshold/2026-11/100/team/research",
    ]


def test_a_new_month_alerts_the_team_again_from_zero() -> None:
    # GIVEN team research alerted in November
    team = Team()
    team.cycle(T0)
    assert len(team.sent) == 2
    # WHEN the first scan of December runs (15 minutes into the month: $5.74 spent, at
    # $22.96/h for 743.75 more hours: forecast $17,082)
    december = datetime(2026, 12, 1, 0, 15, tzinfo=UTC)
    assert team.cycle(december - 2 * STEP) == []  # the last scan of November: nothing new
    new = team.cycle(december)
    report = team.scan(december + STEP)
    # THEN only December's forecast is new: no threshold is crossed yet this month
    assert [a.alert_id for a in new] == ["budget-forecast/2026-12/team/research"]
    (research,) = report.teams
    assert research.month_to_date_usd == Decimal("0.5") * (P4D + G5)  # 00:00 to 00:30
    # AND once December's spend crosses the budget, its threshold is alerted once
    later = datetime(2026, 12, 3, 0, 0, tzinfo=UTC)
    assert [a.alert_id for a in team.cycle(later)] == ["budget-threshold/2026-12/100/team/research"]
    assert team.cycle(later + STEP) == []
