"""Storage prices, hand-computed: EBS volumes by type, size, IOPS and throughput; snapshots;
S3 buckets by storage class. The rates are set here, so each figure can be checked by hand."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from decimal import Decimal

from costguard.domain.findings import FindingCode
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.pricing import Pricer, price_resource
from costguard.domain.storage import GIB, tiered
from tests.support.catalog import storage_catalog

TODAY = date(2026, 11, 20)
D = Decimal
#: The fixture's EBS GB-month rates (us-east-1: gp3 0.08, io1/io2 0.125, gp2 0.10), plus
#: storage rates (see ``storage_catalog``).
CATALOG = storage_catalog()


def volume(
    vtype: str, gib: int, iops: int = 0, mibps: int = 0, region: str = "us-east-1"
) -> Resource:
    return Resource(
        id="vol-1",
        kind=ResourceKind.EBS_VOLUME,
        region=region,
        volume_type=vtype,
        size_gib=gib,
        iops=iops,
        throughput_mibps=mibps,
    )


def monthly(res: Resource, catalog: object = CATALOG) -> Decimal | None:
    priced, _ = price_resource(res, catalog, {}, TODAY)  # type: ignore[arg-type]
    if priced.usd_per_hour is None:
        return None
    return (priced.usd_per_hour * 730).quantize(D("0.000001"))


def test_gp3_pays_for_iops_and_throughput_above_its_baseline() -> None:
    """GIVEN a gp3 volume of 500 GiB provisioned at 6,000 IOPS and 250 MiB/s
    WHEN it is priced
    THEN it costs its size, 3,000 extra IOPS and 125 extra MiB/s at the catalog's rates:
    500 x 0.08 + 3,000 x 0.005 + 125 x 0.04 = 40 + 15 + 5 = $60 a month."""
    res = volume("gp3", 500, iops=6000, mibps=250)
    priced, findings = price_resource(res, CATALOG, {}, TODAY)
    assert priced.usd_per_hour == D(60) / 730
    assert findings == []
    assert "6000 IOPS" in priced.basis and "250 MiB/s" in priced.basis


def test_gp3_at_its_baseline_costs_its_size_alone() -> None:
    """GIVEN gp3 volumes at 3,000 IOPS and 125 MiB/s (or reported without either)
    WHEN priced
    THEN each costs its size only: the baseline is included."""
    assert monthly(volume("gp3", 500, iops=3000, mibps=125)) == D(40)
    assert monthly(volume("gp3", 500)) == D(40)


def test_io2_iops_are_priced_in_their_three_tiers() -> None:
    """GIVEN io2 volumes of 100 GiB at 20,000 and at 80,000 IOPS
    WHEN priced
    THEN 20,000 IOPS are all in the first tier (20,000 x 0.065 = 1,300), and 80,000 are
    32,000 x 0.065 + 32,000 x 0.0455 + 16,000 x 0.03185 = 2,080 + 1,456 + 509.60; each
    plus 100 GiB x 0.125 = 12.50."""
    assert monthly(volume("io2", 100, iops=20000)) == D("1312.5")
    assert monthly(volume("io2", 100, iops=80000)) == D("4058.1")


def test_io1_pays_for_every_iops_and_gp2_st1_sc1_for_size_only() -> None:
    """GIVEN an io1 volume at 10,000 IOPS, and gp2, st1 and sc1 volumes that report IOPS
    WHEN priced
    THEN io1 pays 10,000 x 0.065 on top of its size; the others their size alone."""
    assert monthly(volume("io1", 100, iops=10000)) == D("662.5")
    assert monthly(volume("gp2", 100, iops=300)) == D(10)
    assert monthly(volume("st1", 1000, iops=500)) == D(45)
    assert monthly(volume("sc1", 1000)) == D(15)
    assert monthly(volume("standard", 100)) == D(5)


def test_provisioned_iops_without_a_rate_are_unpriced_never_the_size_alone() -> None:
    """GIVEN a catalog with volume rates but no provisioned IOPS/throughput rates
    WHEN an io2 volume, or a gp3 volume above its baseline, is priced
    THEN each is unpriced with a finding naming what is missing (the size alone would
    understate an io2 volume many times over); a gp3 volume at its baseline is priced."""
    bare = replace(CATALOG, ebs_provisioned_month={})
    for res in (volume("io2", 100, iops=20000), volume("gp3", 100, mibps=500)):
        priced, findings = price_resource(res, bare, {}, TODAY)
        assert priced.usd_per_hour is None
        assert findings[0].code is FindingCode.UNPRICED
        assert "provisioned" in findings[0].message
    assert monthly(volume("gp3", 100, iops=3000, mibps=125), bare) == D(8)


def test_tiers_charge_only_the_units_inside_each_tier() -> None:
    """GIVEN a two-tier rate (above 10 at $2, above 20 at $1)
    WHEN 5, 15 and 30 units are priced
    THEN 0, 5 x 2 and 10 x 2 + 10 x 1."""
    tiers = [(20, D(1)), (10, D(2))]  # unsorted on purpose
    assert [tiered(n, tiers) for n in (5, 15, 30)] == [D(0), D(10), D(30)]


def test_snapshot_is_priced_at_the_standard_tier_on_the_size_it_is_charged_at() -> None:
    """GIVEN a 100 GiB snapshot (standard tier) and an archived one
    WHEN priced
    THEN each is 100 x 0.05 = $5 a month, the basis says it is an upper bound, and the
    archived one says it is charged at the standard rate."""
    snap = Resource(
        id="snap-1",
        kind=ResourceKind.EBS_SNAPSHOT,
        region="us-east-1",
        size_gib=100,
        storage_tier="standard",
    )
    priced, findings = price_resource(snap, CATALOG, {}, TODAY)
    assert priced.usd_per_hour == D(5) / 730
    assert "upper bound" in priced.basis and findings == []
    archived, _ = price_resource(replace(snap, storage_tier="archive"), CATALOG, {}, TODAY)
    assert archived.usd_per_hour == D(5) / 730
    assert "archive tier" in archived.basis


def bucket(*stored: tuple[str, int]) -> Resource:
    return Resource(
        id="models",
        kind=ResourceKind.S3_BUCKET,
        region="us-east-1",
        stored_bytes=tuple(sorted(stored)),
    )


def test_s3_bucket_is_priced_by_storage_class() -> None:
    """GIVEN buckets of 100 GiB in Standard, in Standard-IA and in Glacier Flexible
    Retrieval (whose per-object overhead S3 bills at Standard)
    WHEN priced
    THEN 100 x 0.023 = 2.30, 100 x 0.0125 = 1.25, 100 x 0.0036 + 1 x 0.023 = 0.383; the
    basis says requests are not included."""
    standard = bucket(("StandardStorage", 100 * GIB))
    ia = bucket(("StandardIAStorage", 100 * GIB))
    glacier = bucket(("GlacierStorage", 100 * GIB), ("GlacierS3ObjectOverhead", GIB))
    assert monthly(standard) == D("2.3")
    assert monthly(ia) == D("1.25")
    assert monthly(glacier) == D("0.383")
    priced, _ = price_resource(standard, CATALOG, {}, TODAY)
    assert "requests not included" in priced.basis


def test_s3_standard_falls_back_to_the_flat_standard_table() -> None:
    """GIVEN a catalog without storage-class rates (an older one)
    WHEN a Standard bucket is priced
    THEN the S3 Standard rate the stale-object guard uses prices it (0.023)."""
    old = replace(CATALOG, s3_class_gb_month={})
    assert monthly(bucket(("StandardStorage", 10 * GIB)), old) == D("0.23")


def test_a_storage_type_the_catalog_cannot_price_makes_the_bucket_unpriced() -> None:
    """GIVEN a bucket with Standard bytes and One Zone-IA bytes the catalog has no rate for
    WHEN priced
    THEN it is unpriced (part of a bill is not the bill), and the finding names the type."""
    priced, findings = price_resource(
        bucket(("StandardStorage", GIB), ("OneZoneIAStorage", GIB)), CATALOG, {}, TODAY
    )
    assert priced.usd_per_hour is None
    assert "OneZoneIAStorage" in findings[0].message


def test_pricer_tells_volumes_of_one_size_but_other_iops_apart() -> None:
    """GIVEN two gp3 volumes of one size, one at the baseline and one at 16,000 IOPS
    WHEN a Pricer (which memoises by shape) prices both
    THEN each gets its own price."""
    pricer = Pricer(CATALOG, {}, TODAY)
    base, _ = pricer.price(volume("gp3", 100))
    fast, _ = pricer.price(volume("gp3", 100, iops=16000))
    assert base.usd_per_hour == D(8) / 730
    assert fast.usd_per_hour == (D(8) + 13000 * D("0.005")) / 730


def test_storage_is_labelled_as_storage() -> None:
    """GIVEN a volume, a snapshot, a bucket and an instance
    WHEN asked their category
    THEN the first three are storage and the instance compute."""
    snap = Resource(id="s", kind=ResourceKind.EBS_SNAPSHOT, region="us-east-1")
    inst = Resource(id="i", kind=ResourceKind.EC2_INSTANCE, region="us-east-1")
    assert [r.category for r in (volume("gp3", 1), snap, bucket(), inst)] == [
        "storage",
        "storage",
        "storage",
        "compute",
    ]
