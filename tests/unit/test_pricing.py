from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from costguard.adapters.catalog import load_catalog
from costguard.domain.findings import FindingCode
from costguard.domain.models import Lifecycle, Resource, ResourceKind
from costguard.domain.pricing import price_resource

CATALOG = load_catalog()
TODAY = date(2026, 11, 20)


def ec2(itype: str, region: str = "us-east-1", **kw: object) -> Resource:
    return Resource(
        id="i-1", kind=ResourceKind.EC2_INSTANCE, region=region, instance_type=itype, **kw
    )  # type: ignore[arg-type]


def test_bundled_catalog_carries_current_post_cut_p4_p5_prices() -> None:
    # AWS cut P4/P5 on-demand prices in mid-2025; the pre-cut p5.48xlarge was $98.32/h.
    assert CATALOG.ec2_on_demand("us-east-1", "p5.48xlarge") == Decimal("55.04")
    assert CATALOG.ec2_on_demand("us-east-1", "p4d.24xlarge") == Decimal("21.957642")
    assert CATALOG.as_of >= date(2025, 7, 1)


@pytest.mark.parametrize(
    "family",
    [
        "p3",
        "p3dn",
        "p4d",
        "p4de",
        "p5",
        "p5en",
        "p6-b200",
        "p6-b300",
        "g4dn",
        "g5",
        "g6",
        "g6e",
        "g6f",
        "gr6",
        "g7e",
        "trn1",
        "trn1n",
        "inf2",
        "dl1",
    ],
)
@pytest.mark.parametrize("region", ["us-east-1", "us-west-2"])
def test_catalog_covers_the_accelerated_families(family: str, region: str) -> None:
    assert any(t.split(".")[0] == family for t in CATALOG.ec2[region])


def test_on_demand_instance_is_priced_from_the_catalog() -> None:
    priced, findings = price_resource(ec2("g5.xlarge"), CATALOG, {}, TODAY)
    assert priced.usd_per_hour == Decimal("1.006")
    assert findings == []


def test_unknown_type_is_unpriced_never_zero() -> None:
    priced, findings = price_resource(ec2("p9.96xlarge"), CATALOG, {}, TODAY)
    assert priced.usd_per_hour is None
    assert not priced.priced
    assert findings[0].code is FindingCode.UNPRICED
    assert "p9.96xlarge" in findings[0].message


def test_unknown_region_is_unpriced() -> None:
    priced, findings = price_resource(ec2("g5.xlarge", region="ap-south-2"), CATALOG, {}, TODAY)
    assert priced.usd_per_hour is None
    assert findings[0].code is FindingCode.UNPRICED


def test_spot_uses_the_latest_price_for_its_availability_zone() -> None:
    res = ec2("p4d.24xlarge", lifecycle=Lifecycle.SPOT, availability_zone="us-east-1a")
    spot = {
        ("us-east-1", "us-east-1a", "p4d.24xlarge"): Decimal("9.88"),
        ("us-east-1", "us-east-1b", "p4d.24xlarge"): Decimal("12"),
    }
    priced, findings = price_resource(res, CATALOG, spot, TODAY)
    assert priced.usd_per_hour == Decimal("9.88")
    assert findings == []


def test_implausible_or_missing_spot_price_falls_back_to_on_demand_with_a_finding() -> None:
    res = ec2("p4d.24xlarge", lifecycle=Lifecycle.SPOT, availability_zone="us-east-1a")
    for spot in ({}, {("us-east-1", "us-east-1a", "p4d.24xlarge"): Decimal("0.00001")}):
        priced, findings = price_resource(res, CATALOG, spot, TODAY)
        assert priced.usd_per_hour == Decimal("21.957642")
        assert findings[0].code is FindingCode.SPOT_PRICE_FALLBACK


def test_sagemaker_rates_are_not_ec2_rates_and_scale_with_instance_count() -> None:
    res = Resource(
        id="ep/v",
        kind=ResourceKind.SAGEMAKER_ENDPOINT,
        region="us-east-1",
        instance_type="ml.g5.xlarge",
        count=3,
    )
    priced, _ = price_resource(res, CATALOG, {}, TODAY)
    assert priced.usd_per_hour == Decimal("1.408") * 3
    assert priced.usd_per_hour != CATALOG.ec2_on_demand("us-east-1", "g5.xlarge") * 3  # type: ignore[operator]


def test_ebs_volume_is_priced_by_gb_month() -> None:
    res = Resource(
        id="vol-1",
        kind=ResourceKind.EBS_VOLUME,
        region="us-east-1",
        volume_type="gp3",
        size_gib=730,
    )
    priced, _ = price_resource(res, CATALOG, {}, TODAY)
    assert priced.usd_per_hour == Decimal("0.08")  # 730 GiB x $0.08 / 730 h


def test_eks_cluster_pays_extended_support_after_its_version_leaves_standard_support() -> None:
    old = Resource(id="c", kind=ResourceKind.EKS_CLUSTER, region="us-east-1", version="1.29")
    new = Resource(id="c", kind=ResourceKind.EKS_CLUSTER, region="us-east-1", version="1.33")
    assert price_resource(old, CATALOG, {}, TODAY)[0].usd_per_hour == Decimal("0.60")
    assert price_resource(new, CATALOG, {}, date(2026, 7, 1))[0].usd_per_hour == Decimal("0.10")


