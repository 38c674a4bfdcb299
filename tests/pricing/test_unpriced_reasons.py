"""Why a rate is missing: every unpriced type or region says why, in the scan's finding and
in `prices show`'s sheet, and a refresh records what the Price List API said.

Unpriced is never $0, and "no rate matches" tells a user nothing they can act on.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date
from decimal import Decimal
from pathlib import Path

from costguard.adapters.catalog import (
    CatalogFile,
    parse_catalog,
    rate_book,
    read_catalog_file,
    with_rate_book,
)
from costguard.domain.catalog_merge import Fetched, NoRate, merge
from costguard.domain.findings import FindingCode
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.pricing import price_resource
from costguard.domain.rate_sheet import EVERY_REGION, RateRow, rate_sheet
from tests.support.catalog import FIXTURE_CATALOG_PATH, fixture_catalog

TODAY = date(2026, 11, 20)
CATALOG = fixture_catalog()
FILE = read_catalog_file(FIXTURE_CATALOG_PATH)


def sheet(catalog_file: CatalogFile = FILE) -> list[RateRow]:
    return rate_sheet(catalog_file.to_domain(), rate_book(catalog_file))


def row(rows: list[RateRow], service: str, region: str, name: str) -> RateRow:
    (found,) = [r for r in rows if (r.service, r.region, r.name) == (service, region, name)]
    return found


def ec2(itype: str, region: str) -> Resource:
    return Resource(id="i-1", kind=ResourceKind.EC2_INSTANCE, region=region, instance_type=itype)


def test_a_type_priced_in_one_region_only_says_where_it_is_priced() -> None:
    # GIVEN g5.2xlarge, priced in us-east-1 only, and nothing recorded about us-west-2
    # WHEN it runs in us-west-2
    priced, (finding,) = price_resource(ec2("g5.2xlarge", "us-west-2"), CATALOG, {}, TODAY)
    # THEN it is unpriced, never $0, and the finding says where it is priced and what to run
    assert priced.usd_per_hour is None and finding.code is FindingCode.UNPRICED
    assert "prices EC2 g5.2xlarge in us-east-1 only" in finding.message
    assert "costguard prices refresh --region us-west-2" in finding.message
    # AND the sheet says the same for that region, with no rate
    unpriced = row(sheet(), "ec2", "us-west-2", "g5.2xlarge")
    assert (
        unpriced.usd is None
        and unpriced.reason == finding.message.split(": ", 1)[1].split("; its spend")[0]
    )


def test_reasons_the_catalog_records_reach_the_sheet() -> None:
    # GIVEN a family not offered in eu-west-1, and a Capacity-Blocks-only type
    rows = sheet()
    # THEN each unpriced row gives the recorded reason
    assert row(rows, "ec2", "eu-west-1", "g6.xlarge").reason == (
        "g6 instances are not offered in eu-west-1"
    )
    assert "Capacity Blocks" in (row(rows, "ec2", "us-east-1", "p5e.48xlarge").reason or "")
    assert "rate not verified" in (
        row(rows, "sagemaker", "eu-west-1", "ml.g5.2xlarge").reason or ""
    )
    # AND no unpriced row anywhere lacks a reason, and none is $0
    assert all(r.reason for r in rows if r.usd is None)
    assert all(r.usd is None or r.usd > 0 for r in rows)


def test_a_region_the_catalog_has_never_seen_says_so() -> None:
    # GIVEN ap-south-2, which the catalog knows nothing of
    _, (finding,) = price_resource(ec2("g5.xlarge", "ap-south-2"), CATALOG, {}, TODAY)
    # THEN the finding names the region as the gap, and the regions the catalog has
    assert "no EC2 rates for ap-south-2 (it has eu-west-1, us-east-1, us-west-2)" in (
        finding.message
    )
    assert "costguard prices refresh --region ap-south-2" in finding.message


def test_an_unknown_volume_type_is_unpriced_with_its_reason() -> None:
    # GIVEN an EBS volume of a type no catalog region prices
    volume = Resource(
        id="vol-1", kind=ResourceKind.EBS_VOLUME, region="us-east-1", volume_type="gp9",
        size_gib=100,
    )  # fmt: skip
    priced, (finding,) = price_resource(volume, CATALOG, {}, TODAY)
    # THEN unpriced (never $0), and the message names the type as unknown to the catalog
    assert priced.usd_per_hour is None
    assert "EBS volume type 'gp9' is not in the price catalog" in finding.message


def test_a_hostile_type_name_is_quoted_not_printed_raw() -> None:
    # GIVEN an instance type carrying a newline and an escape (a tag-shaped attack)
    itype = "g5.x\nlarge\x1b[2J"
    _, (finding,) = price_resource(ec2(itype, "us-east-1"), CATALOG, {}, TODAY)
    # THEN the reason quotes it: no raw newline or escape in the message's reason
    reason = finding.message.split(": ", 1)[1]
    assert "\n" not in reason and "\x1b" not in reason


def test_the_sheet_has_every_kind_of_rate_the_guard_uses() -> None:
    rows = sheet()
    services = {r.service for r in rows}
    assert services == {"ec2", "sagemaker", "ebs", "ebs-snapshot", "s3", "eks"}
    # EKS's two tiers hold in every region
    eks = {r.name: r.usd for r in rows if r.service == "eks"}
    assert eks == {
        "cluster (standard support)": Decimal("0.10"),
        "cluster (extended support)": Decimal("0.60"),
    }
    assert {r.region for r in rows if r.service == "eks"} == {EVERY_REGION}


def test_a_catalog_from_before_reasons_and_reference_dates_is_read() -> None:
    # GIVEN the fixture, written before no_rate and reference_as_of existed (no snapshot
    # rates either), and the same catalog once refreshed by an older CostGuard
    assert "no_rate" not in json.loads(FIXTURE_CATALOG_PATH.read_text())
    rows = sheet()
    # THEN its reference rates are dated by the catalog itself (it was never refreshed)
    assert row(rows, "s3", "us-east-1", "Standard").as_of == FILE.as_of
    # AND a snapshot rate it never had is unpriced with a reason, not $0
    snap = row(rows, "ebs-snapshot", "us-east-1", "standard tier")
    assert snap.usd is None and "no EBS snapshot storage rates" in (snap.reason or "")
    # AND once an older refresh rewrote it (dates per region, no reference date), the
    # reference rates' date is unknown rather than borrowed from the refreshed rates
    data = json.loads(FIXTURE_CATALOG_PATH.read_text())
    data["as_of_by"] = {"ec2": {"us-east-1": "2026-11-15"}}
    refreshed = parse_catalog(data, "old refreshed catalog")
    assert row(sheet(refreshed), "eks", EVERY_REGION, "cluster (standard support)").as_of is None


def test_a_refresh_records_why_the_api_had_no_rate_and_forgets_it_once_priced() -> None:
    # GIVEN a refresh asked eu-west-1 for p5.48xlarge and the API had no product for it
    book = rate_book(FILE)
    why = "not offered in eu-west-1 (no EC2 product in the Price List)"
    fetched = Fetched(
        "eu-west-1",
        {"ec2": {"g5.xlarge": Decimal("1.123")}},
        absent={"ec2": {"p5.48xlarge": why, "g5.xlarge": "ignored: it is priced"}},
    )
    result = merge(book, [fetched], today=TODAY)
    # THEN the reason is recorded for the name without a rate, with the day it was given
    assert result.book.no_rate == {"ec2": {"eu-west-1": {"p5.48xlarge": NoRate(why, TODAY)}}}
    # AND it survives the catalog file, and reaches the scan's finding
    written = with_rate_book(FILE, result.book, sources=["test"])
    catalog = written.to_domain()
    # (the fixture says p5 is not offered in eu-west-1: drop that to see the API's reason)
    catalog = replace(catalog, not_offered={})
    _, (finding,) = price_resource(ec2("p5.48xlarge", "eu-west-1"), catalog, {}, TODAY)
    assert f"{why} (Price List API, since {TODAY.isoformat()})" in finding.message
    # AND a later refresh that gets a rate forgets the reason
    later = merge(
        result.book,
        [Fetched("eu-west-1", {"ec2": {"p5.48xlarge": Decimal("60")}})],
        today=date(2026, 11, 27),
    )
    assert later.book.no_rate == {}


def test_a_reason_given_again_keeps_its_first_day() -> None:
    book = rate_book(FILE)
    why = "no on-demand rate in the Price List for us-east-1"
    first = merge(
        book, [Fetched("us-east-1", {"ec2": {"g5.xlarge": Decimal("1.006")}},
                       absent={"ec2": {"p5e.48xlarge": why}})], today=TODAY,
    ).book  # fmt: skip
    again = merge(
        first, [Fetched("us-east-1", {"ec2": {"g5.xlarge": Decimal("1.006")}},
                        absent={"ec2": {"p5e.48xlarge": why}})], today=date(2026, 11, 27),
    ).book  # fmt: skip
    assert again.no_rate["ec2"]["us-east-1"]["p5e.48xlarge"].since == TODAY


def test_the_packaged_catalog_dates_its_reference_rates(tmp_path: Path) -> None:
    packaged = read_catalog_file()
    assert packaged.reference_as_of is not None
    rows = sheet(packaged)
    assert all(r.as_of is not None for r in rows if r.service in ("eks", "s3", "ebs-snapshot"))


def test_a_newer_package_keeps_the_stored_reasons_for_what_it_does_not_price() -> None:
    from costguard.adapters.catalog import overlay

    # GIVEN a stored catalog that prices a region the package lacks and recorded why the
    # API had no rate for two names, one of which the (newer) package now prices
    data = json.loads(FIXTURE_CATALOG_PATH.read_text())
    data["ec2"]["ap-south-1"] = {"g5.xlarge": "1.2"}
    note = {
        "reason": "not offered in us-west-2 (no EC2 product in the Price List)",
        "since": "2026-10-01",
    }
    data["no_rate"] = {"ec2": {"us-west-2": {"zz1.xlarge": note, "g5.xlarge": note}}}
    stored = parse_catalog(data, "stored")
    # WHEN a scan reads the package's catalog with the stored-only rates on top
    both = overlay(FILE, stored)
    # THEN the reason for what nobody prices is kept; the one the package answers is gone
    assert both is not None
    assert set(both.no_rate["ec2"]["us-west-2"]) == {"zz1.xlarge"}
    assert "Price List API, since 2026-10-01" in (
        both.to_domain().why_unpriced("us-west-2", "zz1.xlarge") or ""
    )


def test_sizes_are_listed_as_aws_lists_them() -> None:
    from costguard.domain.rate_sheet import by_size

    names = ["g5.48xlarge", "g5.metal", "g5.2xlarge", "g5.xlarge", "g5.12xlarge", "g5.large"]
    assert sorted(names, key=by_size) == [
        "g5.large", "g5.xlarge", "g5.2xlarge", "g5.12xlarge", "g5.48xlarge", "g5.metal",
    ]  # fmt: skip
