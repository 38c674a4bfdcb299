"""The scan emits one EMF document per project with the ``Project`` dimension (the dashboard)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from costguard.adapters.catalog import load_catalog
from costguard.adapters.memory import InMemoryLedger
from costguard.domain.models import Resource, ResourceKind
from costguard.names import Metrics
from costguard.ports import Inventory
from costguard.services.scan import ScanService, ScanSettings
from tests.conftest import NOW
from tests.support.fakes import StaticInventory, StaticSpotPrices


def test_emits_budget_spend_forecast_and_run_rate_per_project(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from costguard.handlers.scan import emit_metrics

    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    res = Resource(
        id="i-1",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="g5.xlarge",
        launched_at=NOW,
        tags={"costguard:project": "Vision 計算", "costguard:budget": "500"},
    )
    report = ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory((res,))})],
        StaticSpotPrices({}),
        load_catalog(),
        InMemoryLedger(),
        ScanSettings(scope="a", regions=("us-east-1",)),
    ).run(NOW)
    capsys.readouterr()
    emit_metrics(report)
    docs = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")
    ]
    (project_doc,) = [d for d in docs if d.get(Metrics.DIMENSION_PROJECT)]
    assert project_doc[Metrics.DIMENSION_PROJECT] == "Vision 計算"
    directive = project_doc["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == Metrics.NAMESPACE
    assert directive["Dimensions"] == [[Metrics.DIMENSION_PROJECT]]
    names = {m["Name"] for m in directive["Metrics"]}
    assert names == {Metrics.RUN_RATE, Metrics.MONTH_TO_DATE, Metrics.FORECAST, Metrics.BUDGET}
    assert Decimal(
        str(
            project_doc[Metrics.RUN_RATE][0]
            if isinstance(project_doc[Metrics.RUN_RATE], list)
            else project_doc[Metrics.RUN_RATE]
        )
    ) == Decimal("1.006")
    assert project_doc[Metrics.BUDGET] in (500.0, [500.0])


def test_a_project_whose_read_failed_emits_no_figures(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from costguard.handlers.scan import emit_metrics
    from costguard.ports import AccessDeniedError

    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    p5 = Resource(
        id="i-p5",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="p5.48xlarge",
        launched_at=NOW.replace(hour=0),
        tags={"costguard:project": "llm"},
    )
    ledger = InMemoryLedger()
    settings = ScanSettings(scope="a", regions=("us-east-1",))
    ok = StaticInventory("ec2", {"us-east-1": Inventory((p5,))})
    ScanService([ok], StaticSpotPrices({}), load_catalog(), ledger, settings).run(NOW)
    # GIVEN the next scan cannot read EC2 (AccessDenied) while the p5 still runs
    denied = AccessDeniedError("ec2", "us-east-1", "DescribeInstances", "AccessDenied", "no")
    broken = StaticInventory("ec2", {}, failing={"us-east-1": denied})
    report = ScanService([broken], StaticSpotPrices({}), load_catalog(), ledger, settings).run(
        NOW.replace(minute=15)
    )
    assert report.incomplete_projects == frozenset({"llm"})
    assert "llm" in {p.project for p in report.projects}  # it has month-to-date spend
    capsys.readouterr()
    emit_metrics(report)
    # THEN no $0/h run-rate is published for llm (the dashboard would show a false drop)
    docs = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")
    ]
    assert not [d for d in docs if d.get(Metrics.DIMENSION_PROJECT) == "llm"]
