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

from costguard import events
from costguard.events import EventTimeError, LambdaTimeLeft, ScheduledEvent, parse_event
from costguard.run_log import log_run, logger
from costguard.services.executor import ActionsFailedError, failed_message

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.guards import GuardFactory
    from costguard.ports import TimeLeft
    from costguard.services.executor import ExecutionReport
    from costguard.settings import Settings

__all__ = ["ActEvent", "ActionsFailedError", "handler", "process", "summary"]


class ActEvent(ScheduledEvent):
    #: Optional where the Lambda is bound to one guard (``COSTGUARD_GUARD``), as deployed.
    guard: str | None = None


def process(
    event: dict[str, Any],
    settings: Settings,
    session: Any,
    clock: datetime | None = None,
    *,
    guards: Mapping[str, GuardFactory] | None = None,
    time_left: TimeLeft | None = None,
) -> ExecutionReport:
    from costguard.services.guard import run_guard
    from costguard.wiring.guards import build_guard, executor_settings

    parsed = parse_event(ActEvent, event)
    wall = clock or events.CLOCK()
    # The event's time is checked like the scan's (an implausible one is refused), but a
    # guard acts in the present, which is the clock's: a retried invocation hours late
    # judges today's metrics and gives the owner the whole grace period from now (claims,
    # not the scheduled time, make reruns safe); an event time ahead of the clock (skew,
    # a hand-written event) never brings an action forward, not even by a minute.
    parsed.now(wall)
    guard, context = build_guard(settings, session, parsed.guard, guards)
    report = run_guard(guard, context, executor_settings(settings), wall, time_left)
    log_run(guard, report)
    if report.failures:
        raise ActionsFailedError(failed_message(report))
    return report


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
    """Each decision that led somewhere (warned, waiting, acted, would act, cleared...),
    in the one action vocabulary (:mod:`costguard.services.action_records`)."""
    from costguard.services.action_records import from_report

    return from_report(report)


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
