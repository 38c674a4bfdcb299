"""Hostile S3 tiers from the Price List: the refresh prices every byte at the first tier,
so a tier that is not the first one (a dimension missing, a range below zero) must not be
read as it. Expected figures are computed by hand."""

from __future__ import annotations

from decimal import Decimal

from tests.pricing.test_storage_rates_refresh import REGION, refresh, s3_item


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
