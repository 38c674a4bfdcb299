"""The price refresh reads storage rates too: EBS snapshots, EBS provisioned IOPS and gp3
throughput, S3 storage by class. Price List answers are shaped as the API records them
(usage types with a region prefix, tiered S3 prices, gp3 throughput per GiBps-month);
every expected figure is computed by hand in the test."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from benchmarks.guard_bill import REFRESH_QUERIES_PER_REGION
from costguard.adapters.catalog import CatalogDocuments, CatalogFile, read_catalog_file
from costguard.adapters.pricing_api import PriceListApi
from costguard.domain.storage import volume_price
from costguard.services.price_refresh import PriceRefresh
from costguard.wiring.refresh import refresh_catalog
from tests.support.fake_price_list import FakePriceList, price_item, price_list_server
from tests.support.fakes import InMemoryCatalogStore

REFRESHED_AT = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
BUNDLED_AS_OF = date(2026, 11, 15)
REGION = "eu-west-1"
WHERE = {"regionCode": REGION, "locationType": "AWS Region"}


def catalog() -> CatalogFile:
    """One region with every storage section, at reference rates the tests move."""
    return CatalogFile.model_validate(
        {
            "version": 2,
            "as_of": BUNDLED_AS_OF.isoformat(),
            "sources": ["fixture"],
            "ec2": {REGION: {"g5.xlarge": "1.123"}},
            "sagemaker": {REGION: {"ml.g5.xlarge": "1.57"}},
            "ebs_gb_month": {REGION: {"gp3": "0.088", "io2": "0.138"}},
            "s3_standard_gb_month": {REGION: "0.023"},
            "ebs_snapshot_gb_month": {REGION: "0.05"},
            "ebs_provisioned_month": {
                REGION: {
                    "gp3": {"iops": [[3000, "0.0055"]], "throughput_mibps": [[125, "0.044"]]},
                    "io2": {"iops": [[0, "0.07"], [32000, "0.05"], [64000, "0.035"]]},
                }
            },
            "s3_class_gb_month": {REGION: {"standard": "0.023", "glacier": "0.0036"}},
            "eks_cluster_hour": {"standard": "0.10", "extended": "0.60"},
        }
    )


def answer(stub: Stubber, service: str, items: list[str]) -> None:
    stub.add_response(
        "get_products",
        {"PriceList": items, "FormatVersion": "aws_v1"},
        {"ServiceCode": service, "Filters": ANY, "FormatVersion": "aws_v1"},
    )


def item(usage: str, usd: str, unit: str, family: str, **attrs: str) -> str:
    return price_item({**WHERE, "usagetype": f"EU-{usage}", **attrs}, usd, unit, family=family)


def s3_item(usage: str, tiers: list[tuple[str, str, str]]) -> str:
    attrs = {**WHERE, "usagetype": f"EU-{usage}"}
    return price_item(attrs, "", "GB-Mo", family="Storage", tiers=tiers)


def region_answers(
    stub: Stubber,
    *,
    snapshots: list[str] | None = None,
    iops: list[str] | None = None,
    throughput: list[str] | None = None,
    s3: list[str] | None = None,
    deep_archive: list[str] | None = None,
) -> None:
    """The region's queries, in the order the refresh makes them."""
    answer(stub, "AmazonEC2", [price_item({**WHERE, "instanceType": "g5.xlarge"}, "1.123")])
    answer(stub, "AmazonSageMaker", [price_item({**WHERE, "instanceName": "ml.g5.xlarge"}, "1.57")])
    answer(stub, "AmazonEC2", [price_item({**WHERE, "volumeApiName": "gp3"}, "0.088", "GB-Mo")])
    answer(stub, "AmazonEC2", snapshots or [])
    answer(stub, "AmazonEC2", iops or [])
    answer(stub, "AmazonEC2", throughput or [])
    answer(stub, "AmazonS3", s3 or [])
    answer(stub, "AmazonS3GlacierDeepArchive", deep_archive or [])


def refresh(stub_answers: Mapping[str, list[str]]) -> tuple[CatalogFile, dict[str, Any]]:
    client = boto3.client("pricing", region_name="us-east-1")
    store = InMemoryCatalogStore()
    with Stubber(client) as stub:
        region_answers(stub, **stub_answers)
        outcome = PriceRefresh(
            store, PriceListApi(client, sleep=lambda _s: None), CatalogDocuments(catalog())
        ).run((REGION,), REFRESHED_AT)
    current = store.current()
    assert current is not None
    return CatalogFile.model_validate(current.document), outcome.summary()


