"""Organization mode's composition: the hub's settings, its parts (clients, ledger, plans,
directory), and the graphs of its three Lambdas (the fan-out, the scan consumer, the act
consumer), each built here from settings and a boto3 session.

The queue is SQS FIFO (:mod:`costguard.adapters.work_queue`): ``MessageGroupId`` is the
account (``account#n`` for a cap of n), so at most ``n`` of one account's items run at
once, whatever the consumers' concurrency; ``MessageDeduplicationId`` is
``time/account/region``, so a retried fan-out enqueues nothing twice within SQS's five
minutes, and the ledger and the directory refuse anything later.

The act consumer's role (``costguard-hub-act``) may do one thing outside the hub:
assume ``costguard-member-act`` inside the Organization. What it may do in a member
account is that role's tag-conditioned policy, built from the same declarations as the
single-account guards' roles. Its claims, audit trail, sweep state and findings are
kept in the hub's ledger under the account's own scope; warnings go to the hub's topic.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from pydantic import BaseModel, ConfigDict

from costguard.adapters.assume import AccountAccessError, MemberClients
from costguard.adapters.aws import RETRY_CONFIG, ClientFactory
from costguard.adapters.directory import DynamoDbDirectory, InMemoryDirectory
from costguard.adapters.ec2 import InstanceTypeCache
from costguard.adapters.member import MemberProbe, MemberRegions, regions_read_from
from costguard.adapters.organizations import OrganizationAccounts, organizations_region
from costguard.adapters.slices import DynamoDbSliceBook, InMemorySliceBook
from costguard.adapters.work_queue import SqsGuardQueue, SqsWorkQueue
from costguard.config_spec import ORG_DISCOVER, rate_minutes
from costguard.domain.directory import TickPolicy
from costguard.domain.org import Slice, in_digest_window, slice_scope
from costguard.domain.org_act import GuardRun, Reach, guard_scope
from costguard.domain.org_roles import OrgRoles
from costguard.env import Env
from costguard.guards import SPECS
from costguard.services.fanout import Fanout, FanoutSettings, OrgWork, ProbeWork, RegionsWork
from costguard.services.org import Aggregation, OrgSettings, SliceWork, alert_after
from costguard.services.org_act import (
    GuardFanout,
    GuardFanoutSettings,
    GuardWork,
    OrgSavings,
    UnknownGuardError,
    guarded_accounts,
)
from costguard.settings import Settings, SettingsError
from costguard.wiring.guards import executor_settings
from costguard.wiring.parts import (
    BundledCatalog,
    build_alert_service,
    build_ledger,
    catalog_reader,
    guard_context,
)
from costguard.wiring.scan import build_scan_service

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from costguard.ports import Ledger
    from costguard.services.guard import Guard, GuardContext
    from costguard.services.org import SliceBook

#: The session name of the act consumers in member accounts: their CloudTrail shows who
#: acted (the role assumed is ``OrgRoles.MEMBER_ACT``).
ACT_SESSION = "costguard-hub-act"


#: Where the fan-out's warnings go unless its caller says (the fan-out Lambda's log).
_FANOUT_LOG = Logger(service="costguard-org")


class OrgConfigError(ValueError):
    """An organization-mode variable is wrong; the message names it."""


class RegionNotAllowedError(ValueError):
    """A guard run names only regions outside the deployment's allow-list."""


def _default(name: str) -> Any:
    """A setting's default, as the settings declaration has it (never restated here)."""
    return Settings.model_fields[name].default


