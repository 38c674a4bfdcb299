"""Render a scan report: the documented JSON (the envelope's ``data``), the rows of
``--format csv`` and ``markdown``, and the readable text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from costguard.cli.output import UNPRICED, Cell, Column, Table, rate_cell, usd_cell
from costguard.domain.money import cents, per_hour, rate
from costguard.domain.spend import month_split_cents
from costguard.domain.text import plural

if TYPE_CHECKING:
    from costguard.domain.attribution import AttributedResource
    from costguard.domain.models import Resource
    from costguard.domain.predictions import PredictionCost
    from costguard.domain.teams import TeamReport
    from costguard.services.scan import ProjectReport, ScanReport


def _num(value: Decimal | None, places: str = "cents") -> float | None:
    if value is None:
        return None
    return float(cents(value) if places == "cents" else rate(value))


def resource_json(
    a: AttributedResource, costs: Mapping[str, PredictionCost] | None = None
) -> dict[str, Any]:
    r = a.priced.resource
    out = _resource_json(a)
    cost = (costs or {}).get(r.key)
    if cost is not None:
        # Additive: an endpoint variant's cost per 1,000 predictions (None: no traffic,
        # unpriced or unknown, as ``cost_per_prediction_status`` says; never $0).
        shown = cost.as_dict()
        out["usd_per_1000_predictions"] = shown["usd_per_1000_predictions"]
        out["cost_per_prediction_status"] = shown["status"]
    return out


def _resource_json(a: AttributedResource) -> dict[str, Any]:
    r = a.priced.resource
    return {
        "id": r.id,
        "key": r.key,
        "kind": r.kind.value,
        "region": r.region,
        "instance_type": r.instance_type,
        "count": r.count,
        "lifecycle": r.lifecycle.value,
        "usd_per_hour": _num(a.priced.usd_per_hour, "rate"),
        "priced": a.priced.priced,
        "price_basis": a.priced.basis,
        "project": a.project,
        "attributed_via": a.via or None,
        "owner": a.owner,
        "name": r.name,
        "launched_at": r.launched_at.isoformat() if r.launched_at else None,
        # compute, or storage (EBS volumes and snapshots, S3 buckets): storage counts in
        # the project's run-rate and month-to-date like compute, labelled here.
        "category": r.category,
        "volume": (
            {
                "type": r.volume_type,
                "size_gib": r.size_gib,
                "attached_to": r.attached_to,
                "iops": r.iops or None,
                "throughput_mibps": r.throughput_mibps or None,
            }
            if r.volume_type
            else None
        ),
        "snapshot": (
            {
                "charged_gib": r.size_gib,
                "source_volume": r.attached_to,
                "storage_tier": r.storage_tier,
            }
            if r.kind.value == "ebs-snapshot"
            else None
        ),
        "bucket": (
            {
                "stored_bytes": dict(r.stored_bytes),
                # BucketSizeBytes prices storage only: requests, retrievals and
                # transfer are billed on top and not seen by the scan.
                "requests_included": False,
            }
            if r.kind.value == "s3-bucket"
            else None
        ),
        "accelerator": (
            {
                "kind": r.accelerator.kind.value,
                "name": r.accelerator.name,
                "count": r.accelerator.count,
            }
            if r.accelerator
            else None
        ),
    }


def _by_category(p: ProjectReport) -> dict[str, float | None]:
    """The project's run-rate split into compute and storage (its sum is the run-rate)."""
    split: dict[str, Decimal] = {"compute": Decimal(0), "storage": Decimal(0)}
    for a in p.resources:
        r = a.priced.resource
        if r.billable and a.priced.usd_per_hour is not None:
            split[r.category] += a.priced.usd_per_hour
    return {k: _num(v, "rate") for k, v in split.items()}


def _mtd_by_category(total: Decimal, split: Mapping[str, Decimal]) -> dict[str, float]:
    """The month-to-date split into compute, storage and not_split (spend accrued before
    the ledger split months by category, never guessed into compute): its sum is the
    month-to-date, to the cent."""
    return {k: float(v) for k, v in month_split_cents(total, split).items()}


