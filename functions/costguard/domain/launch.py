"""A launch, judged on its own within a minute: the project's figures as the last scan
left them, and the alerts a launch raises. Pure: the on-launch service feeds it; what the
event says is :mod:`costguard.domain.launch_events`, the project's policy
:mod:`costguard.domain.launch_policy`.

Three questions are asked of one accelerator that just started:

- **Whose is it?** No project: ``unattributed-spend``, the scan's own alert and claim
  (one per resource and UTC day), sent now rather than at the next scan.
- **Does it break the project's policy?** A $/h above the project's limit, on-demand
  capacity where the project requires spot, a region the deployment does not allow:
  ``launch-policy``, claimed once per resource and cause.
- **Does it take the project over budget?** The project's month-to-date and run-rate as
  the last scan left them (:class:`ProjectFigures`), plus this resource for the rest of
  the month: ``budget-forecast``, the scan's own alert and claim, naming the launch.
- **Does it take the project's team over its budget?** The team's sums as the last scan
  left them (:class:`TeamFigures`), plus this resource: the scan's team ``budget-forecast``
  and its claim (``team-budget/...``), naming the launch and the project it runs for.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from costguard.domain.alerts import (
    Alert,
    AlertKind,
    AlertResource,
    ProjectNumbers,
    budget_alerts,
    unattributed_alert,
)
from costguard.domain.calendar import month_key, require_utc
from costguard.domain.launch_policy import LaunchPolicy, ProjectPolicy, rate_label
from costguard.domain.models import Resource
from costguard.domain.money import ZERO, cents, per_hour
from costguard.domain.spend import forecast_month_end
from costguard.domain.tags import parse_budget
from costguard.domain.teams import TeamConfig
from costguard.domain.text import plural, truncate

#: The state document the scan's alert step leaves for the on-launch check.
FIGURES_STATE = "project-figures"
#: The figures document's JSON at most (a DynamoDB item holds 400 KB, keys included).
FIGURES_MAX_BYTES = 350_000
#: Past this, a project's figures are too old to forecast from (three missed daily scans).
FIGURES_MAX_AGE = timedelta(days=3)


# -- the project's figures, as the last scan left them ------------------------------------


@dataclass(frozen=True, slots=True)
class ProjectFigures:
    """One project at the last scan: what the launch check forecasts from."""

    at: datetime
    month_to_date: Decimal
    run_rate: Decimal
    budget: Decimal | None = None
    owners: tuple[str, ...] = ()
    policy: ProjectPolicy = field(default_factory=ProjectPolicy)
    #: The team the scan settled the project to (None: none).
    team: str | None = None


@dataclass(frozen=True, slots=True)
class TeamFigures:
    """One team at the last scan (the sums of its projects): what the launch check forecasts
    the team from."""

    at: datetime
    month_to_date: Decimal
    run_rate: Decimal
    budget: Decimal | None = None
    #: Where the budget came from: "table" (the central teams table) or "tag".
    budget_source: str = ""
    owners: tuple[str, ...] = ()
    #: Its projects, by name (the first :data:`TEAM_PROJECTS_KEPT`).
    projects: tuple[str, ...] = ()


#: A team row keeps this many of its projects' names (an alert names a few, not all).
TEAM_PROJECTS_KEPT = 20


def encode_figures(
    at: datetime,
    figures: Mapping[str, ProjectFigures],
    teams: Mapping[str, TeamFigures] | None = None,
) -> dict[str, Any]:
    """The state document, within one ledger item (:data:`FIGURES_MAX_BYTES` of JSON). A row
    is about 100 bytes, but a project name may be 256 characters of escaped Unicode: when
    they do not all fit, the projects spending the most per hour are kept, and a launch of
    one left out is judged as its project's first resource. Teams are few and go first."""
    room = FIGURES_MAX_BYTES - 120  # the envelope: {"at": ..., "projects": {}, "teams": {}}
    kept_teams, room = _fit(
        {name: _team_row(t) for name, t in (teams or {}).items()},
        lambda n: ((teams or {})[n].run_rate, (teams or {})[n].month_to_date),
        room,
    )
    kept, _ = _fit(
        {name: _figures_row(f) for name, f in figures.items()},
        lambda n: (figures[n].run_rate, figures[n].month_to_date),
        room,
    )
    doc: dict[str, Any] = {"at": require_utc(at).isoformat(), "projects": kept}
    if kept_teams:
        doc["teams"] = kept_teams
    return doc


