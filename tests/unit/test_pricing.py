from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from costguard.domain.findings import FindingCode, Severity
from costguard.domain.models import Lifecycle, Resource, ResourceKind
from costguard.domain.pricing import Pricer, price_resource
from tests.support.catalog import fixture_catalog

CATALOG = fixture_catalog()
TODAY = date(2026, 11, 20)


def ec2(itype: str, region: str = "us-east-1", **kw: object) -> Resource:
    return Resource(
        id="i-1", kind=ResourceKind.EC2_INSTANCE, region=region, instance_type=itype, **kw
    )  # type: ignore[arg-type]


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
    priced, findings = price_resource(cluster, CATALOG, {}, day)
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
    priced, findings = price_resource(cluster, CATALOG, {}, day)
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


def sagemaker(itype: str, region: str = "us-east-1", **kw: object) -> Resource:
    return Resource(
        id="nb", kind=ResourceKind.SAGEMAKER_NOTEBOOK, region=region, instance_type=itype, **kw
    )  # type: ignore[arg-type]


def codes(findings: list[object]) -> list[FindingCode]:
    return [f.code for f in findings]  # type: ignore[attr-defined]


@pytest.mark.parametrize("itype", ["p3.2xlarge", "p3.8xlarge"])
def test_a_running_instance_of_a_retired_type_keeps_its_rate_and_is_flagged(itype: str) -> None:
    # GIVEN an instance of a type AWS has retired (its family is in `retired`)
    res = ec2(itype)
    # WHEN it is priced
    priced, findings = price_resource(res, CATALOG, {}, TODAY)
    # THEN it still costs its last rate (it still bills), and a warning names it and its type
    assert priced.usd_per_hour == CATALOG.ec2_on_demand("us-east-1", itype)
    (finding,) = findings
    assert finding.code is FindingCode.INSTANCE_TYPE_RETIRED
    assert finding.resource == res.key
    assert itype in finding.message and "retired" in finding.message
    assert finding.severity is Severity.WARNING


def test_a_family_is_its_whole_prefix_so_p3dn_is_not_retired_with_p3() -> None:
    # GIVEN `retired` names p3, not p3dn
    # WHEN a p3dn.24xlarge is priced
    priced, findings = price_resource(ec2("p3dn.24xlarge"), CATALOG, {}, TODAY)
    # THEN it is an ordinary on-demand instance
    assert (priced.basis, findings) == ("ec2 on-demand", [])


def test_a_retired_size_is_flagged_while_its_family_is_not() -> None:
    # GIVEN only zz1.2xlarge is retired, by its exact name
    retired, retired_findings = price_resource(ec2("zz1.2xlarge"), CATALOG, {}, TODAY)
    _, current_findings = price_resource(ec2("zz1.xlarge"), CATALOG, {}, TODAY)
    # THEN only that size is flagged
    assert codes(retired_findings) == [FindingCode.INSTANCE_TYPE_RETIRED]
    assert retired.usd_per_hour == Decimal("4.00")
    assert current_findings == []


def test_a_retired_spot_instance_is_flagged_whatever_it_is_priced_at() -> None:
    # GIVEN a spot p3 with a plausible live spot price
    res = ec2("p3.2xlarge", lifecycle=Lifecycle.SPOT, availability_zone="us-east-1a")
    spot = {("us-east-1", "us-east-1a", "p3.2xlarge"): Decimal("0.95")}
    # WHEN it is priced
    priced, findings = price_resource(res, CATALOG, spot, TODAY)
    # THEN the spot price stands and the retirement is still said
    assert (priced.usd_per_hour, priced.basis) == (Decimal("0.95"), "ec2 spot")
    assert codes(findings) == [FindingCode.INSTANCE_TYPE_RETIRED]


def test_retired_sagemaker_family_is_keyed_apart_from_its_ec2_twin() -> None:
    # GIVEN `retired` names the EC2 family p3 and the SageMaker family ml.zz1
    # WHEN notebooks of ml.p3 and ml.zz1 are priced
    _, p3_findings = price_resource(sagemaker("ml.p3.2xlarge"), CATALOG, {}, TODAY)
    zz1, zz1_findings = price_resource(sagemaker("ml.zz1.xlarge"), CATALOG, {}, TODAY)
    # THEN the EC2 retirement does not leak into SageMaker; the SageMaker one is flagged
    assert p3_findings == []
    assert zz1.usd_per_hour == Decimal("3.00")
    assert codes(zz1_findings) == [FindingCode.INSTANCE_TYPE_RETIRED]


def test_the_retired_finding_is_addressed_to_each_resource_of_a_shape() -> None:
    # GIVEN two p3 instances of the same shape, priced through the memoising Pricer
    pricer = Pricer(CATALOG, {}, TODAY)
    first, second = (
        ec2("p3.2xlarge"),
        Resource(
            id="i-2", kind=ResourceKind.EC2_INSTANCE, region="us-east-1", instance_type="p3.2xlarge"
        ),
    )
    # WHEN both are priced
    (_, f1), (_, f2) = pricer.price(first), pricer.price(second)
    # THEN each finding names its own resource, and the message names no other
    assert (f1[0].resource, f2[0].resource) == (first.key, second.key)
    assert first.key not in f2[0].message


