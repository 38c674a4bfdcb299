"""The on-launch Lambda: an EventBridge rule's launch event in, one resource judged, alerts
out within a minute (see :mod:`costguard.services.launch`).

EventBridge invokes it asynchronously: a failure to read the resource or to publish raises,
so Lambda retries it (the claims make a retry send each alert once) and, after its
retries, the event lands in the dead-letter queue. An event that is refused (malformed, too
old, from an account this deployment does not watch) or judged harmless is logged and
never retried: a retry cannot make it good.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from costguard import events
from costguard.telemetry import Metrics as M

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.services.launch import LaunchCheck, Verdict
    from costguard.settings import Settings

__all__ = ["LaunchCheckFailed", "handler", "process", "summary"]

logger = Logger(service=M.LAUNCH_SERVICE)


class LaunchCheckFailed(Exception):
    """The resource could not be read, or an alert not sent: retry the event."""


def summary(verdicts: list[Verdict]) -> dict[str, Any]:
    return {
        "launches": [
            {
                "resource": v.resource,
                "outcome": v.outcome.value,
                "reason": v.reason,
                "alerts": [
                    {
                        "alert_id": a.alert_id,
                        "kind": a.kind.value,
                        "severity": a.severity.value,
                        "title": a.title,
                    }
                    for a in v.alerts
                ],
                **({"launched_by": v.launched_by} if v.launched_by else {}),
            }
            for v in verdicts
        ]
    }


def run(check: LaunchCheck, event: Any, now: datetime) -> dict[str, Any]:
    """Judge the event, log every verdict, and raise when a retry could help."""
    from costguard.services.launch import Outcome

    verdicts, alerts = check.check(event, now)
    for v in verdicts:
        extra = {
            "outcome": v.outcome.value,
            "reason": v.reason,
            "resource": v.resource,
            "event_id": v.event.event_id if v.event else "",
            "alerts": [a.alert_id for a in v.alerts],
            "launched_by": v.launched_by or "",
        }
        if v.outcome is Outcome.REFUSED:
            logger.warning("launch event refused", extra=extra)
        elif v.outcome is Outcome.FAILED:
            logger.error("launch check failed", extra=extra)
        else:
            logger.info("launch checked", extra=extra)
        for f in v.findings:
            logger.info(
                "finding", extra={"code": f.code.value, "resource": f.resource, "detail": f.message}
            )
    failed = [v for v in verdicts if v.outcome is Outcome.FAILED]
    if alerts.failed or failed:
        reasons = [str(f) for f in alerts.failed] + [v.reason for v in failed]
        raise LaunchCheckFailed("; ".join(reasons)[:2000])
    return summary(verdicts)


def process(
    event: Any, settings: Settings, session: Any, clock: datetime | None = None
) -> dict[str, Any]:
    """Everything but the Lambda plumbing: the demo and the tests call this."""
    from costguard.wiring.launch import build_launch_check

    check = build_launch_check(settings, session)
    if check is None:
        logger.warning("launch event ignored: no alert topic is configured")
        return {"launches": [], "ignored": "no alert topic"}
    return run(check, event, clock or events.CLOCK())


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    from costguard.settings import Settings

    return process(event, Settings.from_env(os.environ), boto3.Session())
