"""The Organization hub's bill model: its work follows the active account-regions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.hub_bill import HubLoad, hub_month, per_tick


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
