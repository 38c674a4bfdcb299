"""The actuator Lambda: one guard's policy through the executor. Its own role, never the scan's.

Each guard has its own Lambda (and role), bound to it by ``COSTGUARD_GUARD``; its
schedule invokes it with ``{"time": <scheduled time>, "guard": name}``.
``dryRun`` (the deployment's) turns every action into a report. The invocation fails
when any action failed, so that the retry and the dead-letter queue see it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from costguard.handlers import events
from costguard.handlers.events import EventTimeError, ScheduledEvent, parse_event
from costguard.telemetry import Figures as F

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.ports import TimeLeft
    from costguard.services.executor import ExecutionReport
    from costguard.services.guard import Guard, GuardFactory
    from costguard.settings import Settings

logger = Logger(service="costguard-act")


class ActEvent(ScheduledEvent):
    #: Optional where the Lambda is bound to one guard (``COSTGUARD_GUARD``), as deployed.
    guard: str | None = None


class ActionsFailedError(RuntimeError):
    """Some actions failed (the others were applied); raised for the retry and the DLQ."""


def process(
    event: dict[str, Any],
    settings: Settings,
    session: Any,
    clock: datetime | None = None,
    *,
    guards: Mapping[str, GuardFactory] | None = None,
    time_left: TimeLeft | None = None,
) -> ExecutionReport:
    from costguard.actuators import SPECS
    from costguard.services.executor import ExecutorSettings
    from costguard.services.guard import run_guard
    from costguard.wiring import clients_for, guard_context

    parsed = parse_event(ActEvent, event)
    wall = clock or events.CLOCK()
    # The event's time is checked like the scan's (an implausible one is refused), but a
    # guard acts in the present, which is the clock's: a retried invocation hours late
    # judges today's metrics and gives the owner the whole grace period from now (claims,
    # not the scheduled time, make reruns safe); an event time ahead of the clock (skew,
    # a hand-written event) never brings an action forward, not even by a minute.
    parsed.now(wall)
    now = wall
    registry = {n: s.build for n, s in SPECS.items()} if guards is None else guards
    name = parsed.guard or settings.guard
    if name is None:
        raise ValueError("no guard named: the event has no 'guard' and the Lambda none bound")
    if settings.guard and name != settings.guard:
        # Each guard's Lambda holds only that guard's permissions: running another
        # guard's policy with them would fail halfway, so it is refused before any call.
        raise ValueError(f"this Lambda runs the {settings.guard!r} guard, not {name!r}")
    factory = registry.get(name)
    if factory is None:
        known = ", ".join(sorted(registry)) or "none yet"
        raise ValueError(f"unknown guard {name!r} (known: {known})")
    clients = clients_for(settings, session)
    context = guard_context(settings, clients)
    guard = factory(settings, clients, context)
    report = run_guard(
        guard,
        context,
        ExecutorSettings(
            scope=settings.scope, dry_run=settings.dry_run, tag_keys=settings.tag_keys
        ),
        now,
        time_left,
    )
    log_run(guard, report)
    if report.failures:
        raise ActionsFailedError(failed_message(report))
    return report


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


def failed_message(report: ExecutionReport) -> str:
    return f"{len(report.failures)} of {len(report.outcomes)} actions failed: " + "; ".join(
        f"{o.decision.target.key}: {o.error}" for o in report.failures[:10]
    )


class LambdaTimeLeft:
    """The Lambda's remaining time, less a margin for the executor's follow-ups and the
    ledger writes after the last page."""

    MARGIN_SECONDS = 60.0

    def __init__(self, context: LambdaContext) -> None:
        self._context = context

    def seconds_left(self) -> float:
        return self._context.get_remaining_time_in_millis() / 1000.0 - self.MARGIN_SECONDS


def summary(report: ExecutionReport) -> dict[str, Any]:
    from costguard.domain.decisions import Step

    return {
        "dry_run": report.dry_run,
        "counts": dict(report.counts),
        "usd_per_month_saved": float(report.saved_usd_per_month(Step.ACTED)),
        "usd_per_month_would_save": float(
            report.saved_usd_per_month(Step.WOULD_WARN, Step.WOULD_ACT)
        ),
        "actions": actions(report),
    }


def actions(report: ExecutionReport) -> list[dict[str, Any]]:
    """Each decision that led somewhere (warned, waiting, acted, would act, cleared...):
    what, where, whose, why, what it saves, and what happened."""
    return [
        {
            "kind": o.decision.target.kind,
            "resource": o.decision.target.key,
            "project": o.decision.target.project,
            "action": o.decision.action.value,
            "reason": o.decision.reason,
            "usd_per_hour_saved": float(o.usd_per_hour_saved),
            "dry_run": report.dry_run,
            "outcome": o.step.value,
            "detail": o.detail,
        }
        for o in report.outcomes
    ]


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    from costguard.settings import Settings

    settings = Settings.from_env(os.environ)
    try:
        report = process(event, settings, boto3.Session(), time_left=LambdaTimeLeft(context))
    except EventTimeError as exc:
        logger.error("guard run refused: implausible event", extra={"reason": str(exc)})
        return {"refused": str(exc)}
    return summary(report)