GP3_THROUGHPUT = "EBS:VolumeP-Throughput.gp3"


def test_gp3_throughput_listed_per_gibps_month_is_stored_per_mibps_month() -> None:
    # GIVEN the Price List quotes gp3 throughput at $46.08 per GiBps-month (1 GiB/s is
    # 1,024 MiB/s: $46.08 / 1024 = $0.045 per MiB/s-month), its unit as AWS spells it
    tp = item(GP3_THROUGHPUT, "46.0800000000", "GiBps-mo", "Provisioned Throughput")
    # WHEN the catalog is refreshed
    refreshed, summary = refresh({"throughput": [tp]})
    # THEN the catalog holds $0.045 per MiB/s-month above 125 MiB/s, read from the API
    assert refreshed.ebs_provisioned_month[REGION]["gp3"]["throughput_mibps"] == [
        (125, Decimal("0.045"))
    ]
    source = refreshed.rate_sources["ebs_provisioned_month"][REGION]["gp3/throughput_mibps/125"]
    assert (source.source, source.as_of) == ("price-list-api", REFRESHED_AT.date())
    assert (
        "ebs_provisioned_month/eu-west-1/gp3/throughput_mibps/125: 0.044 -> 0.045"
        in (summary["changed"])
    )


def test_a_throughput_price_in_an_unknown_unit_is_not_taken() -> None:
    # GIVEN a throughput item quoted per Mbps-month, a unit the refresh does not convert
    tp = item(GP3_THROUGHPUT, "0.05", "Mbps-mo", "Provisioned Throughput")
    # WHEN the catalog is refreshed
    refreshed, summary = refresh({"throughput": [tp]})
    # THEN the last rate is kept and the answer is reported, never read as $/MiB/s-month
    assert refreshed.ebs_provisioned_month[REGION]["gp3"]["throughput_mibps"] == [
        (125, Decimal("0.044"))
    ]
    (line,) = summary["rejected_answers"]
    assert line.startswith("ebs_provisioned_month/eu-west-1/gp3/throughput_mibps/125: ")
    assert "'Mbps-mo'" in line and line.endswith("the last rate is kept")


def test_io2_three_tiers_are_read_and_price_a_70000_iops_volume() -> None:
    # GIVEN io2 IOPS in three usage types: up to 32,000 at $0.072, 32,001 to 64,000 at
    # $0.0504, above 64,000 at $0.03528 (eu-west-1's list prices), and gp3's and io1's
    io2 = [
        item("EBS:VolumeP-IOPS.io2", "0.072", "IOPS-Mo", "System Operation", volumeApiName="io2"),
        item("EBS:VolumeP-IOPS.io2.tier2", "0.0504", "IOPS-Mo", "System Operation"),
        item("EBS:VolumeP-IOPS.io2.tier3", "0.03528", "IOPS-Mo", "System Operation"),
        item("EBS:VolumeP-IOPS.gp3", "0.006", "IOPS-Mo", "System Operation"),
        # I/O requests of magnetic volumes share the family: never an IOPS rate
        item("EBS:VolumeIOUsage", "0.00000005", "IOs", "System Operation"),
    ]
    # WHEN the catalog is refreshed
    refreshed, summary = refresh({"iops": io2})
    # THEN io2 has its three tiers, each from its own usage type
    tiers = refreshed.ebs_provisioned_month[REGION]["io2"]["iops"]
    assert tiers == [(0, Decimal("0.072")), (32000, Decimal("0.0504")), (64000, Decimal("0.03528"))]
    assert refreshed.ebs_provisioned_month[REGION]["gp3"]["iops"] == [(3000, Decimal("0.006"))]
    assert summary["rejected_answers"] == []
    # AND a 100 GiB io2 volume of 70,000 IOPS costs, by hand: 100 x $0.138 = $13.80;
    # 32,000 x $0.072 = $2,304; 32,000 x $0.0504 = $1,612.80; 6,000 x $0.03528 = $211.68;
    # $4,142.28 a month in all
    price = volume_price(
        refreshed.ebs_gb_month[REGION]["io2"], {"iops": tiers}, "io2", 100, 70_000, 0
    )
    assert price.usd_per_month == Decimal("4142.28")


def test_an_iops_item_of_another_volume_type_is_not_read_as_this_ones() -> None:
    # GIVEN an io2 usage type whose item says it is for io1
    wrong = item("EBS:VolumeP-IOPS.io2", "0.01", "IOPS-Mo", "System Operation", volumeApiName="io1")
    # WHEN the catalog is refreshed
    refreshed, _ = refresh({"iops": [wrong]})
    # THEN io2's first tier keeps its rate
    assert refreshed.ebs_provisioned_month[REGION]["io2"]["iops"][0] == (0, Decimal("0.07"))


