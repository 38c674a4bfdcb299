"""Teams: projects rolled up one level, with budgets of their own.

A project belongs to at most one team. Where its team comes from, in order:

1. the central project table (``projects``: ``{"vision": {"team": "research"}}``);
2. otherwise the ``costguard:team`` tag on its resources. When they name several teams,
   the alphabetically first applies (a rule anyone can check by hand, and stable from one
   scan to the next, whichever resource is listed first).

Any disagreement (two teams tagged, or a tag against the table) is a ``team-conflict``
finding that names the teams, the resources that carry each, and the one that applies.

A team's budget: the central team table (``teams``: ``{"research": {"budget": 20000}}``)
wins; otherwise the lowest ``costguard:team-budget`` tagged on any resource of its projects,
and disagreement is a ``budget-conflict`` finding on ``team/<name>``, as for projects.

A team's month-to-date, run-rate and forecast are the sums of its projects'. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import reduce

from costguard.domain.findings import Finding, FindingCode
from costguard.domain.money import ZERO
from costguard.domain.spend import BudgetStatus, add_days, budget_status, month_split

#: Resources named per team or amount in a conflict finding; the rest are counted.
_SHOWN = 5


@dataclass(frozen=True, slots=True)
class TeamConfig:
    """A row of the optional central team table; overrides tags."""

    budget: Decimal | None = None
    owners: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TeamBudget:
    amount: Decimal | None
    source: str  # "table", "tag" or "none"


@dataclass(frozen=True, slots=True)
class TeamSettlement:
    """Which team each project belongs to, and each team's budget."""

    #: project -> team, for every project that has one.
    team_of: Mapping[str, str]
    budgets: Mapping[str, TeamBudget]
    findings: tuple[Finding, ...] = ()


def _refs(refs: Iterable[str]) -> str:
    shown = sorted(set(refs))
    more = len(shown) - _SHOWN
    return ", ".join(shown[:_SHOWN]) + (f" and {more} more" if more > 0 else "")


def settle_teams(
    tagged_teams: Mapping[str, Mapping[str, Iterable[str]]],
    tagged_budgets: Mapping[str, Mapping[Decimal, Iterable[str]]],
    table_teams: Mapping[str, str],
    team_table: Mapping[str, TeamConfig],
    tagged_team_budgets: Mapping[str, Mapping[Decimal, Iterable[str]]] | None = None,
) -> TeamSettlement:
    """Settle every project's team, then every team's budget.

    ``tagged_teams``: project -> team -> the resources tagged with it. ``tagged_budgets``:
    project -> amount -> the resources tagged ``costguard:team-budget`` with it (counted for
    the team the project settles to). ``table_teams``: project -> team, from the central
    project table. ``team_table``: the central team table. ``tagged_team_budgets``: team ->
    amount -> where it was tagged, when those were settled per team already (an
    Organization's slices).
    """
    findings: list[Finding] = []
    team_of: dict[str, str] = {}
    for project in sorted(set(tagged_teams) | set(table_teams)):
        seen = {team: list(refs) for team, refs in tagged_teams.get(project, {}).items()}
        central = table_teams.get(project)
        if central is not None:
            chosen, rule = central, "the central project table's team"
        elif seen:
            chosen, rule = min(seen), "the alphabetically first"
        else:  # pragma: no cover - a project is in one of the two maps
            continue
        team_of[project] = chosen
        named = set(seen) | ({central} if central is not None else set())
        if len(named) > 1:
            parts = [f"{team!r} on {_refs(refs)}" for team, refs in sorted(seen.items())]
            if central is not None:
                parts.append(f"{central!r} in the central project table")
            findings.append(
                Finding(
                    FindingCode.TEAM_CONFLICT,
                    f"project/{project}",
                    f"project {project!r} is given {len(named)} teams ({'; '.join(parts)}); "
                    f"{rule}, {chosen!r}, applies",
                )
            )

    budgets_seen: dict[str, dict[Decimal, list[str]]] = {}
    for project, amounts in tagged_budgets.items():
        team = team_of.get(project)
        if team is None:
            continue  # a team budget on a project without a team has no team to apply to
        for amount, refs in amounts.items():
            budgets_seen.setdefault(team, {}).setdefault(amount, []).extend(refs)
    for team, amounts in (tagged_team_budgets or {}).items():
        for amount, refs in amounts.items():
            budgets_seen.setdefault(team, {}).setdefault(amount, []).extend(refs)
    budgets: dict[str, TeamBudget] = {}
    for team in sorted(set(team_of.values()) | set(team_table)):
        config = team_table.get(team)
        if config is not None and config.budget is not None:
            budgets[team] = TeamBudget(config.budget, "table")
            continue
        seen_amounts = budgets_seen.get(team, {})
        if not seen_amounts:
            budgets[team] = TeamBudget(None, "none")
            continue
        lowest = min(seen_amounts)
        if len(seen_amounts) > 1:
            detail = "; ".join(
                f"{amount} on {_refs(refs)}" for amount, refs in sorted(seen_amounts.items())
            )
            findings.append(
                Finding(
                    FindingCode.BUDGET_CONFLICT,
                    f"team/{team}",
                    f"team {team!r} carries {len(seen_amounts)} different team budgets "
                    f"({detail}); the lowest, {lowest} USD, applies",
                )
            )
        budgets[team] = TeamBudget(lowest, "tag")
    return TeamSettlement(team_of, budgets, tuple(findings))


