"""Composition: build the services from settings and typed clients, in one place.

Every builder takes a :class:`ClientFactory` (typed clients), never a raw session; a
handler's whole graph (:class:`ScanGraph`) can be built from fakes instead, and the
handler's use case runs the same on either.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from costguard.adapters.aws import ClientFactory
from costguard.adapters.catalog import rate_book, read_catalog_file
from costguard.adapters.catalog_store import CatalogCache, CatalogReader, DynamoDbCatalogStore
from costguard.adapters.cloudwatch import CloudWatchMetrics, EndpointGpuMetrics
from costguard.adapters.cost_explorer import CostExplorer
from costguard.adapters.dynamodb import DynamoDbLedger
from costguard.adapters.ec2 import Ec2Inventory, Ec2SpotPrices, InstanceTypeCache
from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.adapters.eks import EksInventory
from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.notebooks import NotebookCandidateSource
from costguard.adapters.sagemaker import PerResourceTags, SageMakerInventory, TaggingApiTags
from costguard.adapters.sns import SnsNotifier
from costguard.domain.alerts import AnomalyPolicy
from costguard.domain.catalog_merge import BUNDLED, CatalogInUse
from costguard.domain.idle import MB, GpuDiscovery, IdleThresholds
from costguard.domain.pricing import PriceCatalog
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.cost_explorer import CostExplorerService
from costguard.services.guard import Guard, GuardContext
from costguard.services.idle import IdlePolicy, IdleSettings
from costguard.services.scan import Progress, ScanService, ScanSettings

if TYPE_CHECKING:
    from costguard.domain.pricing import PriceCatalog
    from costguard.ports import Actuator, CatalogSource, Ledger
    from costguard.settings import Settings


#: Accelerator info per instance type outlives one invocation: a warm Lambda asks once.
_INSTANCE_TYPES = InstanceTypeCache()
#: The same cache, for the organization probe (it judges accelerators as the scan does).
INSTANCE_TYPES = _INSTANCE_TYPES
#: The stored price catalog, per ledger table: a warm Lambda reads it every few minutes.
CATALOG_CACHE = CatalogCache()


class BundledCatalog:
    """The package's catalog as a :class:`costguard.ports.CatalogSource` (no table)."""

    def read(self) -> tuple[PriceCatalog, CatalogInUse]:
        bundled = read_catalog_file()
        return bundled.to_domain(), CatalogInUse(BUNDLED, bundled.version, rate_book(bundled))


def catalog_reader(settings: Settings, clients: ClientFactory) -> CatalogReader | None:
    """The deployed catalog's reader (one per table, kept warm); None without a table."""
    if not settings.table_name:
        return None
    region = clients.session.region_name or settings.regions[0]
    store = DynamoDbCatalogStore(clients.dynamodb(region), settings.table_name)
    return CatalogReader(store, key=f"{region}/{settings.table_name}", cache=CATALOG_CACHE)


class CallCounter:
    """Counts AWS API calls by ``service.Operation`` (what the guard costs to run)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()

    def attach(self, session: Any) -> None:
        session.events.register("before-call", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls[f"{model.service_model.service_name}.{model.name}"] += 1

    def snapshot(self) -> Mapping[str, int]:
        with self._lock:
            return dict(self.calls)


def build_notifier(settings: Settings, clients: ClientFactory) -> SnsNotifier | None:
    """The alert topic's notifier; None when no topic is configured (a local scan)."""
    if not settings.topic_arn:
        return None
    region = settings.topic_arn.split(":")[3]
    return SnsNotifier(clients.sns(region), settings.topic_arn)


def build_alert_service(
    settings: Settings, clients: ClientFactory, ledger: Ledger
) -> AlertService | None:
    """None when no topic is configured (a local, read-only ``costguard scan``)."""
    notifier = build_notifier(settings, clients)
    if notifier is None:
        return None
    policy = AnomalyPolicy(
        min_ratio=settings.anomaly_min_ratio,
        min_delta_usd_per_hour=settings.anomaly_min_usd_per_hour,
        cooldown=timedelta(minutes=settings.anomaly_cooldown_minutes),
    )
    return AlertService(
        ledger,
        notifier,
        AlertSettings(
            scope=settings.scope,
            thresholds=settings.budget_thresholds,
            anomaly=policy,
            digest_hour_utc=settings.digest_hour_utc,
            scan_failed_after=settings.scan_failed_alert_after,
            advice_alerts=settings.advice_alerts,
            advice_min_usd_per_month=settings.advice_min_monthly_usd,
        ),
    )


def build_ledger(settings: Settings, clients: ClientFactory) -> Ledger:
    if settings.table_name:
        region = clients.session.region_name or settings.regions[0]
        return DynamoDbLedger(clients.dynamodb(region), settings.table_name)
    return InMemoryLedger()


def build_cost_explorer(
    settings: Settings, clients: ClientFactory, ledger: Ledger
) -> CostExplorerService | None:
    """Cost Explorer reconciliation and anomaly forwarding, when switched on."""
    if not settings.cost_explorer:
        return None
    return CostExplorerService(
        ledger,
        CostExplorer(clients.cost_explorer()),
        settings.scope,
        settings.project_tag_keys[0],
    )


@dataclass(frozen=True)
class ScanGraph:
    """Everything the scan Lambda runs: one use case, then its independent steps."""

    scan: ScanService
    alerts: AlertService | None = None
    cost_explorer: CostExplorerService | None = None


