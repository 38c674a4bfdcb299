"""The guards' bill across an Organization (the act path): runs per guard tick, what each
run costs, and the month, each against hand-computed values."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from benchmarks.hub_bill import (
    IDLE_POLLERS,
    LONG_POLL_SECONDS,
    ORG_ALARMS,
    PRICES,
    SECONDS_PER_MONTH,
    SQS_FIFO_REQUEST,
    ActLoad,
    GuardCost,
    HubLoad,
    act_month,
    compute_accounts,
    guard_runs,
    stack_month,
    traced,
)
from benchmarks.org_guards import (
    RunSample,
    as_shipped,
    fanout_line,
    guard_line,
    plan_tick,
    run_seconds,
    variants,
)

ZERO = dict.fromkeys(
    ("seconds", "member_calls", "sts_calls", "hub_calls", "write_units", "read_units", "log_bytes"),
    0.0,
)


def _cost(name: str, compute: bool, every: int = 60, **base: float) -> GuardCost:
    return GuardCost(name, every, compute, {**ZERO, **base}, dict(ZERO), dict(ZERO))


def _bare(*guards: GuardCost) -> ActLoad:
    """Only what a test names: no build, cold start, fan-out, logs or catalog reads."""
    return ActLoad(
        guards=guards,
        build_seconds=0.0,
        cold_start_seconds=0.0,
        fanout_seconds_base=0.0,
        fanout_seconds_per_account_region=0.0,
        fanout_seconds_per_send=0.0,
        fanout_log_bytes=0,
        platform_log_bytes=0,
        catalog_read_units=0,
        xray_sampling=False,
    )


def test_a_compute_guard_runs_where_compute_is_and_a_data_guard_in_every_account() -> None:
    # GIVEN 200 accounts x 4 regions, 10 % active: 80 active account-regions, spread one
    # per account (org_scale's world)
    load = HubLoad()
    idle = _cost("idle-notebooks", True)
    volumes = _cost("stale-volumes", False, 30)
    # THEN the compute guard runs in the 80 accounts with compute, over their one region
    assert guard_runs(load, idle, ActLoad()) == {
        "runs": 80.0,
        "regions_per_run": 1.0,
        "holding_share": 1.0,
    }
    # AND the data guard in all 200, over all 4 regions, 80 of them holding data
    assert guard_runs(load, volumes, ActLoad()) == {
        "runs": 200.0,
        "regions_per_run": 4.0,
        "holding_share": pytest.approx(0.4),
    }


def test_accounts_with_compute_are_the_active_regions_spread_and_at_most_every_account() -> None:
    assert compute_accounts(HubLoad(accounts=200, active_fraction=0.10)) == 80
    # 400 active account-regions in 200 accounts: every account, two regions each
    assert compute_accounts(HubLoad(accounts=200, active_fraction=0.5)) == 200
    assert compute_accounts(HubLoad(accounts=200, active_fraction=0.0)) == 0
    load = HubLoad(accounts=200, active_fraction=0.5)
    plan = guard_runs(load, _cost("idle-notebooks", True), ActLoad())
    assert plan["regions_per_run"] == pytest.approx(2.0)


def test_each_run_is_one_invocation_with_its_own_receive_and_delete() -> None:
    # GIVEN 10 accounts x 2 regions, nothing active, one data guard hourly: 10 runs a tick
    load = HubLoad(accounts=10, regions_per_account=2, active_fraction=0.0)
    act = _bare(_cost("stale-objects", False, 60, seconds=1.0))
    month = act_month(load, act)
    ticks = SECONDS_PER_MONTH / 3600
    usd = month["usd_per_month"]
    assert isinstance(usd, dict)
    # THEN 10 Lambda requests a tick (batch size 1), 10 s at 0.5 GB
    gb_s = PRICES["lambda_gb_second_arm64"]
    consumer = ticks * (10 * 1.0 * 0.5 * gb_s + 10 * PRICES["lambda_request"])
    assert usd["act_consumer_lambda"] == pytest.approx(round(consumer, 2))
    assert month["invocations_per_month"] == round(ticks * 10)
    # AND SQS: one send of ten, ten receives and ten deletes a tick, and the event
    # source's idle long polls on the act queue
    idle = IDLE_POLLERS * SECONDS_PER_MONTH / LONG_POLL_SECONDS
    sqs = (ticks * (1 + 2 * 10) + idle) * SQS_FIFO_REQUEST
    assert usd["act_sqs_requests"] == pytest.approx(round(sqs, 2))


def test_a_ticks_new_containers_are_capped_by_the_event_sources_concurrency() -> None:
    # GIVEN 100 runs a tick, each container's cold start 2 s, at most 20 consumers
    load = HubLoad(accounts=100, active_fraction=0.0)
    act = replace(_bare(_cost("stale-objects", False)), cold_start_seconds=2.0)
    guards = act_month(load, act)["guards"]
    assert isinstance(guards, dict)
    # THEN 20 cold starts a tick, 40 s at 0.5 GB: 20 GB-s a tick
    ticks = SECONDS_PER_MONTH / 3600
    assert guards["stale-objects"]["gb_seconds_per_month"] == round(ticks * 20)


def test_xray_records_one_trace_a_second_then_five_percent() -> None:
    assert traced(200, 25) == pytest.approx(25 + 0.05 * 175)
    assert traced(5, 60) == 5
    assert traced(10, 0.2) == pytest.approx(1 + 0.05 * 9)
    assert traced(0, 0) == 0


def test_the_organization_stack_has_the_act_path_and_no_per_guard_lambdas() -> None:
    month = stack_month(HubLoad())
    lines = month["usd_per_month"]
    assert isinstance(lines, dict)
    assert "guard_lambdas_upper_bound" not in lines
    assert {"act_consumer_lambda", "act_sqs_requests", "act_fanout_lambda"} <= set(lines)
    # 26 single-account alarms, the hub's 4 more, the act path's 4, minus 12 guard Lambdas'
    assert month["alarms"] == ORG_ALARMS == 22
    assert lines["alarms"] == pytest.approx(2.20)
    assert month["usd_per_month_total"] == pytest.approx(sum(lines.values()), abs=0.005)


def test_a_data_guard_grows_with_account_regions_a_compute_guard_with_active_ones() -> None:
    # GIVEN each run 1 s a region; twice the regions, the same 80 active account-regions
    guards = (
        _cost("idle-notebooks", True),
        _cost("stale-volumes", False, 30),
    )
    guards = tuple(replace(g, per_region={**ZERO, "seconds": 1.0}) for g in guards)
    act = _bare(*guards)
    four = act_month(HubLoad(), act)["guards"]
    eight = act_month(HubLoad(regions_per_account=8, active_fraction=0.05), act)["guards"]
    assert isinstance(four, dict) and isinstance(eight, dict)
    # THEN the data guard's seconds double, the compute guard's do not move
    assert eight["stale-volumes"]["gb_seconds_per_month"] == pytest.approx(
        2 * four["stale-volumes"]["gb_seconds_per_month"], rel=1e-3
    )
    assert eight["idle-notebooks"] == four["idle-notebooks"]


def _sample(guard: str, case: str, regions: int, **figures: float) -> RunSample:
    member = int(figures.get("member", 0))
    hub = int(figures.get("hub", 0))
    return RunSample(
        guard,
        case,
        "222222222222",
        regions,
        0.0,
        {},
        figures.get("cpu", 0.0),
        0.0,
        {"ec2.DescribeVolumes": member} if member else {},
        {"sts.AssumeRole": 1, **({"dynamodb.GetItem": hub} if hub else {})},
        {"write_units": figures.get("wu", 0.0), "read_units": figures.get("ru", 0.0)},
        289,
        "nothing",
    )


def test_a_guards_line_is_fitted_on_its_regions_and_holding_adds_the_larger_run() -> None:
    # GIVEN empty runs of 0.1 + 0.02 s CPU, 3 member calls and 1 hub call a region, and
    # holding runs over 4 regions: the first with 2 more hub calls, the next with 5 more
    # member calls
    samples = [
        _sample("stale-volumes", f"empty_{n}", n, cpu=0.1 + 0.02 * n, member=3 * n, hub=n, ru=n)
        for n in (1, 2, 4)
        for _ in range(3)
    ]
    samples += [
        _sample("stale-volumes", "empty_4_others_hold", 4, cpu=0.18, member=12, hub=4, ru=4),
        _sample("stale-volumes", "holding", 4, cpu=0.18, member=12, hub=6, ru=4, wu=1),
        _sample("stale-volumes", "holding_next", 4, cpu=0.18, member=17, hub=4, ru=4),
        _sample("stale-volumes", "holding_x3", 4, cpu=0.18, member=12, hub=8, ru=4, wu=3),
    ]
    line = guard_line(samples, "stale-volumes")
    base, per_region, holding = (line["line"][k] for k in ("base", "per_region", "holding"))
    # THEN the line: one AssumeRole a run, 3 + 1 calls a region; seconds = CPU + latency
    assert base["sts_calls"] == pytest.approx(1)
    assert per_region["member_calls"] == pytest.approx(3)
    assert per_region["hub_calls"] == pytest.approx(1)
    assert base["seconds"] == pytest.approx(0.1 + 0.15)
    assert per_region["seconds"] == pytest.approx(0.02 + 3 * 0.15 + 0.01)
    # AND holding adds the larger of the first and the next run, figure by figure
    assert holding["member_calls"] == pytest.approx(5)
    assert holding["hub_calls"] == pytest.approx(2)
    assert holding["write_units"] == pytest.approx(1)
    assert holding["seconds"] == pytest.approx(5 * 0.15)
    assert line["calls_unchanged_when_other_accounts_hold_things"] is True


def test_the_seconds_of_a_run_are_our_time_plus_each_calls_latency() -> None:
    sides = {"member_calls": 2, "sts_calls": 1, "hub_calls": 3}
    assert run_seconds(0.1, sides) == pytest.approx(0.1 + 2 * 0.15 + 0.15 + 3 * 0.01)


def test_the_fan_outs_seconds_are_fitted_on_the_directory_and_the_sends() -> None:
    # GIVEN seconds = 0.05 + 0.0001 a directory account-region + 0.01 a send of ten
    def fan(accounts: int, runs: dict[str, int]) -> dict[str, object]:
        regions = 4 * accounts
        return {
            "account_regions": regions,
            "guards": {
                g: {
                    "runs": n,
                    "seconds_aws_estimate": 0.05 + 0.0001 * regions + 0.01 * math.ceil(n / 10),
                    "log_bytes": 270,
                }
                for g, n in runs.items()
            },
        }

    line = fanout_line([fan(50, {"a": 20, "b": 50}), fan(200, {"a": 80, "b": 200})])
    assert line["base"] == pytest.approx(0.05, abs=1e-4)
    assert line["per_account_region"] == pytest.approx(0.0001, abs=1e-6)
    assert line["per_send"] == pytest.approx(0.01, abs=1e-4)


def test_a_tick_is_planned_by_the_real_planner_over_the_world() -> None:
    # GIVEN 20 accounts x 4 regions, 10 % active: 8 active account-regions, one per account
    act = _bare(
        replace(_cost("idle-notebooks", True, sts_calls=1), per_region={**ZERO, "member_calls": 4}),
        replace(
            _cost("stale-volumes", False, 30, sts_calls=1), per_region={**ZERO, "member_calls": 3}
        ),
    )
    tick = plan_tick(20, 0.10, 4, act)
    # THEN the idle guard runs in the 8 accounts with compute, over their active region
    assert tick["idle-notebooks"]["invocations"] == 8
    assert tick["idle-notebooks"]["account_regions_covered"] == 8
    assert tick["idle-notebooks"]["calls"] == pytest.approx(8 * (1 + 4))
    # AND the stale-volume guard in all 20, over their 4 regions
    assert tick["stale-volumes"]["invocations"] == 20
    assert tick["stale-volumes"]["account_regions_covered"] == 80
    assert tick["stale-volumes"]["calls"] == pytest.approx(20 * (1 + 4 * 3))


def test_warm_credentials_save_an_assume_role_and_its_latency_per_run() -> None:
    cost = _cost("stale-objects", False, seconds=0.5, sts_calls=1)
    warm = variants(_bare(cost), {})["warm_credentials"].guards[0]
    assert warm.base["sts_calls"] == 0
    assert warm.base["seconds"] == pytest.approx(0.5 - 0.15)


def test_reading_a_data_guards_regions_at_once_pays_their_latency_once() -> None:
    # GIVEN a region's 3 member calls and 1 hub call (0.46 s of latency) and 0.02 s CPU
    cost = replace(
        _cost("stale-volumes", False, 30, seconds=0.3),
        per_region={**ZERO, "seconds": 0.48, "member_calls": 3, "hub_calls": 1},
    )
    # WHEN modelled as shipped (the stale-volume guard reads its regions at once)
    parallel = as_shipped(_bare(cost)).guards[0]
    # THEN 4 regions cost 0.3 + 0.46 + 4 x 0.02 s instead of 0.3 + 4 x 0.48
    four = parallel.run(4, 0.0)["seconds"]
    assert four == pytest.approx(0.3 + 0.46 + 4 * 0.02)
    # AND a guard that reads its regions one after the other keeps paying each
    other = replace(cost, name="stale-objects")
    assert as_shipped(_bare(other)).guards[0].run(4, 0.0)["seconds"] == pytest.approx(
        0.3 + 4 * 0.48
    )
