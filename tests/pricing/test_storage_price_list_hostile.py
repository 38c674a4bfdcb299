"""Hostile storage items from the Price List. S3 tiers: the refresh prices every byte at the
first tier, so a tier that is not the first one (a dimension missing, a range below zero)
must not be read as it. Units: an item in a unit the refresh does not read is not taken,
and is said to be so (as gp3 throughput's is). Expected figures are computed by hand."""

from __future__ import annotations

from decimal import Decimal

import boto3
from botocore.stub import Stubber

from costguard.adapters.pricing_api import fetch_provisioned, fetch_s3
from tests.pricing.test_storage_rates_refresh import REGION, answer, item, refresh, s3_item


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
