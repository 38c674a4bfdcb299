"""Cost Explorer: month-to-date by project tag (reconciliation) and Cost Anomaly Detection.

Every Cost Explorer request costs $0.01, so callers rate-limit through the ledger;
this adapter only translates. moto has no anomalies API: tested with Stubber.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from costguard.adapters.aws import reading, token_pages

if TYPE_CHECKING:
    from mypy_boto3_ce import CostExplorerClient


class CostExplorer:
    def __init__(self, client: CostExplorerClient) -> None:
        self._ce = client

    def cost_by_tag(self, start: date, end: date, tag_key: str) -> dict[str | None, Decimal]:
        """Unblended cost per value of ``tag_key`` over [start, end); None is untagged."""
        totals: dict[str | None, Decimal] = {}
        with reading("ce", "us-east-1", "GetCostAndUsage"):
            pages = list(
                token_pages(
                    self._ce.get_cost_and_usage,
                    TimePeriod={"Start": start.isoformat(), "End": end.isoformat()},
                    Granularity="MONTHLY",
                    Metrics=["UnblendedCost"],
                    GroupBy=[{"Type": "TAG", "Key": tag_key}],
                )
            )
        for page in pages:
            for result in page.get("ResultsByTime", []):
                for group in result.get("Groups", []):
                    key = group["Keys"][0]
                    value = key.split("$", 1)[1] if "$" in key else key
                    amount = Decimal(group["Metrics"]["UnblendedCost"]["Amount"])
                    project = value or None
                    totals[project] = totals.get(project, Decimal(0)) + amount
        return totals

    def anomalies(self, start: date, end: date) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        with reading("ce", "us-east-1", "GetAnomalies"):
            for page in self._ce.get_paginator("get_anomalies").paginate(
                DateInterval={"StartDate": start.isoformat(), "EndDate": end.isoformat()},
                PaginationConfig={"PageSize": 100},
            ):
                found.extend(dict(a) for a in page.get("Anomalies", []))
        return found
