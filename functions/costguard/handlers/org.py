"""The Organization hub's Lambdas: the fan-out (one tick: plan, enqueue, aggregate) and
the queue consumer (one work item per message, routed by kind, partial-batch failures).

The queue is SQS FIFO (:mod:`costguard.adapters.work_queue`): ``MessageGroupId`` is the
account (``account#n`` for a cap of n), so at most ``n`` of one account's items run at
once, whatever the consumers' concurrency; ``MessageDeduplicationId`` is
``time/account/region``, so a retried fan-out enqueues nothing twice within SQS's five
minutes, and the ledger and the directory refuse anything later.

Environment (names fixed with the CDK side; see ORG-CONTRACT): :data:`ORG_ACCOUNTS_ENV`,
:data:`ORG_ID_ENV`, :data:`MEMBER_ROLE_ENV`, :data:`PER_ACCOUNT_CAP_ENV`,
:data:`PROBE_HOURS_ENV`, :data:`SLICE_DEADLINE_ENV`, :data:`OPT_OUT_TAG_ENV`,
:data:`QUEUE_URL_ENV`; the regions setting (``COSTGUARD_REGIONS``) is the allow-list
discovered regions are intersected with.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)

from costguard.adapters.work_queue import SEND_BATCH, SqsWorkQueue, WorkItem, message_group
from costguard.domain.directory import WorkKind
from costguard.domain.org import Slice
from costguard.domain.org_roles import OrgRoles
from costguard.handlers.events import ScheduledEvent
from costguard.handlers.hub import (
    DISCOVER,
    MEMBER_ROLE_ENV,
    OPT_OUT_TAG_ENV,
    ORG_ACCOUNTS_ENV,
    ORG_ENV_VARS,
    ORG_ID_ENV,
    PER_ACCOUNT_CAP_ENV,
    PROBE_HOURS_ENV,
    QUEUE_URL_ENV,
    SLICE_DEADLINE_ENV,
    OrgConfigError,
    OrgEnvironment,
    allowed_regions,
    home_region,
    hub_parts,
    queue_region,
)

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.adapters.assume import MemberClients
    from costguard.adapters.aws import ClientFactory
    from costguard.adapters.ec2 import InstanceTypeCache
    from costguard.ports import Ledger
    from costguard.services.fanout import Fanout, OrgWork, WorkOutcome
    from costguard.services.org import Aggregation, SliceBook, SliceWork
    from costguard.settings import Settings

__all__ = [
    "DISCOVER",
    "MEMBER_ROLE_ENV",
    "OPT_OUT_TAG_ENV",
    "ORG_ACCOUNTS_ENV",
    "ORG_ENV_VARS",
    "ORG_ID_ENV",
    "PER_ACCOUNT_CAP_ENV",
    "PROBE_HOURS_ENV",
    "QUEUE_URL_ENV",
    "SEND_BATCH",
    "SLICE_DEADLINE_ENV",
    "OrgConfigError",
    "OrgEnvironment",
    "WorkItem",
    "allowed_regions",
    "build_fanout",
    "build_org_work",
    "build_slice_work",
    "consume",
    "consumer_handler",
    "fanout_handler",
    "message_group",
    "parse_accounts",
    "plan_and_enqueue",
    "slices_of",
]

logger = Logger(service="costguard-org")

# -- the fan-out ------------------------------------------------------------------------------


class FanoutEvent(ScheduledEvent):
    """What the schedule sends the fan-out: ``{"time": <scheduled time>}`` (as the scan)."""


def build_fanout(
    settings: Settings,
    env: OrgEnvironment,
    session: Any,
    *,
    sqs: Any = None,
    organizations: Any = None,
) -> Fanout:
    """The fan-out's graph: the directory and plans on the ledger table, the work queue,
    Organizations (only to discover), and the aggregation with its alerts."""
    from costguard.adapters.aws import RETRY_CONFIG
    from costguard.adapters.member import regions_read_from
    from costguard.adapters.organizations import OrganizationAccounts, organizations_region
    from costguard.domain.directory import TickPolicy
    from costguard.services.fanout import Fanout, FanoutSettings
    from costguard.wiring import build_alert_service

    if not env.org_mode:
        raise OrgConfigError(
            f"{ORG_ACCOUNTS_ENV} is empty: single-account mode has no fan-out (set it to "
            "'discover' or to account ids)"
        )
    if not env.queue_url:
        raise OrgConfigError(f"{QUEUE_URL_ENV} is not set: the fan-out has nowhere to send")
    hub, ledger, book, store = hub_parts(settings, session)
    home = home_region(settings, session)
    queue = SqsWorkQueue(
        sqs
        or session.client(
            "sqs", region_name=queue_region(env.queue_url, home), config=RETRY_CONFIG
        ),
        env.queue_url,
        env.per_account_cap,
    )
    source = None
    if env.discover:
        client = organizations or session.client(
            "organizations", region_name=organizations_region(home), config=RETRY_CONFIG
        )
        source = OrganizationAccounts(client)
    return Fanout(
        store,
        book,
        queue,
        FanoutSettings(
            scope=settings.scope,
            policy=TickPolicy(
                env.probe_interval, regions_read_from(home), allowed_regions(settings)
            ),
            deadline=env.deadline,
            accounts=None if env.discover else env.accounts,
            opt_out_tag=env.opt_out_tag,
        ),
        source=source,
        aggregation=_aggregation(settings, hub, ledger, book),
        findings=ledger,
        alerts=build_alert_service(settings, hub, ledger),
        log=lambda message, extra: logger.warning(message, extra=dict(extra)),
    )


@logger.inject_lambda_context
def fanout_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    from costguard.handlers import events
    from costguard.handlers.events import EventTimeError, scheduled_now
    from costguard.settings import Settings

    if isinstance(event, dict) and event.get("guard"):
        # A guard's schedule (Organization mode has no per-guard Lambdas): one run of
        # that guard per member account, on the act queue.
        from costguard.handlers.org_act import guard_fanout

        return guard_fanout(event, Settings.from_env(os.environ), boto3.Session())
    try:
        tick = scheduled_now(FanoutEvent, event, events.CLOCK())
    except EventTimeError as exc:
        # A retry cannot make a bad time good: report, enqueue nothing, do not retry.
        logger.error("fan-out refused: implausible event time", extra={"reason": str(exc)})
        return {"refused": str(exc), "sent": 0}
    settings = Settings.from_env(os.environ)
    env = OrgEnvironment.from_settings(settings, os.environ)
    summary = build_fanout(settings, env, boto3.Session()).tick(tick)
    out = summary.as_dict()
    logger.info("tick enqueued", extra=out)
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


def _aggregation(
    settings: Settings, hub: ClientFactory, ledger: Ledger, book: SliceBook
) -> Aggregation:
    from costguard.services.org import Aggregation, OrgSettings, alert_after
    from costguard.services.org_act import OrgSavings
    from costguard.wiring import build_alert_service

    alerts = build_alert_service(settings, hub, ledger)
    return Aggregation(
        book,
        ledger,
        OrgSettings(
            scope=settings.scope,
            projects=settings.project_table(),
            warning_pct=settings.warning_pct,
        ),
        after=alert_after(alerts) if alerts else None,
        # What the guards saved in member accounts, from their audit trails in this ledger.
        savings=OrgSavings(ledger, ledger, settings.scope),
    )


def _slice_work(
    settings: Settings, hub: ClientFactory, ledger: Ledger, book: SliceBook, members: Any
) -> SliceWork:
    from costguard.adapters.assume import AccountAccessError
    from costguard.config_spec import rate_minutes
    from costguard.domain.org import in_digest_window, slice_scope
    from costguard.services.org import SliceWork
    from costguard.wiring import BundledCatalog, build_scan_service, catalog_reader

    catalog, in_use = (catalog_reader(settings, hub) or BundledCatalog()).read()

    def scan_for(s: Slice) -> Any:
        slice_settings = settings.model_copy(
            update={"scope": slice_scope(settings.scope, s), "regions": (s.region,)}
        )
        return build_scan_service(
            slice_settings, members(s), ledger=ledger, catalog=catalog, catalog_in_use=in_use
        )

    def keeps_advice(tick: datetime) -> bool:
        # The slices of the digest hour's times keep their advice, so that the roll-up
        # sends each project's daily advice digest across accounts, as one account does.
        return settings.advice_alerts and in_digest_window(
            tick, settings.digest_hour_utc, timedelta(minutes=rate_minutes(settings.scan_rate))
        )

    return SliceWork(
        book,
        scan_for,
        _aggregation(settings, hub, ledger, book),
        (AccountAccessError,),
        keeps_advice=keeps_advice,
    )


def build_slice_work(
    settings: Settings, session: Any, *, role_name: str | None = None
) -> SliceWork:
    """The scan consumer's graph alone (no directory): each slice's clients assumed."""
    from costguard.adapters.assume import MemberClients

    hub, ledger, book, _store = hub_parts(settings, session)
    role = role_name or os.environ.get(MEMBER_ROLE_ENV) or OrgRoles.MEMBER_READ
    return _slice_work(settings, hub, ledger, book, MemberClients(session, role))


def build_org_work(
    settings: Settings,
    session: Any,
    *,
    role_name: str | None = None,
    members: MemberClients | None = None,
    types: InstanceTypeCache | None = None,
) -> OrgWork:
    """The consumer's graph: scans, probes and region reads, each in its member account
    through the member role (credentials kept per account, see MemberClients).

    Every probe shares one instance-type cache (``types``; a warm consumer passes its own):
    a type is the same in every account of a region, so it is described once, not once
    per account."""
    from costguard.adapters.assume import AccountAccessError, MemberClients
    from costguard.adapters.ec2 import InstanceTypeCache
    from costguard.adapters.member import MemberProbe, MemberRegions
    from costguard.services.fanout import OrgWork, ProbeWork, RegionsWork

    hub, ledger, book, store = hub_parts(settings, session)
    role = role_name or os.environ.get(MEMBER_ROLE_ENV) or OrgRoles.MEMBER_READ
    enter = members or MemberClients(session, role)
    shared = types if types is not None else InstanceTypeCache()
    errors = (AccountAccessError,)
    return OrgWork(
        _slice_work(settings, hub, ledger, book, enter),
        store,
        ProbeWork(
            store,
            lambda s: MemberProbe(enter(s), studio=settings.sagemaker_studio, types=shared),
            errors,
        ),
        RegionsWork(store, lambda s: MemberRegions(enter(s)), errors),
    )


#: Member credentials kept by a warm consumer, per role name (see MemberClients).
_MEMBERS: dict[str, MemberClients] = {}
#: Instance types described by a warm consumer (the same in every account of a region).
_TYPES: dict[str, InstanceTypeCache] = {}


@logger.inject_lambda_context
def consumer_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    from costguard.adapters.assume import MemberClients
    from costguard.adapters.ec2 import InstanceTypeCache
    from costguard.handlers import events
    from costguard.settings import Settings

    settings = Settings.from_env(os.environ)
    env = OrgEnvironment.from_settings(settings, os.environ)
    session = boto3.Session()
    members = _MEMBERS.setdefault(env.member_role, MemberClients(session, env.member_role))
    types = _TYPES.setdefault("", InstanceTypeCache())
    work = build_org_work(
        settings, session, role_name=env.member_role, members=members, types=types
    )
    return consume(event, work, events.CLOCK())


# -- helpers ------------------------------------------------------------------------------


def plan_and_enqueue(
    book: SliceBook,
    sqs: Any,
    queue_url: str,
    tick: datetime,
    slices: Sequence[Slice],
    deadline: timedelta,
    per_account_cap: int = 1,
) -> int:
    """The fan-out of a fixed list of slices (no directory): plan the time (once), then
    one scan message per slice (deduplicated)."""
    from costguard.domain.directory import Work

    book.plan(tick, slices, tick + deadline)
    queue = SqsWorkQueue(sqs, queue_url, per_account_cap)
    return queue.send([Work(tick, WorkKind.SCAN, s) for s in slices])


def slices_of(accounts: Iterable[str], regions: Iterable[str]) -> list[Slice]:
    return [Slice(a, r) for a in dict.fromkeys(accounts) for r in dict.fromkeys(regions)]


def parse_accounts(text: str) -> list[str]:
    """``111111111111,222222222222`` (spaces and repeats allowed) -> checked account ids."""
    out = []
    for part in text.replace(" ", ",").split(","):
        if part:
            Slice(part, "us-east-1")  # validates the account id
            out.append(part)
    return list(dict.fromkeys(out))
