"""The actuator Lambda: one guard's policy through the executor. Its own role, never the scan's.

Each guard has its own Lambda (and role), bound to it by ``COSTGUARD_GUARD``; its
schedule invokes it with ``{"time": <scheduled time>, "guard": name}``.
``dryRun`` (the deployment's) turns every action into a report. The invocation fails
when any action failed, so that the retry and the dead-letter queue see it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from costguard import events
from costguard.env import Env
from costguard.events import EventTimeError, LambdaTimeLeft, ScheduledEvent, parse_event
from costguard.run_log import log_run, logger
from costguard.services.executor import ActionsFailedError, failed_message

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.adapters.sns import AnswerLinks
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
    answer_links: AnswerLinks | None = None,
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
    guard, context = build_guard(settings, session, parsed.guard, guards, answer_links)
    report = run_guard(guard, context, executor_settings(settings), wall, time_left)
    log_run(guard, report)
    if report.failures:
        raise ActionsFailedError(failed_message(report))
    return report


def admins_from(environ: Mapping[str, str]) -> frozenset[str]:
    """``COSTGUARD_ANSWER_ADMINS``: who may answer any warning besides its owners."""
    raw = environ.get(Env.ANSWER_ADMINS, "")
    return frozenset(a.strip() for a in raw.split(",") if a.strip())


def answer_links_from(environ: Mapping[str, str]) -> AnswerLinks | None:
    """The warnings' e-mailed answer links (with ``answers`` on: the link secret and the
    endpoint's address); a warning that goes out without them says why in the log."""
    from costguard.wiring.answer_links import email_answer_links

    def unlinked(why: str) -> None:
        logger.warning("warning sent without answer links", extra={"reason": why})

    return email_answer_links(environ, on_error=unlinked)


def take_answer(
    event: dict[str, Any],
    settings: Settings,
    session: Any,
    clock: datetime | None = None,
    *,
    guards: Mapping[str, GuardFactory] | None = None,
    time_left: TimeLeft | None = None,
    slack_origin: str | None = None,
    answer_links: AnswerLinks | None = None,
) -> dict[str, Any]:
    """An owner's answer to one of this guard's warnings (``{"answer": {...}}``, sent by the
    answer endpoint): taken with the guard's own actuators; "act now" runs the guard at once
    (whose new warnings carry their links, as a scheduled run's do).
    The warning's Slack message is then updated in place."""
    from costguard.domain.answers import Refusal, read_answer_event
    from costguard.services.answering import AnswerTaker, Taken, told
    from costguard.services.guard import run_guard
    from costguard.wiring.guards import build_guard, executor_settings

    request = read_answer_event(event)
    if isinstance(request, Refusal):
        logger.error("answer refused: malformed event", extra={"reason": request.reason})
        return {"refused": request.reason}
    wall = clock or events.CLOCK()
    guard, context = build_guard(settings, session, request.guard, guards, answer_links)
    executor = executor_settings(settings)
    taker = AnswerTaker(
        guard.name,
        guard.actuators,
        context.ledger,
        replace(executor, warning_tag=guard.warning_tag, opt_in_tags=guard.opt_in_tags),
        admins=admins_from(os.environ),
        answerable=guard.answerable,
    )
    taken = taker.take(request, wall)
    logger.info(
        "answer taken",
        extra={
            "guard": guard.name,
            "resource": request.resource,
            "answer": request.answer.value,
            "by": str(request.answerer),
            "outcome": taken.outcome.value,
            "detail": taken.detail,
        },
    )
    result: dict[str, Any] = {"answer": taken.outcome.value, "detail": taken.detail}
    if taken.run_guard:
        report = run_guard(guard, context, executor, wall, time_left)
        log_run(guard, report)
        result["run"] = summary(report)
        taken = replace(taken, detail=after_act_now(request.resource, report))
    url = request.response_url
    if url and not taken.repeat:
        from costguard.adapters.slack import (
            SLACK_WEBHOOK_ORIGIN,
            SlackDeliveryError,
            answer_in_place,
        )

        try:
            answer_in_place(
                url,
                told(request, taken, local_zone(os.environ)),
                origin=slack_origin or SLACK_WEBHOOK_ORIGIN,
                replace=not taken.private,
            )
        except SlackDeliveryError as exc:  # the answer stands; only the message is stale
            logger.warning("could not update the warning in Slack", extra={"error": str(exc)})
    if taken.outcome is Taken.REFUSED:
        result["refused"] = taken.detail
    return result


def after_act_now(resource: str, report: ExecutionReport) -> str:
    """What the guard's run did with the resource answered "act now", in words."""
    from costguard.domain.decisions import Step, done

    mine = [o for o in report.outcomes if o.decision.target.key == resource]
    for o in mine:
        if o.step is Step.ACTED:
            return f"{done(o.decision.action)} now"
    if not mine:
        return "nothing was done: the guard no longer finds it idle"
    o = mine[0]
    if o.step is Step.FAILED:
        # What failed (an exception, AWS's own text) is in the log and the audit, not in the
        # channel; the answer stands, so the guard's next run tries again.
        return (
            f"it could not be {done(o.decision.action)} now; CostGuard tries again at its next run"
        )
    # The outcome's own words ("another run is acting on it"), never its step's name.
    return f"nothing was done: {o.detail}" if o.detail else "nothing was done"


def local_zone(environ: Mapping[str, str]) -> Any:
    """``COSTGUARD_TIME_ZONE``: the zone answers are told in; None (UTC) when unset or unknown."""
    from costguard.domain.answers import Refusal, time_zone

    zone = time_zone(environ.get(Env.TIME_ZONE) or "UTC")
    return None if isinstance(zone, Refusal) else zone


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
    links = answer_links_from(os.environ)
    time_left = LambdaTimeLeft(context)
    if "answer" in event:
        return take_answer(
            event, settings, boto3.Session(), time_left=time_left, answer_links=links
        )
    try:
        report = process(event, settings, boto3.Session(), time_left=time_left, answer_links=links)
    except EventTimeError as exc:
        logger.error("guard run refused: implausible event", extra={"reason": str(exc)})
        return {"refused": str(exc)}
    return summary(report)