def build_scan_graph(
    settings: Settings, clients: ClientFactory, counter: CallCounter | None = None
) -> ScanGraph:
    ledger = build_ledger(settings, clients)
    return ScanGraph(
        scan=build_scan_service(settings, clients, ledger=ledger, counter=counter),
        alerts=build_alert_service(settings, clients, ledger),
        cost_explorer=build_cost_explorer(settings, clients, ledger),
    )


def clients_for(settings: Settings, session: Any) -> ClientFactory:
    """Typed clients for a deployed or local run, carrying the account that is scanned."""
    return ClientFactory(session, account=account_of(settings))


def account_of(settings: Settings) -> str:
    """The account scanned: the deployed scope is the account id; a local scope may not be."""
    return settings.scope if re.fullmatch(r"[0-9]{12}", settings.scope) else ""


def build_scan_service(
    settings: Settings,
    clients: ClientFactory,
    *,
    ledger: Ledger | None = None,
    catalog: PriceCatalog | None = None,
    progress: Progress | None = None,
    counter: CallCounter | None = None,
    instance_types: InstanceTypeCache | None = None,
    catalog_in_use: CatalogInUse | None = None,
) -> ScanService:
    """``catalog``: the caller's (the CLI's choice, a test's); else the deployed one, read
    through :func:`catalog_reader`, else the bundled one."""
    account = clients.account
    prices: PriceCatalog | CatalogSource
    if catalog is not None:
        prices = catalog
    else:
        prices = catalog_reader(settings, clients) or BundledCatalog()
    tag_reader = (
        TaggingApiTags(clients)
        if settings.sagemaker_tags == "tagging-api"
        else PerResourceTags(clients)
    )
    return ScanService(
        sources=[
            Ec2Inventory(clients, instance_types or _INSTANCE_TYPES),
            EksInventory(clients),
            SageMakerInventory(clients, tag_reader, studio=settings.sagemaker_studio),
        ],
        spot_prices=Ec2SpotPrices(clients),
        catalog=prices,
        ledger=ledger if ledger is not None else build_ledger(settings, clients),
        settings=ScanSettings(
            scope=settings.scope,
            regions=settings.regions,
            tag_keys=settings.tag_keys,
            projects=settings.project_table(),
            warning_pct=settings.warning_pct,
            account=account,
            price_catalog_max_age_days=settings.price_catalog_max_age_days,
        ),
        progress=progress,
        api_calls=counter.snapshot if counter else None,
        catalog_in_use=catalog_in_use,
        endpoint_metrics=EndpointGpuMetrics(clients.cloudwatch),
    )


def idle_settings(settings: Settings, account: str) -> IdleSettings:
    """The idle-notebook policy's settings, from the deployment's (``config_spec``)."""
    return IdleSettings(
        regions=settings.regions,
        account=account,
        thresholds=IdleThresholds(
            window=timedelta(minutes=settings.idle_minutes),
            gpu_pct=settings.idle_gpu_pct,
            cpu_pct=settings.idle_cpu_pct,
            network_bytes_per_5min=settings.idle_network_mb * MB,
            max_runtime=timedelta(hours=settings.idle_max_runtime_hours),
        ),
        grace=timedelta(minutes=settings.idle_grace_minutes),
        tag_keys=settings.tag_keys,
        gpu_discovery=GpuDiscovery(settings.idle_gpu_discovery),
    )


def guard_context(settings: Settings, clients: ClientFactory) -> GuardContext:
    """A guard's ledger, notifier and catalog, in the account of ``clients`` (the one
    CostGuard runs in: the hub's, in an Organization)."""
    return GuardContext(
        build_ledger(settings, clients),
        build_notifier(settings, clients),
        catalog_in_use(settings, clients),
    )


def build_idle_guard(settings: Settings, clients: ClientFactory, context: GuardContext) -> Guard:
    """The idle-notebook guard: its policy on batched CloudWatch reads, and its actuators.

    SageMaker notebook instances and Studio apps are judged only where the guard has an
    actuator for them (a decision without one would fail the run).
    """
    from costguard.adapters.sagemaker_actuator import (  # noqa: PLC0415 - built when run
        SageMakerNotebookActuator,
        StudioAppActuator,
    )
    from costguard.adapters.studio import StudioInventory  # noqa: PLC0415

    actuators: list[Actuator] = [Ec2InstanceActuator(clients), SageMakerNotebookActuator(clients)]
    if settings.sagemaker_studio:
        actuators.append(StudioAppActuator(clients))
    kinds = {a.kind for a in actuators}
    tags = (
        TaggingApiTags(clients)
        if settings.sagemaker_tags == "tagging-api"
        else PerResourceTags(clients)
    )
    candidates = NotebookCandidateSource(
        clients,
        tags,
        types=_INSTANCE_TYPES,
        all_accelerators=settings.idle_all_accelerators,
        sagemaker="sagemaker-notebook" in kinds,
    )
    policy = IdlePolicy(
        candidates,
        CloudWatchMetrics(clients.cloudwatch),
        context.catalog,
        idle_settings(settings, clients.account),
        studio=StudioInventory(clients) if settings.sagemaker_studio else None,
    )
    return Guard("idle-notebooks", policy, actuators, findings=lambda: policy.findings)


def catalog_in_use(settings: Settings, clients: ClientFactory) -> PriceCatalog:
    """The prices a guard's savings are counted at: the scan's (the stored catalog when
    deployed, else the packaged one)."""
    reader = catalog_reader(settings, clients)
    return (reader or BundledCatalog()).read()[0]
