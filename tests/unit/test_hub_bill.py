"""The Organization hub's bill model: its work follows the active account-regions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.hub_bill import (
    HubLoad,
    dynamodb_units,
    hub_month,
    per_tick,
    plan_write_units,
    stack_month,
)


def test_a_tick_scans_the_active_slices_and_probes_the_empty_ones_once_per_interval() -> None:
    # GIVEN 200 accounts x 4 regions, 10 % active, a scan every 15 minutes, probes every 6 h
    items = per_tick(HubLoad())
    # THEN 80 scans, and 720 empty slices spread over 24 ticks: 30 probes, not 720
    assert items["scan"] == pytest.approx(80)
    assert items["probe"] == pytest.approx(30)
    assert items["regions"] == pytest.approx(200 / 96)


def test_the_consumer_bill_grows_with_active_slices_not_with_all_of_them() -> None:
    base = hub_month(HubLoad())["usd_per_month"]
    more_empty = hub_month(HubLoad(regions_per_account=16, active_fraction=0.025))["usd_per_month"]
    more_active = hub_month(HubLoad(active_fraction=0.4))["usd_per_month"]
    assert isinstance(base, dict) and isinstance(more_empty, dict) and isinstance(more_active, dict)
    # Four times the regions, the same 80 active slices: only the probe term grows.
    assert more_empty["consumer_lambda"] < 2 * base["consumer_lambda"]
    assert more_active["consumer_lambda"] > 3 * base["consumer_lambda"]


def test_an_idle_queue_still_costs_the_event_sources_long_polls() -> None:
    idle = hub_month(replace(HubLoad(), accounts=1, regions_per_account=1))
    assert idle["sqs_requests_per_month"] >= 5 * 30.4 * 24 * 3600 / 20


def test_a_lambda_request_is_billed_per_invocation_not_per_work_item() -> None:
    # GIVEN 25,000 accounts x 4 regions, all active: 100,000 scans and 260.42 regions
    # items a tick, in batches of ten; compute and DynamoDB aside (no memory)
    load = HubLoad(
        accounts=25_000,
        active_fraction=1.0,
        seconds_per_scan=0.0,
        seconds_per_probe=0.0,
        seconds_per_regions=0.0,
        memory_gb=0.0,
        items_per_invocation=10,
    )
    month = hub_month(load)
    # THEN 10,027 invocations a tick: 2,918.4 ticks x 10,027 x $0.20 / 1M = $5.85
    # (billed per item it would be ten times that, $58.52)
    usd = month["usd_per_month"]
    assert isinstance(usd, dict)
    assert usd["consumer_lambda"] == pytest.approx(5.85)
    assert month["consumer_invocations_per_tick"] == 10_027


def test_sqs_requests_are_the_sends_receives_deletes_and_idle_long_polls() -> None:
    # GIVEN 10 accounts x 4 regions, a quarter active: 10 scans, 30/24 probes and 10/96
    # regions items a tick (11.35 items: 2 sends, 2 invocations each receiving and deleting)
    month = hub_month(HubLoad(accounts=10, active_fraction=0.25, items_per_invocation=10))
    # THEN 6 requests x 2,918.4 ticks + 5 pollers x 2,626,560 s / 20 s = 674,150 requests
    assert month["sqs_requests_per_month"] == 674_150
    usd = month["usd_per_month"]
    assert isinstance(usd, dict)
    assert usd["sqs_requests"] == pytest.approx(0.34)


def test_each_mark_costs_the_same_units_whatever_the_plans_size() -> None:
    # GIVEN plans of 5, 80 and 2,000 slices, a slice key of 250 bytes
    load = HubLoad(plan_base_bytes=24, plan_bytes_per_slice=250.0)
    # THEN each mark is its done item and the counter: two units, whatever the plan
    assert plan_write_units(5, load) == 5 * 2
    assert plan_write_units(0, load) == 0
    assert plan_write_units(2000, load) == 25 * plan_write_units(80, load)


def test_a_ticks_dynamodb_units_by_hand() -> None:
    # GIVEN 10 accounts x 4 regions, a quarter active (10 scans, 1.25 probes, 0.104 regions
    # items), a plan of 100 + 100 bytes a slice, a directory of 100 bytes an account-region
    load = HubLoad(
        accounts=10,
        active_fraction=0.25,
        plan_base_bytes=100,
        plan_bytes_per_slice=100.0,
        directory_bytes_per_account_region=100.0,
        write_units_per_scan=6.0,
        read_units_per_scan=9.0,
        read_units_per_rolled_up_slice=8.0,
        plans_swept=25,
    )
    units = dynamodb_units(load)
    # THEN the plan's put with its counter in a transaction (1,100 B: 2 units, the counter
    # 1, twice) and the marks (a done item and the counter: 2 units x 10)
    assert units["plan_write_units"] == 2 * (2 + 1) + 10 * 2
    # writes: 10 x 6 + 26 + 1.25 x 1 + 10/96 x 1
    assert units["write_units"] == pytest.approx(60 + 26 + 1.25 + 10 / 96)
    # reads: 10 x 9 + 1.25 + 10/96 + directory ceil(4,000/4,096) = 1
    # + sweep ceil(25 x 1,100 / 4,096) = 7 and the done items read twice
    # (2 x ceil(10 x 128 / 4,096) = 2) + aggregation 10 x 8
    assert units["read_units"] == pytest.approx(90 + 1.25 + 10 / 96 + 1 + 7 + 2 + 80)


def test_the_stack_adds_every_alarm_the_key_the_secret_and_the_guards() -> None:
    month = stack_month(HubLoad(), alarms=23)
    usd = month["usd_per_month"]
    assert isinstance(usd, dict)
    assert usd["alarms"] == pytest.approx(2.30)
    assert usd["kms_key"] == pytest.approx(1.00)
    assert usd["secrets_manager"] == pytest.approx(0.40)
    assert month["usd_per_month_total"] == pytest.approx(sum(usd.values()), abs=0.005)