class HubSettings(BaseModel):
    """The Organization hub's settings, in the form its Lambdas use them: taken from
    :class:`~costguard.settings.Settings` (one reader of the environment, the spec's
    ranges and defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: None: single-account mode; () never; ("discover",) is :attr:`discover`.
    accounts: tuple[str, ...] | None = None
    discover: bool = False
    org_id: str | None = None
    member_role: str = _default("org_member_role")
    per_account_cap: int = _default("org_per_account_concurrency")
    probe_hours: Decimal = Decimal(_default("org_probe_hours"))
    slice_deadline_minutes: int = _default("org_slice_deadline_minutes")
    opt_out_tag: str = _default("org_opt_out_tag")
    queue_url: str | None = None

    @property
    def org_mode(self) -> bool:
        return self.discover or bool(self.accounts)

    @property
    def probe_interval(self) -> timedelta:
        return timedelta(seconds=int(self.probe_hours * 3600))

    @property
    def deadline(self) -> timedelta:
        return timedelta(minutes=self.slice_deadline_minutes)

    @classmethod
    def from_settings(cls, settings: Settings) -> HubSettings:
        accounts = settings.org_accounts
        discover = accounts == (ORG_DISCOVER,)
        return cls(
            accounts=None if discover or not accounts else accounts,
            discover=discover,
            org_id=settings.org_id or None,
            member_role=settings.org_member_role,
            per_account_cap=settings.org_per_account_concurrency,
            probe_hours=Decimal(settings.org_probe_hours),
            slice_deadline_minutes=settings.org_slice_deadline_minutes,
            opt_out_tag=settings.org_opt_out_tag,
            queue_url=(settings.queue_url or "").strip() or None,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> HubSettings:
        """Every problem at once, each naming its variable; empty means the default."""
        try:
            settings = Settings.from_env(environ)
        except SettingsError as exc:
            raise OrgConfigError(str(exc)) from exc
        return cls.from_settings(settings)


@dataclass(frozen=True)
class Hub:
    """What every hub Lambda keeps in the hub account: its clients, ledger, the tick
    plans (slice book) and the directory of accounts and regions."""

    settings: Settings
    session: Any
    clients: ClientFactory
    ledger: Ledger
    book: SliceBook
    directory: Any

    @classmethod
    def of(cls, settings: Settings, session: Any) -> Hub:
        """On the ledger table, or in memory without one."""
        clients = ClientFactory(session, account=settings.scope)
        ledger = build_ledger(settings, clients)
        if not settings.table_name:
            return cls(settings, session, clients, ledger, InMemorySliceBook(), InMemoryDirectory())
        ddb = clients.dynamodb(session.region_name or settings.regions[0])
        book = DynamoDbSliceBook(ddb, settings.table_name, settings.scope)
        directory = DynamoDbDirectory(ddb, settings.table_name, settings.scope)
        return cls(settings, session, clients, ledger, book, directory)

    @property
    def home(self) -> str:
        """Where the hub runs (its queue's region when the URL does not say)."""
        return str(
            self.session.region_name or os.environ.get("AWS_REGION") or self.settings.regions[0]
        )

    def queue(self, url: str, sqs: Any = None) -> Any:
        """The SQS client of the queue at ``url`` (in the queue's own region)."""
        return sqs or self.session.client(
            "sqs", region_name=queue_region(url, self.home), config=RETRY_CONFIG
        )

    def aggregation(self) -> Aggregation:
        """The roll-up of a tick's slices, with its alerts and the guards' savings."""
        settings = self.settings
        alerts = build_alert_service(settings, self.clients, self.ledger)
        return Aggregation(
            self.book,
            self.ledger,
            OrgSettings(
                scope=settings.scope,
                projects=settings.project_table(),
                teams=settings.team_table(),
                warning_pct=settings.warning_pct,
            ),
            after=alert_after(alerts) if alerts else None,
            # What the guards saved in member accounts, from their audit trails here.
            savings=OrgSavings(self.ledger, self.ledger, settings.scope),
        )


def allowed_regions(settings: Settings) -> frozenset[str] | None:
    """The allow-list an account's enabled regions are intersected with: ``regions``, or
    None (every region the account enabled) with ``orgRegions=enabled``."""
    return None if settings.org_regions == "enabled" else frozenset(settings.regions)


def queue_region(url: str, default: str) -> str:
    """``https://sqs.<region>.amazonaws.com/<account>/<name>``: the queue's own region."""
    match = re.match(r"https://sqs\.([a-z0-9-]+)\.", url)
    return match.group(1) if match else default


# -- the fan-out ----------------------------------------------------------------------------


def build_fanout(
    settings: Settings,
    env: HubSettings,
    session: Any,
    *,
    sqs: Any = None,
    organizations: Any = None,
    log: Callable[[str, Mapping[str, Any]], None] | None = None,
) -> Fanout:
    """The fan-out's graph: the directory and plans on the ledger table, the work queue,
    Organizations (only to discover), and the aggregation with its alerts."""
    if not env.org_mode:
        raise OrgConfigError(
            f"{Env.ORG_ACCOUNTS} is empty: single-account mode has no fan-out (set it to "
            "'discover' or to account ids)"
        )
    if not env.queue_url:
        raise OrgConfigError(f"{Env.QUEUE_URL} is not set: the fan-out has nowhere to send")
    hub = Hub.of(settings, session)
    source = None
    if env.discover:
        client = organizations or session.client(
            "organizations", region_name=organizations_region(hub.home), config=RETRY_CONFIG
        )
        source = OrganizationAccounts(client)
    return Fanout(
        hub.directory,
        hub.book,
        SqsWorkQueue(hub.queue(env.queue_url, sqs), env.queue_url, env.per_account_cap),
        FanoutSettings(
            scope=settings.scope,
            policy=TickPolicy(
                env.probe_interval, regions_read_from(hub.home), allowed_regions(settings)
            ),
            deadline=env.deadline,
            accounts=None if env.discover else env.accounts,
            opt_out_tag=env.opt_out_tag,
        ),
        source=source,
        aggregation=hub.aggregation(),
        findings=hub.ledger,
        alerts=build_alert_service(settings, hub.clients, hub.ledger),
        log=log or (lambda message, extra: _FANOUT_LOG.warning(message, extra=dict(extra))),
    )


def build_guard_fanout(
    settings: Settings, env: HubSettings, session: Any, *, sqs: Any = None
) -> GuardFanout:
    """A guard's schedule in an Organization: one run of that guard per member account,
    on the act queue."""
    url = (settings.act_queue_url or "").strip()
    if not env.org_mode:
        raise OrgConfigError("single-account mode has no guard fan-out")
    if not url:
        raise OrgConfigError(f"{Env.ACT_QUEUE_URL} is not set: guard runs have nowhere to go")
    hub = Hub.of(settings, session)
    return GuardFanout(
        hub.directory,
        SqsGuardQueue(hub.queue(url, sqs), url),
        GuardFanoutSettings(
            reaches=reaches(),
            accounts=None if env.discover else env.accounts,
            allow=allowed_regions(settings),
        ),
    )


def reaches() -> dict[str, Reach]:
    """Each shipped guard's reach (its declaration's)."""
    return {name: spec.reach for name, spec in SPECS.items()}


# -- the scan consumer ------------------------------------------------------------------------


def _slice_work(hub: Hub, members: Callable[[Slice], ClientFactory]) -> SliceWork:
    settings = hub.settings
    catalog, in_use = (catalog_reader(settings, hub.clients) or BundledCatalog()).read()

    def scan_for(s: Slice) -> Any:
        slice_settings = settings.model_copy(
            update={"scope": slice_scope(settings.scope, s), "regions": (s.region,)}
        )
        return build_scan_service(
            slice_settings, members(s), ledger=hub.ledger, catalog=catalog, catalog_in_use=in_use
        )

    def keeps_advice(tick: datetime) -> bool:
        # The slices of the digest hour's times keep their advice, so that the roll-up
        # sends each project's daily advice digest across accounts, as one account does.
        return settings.advice_alerts and in_digest_window(
            tick, settings.digest_hour_utc, timedelta(minutes=rate_minutes(settings.scan_rate))
        )

    return SliceWork(
        hub.book, scan_for, hub.aggregation(), (AccountAccessError,), keeps_advice=keeps_advice
    )


def _member_role(role_name: str | None) -> str:
    return role_name or os.environ.get(Env.MEMBER_ROLE) or OrgRoles.MEMBER_READ


def build_slice_work(
    settings: Settings, session: Any, *, role_name: str | None = None
) -> SliceWork:
    """The scan consumer's graph alone (no directory): each slice's clients assumed."""
    return _slice_work(Hub.of(settings, session), MemberClients(session, _member_role(role_name)))


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
    hub = Hub.of(settings, session)
    enter = members or MemberClients(session, _member_role(role_name))
    shared = types if types is not None else InstanceTypeCache()
    errors = (AccountAccessError,)
    return OrgWork(
        _slice_work(hub, enter),
        hub.directory,
        ProbeWork(
            hub.directory,
            lambda s: MemberProbe(enter(s), studio=settings.sagemaker_studio, types=shared),
            errors,
        ),
        RegionsWork(hub.directory, lambda s: MemberRegions(enter(s)), errors),
    )


# -- the act consumer -------------------------------------------------------------------------


def act_members(session: Any) -> MemberClients:
    """Member accounts entered through their act role, under the act consumer's name."""
    return MemberClients(session, OrgRoles.MEMBER_ACT, session_name=ACT_SESSION)


def build_guard_work(
    settings: Settings, session: Any, *, members: MemberClients | None = None
) -> GuardWork:
    """The act consumer's graph: the hub's ledger, topic and catalog (the guard context),
    and each run's guard built on the member account's clients through its act role."""
    hub = Hub.of(settings, session)
    context = guard_context(settings, hub.clients)
    allow = allowed_regions(settings)
    env = HubSettings.from_settings(settings)
    listed: list[frozenset[str]] = []

    def guarded(account: str) -> bool:
        # The accounts the deployment guards now: the configured list, or the stored
        # listing (read once per invocation, and only when a run asks).
        if not env.discover:
            return account in (env.accounts or ())
        if not listed:
            listed.append(frozenset(guarded_accounts(hub.directory.listing())))
        return account in listed[0]

    enter = members or act_members(session)

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
        executor_settings(settings),
        (AccountAccessError,),
        findings=context.ledger,
        alerts=build_alert_service(settings, hub.clients, context.ledger),
        state=context.ledger,
        known=frozenset(SPECS),
        guarded=guarded,
    )
