"""The Organization hub's guards: the act consumer (one guard in one member account per
message), and the guard fan-out the hub's fan-out Lambda runs for a guard's schedule.

The act consumer's role (``costguard-hub-act``) may do one thing outside the hub:
assume ``costguard-member-act`` inside the Organization. What it may do in a member
account is that role's tag-conditioned policy, built from the same declarations as the
single-account guards' roles. Its claims, audit trail, sweep state and findings are
kept in the hub's ledger under the account's own scope; warnings go to the hub's topic.
``dryRun`` is the deployment's, as in one account.

The act queue is FIFO with one message group per account: one guard at a time in an
account. Its event source hands one message per invocation, so a run has the Lambda's
whole time (the stale-object sweep stops itself before the timeout and resumes).
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

from costguard.domain.org_act import Reach
from costguard.domain.org_roles import OrgRoles
from costguard.env import Env
from costguard.handlers.events import ScheduledEvent

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.adapters.assume import MemberClients
    from costguard.handlers.hub import OrgEnvironment
    from costguard.ports import TimeLeft
    from costguard.services.org_act import GuardFanout, GuardWork
    from costguard.settings import Settings

logger = Logger(service="costguard-org-act")

#: The session name of the act consumers in member accounts: their CloudTrail shows who
#: acted (the role assumed is ``OrgRoles.MEMBER_ACT``).
ACT_SESSION = "costguard-hub-act"


class RegionNotAllowedError(ValueError):
    """A guard run names only regions outside the deployment's allow-list."""


class GuardFanoutEvent(ScheduledEvent):
    """A guard's schedule, sent to the hub's fan-out: ``{"time": ..., "guard": name}``."""

    guard: str


def reaches() -> dict[str, Reach]:
    """Each shipped guard's reach (its declaration's)."""
    from costguard.actuators import SPECS

    return {name: spec.reach for name, spec in SPECS.items()}


def build_guard_fanout(
    settings: Settings, env: OrgEnvironment, session: Any, *, sqs: Any = None
) -> GuardFanout:
    from costguard.adapters.aws import RETRY_CONFIG
    from costguard.adapters.work_queue import SqsGuardQueue
    from costguard.handlers.hub import (
        OrgConfigError,
        allowed_regions,
        home_region,
        hub_parts,
        queue_region,
    )
    from costguard.services.org_act import GuardFanout, GuardFanoutSettings

    url = (settings.act_queue_url or "").strip()
    if not env.org_mode:
        raise OrgConfigError("single-account mode has no guard fan-out")
    if not url:
        raise OrgConfigError(f"{Env.ACT_QUEUE_URL} is not set: guard runs have nowhere to go")
    _hub_clients, _ledger, _book, store = hub_parts(settings, session)
    home = home_region(settings, session)
    client = sqs or session.client("sqs", region_name=queue_region(url, home), config=RETRY_CONFIG)
    return GuardFanout(
        store,
        SqsGuardQueue(client, url),
        GuardFanoutSettings(
            reaches=reaches(),
            accounts=None if env.discover else env.accounts,
            allow=allowed_regions(settings),
        ),
    )


def guard_fanout(event: dict[str, Any], settings: Settings, session: Any) -> dict[str, Any]:
    """The fan-out Lambda's answer to a guard's schedule (``handlers.org.fanout_handler``)."""
    from costguard.handlers import events
    from costguard.handlers.events import EventTimeError, parse_event
    from costguard.handlers.hub import OrgEnvironment

    try:
        parsed = parse_event(GuardFanoutEvent, event)
        tick = parsed.now(events.CLOCK())
    except EventTimeError as exc:
        logger.error("guard fan-out refused: implausible event", extra={"reason": str(exc)})
        return {"refused": str(exc), "sent": 0}
    env = OrgEnvironment.from_settings(settings, os.environ)
    summary = build_guard_fanout(settings, env, session).tick(parsed.guard, tick)
    out = summary.as_dict()
    logger.info("guard runs enqueued", extra=out)
    return out


# -- the act consumer ---------------------------------------------------------------------


