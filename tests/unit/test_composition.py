"""Every handler's graph built from fakes: the use cases run with no AWS, no moto, no session.

The composition root takes typed clients or fakes; if a handler's use case needed a
boto3 session to run, these tests could not build it.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.decisions import Action, Decision, Step, Target
from costguard.domain.models import Resource, ResourceKind
from costguard.ports import Inventory
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.executor import Executor, ExecutorSettings
from costguard.services.scan import ScanService, ScanSettings
from tests.support.actuators import FakeResource, InMemoryActuator
from tests.support.catalog import fixture_catalog
from tests.support.clock import MIDDAY
from tests.support.fakes import RecordingNotifier, StaticInventory, StaticSpotPrices


def test_the_scan_handlers_graph_runs_on_fakes() -> None:
    from costguard.handlers.scan import run
    from costguard.services.scan_cycle import ScanCycle

    ledger = InMemoryLedger()
    sent: list[object] = []
    p5 = Resource(
        id="i-1",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        account="123456789012",
        instance_type="p5.48xlarge",
        launched_at=MIDDAY.replace(hour=0),
        tags={"costguard:project": "llm", "costguard:budget": "100"},
    )
    graph = ScanCycle(
        scan=ScanService(
            [StaticInventory("ec2", {"us-east-1": Inventory((p5,))})],
            StaticSpotPrices({}),
            fixture_catalog(),
            ledger,
            ScanSettings(scope="123456789012", regions=("us-east-1",), account="123456789012"),
        ),
        alerts=AlertService(ledger, RecordingNotifier(sent), AlertSettings(scope="123456789012")),
    )
    outcome = run(MIDDAY, graph)
    (llm,) = outcome.report.projects
    assert llm.month_to_date_usd == Decimal("55.04") * 12
    assert sorted(a.kind.value for a in outcome.alerts) == ["budget-forecast", "budget-threshold"]
    assert len(sent) == 2


def test_the_actuator_handlers_executor_runs_on_fakes() -> None:
    actuator = InMemoryActuator(
        "sagemaker-notebook", {"nb-1": FakeResource(tags={"costguard:project": "vision"})}
    )
    target = Target("us-east-1/sagemaker-notebook/nb-1", "sagemaker-notebook", "us-east-1", "nb-1")
    decision = Decision(Action.STOP_NOTEBOOK, target, "idle", MIDDAY)
    report = Executor(
        [actuator], InMemoryLedger(), RecordingNotifier([]), ExecutorSettings("s", dry_run=True)
    ).run([decision], MIDDAY)
    assert [o.step for o in report.outcomes] == [Step.WOULD_WARN]


def test_building_the_graph_creates_clients_lazily_and_typed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The composition root takes typed clients: building the graph makes no AWS call.
    import boto3

    from costguard.env import Env
    from costguard.settings import Settings
    from costguard.wiring import build_scan_cycle, clients_for

    calls: list[str] = []
    session = boto3.Session(region_name="us-east-1")
    session.events.register("before-call", lambda model, **_: calls.append(model.name))
    settings = Settings.from_env(
        {
            Env.REGIONS: "us-east-1",
            Env.TABLE_NAME: "ledger",
            Env.SCOPE: "123456789012",
            Env.TOPIC_ARN: "arn:aws:sns:us-east-1:123456789012:t",
            Env.COST_EXPLORER: "true",
        }
    )
    graph = build_scan_cycle(settings, clients_for(settings, session))
    assert graph.alerts is not None and graph.cost_explorer is not None
    assert calls == []
