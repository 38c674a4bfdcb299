"""A guard run's log: one line per finding and per action (what the dashboard reads),
then the run's counts. Written by the actuator Lambda and by the Organization's act
consumer alike, under the act path's service name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from costguard.telemetry import Figures as F

if TYPE_CHECKING:
    from costguard.services.executor import ExecutionReport
    from costguard.services.guard import Guard

logger = Logger(service="costguard-act")


def log_run(guard: Guard, report: ExecutionReport, **where: str) -> None:
    """One log line per finding and per action (the dashboard's), and the run's counts;
    ``where`` adds keys to each (the member account, in an Organization)."""
    # What the policy found wrong (a malformed idle-minutes tag, a notebook without the
    # heartbeat, Studio without idle shutdown): one log line each, for the dashboard.
    for finding in guard.findings():
        logger.warning(
            "guard finding", extra={"guard": guard.name, "finding": finding.as_dict(), **where}
        )
    for o in report.outcomes:
        t = o.decision.target
        logger.info(
            F.ACTION_EVENT,
            extra={
                F.EVENT_KEY: F.ACTION_EVENT,
                "guard": guard.name,
                F.PROJECT: t.project,
                "resource": t.key,
                # The one action vocabulary (docs/actions.md): what the resource is.
                "resource_kind": t.kind,
                "action": o.decision.action.value,
                F.OUTCOME: o.step.value,
                # What this outcome saved: a sweep pass's is the bytes it deleted, so
                # that the dashboard's sum counts each deletion once.
                F.SAVINGS: float(o.usd_per_month_saved),
                "dry_run": report.dry_run,
                "detail": o.detail,
                "error": o.error,
                **where,
            },
        )
    logger.info("guard run complete", extra={"guard": guard.name, "counts": report.counts, **where})
