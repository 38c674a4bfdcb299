"""The scan use case: inventory -> price -> attribute -> ledger -> budget report."""

from __future__ import annotations

import time as _time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal

from costguard.domain.advice import (
    Advice,
    EndpointVariant,
    advise,
    endpoint_variants,
    endpoint_window,
)
from costguard.domain.attribution import AttributedResource, ProjectConfig, attribute
from costguard.domain.calendar import month_key, require_utc
from costguard.domain.catalog_merge import CatalogInUse, catalog_findings
from costguard.domain.decisions import Savings, savings_this_month
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.models import Lifecycle, Resource, ResourceKind, parse_key, with_account
from costguard.domain.money import ZERO
from costguard.domain.predictions import (
    PredictionCost,
    cost_per_prediction,
    prediction_window,
    recorded_rates,
)
from costguard.domain.pricing import PriceCatalog, PricedResource, Pricer, SpotKey
from costguard.domain.spend import (
    DEFAULT_EXACT_GAP,
    BudgetStatus,
    Observation,
    accrue,
    budget_status,
    carry_forward,
    forecast_month_end,
    month_split,
)
from costguard.domain.tags import TagKeys
from costguard.domain.teams import (
    ProjectFigure,
    TeamBudget,
    TeamConfig,
    TeamReport,
    team_owners,
    team_reports,
)
from costguard.domain.text import plural
from costguard.ports import (
    CatalogSource,
    CommitOutcome,
    EndpointMetrics,
    InventorySource,
    Ledger,
    PartialReadError,
    ProjectMonth,
    ScanCommit,
    SourceError,
    SpotPriceSource,
)
from costguard.services.executor import acted_savings

Progress = Callable[[str], None]
#: The ledger document of the rates endpoint variants billed at, as scans saw them.
ENDPOINT_RATES_STATE = "endpoint-rates"


@dataclass(frozen=True, slots=True)
class ScanSettings:
    scope: str
    regions: tuple[str, ...]
    tag_keys: TagKeys = field(default_factory=TagKeys)
    projects: Mapping[str, ProjectConfig] = field(default_factory=dict)
    #: The central team table (budgets and owners of teams), which overrides tags.
    teams: Mapping[str, TeamConfig] = field(default_factory=dict)
    warning_pct: Decimal = Decimal(80)
    exact_gap: timedelta = DEFAULT_EXACT_GAP
    max_workers: int = 8
    #: The AWS account scanned (12 digits), carried in every resource key; "" if unknown.
    account: str = ""
    #: Rates for a scanned region older than this are a ``price-catalog`` finding.
    price_catalog_max_age_days: int = 30


@dataclass(frozen=True, slots=True)
class ProjectReport:
    project: str | None
    budget_usd: Decimal | None
    budget_source: str
    run_rate_usd_per_hour: Decimal
    month_to_date_usd: Decimal
    estimated_usd: Decimal
    forecast_month_usd: Decimal
    status: BudgetStatus
    owners: tuple[str, ...]
    resources: tuple[AttributedResource, ...]
    unpriced: int
    #: What the actions CostGuard took on this project this month save.
    savings: Savings = field(default_factory=Savings)
    #: The team the project belongs to (None: none).
    team: str | None = None
    #: ``month_to_date_usd`` split into compute, storage and not split (spend accrued
    #: before the ledger split months by category), at full precision: they add up to it.
    month_to_date_by_category: Mapping[str, Decimal] = field(
        default_factory=lambda: month_split(ZERO, {})
    )


@dataclass(frozen=True, slots=True)
class PendingCapacity:
    nodegroup: Resource
    running: int
    pending: int


