"""The guards count savings at the rates `prices show` shows: the catalog in use (the
stored one when deployed), never a second copy read from the package or written in code."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from typing import Any

import boto3
import pytest

from costguard.adapters.aws import ClientFactory
from costguard.adapters.memory import InMemoryLedger
from costguard.guards import stale_objects
from costguard.services.guard import GuardContext
from tests.support.catalog import FIXTURE_CATALOG_PATH, fixture_catalog
from tests.support.sweep import sweep_settings


def rate_of(catalog: Any, region: str) -> Decimal:
    guard = stale_objects.build(
        sweep_settings(),
        ClientFactory(boto3.Session(region_name="us-east-1")),
        GuardContext(InMemoryLedger(), None, catalog),
    )
    rate: Decimal = guard.policy.usd_per_gb_month(region)  # type: ignore[attr-defined]
    return rate


def test_the_stale_object_guard_counts_s3_at_the_catalog_in_use() -> None:
    # GIVEN a catalog in use (say, the stored one) whose S3 rates differ from the package's
    catalog = replace(
        fixture_catalog(),
        s3_standard_gb_month={"us-east-1": Decimal("0.5"), "eu-west-1": Decimal("0.7")},
    )
    # THEN the guard's rate is that catalog's, by region
    assert rate_of(catalog, "us-east-1") == Decimal("0.5")
    # AND a region the catalog lacks is counted at its dearest rate (an upper bound), not a
    # figure written in code
    assert rate_of(catalog, "ap-south-2") == Decimal("0.7")


def test_a_catalog_without_any_s3_rate_is_refused_when_read() -> None:
    from costguard.adapters.catalog import CatalogError, parse_catalog

    data = json.loads(FIXTURE_CATALOG_PATH.read_text())
    data["s3_standard_gb_month"] = {}
    with pytest.raises(CatalogError, match="s3_standard_gb_month"):
        parse_catalog(data, "a catalog")
