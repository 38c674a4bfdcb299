"""The month report's size and render time: the demo's month, and 100 projects over
10,000 resources (``make bench``). Render time is building the model from a scan and the
ledger (:func:`~costguard.services.report.build_report`) plus drawing the page; the
scans that fill the ledger are setup, not measured."""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from typing import Any

from costguard.cli.report_html import render
from costguard.services.report import ReportRequest, build_report
from tests.support.report_month import DEMO_PROJECTS, Month, live_month, many_projects


def _measure(month: Month, label: str, resources: int, runs: int = 5) -> dict[str, Any]:
    request = ReportRequest(month=month.at.strftime("%Y-%m"))
    times, page = [], ""
    for _ in range(runs):
        started = time.perf_counter()
        page = render(build_report(month.scan, month.ledger, request, month.at))
        times.append(time.perf_counter() - started)
    return {
        "case": label,
        "projects": len(month.scan.projects),
        "resources": resources,
        "html_bytes": len(page.encode("utf-8")),
        "render_s_median": round(statistics.median(times), 4),
        "runs": runs,
    }


def measure() -> list[dict[str, Any]]:
    demo = live_month(DEMO_PROJECTS, every=timedelta(hours=6))
    large = live_month(many_projects(100, 100), every=timedelta(days=1))
    return [
        _measure(demo, "demo month (5 projects, scanned every 6 h)", demo.scan.resource_count),
        _measure(large, "100 projects x 100 instances (scanned daily)", large.scan.resource_count),
    ]


if __name__ == "__main__":
    import json

    print(json.dumps(measure(), indent=2))
