"""``costguard alerts`` and ``costguard actions``: what a deployed CostGuard's ledger
holds, read back and never written: the recent alerts, and the audit trail of actions."""

from __future__ import annotations

import argparse
import re
from typing import Any

from costguard.cli import common


def _read(args: argparse.Namespace, command: str) -> tuple[Any, str, str]:
    """The deployed ledger the command reads: (ledger, scope, region)."""
    return common.deployed_ledger(
        args,
        args.table_region,
        no_table=f"`costguard {command}` reads a deployed ledger: pass --table (the "
        "LedgerTable output)",
        no_region="no region: pass --table-region (the ledger's region), or set AWS_REGION / "
        "a profile region",
    )


def cmd_alerts(args: argparse.Namespace) -> int:
    """Recent alerts, read back from a deployed CostGuard's ledger."""
    from datetime import timedelta

    ledger, scope, region = _read(args, "alerts")
    at = common.now()
    with common.table_errors(args.table, region):
        alerts = ledger.recent_alerts(scope, at - timedelta(hours=args.hours), at)
    if args.json:
        common.emit_json(alerts)
        return common.EXIT_OK
    if not alerts:
        print(f"No alerts in the last {args.hours} h.")
    for a in alerts:
        print(
            f"{str(a.get('at', ''))[:16]:<16}  [{a.get('severity', '?'):<8}] "
            f"{a.get('kind', '?'):<20} {a.get('project') or '-':<20} {a.get('title', '')}"
        )
    return common.EXIT_OK


def cmd_actions(args: argparse.Namespace) -> int:
    """The audit trail: what CostGuard did, or would have done in dry-run, and why."""
    from costguard.settings import one_line

    ledger, scope, region = _read(args, "actions")
    month = args.month or f"{common.now():%Y-%m}"
    with common.table_errors(args.table, region):
        events = ledger.audit_trail(scope, month)
    rows = [
        {
            "at": e.at.isoformat(),
            "action": e.action,
            "outcome": e.outcome,
            "resource": e.resource,
            **dict(e.details),
        }
        for e in events
    ]
    if args.json:
        common.emit_json(rows, default=str)
        return common.EXIT_OK
    if not rows:
        print(f"No actions recorded in {month}.")
    for r in rows:
        print(
            f"{r['at'][:16]:<16}  {r['outcome']:<17} {r['action']:<16} "
            f"{one_line(str(r.get('project') or '-'), 20):<20} {one_line(r['resource'], 60)}  "
            f"${r.get('usd_per_month_saved', '0')}/month  {one_line(str(r.get('reason', '')), 80)}"
        )
    return common.EXIT_OK


def _alert_days() -> int:
    from costguard.adapters.dynamodb import ALERT_TTL

    return ALERT_TTL.days


def alert_hours(value: str) -> int:
    """1 hour up to the alert log's retention: older alerts are gone, so asking is a mistake."""
    days = _alert_days()
    message = "must be a whole number of hours from {low} to {high}"
    return common.whole_number(
        1, days * 24, message + f" (alerts are kept {days} days), got {{value!r}}"
    )(value)


def month_name(value: str) -> str:
    if not re.fullmatch(r"[0-9]{4}-(0[1-9]|1[0-2])", value):
        raise argparse.ArgumentTypeError(f"must be a month like 2026-11, got {value!r}")
    return value


def register(sub: Any, flags: common.Flags) -> None:
    """Add ``alerts`` and ``actions`` to the ``costguard`` parser."""
    alerts = sub.add_parser(
        "alerts",
        parents=[flags.profile, flags.ledger_region, flags.json],
        help="recent alerts from a deployed CostGuard's ledger",
        description="Recent alerts, read from a deployed CostGuard's ledger in --table-region.",
    )
    alerts.add_argument(
        "--table", type=common.table_name, help="the ledger table (stack output LedgerTable)"
    )
    alerts.add_argument(
        "--hours",
        type=alert_hours,
        default=24,
        help=f"how far back, 1 to {_alert_days() * 24} (default 24)",
    )
    alerts.add_argument("--scope", type=common.SCOPE, help="ledger scope (default: the account id)")
    alerts.set_defaults(func=cmd_alerts)

    actions = sub.add_parser(
        "actions",
        parents=[flags.profile, flags.ledger_region, flags.json],
        help="the audit trail of actions (and dry-run would-dos) from a deployed ledger",
        description=(
            "What CostGuard did, or would have done in dry-run, and why: read from a "
            "deployed CostGuard's ledger in --table-region."
        ),
    )
    actions.add_argument(
        "--table", type=common.table_name, help="the ledger table (stack output LedgerTable)"
    )
    actions.add_argument("--month", type=month_name, help="YYYY-MM (default: this month)")
    actions.add_argument(
        "--scope", type=common.SCOPE, help="ledger scope (default: the account id)"
    )
    actions.set_defaults(func=cmd_actions)
