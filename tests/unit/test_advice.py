"""Advice in the scan report: spot with checkpointing, oversized endpoints, pending capacity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal as D

from costguard.domain.advice import AdviceCode, advise
from costguard.domain.estimate import IterationPlan, spot_saving_usd
from costguard.domain.models import Accelerator, AcceleratorKind, Lifecycle, Resource, ResourceKind
from costguard.domain.pricing import PricedResource
from costguard.domain.spot import hourly_rate
from tests.support.catalog import fixture_catalog

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
A100 = Accelerator(AcceleratorKind.GPU, "A100", 8, 327680, "NVIDIA")


def _instance(hours: float, lifecycle: Lifecycle = Lifecycle.ON_DEMAND) -> PricedResource:
    r = Resource(
        "i-1",
        ResourceKind.EC2_INSTANCE,
        "us-east-1",
        instance_type="p4d.24xlarge",
        lifecycle=lifecycle,
        launched_at=NOW - timedelta(hours=hours),
        accelerator=A100,
    )
    return PricedResource(r, D("21.957642"), "ec2 on-demand")


def test_advises_spot_for_an_on_demand_gpu_instance_running_for_days() -> None:
    # GIVEN an on-demand p4d running 3 days (fixture: bucket >20 %, 60 % saving)
    (advice,) = advise([_instance(72)], [], fixture_catalog(), NOW)
    # THEN the saving is the month's on-demand minus spot with restarts and lost work
    expected = spot_saving_usd(
        IterationPlan(
            work_hours=D(730),
            usd_per_hour=D("21.957642"),
            checkpoint_hours=D(1),
            spot_saving=D("0.6"),
            interruptions_per_hour=hourly_rate(D("0.30")),
            restart_hours=D("0.5"),
        )
    )
    assert advice.code is AdviceCode.SPOT_WITH_CHECKPOINTING
    assert advice.usd_per_month_saving == expected
    # by hand: 730 · 21.957642 · (1 - 0.4 / (1 - λ)) ≈ $9,614
    assert round(advice.usd_per_month_saving) == 9614
    assert "spot with checkpointing would save about $9,6" in advice.why
    assert advice.as_dict()["code"] == "spot-with-checkpointing"


def test_no_spot_advice_for_young_or_spot_instances() -> None:
    assert advise([_instance(3)], [], fixture_catalog(), NOW) == ()
    assert advise([_instance(72, Lifecycle.SPOT)], [], fixture_catalog(), NOW) == ()


def test_no_spot_advice_for_an_on_demand_instance_of_a_retired_type() -> None:
    # GIVEN an on-demand p3.8xlarge (its family is retired in the fixture) running 10 days,
    # priced at the catalog's rate, next to the same instance typed as the offered p4d
    catalog = fixture_catalog()
    assert catalog.retirement("p3.8xlarge") is not None
    p3 = Resource(
        "i-p3",
        ResourceKind.EC2_INSTANCE,
        "us-east-1",
        instance_type="p3.8xlarge",
        launched_at=NOW - timedelta(days=10),
        accelerator=Accelerator(AcceleratorKind.GPU, "V100", 4),
    )
    priced = PricedResource(p3, catalog.ec2_on_demand("us-east-1", "p3.8xlarge"), "ec2 on-demand")
    # WHEN the scan advises
    advice = advise([priced, _instance(240)], [], catalog, NOW)
    # THEN only the offered type is told to move to spot: AWS no longer offers p3 at all
    assert [(a.code, a.resource) for a in advice] == [
        (AdviceCode.SPOT_WITH_CHECKPOINTING, _instance(240).resource.key)
    ]


def test_oversized_endpoint_gets_a_cheaper_type_only_with_utilization() -> None:
    endpoint = Resource(
        "ep", ResourceKind.SAGEMAKER_ENDPOINT, "us-east-1", instance_type="ml.p4d.24xlarge"
    )
    priced = PricedResource(endpoint, D("25.251"), "sagemaker on-demand")
    assert advise([priced], [], fixture_catalog(), NOW) == ()
    (advice,) = advise([priced], [], fixture_catalog(), NOW, {endpoint.key: D(8)})
    # fixture: ml.g5.xlarge $1.408/h is the only smaller type priced: (25.251 - 1.408) · 730
    assert advice.code is AdviceCode.OVERSIZED_ENDPOINT
    assert advice.usd_per_month_saving == (D("25.251") - D("1.408")) * 730
    assert "ml.g5.xlarge" in advice.why and "assuming" in advice.why
    assert advise([priced], [], fixture_catalog(), NOW, {endpoint.key: D(55)}) == ()


def test_pending_capacity_is_money_per_month_once_granted() -> None:
    ng = Resource(
        "ng", ResourceKind.EKS_NODEGROUP, "us-east-1", instance_type="g5.xlarge", desired_size=4
    )
    (advice,) = advise([], [(ng, 3)], fixture_catalog(), NOW)
    assert advice.code is AdviceCode.PENDING_CAPACITY_COST
    assert advice.usd_per_month_saving == D("1.006") * 3 * 730
