"""``costguard alerts`` and ``costguard actions``: what a deployed CostGuard's ledger
holds, read back and never written: the recent alerts, and the audit trail of actions."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime
from decimal import Decimal
from typing import Any

from costguard.cli import common
from costguard.cli.output import Cell, Column, Table, render, usd_cell
from costguard.domain.money import cents


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


#: ``alerts --format csv|markdown``: one row per alert.
ALERT_COLUMNS = (
    Column("at", "At"),
    Column("severity", "Severity"),
    Column("kind", "Kind"),
    Column("project", "Project"),
    Column("title", "Title"),
    Column("alert_id", "Alert id"),
)
#: ``actions --format csv|markdown``: one row per action (docs/actions.md).
ACTION_COLUMNS = (
    Column("at", "At"),
    Column("outcome", "Outcome"),
    Column("action", "Action"),
    Column("resource_kind", "Type"),
    Column("project", "Project"),
    Column("resource", "Resource"),
    Column("usd_per_month_saved", "Saves/month", "right"),
    Column("dry_run", "Dry run"),
    Column("detail", "Detail"),
    Column("reason", "Reason"),
)


def _minute(stamp: Any) -> str:
    """An ISO time to the minute, as the text shows it (``2026-11-20 12:00``)."""
    return str(stamp or "")[:16].replace("T", " ")


def alert_rows(alerts: list[dict[str, Any]]) -> list[dict[str, str | Cell]]:
    return [
        {
            "at": Cell(_minute(a.get("at")), str(a.get("at") or "")),
            "severity": str(a.get("severity") or ""),
            "kind": str(a.get("kind") or ""),
            "project": Cell(str(a.get("project") or "-"), str(a.get("project") or "")),
            "title": str(a.get("title") or ""),
            "alert_id": str(a.get("alert_id") or ""),
        }
        for a in alerts
    ]


def alerts_text(alerts: list[dict[str, Any]], hours: int) -> str:
    from costguard.settings import one_line

    if not alerts:
        return f"No alerts in the last {hours} h."
    return "\n".join(
        f"{_minute(a.get('at')):<16}  [{a.get('severity', '?'):<8}] "
        f"{a.get('kind', '?'):<20} {one_line(str(a.get('project') or '-'), 20):<20} "
        f"{one_line(str(a.get('title', '')), 120)}"
        for a in alerts
    )


def render_alerts(fmt: str, alerts: list[dict[str, Any]], hours: int, at: datetime) -> str:
    """``costguard alerts`` in ``fmt``: the envelope's data is the list of alerts."""
    return render(
        fmt,
        kind="alerts",
        data=alerts,
        table=Table(ALERT_COLUMNS, alert_rows(alerts)),
        generated_at=at,
        text=alerts_text(alerts, hours),
        heading=f"CostGuard alerts, the last {hours} h to {at:%Y-%m-%d %H:%M} UTC",
        empty="No alerts.",
    )


def cmd_alerts(args: argparse.Namespace) -> int:
    """Recent alerts, read back from a deployed CostGuard's ledger."""
    from datetime import timedelta

    ledger, scope, region = _read(args, "alerts")
    at = common.now()
    with common.table_errors(args.table, region):
        alerts = ledger.recent_alerts(scope, at - timedelta(hours=args.hours), at)
    _print(render_alerts(args.format, alerts, args.hours, at))
    return common.EXIT_OK


def action_rows(records: list[dict[str, Any]]) -> list[dict[str, str | Cell]]:
    return [
        {
            "at": Cell(_minute(r["at"]), r["at"]),
            "outcome": r["outcome"],
            "action": r["action"],
            "resource_kind": r["resource_kind"] or "",
            "project": Cell(r["project"] or "-", r["project"] or ""),
            "resource": r["resource"],
            "usd_per_month_saved": usd_cell(Decimal(str(r["usd_per_month_saved"]))),
            "dry_run": "yes" if r["dry_run"] else "no",
            "detail": r["detail"] or "",
            "reason": r["reason"] or "",
        }
        for r in records
    ]


def actions_text(records: list[dict[str, Any]], month: str) -> str:
    from costguard.settings import one_line

    if not records:
        return f"No actions recorded in {month}."
    return "\n".join(
        f"{_minute(r['at']):<16}  {r['outcome']:<17} {r['action']:<16} "
        f"{one_line(str(r['project'] or '-'), 20):<20} {one_line(r['resource'], 60)}  "
        f"${cents(Decimal(str(r['usd_per_month_saved']))):,}/month  "
        f"{one_line(str(r['reason']), 80)}"
        for r in records
    )


def render_actions(fmt: str, records: list[dict[str, Any]], month: str, at: datetime) -> str:
    """``costguard actions`` in ``fmt``: the envelope's data is the list of action records."""
    return render(
        fmt,
        kind="actions",
        data=records,
        table=Table(ACTION_COLUMNS, action_rows(records)),
        generated_at=at,
        text=actions_text(records, month),
        heading=f"CostGuard actions in {month}",
        empty="No actions recorded.",
    )


def cmd_actions(args: argparse.Namespace) -> int:
    """The audit trail: what CostGuard did, or would have done in dry-run, and why."""
    from costguard.services.action_records import from_audit

    ledger, scope, region = _read(args, "actions")
    at = common.now()
    month = args.month or f"{at:%Y-%m}"
    with common.table_errors(args.table, region):
        events = ledger.audit_trail(scope, month)
    _print(render_actions(args.format, [from_audit(e) for e in events], month, at))
    return common.EXIT_OK


def _print(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


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
        parents=[flags.profile, flags.ledger_region, flags.format],
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
        parents=[flags.profile, flags.ledger_region, flags.format],
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
