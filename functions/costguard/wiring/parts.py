"""The parts every graph shares: the ledger, the alert topic and service, the price
catalog, typed clients for the account a run is in, and a guard's context."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from costguard.adapters.aws import ClientFactory
from costguard.adapters.catalog import rate_book, read_catalog_file
from costguard.adapters.catalog_store import CatalogCache, CatalogReader, DynamoDbCatalogStore
from costguard.adapters.cost_explorer import CostExplorer
from costguard.adapters.dynamodb import DynamoDbLedger
from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.sns import SnsNotifier
from costguard.domain.alerts import AnomalyPolicy
from costguard.domain.catalog_merge import BUNDLED, CatalogInUse
from costguard.domain.pricing import PriceCatalog
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.cost_explorer import CostExplorerService
from costguard.services.guard import GuardContext

if TYPE_CHECKING:
    from costguard.adapters.sns import AnswerLinks
    from costguard.ports import Ledger
    from costguard.settings import Settings


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


def build_notifier(
    settings: Settings, clients: ClientFactory, answer_links: AnswerLinks | None = None
) -> SnsNotifier | None:
    """The alert topic's notifier; None when no topic is configured (a local scan).
    ``answer_links``: a guard's warnings carry their e-mailed answer links."""
    if not settings.topic_arn:
        return None
    region = settings.topic_arn.split(":")[3]
    return SnsNotifier(clients.sns(region), settings.topic_arn, answer_links)


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


def clients_for(settings: Settings, session: Any) -> ClientFactory:
    """Typed clients for a deployed or local run, carrying the account that is scanned."""
    return ClientFactory(session, account=account_of(settings))


def account_of(settings: Settings) -> str:
    """The account scanned: the deployed scope is the account id; a local scope may not be."""
    return settings.scope if re.fullmatch(r"[0-9]{12}", settings.scope) else ""


def guard_context(
    settings: Settings, clients: ClientFactory, answer_links: AnswerLinks | None = None
) -> GuardContext:
    """A guard's ledger, notifier and catalog, in the account of ``clients`` (the one
    CostGuard runs in: the hub's, in an Organization)."""
    return GuardContext(
        build_ledger(settings, clients),
        build_notifier(settings, clients, answer_links),
        catalog_in_use(settings, clients),
    )


def catalog_in_use(settings: Settings, clients: ClientFactory) -> PriceCatalog:
    """The prices a guard's savings are counted at: the scan's (the stored catalog when
    deployed, else the packaged one)."""
    reader = catalog_reader(settings, clients)
    return (reader or BundledCatalog()).read()[0]
