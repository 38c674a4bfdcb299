"""``costguard report``: the month on one page, for a person (``--html``) or a tool
(``--format``).

It runs a read-only scan, as ``costguard scan`` does, for the live view (resources,
run-rates, advice, findings), and reads the month from the ledger: the deployed one with
``--table`` (never written), else the scan's in-memory one (month-to-date then starts at
the scan). The page is drawn by :mod:`.report_html` (standard library only).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from costguard.cli import common
from costguard.cli.common import format_flag
from costguard.cli.output import Cell, Column, Table, rate_cell, write
from costguard.domain.billed import BILLED_NOTE
from costguard.domain.money import rate

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from costguard.domain.predictions import PredictionCost
    from costguard.domain.report import Burn, Report, TeamBurn

KIND = "report"


def _money(value: Decimal | None) -> float | None:
    from costguard.domain.money import cents

    return None if value is None else float(cents(value))


def _rate(value: Decimal) -> float:
    """A $/h rate to four places, as the scan's JSON gives it. Defect: the report's JSON
    said ``"run_rate_usd_per_hour": 1.0081917808219178``."""
    from costguard.domain.money import rate

    return float(rate(value))


def _split(by_category: Mapping[str, Decimal]) -> dict[str, float]:
    return {k: float(v) for k, v in by_category.items()}


def burn_data(b: Burn) -> dict[str, Any]:
    return {
        "project": b.project,
        "budget_usd": _money(b.budget),
        "status": b.status.value,
        "month_to_date_usd": _money(b.month_to_date),
        # compute, storage and not_split (accrued before the ledger split months by
        # category): to the cent, adding up to month_to_date_usd.
        "month_to_date_by_category": _split(b.by_category_cents),
        "forecast_usd": _money(b.forecast),
        "forecast_low_usd": _money(b.forecast_low),
        "forecast_high_usd": _money(b.forecast_high),
        "forecast_range_basis": b.range_basis,
        "run_rate_usd_per_hour": _rate(b.run_rate),
        "days_known": b.has_days,
        "undated_usd": _money(b.undated_usd),
        "daily_cumulative_usd": [{"day": round(p.day, 4), "usd": _money(p.usd)} for p in b.series],
        "threshold_crossings": [
            {
                "percent": c.pct,
                "usd": _money(c.usd),
                "day": None if c.day is None else round(c.day, 4),
                "projected": c.projected,
            }
            for c in b.crossings
        ],
        "unpriced_resources": b.unpriced,
        "owners": list(b.owners),
    }


def team_data(t: TeamBurn) -> dict[str, Any]:
    """A team's row: the sums of its projects' rows, its own budget and status."""
    return {
        "team": t.team,
        "projects": list(t.projects),
        "budget_usd": _money(t.budget),
        "status": t.status.value,
        "month_to_date_usd": _money(t.month_to_date),
        "month_to_date_by_category": _split(t.by_category),
        "forecast_usd": _money(t.forecast),
        "forecast_low_usd": _money(t.forecast_low),
        "forecast_high_usd": _money(t.forecast_high),
        "run_rate_usd_per_hour": _rate(t.run_rate),
    }


def report_data(r: Report) -> dict[str, Any]:
    """The report as the JSON envelope's ``data``: every figure the page shows."""
    a = r.actions

    def action(x: Any) -> dict[str, Any]:
        return {
            "at": x.at.isoformat(),
            "action": x.action,
            "resource": x.resource,
            "project": x.project,
            "outcome": x.outcome,
            "deadline": x.deadline,
            "usd_per_month": _money(x.usd_per_month),
        }

    return {
        "scope": r.scope,
        "month": r.month,
        "month_to_date_usd": _money(r.month_to_date),
        "forecast_usd": _money(r.forecast),
        "projects": [{**burn_data(b), "team": r.team_of.get(b.project or "")} for b in r.burns],
        "teams": [team_data(t) for t in r.teams],
        "unattributed": burn_data(r.unattributed) if r.unattributed else None,
        "by_kind": [
            {
                "kind": k.kind.value,
                "resources": k.resources,
                "unpriced": k.unpriced,
                "usd_per_hour": _rate(k.usd_per_hour),
            }
            for k in r.kinds
        ],
        "top_resources": [
            {
                "resource": t.key,
                "name": t.name,
                "kind": t.kind.value,
                "instance_type": t.instance_type,
                "project": t.project,
                "owner": t.owner,
                "usd_per_hour": None if t.usd_per_hour is None else _rate(t.usd_per_hour),
            }
            for t in r.top
        ],
        "actions": {
            "taken": [action(x) for x in a.taken],
            "pending": [action(x) for x in a.pending],
            "dry_run": [action(x) for x in a.would],
            "saved_usd_per_month": _money(a.saved_usd_per_month),
            "dry_run_would_save_usd_per_month": _money(a.would_save_usd_per_month),
        },
        "advice": [
            {"code": code, "resource": res, "usd_per_month_saving": _money(saving), "why": why}
            for code, res, saving, why in r.advice
        ],
        "findings": [
            {
                "code": g.code,
                "severity": g.severity,
                "count": g.count,
                "examples": [f.as_dict() for f in g.examples],
            }
            for g in r.findings
        ],
        "catalog_as_of": r.catalog_as_of,
        "catalog_age_days": r.catalog_age_days,
        "not_seen": {
            "unreadable": list(r.blind.unreadable),
            "unpriced_types": dict(r.blind.unpriced_types),
            "month_to_date_only": list(r.blind.month_to_date_only),
            "not_split_by_category": list(r.blind.not_split),
        },
        "thresholds_percent": list(r.thresholds),
        # Cost Explorer's month beside the scan's (costExplorer on); null when never read.
        "billed_beside_seen": None
        if r.billed is None
        else {
            "as_of": r.billed.as_of,
            "note": BILLED_NOTE,
            "projects": [
                {
                    "project": b.project,
                    "seen_by_scan_usd": _money(b.seen),
                    "billed_usd": _money(b.billed),
                    "difference_usd": _money(b.difference),
                    "not_seen_by_scan_usd": _money(b.not_seen),
                    "data_transfer_usd": _money(b.data_transfer),
                    "other_usd": _money(b.other),
                }
                for b in r.billed.rows
            ],
        },
        # Each endpoint variant's $ per 1,000 predictions, now and per UTC day.
        "cost_per_prediction": [c.as_dict() for c in r.prediction_costs],
    }