@dataclass(frozen=True, slots=True)
class ScanReport:
    scope: str
    now: datetime
    month: str
    regions: tuple[str, ...]
    projects: tuple[ProjectReport, ...]
    unattributed: ProjectReport
    pending_capacity: tuple[PendingCapacity, ...]
    findings: tuple[Finding, ...]
    ledger: CommitOutcome
    #: The catalog's date (the oldest of its regions' dates).
    catalog_as_of: str
    duration_s: float
    api_calls: Mapping[str, int]
    #: What the ledger knew before this scan (rates and first sightings), for alert rules.
    previous: Mapping[str, Observation] = field(default_factory=dict)
    #: (region, source) pairs that could not be read: their spend is unknown, not $0.
    failed_sources: frozenset[tuple[str, str]] = frozenset()
    #: Projects whose run-rate is incomplete because a failed source held some of their
    #: resources at the last scan: rate-based rules must not read it as a drop.
    incomplete_projects: frozenset[str | None] = frozenset()
    #: Which catalog priced this scan (stored or bundled); None when the caller gave one.
    catalog: CatalogInUse | None = None
    #: Money a different choice would save (spot, smaller endpoints, pending capacity).
    advice: tuple[Advice, ...] = ()
    #: The project of each advised resource, where ``projects`` holds no resources to
    #: look it up in (an Organization's roll-up).
    advice_projects: Mapping[str, str | None] = field(default_factory=dict)
    #: Each SageMaker endpoint variant's cost per 1,000 predictions, now and per day
    #: (empty when no endpoint metrics are read).
    prediction_costs: tuple[PredictionCost, ...] = ()
    #: The teams, each the sum of its projects (domain/teams.py).
    teams: tuple[TeamReport, ...] = ()

    @property
    def resource_count(self) -> int:
        return sum(len(p.resources) for p in self.projects) + len(self.unattributed.resources)


