"""``costguard scan --accounts 111111111111,222222222222`` (or ``--org``): several accounts
from a laptop.

``--org`` lists the Organization's accounts with the user's own credentials
(``organizations:ListAccounts`` and ``ListTagsForResource``: the management account or a
delegated administrator), keeps the ACTIVE ones not tagged ``costguard:opt-out=true``,
and scans them as ``--accounts`` does.

Each account is entered through its CostGuard member role (``sts:AssumeRole``) and scanned
read-only, with an in-memory ledger, on a bounded thread pool: at most ``--account-workers``
accounts at once (each scan also reads its regions and services in parallel, within the
account's own API limits). One account that cannot be entered (no role, AccessDenied,
throttled STS) is reported on stderr and in the JSON, and the others complete.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from costguard.adapters.assume import AccountAccessError, member_clients
from costguard.cli.common import EXIT_AWS, EXIT_NO_DATA, EXIT_OK, CommandError
from costguard.domain.org import Slice
from costguard.domain.text import plural, truncate

if TYPE_CHECKING:
    from decimal import Decimal

    from costguard.cli.output import Table
    from costguard.domain.pricing import PriceCatalog
    from costguard.domain.teams import TeamReport
    from costguard.services.scan import ScanReport
    from costguard.settings import Settings


@dataclass(frozen=True, slots=True)
class AccountScan:
    account: str
    report: ScanReport | None = None
    error: AccountAccessError | None = None


def scan_accounts(
    session: Any,
    accounts: Sequence[str],
    settings: Settings,
    catalog: PriceCatalog,
    now: datetime,
    *,
    role_name: str,
    workers: int = 4,
    progress: Callable[[str], None] = lambda _m: None,
) -> list[AccountScan]:
    """Every account's scan, in the order given; failures to enter an account are results."""
    from costguard.wiring import build_scan_service

    done = 0
    lock = threading.Lock()

    def one(account: str) -> AccountScan:
        nonlocal done
        try:
            clients = member_clients(session, Slice(account, settings.regions[0]), role_name)
            service = build_scan_service(
                settings.model_copy(update={"scope": account}), clients, catalog=catalog
            )
            result = AccountScan(account, report=service.run(now))
        except AccountAccessError as exc:
            result = AccountScan(account, error=exc)
        with lock:
            done += 1
            if result.report is not None:
                rate = sum(p.run_rate_usd_per_hour for p in result.report.projects)
                rate += result.report.unattributed.run_rate_usd_per_hour
                progress(
                    f"[{done}/{len(accounts)}] {account}: {result.report.resource_count} "
                    f"resources, ${rate:.2f}/h"
                )
            else:
                assert result.error is not None
                progress(
                    f"[{done}/{len(accounts)}] {account}: FAILED {result.error.code}: "
                    f"{result.error.detail}"
                )
        return result

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(accounts)))) as pool:
        futures = {pool.submit(one, a): a for a in accounts}
        results = {futures[f]: f.result() for f in as_completed(futures)}
    return [results[a] for a in accounts]


def discover_accounts(
    session: Any,
    opt_out_tag: str,
    now: datetime,
    *,
    workers: int = 4,
    progress: Callable[[str], None] = lambda _m: None,
) -> list[str]:
    """The Organization's accounts to scan; what was skipped, and why, goes to ``progress``."""
    from costguard.adapters.aws import RETRY_CONFIG
    from costguard.adapters.organizations import (
        OrganizationAccounts,
        organizations_region,
    )
    from costguard.domain.directory import (
        ACTIVE_ACCOUNT,
        DiscoveryError,
        select_accounts,
    )

    client = session.client(
        "organizations",
        region_name=organizations_region(session.region_name or "us-east-1"),
        config=RETRY_CONFIG,
    )
    source = OrganizationAccounts(client)

    def read_tags(account: str) -> tuple[str, Mapping[str, str] | None, str]:
        # One account's unreadable tags never stop the others (select_accounts decides it).
        try:
            return account, source.tags(account), ""
        except DiscoveryError as exc:
            return account, None, str(exc)

    try:
        listed = source.accounts()
        active = list(dict.fromkeys(a for a, state in listed if state == ACTIVE_ACCOUNT))
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(active) or 1))) as pool:
            read = list(pool.map(read_tags, active))
    except DiscoveryError as exc:
        raise CommandError(
            f"--org could not list the Organization's accounts ({exc}). Run it with the "
            "credentials of the management account or a delegated administrator, or name "
            "the accounts with --accounts.",
            EXIT_AWS,
        ) from None
    tags = {a: t for a, t, _why in read if t is not None}
    unreadable = {a: why for a, t, why in read if t is None}
    listing = select_accounts(listed, tags, opt_out_tag, now, unreadable=unreadable)
    for account, why in unreadable.items():
        progress(
            f"{account}: its tags could not be read ({truncate(why, 200)}): scanned, since an "
            "unreadable opt-out tag is not an opt-out"
        )
    skipped = []
    if listing.opted_out:
        skipped.append(f"{len(listing.opted_out)} opted out ({', '.join(listing.opted_out[:5])})")
    if listing.inactive:
        skipped.append(f"{len(listing.inactive)} not active ({', '.join(listing.inactive[:5])})")
    progress(
        f"{plural(len(listing.accounts), 'account')} of the Organization to scan"
        + (f"; skipped {', '.join(skipped)}" if skipped else "")
    )
    for account, value in listing.unclear.items():
        progress(
            f"{account}: tag {opt_out_tag}={value!r} is neither true nor false: scanned "
            "(set it to true to leave the account out)"
        )
    if not listing.accounts:
        raise CommandError("no account of the Organization to scan", EXIT_NO_DATA)
    return list(listing.accounts)


