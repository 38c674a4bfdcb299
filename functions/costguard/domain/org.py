"""An Organization's scan, cut in slices: one (account, region) per work item per scheduled time.

Pure: what a slice is, where its ledger lives, what a scheduled time's plan holds, and how
the slices roll up into projects across accounts. The store of plans is
:class:`costguard.services.org.SliceBook`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal

from costguard.domain.advice import Advice
from costguard.domain.alerts import (
    MAX_LINE_CHARS,
    Alert,
    AlertKind,
    AlertSeverity,
    clip,
    utc_label,
    utc_stamp,
)
from costguard.domain.calendar import require_utc
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.money import ZERO
from costguard.domain.predictions import PredictionCost
from costguard.domain.spend import add_days, month_split
from costguard.domain.teams import TeamConfig, TeamSettlement, settle_teams
from costguard.domain.text import plural
from costguard.domain.windows import within

ACCOUNT_RE = re.compile(r"[0-9]{12}")
REGION_RE = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]")


@dataclass(frozen=True, slots=True, order=True)
class Slice:
    """One account in one region: the unit of work, of retry and of ledger."""

    account: str
    region: str

    def __post_init__(self) -> None:
        if not ACCOUNT_RE.fullmatch(self.account):
            raise ValueError(f"not a 12-digit account id: {self.account!r}")
        if not REGION_RE.fullmatch(self.region):
            raise ValueError(f"not a region name: {self.region!r}")

    @property
    def key(self) -> str:
        return f"{self.account}/{self.region}"

    @classmethod
    def parse(cls, key: str) -> Slice:
        account, _, region = key.partition("/")
        return cls(account, region)


def slice_scope(org_scope: str, s: Slice) -> str:
    """The ledger scope of one slice: its own watermark, totals and snapshot.

    A slice commits alone (one watermark compare-and-set per account-region), so a
    duplicate or a retry of it is refused by the ledger, and a late one (its time is
    before the slice's watermark) adds nothing: the next commit accrues its interval.
    """
    return f"{org_scope}/{s.account}/{s.region}"


@dataclass(frozen=True, slots=True)
class SliceFailure:
    code: str
    message: str
    attempts: int


@dataclass(frozen=True, slots=True)
class TickPlan:
    """What one scheduled time expects, what came in, and whether it was aggregated."""

    tick: datetime
    expected: frozenset[Slice]
    deadline: datetime
    done: frozenset[Slice] = frozenset()
    failures: Mapping[Slice, SliceFailure] = field(default_factory=dict)
    #: When the aggregation is done (set only after its reads, findings and alerts).
    aggregated_at: datetime | None = None
    #: While an aggregation holds the time (claimed, not done): when its lease runs out
    #: and the deadline sweep may take it over (its holder crashed or was throttled).
    aggregation_expires: datetime | None = None
    #: Slices not scanned at this time (empty now) whose spend earlier this month the
    #: aggregation still rolls up: a GPU that stopped does not take its month-to-date
    #: out of the project's total. Never awaited: they are not ``expected``.
    carried: frozenset[Slice] = frozenset()
    #: The budgets each done slice found tagged on its projects' resources (the lowest
    #: per project in that slice), written with "done": the roll-up settles them as one
    #: account's scan does (see :func:`settle_tag_budgets`).
    tag_budgets: Mapping[Slice, Mapping[str, Decimal]] = field(default_factory=dict)
    #: The owners each done slice found tagged on its projects' resources, written with
    #: "done": the roll-up unions them (see :func:`settle_tag_owners`).
    tag_owners: Mapping[Slice, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)
    #: The team each done slice's scan settled for its projects (project -> team), and the
    #: team budgets it found tagged (team -> the lowest), written with "done": the roll-up
    #: settles them across accounts as one account's scan does (see :func:`settle_org_teams`).
    tag_teams: Mapping[Slice, Mapping[str, str]] = field(default_factory=dict)
    tag_team_budgets: Mapping[Slice, Mapping[str, Decimal]] = field(default_factory=dict)
    #: The advice each done slice's scan gave (with the project of its resource), kept only
    #: on the times of the digest hour: the roll-up's daily advice digest.
    advice: Mapping[Slice, tuple[ProjectAdvice, ...]] = field(default_factory=dict)
    #: Each done slice's endpoint variants' cost per 1,000 predictions, as its scan computed
    #: them (at most :data:`MAX_PREDICTIONS`), written with "done". A done slice absent
    #: here did not report them (a done item of an older version): "not reported", never
    #: "no endpoint" and never $0. Present and empty: its scan saw no endpoint variant.
    predictions: Mapping[Slice, tuple[PredictionCost, ...]] = field(default_factory=dict)
    #: Variants a done slice's scan had beyond what its done item keeps (or could not be
    #: read back): counted, so the roll-up says some are missing rather than none.
    predictions_cut: Mapping[Slice, int] = field(default_factory=dict)

    @property
    def rolled_up(self) -> frozenset[Slice]:
        """Every slice whose ledger the aggregation reads."""
        return self.expected | self.carried

    @property
    def missing(self) -> tuple[Slice, ...]:
        return tuple(sorted(self.expected - self.done))

    @property
    def complete(self) -> bool:
        # ``not self.missing`` without sorting what is missing (asked after every mark)
        return self.expected <= self.done


def missing_slice_findings(plan: TickPlan) -> list[Finding]:
    """One ``scan-failed`` finding per slice that did not come in, naming the account."""
    out = []
    for s in plan.missing:
        failure = plan.failures.get(s)
        why = (
            f"failed {plural(failure.attempts, 'time')}, last with {failure.code}: {failure.message}"
            if failure
            else "no result before the deadline"
        )
        out.append(
            Finding(
                FindingCode.SCAN_FAILED,
                f"account/{s.account}/{s.region}",
                clip(
                    f"account {s.account} in {s.region} is missing from the scan of "
                    f"{utc_label(plan.tick)}: {why}; its spend is unknown, not $0",
                    MAX_LINE_CHARS,
                ),
                Severity.ERROR,
            )
        )
    return out


def missing_slices_alert(plan: TickPlan, now: datetime) -> Alert | None:
    """One alert for the accounts missing from a scheduled time, each named.

    Deduplicated per account per UTC day (of the scheduled time), as the fan-out's
    unreachable-account alert: an account that fails every tick (its member role deleted)
    is alerted once a day, not 96 times; the finding stays per time. An alert goes out
    when at least one of its accounts was not alerted that day (it still names all).
    """
    missing = plan.missing
    if not missing:
        return None
    now = require_utc(now)
    accounts = sorted({s.account for s in missing})
    lines = []
    for s in missing[:20]:
        f = plan.failures.get(s)
        lines.append(
            clip(
                f"{s.account} {s.region}: "
                + (
                    f"{f.code} after {plural(f.attempts, 'attempt')}: {f.message}"
                    if f
                    else "no result"
                ),
                MAX_LINE_CHARS,
            )
        )
    if len(missing) > 20:
        lines.append(f"and {plural(len(missing) - 20, 'more account-region')}")
    codes = sorted({plan.failures[s].code for s in missing if s in plan.failures})
    title = (
        f"CostGuard could not scan account {accounts[0]}"
        if len(accounts) == 1
        else f"CostGuard could not scan {plural(len(accounts), 'account')}"
    )
    return Alert(
        alert_id=f"{AlertKind.SCAN_FAILED}/org/{utc_stamp(plan.tick)}",
        kind=AlertKind.SCAN_FAILED,
        project=None,
        severity=AlertSeverity.WARNING,
        title=title + (f": {', '.join(codes)}" if codes else ""),
        summary=(
            f"{plural(len(missing), 'account-region')} of the scan of {utc_label(plan.tick)} did not "
            f"come in ({', '.join(accounts[:5])}{', ...' if len(accounts) > 5 else ''}). "
            "Until they do, what runs there is missing from budgets and forecasts: unknown, "
            "not $0. The other accounts were scanned and counted."
        ),
        at=now,
        why="a slice failed every attempt, or did not finish before the deadline",
        next_steps=(
            "Check that the account has the CostGuard member stack (role "
            "costguard-member-read) and that the hub may assume it.",
            "A slice that comes in late is counted by the next scan, never twice.",
        ),
        facts={"accounts": ", ".join(accounts[:10]), "scheduled_time": utc_label(plan.tick)},
        details=tuple(lines),
        dedupe=tuple(f"missing-slice/{require_utc(plan.tick):%Y%m%d}/{a}" for a in accounts),
    )


@dataclass(frozen=True, slots=True)
class ProjectRollup:
    """One project across every account and region of the Organization."""

    project: str | None
    month_to_date_usd: Decimal = ZERO
    estimated_usd: Decimal = ZERO
    run_rate_usd_per_hour: Decimal = ZERO
    accounts: frozenset[str] = frozenset()
    #: The month-to-date by category (compute, storage, not split), summed over slices.
    month_to_date_by_category: Mapping[str, Decimal] = field(
        default_factory=lambda: month_split(ZERO, {})
    )


#: A slice's figures of one project: (month-to-date, estimated, run-rate), and optionally
#: the month-to-date by category as its ledger row holds it (None: not split).
SliceFigures = (
    tuple[Decimal, Decimal, Decimal]
    | tuple[Decimal, Decimal, Decimal, Mapping[str, Decimal] | None]
)


def roll_up(
    per_slice: Iterable[tuple[Slice, Mapping[str | None, SliceFigures]]],
) -> dict[str | None, ProjectRollup]:
    """Sum each project's (month-to-date, estimated, run-rate) over the slices it appears in,
    and its month-to-date by category: a slice whose row has no split adds "not split"."""
    out: dict[str | None, ProjectRollup] = {}
    for s, projects in per_slice:
        for project, figures in projects.items():
            mtd, est, rate = figures[:3]
            by_category = figures[3] if len(figures) > 3 else None  # type: ignore[misc]
            r = out.get(project) or ProjectRollup(project)
            out[project] = ProjectRollup(
                project,
                r.month_to_date_usd + mtd,
                r.estimated_usd + est,
                r.run_rate_usd_per_hour + rate,
                r.accounts | {s.account},
                add_days(r.month_to_date_by_category, month_split(mtd, by_category)),
            )
    return out


@dataclass(frozen=True, slots=True)
class ProjectAdvice:
    """One piece of a slice's advice and the project of the resource it is about."""

    project: str | None
    advice: Advice


#: Advice kept per project and slice (the digest lists the 25 largest of a project).
MAX_ADVICE_PER_PROJECT = 25
#: A piece's explanation as kept (a done item stays small).
MAX_WHY_CHARS = 300
#: Advice kept per slice in all (the largest first). A piece is up to ~0.8 KB with its
#: project's name (256 characters), its resource key and its clipped explanation, so at
#: most ~80 KB: beside the owners (~100 KB), teams (64 KB) and cost per prediction
#: (~110 KB), a done item at every bound at once stays under DynamoDB's 400 KB (measured:
#: tests/org/test_done_item_within_bounds.py).
MAX_ADVICE_PIECES = 100


def bounded_advice(pieces: Iterable[ProjectAdvice]) -> tuple[ProjectAdvice, ...]:
    """At most :data:`MAX_ADVICE_PER_PROJECT` per project (the largest savings), each
    explanation clipped: what a done item carries."""
    grouped: dict[str | None, list[ProjectAdvice]] = {}
    for piece in pieces:
        grouped.setdefault(piece.project, []).append(piece)
    kept: list[ProjectAdvice] = []
    for project in sorted(grouped, key=lambda p: (p is None, p or "")):
        best = sorted(
            grouped[project], key=lambda a: (-a.advice.usd_per_month_saving, a.advice.resource)
        )
        kept.extend(
            ProjectAdvice(a.project, replace(a.advice, why=a.advice.why[:MAX_WHY_CHARS]))
            for a in best[:MAX_ADVICE_PER_PROJECT]
        )
    if len(kept) > MAX_ADVICE_PIECES:
        largest = sorted(kept, key=lambda a: (-a.advice.usd_per_month_saving, a.advice.resource))[
            :MAX_ADVICE_PIECES
        ]
        chosen = {id(a) for a in largest}
        kept = [a for a in kept if id(a) in chosen]
    return tuple(kept)


def in_digest_window(tick: datetime, digest_hour_utc: int, period: timedelta) -> bool:
    """Whether ``tick`` is one of the first scheduled times at or after the day's digest
    hour (within an hour, or one scan period when that is longer): the times whose
    slices keep their advice for the roll-up's daily digest."""
    tick = require_utc(tick)
    start = tick.replace(hour=digest_hour_utc, minute=0, second=0, microsecond=0)
    return within(tick, start, start + max(period, timedelta(hours=1)))


#: Endpoint variants whose cost per prediction a done item keeps, the dearest an hour
#: first: each is at most ~1.1 KB (its key, a clipped reason, 8 days), so at most ~110 KB,
#: beside the advice (~80 KB), owners (~100 KB) and teams (64 KB), under DynamoDB's 400 KB.
MAX_PREDICTIONS = 100
#: A variant's reason as kept.
MAX_REASON_CHARS = 300


def bounded_predictions(
    costs: Iterable[PredictionCost],
) -> tuple[tuple[PredictionCost, ...], int]:
    """What a done item carries of a slice's cost per prediction: at most
    :data:`MAX_PREDICTIONS` variants (the dearest an hour first: unpriced ones after the
    priced, by key), each reason clipped; and how many were left out."""
    ranked = sorted(
        costs,
        key=lambda c: (c.usd_per_hour is None, -(c.usd_per_hour or ZERO), c.key),
    )
    kept = tuple(replace(c, reason=c.reason[:MAX_REASON_CHARS]) for c in ranked[:MAX_PREDICTIONS])
    return tuple(sorted(kept, key=lambda c: c.key)), len(ranked) - len(kept)


def unreported_predictions(plan: TickPlan) -> tuple[Slice, ...]:
    """The done slices whose cost per prediction is not in the plan: their done item was
    written by an older version. Their endpoints' figures are unknown, not $0."""
    return tuple(sorted(plan.done - set(plan.predictions)))


def rolled_up_predictions(plan: TickPlan) -> tuple[PredictionCost, ...]:
    """Every done slice's endpoint variants, each keyed by account and region as in the
    member's scan, in key order: the figures as the member computed them, never re-derived
    (no traffic and unknown stay so)."""
    return tuple(
        sorted((c for costs in plan.predictions.values() for c in costs), key=lambda c: c.key)
    )


#: Owners kept per project and slice, and rolled up per project: an alert names a few
#: people, not a directory (the rest still see it on the topic's other subscriptions).
MAX_OWNERS = 20
#: Owners kept per slice in all, across its projects (400 x 254 characters is ~100 KB:
#: a done item stays far under DynamoDB's 400 KB however many projects a slice holds).
MAX_OWNER_ENTRIES = 400


def bounded_owners(owners: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, ...]]:
    """At most :data:`MAX_OWNERS` per project and :data:`MAX_OWNER_ENTRIES` in all (projects
    in name order), each clipped to an e-mail's 254 characters, empties dropped: what a
    done item carries, whatever the tags held."""
    out: dict[str, tuple[str, ...]] = {}
    left = MAX_OWNER_ENTRIES
    for project in sorted(owners):
        kept = tuple(dict.fromkeys(o.strip()[:254] for o in owners[project] if o.strip()))
        kept = kept[: min(MAX_OWNERS, left)]
        if kept:
            out[project] = kept
            left -= len(kept)
    return out


