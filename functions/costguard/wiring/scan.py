"""The scan's composition: its use case on typed clients, and the steps after it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from costguard.adapters import ec2
from costguard.adapters.cloudwatch import EndpointGpuMetrics
from costguard.adapters.ec2 import Ec2Inventory, Ec2SpotPrices, InstanceTypeCache
from costguard.adapters.eks import EksInventory
from costguard.adapters.s3_storage import CloudWatchBucketSizes
from costguard.adapters.sagemaker import SageMakerInventory, tag_reader
from costguard.services.bucket_storage import BucketStorageSource
from costguard.services.scan import Progress, ScanService, ScanSettings
from costguard.services.scan_cycle import ScanCycle
from costguard.wiring.parts import (
    BundledCatalog,
    CallCounter,
    build_alert_service,
    build_cost_explorer,
    build_ledger,
    catalog_reader,
    clients_for,
)

if TYPE_CHECKING:
    from costguard.adapters.aws import ClientFactory
    from costguard.domain.catalog_merge import CatalogInUse
    from costguard.domain.pricing import PriceCatalog
    from costguard.ports import CatalogSource, Ledger
    from costguard.settings import Settings


def scan_cycle(settings: Settings, session: Any) -> ScanCycle:
    """The scan Lambda's whole graph on a boto3 session, counting its API calls."""
    clients = clients_for(settings, session)
    counter = CallCounter()
    counter.attach(clients.session)
    return build_scan_cycle(settings, clients, counter)


def build_scan_cycle(
    settings: Settings, clients: ClientFactory, counter: CallCounter | None = None
) -> ScanCycle:
    """The scan and its independent steps (alerts, Cost Explorer), on one ledger."""
    ledger = build_ledger(settings, clients)
    return ScanCycle(
        scan=build_scan_service(
            settings, clients, ledger=ledger, counter=counter, hourly_predictions=True
        ),
        alerts=build_alert_service(settings, clients, ledger),
        cost_explorer=build_cost_explorer(settings, clients, ledger),
    )


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
    hourly_predictions: bool = False,
) -> ScanService:
    """``catalog``: the caller's (the CLI's choice, a test's); else the deployed one, read
    through :func:`catalog_reader`, else the bundled one. ``hourly_predictions``: the
    scheduled scan reads endpoint invocations once an hour (see :class:`ScanService`)."""
    account = clients.account
    prices: PriceCatalog | CatalogSource
    if catalog is not None:
        prices = catalog
    else:
        prices = catalog_reader(settings, clients) or BundledCatalog()
    ledger = ledger if ledger is not None else build_ledger(settings, clients)
    return ScanService(
        sources=[
            Ec2Inventory(
                clients,
                instance_types or ec2.INSTANCE_TYPES,
                project_keys=settings.tag_keys.project,
            ),
            EksInventory(clients),
            SageMakerInventory(
                clients,
                tag_reader(clients, settings.sagemaker_tags),
                studio=settings.sagemaker_studio,
            ),
            BucketStorageSource(
                CloudWatchBucketSizes(clients),
                ledger,
                scope=settings.scope,
                account=account,
                project_keys=settings.tag_keys.project,
            ),
        ],
        spot_prices=Ec2SpotPrices(clients),
        catalog=prices,
        ledger=ledger,
        settings=ScanSettings(
            scope=settings.scope,
            regions=settings.regions,
            tag_keys=settings.tag_keys,
            projects=settings.project_table(),
            teams=settings.team_table(),
            warning_pct=settings.warning_pct,
            account=account,
            price_catalog_max_age_days=settings.price_catalog_max_age_days,
        ),
        progress=progress,
        api_calls=counter.snapshot if counter else None,
        catalog_in_use=catalog_in_use,
        endpoint_metrics=EndpointGpuMetrics(clients.cloudwatch),
        hourly_predictions=hourly_predictions,
    )
