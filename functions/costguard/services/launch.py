"""The on-launch check: one resource, judged within a minute of its launch.

An EventBridge event names a resource that started. The check reads that resource alone
(never a scan), prices it from the scan's catalog, finds its project by the scan's tag
rules, and judges it by the domain rules the scan's alerts use
(:mod:`costguard.domain.launch_events`, :mod:`~costguard.domain.launch_policy`,
:mod:`~costguard.domain.launch`). It sends through the scan's
:class:`~costguard.services.alerts.AlertService`, under the scan's claims: what the event
sent, the next scan does not send again, and an event delivered twice sends once.

Nothing an event says is trusted beyond naming the resource: the account must be this
deployment's (or, in an Organization, a member's), the resource is read back from AWS,
and a resource that is gone or no longer running is left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from costguard.adapters.aws import unknown_region
from costguard.domain.attribution import ProjectConfig, attribute
from costguard.domain.calendar import require_utc
from costguard.domain.launch import (
    FIGURES_STATE,
    counted_by_scan,
    decode_figures,
    decode_team_figures,
    launch_forecast_alert,
    launch_team,
    launch_team_budget,
    launch_team_forecast_alert,
    launch_unattributed_alert,
)
from costguard.domain.launch_events import (
    LAUNCH_STATES,
    LaunchEvent,
    Refused,
    launcher_from_tags,
    parse_launch_event,
)
from costguard.domain.launch_policy import (
    LaunchPolicy,
    breaches,
    project_policy,
    read_policy_tags,
    stricter,
)
from costguard.domain.models import Lifecycle, ResourceKind
from costguard.domain.pricing import PriceCatalog, Pricer
from costguard.domain.tags import TagKeys, read_tags
from costguard.domain.teams import TeamConfig
from costguard.ports import SourceError
from costguard.services.alerts import AlertRun, AlertService, alert_resource

if TYPE_CHECKING:
    from decimal import Decimal

    from costguard.domain.alerts import Alert, AlertResource
    from costguard.domain.findings import Finding
    from costguard.domain.launch import ProjectFigures, TeamFigures
    from costguard.ports import CatalogSource, LaunchedResourceReader, StateStore


#: project -> (its figures, its budget, its owners, [(resource, counted by the scan)])
_Launched = dict[
    str,
    tuple[
        "ProjectFigures | None",
        "Decimal | None",
        tuple[str, ...],
        list[tuple["AlertResource", bool]],
    ],
]


class Outcome(StrEnum):
    ALERTED = "alerted"
    #: Judged, and nothing new to say (in policy, attributed, under budget; or sent before).
    QUIET = "quiet"
    #: Not a launch CostGuard judges (a CPU instance, a stopped resource, a gone one).
    IGNORED = "ignored"
    #: Malformed, out of time bounds, or from an account this deployment does not watch.
    REFUSED = "refused"
    #: The resource could not be read (a permission, a throttle, a member role): retried.
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    reason: str
    event: LaunchEvent | None = None
    resource: str = ""
    alerts: tuple[Alert, ...] = ()
    findings: tuple[Finding, ...] = ()
    #: Who launched it, and where that came from ("event", "tags", "cloudtrail", "").
    launched_by: str | None = None


@dataclass(frozen=True, slots=True)
class LaunchSettings:
    scope: str
    #: The account this deployment runs in ('' when unknown: a local run).
    account: str
    tag_keys: TagKeys = field(default_factory=TagKeys)
    projects: Mapping[str, ProjectConfig] = field(default_factory=dict)
    policy: LaunchPolicy = field(default_factory=LaunchPolicy)
    thresholds: tuple[int, ...] = (50, 80, 100)
    #: The central team table (budgets and owners of teams), which overrides tags.
    teams: Mapping[str, TeamConfig] = field(default_factory=dict)


class AccountNotWatched(Exception):
    """The event's account is neither this deployment's nor a member it may enter."""


class AccountUnreachable(Exception):
    """A member account this deployment watches could not be entered (its role)."""


#: account -> the reader of that account's resources (raises AccountNotWatched or
#: AccountUnreachable).
Readers = Callable[[str], "LaunchedResourceReader"]


class LaunchCheck:
    def __init__(
        self,
        readers: Readers,
        catalog: PriceCatalog | CatalogSource,
        state: StateStore,
        alerts: AlertService,
        settings: LaunchSettings,
    ) -> None:
        self._readers = readers
        self._catalog_source = None if isinstance(catalog, PriceCatalog) else catalog
        self._catalog = catalog if isinstance(catalog, PriceCatalog) else None
        self._state = state
        self._alerts = alerts
        self._s = settings

    def check(self, raw: object, now: datetime) -> tuple[list[Verdict], AlertRun]:
        """Judge every launch an event reports. Never raises for the event: the verdicts say
        what was done; the run's failures are for the caller to raise (retry, DLQ)."""
        now = require_utc(now)
        parsed = parse_launch_event(raw, now)
        if isinstance(parsed, Refused):
            outcome = Outcome.REFUSED if parsed.hostile else Outcome.IGNORED
            return [Verdict(outcome, parsed.reason)], AlertRun()
        verdicts: list[Verdict] = []
        run = AlertRun()
        for event in parsed:
            verdict, sent = self._one(event, now)
            verdicts.append(verdict)
            run = run + sent
        return verdicts, run

    def _catalog_now(self) -> PriceCatalog:
        if self._catalog is None:
            assert self._catalog_source is not None
            self._catalog = self._catalog_source.read()[0]
        return self._catalog

    def _one(self, event: LaunchEvent, now: datetime) -> tuple[Verdict, AlertRun]:
        unknown = unknown_region(event.region)
        if unknown is not None:
            # Shaped like a region but none botocore can reach (us-east-9): reading it
            # would fail at DNS, be retried twice and dead-letter, alarming on nothing.
            return Verdict(Outcome.REFUSED, unknown, event), AlertRun()
        try:
            reader = self._readers(event.account)
        except AccountNotWatched as exc:
            return Verdict(Outcome.REFUSED, str(exc), event), AlertRun()
        except AccountUnreachable as exc:
            return Verdict(Outcome.FAILED, str(exc), event), AlertRun()
        ref = f"{event.account}/{event.region}/{event.kind.value}/{event.resource_id}"
        try:
            described = reader.describe(event.kind, event.region, event.resource_id)
        except SourceError as exc:  # denied, throttled, unreachable: retried by the caller
            return Verdict(Outcome.FAILED, str(exc), event, ref), AlertRun()
        if described is None:
            return Verdict(Outcome.IGNORED, "the resource no longer exists", event, ref), AlertRun()
        if not described.resources:
            return Verdict(
                Outcome.IGNORED, described.why or "not an accelerator", event, ref
            ), AlertRun()
        live = [r for r in described.resources if r.state in LAUNCH_STATES[r.kind]]
        if not live:
            state = described.resources[0].state or "unknown"
            # A late or reordered event (``running`` after ``stopped``): the resource's
            # state now is what counts.
            return (
                Verdict(Outcome.IGNORED, f"it is {state} now, not running", event, ref),
                AlertRun(),
            )
        catalog = self._catalog_now()
        spot_types = sorted(
            {
                r.instance_type
                for r in live
                if r.kind is ResourceKind.EC2_INSTANCE
                and r.lifecycle is Lifecycle.SPOT
                and r.instance_type
            }
        )
        spot = reader.spot_prices(event.region, spot_types, now) if spot_types else {}
        pricer = Pricer(catalog, spot, now.date())
        priced = []
        findings: list[Finding] = list(described.findings)
        for r in (*live, *described.parents):
            item, found = pricer.price(r)
            priced.append(item)
            if r in live:
                findings.extend(found)
        attribution = attribute(priced, self._s.tag_keys, self._s.projects, self._s.teams)
        findings.extend(f for f in attribution.findings if f.code.value != "unattributed")
        doc = self._state.get_state(self._s.scope, FIGURES_STATE)[0]
        figures = decode_figures(doc, self._s.policy)
        team_figures = decode_team_figures(doc)
        #: project -> (its launched resources' costguard:team tags, costguard:team-budget tags)
        team_tags: dict[str, tuple[set[str], list[Decimal]]] = {}
        alerts: list[Alert] = []
        policy_run = AlertRun()
        launched: _Launched = {}
        launched_by, launched_source = event.launched_by, "event" if event.launched_by else ""
        for a in attribution.resources:
            res = a.priced.resource
            if res.key not in {r.key for r in live} or not res.billable:
                continue
            # AWS's own tags, then CloudTrail, then a settable automation tag: a person
            # cannot hide behind a karpenter.sh/nodepool tag when CloudTrail names them.
            if launched_by is None:
                launched_by = launcher_from_tags(res.tags, aws_only=True)
                launched_source = "tags" if launched_by else ""
            if launched_by is None:
                launched_by = reader.launcher(res, now)
                launched_source = "cloudtrail" if launched_by else ""
            if launched_by is None:
                launched_by = launcher_from_tags(res.tags)
                launched_source = "tags" if launched_by else ""
            ar = alert_resource(a)
            if a.project is None:
                alert = launch_unattributed_alert(ar, now, launched_by)
                if alert is not None:
                    alerts.append(alert)
                continue
            known = figures.get(a.project)
            tagged = read_policy_tags(res.key, res.tags)
            findings.extend(tagged.findings)
            policy = project_policy([tagged], self._s.projects.get(a.project), self._s.policy)
            if known is not None:
                # Only the tags of the project's other resources come from the last scan: the
                # deployment's limit and the projects table are this deployment's, as now.
                scanned = known.policy
                if scanned.limit_source != "tag":
                    scanned = replace(scanned, max_usd_per_hour=None, limit_source="")
                policy = stricter(policy, scanned)
            broken = breaches(res, a.priced.usd_per_hour, policy)
            # The scan's owners, and this launch's own (a project's first resource has
            # no figures yet, and its owner tag is the only one who can be told).
            owners = tuple(
                dict.fromkeys(
                    [*(known.owners if known else ()), *attribution.owners.get(a.project, ())]
                )
            )
            # Claimed cause by cause, as the scan does: a cause it sent is not named again.
            policy_run = policy_run + self._alerts.attempt_policy(
                ar, a.project, broken, now, owners=owners, launched_by=launched_by
            )
            budget = attribution.budgets.get(a.project)
            # The scan's rule: the table's budget, else the lowest tagged one (the last
            # scan's, or this launch's own when it is lower: the claim key carries it).
            if budget is not None and budget.source == "table":
                amount = budget.amount
            else:
                budgets = [
                    b
                    for b in (known.budget if known else None, budget.amount if budget else None)
                    if b is not None
                ]
                amount = min(budgets) if budgets else None
            launched.setdefault(a.project, (known, amount, owners, []))[3].append(
                (ar, counted_by_scan(res, known))
            )
            # Read as the scan reads them (a malformed one is a finding of attribute's).
            parsed = read_tags(res.key, res.tags, self._s.tag_keys)
            named, amounts = team_tags.setdefault(a.project, (set(), []))
            named.update([parsed.team] if parsed.team is not None else [])
            amounts.extend([parsed.team_budget] if parsed.team_budget is not None else [])
        # One forecast per project, with every resource of this launch the last scan has
        # not counted (an endpoint's variants together, not each alone).
        for project, (known, amount, owners, items) in launched.items():
            fresh = [ar for ar, counted in items if not counted]
            ranked = sorted(fresh or [items[0][0]], key=lambda r: -(r.usd_per_hour or 0))
            forecast = launch_forecast_alert(
                project,
                known,
                amount,
                ranked[0],
                not fresh,
                now,
                self._s.thresholds,
                owners=owners,
                also=ranked[1:],
            )
            if forecast is not None:
                alerts.append(forecast)
        alerts.extend(self._team_forecasts(launched, team_tags, team_figures, now))
        run = policy_run + self._alerts.attempt_delivery(alerts)
        sent = tuple(run.sent)
        outcome = Outcome.ALERTED if sent else Outcome.QUIET
        if run.failed and not sent:
            outcome = Outcome.FAILED
        reason = (
            f"sent {', '.join(a.kind.value for a in sent)}"
            if sent
            else ("nothing new to say" if not run.failed else str(run.failed[0]))
        )
        who = f"{launched_by} ({launched_source})" if launched_by else None
        return (
            Verdict(outcome, reason, event, ref, sent, tuple(findings), who),
            run,
        )

    def _team_forecasts(
        self,
        launched: _Launched,
        team_tags: Mapping[str, tuple[set[str], list[Decimal]]],
        team_figures: Mapping[str, TeamFigures],
        now: datetime,
    ) -> list[Alert]:
        """One forecast per team of the launch's projects, against the team's budget: the
        team's sums as the last scan left them, plus what this launch adds (as the project's
        forecast, the resources the last scan has not counted)."""
        by_team: dict[str, list[str]] = {}
        for project, (known, *_rest) in launched.items():
            row = self._s.projects.get(project)
            team = launch_team(row.team if row is not None else None, team_tags[project][0], known)
            if team is not None:
                by_team.setdefault(team, []).append(project)
        out: list[Alert] = []
        for team, mine in sorted(by_team.items()):
            scanned = team_figures.get(team)
            config = self._s.teams.get(team)
            budget = launch_team_budget(config, scanned, [b for p in mine for b in team_tags[p][1]])
            items = [(p, ar, counted) for p in mine for ar, counted in launched[p][3]]
            fresh = [(p, ar) for p, ar, counted in items if not counted]
            ranked = sorted(fresh or [items[0][:2]], key=lambda pr: -(pr[1].usd_per_hour or 0))
            # The last scan's projects of the team, and the launch's (one that joins by
            # this launch's tag brings its own month-to-date and run-rate with it).
            joining = [
                known for p in mine if (known := launched[p][0]) is not None and known.team != team
            ]
            projects = [*(scanned.projects if scanned else ()), *mine]
            if config is not None and config.owners:
                owners: tuple[str, ...] = config.owners
            else:
                owners = tuple(
                    dict.fromkeys(
                        [
                            *(scanned.owners if scanned else ()),
                            *(o for p in mine for o in launched[p][2]),
                        ]
                    )
                )[:20]
            alert = launch_team_forecast_alert(
                team,
                scanned,
                budget,
                ranked[0][0],
                ranked[0][1],
                not fresh,
                now,
                self._s.thresholds,
                projects=projects,
                owners=owners,
                joining=joining,
                also=[ar for _p, ar in ranked[1:]],
            )
            if alert is not None:
                out.append(alert)
        return out