def test_s3_takes_the_first_tier_of_a_tiered_price_whatever_order_it_is_listed_in() -> None:
    # GIVEN S3 Standard in three tiers, listed last first: over 500 TB $0.021, the next
    # 450 TB $0.022, the first 50 TB $0.024 (domain.storage prices every byte at the first)
    standard = s3_item(
        "TimedStorage-ByteHrs",
        [("512000", "Inf", "0.021"), ("51200", "512000", "0.022"), ("0", "51200", "0.024")],
    )
    glacier = s3_item("TimedStorage-GlacierByteHrs", [("0", "Inf", "0.0036")])
    # and the staging usage type beside Deep Archive's storage, at 21 times its rate
    staging = s3_item("TimedStorage-GDA-Staging", [("0", "Inf", "0.021")])
    deep = s3_item("TimedStorage-GDA-ByteHrs", [("0", "Inf", "0.0018")])
    # WHEN the catalog is refreshed
    refreshed, summary = refresh({"s3": [standard, glacier, staging], "deep_archive": [deep]})
    # THEN Standard is $0.024 (the first tier, not the cheapest), Deep Archive its storage
    classes = refreshed.s3_class_gb_month[REGION]
    assert classes["standard"] == Decimal("0.024")
    assert classes["deep_archive"] == Decimal("0.0018")
    assert classes["glacier"] == Decimal("0.0036")
    # AND the stale-object guard's S3 Standard rate follows it: one rate, not two
    assert refreshed.s3_standard_gb_month[REGION] == Decimal("0.024")
    assert summary["rejected_answers"] == []


def test_a_section_the_api_did_not_answer_keeps_its_rates_and_says_so() -> None:
    # GIVEN a Price List that answers EBS snapshots but no S3 storage at all
    snap = item("EBS:SnapshotUsage", "0.05", "GB-Mo", "Storage Snapshot")
    # WHEN the catalog is refreshed
    refreshed, summary = refresh({"snapshots": [snap]})
    # THEN every S3 rate is kept, listed as kept, and its provenance says since when
    assert refreshed.s3_class_gb_month[REGION] == {
        "standard": Decimal("0.023"),
        "glacier": Decimal("0.0036"),
    }
    assert {
        "s3_class_gb_month/eu-west-1/glacier",
        "s3_class_gb_month/eu-west-1/standard",
    } <= set(summary["kept_from_previous"])
    kept = refreshed.rate_sources["s3_class_gb_month"][REGION]["standard"]
    assert (kept.source, kept.kept_since) == ("bundled", REFRESHED_AT.date())
    # AND the section's date is not moved: its rates were not checked today
    assert refreshed.as_of_by["s3_class_gb_month"][REGION] == BUNDLED_AS_OF
    assert refreshed.as_of_by["ebs_snapshot_gb_month"][REGION] == REFRESHED_AT.date()
    assert refreshed.as_of == BUNDLED_AS_OF


@pytest.mark.parametrize("usd", ["NaN", "Infinity", "0.05.1", "0"])
def test_a_malformed_snapshot_price_is_rejected_and_the_last_rate_kept(usd: str) -> None:
    # GIVEN the snapshot item's price is not a positive number
    snap = item("EBS:SnapshotUsage", usd, "GB-Mo", "Storage Snapshot")
    # WHEN the catalog is refreshed
    refreshed, summary = refresh({"snapshots": [snap]})
    # THEN the rate is kept and the answer is reported
    assert refreshed.ebs_snapshot_gb_month[REGION] == Decimal("0.05")
    (line,) = summary["rejected_answers"]
    assert line.startswith("ebs_snapshot_gb_month/eu-west-1/standard: ")


def test_a_storage_rate_that_moves_too_far_is_held_not_applied() -> None:
    # GIVEN throughput answered per MiB/s-month at $45.056, as if its unit were misread
    # (1024 times $0.044)
    tp = item(GP3_THROUGHPUT, "45.056", "MiBps-Mo", "Provisioned Throughput")
    # WHEN the catalog is refreshed
    refreshed, summary = refresh({"throughput": [tp]})
    # THEN the old rate stays and the new one is held for review
    assert refreshed.ebs_provisioned_month[REGION]["gp3"]["throughput_mibps"] == [
        (125, Decimal("0.044"))
    ]
    (held,) = summary["held_for_review"]
    assert held.startswith("ebs_provisioned_month/eu-west-1/gp3/throughput_mibps/125: ")