def report_table(r: Report) -> Table:
    """One row per project: what ``--format table|csv|markdown`` print (money as text for
    people, plain numbers in CSV; the forecast's range as its two ends)."""
    from costguard.cli.output import rate_cell, usd_cell

    def crossed(b: Burn) -> str:
        return ", ".join(f"{c.pct}%{' (forecast)' if c.projected else ''}" for c in b.crossings)

    billed = {x.project: x for x in r.billed.rows} if r.billed is not None else {}
    rows = [
        {
            "project": b.project or "(unattributed)",
            "spent_usd": usd_cell(b.month_to_date),
            **_split_cells(b.by_category_cents),
            "budget_usd": usd_cell(b.budget, "none"),
            "forecast_usd": usd_cell(b.forecast),
            "forecast_low_usd": usd_cell(b.forecast_low),
            "forecast_high_usd": usd_cell(b.forecast_high),
            "usd_per_hour": rate_cell(b.run_rate),
            "unpriced_resources": str(b.unpriced) if b.unpriced else "",
            "status": b.status.value,
            "thresholds_crossed": crossed(b),
            "team": r.team_of.get(b.project or "", ""),
            **(
                {
                    "billed_usd": usd_cell(billed[b.project].billed),
                    "not_seen_usd": usd_cell(billed[b.project].not_seen),
                }
                if b.project in billed
                else {"billed_usd": "", "not_seen_usd": ""}
            ),
        }
        for b in (*r.burns, *([r.unattributed] if r.unattributed else []))
    ]
    extra = (
        (
            Column("billed_usd", "Billed (AWS)", "right"),
            Column("not_seen_usd", "Not seen by scan", "right"),
        )
        if billed
        else ()
    )
    # The team column only where the deployment has teams: a report without teams reads
    # (and its CSV parses) as before.
    team = (Column("team", "Team"),) if r.teams else ()
    return Table(
        (
            Column("project", "Project"),
            *team,
            Column("spent_usd", "Spent", "right"),
            *_split_columns(r),
            Column("budget_usd", "Budget", "right"),
            Column("forecast_usd", "Forecast", "right"),
            Column("forecast_low_usd", "Low", "right"),
            Column("forecast_high_usd", "High", "right"),
            Column("usd_per_hour", "Run-rate", "right"),
            Column("unpriced_resources", "Unpriced", "right"),
            Column("status", "Status"),
            Column("thresholds_crossed", "Thresholds"),
            *extra,
        ),
        rows,
        title="Projects",
    )


