"""The scan emits one EMF document per project with the ``Project`` dimension (the dashboard)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from costguard.adapters.catalog import load_catalog
from costguard.adapters.memory import InMemoryLedger, StaticInventory, StaticSpotPrices
from costguard.domain.models import Resource, ResourceKind
from costguard.names import Metrics
from costguard.ports import Inventory
from costguard.services.scan import ScanService, ScanSettings
from tests.conftest import NOW


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
