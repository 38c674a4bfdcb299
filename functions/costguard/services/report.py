"""The month report: a scan's live view and the ledger's month, as one model.

The live view (resources, run-rates, advice, findings) is a scan's: a local read-only scan,
over the deployed ledger when there is one (``costguard report --table``), or over an
in-memory one. The month (spend by day, run-rate history, the audit trail) is the ledger's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from decimal import Decimal

from costguard.domain.billed import read_billed_month
from costguard.domain.calendar import month_key, require_utc
from costguard.domain.findings import FindingCode, Severity
from costguard.domain.money import ZERO
from costguard.domain.report import (
    RATE_LOOKBACK,
    TOP_RESOURCES,
    Action,
    Actions,
    BlindSpots,
    Burn,
    KindSpend,
    Report,
    TopResource,
    actions_of,
    burn,
    group_findings,
    kind_of,
    ordered,
    team_burns,
    unpriced_types,
)
from costguard.domain.spend import month_split
from costguard.domain.tags import normalise_project
from costguard.ports import Ledger, ProjectMonth
from costguard.services.alerts import AlertSettings
from costguard.services.cost_explorer import BILLED_STATE
from costguard.services.scan import ProjectReport, ScanReport

#: The budget thresholds the alerts use, marked on each chart.
THRESHOLDS: tuple[int, ...] = AlertSettings.__dataclass_fields__["thresholds"].default  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class ReportRequest:
    month: str
    #: Only these projects (empty: all).
    projects: frozenset[str] = frozenset()
    #: Only the projects of this team (None: no narrowing): the team the scan settled
    #: from ``costguard:team`` tags and the central project table.
    team: str | None = None
    thresholds: tuple[int, ...] = THRESHOLDS
    warning_pct: Decimal = Decimal(80)


def build_report(
    scan: ScanReport,
    ledger: Ledger,
    request: ReportRequest,
    now: datetime,
    *,
    project_budgets: Callable[[str], Decimal | None] | None = None,
) -> Report:
    """The report of ``request.month`` for ``scan.scope``, as seen at ``now``."""
    now = require_utc(now)
    month, scope = request.month, scan.scope
    live = month == month_key(now)
    totals = ledger.month_totals(scope, month)
    history = ledger.rate_history(scope, now - RATE_LOOKBACK) if live else {}
    by_name = {p.project: p for p in scan.projects}
    wanted = _wanted(scan, request)
    # A closed month shows the projects that spent in it; this month also those running now.
    names = sorted(
        {p for p in totals if p is not None}
        | ({p for p in by_name if p is not None} if live else set())
    )
    burns = []
    for name in names:
        if wanted is not None and name not in wanted:
            continue
        live_row = by_name.get(name) if live else None
        # The budget is the one tagged now, for a closed month too (tags keep no history).
        tagged = by_name.get(name)
        budget = tagged.budget_usd if tagged else None
        if budget is None and project_budgets is not None:
            budget = project_budgets(name)
        burns.append(_burn(name, month, now, totals.get(name), live_row, history, request, budget))
    unattributed = None
    if wanted is None and (None in totals or (live and scan.unattributed.resources)):
        unattributed = _burn(
            None,
            month,
            now,
            totals.get(None),
            scan.unattributed if live else None,
            history,
            request,
            None,
        )
    shown = {b.project for b in burns} | ({None} if unattributed else set())
    resources = (
        [
            a
            for p in (*scan.projects, scan.unattributed)
            if p.project in shown
            for a in p.resources
            if a.priced.resource.billable
        ]
        if live
        else []
    )
    kinds: dict[str, list[Decimal | None]] = {}
    for a in resources:
        r = a.priced.resource
        kinds.setdefault(kind_of(r.kind.value, r.eks_cluster), []).append(a.priced.usd_per_hour)
    kind_rows = tuple(
        KindSpend(
            kind,  # type: ignore[arg-type]
            len(rates),
            sum((x for x in rates if x is not None), ZERO),
            sum(1 for x in rates if x is None),
        )
        for kind, rates in sorted(kinds.items(), key=lambda kv: -sum(x or ZERO for x in kv[1]))
    )
    top = sorted(
        resources,
        key=lambda a: (
            a.priced.usd_per_hour is not None,
            a.priced.usd_per_hour or ZERO,
        ),
        reverse=True,
    )[:TOP_RESOURCES]
    top_rows = tuple(
        TopResource(
            key=a.priced.resource.key,
            name=a.priced.resource.name or a.priced.resource.id,
            kind=kind_of(a.priced.resource.kind.value, a.priced.resource.eks_cluster),
            instance_type=a.priced.resource.instance_type or "",
            region=a.priced.resource.region,
            project=a.project,
            owner=a.owner,
            usd_per_hour=a.priced.usd_per_hour,
        )
        for a in top
    )
    events = [
        (e.at, e.action, e.resource, e.outcome, dict(e.details))
        for e in ledger.audit_trail(scope, month)
    ]
    actions = actions_of(events)
    if wanted is not None:
        actions = _narrow_actions(actions, wanted)
    advice = (
        tuple(
            (a.code.value, a.resource, a.usd_per_month_saving, a.why)
            for a in sorted(scan.advice, key=lambda a: -a.usd_per_month_saving)
            if wanted is None or _project_of(scan, a.resource) in wanted
        )
        if live
        else ()
    )
    catalog_age = _age(scan.catalog_as_of, now)
    team_of = {p.project: p.team for p in scan.projects if p.project and p.team}
    team_budgets = {t.team: t.budget_usd for t in scan.teams}
    if wanted is not None:  # narrowed: only the teams of the projects shown
        team_budgets = {
            t: b for t, b in team_budgets.items() if t in {team_of.get(p) for p in wanted}
        }
    teams = team_burns(burns, team_of, team_budgets, request.warning_pct)
    billed = read_billed_month(ledger.get_state(scope, BILLED_STATE.format(month=month))[0])
    if billed is not None and wanted is not None:
        billed = replace(billed, rows=tuple(r for r in billed.rows if r.project in wanted))
    prediction_costs = (
        tuple(
            c for c in scan.prediction_costs if wanted is None or _project_of(scan, c.key) in wanted
        )
        if live
        else ()
    )
    return Report(
        scope=scope,
        month=month,
        generated_at=now,
        burns=ordered(burns),
        unattributed=unattributed,
        kinds=kind_rows,
        top=top_rows,
        actions=actions,
        advice=advice,
        findings=group_findings(scan.findings) if live else (),
        catalog_as_of=scan.catalog_as_of,
        catalog_age_days=catalog_age,
        blind=BlindSpots(
            unreadable=_unreadable(scan) if live else (),
            unpriced_types=unpriced_types(
                (a.priced.resource.instance_type, a.priced.usd_per_hour) for a in resources
            ),
            month_to_date_only=tuple(
                b.project or "unattributed"
                for b in (*burns, *([unattributed] if unattributed else []))
                if not b.has_days and b.month_to_date > 0
            ),
            not_split=tuple(
                b.project or "unattributed"
                for b in (*burns, *([unattributed] if unattributed else []))
                if b.not_split
            ),
        ),
        thresholds=tuple(sorted(set(request.thresholds))),
        live=live,
        narrowed=_narrowed(request),
        teams=teams,
        team_of=team_of,
        billed=billed,
        prediction_costs=prediction_costs,
    )


def _wanted(scan: ScanReport, request: ReportRequest) -> set[str] | None:
    """The projects the report is narrowed to; None: every project and the unattributed."""
    wanted: set[str] | None = set(request.projects) if request.projects else None
    if request.team is not None:
        name = normalise_project(request.team) or request.team
        team = {p.project for p in scan.projects if p.project is not None and p.team == name}
        wanted = team if wanted is None else wanted & team
    return wanted


def _project_of(scan: ScanReport, key: str) -> str | None:
    for p in scan.projects:
        if any(a.priced.resource.key == key for a in p.resources):
            return p.project
    return scan.advice_projects.get(key)


def _narrow_actions(actions: Actions, wanted: set[str]) -> Actions:
    def keep(items: Sequence[Action]) -> tuple[Action, ...]:
        return tuple(a for a in items if a.project in wanted)

    taken, would = keep(actions.taken), keep(actions.would)
    return replace(
        actions,
        taken=taken,
        pending=keep(actions.pending),
        would=would,
        saved_usd_per_month=sum((a.usd_per_month for a in taken), ZERO),
        would_save_usd_per_month=sum((a.usd_per_month for a in would), ZERO),
    )


def _burn(
    project: str | None,
    month: str,
    now: datetime,
    row: ProjectMonth | None,
    live: ProjectReport | None,
    history: dict[str, list[tuple[datetime, Decimal]]],
    request: ReportRequest,
    budget: Decimal | None,
) -> Burn:
    # A month no scan has accrued yet (its first minutes) has no row: nothing spent, by day.
    days = row.days if row is not None else {}
    return burn(
        project,
        month,
        now,
        budget=budget,
        month_to_date=row.usd if row else ZERO,
        days=days,
        undated_usd=row.undated_usd if row else ZERO,
        run_rate=live.run_rate_usd_per_hour if live else ZERO,
        rate_samples=history.get(project or "", []) if project else [],
        thresholds=request.thresholds,
        warning_pct=request.warning_pct,
        unpriced=live.unpriced if live else 0,
        owners=live.owners if live else (),
        by_category=month_split(row.usd, row.by_category) if row else month_split(ZERO, {}),
    )


def _age(as_of: str, now: datetime) -> int | None:
    try:
        return (now.date() - date.fromisoformat(as_of[:10])).days
    except ValueError:
        return None


def _narrowed(request: ReportRequest) -> tuple[str, ...]:
    """What the report was narrowed to, for its heading."""
    out = []
    if request.projects:
        out.append(f"project {', '.join(sorted(request.projects))}")
    if request.team is not None:
        out.append(f"team {request.team}")
    return tuple(out)


def _unreadable(scan: ScanReport) -> tuple[str, ...]:
    """What the scan could not read, as its scan-failed findings name it: the part of a
    source that failed (``us-east-1/sagemaker/studio-apps``), not the whole source.
    Defect: when only Studio apps failed, the page said it "could not read
    us-east-1/sagemaker" and that its spend was missing, notebooks and endpoints included."""
    named = {
        f.resource
        for f in scan.findings
        if f.code is FindingCode.SCAN_FAILED and f.severity is Severity.ERROR
    }
    for region, source in scan.failed_sources:
        whole = f"{region}/{source}"
        if not any(
            n == whole or n.startswith(f"{whole}/") or n.endswith(f"/{whole}") or f"/{whole}/" in n
            for n in named
        ):
            named.add(whole)
    return tuple(sorted(named))