def describe(r: Resource) -> str:
    """What a resource is, in a report's line: its type, a volume's size (and IOPS and
    throughput where its type bills them), a snapshot's or a bucket's stored size."""
    if r.instance_type:
        return r.instance_type
    if r.volume_type:
        extra = ""
        if r.volume_type in ("gp3", "io1", "io2") and r.iops:
            extra = f", {r.iops} IOPS"
        if r.volume_type == "gp3" and r.throughput_mibps:
            extra += f", {r.throughput_mibps} MiB/s"
        return f"{r.volume_type} {r.size_gib} GiB{extra}"
    if r.kind.value == "ebs-snapshot":
        return f"snapshot {r.size_gib} GiB"
    if r.kind.value == "s3-bucket":
        gb = Decimal(sum(size for _, size in r.stored_bytes)) / 2**30
        return f"s3 {gb.quantize(Decimal('0.1'))} GB (storage only)"
    return ""


def project_json(
    p: ProjectReport, costs: Mapping[str, PredictionCost] | None = None
) -> dict[str, Any]:
    return {
        "project": p.project,
        "team": p.team,
        "budget_usd": _num(p.budget_usd),
        "budget_source": p.budget_source,
        "run_rate_usd_per_hour": _num(p.run_rate_usd_per_hour, "rate"),
        "month_to_date_usd": _num(p.month_to_date_usd),
        "month_to_date_estimated_usd": _num(p.estimated_usd),
        "forecast_month_usd": _num(p.forecast_month_usd),
        "budget_used_pct": (
            float(round(p.month_to_date_usd * 100 / p.budget_usd, 1)) if p.budget_usd else None
        ),
        "status": p.status.value,
        "owners": list(p.owners),
        "unpriced_resources": p.unpriced,
        "run_rate_by_category": _by_category(p),
        "month_to_date_by_category": _mtd_by_category(
            p.month_to_date_usd, p.month_to_date_by_category
        ),
        "savings": {
            "actions_this_month": p.savings.actions,
            "usd_per_hour": _num(p.savings.usd_per_hour, "rate"),
            "month_to_date_usd_estimated": _num(p.savings.month_to_date_usd_estimated),
        },
        "resources": [resource_json(a, costs) for a in p.resources],
    }


def team_json(t: TeamReport) -> dict[str, Any]:
    """A team: the sums of its projects' figures, and its own budget."""
    return {
        "team": t.team,
        "projects": list(t.projects),
        "budget_usd": _num(t.budget_usd),
        "budget_source": t.budget_source,
        "run_rate_usd_per_hour": _num(t.run_rate_usd_per_hour, "rate"),
        "month_to_date_usd": _num(t.month_to_date_usd),
        "month_to_date_estimated_usd": _num(t.estimated_usd),
        "month_to_date_by_category": _mtd_by_category(
            t.month_to_date_usd, t.month_to_date_by_category
        ),
        "forecast_month_usd": _num(t.forecast_month_usd),
        "budget_used_pct": (
            float(round(t.month_to_date_usd * 100 / t.budget_usd, 1)) if t.budget_usd else None
        ),
        "status": t.status.value,
        "owners": list(t.owners),
        "accounts": sorted(t.accounts),
    }


