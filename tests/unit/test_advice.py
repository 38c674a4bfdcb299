"""Advice in the scan report: spot with checkpointing, oversized endpoints, pending capacity."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D

import pytest

from costguard.domain.advice import (
    AdviceCode,
    EndpointVariant,
    advise,
    endpoint_variants,
    endpoint_window,
)
from costguard.domain.estimate import IterationPlan, spot_saving_usd
from costguard.domain.models import Accelerator, AcceleratorKind, Lifecycle, Resource, ResourceKind
from costguard.domain.pricing import PriceCatalog, PricedResource
from costguard.domain.spot import hourly_rate
from tests.support.catalog import fixture_catalog
from tests.support.clock import MIDDAY

A100 = Accelerator(AcceleratorKind.GPU, "A100", 8, 327680, "NVIDIA")


def _instance(hours: float, lifecycle: Lifecycle = Lifecycle.ON_DEMAND) -> PricedResource:
    r = Resource(
        "i-1",
        ResourceKind.EC2_INSTANCE,
        "us-east-1",
        instance_type="p4d.24xlarge",
        lifecycle=lifecycle,
        launched_at=MIDDAY - timedelta(hours=hours),
        accelerator=A100,
    )
    return PricedResource(r, D("21.957642"), "ec2 on-demand")


def test_advises_spot_for_an_on_demand_gpu_instance_running_for_days() -> None:
    # GIVEN an on-demand p4d running 3 days (fixture: bucket >20 %, 60 % saving)
    (advice,) = advise([_instance(72)], [], fixture_catalog(), MIDDAY)
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
    assert advise([_instance(3)], [], fixture_catalog(), MIDDAY) == ()
    assert advise([_instance(72, Lifecycle.SPOT)], [], fixture_catalog(), MIDDAY) == ()


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
        launched_at=MIDDAY - timedelta(days=10),
        accelerator=Accelerator(AcceleratorKind.GPU, "V100", 4),
    )
    priced = PricedResource(p3, catalog.ec2_on_demand("us-east-1", "p3.8xlarge"), "ec2 on-demand")
    # WHEN the scan advises
    advice = advise([priced, _instance(240)], [], catalog, MIDDAY)
    # THEN only the offered type is told to move to spot: AWS no longer offers p3 at all
    assert [(a.code, a.resource) for a in advice] == [
        (AdviceCode.SPOT_WITH_CHECKPOINTING, _instance(240).resource.key)
    ]


def _endpoint(
    itype: str = "ml.p4d.24xlarge",
    rate: str = "25.251",
    count: int = 1,
    region: str = "us-east-1",
    days: float = 3,
) -> PricedResource:
    r = Resource(
        "chat/primary",
        ResourceKind.SAGEMAKER_ENDPOINT,
        region,
        instance_type=itype,
        count=count,
        launched_at=MIDDAY - timedelta(days=days),
        config_since=MIDDAY - timedelta(days=days),
        name="chat",
    )
    return PricedResource(r, D(rate) * count, "sagemaker on-demand")


def _with_targets(**changes: object) -> PriceCatalog:
    """The fixture catalog with the bundled rates of the three smaller endpoint types."""
    catalog = fixture_catalog()
    rates = {
        **catalog.sagemaker["us-east-1"],
        "ml.g6.xlarge": D("1.127"),
        "ml.g5.xlarge": D("1.408"),
        "ml.inf2.xlarge": D("0.99"),
    }
    return replace(catalog, sagemaker={**catalog.sagemaker, "us-east-1": rates}, **changes)


def test_oversized_endpoint_gets_a_cheaper_type_only_with_utilization() -> None:
    priced = _endpoint()
    key = priced.resource.key
    # GIVEN no utilization figure THEN no advice: never a guess
    assert advise([priced], [], fixture_catalog(), MIDDAY) == ()
    # GIVEN GPUUtilization 8 (summed over 8 A100s: 1 % each)
    (advice,) = advise([priced], [], fixture_catalog(), MIDDAY, {key: D(8)})
    # THEN one ml.g5.xlarge (the fixture's only smaller type) carries it: (25.251 - 1.408) · 730
    assert advice.code is AdviceCode.OVERSIZED_ENDPOINT
    assert advice.usd_per_month_saving == (D("25.251") - D("1.408")) * 730
    assert round(advice.usd_per_month_saving, 2) == D("17405.39")
    assert "1 x ml.g5.xlarge" in advice.why and "assuming" in advice.why
    # GIVEN 440 summed (55 % per GPU) THEN busy enough: no advice
    assert advise([priced], [], fixture_catalog(), MIDDAY, {key: D(440)}) == ()


def test_a_multi_gpu_endpoint_is_judged_per_gpu_not_on_the_sum() -> None:
    # GIVEN a p4d endpoint (8 A100s) reporting 55: CloudWatch sums the GPUs (0-800 %),
    # so each GPU is 6.9 % busy
    priced = _endpoint()
    key = priced.resource.key
    # WHEN advised THEN it is oversized (55 read as one GPU's % would have hidden it)
    (advice,) = advise([priced], [], fixture_catalog(), MIDDAY, {key: D(55)})
    assert advice.code is AdviceCode.OVERSIZED_ENDPOINT
    assert "at 7 % GPU utilization per GPU" in advice.why
    # AND the threshold is per GPU: 159.2 summed is 19.9 % each (advised), 160 is 20 % (not)
    assert advise([priced], [], fixture_catalog(), MIDDAY, {key: D("159.2")})
    assert advise([priced], [], fixture_catalog(), MIDDAY, {key: D(160)}) == ()


def test_the_smaller_type_is_sized_for_the_busy_gpu_time() -> None:
    # GIVEN a p4d endpoint at 64 summed: 8 % of 8 A100s = 0.64 A100s of busy time
    priced = _endpoint()
    (advice,) = advise([priced], [], fixture_catalog(), MIDDAY, {priced.resource.key: D(64)})
    # THEN an A10G (70 dense TFLOPS against the A100's 312, run at most 50 % busy) takes
    # 70/312/2 = 0.1122 A100s, so ceil(0.64 / 0.1122) = ceil(5.7) = 6 of them:
    # (25.251 - 6 x 1.408) x 730 = 16.803 x 730
    assert "6 x ml.g5.xlarge" in advice.why
    assert advice.usd_per_month_saving == D("16.803") * 730
    assert round(advice.usd_per_month_saving, 2) == D("12266.19")


def test_the_cheapest_smaller_type_that_carries_the_load_is_proposed() -> None:
    # GIVEN a p5.48xlarge endpoint ($63.296/h, 8 H100s) at 80 summed: 0.8 H100s busy,
    # and the L4, A10G and Inferentia2 single-device types all offered
    priced = _endpoint("ml.p5.48xlarge", "63.296")
    (advice,) = advise([priced], [], _with_targets(), MIDDAY, {priced.resource.key: D(80)})
    # THEN by hand, each sized to 50 % busy against the H100's 989 TFLOPS:
    #   L4   121 -> ceil(0.8 / 0.06117) = 14 x 1.127 = 15.778
    #   A10G  70 -> ceil(0.8 / 0.03539) = 23 x 1.408 = 32.384
    #   Inf2 190 -> ceil(0.8 / 0.09606) =  9 x 0.99  =  8.91   <- cheapest
    assert "9 x ml.inf2.xlarge" in advice.why and "Neuron" in advice.why
    assert advice.usd_per_month_saving == (D("63.296") - D("8.91")) * 730
    assert round(advice.usd_per_month_saving, 2) == D("39701.78")


def test_a_retired_or_unoffered_type_is_never_proposed() -> None:
    priced = _endpoint("ml.p5.48xlarge", "63.296")
    key = priced.resource.key
    # GIVEN the Inferentia2 family retired in the catalog
    retired = _with_targets(retired={**fixture_catalog().retired, "ml.inf2": "retired (test)"})
    (advice,) = advise([priced], [], retired, MIDDAY, {key: D(80)})
    # THEN the next cheapest, 14 x ml.g6.xlarge, is proposed: (63.296 - 15.778) x 730
    assert "ml.inf2" not in advice.why and "14 x ml.g6.xlarge" in advice.why
    assert advice.usd_per_month_saving == (D("63.296") - D("15.778")) * 730
    # GIVEN none of the three offered in the region THEN no advice, rather than a dead type
    gone = _with_targets(not_offered={"us-east-1": frozenset({"g6", "g5", "inf2"})})
    assert advise([priced], [], gone, MIDDAY, {key: D(80)}) == ()


def test_the_proposal_keeps_the_variants_instance_count() -> None:
    # GIVEN two p4d instances behind one variant, idle (0): availability needs two
    priced = _endpoint(count=2)
    (advice,) = advise([priced], [], fixture_catalog(), MIDDAY, {priced.resource.key: D(0)})
    # THEN two smaller instances are proposed: (2 x 25.251 - 2 x 1.408) x 730
    assert "2 x ml.g5.xlarge" in advice.why
    assert advice.usd_per_month_saving == (D("50.502") - D("2.816")) * 730


@pytest.mark.parametrize("reported", [D(-1), D(801), D("NaN"), D("Infinity")])
def test_an_impossible_utilization_gives_no_advice(reported: D) -> None:
    # GIVEN a figure no 8-GPU instance can report THEN no advice (not a guess)
    priced = _endpoint()
    assert advise([priced], [], fixture_catalog(), MIDDAY, {priced.resource.key: reported}) == ()


def test_endpoints_not_on_h100_a100_class_accelerators_get_no_endpoint_advice() -> None:
    # GIVEN an idle g5 endpoint (A10G) and an idle p3 one (V100)
    for itype, rate in (("ml.g5.2xlarge", "1.515"), ("ml.p3.2xlarge", "3.825")):
        priced = _endpoint(itype, rate)
        assert advise([priced], [], fixture_catalog(), MIDDAY, {priced.resource.key: D(0)}) == ()


def test_only_oversizable_endpoints_that_ran_the_whole_window_are_read() -> None:
    start, end = endpoint_window(datetime(2026, 11, 20, 12, 34, 56, tzinfo=UTC))
    # THEN the window is the 24 h to the last whole hour
    assert (start, end) == (datetime(2026, 11, 19, 12, tzinfo=UTC), MIDDAY)
    old = _endpoint(days=2).resource
    young = replace(_endpoint().resource, id="new/v1", launched_at=start + timedelta(seconds=1))
    small = _endpoint("ml.g5.2xlarge", "1.515").resource
    instance = _instance(72).resource
    assert endpoint_variants([old, young, small, instance], start) == [
        EndpointVariant(old.key, "chat", "primary")
    ]


def test_an_endpoint_whose_configuration_is_newer_than_the_window_or_unknown_is_not_read() -> None:
    start, _end = endpoint_window(MIDDAY)
    old = _endpoint(days=30).resource
    # GIVEN the same month-old endpoint, its current configuration in place since the
    # window's start, since a second after it (UpdateEndpoint), or since when unknown
    since_start = replace(old, id="a/v", config_since=start)
    updated = replace(old, id="b/v", config_since=start + timedelta(seconds=1))
    unknown = replace(old, id="c/v", config_since=None)
    # THEN only the first is read: a mixed or unknown window gets no advice
    assert endpoint_variants([since_start, updated, unknown], start) == [
        EndpointVariant(since_start.key, "a", "v")
    ]


def test_pending_capacity_is_money_per_month_once_granted() -> None:
    ng = Resource(
        "ng", ResourceKind.EKS_NODEGROUP, "us-east-1", instance_type="g5.xlarge", desired_size=4
    )
    (advice,) = advise([], [(ng, 3)], fixture_catalog(), MIDDAY)
    assert advice.code is AdviceCode.PENDING_CAPACITY_COST
    assert advice.usd_per_month_saving == D("1.006") * 3 * 730