def _split_cells(shown: Mapping[str, Decimal]) -> dict[str, str | Cell]:
    """The month-to-date's compute, storage and not-split cells (to the cent, adding up
    to the Spent cell)."""
    from costguard.cli.output import usd_cell

    return {f"{k}_usd": usd_cell(v) for k, v in shown.items()}


def _split_columns(r: Report) -> tuple[Column, ...]:
    """Compute and Storage beside Spent; Not split only where some month holds spend
    accrued before the ledger split months by category (a month begun by an older version)."""
    columns: tuple[Column, ...] = (
        Column("compute_usd", "Compute", "right"),
        Column("storage_usd", "Storage", "right"),
    )
    if r.blind.not_split:
        columns += (Column("not_split_usd", "Not split", "right"),)
    return columns


def prediction_cell(per_1000: Decimal | None, status: str) -> str:
    """``$0.1000`` per 1,000 predictions, or why there is no figure ("no traffic", ...)."""
    return f"${rate(per_1000)}" if per_1000 is not None else status


def prediction_table(costs: Sequence[PredictionCost]) -> Table:
    """One row per endpoint variant: its $/h, its invocations an hour and $ per 1,000
    predictions over the last 24 hours, then each UTC day's (the day's cost over its
    invocations; today so far last)."""
    days = sorted({d.day for c in costs for d in c.days})
    # Several accounts (an Organization's roll-up, `scan --accounts`): each row says whose.
    several = len({c.account for c in costs}) > 1
    rows: list[dict[str, str | Cell]] = []
    for c in costs:
        by_day = {d.day: d for d in c.days}
        row: dict[str, str | Cell] = {
            "account": c.account,
            "region": c.region,
            "variant": f"{c.endpoint}/{c.variant}",
            "instance": (f"{c.count} x " if c.count > 1 else "") + (c.instance_type or ""),
            "usd_per_hour": rate_cell(c.usd_per_hour),
            "invocations_per_hour": (
                "unknown" if c.invocations_per_hour is None else f"{c.invocations_per_hour:,.0f}"
            ),
            "now": prediction_cell(c.usd_per_1000, c.status.value),
        }
        for day in days:
            d = by_day.get(day)
            row[day.isoformat()] = (
                prediction_cell(d.usd_per_1000, d.status.value) if d is not None else ""
            )
        rows.append(row)
    whose = (Column("account", "Account"), Column("region", "Region")) if several else ()
    return Table(
        (
            *whose,
            Column("variant", "Endpoint/variant"),
            Column("instance", "Instance"),
            Column("usd_per_hour", "$/h", "right"),
            Column("invocations_per_hour", "Invocations/h", "right"),
            Column("now", "$/1,000 (24 h)", "right"),
            *(Column(day.isoformat(), day.strftime("%m-%d"), "right") for day in days),
        ),
        rows,
        title="Cost per 1,000 predictions",
    )


