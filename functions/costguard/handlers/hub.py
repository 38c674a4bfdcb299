"""What both Organization hub Lambdas share: the hub's settings (one reader of the
Organization variables), its clients, ledger, plans and directory, and where its queues
and regions are. The fan-out and scan consumer (:mod:`costguard.handlers.org`) and the
act consumer (:mod:`costguard.handlers.org_act`) each build from here; neither imports
the other's internals.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from costguard.config_spec import BY_NAME, ORG_DISCOVER
from costguard.env import Env
from costguard.settings import ORG_ENV_VARS as SETTINGS_ORG_ENV_VARS

if TYPE_CHECKING:
    from costguard.adapters.aws import ClientFactory
    from costguard.ports import Ledger
    from costguard.services.org import SliceBook
    from costguard.settings import Settings

# The Organization variables, as the settings declare them (costguard.config_spec).
ORG_ACCOUNTS_ENV = Env.ORG_ACCOUNTS
ORG_ID_ENV = Env.ORG_ID
MEMBER_ROLE_ENV = Env.MEMBER_ROLE
PER_ACCOUNT_CAP_ENV = Env.PER_ACCOUNT_CONCURRENCY
PROBE_HOURS_ENV = Env.PROBE_HOURS
SLICE_DEADLINE_ENV = Env.SLICE_DEADLINE_MINUTES
OPT_OUT_TAG_ENV = Env.ORG_OPT_OUT_TAG
QUEUE_URL_ENV = Env.QUEUE_URL
DISCOVER = ORG_DISCOVER
ORG_ENV_VARS = SETTINGS_ORG_ENV_VARS


class OrgConfigError(ValueError):
    """An organization-mode variable is wrong; the message names it."""


class OrgEnvironment(BaseModel):
    """The hub's organization settings, read once from the Lambda's environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: None: single-account mode; () never; ("discover",) is :attr:`discover`.
    accounts: tuple[str, ...] | None = None
    discover: bool = False
    org_id: str | None = None
    member_role: str = BY_NAME["org_member_role"].default
    per_account_cap: int = BY_NAME["org_per_account_concurrency"].default
    probe_hours: Decimal = Decimal(BY_NAME["org_probe_hours"].default)
    slice_deadline_minutes: int = BY_NAME["org_slice_deadline_minutes"].default
    opt_out_tag: str = BY_NAME["org_opt_out_tag"].default
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
    def from_settings(cls, settings: Settings, environ: Mapping[str, str]) -> OrgEnvironment:
        """The organization settings as :class:`~costguard.settings.Settings` read and
        checked them (one reader, the spec's ranges), plus the queue the stack names."""
        accounts = settings.org_accounts
        discover = accounts == (DISCOVER,)
        return cls(
            accounts=None if discover or not accounts else accounts,
            discover=discover,
            org_id=settings.org_id or None,
            member_role=settings.org_member_role,
            per_account_cap=settings.org_per_account_concurrency,
            probe_hours=Decimal(settings.org_probe_hours),
            slice_deadline_minutes=settings.org_slice_deadline_minutes,
            opt_out_tag=settings.org_opt_out_tag,
            queue_url=environ.get(QUEUE_URL_ENV, "").strip() or None,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> OrgEnvironment:
        """Every problem at once, each naming its variable; empty means the default."""
        from costguard.settings import Settings, SettingsError

        try:
            settings = Settings.from_env(environ)
        except SettingsError as exc:
            raise OrgConfigError(str(exc)) from exc
        return cls.from_settings(settings, environ)


def hub_parts(settings: Settings, session: Any) -> tuple[ClientFactory, Ledger, SliceBook, Any]:
    """The hub's clients, ledger, plans and directory (on the table, or in memory)."""
    from costguard.adapters.aws import ClientFactory
    from costguard.adapters.directory import DynamoDbDirectory, InMemoryDirectory
    from costguard.adapters.slices import DynamoDbSliceBook, InMemorySliceBook
    from costguard.wiring import build_ledger

    hub = ClientFactory(session, account=settings.scope)
    ledger = build_ledger(settings, hub)
    if settings.table_name:
        region = session.region_name or settings.regions[0]
        ddb = hub.dynamodb(region)
        return (
            hub,
            ledger,
            DynamoDbSliceBook(ddb, settings.table_name, settings.scope),
            DynamoDbDirectory(ddb, settings.table_name, settings.scope),
        )
    return hub, ledger, InMemorySliceBook(), InMemoryDirectory()


def allowed_regions(settings: Settings) -> frozenset[str] | None:
    """The allow-list an account's enabled regions are intersected with: ``regions``, or
    None (every region the account enabled) with ``orgRegions=enabled``."""
    return None if settings.org_regions == "enabled" else frozenset(settings.regions)


def home_region(settings: Settings, session: Any) -> str:
    """Where the hub runs (its queue's region when the URL does not say)."""
    return str(session.region_name or os.environ.get("AWS_REGION") or settings.regions[0])


def queue_region(url: str, default: str) -> str:
    """``https://sqs.<region>.amazonaws.com/<account>/<name>``: the queue's own region."""
    match = re.match(r"https://sqs\.([a-z0-9-]+)\.", url)
    return match.group(1) if match else default