def teams_across(scanned: Sequence[tuple[str, ScanReport]]) -> tuple[TeamReport, ...]:
    """The teams of several accounts' scans, each the sum of its projects across them (a
    project of one name in two accounts is one project), settled as in one account: two
    teams for a project, or two team budgets, resolve as there, with the findings dropped
    here (each account's scan has its own)."""
    from costguard.domain.money import ZERO
    from costguard.domain.spend import add_days
    from costguard.domain.teams import (
        ProjectFigure,
        TeamConfig,
        settle_teams,
        team_owners,
        team_reports,
    )

    tagged: dict[str, dict[str, list[str]]] = {}
    budgets: dict[str, dict[Decimal, list[str]]] = {}
    sums: dict[str, list[Decimal]] = {}
    by_category: dict[str, dict[str, Decimal]] = {}
    accounts: dict[str, set[str]] = {}
    owners: dict[str, list[str]] = {}
    table: dict[str, TeamConfig] = {}  # the deployment's team table, as each scan read it
    for account, report in scanned:
        for p in report.projects:
            if p.project is None:
                continue
            if p.team:
                tagged.setdefault(p.project, {}).setdefault(p.team, []).append(account)
            row = sums.setdefault(p.project, [ZERO, ZERO, ZERO, ZERO])
            row[0] += p.month_to_date_usd
            row[1] += p.estimated_usd
            row[2] += p.run_rate_usd_per_hour
            row[3] += p.forecast_month_usd
            by_category[p.project] = add_days(
                by_category.get(p.project, {}), p.month_to_date_by_category
            )
            accounts.setdefault(p.project, set()).add(account)
            kept = owners.setdefault(p.project, [])
            kept.extend(o for o in p.owners if o not in kept)
        for t in report.teams:
            if t.budget_source == "table" and t.budget_usd is not None:
                table[t.team] = TeamConfig(t.budget_usd, t.owners)
            elif t.budget_usd is not None:
                budgets.setdefault(t.team, {}).setdefault(t.budget_usd, []).append(account)
    settled = settle_teams(tagged, {}, {}, table, budgets)
    figures = [
        ProjectFigure(p, mtd, est, rate, forecast, frozenset(accounts[p]), by_category[p])
        for p, (mtd, est, rate, forecast) in sorted(sums.items())
    ]
    team_owner = team_owners(settled.team_of, {p: tuple(o) for p, o in owners.items()}, table)
    return team_reports(figures, settled.team_of, settled.budgets, team_owner)


def print_accounts(results: Sequence[AccountScan], fmt: str, generated_at: datetime) -> int:
    """Print the reports in ``fmt`` (the envelope's kind is ``scan.accounts``); exit 3 when
    no account could be scanned, else 0 (failures warned on stderr, and in the JSON)."""
    from functools import cache

    from costguard.cli.output import write
    from costguard.cli.scan_output import (
        report_json,
        report_table,
        scan_markdown_heading,
        scan_tables,
    )

    failed = [r for r in results if r.error is not None]
    scanned = [(r.account, r.report) for r in results if r.report is not None]

    def doc() -> dict[str, Any]:
        from costguard.cli.scan_output import predictions_across, team_json

        return {
            "accounts": {account: report_json(report) for account, report in scanned},
            # Each team summed across the accounts its projects run in.
            "teams": [team_json(t) for t in teams_across(scanned)],
            # Every account's endpoint variants' $ per 1,000 predictions, with the account.
            "cost_per_prediction": predictions_across(scanned),
            "failed_accounts": {
                r.account: {"code": r.error.code, "message": r.error.detail}
                for r in failed
                if r.error
            },
        }

    def views() -> tuple[Table, ...]:
        # Markdown's tables, then every account's endpoint variants in one table (each row
        # with its account) when any account runs one.
        from costguard.cli.report import prediction_table

        costs = sorted((c for _, r in scanned for c in r.prediction_costs), key=lambda c: c.key)
        return tables()[1] + ((prediction_table(costs),) if costs else ())

    tables = cache(lambda: scan_tables(scanned))
    write(
        fmt,
        kind="scan.accounts",
        data=doc,
        table=lambda: tables()[0],
        views=views,
        generated_at=scanned[0][1].now if scanned else generated_at,
        text=lambda: "\n".join(
            f"== account {account}\n{report_table(report)}" for account, report in scanned
        ),
        heading=scan_markdown_heading([report for _, report in scanned]),
        empty="none found",
    )
    sys.stdout.flush()
    if failed:
        names = ", ".join(f"{r.account} ({r.error.code})" for r in failed if r.error)
        print(
            f"costguard: {len(failed)} of {plural(len(results), 'account')} could not be scanned: {names}",
            file=sys.stderr,
        )
    return EXIT_NO_DATA if results and len(failed) == len(results) else EXIT_OK