def settle_tag_owners(plan: TickPlan) -> dict[str, tuple[str, ...]]:
    """Each project's owners as its slices saw them tagged, across accounts: the union,
    in account-region order, at most :data:`MAX_OWNERS` (the central table's owners,
    where set, win over these in the caller, as in one account)."""
    merged: dict[str, list[str]] = {}
    for _s, owners in sorted(plan.tag_owners.items()):
        for project, names in owners.items():
            kept = merged.setdefault(project, [])
            kept.extend(o for o in names if o not in kept and len(kept) < MAX_OWNERS)
    return {p: tuple(o) for p, o in merged.items() if o}


def settle_tag_budgets(
    plan: TickPlan, configured: Iterable[str]
) -> tuple[dict[str, Decimal], list[Finding]]:
    """Each project's budget from the tags its slices saw, as one account's scan settles
    them (domain/attribution.py): the lowest applies, and disagreement is a finding naming
    the slices. Projects with a budget in the central table are left out: the table wins.
    """
    skip = set(configured)
    seen: dict[str, dict[Decimal, list[str]]] = {}
    for s, budgets in sorted(plan.tag_budgets.items()):
        for project, amount in budgets.items():
            if project not in skip:
                seen.setdefault(project, {}).setdefault(amount, []).append(s.key)
    settled: dict[str, Decimal] = {}
    findings: list[Finding] = []
    for project, amounts in sorted(seen.items()):
        lowest = min(amounts)
        settled[project] = lowest
        if len(amounts) > 1:
            detail = "; ".join(
                f"{amount} in {', '.join(keys[:5])}"
                + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
                for amount, keys in sorted(amounts.items())
            )
            findings.append(
                Finding(
                    FindingCode.BUDGET_CONFLICT,
                    f"project/{project}",
                    clip(
                        f"project {project!r} carries {len(amounts)} different budgets across "
                        f"accounts ({detail}); the lowest, {lowest} USD, applies",
                        MAX_LINE_CHARS,
                    ),
                )
            )
    return settled, findings


