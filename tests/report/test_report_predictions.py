"""The month report's cost per 1,000 predictions: per endpoint variant, now and per day, in
the HTML page, the text and the JSON; "no traffic" said, never $0."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.cli.output import render
from costguard.cli.report import KIND, prediction_table, report_data, report_table
from costguard.cli.report_html import render as render_html
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.predictions import prediction_window
from costguard.domain.report import Report
from costguard.ports import Inventory
from costguard.services.report import ReportRequest, build_report
from costguard.services.scan import ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.fakes import StaticEndpointMetrics, StaticInventory, StaticSpotPrices

NOW = datetime(2026, 11, 20, 12, 7, tzinfo=UTC)
CREATED = datetime(2026, 11, 1, tzinfo=UTC)


def endpoint(name: str) -> Resource:
    return Resource(
        id=f"{name}/primary",
        kind=ResourceKind.SAGEMAKER_ENDPOINT,
        region="us-east-1",
        instance_type="ml.g5.xlarge",
        launched_at=CREATED,
        config_since=CREATED,
        name=name,
        tags={"costguard:project": "serving"},
    )


def the_report() -> Report:
    chat, quiet = endpoint("chat"), endpoint("quiet")
    start, end = prediction_window(NOW)
    hours = {
        start + timedelta(hours=n): Decimal(14080)
        for n in range(int((end - start) / timedelta(hours=1)))
    }
    metrics = StaticEndpointMetrics({}, served={chat.key: hours, quiet.key: {}})
    ledger = InMemoryLedger()
    scan = ScanService(
        sources=[StaticInventory("sagemaker", {"us-east-1": Inventory((chat, quiet))})],
        spot_prices=StaticSpotPrices({}),
        catalog=fixture_catalog(),
        ledger=ledger,
        settings=ScanSettings(scope="acct", regions=("us-east-1",)),
        endpoint_metrics=metrics,
    ).run(NOW)
    return build_report(scan, ledger, ReportRequest(month="2026-11"), NOW)


def test_the_page_shows_each_variants_cost_per_1000_predictions_now_and_per_day() -> None:
    # GIVEN chat on ml.g5.xlarge ($1.408/h) serving 14,080 an hour, quiet serving nothing
    report = the_report()
    # WHEN the page is drawn
    page = render_html(report)
    # THEN it has the section, chat at $1.408 / 14,080 x 1,000 = $0.1000 (now and each day)
    section = page[page.index("<h2>Cost per 1,000 predictions</h2>") :]
    section = section[: section.index("</table>")]
    assert "chat/primary" in section and section.count("$0.1000") == 9
    # AND quiet says "no traffic", never $0
    assert "quiet/primary" in section and "no traffic" in section
    assert "$0.0000" not in section


def test_the_text_and_json_carry_the_same_figures() -> None:
    report = the_report()
    text = render(
        "table",
        kind=KIND,
        data={},
        table=report_table(report),
        generated_at=NOW,
        views=(report_table(report), prediction_table(report.prediction_costs)),
    )
    # (plain text prints no table titles: the columns say it)
    assert "$/1,000 (24 h)" in text and "$0.1000" in text and "no traffic" in text
    data = report_data(report)
    by_variant = {c["endpoint"]: c for c in data["cost_per_prediction"]}
    assert by_variant["chat"]["usd_per_1000_predictions"] == 0.1
    assert by_variant["quiet"]["usd_per_1000_predictions"] is None
    assert by_variant["quiet"]["status"] == "no traffic"
    assert len(by_variant["chat"]["days"]) == 8
