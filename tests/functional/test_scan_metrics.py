"""The scan writes one structured log line per project (the dashboard's Logs Insights
widgets read it) and only the custom metrics that alarms need."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.models import Resource, ResourceKind
from costguard.ports import Inventory
from costguard.services.scan import ScanService, ScanSettings
from costguard.telemetry import Figures, Metrics
from tests.support.catalog import fixture_catalog
from tests.support.clock import MIDDAY
from tests.support.fakes import StaticInventory, StaticSpotPrices


def _lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.fixture
def log_lines(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """The scan handler's structured log, written to a buffer this test owns."""
    from aws_lambda_powertools import Logger

    from costguard.handlers import scan

    buffer = io.StringIO()
    monkeypatch.setattr(scan, "logger", Logger(service="figures-under-test", stream=buffer))
    return buffer


def test_logs_budget_spend_forecast_and_run_rate_per_project_and_two_alarm_metrics(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], log_lines: io.StringIO
) -> None:
    from costguard.handlers.scan import emit_metrics, metrics

    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    res = Resource(
        id="i-1",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="g5.xlarge",
        launched_at=MIDDAY,
        tags={"costguard:project": "Vision 計算", "costguard:budget": "500"},
    )
    report = ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory((res,))})],
        StaticSpotPrices({}),
        fixture_catalog(),
        InMemoryLedger(),
        ScanSettings(scope="a", regions=("us-east-1",)),
    ).run(MIDDAY)
    capsys.readouterr()
    emit_metrics(report)
    metrics.flush_metrics()
    lines = _lines(capsys.readouterr().out)
    (figures,) = [
        d for d in _lines(log_lines.getvalue()) if d.get(Figures.EVENT_KEY) == Figures.EVENT
    ]
    assert figures[Figures.PROJECT] == "Vision 計算"
    assert Decimal(str(figures[Figures.RUN_RATE])) == Decimal("1.006")
    assert figures[Figures.BUDGET] == 500.0
    assert figures[Figures.STATUS] == "ok"
    assert {Figures.MONTH_TO_DATE, Figures.FORECAST} <= set(figures)
    # THEN the only custom metrics are the alarm's heartbeat and the findings count
    emf = [d for d in lines if "_aws" in d]
    names = {m["Name"] for d in emf for m in d["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert names == {Metrics.SCAN_COMPLETED, Metrics.FINDINGS}


def test_a_project_whose_read_failed_logs_no_figures(
    monkeypatch: pytest.MonkeyPatch, log_lines: io.StringIO
) -> None:
    from costguard.handlers.scan import emit_metrics
    from costguard.ports import AccessDeniedError

    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    p5 = Resource(
        id="i-p5",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="p5.48xlarge",
        launched_at=MIDDAY.replace(hour=0),
        tags={"costguard:project": "llm"},
    )
    ledger = InMemoryLedger()
    settings = ScanSettings(scope="a", regions=("us-east-1",))
    ok = StaticInventory("ec2", {"us-east-1": Inventory((p5,))})
    ScanService([ok], StaticSpotPrices({}), fixture_catalog(), ledger, settings).run(MIDDAY)
    # GIVEN the next scan cannot read EC2 (AccessDenied) while the p5 still runs
    denied = AccessDeniedError("ec2", "us-east-1", "DescribeInstances", "AccessDenied", "no")
    broken = StaticInventory("ec2", {}, failing={"us-east-1": denied})
    report = ScanService([broken], StaticSpotPrices({}), fixture_catalog(), ledger, settings).run(
        MIDDAY.replace(minute=15)
    )
    assert report.incomplete_projects == frozenset({"llm"})
    assert "llm" in {p.project for p in report.projects}  # it has month-to-date spend
    emit_metrics(report)
    # THEN no $0/h figure is logged for llm (the dashboard would show a false drop)
    assert not [d for d in _lines(log_lines.getvalue()) if d.get(Figures.PROJECT) == "llm"]