#: What a done item keeps of a slice's teams: names are up to 256 characters, so entries
#: are kept (in project-name order) while their UTF-8 stays under this many bytes, far
#: under DynamoDB's 400 KB item. Projects past it lose their tagged team in the roll-up
#: (the central table's still applies).
MAX_TEAM_BYTES = 64 * 1024


def _size(*names: str) -> int:
    return sum(len(n.encode("utf-8", "surrogatepass")) for n in names)


def bounded_teams(
    teams: Mapping[str, str], budgets: Mapping[str, Decimal]
) -> tuple[dict[str, str], dict[str, Decimal]]:
    """A slice's teams and team budgets as a done item carries them (see
    :data:`MAX_TEAM_BYTES`): team budgets first (one per team), then project -> team."""
    left = MAX_TEAM_BYTES
    kept_budgets: dict[str, Decimal] = {}
    for team in sorted(budgets):
        left -= _size(team) + 16
        if left < 0:
            break
        kept_budgets[team] = budgets[team]
    kept: dict[str, str] = {}
    for project in sorted(teams):
        left -= _size(project, teams[project])
        if left < 0:
            break
        kept[project] = teams[project]
    return kept, kept_budgets


def settle_org_teams(
    plan: TickPlan, table_teams: Mapping[str, str], team_table: Mapping[str, TeamConfig]
) -> TeamSettlement:
    """Each project's team and each team's budget across the slices, as one account's scan
    settles them: the central tables win; two teams tagged for one project in different
    accounts are a ``team-conflict`` naming the slices, and the alphabetically first applies;
    different team budgets are a ``budget-conflict`` on ``team/<name>``, the lowest applies."""
    tagged: dict[str, dict[str, list[str]]] = {}
    for s, teams in sorted(plan.tag_teams.items()):
        for project, team in teams.items():
            tagged.setdefault(project, {}).setdefault(team, []).append(s.key)
    budgets: dict[str, dict[Decimal, list[str]]] = {}
    for s, amounts in sorted(plan.tag_team_budgets.items()):
        for team, amount in amounts.items():
            budgets.setdefault(team, {}).setdefault(amount, []).append(s.key)
    settled = settle_teams(tagged, {}, table_teams, team_table, budgets)
    findings = tuple(f._replace(message=clip(f.message, MAX_LINE_CHARS)) for f in settled.findings)
    return replace(settled, findings=findings)