@dataclass(frozen=True, slots=True)
class ProjectFigure:
    """What a team sums from one of its projects."""

    project: str
    month_to_date_usd: Decimal
    estimated_usd: Decimal
    run_rate_usd_per_hour: Decimal
    forecast_month_usd: Decimal
    accounts: frozenset[str] = frozenset()
    #: The month-to-date by category (compute, storage, not split).
    month_to_date_by_category: Mapping[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TeamReport:
    """One team: the sum of its projects, and its own budget."""

    team: str
    projects: tuple[str, ...]
    budget_usd: Decimal | None
    budget_source: str
    run_rate_usd_per_hour: Decimal
    month_to_date_usd: Decimal
    estimated_usd: Decimal
    forecast_month_usd: Decimal
    status: BudgetStatus
    owners: tuple[str, ...] = ()
    #: The accounts its projects were seen in (an Organization's roll-up; else empty).
    accounts: frozenset[str] = frozenset()
    #: The month-to-date by category, each the sum of its projects'.
    month_to_date_by_category: Mapping[str, Decimal] = field(default_factory=dict)


def team_reports(
    projects: Iterable[ProjectFigure],
    team_of: Mapping[str, str],
    budgets: Mapping[str, TeamBudget],
    owners: Mapping[str, tuple[str, ...]],
    warning_pct: Decimal = Decimal(80),
) -> tuple[TeamReport, ...]:
    """Sum each team's projects. A team with a budget but no project yet is listed at $0
    (its budget is set; nothing is spent), so the table never hides a configured team.

    ``owners``: team -> who is told (the central team table's, else its projects' owners).
    """
    members: dict[str, list[ProjectFigure]] = {team: [] for team in budgets}
    for p in projects:
        team = team_of.get(p.project)
        if team is not None:
            members.setdefault(team, []).append(p)
    out = []
    for team in sorted(members):
        mine = sorted(members[team], key=lambda p: p.project)
        budget = budgets.get(team, TeamBudget(None, "none"))
        forecast = sum((p.forecast_month_usd for p in mine), ZERO)
        out.append(
            TeamReport(
                team=team,
                projects=tuple(p.project for p in mine),
                budget_usd=budget.amount,
                budget_source=budget.source,
                run_rate_usd_per_hour=sum((p.run_rate_usd_per_hour for p in mine), ZERO),
                month_to_date_usd=sum((p.month_to_date_usd for p in mine), ZERO),
                estimated_usd=sum((p.estimated_usd for p in mine), ZERO),
                forecast_month_usd=forecast,
                status=budget_status(budget.amount, forecast, warning_pct),
                owners=owners.get(team, ()),
                accounts=frozenset().union(*(p.accounts for p in mine)),
                month_to_date_by_category=reduce(
                    add_days, (p.month_to_date_by_category for p in mine), month_split(ZERO, {})
                ),
            )
        )
    return tuple(out)


def team_owners(
    team_of: Mapping[str, str],
    project_owners: Mapping[str, tuple[str, ...]],
    team_table: Mapping[str, TeamConfig],
    limit: int = 20,
) -> dict[str, tuple[str, ...]]:
    """Each team's owners: the central team table's, else its projects' owners (in project
    name order, at most ``limit``: an alert names a few people, not a directory)."""
    out: dict[str, list[str]] = {}
    for project in sorted(team_of):
        kept = out.setdefault(team_of[project], [])
        kept.extend(
            o for o in project_owners.get(project, ()) if o not in kept and len(kept) < limit
        )
    merged = {team: tuple(o) for team, o in out.items()}
    for team, config in team_table.items():
        if config.owners:
            merged[team] = config.owners
    return merged
