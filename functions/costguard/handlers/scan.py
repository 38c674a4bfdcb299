"""The scheduled scan Lambda: scan -> price -> ledger -> budget, one JSON summary back.

The schedule passes its scheduled time as ``{"time": ...}``; that time, not the
Lambda's clock, is "now", so a retried invocation accrues exactly the same interval.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from costguard import events
from costguard.domain.spend import month_split_cents
from costguard.events import EventTimeError, ScheduledEvent, scheduled_now
from costguard.services.scan_cycle import AfterScanError, ScanCycle, ScanOutcome
from costguard.telemetry import Figures as F
from costguard.telemetry import Metrics as M

if TYPE_CHECKING:
    from collections.abc import Mapping
    from decimal import Decimal

    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.services.scan import ScanReport
    from costguard.settings import Settings

__all__ = ["AfterScanError", "ScanOutcome", "handler", "process", "run", "summary"]

logger = Logger(service=M.SCAN_SERVICE)
metrics = Metrics(namespace=M.NAMESPACE, service=M.SCAN_SERVICE)


def _split_figures(total: Decimal, split: Mapping[str, Decimal]) -> dict[str, float]:
    """A log line's month-to-date by category, to the cent, adding up to its total."""
    shown = month_split_cents(total, split)
    return {
        F.MONTH_TO_DATE_COMPUTE: float(shown["compute"]),
        F.MONTH_TO_DATE_STORAGE: float(shown["storage"]),
        F.MONTH_TO_DATE_NOT_SPLIT: float(shown["not_split"]),
    }


def log_project_figures(report: ScanReport) -> None:
    """One structured log line per project: what the dashboard's Logs Insights widgets read."""
    for p in report.projects:
        if p.project is None or p.project in report.incomplete_projects:
            continue  # a failed read is not $0/h: no figure beats a false one
        logger.info(
            F.EVENT,
            extra={
                F.EVENT_KEY: F.EVENT,
                F.PROJECT: p.project,
                F.BUDGET: None if p.budget_usd is None else float(p.budget_usd),
                F.MONTH_TO_DATE: float(round(p.month_to_date_usd, 2)),
                **_split_figures(p.month_to_date_usd, p.month_to_date_by_category),
                F.FORECAST: float(round(p.forecast_month_usd, 2)),
                F.RUN_RATE: float(round(p.run_rate_usd_per_hour, 4)),
                F.STATUS: p.status.value,
                F.TEAM: p.team,
            },
        )


def log_team_figures(report: ScanReport) -> None:
    """One structured log line per team (the sums of its projects): the dashboard's team
    table reads it. A team with a project whose read failed logs nothing, as its project."""
    incomplete = report.incomplete_projects
    for t in report.teams:
        if incomplete.intersection(t.projects):
            continue
        logger.info(
            F.TEAM_EVENT,
            extra={
                F.EVENT_KEY: F.TEAM_EVENT,
                F.TEAM: t.team,
                F.BUDGET: None if t.budget_usd is None else float(t.budget_usd),
                F.MONTH_TO_DATE: float(round(t.month_to_date_usd, 2)),
                **_split_figures(t.month_to_date_usd, t.month_to_date_by_category),
                F.FORECAST: float(round(t.forecast_month_usd, 2)),
                F.RUN_RATE: float(round(t.run_rate_usd_per_hour, 4)),
                F.STATUS: t.status.value,
                "projects": list(t.projects),
            },
        )


def log_price_catalog(report: ScanReport) -> None:
    """One structured line a scan: which price catalog it used and whether it is stale
    (the dashboard's price-catalog widget reads it)."""
    from costguard.domain.findings import FindingCode

    if report.catalog is None:
        return
    # Stale-rate findings are addressed to ``price-catalog/<scanned region>``.
    stale = any(
        f.code is FindingCode.PRICE_CATALOG
        and f.resource.removeprefix("price-catalog/") in report.regions
        for f in report.findings
    )
    logger.info(
        F.CATALOG_EVENT,
        extra={
            F.EVENT_KEY: F.CATALOG_EVENT,
            F.CATALOG_SOURCE: report.catalog.source,
            F.CATALOG_VERSION: report.catalog.version,
            F.CATALOG_AS_OF: report.catalog.book.oldest_as_of(report.regions).isoformat(),
            F.CATALOG_AGE_DAYS: report.catalog.age_days(report.regions, report.now.date()),
            F.CATALOG_STALE: int(stale),
        },
    )