def _fit(
    rows: Mapping[str, dict[str, Any]], weight: Any, room: int
) -> tuple[dict[str, dict[str, Any]], int]:
    """The rows that fit in ``room`` bytes of JSON, the heaviest (``weight``) first; sorted."""
    kept: dict[str, dict[str, Any]] = {}
    for name in sorted(rows, key=lambda n: (*(-w for w in weight(n)), n)):
        size = len(json.dumps({name: rows[name]}, sort_keys=True, default=str))
        if size > room:
            continue
        kept[name] = rows[name]
        room -= size
    return dict(sorted(kept.items())), room


def _team_row(t: TeamFigures) -> dict[str, Any]:
    return {
        "mtd": str(t.month_to_date),
        "rate": str(t.run_rate),
        **(
            {"budget": str(t.budget), "budget_source": t.budget_source}
            if t.budget is not None
            else {}
        ),
        **({"owners": list(t.owners[:5])} if t.owners else {}),
        **({"projects": list(t.projects[:TEAM_PROJECTS_KEPT])} if t.projects else {}),
    }


def _figures_row(f: ProjectFigures) -> dict[str, Any]:
    return {
        "mtd": str(f.month_to_date),
        "rate": str(f.run_rate),
        **({"team": f.team} if f.team is not None else {}),
        **({"budget": str(f.budget)} if f.budget is not None else {}),
        **({"owners": list(f.owners[:5])} if f.owners else {}),
        **(
            {"limit": str(f.policy.max_usd_per_hour), "limit_source": f.policy.limit_source}
            if f.policy.max_usd_per_hour is not None
            else {}
        ),
        **({"spot": True} if f.policy.require_spot else {}),
    }


def _dated_rows(doc: Mapping[str, Any], section: str) -> tuple[datetime, Mapping[Any, Any]] | None:
    """A figures document's instant and one section's rows (``projects``, ``teams``); None
    when the instant cannot be read. A section of another shape holds no rows."""
    try:
        at = require_utc(datetime.fromisoformat(str(doc["at"])))
    except (KeyError, TypeError, ValueError):
        return None
    rows = doc.get(section) or {}
    return at, rows if isinstance(rows, Mapping) else {}


def decode_figures(doc: Mapping[str, Any], defaults: LaunchPolicy) -> dict[str, ProjectFigures]:
    """The figures a state document holds; an unreadable row is skipped (no figure beats a
    wrong one: the launch is then judged as the project's first resource)."""
    read = _dated_rows(doc, "projects")
    if read is None:
        return {}
    at, rows = read
    out: dict[str, ProjectFigures] = {}
    for name, row in rows.items():
        try:
            if not isinstance(row, Mapping):
                continue
            budget = parse_budget(str(row["budget"])) if "budget" in row else None
            limit = _amount(row["limit"]) if "limit" in row else None
            owners, spot = row.get("owners", []), row.get("spot", False)
            team = row.get("team")
            if (
                not isinstance(owners, list)
                or not isinstance(spot, bool)
                or not isinstance(team, str | None)
            ):
                continue  # another shape than encode_figures writes: not guessed at
            out[str(name)] = ProjectFigures(
                at,
                _amount(row["mtd"]),
                _amount(row["rate"]),
                budget if isinstance(budget, Decimal) else None,
                tuple(str(o) for o in owners),
                ProjectPolicy(limit, str(row.get("limit_source", "")), spot, defaults.regions),
                team,
            )
        except (KeyError, TypeError, ValueError, ArithmeticError):
            continue
    return out


def decode_team_figures(doc: Mapping[str, Any]) -> dict[str, TeamFigures]:
    """The teams a state document holds (none in a document from before teams were left
    there); an unreadable row is skipped, as a project's is."""
    read = _dated_rows(doc, "teams")
    if read is None:
        return {}
    at, rows = read
    out: dict[str, TeamFigures] = {}
    for name, row in rows.items():
        try:
            if not isinstance(row, Mapping):
                continue
            budget = parse_budget(str(row["budget"])) if "budget" in row else None
            owners, projects = row.get("owners", []), row.get("projects", [])
            if not isinstance(owners, list) or not isinstance(projects, list):
                continue
            out[str(name)] = TeamFigures(
                at,
                _amount(row["mtd"]),
                _amount(row["rate"]),
                budget if isinstance(budget, Decimal) else None,
                str(row.get("budget_source", "")) if isinstance(budget, Decimal) else "",
                tuple(str(o) for o in owners),
                tuple(str(p) for p in projects),
            )
        except (KeyError, TypeError, ValueError, ArithmeticError):
            continue
    return out


#: No figure of one project reaches this ($1 trillion): larger is garbage, and overflows
#: the cents arithmetic of an alert.
_MAX_AMOUNT = Decimal(10) ** 12


