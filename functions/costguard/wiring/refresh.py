"""The price refresh's composition: the Price List API into the stored catalog (the
weekly Lambda), or into a catalog file (``costguard prices refresh``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from costguard.adapters.aws import RETRY_CONFIG
from costguard.adapters.catalog import CatalogDocuments, CatalogFile, FileCatalogStore
from costguard.adapters.catalog_store import DynamoDbCatalogStore
from costguard.adapters.pricing_api import PriceListApi
from costguard.config_spec import REGION
from costguard.domain.catalog_merge import DEFAULT_HOLD_PCT
from costguard.services.price_refresh import PriceRefresh

if TYPE_CHECKING:
    from mypy_boto3_pricing import PricingClient

    from costguard.settings import Settings

#: The Price List Query API's endpoint; it serves every region's prices.
PRICING_REGION = "us-east-1"


def build_refresh(
    settings: Settings, session: Any, progress: Callable[[str], None] = lambda _m: None
) -> PriceRefresh:
    """The deployed refresh: into the catalog stored in the ledger table."""
    if not settings.table_name:
        raise ValueError("the price refresh stores into the ledger table: set COSTGUARD_TABLE_NAME")
    region = session.region_name or settings.regions[0]
    return PriceRefresh(
        DynamoDbCatalogStore(session.client("dynamodb", region_name=region), settings.table_name),
        PriceListApi(session.client("pricing", region_name=PRICING_REGION, config=RETRY_CONFIG)),
        CatalogDocuments(),
        hold_pct=settings.price_change_hold_pct,
        progress=progress,
    )


def refresh_catalog(
    client: PricingClient,
    *,
    regions: tuple[str, ...],
    output: Path,
    today: date,
    progress: Callable[[str], None] = lambda _m: None,
    previous: CatalogFile | None = None,
    hold_pct: Decimal = DEFAULT_HOLD_PCT,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Fetch current list prices and merge them into the catalog at ``output``.

    The catalog already at ``output`` is the starting point (else ``previous``, else the
    packaged one), and the merge never makes it worse (``domain.catalog_merge``). A
    region that returns no prices keeps its date and is listed under
    ``regions_without_prices``; the caller should fail.
    """
    regions = tuple(dict.fromkeys(regions))
    bad = [r for r in regions if not (r.isascii() and REGION.fullmatch(r))]
    if not regions:
        raise ValueError("no regions to refresh")
    if bad:
        raise ValueError(f"not AWS region names: {', '.join(map(repr, bad))}")
    outcome = PriceRefresh(
        FileCatalogStore(output),
        PriceListApi(client, sleep=sleep),
        CatalogDocuments(previous),
        hold_pct=hold_pct,
        progress=progress,
    ).run(regions, datetime.combine(today, datetime.min.time(), UTC))
    return {"output": str(output), **outcome.summary()}
