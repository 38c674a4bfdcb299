"""``costguard scan --accounts 111111111111,222222222222``: several accounts from a laptop.

Each account is entered through its CostGuard member role (``sts:AssumeRole``) and scanned
read-only, with an in-memory ledger, on a bounded thread pool: at most ``--account-workers``
accounts at once (each scan also reads its regions and services in parallel, within the
account's own API limits). One account that cannot be entered (no role, AccessDenied,
throttled STS) is reported on stderr and in the JSON, and the others complete.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from costguard.adapters.assume import AccountAccessError, member_clients
from costguard.domain.org import Slice

if TYPE_CHECKING:
    from costguard.domain.pricing import PriceCatalog
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
    from costguard.wiring import build_scan_service  # noqa: PLC0415

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


def print_accounts(results: Sequence[AccountScan], as_json: bool) -> int:
    """Print the reports; exit 3 when no account could be scanned, else 0 (failures warned)."""
    from costguard.cli_common import EXIT_NO_DATA, EXIT_OK  # noqa: PLC0415
    from costguard.report import report_json, report_table  # noqa: PLC0415

    failed = [r for r in results if r.error is not None]
    if as_json:
        doc = {
            "accounts": {r.account: report_json(r.report) for r in results if r.report},
            "failed_accounts": {
                r.account: {"code": r.error.code, "message": r.error.detail}
                for r in failed
                if r.error
            },
        }
        json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        for r in results:
            if r.report is not None:
                print(f"== account {r.account}")
                print(report_table(r.report))
    sys.stdout.flush()
    if failed:
        names = ", ".join(f"{r.account} ({r.error.code})" for r in failed if r.error)
        print(
            f"costguard: {len(failed)} of {len(results)} account(s) could not be scanned: {names}",
            file=sys.stderr,
        )
    return EXIT_NO_DATA if results and len(failed) == len(results) else EXIT_OK