def test_offered_types_never_propose_a_retired_or_not_offered_type() -> None:
    # WHEN the options for estimates are listed
    us = CATALOG.offered_types("us-east-1")
    eu = CATALOG.offered_types("eu-west-1")
    # THEN retired types (by family or by name) are left out, current ones stay, in order
    assert "p3.2xlarge" not in us and "p3.8xlarge" not in us and "zz1.2xlarge" not in us
    assert {"g5.xlarge", "p3dn.24xlarge", "zz1.xlarge", "p5.48xlarge"} <= set(us)
    assert list(us) == sorted(us)
    # AND eu-west-1 says the same of p3 (retired everywhere), and offers nothing it does not have
    assert "p3.2xlarge" not in eu
    assert set(eu) == {"g5.xlarge", "p4d.24xlarge"}


def test_offered_types_for_sagemaker_drop_retired_sagemaker_families() -> None:
    offered = CATALOG.offered_types("us-east-1", service="sagemaker")
    assert "ml.zz1.xlarge" not in offered
    assert {"ml.g5.xlarge", "ml.p3.2xlarge", "ml.p4d.24xlarge"} <= set(offered)
    assert CATALOG.offered_types("ap-south-2") == ()


def test_a_capacity_block_only_size_is_unpriced_with_its_reason() -> None:
    # GIVEN trn2.3xlarge, which AWS sells only through Capacity Blocks
    priced, (finding,) = price_resource(ec2("trn2.3xlarge"), CATALOG, {}, TODAY)
    # THEN it is unpriced, never $0, and the finding says why
    assert priced.usd_per_hour is None
    assert finding.code is FindingCode.UNPRICED and "Capacity Blocks" in finding.message


def test_an_unverified_sagemaker_rate_is_unpriced_with_its_reason() -> None:
    # GIVEN a SageMaker type whose public rates disagree, so the catalog holds no rate
    priced, (finding,) = price_resource(sagemaker("ml.trn1.32xlarge"), CATALOG, {}, TODAY)
    # THEN it is unpriced and says the rate was not verified
    assert priced.usd_per_hour is None
    assert "rate not verified" in finding.message


def test_an_unpriced_reason_for_one_region_applies_to_that_region_only() -> None:
    _, (eu,) = price_resource(sagemaker("ml.g5.2xlarge", "eu-west-1"), CATALOG, {}, TODAY)
    _, (west,) = price_resource(sagemaker("ml.g5.2xlarge", "us-west-2"), CATALOG, {}, TODAY)
    assert "rate not verified" in eu.message and "eu-west-1" in eu.message
    assert "rate not verified" not in west.message


def test_a_sagemaker_reason_is_not_borrowed_from_the_ec2_type() -> None:
    # GIVEN p5e.48xlarge's reason speaks of EC2 Capacity Blocks
    _, (finding,) = price_resource(sagemaker("ml.p5e.48xlarge"), CATALOG, {}, TODAY)
    # THEN a SageMaker ml.p5e is unpriced without that EC2 reason
    assert "Capacity Blocks" not in finding.message


def test_a_low_confidence_rate_is_priced_and_marked() -> None:
    # GIVEN a SageMaker rate the catalog marks as resting on a single, dated source
    priced, findings = price_resource(sagemaker("ml.g5.xlarge", "eu-west-1"), CATALOG, {}, TODAY)
    # THEN it is priced, its basis says so, and an info finding gives the catalog's reason
    assert priced.usd_per_hour == Decimal("1.57")
    assert priced.basis == "sagemaker on-demand (low confidence)"
    (finding,) = findings
    assert finding.code is FindingCode.PRICE_LOW_CONFIDENCE
    assert finding.severity is Severity.INFO and "single, dated source" in finding.message
    # AND the same type in a region with a confident rate is not marked
    confident, none = price_resource(sagemaker("ml.g5.xlarge"), CATALOG, {}, TODAY)
    assert (confident.basis, none) == ("sagemaker on-demand", [])


def test_a_confidence_note_without_a_region_applies_in_every_region() -> None:
    priced, findings = price_resource(ec2("g6.xlarge"), CATALOG, {}, TODAY)
    assert priced.basis == "ec2 on-demand (low confidence)"
    assert codes(findings) == [FindingCode.PRICE_LOW_CONFIDENCE]


def test_an_unpriced_resource_is_not_marked_low_confidence() -> None:
    # GIVEN g6 is not offered in eu-west-1 (no rate), though g6 carries a confidence note
    priced, findings = price_resource(ec2("g6.xlarge", region="eu-west-1"), CATALOG, {}, TODAY)
    # THEN only the unpriced finding is raised
    assert priced.usd_per_hour is None
    assert codes(findings) == [FindingCode.UNPRICED]
