"""Cost per 1,000 predictions of an endpoint variant, and the advice on its jump, by hand.

The window at MIDDAY (2026-11-20 12:00 UTC): 2026-11-13 00:00 to 2026-11-20 12:00, hourly;
the days 13-19 whole, the 20th 12 hours; the last 24 hours start 2026-11-19 12:00, so the
jump's baseline days are the 13th to the 18th.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal as D

import pytest

from costguard.domain.advice import AdviceCode, advise
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.predictions import (
    ASYNC_UNCOUNTED,
    MAX_RECORDED,
    SERVERLESS_UNPRICED,
    CostStatus,
    cost_per_prediction,
    prediction_window,
    recorded_rates,
)
from costguard.domain.pricing import PricedResource
from tests.support.catalog import fixture_catalog
from tests.support.clock import MIDDAY

START, END = prediction_window(MIDDAY)
CREATED = datetime(2026, 11, 1, tzinfo=UTC)


def variant(
    usd: D | None,
    count: int = 1,
    since: datetime | None = CREATED,
    itype: str = "ml.g5.xlarge",
) -> PricedResource:
    r = Resource(
        "chat/primary",
        ResourceKind.SAGEMAKER_ENDPOINT,
        "us-east-1",
        instance_type=itype,
        count=count,
        launched_at=CREATED,
        config_since=since,
    )
    return PricedResource(r, usd, "sagemaker on-demand" if usd is not None else "unpriced")


def hourly(per_hour: D, start: datetime = START, end: datetime = END) -> dict[datetime, D]:
    out, at = {}, start
    while at < end:
        out[at] = per_hour
        at += timedelta(hours=1)
    return out


def test_a_variant_at_1_21_an_hour_serving_12100_invocations_an_hour_costs_10_cents_per_1000() -> (
    None
):
    # GIVEN a variant at $1.21/h that served 12,100 invocations every hour of the window
    item = variant(D("1.21"))
    # WHEN its cost per prediction is computed
    cost = cost_per_prediction(item, hourly(D(12100)), MIDDAY)
    # THEN $1.21 / 12,100 x 1,000 = $0.10 per 1,000 predictions
    assert cost.status is CostStatus.PRICED
    assert cost.invocations_per_hour == D(12100)
    assert cost.usd_per_1000 == D("0.1")
    # AND per day: a whole day is 24 x $1.21 = $29.04 over 290,400 invocations = $0.10
    assert [d.day for d in cost.days] == [date(2026, 11, n) for n in range(13, 21)]
    whole = cost.days[0]
    assert (whole.hours, whole.usd, whole.invocations) == (24, D("29.04"), D(290400))
    assert whole.usd_per_1000 == D("0.1")
    # AND today so far: 12 hours
    assert (cost.days[-1].hours, cost.days[-1].usd) == (12, D("14.52"))
    assert cost.as_dict()["usd_per_1000_predictions"] == 0.1


def test_zero_traffic_is_no_traffic_never_a_division_by_zero_or_0_dollars() -> None:
    # GIVEN a priced variant that served nothing (no datapoint at all)
    cost = cost_per_prediction(variant(D("1.21")), {}, MIDDAY)
    # THEN "no traffic": no figure, and the reason names what it bills
    assert cost.status is CostStatus.NO_TRAFFIC
    assert cost.usd_per_1000 is None
    assert cost.invocations_per_hour == 0
    assert "no invocations in the last 24 h" in cost.reason and "$1.2100/h" in cost.reason
    assert all(d.status is CostStatus.NO_TRAFFIC and d.usd_per_1000 is None for d in cost.days)
    shown = cost.as_dict()
    assert shown["usd_per_1000_predictions"] is None and shown["status"] == "no traffic"


def test_an_unpriced_variant_stays_unpriced_with_its_traffic_shown() -> None:
    cost = cost_per_prediction(variant(None), hourly(D(100)), MIDDAY)
    assert cost.status is CostStatus.UNPRICED
    assert (cost.usd_per_1000, cost.invocations_per_hour) == (None, D(100))
    assert all(d.usd is None and d.status is CostStatus.COST_UNKNOWN for d in cost.days)


def test_unread_invocations_are_unknown_not_no_traffic() -> None:
    cost = cost_per_prediction(variant(D("1.21")), None, MIDDAY)
    assert cost.status is CostStatus.UNKNOWN and cost.usd_per_1000 is None
    assert cost.invocations_per_hour is None


def test_the_current_figure_counts_only_the_whole_hours_of_the_current_configuration() -> None:
    # GIVEN a variant moved to its configuration at 06:30 today: 5 whole hours since
    since = datetime(2026, 11, 20, 6, 30, tzinfo=UTC)
    traffic = hourly(D(1000))
    traffic.update(hourly(D(250), datetime(2026, 11, 20, 7, tzinfo=UTC)))
    cost = cost_per_prediction(variant(D("5"), since=since), traffic, MIDDAY)
    # THEN the figure is $5 over 250 an hour (07:00-12:00), $20 per 1,000
    assert (cost.hours, cost.invocations_per_hour, cost.usd_per_1000) == (5, D(250), D(20))
    # AND the days before the change have no known cost (no scan recorded the former rate)
    assert all(d.usd is None for d in cost.days)


def test_the_days_before_a_change_are_priced_at_the_rate_an_earlier_scan_recorded() -> None:
    since = datetime(2026, 11, 19, 12, tzinfo=UTC)
    cost = cost_per_prediction(
        variant(D("5"), since=since), hourly(D(1000)), MIDDAY, earlier=[(CREATED, D("1.25"))]
    )
    # THEN the 18th: 24 x $1.25 = $30 over 24,000 = $1.25 per 1,000
    day18 = next(d for d in cost.days if d.day == date(2026, 11, 18))
    assert (day18.usd, day18.usd_per_1000) == (D(30), D("1.25"))
    # AND the 19th mixes both: 12 x 1.25 + 12 x 5 = $75
    day19 = next(d for d in cost.days if d.day == date(2026, 11, 19))
    assert day19.usd == D(75)


def test_a_variant_created_within_the_window_costs_nothing_before_it_existed() -> None:
    created = datetime(2026, 11, 18, tzinfo=UTC)
    r = Resource(
        "chat/primary",
        ResourceKind.SAGEMAKER_ENDPOINT,
        "us-east-1",
        instance_type="ml.g5.xlarge",
        launched_at=created,
        config_since=created,
    )
    # GIVEN a $2/h variant created on the 18th, serving 10 an hour since
    cost = cost_per_prediction(PricedResource(r, D(2), "x"), hourly(D(10), created), MIDDAY)
    # THEN the days before it existed cost $0 and served nothing: "no traffic", not unknown
    assert cost.days[0].usd == 0 and cost.days[0].status is CostStatus.NO_TRAFFIC
    # AND the 18th is a whole priced day: $48 over 240 = $200 per 1,000
    assert (cost.days[5].usd, cost.days[5].usd_per_1000) == (D(48), D(200))


def test_a_serverless_variant_is_unpriced_with_the_reason() -> None:
    """GIVEN an endpoint with a serverless variant beside an instance-backed one, WHEN the
    scan reads its config, THEN the serverless one alone is an "unpriced" finding naming
    its memory size and why (no GB-second rate in the catalog), never $0."""
    from costguard.adapters.sagemaker import serverless_findings

    config = {
        "ProductionVariants": [
            {"VariantName": "primary", "ServerlessConfig": {"MemorySizeInMB": 2048}},
            {"VariantName": "gpu", "InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 1},
        ]
    }
    [finding] = serverless_findings({"EndpointName": "chat"}, config, "us-east-1", "111111111111")
    assert finding.code.value == "unpriced"
    assert finding.resource.endswith("chat/primary")
    assert "(2048 MB)" in finding.message and SERVERLESS_UNPRICED in finding.message
    assert "GB-second" in SERVERLESS_UNPRICED


# -- the endpoint rightsizing advice on a cost-per-prediction jump --------------------------


def test_the_same_traffic_on_a_larger_instance_is_advised_back_with_its_saving() -> None:
    # GIVEN a variant that served 1,000 invocations an hour all week on ml.g5.xlarge at
    # $1.41/h, and was moved to ml.g5.12xlarge at $7.09/h yesterday at 12:00 (same traffic)
    since = datetime(2026, 11, 19, 12, tzinfo=UTC)
    item = variant(D("7.09"), since=since, itype="ml.g5.12xlarge")
    cost = cost_per_prediction(item, hourly(D(1000)), MIDDAY, earlier=[(CREATED, D("1.41"))])
    # WHEN advised
    (advice,) = advise(
        [item], [], fixture_catalog(), MIDDAY, prediction_costs={item.resource.key: cost}
    )
    # THEN it is the endpoint rightsizing advice on the jump: $1.41 -> $7.09 per 1,000,
    # saving (7.09 - 1.41) x 730 = $4,146.40 a month
    assert advice.code is AdviceCode.PREDICTION_COST_JUMP
    assert advice.usd_per_month_saving == D("4146.40")
    assert "$1.4100 to $7.0900 per 1,000 predictions" in advice.why
    assert "the same traffic" in advice.why and "instead of $1.4100/h" in advice.why
    assert advice.as_dict()["code"] == "prediction-cost-jump"


def test_falling_traffic_on_a_fixed_fleet_is_advised_the_instances_it_no_longer_needs() -> None:
    # GIVEN 4 x $1.21/h that served 12,100 an hour until yesterday noon, 2,420 since (20 %)
    item = variant(D("4.84"), count=4)
    traffic = hourly(D(12100))
    traffic.update(hourly(D(2420), datetime(2026, 11, 19, 12, tzinfo=UTC)))
    cost = cost_per_prediction(item, traffic, MIDDAY)
    # THEN the cost per 1,000 went from $0.40 to $2.00 (x5)
    assert cost.usd_per_1000 == D(2)
    (advice,) = advise(
        [item], [], fixture_catalog(), MIDDAY, prediction_costs={item.resource.key: cost}
    )
    # AND ceil(4 x 0.2) = 1 instance keeps the former invocations per instance: 3 x $1.21 x
    # 730 = $2,649.90 a month
    assert advice.code is AdviceCode.PREDICTION_COST_JUMP
    assert advice.usd_per_month_saving == D("2649.90")
    assert "traffic fell to 20 %" in advice.why and "1 would keep" in advice.why


def test_no_jump_below_twice_the_baseline_and_no_advice_without_a_saving() -> None:
    # GIVEN traffic falling to 60 % (x1.67, not a jump) on 4 instances
    item = variant(D("4.84"), count=4)
    traffic = hourly(D(1000))
    traffic.update(hourly(D(600), datetime(2026, 11, 19, 12, tzinfo=UTC)))
    cost = cost_per_prediction(item, traffic, MIDDAY)
    assert (
        advise([item], [], fixture_catalog(), MIDDAY, prediction_costs={item.resource.key: cost})
        == ()
    )
    # AND a single instance whose traffic fell 90 % has nothing to remove: no advice
    single = variant(D("1.21"))
    traffic = hourly(D(1000))
    traffic.update(hourly(D(100), datetime(2026, 11, 19, 12, tzinfo=UTC)))
    cost = cost_per_prediction(single, traffic, MIDDAY)
    assert (
        advise(
            [single], [], fixture_catalog(), MIDDAY, prediction_costs={single.resource.key: cost}
        )
        == ()
    )


def test_no_baseline_without_three_priced_days_and_no_jump_from_no_traffic() -> None:
    # GIVEN a larger instance yesterday but no rate recorded before it: the former days'
    # cost is unknown, so there is no baseline and no advice (no guess)
    since = datetime(2026, 11, 19, 12, tzinfo=UTC)
    item = variant(D("7.09"), since=since, itype="ml.g5.12xlarge")
    cost = cost_per_prediction(item, hourly(D(1000)), MIDDAY)
    assert (
        advise([item], [], fixture_catalog(), MIDDAY, prediction_costs={item.resource.key: cost})
        == ()
    )
    # AND a variant with no traffic now has no figure to jump
    idle = variant(D("4.84"), count=4)
    traffic = hourly(D(1000), END - timedelta(days=7), END - timedelta(hours=24))
    cost = cost_per_prediction(idle, traffic, MIDDAY)
    assert cost.status is CostStatus.NO_TRAFFIC
    assert (
        advise([idle], [], fixture_catalog(), MIDDAY, prediction_costs={idle.resource.key: cost})
        == ()
    )


def test_an_asynchronous_variant_is_priced_by_its_instances_but_its_predictions_are_unknown() -> (
    None
):
    # GIVEN an asynchronous variant (billed by the instance) with no Invocations datapoint
    r = Resource(
        "batch/primary",
        ResourceKind.SAGEMAKER_ENDPOINT,
        "us-east-1",
        instance_type="ml.g5.xlarge",
        launched_at=CREATED,
        config_since=CREATED,
        asynchronous=True,
    )
    cost = cost_per_prediction(PricedResource(r, D("1.408"), "x"), {}, MIDDAY)
    # THEN its $/h stands, and its cost per prediction is unknown, never "no traffic"
    assert cost.usd_per_hour == D("1.408")
    assert cost.status is CostStatus.UNKNOWN and cost.reason == ASYNC_UNCOUNTED


# -- the rates earlier scans recorded (one ledger document) ---------------------------------


def test_a_rate_change_is_recorded_from_the_new_configurations_date_and_old_entries_trimmed() -> (
    None
):
    # GIVEN a record: $1.00 from Nov 1, $2.00 from Nov 10 (before the window), $3.00 from
    # Nov 15; the variant now bills $4.00 since Nov 19 12:00
    key = variant(D(4)).resource.key
    stored = {
        key: [
            ["2026-11-01T00:00:00+00:00", "1.00"],
            ["2026-11-10T00:00:00+00:00", "2.00"],
            ["2026-11-15T00:00:00+00:00", "3.00"],
        ]
    }
    since = datetime(2026, 11, 19, 12, tzinfo=UTC)
    earlier, record = recorded_rates(stored, [variant(D(4), since=since)], MIDDAY, START)
    # THEN the earlier rates are read as stored (for the days before the change)
    assert [usd for _, usd in earlier[key]] == [D("1.00"), D("2.00"), D("3.00")]
    # AND the record keeps the rate in force at the window's start (Nov 13: $2.00), drops
    # the one superseded before it, and adds the new rate from its configuration's date
    assert record[key] == [
        ["2026-11-10T00:00:00+00:00", "2.00"],
        ["2026-11-15T00:00:00+00:00", "3.00"],
        [since.isoformat(), "4"],
    ]


def test_an_unchanged_rate_writes_nothing_new_and_an_unpriced_variant_records_nothing() -> None:
    key = variant(D("1.21")).resource.key
    stored = {key: [[CREATED.isoformat(), "1.2100"]]}
    _, record = recorded_rates(stored, [variant(D("1.21"))], MIDDAY, START)
    assert record == stored  # the same value written differently is no change
    _, none = recorded_rates({}, [variant(None)], MIDDAY, START)
    assert none == {}


def test_a_gone_variant_is_forgotten_unless_its_region_could_not_be_read() -> None:
    stored = {
        "us-east-1/sagemaker-endpoint/old/primary": [[CREATED.isoformat(), "1"]],
        "us-west-2/sagemaker-endpoint/far/primary": [[CREATED.isoformat(), "2"]],
        "garbage": [["not a date", "x"], [1, 2, 3]],
    }
    _, record = recorded_rates(stored, [], MIDDAY, START, keep_regions={"us-west-2"})
    assert list(record) == ["us-west-2/sagemaker-endpoint/far/primary"]


def test_a_record_is_capped_with_the_variants_that_changed_first() -> None:
    many = {
        f"us-east-1/sagemaker-endpoint/ep-{n:05}/primary": [[CREATED.isoformat(), "1"]]
        for n in range(MAX_RECORDED + 5)
    }
    changed = "us-east-1/sagemaker-endpoint/zz-changed/primary"
    many[changed] = [[CREATED.isoformat(), "1"], ["2026-11-19T00:00:00+00:00", "2"]]
    _, record = recorded_rates(many, [], MIDDAY, START, keep_regions={"us-east-1"})
    assert len(record) == MAX_RECORDED and changed in record


@pytest.mark.parametrize(
    ("former", "kept"),
    [
        # (25.251 - 5) x 730 = $14,783.23 < one ml.g5.xlarge's $17,405.39: the GPU advice
        (D(5), AdviceCode.OVERSIZED_ENDPOINT),
        # (25.251 - 0.5) x 730 = $18,068.23 > $17,405.39: the jump's
        (D("0.5"), AdviceCode.PREDICTION_COST_JUMP),
    ],
)
def test_one_rightsizing_advice_per_variant_the_larger_saving_when_both_apply(
    former: D, kept: AdviceCode
) -> None:
    # GIVEN an ml.p4d.24xlarge variant ($25.251/h) at 8 (of 800) GPUUtilization that also
    # moved there yesterday from a cheaper type for the same traffic
    since = datetime(2026, 11, 19, 12, tzinfo=UTC)
    item = variant(D("25.251"), since=since, itype="ml.p4d.24xlarge")
    cost = cost_per_prediction(item, hourly(D(1000)), MIDDAY, earlier=[(CREATED, former)])
    key = item.resource.key
    (jump,) = advise([item], [], fixture_catalog(), MIDDAY, prediction_costs={key: cost})
    (gpu,) = advise([item], [], fixture_catalog(), MIDDAY, {key: D(8)})
    assert (jump.code, gpu.code) == (AdviceCode.PREDICTION_COST_JUMP, AdviceCode.OVERSIZED_ENDPOINT)
    # WHEN both are known
    (both,) = advise([item], [], fixture_catalog(), MIDDAY, {key: D(8)}, {key: cost})
    # THEN one advice: the one that saves more (never the two savings added)
    assert both.code is kept
    assert both.usd_per_month_saving == max(jump.usd_per_month_saving, gpu.usd_per_month_saving)
