"""Hostile storage items from the Price List. S3 tiers: the refresh prices every byte at the
first tier, so a tier that is not the first one (a dimension missing, a range below zero)
must not be read as it. Units: an item in a unit the refresh does not read is not taken,
and is said to be so (as gp3 throughput's is). Expected figures are computed by hand."""

from __future__ import annotations

from decimal import Decimal

import boto3
from botocore.stub import Stubber

from costguard.adapters.catalog import CatalogDocuments, CatalogFile
from costguard.adapters.pricing_api import PriceListApi, fetch_provisioned, fetch_s3
from costguard.domain.storage import volume_price
from costguard.services.price_refresh import PriceRefresh
from tests.pricing.test_storage_rates_refresh import (
    REFRESHED_AT,
    REGION,
    answer,
    catalog,
    item,
    refresh,
    region_answers,
    s3_item,
)
from tests.support.fakes import InMemoryCatalogStore


def test_s3_standard_without_its_first_50_tb_tier_is_not_read_at_the_next_tiers_rate() -> None:
    """Defect: an S3 Standard item whose first tier (0 to 50 TB) is missing is read at its
    lowest remaining tier, $0.022 above 50 TB, as if it were the first: the scan then prices
    every byte of every bucket below the rate AWS bills the first 50 TB at, and the refresh
    reports nothing. The user's storage spend is understated with no word of why."""
    # GIVEN S3 Standard listed with only its tiers above 50 TB ($0.022 from 51,200 GB,
    # $0.021 from 512,000 GB): the tier every byte is priced at is absent
    standard = s3_item(
        "TimedStorage-ByteHrs", [("51200", "512000", "0.022"), ("512000", "Inf", "0.021")]
    )
    # WHEN the catalog is refreshed (the last rate is $0.023)
    refreshed, summary = refresh({"s3": [standard]})
    # THEN the rate is not replaced by the above-50-TB one: the last rate is kept
    assert refreshed.s3_class_gb_month[REGION]["standard"] == Decimal("0.023")
    # AND the answer is reported as not taken
    assert any(
        line.startswith("s3_class_gb_month/eu-west-1/standard: ")
        for line in summary["rejected_answers"]
    ), summary["rejected_answers"]


def test_a_tier_beginning_below_zero_is_not_taken_as_the_first_tier() -> None:
    """Defect: a dimension whose beginRange is negative ("-1" to "0", at $0.021) sorts
    before the real first tier ("0" to 50 TB at $0.024) and is taken as S3 Standard's rate:
    a malformed tier range silently moves the rate every bucket is priced at (within the
    hold percentage, so it is applied, not held)."""
    # GIVEN S3 Standard's real tiers, plus a dimension from -1 to 0 GB at $0.021
    standard = s3_item(
        "TimedStorage-ByteHrs",
        [("-1", "0", "0.021"), ("0", "51200", "0.024"), ("51200", "Inf", "0.022")],
    )
    # WHEN the catalog is refreshed
    refreshed, summary = refresh({"s3": [standard]})
    # THEN the negative range is not a tier: Standard is not $0.021
    assert refreshed.s3_class_gb_month[REGION]["standard"] != Decimal("0.021")
    # AND the answer is reported as malformed (a tier that cannot be ordered), last rate kept
    assert refreshed.s3_class_gb_month[REGION]["standard"] == Decimal("0.023")
    assert any(
        line.startswith("s3_class_gb_month/eu-west-1/standard: ")
        for line in summary["rejected_answers"]
    ), summary["rejected_answers"]


def test_an_s3_class_quoted_in_another_unit_is_said_so_not_blamed_on_capacity_blocks() -> None:
    """Defect: an S3 storage item the Price List quotes in a unit the refresh does not read
    (per GB-hour, not per GB-month) is silently not taken, and the class is recorded as
    having "no on-demand rate ... listed with other terms only, such as Capacity Blocks or
    Savings Plans": a reason for GPU instances, false for S3. `prices show` and the scan's
    unpriced finding then tell the user AWS sells that storage only under a commitment,
    while the true cause, an answer in another unit, is nowhere (gp3 throughput in another
    unit is rejected naming the unit)."""
    # GIVEN eu-west-1's Price List lists S3 Glacier storage at $0.0036 per "GB-Hrs"
    client = boto3.client("pricing", region_name="us-east-1")
    glacier = item("TimedStorage-GlacierByteHrs", "0.0036", "GB-Hrs", "Storage")
    rejected: list[str] = []
    absent: dict[str, str] = {}
    with Stubber(client) as stub:
        answer(stub, "AmazonS3", [glacier])
        answer(stub, "AmazonS3GlacierDeepArchive", [])
        # WHEN the S3 storage rates are fetched, glacier asked for
        got = fetch_s3(client, REGION, ["glacier"], rejected, absent)
    # THEN no rate is taken (a GB-hour price is not a GB-month one)
    assert got == {}
    # AND the answer is reported as not taken, naming its unit, as throughput's is
    assert any("'GB-Hrs'" in line for line in rejected), (rejected, absent)
    # AND it is not blamed on Capacity Blocks or Savings Plans
    assert "Capacity Blocks" not in absent.get("glacier", "")


