"""The scan report's per-project savings, from the audit trail the executor writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.decisions import Action, Decision, Step, Target
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.tags import Tags
from costguard.ports import Inventory
from costguard.services.executor import Executor, ExecutorSettings
from costguard.services.scan import ScanService, ScanSettings
from tests.support.actuators import FakeResource, InMemoryActuator
from tests.support.catalog import fixture_catalog
from tests.support.fakes import RecordingNotifier, StaticInventory, StaticSpotPrices

SCOPE = "123456789012"
RATE = Decimal("1.41")
GRACE = timedelta(hours=24)
NOV2 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


def idle(now: datetime) -> Decision:
    return Decision(
        action=Action.STOP_NOTEBOOK,
        target=Target(
            key="us-east-1/sagemaker-notebook/nb-1",
            kind="sagemaker-notebook",
            region="us-east-1",
            id="nb-1",
            account=SCOPE,
            project="vision",
        ),
        reason="GPU under 5% for 60 minutes",
        decided_at=now,
        usd_per_hour_saved=RATE,
        grace=GRACE,
    )


def test_a_notebook_stopped_twice_saves_its_rate_once() -> None:
    ledger = InMemoryLedger()
    notebooks = {"nb-1": FakeResource(tags={Tags.PROJECT: "vision"})}
    executor = Executor(
        [InMemoryActuator("sagemaker-notebook", notebooks)],
        ledger,
        RecordingNotifier([]),
        ExecutorSettings(scope=SCOPE, dry_run=False),
    )

    def run(now: datetime) -> list[Step]:
        return [o.step for o in executor.run([idle(now)], now).outcomes]

    # GIVEN an idle notebook warned on Nov 2 and stopped on Nov 3 ...
    assert run(NOV2) == [Step.WARNED]
    assert run(NOV2 + GRACE) == [Step.ACTED]
    # ... started again by its owner on Nov 4, left idle, warned, and stopped on Nov 5
    notebooks["nb-1"].state = "InService"
    assert run(NOV2 + 2 * GRACE) == [Step.WARNED]
    assert run(NOV2 + 3 * GRACE) == [Step.ACTED]
    # WHEN the scan reports the project on Nov 6
    now = NOV2 + 4 * GRACE
    running = Resource(
        id="i-1",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="g5.xlarge",
        launched_at=now - timedelta(hours=1),
        tags={Tags.PROJECT: "vision"},
    )
    report = ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory((running,))})],
        StaticSpotPrices({}),
        fixture_catalog(),
        ledger,
        ScanSettings(scope=SCOPE, regions=("us-east-1",)),
    ).run(now)
    (vision,) = report.projects
    # THEN one stopped notebook saves its own rate, not twice it
    assert vision.savings.actions == 2
    assert vision.savings.usd_per_hour == RATE
    # AND the estimate so far stays within its stated upper bound: the rate times the hours
    # since the first stop (it cannot have saved more than its whole rate every hour)
    assert vision.savings.month_to_date_usd_estimated <= RATE * 72