def team_table(r: Report) -> Table:
    """One row per team, each the sum of its projects' rows."""
    from costguard.cli.output import rate_cell, usd_cell

    rows = [
        {
            "team": t.team,
            "spent_usd": usd_cell(t.month_to_date),
            **_split_cells(t.by_category),
            "budget_usd": usd_cell(t.budget, "none"),
            "forecast_usd": usd_cell(t.forecast),
            "usd_per_hour": rate_cell(t.run_rate),
            "status": t.status.value,
            "projects": ", ".join(t.projects),
        }
        for t in r.teams
    ]
    return Table(
        (
            Column("team", "Team"),
            Column("spent_usd", "Spent", "right"),
            *_split_columns(r),
            Column("budget_usd", "Budget", "right"),
            Column("forecast_usd", "Forecast", "right"),
            Column("usd_per_hour", "Run-rate", "right"),
            Column("status", "Status"),
            Column("projects", "Projects"),
        ),
        rows,
        title="Teams",
    )


def report_views(report: Report) -> tuple[Table, ...]:
    """The tables text and markdown print: the projects, then the teams and the endpoints'
    cost per prediction when there are any (nothing more: the projects' table alone)."""
    extra = (
        *((team_table(report),) if report.teams else ()),
        *((prediction_table(report.prediction_costs),) if report.prediction_costs else ()),
    )
    return (report_table(report), *extra) if extra else ()


def print_report(fmt: str, report: Report, at: datetime) -> None:
    """The report on stdout in ``fmt`` (``--format``), as ``costguard report`` prints it."""
    write(
        fmt,
        kind=KIND,
        data=report_data(report),
        table=report_table(report),
        # Text and markdown show the teams and the endpoints' cost per prediction under
        # the projects; CSV stays one table.
        views=report_views(report),
        generated_at=at,
        # Markdown opens with its bold line, as every command's does; a month with no
        # spend is a sentence, never a header row alone, and says what could not be read.
        heading=f"CostGuard report, {report.month}",
        empty=f"No project has spend in {report.month}"
        + (f" ({', '.join(report.narrowed)})" if report.narrowed else "")
        + (
            f"; {', '.join(report.blind.unreadable)} could not be read: their spend is missing"
            if report.blind.unreadable
            else ""
        )
        + ".",
    )