class ScanService:
    """Scans every configured region in parallel; one failing source is a finding."""

    def __init__(
        self,
        sources: Sequence[InventorySource],
        spot_prices: SpotPriceSource,
        catalog: PriceCatalog | CatalogSource,
        ledger: Ledger,
        settings: ScanSettings,
        *,
        progress: Progress | None = None,
        api_calls: Callable[[], Mapping[str, int]] | None = None,
        catalog_in_use: CatalogInUse | None = None,
        endpoint_metrics: EndpointMetrics | None = None,
        hourly_predictions: bool = False,
    ) -> None:
        self._sources = sources
        #: True (the scheduled scan): endpoint invocations are read by the first scan of
        #: each hour only (their window ends on the hour, so later scans of the hour would
        #: read the same figures and pay again); False (a person's scan): every scan.
        self._hourly_predictions = hourly_predictions
        #: None: no endpoint utilization is read, and no oversized-endpoint advice given.
        self._endpoint_metrics = endpoint_metrics
        self._spot = spot_prices
        self._catalog = catalog if isinstance(catalog, PriceCatalog) else None
        self._ledger = ledger
        self._settings = settings
        self._progress = progress or (lambda _msg: None)
        self._api_calls = api_calls or (lambda: {})
        self._in_use = catalog_in_use
        self._catalog_source = None if isinstance(catalog, PriceCatalog) else catalog

    def run(self, now: datetime) -> ScanReport:
        started = _time.perf_counter()
        now = require_utc(now)
        s = self._settings
        if self._catalog_source is not None:
            # Read when the scan runs, not when it is built: building makes no AWS call.
            self._catalog, self._in_use = self._catalog_source.read()
        assert self._catalog is not None
        resources, findings, failed = self._collect(now)
        self._progress(f"found {plural(len(resources), 'resource')}; pricing")
        priced, price_findings = self._price(resources, now)
        findings.extend(price_findings)
        if self._in_use is not None:
            findings.extend(
                catalog_findings(self._in_use, s.regions, now.date(), s.price_catalog_max_age_days)
            )
        accelerated = {t for rates in self._catalog.ec2.values() for t in rates} | {
            r.instance_type for r in resources if r.accelerator is not None and r.instance_type
        }
        pending = _pending_capacity(resources, accelerated)
        for p in pending:
            findings.append(
                Finding(
                    FindingCode.PENDING_CAPACITY,
                    p.nodegroup.key,
                    f"node group wants {p.nodegroup.desired_size} x {p.nodegroup.instance_type} "
                    f"but {p.running} are running; {p.pending} pending, not yet spend",
                    Severity.INFO,
                )
            )
        utilization = self._endpoint_utilization(resources, now, findings)
        # Read before the commit, as the commit's compare-and-set starts from it.
        previous = self._ledger.watermark(s.scope)
        costs = self._prediction_costs(priced, now, findings, failed, previous)
        advice = advise(
            priced,
            [(p.nodegroup, p.pending) for p in pending],
            self._catalog,
            now,
            utilization,
            {c.key: c for c in costs},
        )
        attribution = attribute(priced, s.tag_keys, s.projects, s.teams)
        findings.extend(attribution.findings)

        # (no "updating the ledger": a local scan reads a deployed ledger and never writes it)
        self._progress("accruing spend since the last scan")
        previous_observations = adopt_account(self._ledger.observations(s.scope), s.account)
        accrual = accrue(attribution.resources, previous_observations, now, s.exact_gap)
        snapshot = carry_forward(previous_observations, accrual.observations, now)
        outcome = self._ledger.commit(
            ScanCommit(s.scope, previous, now, accrual.increments, snapshot)
        )
        if outcome is CommitOutcome.CONTENDED:
            findings.append(
                Finding(
                    FindingCode.LEDGER_CONTENDED,
                    f"ledger/{s.scope}",
                    "another scan committed first; this scan's accrual was dropped, not doubled",
                    Severity.INFO,
                )
            )
        month = month_key(now)
        totals = self._ledger.month_totals(s.scope, month)

        by_project: dict[str | None, list[AttributedResource]] = defaultdict(list)
        for a in attribution.resources:
            by_project[a.project].append(a)
        names = sorted(
            {p for p in by_project if p is not None}
            | {p for p in totals if p is not None}
            | set(attribution.budgets)
        )
        reports = []
        for name in names:
            budget = attribution.budgets.get(name)
            reports.append(
                self._project_report(
                    name,
                    budget.amount if budget else None,
                    budget.source if budget else "none",
                    attribution.owners.get(name, ()),
                    by_project.get(name, []),
                    totals,
                    now,
                )
            )
        unattributed = self._project_report(
            None, None, "none", (), by_project.get(None, []), totals, now
        )
        savings = self._savings(month, now)
        reports = [
            replace(r, savings=savings[r.project]) if r.project in savings else r for r in reports
        ]
        reports = [
            replace(r, team=attribution.teams.get(r.project)) if r.project is not None else r
            for r in reports
        ]
        teams = rolled_up_teams(
            reports, attribution.teams, attribution.team_budgets, s.teams, s.warning_pct
        )
        self._ledger.record_findings(s.scope, now, findings)
        return ScanReport(
            scope=s.scope,
            now=now,
            month=month,
            regions=s.regions,
            projects=tuple(reports),
            unattributed=unattributed,
            pending_capacity=tuple(pending),
            findings=tuple(findings),
            ledger=outcome,
            catalog_as_of=self._catalog.as_of.isoformat(),
            duration_s=_time.perf_counter() - started,
            api_calls=dict(self._api_calls()),
            previous=previous_observations,
            failed_sources=frozenset(failed),
            incomplete_projects=_incomplete_projects(previous_observations, failed),
            catalog=self._in_use,
            advice=advice,
            prediction_costs=tuple(costs),
            teams=teams,
        )

    def _endpoint_utilization(
        self, resources: Sequence[Resource], now: datetime, findings: list[Finding]
    ) -> dict[str, Decimal]:
        """The GPU utilization of the endpoints oversized-endpoint advice can act on: one
        batched read a region, and none at all when no endpoint qualifies. A region that
        cannot be read is a finding and gets no such advice: no figure, no guess."""
        if self._endpoint_metrics is None:
            return {}
        start, end = endpoint_window(now)
        by_region: dict[str, list[Resource]] = defaultdict(list)
        for r in resources:
            by_region[r.region].append(r)
        found: dict[str, Decimal] = {}
        for region in sorted(by_region):
            variants = endpoint_variants(by_region[region], start)
            if not variants:
                continue
            try:
                found.update(self._endpoint_metrics.gpu_utilization(region, variants, start, end))
            except SourceError as exc:
                findings.append(
                    Finding(
                        FindingCode.SCAN_FAILED,
                        f"{region}/sagemaker-endpoint-metrics",
                        f"{exc.operation} failed with {exc.code}; SageMaker endpoints' GPU "
                        f"utilization in {region} is unknown, so none is advised a smaller type",
                        Severity.WARNING,
                    )
                )
        return found

    def _prediction_costs(
        self,
        priced: Sequence[PricedResource],
        now: datetime,
        findings: list[Finding],
        failed: set[tuple[str, str]],
        previous: datetime | None = None,
    ) -> list[PredictionCost]:
        """Every endpoint variant's cost per 1,000 predictions: one batched ``Invocations``
        read a region (500 variants a call), and the rates earlier scans recorded (one
        ledger document, written only when a variant's rate changed). A region that cannot
        be read is a finding, and its variants' cost per prediction is unknown, not $0."""
        if self._endpoint_metrics is None:
            return []
        hour = now.replace(minute=0, second=0, microsecond=0)
        if self._hourly_predictions and previous is not None and hour <= previous < now:
            return []  # an earlier scan of this hour read the same window
        variants = [
            p
            for p in priced
            if p.resource.kind is ResourceKind.SAGEMAKER_ENDPOINT and "/" in p.resource.id
        ]
        if not variants:
            return []
        start, end = prediction_window(now)
        by_region: dict[str, list[PricedResource]] = defaultdict(list)
        for p in variants:
            by_region[p.resource.region].append(p)
        served: dict[str, Mapping[datetime, Decimal]] = {}
        for region in sorted(by_region):
            wanted = [
                EndpointVariant(p.resource.key, *p.resource.id.split("/", 1))
                for p in by_region[region]
                if not p.resource.asynchronous  # they publish no Invocations
            ]
            if not wanted:
                continue
            try:
                served.update(self._endpoint_metrics.invocations(region, wanted, start, end))
            except SourceError as exc:
                # A batched read that failed in some calls keeps what the others read.
                read = exc.found if isinstance(exc, PartialReadError) else {}
                served.update(read)
                which = (
                    f"{len(wanted) - len(read)} of {len(wanted)} SageMaker endpoint variants'"
                    if read
                    else "SageMaker endpoints'"
                )
                findings.append(
                    Finding(
                        FindingCode.SCAN_FAILED,
                        f"{region}/sagemaker-endpoint-invocations",
                        f"{exc.operation} failed with {exc.code}; {which} "
                        f"invocations in {region} are unknown, so is their cost per prediction",
                        Severity.WARNING,
                    )
                )
        earlier = self._recorded_rates(variants, now, start, failed)
        return [
            cost_per_prediction(p, served.get(p.resource.key), now, earlier.get(p.resource.key, ()))
            for p in variants
        ]

    def _recorded_rates(
        self,
        variants: Sequence[PricedResource],
        now: datetime,
        start: datetime,
        failed: set[tuple[str, str]],
    ) -> dict[str, list[tuple[datetime, Decimal]]]:
        """The rates each variant billed at, as scans recorded them (read before this
        scan's are added), and this scan's recorded: one read, one write on a change."""
        s = self._settings
        doc, version = self._ledger.get_state(s.scope, ENDPOINT_RATES_STATE)
        stored = doc.get("rates", {}) if isinstance(doc.get("rates"), dict) else {}
        kept = {region for region, source in failed if source == "sagemaker"}
        earlier, updated = recorded_rates(stored, variants, now, start, kept)
        if updated != stored:
            # Lost to another scan: the next one records it; nothing is judged on a guess.
            self._ledger.put_state(s.scope, ENDPOINT_RATES_STATE, {"rates": updated}, version)
        return earlier

    def _savings(self, month: str, now: datetime) -> dict[str | None, Savings]:
        """Savings per project from this month's audit trail (actions acted, not dry-run)."""
        return savings_this_month(
            acted_savings(self._ledger.audit_trail(self._settings.scope, month)), now
        )

    def _collect(self, now: datetime) -> tuple[list[Resource], list[Finding], set[tuple[str, str]]]:
        s = self._settings
        jobs = [(region, source) for region in s.regions for source in self._sources]
        resources: list[Resource] = []
        findings: list[Finding] = []
        failed: set[tuple[str, str]] = set()
        with ThreadPoolExecutor(max_workers=max(1, min(s.max_workers, len(jobs)))) as pool:
            futures = [
                (region, source, pool.submit(source.collect, region, now))
                for region, source in jobs
            ]
            for done, (region, source, future) in enumerate(futures, 1):
                try:
                    inventory = future.result()
                except SourceError as exc:
                    failed.add((region, source.name))
                    findings.append(
                        Finding(
                            FindingCode.SCAN_FAILED,
                            f"{region}/{source.name}",
                            f"{exc.operation} failed with {exc.code}: {exc.detail or 'no message'}; "
                            f"{source.name} in {region} is missing from this scan",
                            Severity.ERROR,
                        )
                    )
                    continue
                resources.extend(inventory.resources)
                findings.extend(inventory.findings)
                if any(f.code is FindingCode.SCAN_FAILED for f in inventory.findings):
                    failed.add((region, source.name))  # part of the source, e.g. one API
                self._progress(
                    f"[{done}/{len(jobs)}] {source.name} {region}: {plural(len(inventory.resources), 'resource')}"
                )
        return resources, findings, failed

    def _price(
        self, resources: list[Resource], now: datetime
    ) -> tuple[list[PricedResource], list[Finding]]:
        findings: list[Finding] = []
        spot_types: dict[str, set[str]] = defaultdict(set)
        for r in resources:
            if (
                r.kind is ResourceKind.EC2_INSTANCE
                and r.lifecycle is Lifecycle.SPOT
                and r.instance_type
            ):
                spot_types[r.region].add(r.instance_type)
        spot: dict[SpotKey, Decimal] = {}
        for region, types in sorted(spot_types.items()):
            try:
                spot.update(self._spot.latest(region, sorted(types), now))
            except SourceError as exc:
                findings.append(
                    Finding(
                        FindingCode.SCAN_FAILED,
                        f"{region}/ec2-spot-prices",
                        f"{exc.operation} failed with {exc.code}; spot instances priced at on-demand",
                        Severity.WARNING,
                    )
                )
        priced = []
        assert self._catalog is not None
        pricer = Pricer(self._catalog, spot, now.date())
        for r in resources:
            item, found = pricer.price(r)
            priced.append(item)
            if found:
                findings.extend(found)
        return priced, findings

    def _project_report(
        self,
        project: str | None,
        budget: Decimal | None,
        source: str,
        owners: tuple[str, ...],
        resources: list[AttributedResource],
        totals: Mapping[str | None, ProjectMonth],
        now: datetime,
    ) -> ProjectReport:
        billable = [a for a in resources if a.priced.resource.billable]
        run_rate = sum((a.priced.usd_per_hour or ZERO for a in billable), ZERO)
        row = totals.get(project)
        mtd = row.usd if row else ZERO
        estimated = row.estimated_usd if row else ZERO
        forecast = forecast_month_end(mtd, run_rate, now)
        ordered = sorted(
            resources,
            key=lambda a: (-(a.priced.usd_per_hour or ZERO), a.priced.resource.key),
        )
        return ProjectReport(
            project=project,
            budget_usd=budget,
            budget_source=source,
            run_rate_usd_per_hour=run_rate,
            month_to_date_usd=mtd,
            estimated_usd=estimated,
            forecast_month_usd=forecast,
            status=budget_status(budget, forecast, self._settings.warning_pct),
            owners=owners,
            resources=tuple(ordered),
            unpriced=sum(1 for a in billable if a.priced.usd_per_hour is None),
            month_to_date_by_category=month_split(mtd, row.by_category if row else {}),
        )