def report_json(report: ScanReport) -> dict[str, Any]:
    costs = {c.key: c for c in report.prediction_costs}
    unattributed = project_json(report.unattributed, costs)
    return {
        "scope": report.scope,
        "scanned_at": report.now.isoformat(),
        "month": report.month,
        "regions": list(report.regions),
        "price_catalog_as_of": report.catalog_as_of,
        # Which catalog: the one the price-refresh Lambda stored, or the package's own.
        "price_catalog_source": report.catalog.source if report.catalog else "given",
        "price_catalog_version": report.catalog.version if report.catalog else None,
        "ledger": report.ledger.value,
        "projects": [project_json(p, costs) for p in report.projects],
        "teams": [team_json(t) for t in report.teams],
        "unattributed": {
            "run_rate_usd_per_hour": unattributed["run_rate_usd_per_hour"],
            "month_to_date_usd": unattributed["month_to_date_usd"],
            "month_to_date_by_category": unattributed["month_to_date_by_category"],
            "forecast_month_usd": unattributed["forecast_month_usd"],
            "resources": unattributed["resources"],
        },
        "pending_capacity": [
            {
                "nodegroup": p.nodegroup.id,
                "region": p.nodegroup.region,
                "instance_type": p.nodegroup.instance_type,
                "desired": p.nodegroup.desired_size,
                "running": p.running,
                "pending": p.pending,
            }
            for p in report.pending_capacity
        ],
        "findings": [f.as_dict() for f in report.findings],
        "advice": [a.as_dict() for a in report.advice],
        # Each endpoint variant's $ per 1,000 predictions, now and per UTC day.
        "cost_per_prediction": [c.as_dict() for c in report.prediction_costs],
        "cost_of_scan": {
            "duration_s": round(report.duration_s, 3),
            "api_calls": dict(sorted(report.api_calls.items())),
            "api_calls_total": sum(report.api_calls.values()),
        },
    }


def _money(value: Decimal | None) -> str:
    return "-" if value is None else f"${cents(value):,}"


def _nothing(report: ScanReport) -> str:
    """What a scan with no project row says: an empty account, or one it could not read
    (an empty report must never look like an empty account)."""
    if report.failed_sources:
        n = len(report.failed_sources)
        return (
            f"Nothing to show: {plural(n, 'source')} could not be read (see the scan-failed "
            "findings); what they hold is missing, not zero."
        )
    return "No GPU or accelerator resources found, and no spend this month."