def write_html(report: Report, path: Path) -> int:
    """Write the page next to ``path`` then move it there (a reader never sees half a
    file); returns its size in bytes."""
    from costguard.cli.report_html import render

    page = render(report).encode("utf-8")
    path = path.expanduser()
    folder = path.parent if str(path.parent) else Path(".")
    try:
        if path.exists() and not path.is_file():
            # A device, a FIFO or /dev/stdout is written in place. Defect: the page was moved
            # over it, so (as root) `--html /dev/full` replaced the device with a file.
            with path.open("wb") as out:
                out.write(page)
            return len(page)
        fd, tmp = tempfile.mkstemp(prefix=".costguard-report-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(page)
            os.chmod(tmp, 0o644)  # mkstemp's 0600 is for secrets; a report is for sharing
            os.replace(tmp, path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)  # never a stray .costguard-report-* file
            raise
    except OSError as exc:
        raise common.CommandError(
            f"--html {str(path)!r}: cannot write it ({exc.strerror or exc})"
        ) from None
    return len(page)


def cmd_report(args: argparse.Namespace) -> int:
    from costguard.adapters.catalog import rate_book
    from costguard.cli.scan import InventoryCalls, scan_outcome, settings_for_scan
    from costguard.domain.calendar import month_key
    from costguard.domain.catalog_merge import CatalogInUse
    from costguard.services.report import ReportRequest, build_report
    from costguard.settings import one_line
    from costguard.wiring import CallCounter, build_scan_service, clients_for

    if args.html is not None and args.html.is_dir():
        raise common.CommandError(f"--html {str(args.html)!r} is a folder: name a file")
    at = common.now()
    month = args.month or month_key(at)
    if month > month_key(at):
        raise common.CommandError(f"--month {month} has not begun yet")
    args.sagemaker_tags = None
    aws = common.session(args)
    settings = settings_for_scan(args, aws)
    if month < month_key(at) and not settings.table_name:
        # Defect: a past month without a ledger printed "No project has spend", after a
        # whole scan: a local scan back-fills this month only, it has no history.
        raise common.CommandError(
            f"--month {month} is past: a local scan knows this month only; pass --table "
            "(the LedgerTable output) to read a past month from the deployed ledger"
        )
    catalog, which, source = common.choose_catalog(None, common.progress(not args.quiet))
    common.require_credentials(aws)
    # Which prices the numbers rest on, as `scan` says it.
    common.progress(not args.quiet)(one_line(which, 1000))
    if settings.table_name and not args.scope:
        settings = settings.model_copy(update={"scope": common.account(aws, settings.regions[0])})
    calls = InventoryCalls()
    calls.attach(aws)
    counter = CallCounter()
    counter.attach(aws)
    from costguard.adapters.memory import InMemoryLedger, ReadOnlyLedger
    from costguard.wiring import build_ledger

    ledger = (
        ReadOnlyLedger(build_ledger(settings, clients_for(settings, aws)))
        if settings.table_name
        else InMemoryLedger()
    )
    service = build_scan_service(
        settings,
        clients_for(settings, aws),
        ledger=ledger,
        catalog=catalog.to_domain(),
        progress=common.progress(not args.quiet),
        counter=counter,
        catalog_in_use=CatalogInUse(source, catalog.version, rate_book(catalog)),
    )
    with common.table_errors(settings.table_name or "", aws.region_name or settings.regions[0]):
        scan = service.run(at)
        request = ReportRequest(
            month=month,
            projects=frozenset(args.project or ()),
            team=args.team,
        )
        report = build_report(scan, ledger, request, at)
    if args.html is not None:
        size = write_html(report, args.html)
        common.progress(not args.quiet)(
            f"wrote {args.html} ({size / 1024:,.0f} KiB); open it in a browser"
        )
    print_report(args.format, report, at)
    sys.stdout.flush()
    code, message = scan_outcome(scan, calls)
    if message:
        print(f"costguard: {message}", file=sys.stderr)
    return code


def register(sub: Any, flags: common.Flags) -> None:
    """Add ``report`` to the ``costguard`` parser."""
    from costguard.cli.ledger import month_name

    report = sub.add_parser(
        "report",
        parents=[flags.profile, flags.regions, format_flag(), flags.quiet],
        help="the month's spend, budgets, forecasts and actions, as a page (--html) or a table",
        description=(
            "The month on one page: per project the spend by day against the budget and the "
            "forecast to month end with its range; spend by project and kind; the top "
            "resources; actions and savings; advice; findings. It runs a read-only scan "
            "(as `costguard scan`) and reads the month from --table's ledger, never writing it."
        ),
    )
    report.add_argument(
        "--table",
        type=common.table_name,
        help="deployed ledger table to read, never write (default: none: the month is "
        "back-filled from launch times)",
    )
    report.add_argument(
        "--scope", type=common.SCOPE, help="ledger scope to read (default: the account id)"
    )
    report.add_argument("--month", type=month_name, help="YYYY-MM (default: this month)")
    report.add_argument(
        "--project",
        action="append",
        type=common.PROJECT,
        metavar="NAME",
        help="only this project; repeat for several (default: every project)",
    )
    report.add_argument(
        "--team",
        type=common.TEAM,
        metavar="NAME",
        help="only the projects of team NAME (costguard:team tags or the project table's team)",
    )
    report.add_argument(
        "--html",
        type=common.file_path,
        metavar="FILE",
        help="also write the page to FILE: one self-contained HTML file, works offline",
    )
    report.set_defaults(func=cmd_report)
