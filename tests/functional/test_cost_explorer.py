"""Cost Explorer (Stubber; moto lacks anomalies): reconciliation and forwarding, rate-limited."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import boto3
from botocore.stub import Stubber

from costguard.adapters.cost_explorer import CostExplorer
from costguard.adapters.memory import InMemoryLedger
from costguard.domain.alerts import AlertKind
from costguard.domain.spend import Increment
from costguard.ports import ScanCommit
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.cost_explorer import CostExplorerService
from tests.support.clock import MIDDAY
from tests.support.fakes import RecordingNotifier


def usage(groups: dict[tuple[str, str], str], token: str | None = None) -> dict[str, Any]:
    """Cost Explorer's answer grouped by (tag value, usage type)."""
    return {
        "ResultsByTime": [
            {
                "TimePeriod": {"Start": "2026-11-01", "End": "2026-11-21"},
                "Total": {},
                "Groups": [
                    {
                        "Keys": [tag, usage_type],
                        "Metrics": {"UnblendedCost": {"Amount": v, "Unit": "USD"}},
                    }
                    for (tag, usage_type), v in groups.items()
                ],
                "Estimated": True,
            }
        ],
        "DimensionValueAttributes": [],
        **({"NextPageToken": token} if token else {}),
    }


ANOMALY = {
    "AnomalyId": "a-123",
    "AnomalyStartDate": "2026-11-18",
    "DimensionValue": "Amazon Elastic Compute Cloud - Compute",
    "RootCauses": [
        {
            "Service": "Amazon Elastic Compute Cloud - Compute",
            "Region": "us-east-1",
            "UsageType": "BoxUsage:p5.48xlarge",
        }
    ],
    "AnomalyScore": {"MaxScore": 0.9, "CurrentScore": 0.8},
    "Impact": {"MaxImpact": 900.0, "TotalImpact": 2400.0},
    "MonitorArn": "arn:aws:ce::123456789012:anomalymonitor/abc",
}


def test_cost_by_tag_reads_project_and_untagged_groups_with_their_data_transfer() -> None:
    # GIVEN Cost Explorer's month grouped by project tag and usage type, over two pages
    client = boto3.client("ce", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_response(
            "get_cost_and_usage",
            usage(
                {
                    ("costguard:project$llm", "USE1-BoxUsage:p5.48xlarge"): "10000.00",
                    ("costguard:project$llm", "USE1-DataTransfer-Out-Bytes"): "420.25",
                    ("costguard:project$", "USE1-BoxUsage:g5.xlarge"): "88.10",
                },
                token="next",
            ),
        )
        stub.add_response(
            "get_cost_and_usage",
            usage({("costguard:project$llm", "USE1-USW2-AWS-Out-Bytes"): "80.00"}),
            {
                "TimePeriod": {"Start": "2026-11-01", "End": "2026-11-21"},
                "Granularity": "MONTHLY",
                "Metrics": ["UnblendedCost"],
                "GroupBy": [
                    {"Type": "TAG", "Key": "costguard:project"},
                    {"Type": "DIMENSION", "Key": "USAGE_TYPE"},
                ],
                "NextPageToken": "next",
            },
        )
        # WHEN it is read
        totals = CostExplorer(client).cost_by_tag(
            date(2026, 11, 1), date(2026, 11, 21), "costguard:project"
        )
    # THEN each project's total, and of it the data transfer (internet and inter-region)
    assert totals == {
        "llm": (Decimal("10500.25"), Decimal("500.25")),
        None: (Decimal("88.10"), Decimal(0)),
    }


def test_reconciliation_is_rate_limited_to_one_call_per_window() -> None:
    ledger = InMemoryLedger()
    ledger.commit(
        ScanCommit(
            "acct", None, MIDDAY, {("llm", "2026-11"): Increment(Decimal(10000), Decimal(0))}, []
        )
    )
    client = boto3.client("ce", region_name="us-east-1")
    service = CostExplorerService(ledger, CostExplorer(client), "acct", "costguard:project")
    with Stubber(client) as stub:
        stub.add_response(
            "get_cost_and_usage",
            usage(
                {
                    ("costguard:project$llm", "USE1-BoxUsage:p5.48xlarge"): "10300.25",
                    ("costguard:project$llm", "USE1-DataTransfer-Out-Bytes"): "200.00",
                }
            ),
        )
        month = service.reconcile(MIDDAY)
        again = [service.reconcile(MIDDAY + timedelta(minutes=15 * n)) for n in range(1, 8)]
        stub.assert_no_pending_responses()
    assert month is not None
    (row,) = month.rows
    # THEN billed beside seen: $500.25 more billed, of it $200 data transfer and $300.25 other
    assert (row.project, row.seen, row.billed, row.difference) == (
        "llm",
        Decimal(10000),
        Decimal("10500.25"),
        Decimal("500.25"),
    )
    assert (row.data_transfer, row.other, row.not_seen) == (
        Decimal(200),
        Decimal("300.25"),
        Decimal("500.25"),
    )
    # AND it is kept in the ledger for the report
    from costguard.domain.billed import read_billed_month

    kept = read_billed_month(ledger.get_state("acct", "billed/2026-11")[0])
    assert kept == month
    assert again == [None] * 7  # the other scans of the 8-hour window cost nothing


def test_aws_cost_anomalies_are_forwarded_once() -> None:
    ledger = InMemoryLedger()
    client = boto3.client("ce", region_name="us-east-1")
    sent: list[Any] = []
    alerting = AlertService(ledger, RecordingNotifier(sent), AlertSettings(scope="acct"))
    with Stubber(client) as stub:
        stub.add_response(
            "get_anomalies",
            {
                "Anomalies": [
                    ANOMALY,
                    {
                        **ANOMALY,
                        "AnomalyId": "tiny",
                        "Impact": {"MaxImpact": 5.0, "TotalImpact": 5.0},
                    },
                ]
            },
        )
        stub.add_response("get_anomalies", {"Anomalies": [ANOMALY]})
        first = CostExplorerService(ledger, CostExplorer(client), "acct", "costguard:project")
        alerting.deliver(first.anomaly_alerts(MIDDAY))
        alerting.deliver(
            first.anomaly_alerts(MIDDAY + timedelta(hours=9))
        )  # next window: asked again, not re-sent
    (alert,) = sent
    assert alert.kind is AlertKind.AWS_COST_ANOMALY
    assert "$2,400.00" in alert.title
    assert "BoxUsage:p5.48xlarge" in alert.summary
