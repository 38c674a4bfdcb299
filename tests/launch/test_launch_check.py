"""The on-launch check (service level, with fakes): one resource judged, the scan's claims
shared, redelivered and late events harmless."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.alerts import AlertKind
from costguard.domain.attribution import ProjectConfig
from costguard.domain.launch_policy import LaunchPolicy
from costguard.domain.models import Resource, ResourceKind
from costguard.ports import Described, Inventory
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.launch import (
    AccountNotWatched,
    LaunchCheck,
    LaunchSettings,
    Outcome,
)
from costguard.services.scan import ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.clock import MIDDAY
from tests.support.events import load_event
from tests.support.fakes import RecordingNotifier, StaticInventory, StaticSpotPrices

ACCOUNT = "123456789012"
LAUNCHED = MIDDAY
NOW = MIDDAY + timedelta(seconds=20)


def p5(instance: str = "i-0a1b2c3d4e5f60789", state: str = "running", **tags: str) -> Resource:
    return Resource(
        id=instance,
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        account=ACCOUNT,
        instance_type="p5.48xlarge",
        launched_at=LAUNCHED,
        state=state,
        tags={k.replace("_", ":", 1).replace("_", "-"): v for k, v in tags.items()},
    )


@dataclass
class FakeReader:
    """The account as the check reads it: what each id is now, and every call made."""

    found: dict[str, Described | None] = field(default_factory=dict)
    who: str | None = None
    calls: list[str] = field(default_factory=list)
    account: str = ACCOUNT

    def describe(self, kind: ResourceKind, region: str, resource_id: str) -> Described | None:
        self.calls.append(f"describe {resource_id}")
        return self.found.get(resource_id)

    def spot_prices(self, region: str, instance_types: Any, now: datetime) -> dict[Any, Decimal]:
        return {}

    def launcher(self, resource: Resource, now: datetime) -> str | None:
        self.calls.append(f"launcher {resource.id}")
        return self.who


class World:
    """One account: its resources, its ledger and alert topic, its scan and its launch check."""

    def __init__(self, *, projects: dict[str, ProjectConfig] | None = None, limit: int = 0) -> None:
        self.ledger = InMemoryLedger()
        self.sent: list[Any] = []
        self.notifier = RecordingNotifier(self.sent)
        self.reader = FakeReader()
        self.fleet: list[Resource] = []
        self.projects = projects or {}
        self.policy = LaunchPolicy(Decimal(limit))

    def alerts(self) -> AlertService:
        return AlertService(
            self.ledger,
            self.notifier,
            AlertSettings(scope=ACCOUNT, projects=self.projects, launch_policy=self.policy),
        )

    def launch(self, resource: Resource) -> None:
        self.fleet.append(resource)
        self.reader.found[resource.id] = Described((resource,))

    def check(self) -> LaunchCheck:
        def readers(account: str) -> FakeReader:
            if account != ACCOUNT:
                raise AccountNotWatched(f"account {account} is not this deployment's")
            return self.reader

        return LaunchCheck(
            readers,
            fixture_catalog(),
            self.ledger,
            self.alerts(),
            LaunchSettings(
                scope=ACCOUNT, account=ACCOUNT, projects=self.projects, policy=self.policy
            ),
        )

    def event(self, resource: Resource, **overrides: Any) -> dict[str, Any]:
        return load_event(
            "ec2-instance-state-running",
            resource_id=resource.id,
            time=overrides.pop("time", LAUNCHED.isoformat()),
            **overrides,
        )

    def on_launch(self, raw: Any, now: datetime = NOW) -> Any:
        verdicts, run = self.check().check(raw, now)
        run.raise_if_failed()
        return verdicts

    def scan(self, now: datetime) -> list[Any]:
        before = len(self.sent)
        report = ScanService(
            [StaticInventory("ec2", {"us-east-1": Inventory(tuple(self.fleet))})],
            StaticSpotPrices({}),
            fixture_catalog(),
            self.ledger,
            ScanSettings(
                scope=ACCOUNT, regions=("us-east-1",), projects=self.projects, account=ACCOUNT
            ),
        ).run(now)
        self.alerts().run(report, report.previous, now)
        return self.sent[before:]


def test_an_untagged_gpu_is_alerted_at_launch_and_not_again_by_the_next_scan() -> None:
    # GIVEN an untagged p5.48xlarge that just started, launched by someone CloudTrail names
    world = World()
    gpu = p5()
    world.launch(gpu)
    world.reader.who = "assumed-role/ml-admin/maria"
    # WHEN its running event arrives
    [verdict] = world.on_launch(world.event(gpu))
    # THEN unattributed-spend at once: the instance, its type, $/h and who launched it
    assert verdict.outcome is Outcome.ALERTED
    [alert] = world.sent
    assert alert.kind is AlertKind.UNATTRIBUTED
    assert gpu.id in alert.title and "p5.48xlarge" in alert.title and "$55.04/h" in alert.title
    assert alert.facts["launched_by"] == "assumed-role/ml-admin/maria"
    # WHEN the same event is delivered again, and the next scan runs 10 minutes later
    [again] = world.on_launch(world.event(gpu))
    later = world.scan(NOW + timedelta(minutes=10))
    # THEN nothing more about it: one alert per resource and cause
    assert again.outcome is Outcome.QUIET
    assert [a for a in later if a.kind is AlertKind.UNATTRIBUTED] == []
    assert len([a for a in world.sent if a.kind is AlertKind.UNATTRIBUTED]) == 1


def test_a_launch_above_the_projects_limit_is_alerted_once_by_event_or_scan() -> None:
    # GIVEN a project whose resources may cost at most $40/h (the central table)
    world = World(projects={"vision": ProjectConfig(max_usd_per_hour=Decimal(40))})
    gpu = p5(costguard_project="vision")
    world.launch(gpu)
    # WHEN a p5 ($55.04/h) of that project starts
    world.on_launch(world.event(gpu))
    # THEN launch-policy, naming the limit; and the next scan does not repeat it
    [alert] = world.sent
    assert alert.kind is AlertKind.LAUNCH_POLICY and alert.project == "vision"
    assert "$40.00/h" in alert.summary and "projects table" in alert.summary
    assert [a.kind for a in world.scan(NOW + timedelta(minutes=10))] == []


def test_the_scan_alerts_a_resource_outside_policy_whose_event_was_lost() -> None:
    # GIVEN a deployment-wide limit of $20/h, and a p5 whose launch event never came
    world = World(limit=20)
    world.fleet.append(p5(costguard_project="vision"))
    # WHEN the scan runs (twice)
    first = world.scan(NOW)
    second = world.scan(NOW + timedelta(minutes=15))
    # THEN the scan itself sends launch-policy, once
    assert [a.kind for a in first] == [AlertKind.LAUNCH_POLICY]
    assert "maxUsdPerHour" in first[0].summary
    assert second == []


def test_a_launch_that_takes_the_forecast_over_budget_names_the_launch() -> None:
    # GIVEN vision with a $10,000 budget and a g5 running (the last scan saw it)
    world = World()
    small = replace(
        p5("i-0000000000000aaaa", costguard_project="vision", costguard_budget="10000"),
        instance_type="g5.xlarge",
        launched_at=MIDDAY.replace(day=1, hour=0),
    )
    world.fleet.append(small)
    assert world.scan(MIDDAY - timedelta(minutes=5)) == []
    # WHEN a p5 of vision starts (10 days left: $55.04/h x ~252 h = ~$13.9k more)
    gpu = p5(costguard_project="vision")
    world.launch(gpu)
    world.on_launch(world.event(gpu))
    # THEN budget-forecast at once, the scan's own claim, naming this instance as the cause
    [alert] = world.sent
    assert alert.kind is AlertKind.BUDGET_FORECAST and gpu.id in alert.title
    assert alert.facts["cause"].endswith(gpu.id)
    # and the next scan, which now sees the p5 too, does not send the forecast again
    assert AlertKind.BUDGET_FORECAST not in [
        a.kind for a in world.scan(NOW + timedelta(minutes=10))
    ]


def test_late_gone_and_out_of_scope_events_do_no_harm() -> None:
    world = World()
    stopped = p5("i-0000000000000bbbb", state="stopped")
    world.reader.found[stopped.id] = Described((stopped,))
    cpu = "i-0000000000000cccc"
    world.reader.found[cpu] = Described(why="t3.micro carries no accelerator")
    verdicts = [
        # a `running` event for an instance stopped since (reordered delivery)
        *world.on_launch(world.event(stopped)),
        # an instance terminated before its event was read
        *world.on_launch(world.event(p5("i-0000000000000dddd"))),
        # a CPU instance (EC2's event does not say the type: filtered in code)
        *world.on_launch(world.event(replace(p5(cpu), instance_type="t3.micro"))),
    ]
    assert [v.outcome for v in verdicts] == [Outcome.IGNORED] * 3
    assert "stopped now" in verdicts[0].reason and "no longer exists" in verdicts[1].reason
    assert "no accelerator" in verdicts[2].reason
    assert world.sent == []


def test_an_event_from_another_account_is_refused_before_any_call() -> None:
    world = World()
    gpu = p5()
    world.launch(gpu)
    [verdict] = world.on_launch(world.event(gpu, account="999999999999"))
    assert verdict.outcome is Outcome.REFUSED and "999999999999" in verdict.reason
    assert world.reader.calls == [] and world.sent == []


def test_a_failed_publish_is_retried_by_the_event_and_sent_once() -> None:
    world = World()
    gpu = p5()
    world.launch(gpu)
    world.notifier.fail = True
    check = world.check()
    verdicts, run = check.check(world.event(gpu), NOW)
    # THEN the failure is reported (the Lambda raises: EventBridge's retry comes back)
    assert run.failed and verdicts[0].outcome is Outcome.FAILED and world.sent == []
    # WHEN the retry comes and publishing works again  THEN sent exactly once
    world.notifier.fail = False
    world.on_launch(world.event(gpu), NOW + timedelta(seconds=30))
    world.on_launch(world.event(gpu), NOW + timedelta(seconds=60))
    assert len(world.sent) == 1


class CountingLedger(InMemoryLedger):
    def __init__(self) -> None:
        super().__init__()
        self.claims: list[str] = []

    def claim(self, namespace: str, key: str, now: datetime, lease: timedelta, attrs: Any) -> bool:
        self.claims.append(key)
        return super().claim(namespace, key, now, lease, attrs)


def test_a_fleet_that_stays_outside_policy_costs_no_claim_writes_after_its_alert() -> None:
    # GIVEN 50 p5s above a deployment-wide $20/h limit, alerted by the first scan
    world = World(limit=20)
    world.ledger = CountingLedger()
    world.fleet = [p5(f"i-{n:017x}", costguard_project="vision") for n in range(50)]
    assert len(world.scan(NOW)) == 50
    # WHEN the next scan runs
    world.ledger.claims.clear()
    assert world.scan(NOW + timedelta(minutes=15)) == []
    # THEN no launch-policy claim is written again (one batched read said they were sent)
    assert [k for k in world.ledger.claims if k.startswith("launch-policy/")] == []