def report_table(report: ScanReport, top: int = 3, colour: bool | None = None) -> str:
    """The scan as text for a person. Columns widen to their longest cell: a project name
    or a resource id is never cut (a cut id names another resource, or none). The status
    is coloured on a terminal (``colour`` None: when stdout is one and NO_COLOR is unset).

    Each project lists its ``top`` resources, unpriced first (their spend is unknown, the
    first thing to fix), then says how many more it has: a list cut with no word read as
    the whole project."""
    from costguard.cli import terminal

    colour = terminal.colour_enabled() if colour is None else colour
    heading = ["PROJECT", "BUDGET", "RUN-RATE/H", "MONTH-TO-DATE", "FORECAST"]
    projects: list[list[str]] = [heading]
    resources: list[list[str]] = []
    statuses: list[str] = ["STATUS"]
    #: (project row index, its resource rows' indexes, how many more it has, its
    #: month-to-date by category), in order
    layout: list[tuple[int, list[int], int, str]] = []
    for p in (*report.projects, report.unattributed):
        if p.project is None and not p.resources and not p.month_to_date_usd:
            continue
        projects.append(
            [
                p.project if p.project is not None else "(unattributed)",
                _money(p.budget_usd),
                per_hour(p.run_rate_usd_per_hour)[:-2],
                _money(p.month_to_date_usd),
                _money(p.forecast_month_usd),
            ]
        )
        statuses.append(p.status.value if p.project is not None else "")
        split_line = _split_line(p.month_to_date_usd, p.month_to_date_by_category)
        mine = []
        billable = [a for a in p.resources if a.priced.resource.billable]
        # Unpriced first, then as the report orders them (stable: the most expensive first).
        billable.sort(key=lambda a: a.priced.usd_per_hour is not None)
        for a in billable[:top]:
            r = a.priced.resource
            price = "UNPRICED" if a.priced.usd_per_hour is None else per_hour(a.priced.usd_per_hour)
            what = describe(r)
            market = r.lifecycle.value if r.instance_type else ""
            count = f"{r.count} x " if r.count > 1 else ""
            mine.append(len(resources))
            resources.append([r.kind.value, r.id, count + what, market, price])
        layout.append((len(projects) - 1, mine, max(len(billable) - top, 0), split_line))
    project_lines = terminal.columns(projects, right=frozenset({1, 2, 3, 4}))
    resource_lines = terminal.columns(resources, right=frozenset({4}))
    lines = [
        f"CostGuard scan of {', '.join(report.regions)} at {report.now:%Y-%m-%d %H:%M} UTC "
        f"(prices as of {report.catalog_as_of}"
        + (
            f", {report.catalog.source} catalog v{report.catalog.version})"
            if report.catalog
            else ")"
        ),
        "",
        # Defect: an account with nothing to report printed a header row alone.
        f"{project_lines[0]}  STATUS" if layout else _nothing(report),
    ]
    for row, mine, more, split_line in layout:
        status = statuses[row]
        # The status after the aligned columns, coloured alone: escape codes never shift them.
        lines.append(f"{project_lines[row]}  {terminal.status(status, colour)}".rstrip())
        if split_line:
            lines.append(f"    {split_line}")
        lines += [f"    {resource_lines[i]}" for i in mine]
        if more:
            lines.append(
                f"    … and {plural(more, 'more resource')} (--format csv lists every one)"
            )
    if report.teams:
        lines += ["", *team_lines(report.teams, colour)]
    if report.pending_capacity:
        lines += ["", "Pending capacity (desired but not running, not yet spend):"]
        for pc in report.pending_capacity:
            lines.append(
                f"    {pc.nodegroup.key}: {pc.pending} x {pc.nodegroup.instance_type} pending"
            )
    lines += _prediction_lines(report, top)
    if report.advice:
        lines += ["", f"Advice ({len(report.advice)}):"]
        for adv in report.advice:
            lines.append(f"  {adv.code.value:<24} {adv.resource}: {adv.why}")
    if report.findings:
        lines += ["", f"Findings ({len(report.findings)}):"]
        for f in report.findings:
            lines.append(f"  [{f.severity.value:<7}] {f.code.value:<22} {f.resource}: {f.message}")
    calls = sum(report.api_calls.values())
    lines += [
        "",
        f"Scan took {report.duration_s:.2f}s"
        + (f" and {plural(calls, 'AWS API call')}." if calls else "."),
    ]
    return "\n".join(lines)


def _split_line(total: Decimal, split: Mapping[str, Decimal]) -> str:
    """``month-to-date: compute $3.00, storage $0.30`` where the month holds storage or
    spend not split by category; nothing for a month of compute alone (its total says it)."""
    shown = month_split_cents(total, split)
    if not shown.get("storage") and not shown.get("not_split"):
        return ""
    parts = [f"compute {_money(shown['compute'])}", f"storage {_money(shown['storage'])}"]
    if shown.get("not_split"):
        parts.append(f"not split {_money(shown['not_split'])} (accrued before the split)")
    return "month-to-date: " + ", ".join(parts)


#: The text lists the endpoint variants dearest per prediction first, this many of them.
PREDICTION_LINES = 10


def _prediction_lines(report: ScanReport, top: int) -> list[str]:
    """Endpoint variants' $ per 1,000 predictions over the last 24 h, dearest first, then
    those without a figure (no traffic first: they bill for nothing); JSON has them all."""
    costs = report.prediction_costs
    if not costs:
        return []
    ranked = sorted(
        costs,
        key=lambda c: (
            c.usd_per_1000 is None,
            -(c.usd_per_1000 or 0),
            c.status.value != "no traffic",
            c.key,
        ),
    )
    shown = ranked[: max(top, PREDICTION_LINES)]
    several = len({c.account for c in costs}) > 1  # an Organization's roll-up: say whose
    lines = [
        "",
        f"Cost per 1,000 predictions, last 24 h ({plural(len(costs), 'endpoint variant')}):",
    ]
    for c in shown:
        figure = (
            f"${rate(c.usd_per_1000)} per 1,000" if c.usd_per_1000 is not None else c.status.value
        )
        whose = f"{c.account} {c.region} " if several else ""
        lines.append(f"    {whose}{c.endpoint}/{c.variant}: {figure}; {c.reason}")
    if len(costs) > len(shown):
        lines.append(
            f"    … and {plural(len(costs) - len(shown), 'more variant')} (--json lists every one)"
        )
    return lines


