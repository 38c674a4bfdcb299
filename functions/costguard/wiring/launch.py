"""The on-launch check's composition: readers per account, the scan's catalog, ledger and
alert service."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from costguard.adapters.assume import AccountAccessError, MemberClients
from costguard.adapters.aws import ClientFactory
from costguard.adapters.directory import DynamoDbDirectory
from costguard.adapters.launched import LaunchedResources
from costguard.adapters.sagemaker import PerResourceTags
from costguard.domain.launch_policy import LaunchPolicy
from costguard.domain.org import Slice
from costguard.domain.org_roles import OrgRoles
from costguard.services.launch import (
    AccountNotWatched,
    AccountUnreachable,
    LaunchCheck,
    LaunchSettings,
)
from costguard.wiring.parts import (
    BundledCatalog,
    account_of,
    build_alert_service,
    build_ledger,
    catalog_reader,
    clients_for,
)

if TYPE_CHECKING:
    from costguard.domain.directory import AccountListing
    from costguard.ports import LaunchedResourceReader
    from costguard.settings import Settings

#: The session name member accounts' CloudTrail shows for the hub's launch checks.
LAUNCH_SESSION = "costguard-launch"


def launch_policy(settings: Settings) -> LaunchPolicy:
    return LaunchPolicy(settings.max_usd_per_hour, frozenset(settings.launch_regions))


def build_launch_check(settings: Settings, session: Any) -> LaunchCheck | None:
    """None without an alert topic: a check that can tell nobody does nothing."""
    home = clients_for(settings, session)
    ledger = build_ledger(settings, home)
    alerts = build_alert_service(settings, home, ledger)
    if alerts is None:
        return None
    return LaunchCheck(
        readers_for(settings, session, home),
        catalog_reader(settings, home) or BundledCatalog(),
        ledger,
        alerts,
        LaunchSettings(
            scope=settings.scope,
            account=account_of(settings) or home.account,
            tag_keys=settings.tag_keys,
            projects=settings.project_table(),
            policy=launch_policy(settings),
            thresholds=settings.budget_thresholds,
            teams=settings.team_table(),
        ),
    )


def readers_for(settings: Settings, session: Any, home: ClientFactory) -> Any:
    """account -> its reader: this deployment's own account, or, in an Organization, a
    member entered through its read role. Any other account is refused."""
    # One resource's tags from the resource (ListTags), whatever sagemakerTags says for the
    # scan: the tagging API pages through every SageMaker resource of the region, and its
    # index lags a resource created seconds ago (judged untagged: a false page).
    own = LaunchedResources(home, PerResourceTags(home))
    org = settings.org_accounts
    discover = org == ("discover",)
    members = (
        MemberClients(
            session, settings.org_member_role or OrgRoles.MEMBER_READ, session_name=LAUNCH_SESSION
        )
        if org
        else None
    )

    listing = _listing_reader(settings, home) if discover else None

    def reader(account: str) -> LaunchedResourceReader:
        if account == home.account or (not home.account and not org):
            return own
        if members is None or not (discover or account in org):
            raise AccountNotWatched(
                f"account {account} is not this deployment's"
                + (" nor one of its member accounts" if org else "")
            )
        guarded = listing() if listing is not None else None
        if guarded is not None and account in guarded.opted_out:
            raise AccountNotWatched(f"account {account} opted out (costguard:opt-out)")
        if guarded is not None and account in guarded.inactive:
            raise AccountNotWatched(f"account {account} is not active in the Organization")
        region = session.region_name or settings.regions[0]
        try:
            clients = members(Slice(account, region))
        except AccountAccessError as exc:
            raise AccountUnreachable(str(exc)) from exc
        return LaunchedResources(clients, PerResourceTags(clients))

    return reader


def _listing_reader(settings: Settings, home: ClientFactory) -> Callable[[], AccountListing | None]:
    """The hub's account listing (discovered, with opt-outs), read once per container; None
    when there is none yet or it cannot be read (the member's role is tried then: a launch
    alert is never held back by the directory)."""
    cache: list[AccountListing | None] = []

    def read() -> AccountListing | None:
        if not cache:
            try:
                if not settings.table_name:
                    raise LookupError("no ledger table")
                ddb = home.dynamodb(home.session.region_name or settings.regions[0])
                cache.append(DynamoDbDirectory(ddb, settings.table_name, settings.scope).listing())
            except Exception:  # unreadable: no listing, not a refusal
                cache.append(None)
        return cache[0]

    return read