def test_storage_is_one_query_per_product_family_per_region(tmp_path: Path) -> None:
    # GIVEN the packaged catalog and a Price List that answers every region
    fake = FakePriceList()
    regions = ("us-east-1", "us-west-2", "eu-west-1")
    with price_list_server(fake):
        client = boto3.client("pricing", region_name="us-east-1", endpoint_url=fake.url)
        # WHEN the three regions are refreshed
        summary = refresh_catalog(
            client,
            regions=regions,
            output=tmp_path / "prices.json",
            today=REFRESHED_AT.date(),
            sleep=lambda _s: None,
        )
    # THEN each storage family was asked once per region, never once per name
    asked = Counter(
        (
            r["ServiceCode"],
            next((f["Value"] for f in r["Filters"] if f["Field"] == "productFamily"), None),
            next(f["Value"] for f in r["Filters"] if f["Field"] == "regionCode"),
        )
        for r in fake.requests
        if not any(f["Field"] in ("instanceType", "instanceName") for f in r["Filters"])
    )
    families = {
        ("AmazonEC2", "Storage"),
        ("AmazonEC2", "Storage Snapshot"),
        ("AmazonEC2", "System Operation"),
        ("AmazonEC2", "Provisioned Throughput"),
        ("AmazonS3", "Storage"),
        ("AmazonS3GlacierDeepArchive", None),
    }
    assert asked == Counter({(s, f, r): 1 for s, f in families for r in regions})
    # AND the self-cost table's figure holds: 9 queries a region (one EC2 batch, one
    # SageMaker batch, six storage families) for the packaged catalog
    assert len(fake.requests) == len(regions) * REFRESH_QUERIES_PER_REGION == 27
    # AND every storage rate of the packaged catalog was read back unchanged
    assert summary["held_for_review"] == [] and summary["rejected_answers"] == []
    packaged = read_catalog_file()
    refreshed = read_catalog_file(tmp_path / "prices.json")
    assert refreshed.ebs_provisioned_month == packaged.ebs_provisioned_month
    assert refreshed.s3_class_gb_month == packaged.s3_class_gb_month
    assert refreshed.ebs_snapshot_gb_month == packaged.ebs_snapshot_gb_month
    source = refreshed.rate_sources["ebs_provisioned_month"]["us-east-1"]["io2/iops/64000"]
    assert source.source == "price-list-api"


def test_a_catalog_stored_before_storage_was_refreshed_loads_and_gets_its_storage_read() -> None:
    # GIVEN a stored catalog written by a refresh that read EC2, SageMaker and EBS GB-month
    # only, on 2026-11-22: dates and provenance for those sections, none for storage, whose
    # reference rates (the package's) were reviewed on 2026-11-10
    import json

    package = catalog().model_copy(update={"reference_as_of": date(2026, 11, 10)})
    old = json.loads(package.model_dump_json())
    old |= {"version": 5, "as_of": "2026-11-22"}
    old["as_of_by"] = {s: {REGION: "2026-11-22"} for s in ("ec2", "sagemaker", "ebs_gb_month")}
    old["rate_sources"] = {
        "ec2": {REGION: {"g5.xlarge": {"source": "price-list-api", "as_of": "2026-11-22"}}}
    }
    store = InMemoryCatalogStore()
    assert store.put(old, expected_version=0, at=REFRESHED_AT) is not None
    client = boto3.client("pricing", region_name="us-east-1")
    snap = item("EBS:SnapshotUsage", "0.055", "GB-Mo", "Storage Snapshot")
    # WHEN this version refreshes it
    with Stubber(client) as stub:
        region_answers(stub, snapshots=[snap])
        outcome = PriceRefresh(
            store, PriceListApi(client, sleep=lambda _s: None), CatalogDocuments(package)
        ).run((REGION,), REFRESHED_AT)
    # THEN it is read as it was (no problem), and a new version holds the snapshot rate read
    assert outcome.written and outcome.problem is None and outcome.version == 6
    current = store.current()
    assert current is not None
    refreshed = CatalogFile.model_validate(current.document)
    assert refreshed.ebs_snapshot_gb_month[REGION] == Decimal("0.055")
    assert refreshed.as_of_by["ebs_snapshot_gb_month"][REGION] == REFRESHED_AT.date()
    # AND the storage it did not get back is dated by its review, not by the old refresh
    # that carried it, and so is the catalog: its oldest rates were checked then
    assert refreshed.as_of_by["s3_class_gb_month"][REGION] == date(2026, 11, 10)
    assert refreshed.as_of == date(2026, 11, 10)