def team_lines(teams: Sequence[TeamReport], colour: bool) -> list[str]:
    """The teams as text: each the sum of its projects, with its own budget and status."""
    from costguard.cli import terminal

    rows = [["TEAM", "BUDGET", "RUN-RATE/H", "MONTH-TO-DATE", "FORECAST"]]
    for t in teams:
        rows.append(
            [
                t.team,
                _money(t.budget_usd),
                per_hour(t.run_rate_usd_per_hour)[:-2],
                _money(t.month_to_date_usd),
                _money(t.forecast_month_usd),
            ]
        )
    shown = terminal.columns(rows, right=frozenset({1, 2, 3, 4}))
    width = max(len("STATUS"), *(len(t.status.value) for t in teams))
    out = [
        f"Teams ({len(teams)}), each the sum of its projects:",
        f"{shown[0]}  {'STATUS'.ljust(width)}  PROJECTS",
    ]
    for line, t in zip(shown[1:], teams, strict=True):
        status = terminal.status(t.status.value, colour, width)
        out.append(f"{line}  {status}  {', '.join(t.projects) or '(none yet)'}")
    return out


# -- --format csv and markdown -------------------------------------------------------------

#: The CSV's columns: one row per project (``row`` = project: its budget, run-rate,
#: month-to-date and forecast) followed by one row per resource of it (``row`` =
#: resource: its type, region, owner and $/h). The ledger accrues spend by project, not by
#: resource, so a resource row has no month-to-date; sum ``usd_per_hour`` over the
#: resource rows, or read it from the project row, never both.
SCAN_COLUMNS = (
    Column("account", "Account"),
    Column("row", "Row"),
    Column("project", "Project"),
    Column("owner", "Owner"),
    Column("resource_kind", "Type"),
    Column("resource", "Resource"),
    Column("instance_type", "Instance type"),
    Column("region", "Region"),
    Column("lifecycle", "Market"),
    Column("count", "Count", "right"),
    Column("usd_per_hour", "$/h", "right"),
    Column("priced", "Priced"),
    Column("month_to_date_usd", "Month-to-date", "right"),
    Column("forecast_month_usd", "Forecast", "right"),
    Column("budget_usd", "Budget", "right"),
    Column("status", "Status"),
)
#: The unattributed resources' project cell in markdown (empty in CSV).
UNATTRIBUTED = "(unattributed)"
#: Markdown lists the most expensive resources only: a pull-request comment holds 65,536
#: characters. CSV lists them all.
MARKDOWN_RESOURCES = 50


def _project_row(account: str, p: ProjectReport) -> dict[str, str | Cell]:
    return {
        "account": account,
        "row": "project",
        "project": Cell(p.project or UNATTRIBUTED, p.project or ""),
        "owner": ";".join(p.owners),
        "usd_per_hour": rate_cell(p.run_rate_usd_per_hour),
        "month_to_date_usd": usd_cell(p.month_to_date_usd),
        "forecast_month_usd": usd_cell(p.forecast_month_usd),
        "budget_usd": usd_cell(p.budget_usd),
        "status": p.status.value if p.project is not None else "",
    }


def _resource_row(account: str, project: Cell, a: AttributedResource) -> dict[str, str | Cell]:
    r = a.priced.resource
    what = describe(r)
    return {
        "account": account,
        "row": "resource",
        "project": project,
        "owner": a.owner or "",
        "resource_kind": r.kind.value,
        "resource": r.id,
        # Markdown shows the count with the type, as the text does ("2 x ml.g4dn.2xlarge"):
        # the $/h is the whole endpoint's. CSV has its own count column.
        "instance_type": Cell(f"{r.count} x {what}", what) if r.count > 1 else what,
        "region": r.region,
        "lifecycle": r.lifecycle.value if r.instance_type else "",
        "count": str(r.count),
        "usd_per_hour": rate_cell(a.priced.usd_per_hour),
        "priced": "priced" if a.priced.priced else UNPRICED,
    }