def emit_metrics(report: ScanReport) -> None:
    """The metrics alarms need: a heartbeat (the "scan did not run" alarm) and findings."""
    log_project_figures(report)
    log_team_figures(report)
    log_price_catalog(report)
    if os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() in {"true", "1"}:
        return
    metrics.add_metric(name=M.SCAN_COMPLETED, unit=MetricUnit.Count, value=1)
    metrics.add_metric(name=M.FINDINGS, unit=MetricUnit.Count, value=len(report.findings))


def summary(outcome: ScanOutcome) -> dict[str, Any]:
    report = outcome.report
    return {
        "alerts": [
            {
                "alert_id": a.alert_id,
                "kind": a.kind.value,
                "project": a.project,
                "severity": a.severity.value,
            }
            for a in outcome.alerts
        ],
        "scanned_at": report.now.isoformat(),
        "ledger": report.ledger.value,
        "resources": report.resource_count,
        "projects": [
            {
                "project": p.project,
                "status": p.status.value,
                "run_rate_usd_per_hour": float(round(p.run_rate_usd_per_hour, 4)),
                "month_to_date_usd": float(round(p.month_to_date_usd, 2)),
                "forecast_month_usd": float(round(p.forecast_month_usd, 2)),
                "team": p.team,
            }
            for p in report.projects
        ],
        "teams": [
            {
                "team": t.team,
                "status": t.status.value,
                "projects": list(t.projects),
                "month_to_date_usd": float(round(t.month_to_date_usd, 2)),
                "forecast_month_usd": float(round(t.forecast_month_usd, 2)),
            }
            for t in report.teams
        ],
        "findings": len(report.findings),
        "api_calls": sum(report.api_calls.values()),
        "duration_s": round(report.duration_s, 3),
    }


class ScanEvent(ScheduledEvent):
    """What the schedule sends the scan: ``{"time": <scheduled time>}``."""


def process(
    event: dict[str, Any], settings: Settings, session: Any, clock: datetime | None = None
) -> ScanOutcome:
    """Everything but the Lambda plumbing: the demo and the tests call this.

    Raises :class:`EventTimeError` before touching AWS when the event's time is not
    plausible; the handler logs it and reports the refusal.
    """
    from costguard.wiring.scan import scan_cycle

    now = scheduled_now(ScanEvent, event, clock or events.CLOCK())
    return run(now, scan_cycle(settings, session))


def run(now: datetime, cycle: ScanCycle) -> ScanOutcome:
    """The scan and its independent steps (built from clients or from fakes), logged; the
    invocation fails after the logs and metrics when a step after the commit failed."""
    outcome = cycle.run(now)
    report, failures = outcome.report, outcome.failures
    for r in outcome.billed:
        logger.info(
            "billed beside seen",
            extra={
                "project": r.project,
                "seen_usd": str(r.seen),
                "billed_usd": str(r.billed),
                "data_transfer_usd": str(r.data_transfer),
                "difference_usd": str(r.difference),
            },
        )
    for a in outcome.alerts:
        logger.info(
            "alert published",
            extra={"alert_id": a.alert_id, "kind": a.kind.value, "project": a.project},
        )
    for f in report.findings:
        logger.info(
            "finding", extra={"code": f.code.value, "resource": f.resource, "detail": f.message}
        )
    emit_metrics(report)
    logger.info(
        "scan complete",
        extra={
            "resources": report.resource_count,
            "findings": len(report.findings),
            "ledger": report.ledger.value,
            "api_calls": sum(report.api_calls.values()),
            "duration_s": round(report.duration_s, 3),
            "alerts": len(outcome.alerts),
            "failed_steps": [name for name, _ in failures],
        },
    )
    if failures:
        for name, error in failures:
            logger.error(
                "step failed after the scan",
                extra={"step": name, "error": f"{type(error).__name__}: {error}"},
            )
        raise AfterScanError(failures)
    return outcome


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    from costguard.settings import Settings

    settings = Settings.from_env(os.environ)
    try:
        outcome = process(event, settings, boto3.Session())
    except EventTimeError as exc:
        # A retry cannot make a bad time good: report, write nothing, do not retry.
        logger.error("scan refused: implausible event time", extra={"reason": str(exc)})
        return {"refused": str(exc), "ledger": "not-written"}
    return summary(outcome)