def test_provisioned_iops_quoted_in_another_unit_is_said_so() -> None:
    """Defect: gp3 IOPS quoted per IOPS-hour instead of per IOPS-month are silently not
    taken and recorded as "listed with other terms only, such as Capacity Blocks or Savings
    Plans"; gp3 throughput in an unknown unit, beside it, is rejected naming its unit."""
    # GIVEN gp3 provisioned IOPS at $0.006 per "IOPS-Hrs"
    client = boto3.client("pricing", region_name="us-east-1")
    iops = item(
        "EBS:VolumeP-IOPS.gp3", "0.006", "IOPS-Hrs", "System Operation", volumeApiName="gp3"
    )
    rejected: list[str] = []
    absent: dict[str, str] = {}
    with Stubber(client) as stub:
        answer(stub, "AmazonEC2", [iops])
        answer(stub, "AmazonEC2", [])
        # WHEN the provisioned rates are fetched, gp3's IOPS above 3,000 asked for
        got = fetch_provisioned(client, REGION, ["gp3/iops/3000"], rejected, absent)
    # THEN no rate is taken, the answer is reported naming its unit, and no Capacity Blocks
    assert got == {}
    assert any("'IOPS-Hrs'" in line for line in rejected), (rejected, absent)
    assert "Capacity Blocks" not in absent.get("gp3/iops/3000", "")


def test_io2_higher_tiers_without_the_first_do_not_price_its_first_iops_at_zero() -> None:
    """Defect: in a region whose catalog has no io2 IOPS rate yet, a Price List answer with
    io2's tiers above 32,000 and above 64,000 but not its first tier (its usage type absent)
    is stored as it is; the scan then prices the IOPS below the lowest tier it holds as
    "included in the volume's price". A 100 GiB io2 volume of 20,000 IOPS is priced at its
    size alone, $13.80 a month, not unpriced: 20,000 x $0.072 = $1,440 a month vanishes,
    exactly the understatement `volume_price` says it refuses ("the size alone would
    understate an io2 volume many times over")."""
    # GIVEN a catalog that prices io2 storage in the region but none of its IOPS
    doc = catalog().model_dump(mode="json")
    del doc["ebs_provisioned_month"][REGION]["io2"]
    start = CatalogFile.model_validate(doc)
    # and a Price List answering io2's higher tiers only
    iops = [
        item("EBS:VolumeP-IOPS.io2.tier2", "0.0504", "IOPS-Mo", "System Operation"),
        item("EBS:VolumeP-IOPS.io2.tier3", "0.03528", "IOPS-Mo", "System Operation"),
    ]
    client = boto3.client("pricing", region_name="us-east-1")
    store = InMemoryCatalogStore()
    with Stubber(client) as stub:
        region_answers(stub, iops=iops)
        # WHEN the catalog is refreshed
        PriceRefresh(
            store, PriceListApi(client, sleep=lambda _s: None), CatalogDocuments(start)
        ).run((REGION,), REFRESHED_AT)
    current = store.current()
    assert current is not None
    refreshed = CatalogFile.model_validate(current.document)
    # AND a 100 GiB io2 volume of 20,000 IOPS is priced from it, as the scan prices it
    price = volume_price(
        refreshed.ebs_gb_month[REGION]["io2"],
        refreshed.ebs_provisioned_month.get(REGION, {}).get("io2"),
        "io2",
        100,
        20_000,
        0,
    )
    # THEN its IOPS are not priced at $0: the volume is unpriced (no rate for its IOPS)
    assert price.usd_per_month is None, (price, refreshed.ebs_provisioned_month[REGION])
