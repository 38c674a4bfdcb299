"""The demo's Cost Explorer, and what is stubbed.

moto's Cost Explorer tracks no cost: ``GetCostAndUsage`` answers what a test queues through
``/moto-api/static/ce/cost-and-usage-results``. The demo queues the month's bill for its
projects, grouped by project tag and usage type as CostGuard asks: each project's compute,
and the data transfer and other costs that no scan sees. Those figures are the demo's own,
not computed from the fleet, so the report's "billed beside seen" shows a plausible
difference, not a measured one. moto has no ``GetAnomalies`` at all: the demo's session
answers it with no anomaly (a ``before-call`` hook), as an account with none would.
"""

from __future__ import annotations

import json
import urllib.request
from datetime import datetime
from typing import Any, ClassVar

from costguard.domain.calendar import month_start
from costguard_demo.server import DEMO_ACCOUNT

#: The month's bill by (project tag value, usage type), in USD: the accelerators as the
#: scan prices them (about), and what it cannot see.
DEMO_BILL: dict[tuple[str, str], str] = {
    ("llm-pretraining", "USE1-BoxUsage:p5.48xlarge"): "9874.40",
    ("llm-pretraining", "USE1-BoxUsage:p4d.24xlarge"): "1020.55",
    ("llm-pretraining", "USE1-DataTransfer-Out-Bytes"): "412.80",
    ("llm-pretraining", "USE1-USW2-AWS-Out-Bytes"): "96.12",
    ("llm-pretraining", "USE1-TimedStorage-ByteHrs"): "238.00",
    ("vision-research", "USE1-BoxUsage:g5.12xlarge"): "1380.10",
    ("vision-research", "USE1-NatGateway-Bytes"): "61.40",
    ("vision-research", "USE1-Requests-Tier1"): "18.75",
    ("nlp-team", "USW2-BoxUsage:g6e.2xlarge"): "430.55",
    ("nlp-team", "USW2-DataTransfer-Regional-Bytes"): "22.04",
    ("recsys-serving", "USE1-BoxUsage:ml.g5.2xlarge"): "641.87",
    ("", "USE1-BoxUsage:g5.xlarge"): "35.20",
}


def queue_bill(endpoint: str, now: datetime) -> None:
    """Queue the month's ``GetCostAndUsage`` answer on the embedded AWS."""
    groups = [
        {
            "Keys": [f"costguard:project${project}", usage_type],
            "Metrics": {"UnblendedCost": {"Amount": amount, "Unit": "USD"}},
        }
        for (project, usage_type), amount in DEMO_BILL.items()
    ]
    result = {
        "ResultsByTime": [
            {
                "TimePeriod": {
                    "Start": month_start(now).date().isoformat(),
                    "End": now.date().isoformat(),
                },
                "Total": {},
                "Groups": groups,
                "Estimated": True,
            }
        ],
        "DimensionValueAttributes": [],
    }
    request = urllib.request.Request(  # noqa: S310 - the embedded AWS, on loopback
        f"{endpoint}/moto-api/static/ce/cost-and-usage-results",
        data=json.dumps({"results": [result], "account_id": DEMO_ACCOUNT}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(request, timeout=10).close()  # noqa: S310


def no_anomalies(session: Any) -> None:
    """Answer ``GetAnomalies`` on ``session`` as an account without anomalies does."""

    class _Ok:
        status_code = 200
        headers: ClassVar[dict[str, str]] = {}

    session.events.register("before-call.ce.GetAnomalies", lambda **_: (_Ok(), {"Anomalies": []}))