def _amount(value: Any) -> Decimal:
    """A finite amount from $0 to :data:`_MAX_AMOUNT` of a figures row; anything else is
    unreadable (NaN or Infinity would raise in every later comparison, 1e999 overflows the
    cents of an alert, a negative limit breach every launch)."""
    amount = Decimal(str(value))
    if not amount.is_finite() or not ZERO <= amount <= _MAX_AMOUNT:
        raise ValueError(f"not an amount: {truncate(str(value), 20)!r}")
    return amount


def figures_at(
    figures: ProjectFigures | TeamFigures | None, now: datetime
) -> tuple[Decimal, Decimal]:
    """(month-to-date now, run-rate) carried forward from the last scan at its run-rate; a
    month that has turned since starts again from zero. Unknown or stale figures: zero."""
    if figures is None or now - figures.at > FIGURES_MAX_AGE:
        return ZERO, ZERO
    since = max(figures.at, now.replace(day=1, hour=0, minute=0, second=0, microsecond=0))
    hours = Decimal(max((now - since).total_seconds(), 0)) / 3600
    base = figures.month_to_date if month_key(figures.at) == month_key(now) else ZERO
    return base + figures.run_rate * hours, figures.run_rate


def counted_by_scan(resource: Resource, figures: ProjectFigures | None) -> bool:
    """True when the last scan ran after this resource started, and so counts its rate."""
    return (
        figures is not None
        and resource.launched_at is not None
        and resource.launched_at.astimezone(UTC) <= figures.at
    )


def launch_forecast_alert(
    project: str,
    figures: ProjectFigures | None,
    budget: Decimal | None,
    cause: AlertResource,
    counted: bool,
    now: datetime,
    thresholds: Sequence[int],
    *,
    owners: Sequence[str] | None = None,
    also: Sequence[AlertResource] = (),
) -> Alert | None:
    """``budget-forecast`` for the project with this launch running to the month's end, or
    None while the forecast stays under the budget. The scan's own alert and claim: the
    scan will not send it again this month, so it goes to the project's ``owners`` (by
    default those the last scan knew). ``also``: the launch's other resources of the
    project the last scan has not counted (an endpoint's other variants), added too."""
    if budget is None or budget <= 0:
        return None
    now = require_utc(now)
    mtd, rate = figures_at(figures, now)
    added = ZERO if counted else (cause.usd_per_hour or ZERO)
    added += sum((r.usd_per_hour or ZERO for r in also), ZERO)
    after = rate + added
    forecast = forecast_month_end(mtd, after, now)
    if forecast < budget:
        return None
    if owners is None:
        owners = figures.owners if figures else ()
    numbers = ProjectNumbers(project, budget, mtd, forecast, after, tuple(owners), (cause, *also))
    found = [
        a for a in budget_alerts(numbers, thresholds, now) if a.kind is AlertKind.BUDGET_FORECAST
    ]
    if not found:
        return None
    alert = found[0]
    what = f"{cause.instance_type or cause.kind} {cause.key.rsplit('/', 1)[-1]}"
    if also:
        what = f"{what} (+{plural(len(also), 'more resource')})"
    before = forecast_month_end(mtd, rate, now)
    if added and before < budget:
        lead = (
            f"The launch of {what} ({per_hour(added)}) takes {project}'s forecast to "
            f"${cents(forecast):,}, over its ${cents(budget):,} budget for {month_key(now)}."
        )
    else:
        lead = (
            f"{project}'s forecast is ${cents(forecast):,}, over its ${cents(budget):,} budget "
            f"for {month_key(now)}; {what} ({rate_label(cause)}) just started."
        )
    return replace(
        alert,
        title=f"{project}: launch of {what} takes the forecast over budget"
        if added and before < budget
        else alert.title,
        summary=lead,
        why=f"launch of {what}: month-to-date plus the new run-rate for the rest of the month exceeds the budget",
        facts={**alert.facts, "cause": what},
    )


def launch_unattributed_alert(
    resource: AlertResource, now: datetime, launched_by: str | None
) -> Alert | None:
    """The scan's unattributed-spend alert for this one resource (its claim: once a day)."""
    alert = unattributed_alert([resource], now)
    if alert is None:
        return None
    who = launched_by or "not known yet (CloudTrail records the launch within about 5 minutes)"
    what = f"{resource.instance_type or resource.kind} {resource.key.rsplit('/', 1)[-1]}"
    monthly = (
        f" (about ${cents(resource.usd_per_hour * 730):,} a month)"
        if resource.usd_per_hour is not None
        else " (its type is not in the price catalog yet: not free, unknown)"
    )
    return replace(
        alert,
        title=f"Just launched with no project: {what}, {rate_label(resource)}",
        summary=(
            f"{what} started in {resource.region} without a costguard:project tag, costing "
            f"{rate_label(resource)}{monthly}. Nobody's budget sees it."
        ),
        facts={"run_rate": rate_label(resource), "launched_by": who},
    )


