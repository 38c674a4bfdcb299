"""Cost Explorer: month-to-date by project tag and usage type (what AWS billed beside what
the scan saw) and Cost Anomaly Detection.

Every Cost Explorer request costs $0.01, so callers rate-limit through the ledger;
this adapter only translates. moto has no anomalies API: tested with Stubber.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from costguard.adapters.aws import reading, token_pages
from costguard.domain.billed import is_data_transfer
from costguard.domain.tags import parse_project
from costguard.ports import SourceError

if TYPE_CHECKING:
    from mypy_boto3_ce import CostExplorerClient


def _amount(metric: Any) -> Decimal:
    """A group's amount, a finite number or a :class:`SourceError`: a NaN kept in the
    month's billed document would fail every report of the month, and a guess at "12,50"
    would misstate the bill."""
    raw = metric.get("Amount")
    try:
        amount = Decimal(str(raw)) if raw is not None else None
    except InvalidOperation:
        amount = None
    if amount is None or not amount.is_finite():
        raise SourceError(
            "ce", "us-east-1", "GetCostAndUsage", "UnparseableAmount", f"amount {raw!r}"
        )
    return amount


class CostExplorer:
    def __init__(self, client: CostExplorerClient) -> None:
        self._ce = client

    def cost_by_tag(
        self, start: date, end: date, tag_key: str
    ) -> dict[str | None, tuple[Decimal, Decimal]]:
        """Unblended cost per value of ``tag_key`` over [start, end), and of it the data
        transfer (by usage type): one request a page, grouped by tag and usage type. None is
        untagged."""
        totals: dict[str | None, tuple[Decimal, Decimal]] = {}
        with reading("ce", "us-east-1", "GetCostAndUsage"):
            pages = list(
                token_pages(
                    self._ce.get_cost_and_usage,
                    TimePeriod={"Start": start.isoformat(), "End": end.isoformat()},
                    Granularity="MONTHLY",
                    Metrics=["UnblendedCost"],
                    GroupBy=[
                        {"Type": "TAG", "Key": tag_key},
                        {"Type": "DIMENSION", "Key": "USAGE_TYPE"},
                    ],
                )
            )
        for page in pages:
            for result in page.get("ResultsByTime", []):
                for group in result.get("Groups", []):
                    keys = list(group.get("Keys") or [])
                    tag = keys[0] if keys else ""
                    usage_type = keys[1] if len(keys) > 1 else ""
                    value = tag.split("$", 1)[1] if "$" in tag else tag
                    amount = _amount(group.get("Metrics", {}).get("UnblendedCost", {}))
                    # The scan's name for the project (NFKC, spaces collapsed): `ｖｉｓｉｏｎ`
                    # and `vision ` are billed to `vision`; a value that is no project
                    # name (blank, invisible characters) is untagged, as the scan has it.
                    project = parse_project(value)[0] if value else None
                    total, moved = totals.get(project, (Decimal(0), Decimal(0)))
                    moved += amount if is_data_transfer(usage_type) else Decimal(0)
                    totals[project] = (total + amount, moved)
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