def rolled_up_teams(
    reports: Sequence[ProjectReport],
    team_of: Mapping[str, str],
    budgets: Mapping[str, TeamBudget],
    team_table: Mapping[str, TeamConfig],
    warning_pct: Decimal,
    accounts: Mapping[str, frozenset[str]] | None = None,
) -> tuple[TeamReport, ...]:
    """The teams of a scan (or of an Organization's roll-up): each the sum of its projects'
    figures, as the project rows show them."""
    named = [r for r in reports if r.project is not None]
    figures = [
        ProjectFigure(
            r.project,
            r.month_to_date_usd,
            r.estimated_usd,
            r.run_rate_usd_per_hour,
            r.forecast_month_usd,
            (accounts or {}).get(r.project, frozenset()),
            r.month_to_date_by_category,
        )
        for r in named
        if r.project is not None
    ]
    owners = team_owners(team_of, {r.project: r.owners for r in named if r.project}, team_table)
    return team_reports(figures, team_of, budgets, owners, warning_pct)


def _pending_capacity(
    resources: Sequence[Resource], accelerated: set[str]
) -> list[PendingCapacity]:
    """Accelerator node groups whose desired size is ahead of their running instances."""
    running: Counter[tuple[str, str, str, str]] = Counter()
    for r in resources:
        if r.kind is ResourceKind.EC2_INSTANCE and r.eks_cluster and r.eks_nodegroup:
            running[(r.account, r.region, r.eks_cluster, r.eks_nodegroup)] += 1
    out = []
    for r in resources:
        if r.kind is ResourceKind.EKS_NODEGROUP and r.eks_cluster and r.eks_nodegroup:
            if not set((r.instance_type or "").split(",")) & accelerated:
                continue
            have = running[(r.account, r.region, r.eks_cluster, r.eks_nodegroup)]
            if r.desired_size > have:
                out.append(PendingCapacity(r, have, r.desired_size - have))
    return out


def source_of(kind: str) -> str:
    """Which inventory source finds a resource kind (``region/kind/id`` keys)."""
    if kind.startswith("sagemaker-"):
        return "sagemaker"
    if kind.startswith("eks-"):
        return "eks"
    if kind == "s3-bucket":
        return "s3"
    return "ec2"


def _incomplete_projects(
    previous: Mapping[str, Observation], failed: set[tuple[str, str]]
) -> frozenset[str | None]:
    if not failed:
        return frozenset()
    out: set[str | None] = set()
    for key, o in previous.items():
        parts = parse_key(key)
        if parts is not None and (parts.region, source_of(parts.kind)) in failed:
            out.add(o.project)
    return frozenset(out)


def adopt_account(previous: Mapping[str, Observation], account: str) -> dict[str, Observation]:
    """Observations written before keys carried the account, keyed as this scan keys them.

    Without this, the first scan after an upgrade would see every resource as new and
    back-fill its month again: the ledger of one account is that account's resources.
    """
    if not account:
        return dict(previous)
    adopted: dict[str, Observation] = {}
    for key, o in previous.items():
        new = with_account(key, account)
        adopted[new] = o if new == key else o._replace(key=new)
    return adopted