# -- the project's team ---------------------------------------------------------------------


def launch_team(
    table_team: str | None, tagged: Iterable[str], known: ProjectFigures | None
) -> str | None:
    """The team of a launched resource's project, by the scan's rule: the central projects
    table's; else the alphabetically first of the launch's own ``costguard:team`` tags and
    the team the last scan settled the project to (None: no team)."""
    if table_team is not None:
        return table_team
    named = {*tagged, *([known.team] if known is not None and known.team else [])}
    return min(named) if named else None


def launch_team_budget(
    config: TeamConfig | None, scanned: TeamFigures | None, tagged: Iterable[Decimal]
) -> Decimal | None:
    """The team's budget, by the scan's rule: the central teams table's; else the lowest of
    the last scan's tagged one and the launch's own ``costguard:team-budget`` (a budget the
    last scan took from the table is this deployment's table, read as it is now)."""
    if config is not None and config.budget is not None:
        return config.budget
    amounts = list(tagged)
    if scanned is not None and scanned.budget is not None and scanned.budget_source == "tag":
        amounts.append(scanned.budget)
    return min(amounts) if amounts else None


def launch_team_forecast_alert(
    team: str,
    figures: TeamFigures | None,
    budget: Decimal | None,
    project: str,
    cause: AlertResource,
    counted: bool,
    now: datetime,
    thresholds: Sequence[int],
    *,
    projects: Sequence[str],
    owners: Sequence[str],
    joining: Sequence[ProjectFigures] = (),
    also: Sequence[AlertResource] = (),
) -> Alert | None:
    """The team's ``budget-forecast`` with this launch (of ``project``) running to the month's
    end, or None while the team's forecast stays under its budget. The scan's own team alert
    and claim (``team-budget/<team>/<month>/<budget>/forecast-100``): sent once per team,
    budget and month, by the launch or the scan, whichever comes first. ``joining``: the
    figures of the launch's projects the last scan did not count in this team (a project
    whose first ``costguard:team`` tag is this launch's), added to the team's."""
    if budget is None or budget <= 0:
        return None
    now = require_utc(now)
    mtd, rate = figures_at(figures, now)
    for joined in joining:
        more_mtd, more_rate = figures_at(joined, now)
        mtd, rate = mtd + more_mtd, rate + more_rate
    added = ZERO if counted else (cause.usd_per_hour or ZERO)
    added += sum((r.usd_per_hour or ZERO for r in also), ZERO)
    after = rate + added
    forecast = forecast_month_end(mtd, after, now)
    if forecast < budget:
        return None
    members = tuple(sorted(set(projects)))
    numbers = ProjectNumbers(
        team,
        budget,
        mtd,
        forecast,
        after,
        tuple(owners),
        (cause, *also),
        members=members,
        team=True,
    )
    found = [
        a for a in budget_alerts(numbers, thresholds, now) if a.kind is AlertKind.BUDGET_FORECAST
    ]
    if not found:
        return None
    alert = found[0]
    what = f"{cause.instance_type or cause.kind} {cause.key.rsplit('/', 1)[-1]}"
    if also:
        what = f"{what} (+{plural(len(also), 'more resource')})"
    shown = ", ".join(members[:10]) + (
        f" and {len(members) - 10} more" if len(members) > 10 else ""
    )
    before = forecast_month_end(mtd, rate, now)
    took = bool(added) and before < budget
    if took:
        lead = (
            f"The launch of {what} ({per_hour(added)}) in project {project} takes team "
            f"{team}'s forecast to ${cents(forecast):,}, over its ${cents(budget):,} team "
            f"budget for {month_key(now)} (the team's projects: {shown})."
        )
    else:
        lead = (
            f"Team {team}'s forecast is ${cents(forecast):,}, over its ${cents(budget):,} team "
            f"budget for {month_key(now)}; {what} ({rate_label(cause)}) of project {project} "
            f"just started (the team's projects: {shown})."
        )
    return replace(
        alert,
        # The point first: a subject line is cut at 100 characters, from the end.
        title=f"team {team}: a launch in {project} takes the team over budget ({what})"
        if took
        else alert.title,
        summary=lead,
        why=(
            f"launch of {what} in {project}: the team's month-to-date plus its new run-rate "
            "for the rest of the month exceeds the team budget"
        ),
        facts={**alert.facts, "cause": what, "launched_in": project},
        # Only the launch is listed: the steps say so, and name the team's other projects.
        next_steps=(
            f"If {what} is not needed, stop it; if it is, look in the team's other projects "
            f"({shown}) for what can stop.",
            *alert.next_steps[1:],
        ),
    )