def _shown(p: ProjectReport) -> bool:
    return p.project is not None or bool(p.resources) or bool(p.month_to_date_usd)


def predictions_across(reports: Sequence[tuple[str | None, ScanReport]]) -> list[dict[str, Any]]:
    """Every account's endpoint variants' cost per 1,000 predictions in one list, each
    with its account and region (its key carries both): the figures as each account's
    scan computed them, so no traffic, unpriced and unknown stay what they are."""
    out = []
    for account, report in reports:
        for c in report.prediction_costs:
            out.append({"account": c.account or account, "region": c.region, **c.as_dict()})
    return sorted(out, key=lambda row: str(row["resource"]))


def scan_tables(
    reports: Sequence[tuple[str | None, ScanReport]],
) -> tuple[Table, tuple[Table, ...]]:
    """The CSV's one table (projects and their resources), and markdown's two: projects,
    then the most expensive resources (unpriced first: they hide the largest mistakes)."""
    rows: list[dict[str, str | Cell]] = []
    projects: list[dict[str, str | Cell]] = []
    resources: list[tuple[AttributedResource, dict[str, str | Cell]]] = []
    for account, report in reports:
        who = account or report.scope
        for p in (*report.projects, report.unattributed):
            if not _shown(p):
                continue
            row = _project_row(who, p)
            rows.append(row)
            projects.append(row)
            project = row["project"]
            assert isinstance(project, Cell)
            for a in p.resources:
                if a.priced.resource.billable:
                    rrow = _resource_row(who, project, a)
                    rows.append(rrow)
                    resources.append((a, rrow))
    several = len(reports) > 1
    account_column: tuple[Column, ...] = (Column("account", "Account"),) if several else ()
    by_cost = sorted(
        resources,
        key=lambda ar: (ar[0].priced.usd_per_hour is not None, -(ar[0].priced.usd_per_hour or 0)),
    )
    shown = by_cost[:MARKDOWN_RESOURCES]
    left = len(by_cost) - len(shown)
    project_table = Table(
        (
            *account_column,
            Column("project", "Project"),
            Column("budget_usd", "Budget", "right"),
            Column("usd_per_hour", "Run-rate", "right"),
            Column("month_to_date_usd", "Month-to-date", "right"),
            Column("forecast_month_usd", "Forecast", "right"),
            Column("status", "Status"),
        ),
        projects,
        title="Projects",
    )
    resource_table = Table(
        (
            *account_column,
            Column("project", "Project"),
            Column("owner", "Owner"),
            Column("resource_kind", "Type"),
            Column("resource", "Resource"),
            Column("instance_type", "Instance"),
            Column("region", "Region"),
            Column("usd_per_hour", "$/h", "right"),
        ),
        [row for _, row in shown],
        title="Resources"
        + (
            f" (the {len(shown)} most expensive of {len(by_cost)}; --format csv lists all)"
            if left
            else ""
        ),
    )
    return Table(SCAN_COLUMNS, rows), (project_table, resource_table)


def scan_markdown_heading(reports: Sequence[ScanReport]) -> str:
    """Markdown's first line: what was scanned, when, and at which prices."""
    if not reports:
        return "CostGuard scan: no account scanned"
    first = reports[0]
    regions = ", ".join(dict.fromkeys(r for report in reports for r in report.regions))
    accounts = f" of {len(reports)} accounts" if len(reports) > 1 else ""
    return (
        f"CostGuard scan{accounts} of {regions} at {first.now:%Y-%m-%d %H:%M} UTC "
        f"(prices as of {first.catalog_as_of})"
    )
