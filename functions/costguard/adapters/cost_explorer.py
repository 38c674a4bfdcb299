"""Cost Explorer: month-to-date by project tag (reconciliation) and Cost Anomaly Detection.

Every Cost Explorer request costs $0.01, so callers rate-limit through the ledger;
this adapter only translates. moto has no anomalies API: tested with Stubber.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from costguard.adapters.aws import reading


class CostExplorer:
    def __init__(self, client: Any) -> None:
        self._ce = client

    def cost_by_tag(self, start: date, end: date, tag_key: str) -> dict[str | None, Decimal]:
        """Unblended cost per value of ``tag_key`` over [start, end); None is untagged."""
        totals: dict[str | None, Decimal] = {}
        token: str | None = None
        while True:
            args: dict[str, Any] = {
                "TimePeriod": {"Start": start.isoformat(), "End": end.isoformat()},
                "Granularity": "MONTHLY",
                "Metrics": ["UnblendedCost"],
                "GroupBy": [{"Type": "TAG", "Key": tag_key}],
            }
            if token:
                args["NextPageToken"] = token
            with reading("ce", "us-east-1", "GetCostAndUsage"):
                page = self._ce.get_cost_and_usage(**args)
            for result in page.get("ResultsByTime", []):
                for group in result.get("Groups", []):
                    key = group["Keys"][0]
                    value = key.split("$", 1)[1] if "$" in key else key
                    amount = Decimal(group["Metrics"]["UnblendedCost"]["Amount"])
                    project = value or None
                    totals[project] = totals.get(project, Decimal(0)) + amount
            token = page.get("NextPageToken")
            if not token:
                return totals

    def anomalies(self, start: date, end: date) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            args: dict[str, Any] = {
                "DateInterval": {"StartDate": start.isoformat(), "EndDate": end.isoformat()},
                "MaxResults": 100,
            }
            if token:
                args["NextPageToken"] = token
            with reading("ce", "us-east-1", "GetAnomalies"):
                page = self._ce.get_anomalies(**args)
            found.extend(page.get("Anomalies", []))
            token = page.get("NextPageToken")
            if not token:
                return found
