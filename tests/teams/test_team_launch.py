"""The on-launch check forecasts the launched resource's team against the team's budget, as
the scan does: the team's sums as the last scan left them plus the new resource, alerted
once per team, budget and month under the scan's own team claim (the in-memory ledger, a
recording notifier and a fake reader, as tests/launch/test_launch_check.py).

The figures document is written by hand in most tests, so every forecast below is computed
by hand from it. The month of November 2026 ends at 2026-12-01T00:00Z."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.alerts import Alert, AlertKind
from costguard.domain.attribution import ProjectConfig
from costguard.domain.findings import FindingCode
from costguard.domain.launch import (
    FIGURES_STATE,
    ProjectFigures,
    TeamFigures,
    decode_team_figures,
    encode_figures,
)
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.money import ZERO
from costguard.domain.teams import TeamConfig
from costguard.ports import Described, Inventory
from costguard.rendering import (
    MachineAlert,
    email_subject,
    email_text,
    machine_json,
    slack_blocks,
)
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.launch import LaunchCheck, LaunchSettings, Outcome
from costguard.services.scan import ScanService, ScanSettings
from tests.launch.test_launch_check import FakeReader
from tests.support.catalog import fixture_catalog
from tests.support.clock import MIDDAY
from tests.support.events import load_event
from tests.support.fakes import RecordingNotifier, StaticInventory, StaticSpotPrices

ACCOUNT = "123456789012"
#: The last scan ran at MIDDAY (2026-11-20 12:00Z); the launch an hour later, when
#: 251 hours of November are left (10 days and 11 hours).
LAUNCH = MIDDAY + timedelta(hours=1)
GPU_ID = "i-0a1b2c3d4e5f60789"
#: The fixture catalog's p5.48xlarge in us-east-1.
P5 = Decimal("55.04")


def gpu(at: datetime = LAUNCH, instance: str = GPU_ID, **tags: str) -> Resource:
    return Resource(
        id=instance,
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        account=ACCOUNT,
        instance_type="p5.48xlarge",
        launched_at=at,
        state="running",
        tags={k.replace("_", ":", 1).replace("_", "-"): v for k, v in tags.items()},
    )


def research(
    *,
    at: datetime = MIDDAY,
    mtd: str = "6000",
    rate: str = "10",
    budget: str | None = "20000",
    source: str = "tag",
) -> dict[str, Any]:
    """Team research at the last scan: llm ($5,000 so far, $8/h) and vision ($1,000, $2/h),
    so $6,000 and $10/h together, and a tagged team budget of $20,000. Vision's own budget
    ($30,000) is far away."""
    return encode_figures(
        at,
        {
            "llm": ProjectFigures(at, Decimal(5000), Decimal(8), team="research"),
            "vision": ProjectFigures(
                at,
                Decimal(1000),
                Decimal(2),
                Decimal(30000),
                ("vision@example.com",),
                team="research",
            ),
        },
        {
            "research": TeamFigures(
                at,
                Decimal(mtd),
                Decimal(rate),
                Decimal(budget) if budget is not None else None,
                source if budget is not None else "",
                ("lead@example.com",),
                ("llm", "vision"),
            )
        },
    )


class World:
    """One account: its ledger (with the last scan's figures), alert topic and launch check."""

    def __init__(
        self,
        figures: dict[str, Any] | None = None,
        *,
        projects: dict[str, ProjectConfig] | None = None,
        teams: dict[str, TeamConfig] | None = None,
    ) -> None:
        self.ledger = InMemoryLedger()
        self.sent: list[Alert] = []
        self.reader = FakeReader()
        self.projects = projects or {}
        self.teams = teams or {}
        self.fleet: list[Resource] = []
        if figures is not None:
            version = self.ledger.get_state(ACCOUNT, FIGURES_STATE)[1]
            assert self.ledger.put_state(ACCOUNT, FIGURES_STATE, figures, version)

    def alerts(self) -> AlertService:
        return AlertService(
            self.ledger,
            RecordingNotifier(self.sent),
            AlertSettings(scope=ACCOUNT, projects=self.projects),
        )

    def launch(self, resource: Resource, now: datetime | None = None) -> Any:
        now = now or resource.launched_at or LAUNCH
        self.fleet.append(resource)
        self.reader.found[resource.id] = Described((resource,))
        event = load_event(
            "ec2-instance-state-running",
            resource_id=resource.id,
            time=now.isoformat(),
        )
        check = LaunchCheck(
            lambda account: self.reader,
            fixture_catalog(),
            self.ledger,
            self.alerts(),
            LaunchSettings(
                scope=ACCOUNT, account=ACCOUNT, projects=self.projects, teams=self.teams
            ),
        )
        verdicts, run = check.check(event, now)
        run.raise_if_failed()
        [verdict] = verdicts
        return verdict

    def scan(self, now: datetime) -> list[Alert]:
        before = len(self.sent)
        report = ScanService(
            [StaticInventory("ec2", {"us-east-1": Inventory(tuple(self.fleet))})],
            StaticSpotPrices({}),
            fixture_catalog(),
            self.ledger,
            ScanSettings(
                scope=ACCOUNT,
                regions=("us-east-1",),
                projects=self.projects,
                teams=self.teams,
                account=ACCOUNT,
            ),
        ).run(now)
        self.alerts().run(report, report.previous, now)
        return self.sent[before:]


def forecasts(alerts: list[Alert]) -> list[Alert]:
    return [a for a in alerts if a.kind is AlertKind.BUDGET_FORECAST]


def test_a_launch_that_takes_the_team_but_not_the_project_over_is_alerted_once() -> None:
    # GIVEN team research at the last scan: $6,000 spent, $10/h, a $20,000 team budget; and
    # its project vision: $1,000 spent, $2/h, its own $30,000 budget
    world = World(research())
    # WHEN a p5 ($55.04/h) of vision starts an hour after the scan
    verdict = world.launch(gpu(costguard_project="vision"))
    # THEN the team is forecast, and alerted at once:
    #   month-to-date 6,000 + 10 x 1 h = 6,010; run-rate 10 + 55.04 = 65.04
    #   forecast 6,010 + 65.04 x 251 h = 6,010 + 16,325.04 = 22,335.04 >= 20,000
    #   (without the launch: 6,010 + 10 x 251 = 8,520, under: the launch takes it over)
    # and vision is not (1,002 + 57.04 x 251 = 15,319.04 < 30,000)
    assert verdict.outcome is Outcome.ALERTED
    [alert] = world.sent
    assert alert.kind is AlertKind.BUDGET_FORECAST and alert.project is None
    assert alert.alert_id == "budget-forecast/2026-11/team/research"
    assert alert.dedupe == ("team-budget/research/2026-11/20000.00/forecast-100",)
    assert alert.facts["team"] == "research" and alert.facts["projects"] == "llm, vision"
    assert alert.facts["month_to_date"] == "$6,010.00"
    assert alert.facts["forecast"] == "$22,335.04" and alert.facts["budget"] == "$20,000.00"
    assert alert.facts["run_rate"] == "$65.04/h" and alert.facts["launched_in"] == "vision"
    assert alert.facts["cause"] == f"p5.48xlarge {GPU_ID}"
    assert alert.title == (
        f"team research: a launch in vision takes the team over budget (p5.48xlarge {GPU_ID})"
    )
    assert alert.summary == (
        f"The launch of p5.48xlarge {GPU_ID} ($55.04/h) in project vision takes team "
        "research's forecast to $22,335.04, over its $20,000.00 team budget for 2026-11 "
        "(the team's projects: llm, vision)."
    )
    # to the team's owners (the last scan's) and the launching project's
    assert alert.owners == ("lead@example.com", "vision@example.com")
    # WHEN the same event is delivered again
    again = world.launch(gpu(costguard_project="vision"))
    # THEN nothing more: one alert per team, budget and month
    assert again.outcome is Outcome.QUIET and len(world.sent) == 1


def test_the_team_alert_reads_as_a_person_needs_it_in_email_and_slack() -> None:
    # GIVEN the launch of the first test
    world = World(research())
    world.launch(gpu(costguard_project="vision"))
    [alert] = world.sent
    # WHEN it is rendered for e-mail and for Slack
    text = email_text(alert)
    slack = str(slack_blocks(MachineAlert.model_validate(machine_json(alert))))
    # THEN both name the team, its projects, the budget, the forecast and the launch
    for rendered in (text, slack):
        for needed in (
            "team research",
            "llm, vision",
            "$20,000.00",
            "$22,335.04",
            f"p5.48xlarge {GPU_ID}",
            "project vision",
        ):
            assert needed in rendered, (needed, rendered)
    assert "team: research" in text and "projects: llm, vision" in text
    assert "Project:" not in text  # a team's alert has no project line
    assert "raise the team budget" in text
    assert f"If p5.48xlarge {GPU_ID} is not needed, stop it" in text
    assert email_subject(alert).startswith(
        "[CostGuard WARNING] team research: a launch in vision takes the team over budget"
    )


def test_the_next_scan_does_not_send_the_team_forecast_the_launch_sent() -> None:
    # GIVEN a real scan of team research: llm's p4d and vision's g5, both up for two
    # hours, with a $10,000 team budget tagged on vision's g5
    world = World()
    since = MIDDAY - timedelta(hours=2)
    world.fleet += [
        replace(
            gpu(since, "i-000000000000000aa", costguard_project="llm", costguard_team="research"),
            instance_type="p4d.24xlarge",
        ),
        replace(
            gpu(
                since,
                "i-000000000000000bb",
                costguard_project="vision",
                costguard_team="research",
                costguard_team_budget="10000",
            ),
            instance_type="g5.xlarge",
        ),
    ]
    # (p4d $21.957642/h + g5 $1.006/h = $22.963642/h: 2 h spent, 45.927284, plus the 252 h
    # left, 5,786.84: under $10,000, nothing is said about the team)
    assert forecasts(world.scan(MIDDAY)) == []
    # THEN the scan left the team's sums, budget and projects for the launch check
    [team] = decode_team_figures(world.ledger.get_state(ACCOUNT, FIGURES_STATE)[0]).values()
    assert team.projects == ("llm", "vision") and team.budget == Decimal(10000)
    assert team.budget_source == "tag" and team.run_rate == Decimal("22.963642")
    assert team.month_to_date == Decimal("45.927284")
    # WHEN a p5 of vision starts an hour later: 45.927284 + 22.963642 = 68.890926 spent;
    # (22.963642 + 55.04) x 251 h = 19,578.914142 more: 19,647.81, past $10,000
    world.launch(gpu(costguard_project="vision"))
    [alert] = forecasts(world.sent)
    assert alert.facts["team"] == "research" and alert.facts["launched_in"] == "vision"
    assert alert.facts["month_to_date"] == "$68.89" and alert.facts["forecast"] == "$19,647.81"
    # and the next scan, which sees the p5 too, does not send the team's forecast again
    assert forecasts(world.scan(LAUNCH + timedelta(minutes=10))) == []


def test_a_project_without_a_team_is_judged_as_before() -> None:
    # GIVEN project vision with no team (no tag, no table row, none at the last scan):
    # $1,000 spent, $2/h, a $10,000 budget; and a team that happens to be called vision
    # too, with another project and a $1 budget
    figures = encode_figures(
        MIDDAY,
        {
            "vision": ProjectFigures(MIDDAY, Decimal(1000), Decimal(2), Decimal(10000)),
            "cv-lab": ProjectFigures(MIDDAY, Decimal(0), Decimal(0), team="vision"),
        },
        {"vision": TeamFigures(MIDDAY, ZERO, ZERO, Decimal(1), "tag", (), ("cv-lab",))},
    )
    world = World(figures)
    # WHEN a p5 of vision starts
    world.launch(gpu(costguard_project="vision"))
    # THEN the project's forecast alone: 1,002 + 57.04 x 251 = 15,319.04 >= 10,000
    [alert] = world.sent
    assert alert.project == "vision" and alert.alert_id == "budget-forecast/2026-11/vision"
    assert alert.dedupe == ("budget/vision/2026-11/10000.00/forecast-100",)
    assert alert.facts["forecast"] == "$15,319.04" and "team" not in alert.facts


def test_a_team_and_a_project_of_one_name_are_each_alerted_under_their_own_claims() -> None:
    # GIVEN project research in team research (same name): the project at $1,000 and
    # $2/h with a $10,000 budget; the team at $6,000 and $10/h with a $20,000 budget
    figures = encode_figures(
        MIDDAY,
        {
            "research": ProjectFigures(
                MIDDAY, Decimal(1000), Decimal(2), Decimal(10000), team="research"
            )
        },
        {
            "research": TeamFigures(
                MIDDAY, Decimal(6000), Decimal(10), Decimal(20000), "tag", (), ("research",)
            )
        },
    )
    world = World(figures)
    # WHEN a p5 of project research starts
    world.launch(gpu(costguard_project="research"))
    # THEN both: the project's (1,002 + 57.04 x 251 = 15,319.04) and the team's (22,335.04)
    project, team = sorted(world.sent, key=lambda a: a.project is None)
    assert project.project == "research" and project.facts["forecast"] == "$15,319.04"
    assert project.dedupe == ("budget/research/2026-11/10000.00/forecast-100",)
    assert team.project is None and team.facts["forecast"] == "$22,335.04"
    assert team.dedupe == ("team-budget/research/2026-11/20000.00/forecast-100",)


def test_the_central_teams_table_wins_over_team_budget_tags() -> None:
    # GIVEN team research at the last scan with a tagged $20,000 budget, and a launched p5
    # tagged costguard:team-budget=21000 (so the tags say $20,000: the lowest applies)
    tagged = gpu(costguard_project="vision", costguard_team_budget="21000")
    world = World(research())
    world.launch(tagged)
    [by_tag] = world.sent
    assert by_tag.facts["budget"] == "$20,000.00"
    # GIVEN instead the central teams table says $25,000: tags do not count
    # (the forecast, $22,335.04, is under it)
    world = World(research(), teams={"research": TeamConfig(budget=Decimal(25000))})
    assert world.launch(tagged).outcome is Outcome.QUIET and world.sent == []
    # GIVEN the table says $22,000 and the team's owners: that budget, told to them
    world = World(
        research(),
        teams={"research": TeamConfig(budget=Decimal(22000), owners=("head@example.com",))},
    )
    world.launch(tagged)
    [by_table] = world.sent
    assert by_table.facts["budget"] == "$22,000.00"
    assert by_table.dedupe == ("team-budget/research/2026-11/22000.00/forecast-100",)
    assert by_table.owners == ("head@example.com",)


def test_a_team_budget_the_launch_alone_carries_is_forecast() -> None:
    # GIVEN the last scan saw team research with no budget at all
    world = World(research(budget=None))
    # WHEN a p5 of vision starts tagged costguard:team-budget=21000
    world.launch(gpu(costguard_project="vision", costguard_team_budget="21000"))
    # THEN that tag is the team's budget: 22,335.04 >= 21,000
    [alert] = world.sent
    assert alert.facts["budget"] == "$21,000.00" and alert.facts["forecast"] == "$22,335.04"


def test_a_team_from_the_central_projects_table_with_no_scan_yet() -> None:
    # GIVEN no scan has run; the projects table puts vision in research, and the teams
    # table gives research $15,000
    world = World(
        projects={"vision": ProjectConfig(team="research")},
        teams={"research": TeamConfig(budget=Decimal(15000))},
    )
    # WHEN a p5 of vision starts: the team has only it, 55.04 x 251 h = 13,815.04 < 15,000
    assert world.launch(gpu(costguard_project="vision")).outcome is Outcome.QUIET
    # WHEN a second p5 starts: the first is not counted yet (no scan): 13,815.04 again
    second = gpu(instance="i-0a1b2c3d4e5f60790", costguard_project="vision")
    assert world.launch(second).outcome is Outcome.QUIET
    # GIVEN the table's budget is $13,000: over, alerted with the table's budget
    world = World(
        projects={"vision": ProjectConfig(team="research")},
        teams={"research": TeamConfig(budget=Decimal(13000))},
    )
    world.launch(gpu(costguard_project="vision"))
    [alert] = world.sent
    assert alert.facts["forecast"] == "$13,815.04" and alert.facts["projects"] == "vision"


def test_a_project_joining_a_team_by_the_launchs_tag_brings_its_spend() -> None:
    # GIVEN the last scan: vision had no team ($1,000, $2/h); team research had only llm
    # ($5,000, $8/h) and a $20,000 budget
    figures = encode_figures(
        MIDDAY,
        {
            "llm": ProjectFigures(MIDDAY, Decimal(5000), Decimal(8), team="research"),
            "vision": ProjectFigures(MIDDAY, Decimal(1000), Decimal(2)),
        },
        {
            "research": TeamFigures(
                MIDDAY, Decimal(5000), Decimal(8), Decimal(20000), "tag", (), ("llm",)
            )
        },
    )
    world = World(figures)
    # WHEN a p5 of vision starts tagged costguard:team=research
    world.launch(gpu(costguard_project="vision", costguard_team="research"))
    # THEN the team with vision in it: (5,008 + 1,002) + (8 + 2 + 55.04) x 251 = 22,335.04
    [alert] = world.sent
    assert alert.facts["forecast"] == "$22,335.04" and alert.facts["projects"] == "llm, vision"


def test_a_malformed_team_tag_on_the_launch_is_a_finding_and_the_scan_s_team_stands() -> None:
    # GIVEN team research as the last scan left it
    world = World(research())
    # WHEN a p5 of vision starts with an unreadable team and team budget
    verdict = world.launch(
        gpu(costguard_project="vision", costguard_team="\u200b", costguard_team_budget="lots")
    )
    # THEN a finding names the resource and each tag; neither is read
    key = f"{ACCOUNT}/us-east-1/ec2-instance/{GPU_ID}"
    found = {(f.code, f.resource) for f in verdict.findings}
    assert (FindingCode.MALFORMED_TEAM, key) in found
    assert (FindingCode.MALFORMED_BUDGET, key) in found
    messages = " ".join(f.message for f in verdict.findings)
    assert "costguard:team=" in messages and "costguard:team-budget='lots'" in messages
    # and the team the last scan knew is still forecast, at its $20,000 budget
    [alert] = world.sent
    assert alert.facts["team"] == "research" and alert.facts["budget"] == "$20,000.00"


def test_a_new_month_forecasts_the_team_from_zero_under_a_new_claim() -> None:
    # GIVEN the last scan on Nov 30 at 23:00: team research at $19,990 and $10/h, $20,000
    last = MIDDAY.replace(day=30, hour=23)
    world = World(research(at=last, mtd="19990"))
    # WHEN a p5 of vision starts at 23:30: 19,990 + 10 x 0.5 = 19,995;
    # 19,995 + 65.04 x 0.5 = 20,027.52 >= 20,000
    world.launch(gpu(last + timedelta(minutes=30), costguard_project="vision"))
    [november] = world.sent
    assert november.facts["forecast"] == "$20,027.52"
    assert november.dedupe == ("team-budget/research/2026-11/20000.00/forecast-100",)
    # WHEN another p5 starts at 00:30 on Dec 1 (no scan since): December starts from
    # zero, 10 x 0.5 = 5; 744 - 0.5 = 743.5 h left: 5 + 65.04 x 743.5 = 48,362.24
    december_launch = last + timedelta(minutes=90)
    world.launch(gpu(december_launch, "i-0a1b2c3d4e5f60790", costguard_project="vision"))
    # THEN December's forecast, under December's claim (vision's own budget, $30,000, is
    # forecast over too now: 1 + 57.04 x 743.5; that is the project's alert, not this one)
    [_, december] = [a for a in world.sent if a.project is None]
    assert december.facts["month_to_date"] == "$5.00"
    assert december.facts["forecast"] == "$48,362.24"
    assert december.dedupe == ("team-budget/research/2026-12/20000.00/forecast-100",)


def test_an_unreadable_team_row_is_skipped_and_the_launch_still_judged() -> None:
    # GIVEN a figures document whose team rows were damaged: a NaN, a list of owners that
    # is a string, a row that is not a row; and one good row
    doc = research()
    doc["teams"] = {
        "nan": {"mtd": "NaN", "rate": "1"},
        "odd": {"mtd": "1", "rate": "1", "owners": "lead@example.com"},
        "none": None,
        "research": doc["teams"]["research"],
    }
    # WHEN it is read
    # THEN only the good row is, with every figure as written
    assert decode_team_figures(doc) == {
        "research": TeamFigures(
            MIDDAY,
            Decimal(6000),
            Decimal(10),
            Decimal(20000),
            "tag",
            ("lead@example.com",),
            ("llm", "vision"),
        )
    }
    assert decode_team_figures({"at": "yesterday"}) == {}
    # and a launch of a project of the unreadable team is judged without it (no crash)
    doc["projects"]["odd-one"] = {"mtd": "0", "rate": "0", "team": "odd"}
    world = World(doc)
    assert world.launch(gpu(costguard_project="odd-one")).outcome is Outcome.QUIET


def test_a_team_already_forecast_over_but_not_yet_told_is_told_at_the_launch() -> None:
    # GIVEN team research already forecast over at the last scan ($19,000 spent, $10/h:
    # 19,000 + 10 x 252 h = 21,520 >= 20,000), whose alert did not go out (its publish failed)
    world = World(research(mtd="19000"))
    # WHEN a p5 of vision starts: 19,010 + 65.04 x 251 = 35,335.04
    world.launch(gpu(costguard_project="vision"))
    # THEN the team's forecast alert, which says the team was over before the launch
    [alert] = world.sent
    assert alert.title == "team research: forecast $35,335.04 exceeds the $20,000.00 budget"
    assert alert.summary == (
        "Team research's forecast is $35,335.04, over its $20,000.00 team budget for 2026-11; "
        f"p5.48xlarge {GPU_ID} ($55.04/h) of project vision just started (the team's "
        "projects: llm, vision)."
    )
