"""The Organization hub's Lambdas: the fan-out (one tick: plan, enqueue, aggregate; or one
guard's schedule: a run per member account) and the queue consumer (one work item per
message, routed by kind, partial-batch failures).

Their graphs are built in :mod:`costguard.wiring.org`, which holds the hub's settings
(:class:`~costguard.wiring.org.HubSettings`) and the queues' contract.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)

from costguard import events
from costguard.adapters.work_queue import WorkItem
from costguard.domain.org import Slice
from costguard.events import EventTimeError, ScheduledEvent, parse_event, scheduled_now

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.adapters.assume import MemberClients
    from costguard.adapters.ec2 import InstanceTypeCache
    from costguard.services.fanout import OrgWork, WorkOutcome
    from costguard.services.org import SliceWork
    from costguard.settings import Settings

logger = Logger(service="costguard-org")
#: The guard fan-out's log (its lines are the act path's, as the act consumer's are).
guard_logger = Logger(service="costguard-org-act")

# -- the fan-out ------------------------------------------------------------------------------


class FanoutEvent(ScheduledEvent):
    """What the schedule sends the fan-out: ``{"time": <scheduled time>}`` (as the scan)."""


class GuardFanoutEvent(ScheduledEvent):
    """A guard's schedule, sent to the hub's fan-out: ``{"time": ..., "guard": name}``."""

    guard: str


@logger.inject_lambda_context
def fanout_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    from costguard.settings import Settings
    from costguard.wiring.org import HubSettings, build_fanout

    if isinstance(event, dict) and event.get("guard"):
        # A guard's schedule (Organization mode has no per-guard Lambdas): one run of
        # that guard per member account, on the act queue.
        return guard_fanout(event, Settings.from_env(os.environ), boto3.Session())
    try:
        tick = scheduled_now(FanoutEvent, event, events.CLOCK())
    except EventTimeError as exc:
        # A retry cannot make a bad time good: report, enqueue nothing, do not retry.
        logger.error("fan-out refused: implausible event time", extra={"reason": str(exc)})
        return {"refused": str(exc), "sent": 0}
    settings = Settings.from_env(os.environ)
    fanout = build_fanout(
        settings,
        HubSettings.from_settings(settings),
        boto3.Session(),
        log=lambda message, extra: logger.warning(message, extra=dict(extra)),
    )
    out = fanout.tick(tick).as_dict()
    logger.info("tick enqueued", extra=out)
    return out


def guard_fanout(event: dict[str, Any], settings: Settings, session: Any) -> dict[str, Any]:
    """The fan-out Lambda's answer to a guard's schedule."""
    from costguard.wiring.org import HubSettings, build_guard_fanout

    try:
        parsed = parse_event(GuardFanoutEvent, event)
        tick = parsed.now(events.CLOCK())
    except EventTimeError as exc:
        guard_logger.error("guard fan-out refused: implausible event", extra={"reason": str(exc)})
        return {"refused": str(exc), "sent": 0}
    env = HubSettings.from_settings(settings)
    out = build_guard_fanout(settings, env, session).tick(parsed.guard, tick).as_dict()
    guard_logger.info("guard runs enqueued", extra=out)
    return out


# -- the consumer -------------------------------------------------------------------------------


def consume(event: dict[str, Any], work: OrgWork | SliceWork, now: datetime) -> dict[str, Any]:
    """Process an SQS batch: each record is one work item; a failed one is reported back
    alone (``batchItemFailures``), retried by SQS and dead-lettered after the queue's
    ``maxReceiveCount``.

    Every record is run, whatever failed before it in the batch: the FIFO message groups
    cap each account's concurrency, they carry no order (each item is independent and
    exactly-once on its own). A FIFO processor that skips the rest of a failed group would
    hand back items it never ran, and each such delivery counts as a receive: one failing
    region would take its group's healthy regions to the dead-letter queue untried."""
    from costguard.services.fanout import OrgWork

    router = work if isinstance(work, OrgWork) else OrgWork(work)

    def record_handler(record: SQSRecord) -> None:
        item = WorkItem.model_validate_json(record.body)
        try:
            outcome = router.run(item.work(), now)
        except Exception as exc:
            logger.warning(
                "work item failed",
                extra={
                    "kind": item.kind,
                    "account": item.account,
                    "region": item.region,
                    "time": item.time.isoformat(),
                    "error": f"{type(exc).__name__}: {exc}"[:500],
                    "receive_count": record.attributes.approximate_receive_count,
                },
            )
            raise
        logger.info("work item done", extra=_outcome_log(outcome))

    processor = BatchProcessor(event_type=EventType.SQS)
    response: dict[str, Any] = dict(process_partial_response(event, record_handler, processor))
    return response


def _outcome_log(o: WorkOutcome) -> dict[str, Any]:
    w = o.work
    out: dict[str, Any] = {
        "kind": w.kind.value,
        "account": w.slice.account,
        "region": w.slice.region,
        "time": w.tick.isoformat(),
    }
    if o.scan is not None:
        out |= {
            "ledger": o.scan.ledger.value,
            "newly_done": o.scan.newly_done,
            "resources": o.scan.resources,
            "aggregated": o.scan.aggregated is not None,
            "state": o.state.value if o.state else None,
        }
    if o.probe is not None:
        out |= {
            "found": list(o.probe.answer.found),
            "denied": list(o.probe.answer.denied),
            "state": o.probe.state.value if o.probe.state else None,
        }
    if o.regions is not None:
        out |= {"regions": list(o.regions.regions), "stored": o.regions.stored}
    return out


#: Member credentials kept by a warm consumer, per role name (see MemberClients).
_MEMBERS: dict[str, MemberClients] = {}
#: Instance types described by a warm consumer (the same in every account of a region).
_TYPES: dict[str, InstanceTypeCache] = {}


@logger.inject_lambda_context
def consumer_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    from costguard.adapters.assume import MemberClients
    from costguard.adapters.ec2 import InstanceTypeCache
    from costguard.settings import Settings
    from costguard.wiring.org import HubSettings, build_org_work

    settings = Settings.from_env(os.environ)
    role = HubSettings.from_settings(settings).member_role
    session = boto3.Session()
    members = _MEMBERS.setdefault(role, MemberClients(session, role))
    types = _TYPES.setdefault("", InstanceTypeCache())
    work = build_org_work(settings, session, role_name=role, members=members, types=types)
    return consume(event, work, events.CLOCK())


# -- for the CLI --------------------------------------------------------------------------------


def parse_accounts(text: str) -> list[str]:
    """``111111111111,222222222222`` (spaces and repeats allowed) -> checked account ids."""
    out = []
    for part in text.replace(" ", ",").split(","):
        if part:
            Slice(part, "us-east-1")  # validates the account id
            out.append(part)
    return list(dict.fromkeys(out))