def build_guard_work(
    settings: Settings, session: Any, *, members: MemberClients | None = None
) -> GuardWork:
    """The act consumer's graph: the hub's ledger, topic and catalog (the guard context),
    and each run's guard built on the member account's clients through its act role."""
    from costguard.actuators import SPECS
    from costguard.adapters.assume import AccountAccessError, MemberClients
    from costguard.adapters.aws import ClientFactory
    from costguard.domain.org import Slice
    from costguard.domain.org_act import GuardRun, guard_scope
    from costguard.handlers.hub import OrgEnvironment, allowed_regions, hub_parts
    from costguard.services.executor import ExecutorSettings
    from costguard.services.guard import Guard, GuardContext
    from costguard.services.org_act import GuardWork, UnknownGuardError, guarded_accounts
    from costguard.wiring import build_alert_service, guard_context

    hub = ClientFactory(session, account=settings.scope)
    context = guard_context(settings, hub)
    allow = allowed_regions(settings)
    env = OrgEnvironment.from_settings(settings, os.environ)
    _hub_clients, _ledger, _book, store = hub_parts(settings, session)
    listed: list[frozenset[str]] = []

    def guarded(account: str) -> bool:
        # The accounts the deployment guards now: the configured list, or the stored
        # listing (read once per invocation, and only when a run asks).
        if not env.discover:
            return account in (env.accounts or ())
        if not listed:
            listed.append(frozenset(guarded_accounts(store.listing())))
        return account in listed[0]

    enter = members or MemberClients(session, OrgRoles.MEMBER_ACT, session_name=ACT_SESSION)

    def build(run: GuardRun, clients: ClientFactory, ctx: GuardContext) -> Guard:
        spec = SPECS.get(run.guard)
        if spec is None:
            raise UnknownGuardError(f"unknown guard {run.guard!r} (known: {', '.join(SPECS)})")
        # Only the fan-out sends here, but a message is still input: a region outside the
        # deployment's allow-list is never acted in, whatever the message says.
        regions = tuple(r for r in run.regions if allow is None or r in allow)
        if not regions:
            raise RegionNotAllowedError(
                f"guard run of {run.guard} in {run.account} names no allowed region "
                f"({', '.join(run.regions)[:200]}); nothing was done"
            )
        narrowed = settings.model_copy(
            update={"scope": guard_scope(settings.scope, run.account), "regions": regions}
        )
        return spec.build(narrowed, clients, ctx)

    return GuardWork(
        lambda run: enter(Slice(run.account, run.regions[0])),
        build,
        context,
        ExecutorSettings(
            scope=settings.scope, dry_run=settings.dry_run, tag_keys=settings.tag_keys
        ),
        (AccountAccessError,),
        findings=context.ledger,
        alerts=build_alert_service(settings, hub, context.ledger),
        state=context.ledger,
        known=frozenset(SPECS),
        guarded=guarded,
    )


def consume(
    event: dict[str, Any], work: GuardWork, now: datetime, time_left: TimeLeft | None = None
) -> dict[str, Any]:
    """Each record is one guard run; a failed one (the account cannot be entered, an
    action failed) is reported back alone, retried by SQS and dead-lettered after the
    queue's ``maxReceiveCount``. Actions already taken stay taken: the retry's executor
    finds them claimed and done."""
    from costguard.adapters.work_queue import GuardItem
    from costguard.handlers.act import ActionsFailedError, failed_message, log_run

    def record_handler(record: SQSRecord) -> None:
        item = GuardItem.model_validate_json(record.body)
        where = {"account": item.account, "time": item.time.isoformat()}
        try:
            outcome = work.run(item.run(), now, time_left)
        except Exception as exc:
            logger.warning(
                "guard run failed",
                extra={
                    **where,
                    "guard": item.guard,
                    "error": f"{type(exc).__name__}: {exc}"[:500],
                    "receive_count": record.attributes.approximate_receive_count,
                },
            )
            raise
        if outcome.report is None or outcome.guard is None:
            logger.warning("guard run dropped", extra={**where, "why": outcome.dropped})
            return
        log_run(outcome.guard, outcome.report, **where, scope=outcome.scope)
        if outcome.report.failures:
            raise ActionsFailedError(f"account {item.account}: {failed_message(outcome.report)}")

    # A failed run is reported back (and retried by SQS, then dead-lettered, which
    # alarms), not raised: with one run per invocation every failure would otherwise be
    # a failed invocation, and the Errors alarm would fire on each retried throttle.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return dict(process_partial_response(event, record_handler, processor))


#: Member credentials kept by a warm act consumer (see MemberClients).
_MEMBERS: list[MemberClients] = []


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    from costguard.adapters.assume import MemberClients
    from costguard.handlers import events
    from costguard.handlers.act import LambdaTimeLeft
    from costguard.settings import Settings

    settings = Settings.from_env(os.environ)
    session = boto3.Session()
    if not _MEMBERS:
        _MEMBERS.append(MemberClients(session, OrgRoles.MEMBER_ACT, session_name=ACT_SESSION))
    work = build_guard_work(settings, session, members=_MEMBERS[0])
    return consume(event, work, events.CLOCK(), LambdaTimeLeft(context))