def test_node_groups_cost_nothing_themselves_their_instances_are_priced() -> None:
    ng = Resource(
        id="c/ng",
        kind=ResourceKind.EKS_NODEGROUP,
        region="us-east-1",
        instance_type="g5.12xlarge",
        desired_size=4,
    )
    priced, _ = price_resource(ng, CATALOG, {}, TODAY)
    assert priced.usd_per_hour == 0
    assert not ng.billable


def test_naive_now_is_rejected() -> None:
    from costguard.domain.calendar import month_key

    with pytest.raises(ValueError, match="naive"):
        month_key(datetime(2026, 11, 1))  # noqa: DTZ001
    assert month_key(datetime(2026, 11, 1, tzinfo=UTC)) == "2026-11"


def test_catalog_covers_eu_west_1_for_the_families_aws_offers_there() -> None:
    for itype in (
        "p3.2xlarge",
        "p3dn.24xlarge",
        "p4d.24xlarge",
        "g4dn.xlarge",
        "g5.48xlarge",
        "inf1.xlarge",
        "inf2.48xlarge",
    ):
        assert CATALOG.ec2_on_demand("eu-west-1", itype) is not None, itype
    assert CATALOG.ec2_on_demand("eu-west-1", "p4d.24xlarge") == Decimal("23.71569")


def test_unpriced_says_why_when_the_family_is_not_offered_in_the_region() -> None:
    _, findings = price_resource(ec2("g6.xlarge", region="eu-west-1"), CATALOG, {}, TODAY)
    assert "g6 instances are not offered in eu-west-1" in findings[0].message


def test_capacity_block_only_types_are_unpriced_with_the_reason() -> None:
    priced, findings = price_resource(ec2("p5e.48xlarge"), CATALOG, {}, TODAY)
    assert priced.usd_per_hour is None
    assert "Capacity Blocks" in findings[0].message


def test_managed_spot_training_is_an_on_demand_upper_bound_with_a_finding() -> None:
    from costguard.domain.models import Lifecycle

    job = Resource(
        id="ft",
        kind=ResourceKind.SAGEMAKER_TRAINING_JOB,
        region="us-west-2",
        instance_type="ml.p4d.24xlarge",
        count=2,
        lifecycle=Lifecycle.SPOT,
    )
    priced, findings = price_resource(job, CATALOG, {}, TODAY)
    assert priced.usd_per_hour == Decimal("25.251") * 2
    assert findings[0].code is FindingCode.SPOT_PRICE_FALLBACK


@pytest.mark.parametrize(
    ("version", "day", "rate"),
    [
        ("1.34", date(2026, 12, 2), Decimal("0.10")),  # the last day of standard support
        ("1.34", date(2026, 12, 3), Decimal("0.60")),  # 1.34 was missing: $0.10/h before
        ("1.35", date(2027, 3, 27), Decimal("0.10")),
        ("1.35", date(2027, 3, 28), Decimal("0.60")),
    ],
)
def test_every_announced_eks_version_leaves_standard_support_on_its_date(
    version: str, day: date, rate: Decimal
) -> None:
    cluster = Resource(id="c", kind=ResourceKind.EKS_CLUSTER, region="us-east-1", version=version)
    priced, findings = price_resource(cluster, load_catalog(), {}, day)
    assert (priced.usd_per_hour, findings) == (rate, [])


@pytest.mark.parametrize(
    ("version", "day", "rate"),
    [
        ("1.36", date(2027, 1, 1), Decimal("0.10")),  # newer than the table: standard
        ("1.27", date(2026, 1, 1), Decimal("0.60")),  # older than the table: extended
        ("1.36", date(2028, 1, 1), Decimal("0.60")),  # and it ages out by the cadence
        ("v1.x", date(2026, 1, 1), Decimal("0.60")),  # not a version: the upper bound
        ("", date(2026, 1, 1), Decimal("0.60")),
    ],
)
def test_an_eks_version_the_table_lacks_is_placed_by_the_cadence_with_a_finding(
    version: str, day: date, rate: Decimal
) -> None:
    from costguard.domain.findings import FindingCode

    cluster = Resource(id="c", kind=ResourceKind.EKS_CLUSTER, region="us-east-1", version=version)
    priced, findings = price_resource(cluster, load_catalog(), {}, day)
    assert priced.usd_per_hour == rate
    (finding,) = findings
    assert finding.code is FindingCode.EKS_VERSION_UNKNOWN
    assert finding.resource == cluster.key


def test_a_spot_instance_of_an_uncatalogued_type_is_priced_at_its_live_spot_price() -> None:
    from costguard.domain.findings import FindingCode
    from costguard.domain.models import Lifecycle

    spot = Resource(
        id="i-1",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="p9.96xlarge",
        availability_zone="us-east-1a",
        lifecycle=Lifecycle.SPOT,
    )
    prices = {("us-east-1", "us-east-1a", "p9.96xlarge"): Decimal("31.20")}
    priced, (finding,) = price_resource(spot, CATALOG, prices, TODAY)
    # the live price is what it costs; only the on-demand rate is unknown, and said so
    assert priced.usd_per_hour == Decimal("31.20")
    assert finding.code is FindingCode.UNPRICED and "on-demand" in finding.message
    # without a plausible spot price it stays unpriced, never $0
    moto_static = {("us-east-1", "us-east-1a", "p9.96xlarge"): Decimal("0.00001")}
    assert price_resource(spot, CATALOG, moto_static, TODAY)[0].usd_per_hour is None
