"""The Organization benchmark's pure parts: fits, the latency model, a tick's wall time,
the SQS stand-in and DynamoDB's item sizes, each against hand-computed values."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from benchmarks.guard_bill import _size
from benchmarks.org_scale import (
    LATENCY,
    Calls,
    Costs,
    DayTick,
    SizedMeter,
    StandInSqs,
    aws_seconds,
    fanout_seconds,
    least_squares,
    split_calls,
    tick_wall,
    units_of,
)
from costguard.domain.directory import Work, WorkKind
from costguard.domain.org import Slice

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def _costs(**extra: object) -> Costs:
    values: dict[str, object] = {
        "seconds": {"scan": 2.0, "probe_empty": 1.0, "probe_hit": 0.5, "regions": 0.4},
        "calls": {},
        "per_invocation": 0.1,
        "cold_start": 0.5,
        "fanout_seconds": 0.3,
        "fanout_dynamodb_calls": 3,
        "fanout_burst_seconds": {},
        "aggregation_calls_per_slice": 9.0,
        "aggregation_ours_per_slice": 0.01,
    }
    return Costs(**(values | extra))  # type: ignore[arg-type]


def test_least_squares_recovers_exact_coefficients() -> None:
    # GIVEN y = 2 a + 3 b at four points
    rows = [(1.0, 0.0), (0.0, 1.0), (2.0, 1.0), (1.0, 3.0)]
    y = [2.0, 3.0, 7.0, 11.0]
    # THEN the fit is (2, 3)
    assert least_squares(rows, y) == pytest.approx([2.0, 3.0])


def test_least_squares_refuses_columns_that_do_not_determine_it() -> None:
    # GIVEN active + empty = 4 x accounts at every point (the sweep's first design)
    rows = [(40.0, 760.0, 200.0), (80.0, 720.0, 200.0), (20.0, 180.0, 50.0)]
    with pytest.raises(ValueError, match="collinear"):
        least_squares(rows, [1.0, 2.0, 3.0])


def test_calls_are_split_into_member_sts_and_hub_sides() -> None:
    calls = {
        "ec2.DescribeInstances": 2,
        "sagemaker.ListEndpoints": 1,
        "sts.AssumeRole": 1,
        "dynamodb.GetItem": 3,
        "sqs.SendMessageBatch": 1,
    }
    assert split_calls(calls) == {"member": 3, "sts": 1, "hub": 4}


def test_the_aws_estimate_adds_each_calls_stated_latency_to_our_time() -> None:
    calls = {"ec2.DescribeInstances": 2, "sts.AssumeRole": 1, "dynamodb.GetItem": 3}
    # 0.05 + 2 x 0.15 + 0.15 + 3 x 0.01 = 0.53
    assert aws_seconds(0.05, calls) == pytest.approx(0.53)
    # the hub's calls shared by two threads: ceil(3 / 2) x 0.01
    assert aws_seconds(0.05, calls, parallel_hub=2) == pytest.approx(0.52)
    assert aws_seconds(0.05, calls, latency=dict.fromkeys(LATENCY, 0.0)) == pytest.approx(0.05)


def test_the_aggregation_reads_its_slices_with_sixteen_threads() -> None:
    # 80 slices x 0.01 s of ours + ceil(80 x 9 / 16) = 45 rounds x 0.01 s = 1.25 s
    assert _costs().aggregation_seconds(80) == pytest.approx(1.25)


def test_a_ticks_wall_time_is_the_fan_out_the_consumers_and_the_aggregation() -> None:
    # GIVEN two accounts' scans (one batch: FIFO hands both groups to one invocation)
    works = tuple(
        Work(T0, WorkKind.SCAN, Slice(a, "us-east-1")) for a in ("111111111111", "222222222222")
    )
    tick = DayTick(5, 2, 0, 0, 0, False, works)
    wall = tick_wall(tick, _costs(), frozenset(), concurrency=20)
    # THEN 0.3 (fan-out) + 0.5 (cold) + 0.1 (build) + 2 x 2.0 + aggregation of two slices
    # (0.02 + ceil(18 / 16) x 0.01 = 0.04)
    assert wall["wall_seconds"] == pytest.approx(round(0.3 + 0.5 + 0.1 + 4.0 + 0.04, 1))
    assert (wall["invocations"], wall["containers"], wall["mean_batch"]) == (1, 1, 2)
    assert wall["aggregation_seconds"] == pytest.approx(0.04)


def test_a_burst_ticks_fan_out_uses_its_own_measured_seconds() -> None:
    works = (Work(T0, WorkKind.REGIONS, Slice("111111111111", "us-east-1")),)
    tick = DayTick(0, 0, 0, 0, 1, True, works)
    wall = tick_wall(tick, _costs(fanout_burst_seconds={0: 2.0}), frozenset(), concurrency=1)
    # 2.0 (fan-out of the burst) + 0.5 + 0.1 + 0.4; no scan: no aggregation
    assert wall["wall_seconds"] == pytest.approx(3.0)
    assert wall["aggregation_seconds"] == 0


def test_the_sqs_stand_in_checks_batches_and_drops_a_repeated_deduplication_id() -> None:
    calls = Calls()
    sqs = StandInSqs(calls)

    def entry(i: int, dedupe: str) -> dict[str, str]:
        return {
            "Id": str(i),
            "MessageBody": "{}",
            "MessageGroupId": "g",
            "MessageDeduplicationId": dedupe,
        }

    out = sqs.send_message_batch(QueueUrl="q", Entries=[entry(0, "a"), entry(1, "b")])
    sqs.send_message_batch(QueueUrl="q", Entries=[entry(0, "a")])
    assert [e["Id"] for e in out["Successful"]] == ["0", "1"] and out["Failed"] == []
    assert [m["MessageDeduplicationId"] for m in sqs.drain()] == ["a", "b"]
    assert calls.snapshot()["sqs.SendMessageBatch"] == 2
    with pytest.raises(ValueError, match="11 entries"):
        sqs.send_message_batch(QueueUrl="q", Entries=[entry(i, str(i)) for i in range(11)])
    with pytest.raises(ValueError, match="group"):
        sqs.send_message_batch(QueueUrl="q", Entries=[{**entry(0, "x"), "MessageGroupId": ""}])


def test_an_items_size_counts_its_string_sets() -> None:
    # GIVEN a plan-like item: "done" (4 bytes) holding two slice keys of 27 bytes
    item = {"done": {"SS": ["123456789012/ap-southeast-2", "210987654321/ap-southeast-2"]}}
    # THEN its size is the name plus both members (a set is not free)
    assert _size(item) == 4 + 27 + 27
    assert _size({"n": {"NS": ["1", "22"]}}) == 1 + 3
    assert _size({"b": {"BS": [b"ab", b"c"]}}) == 1 + 3


def test_units_are_attributed_by_the_items_partition_key() -> None:
    assert SizedMeter.kind("ORG#123456789012#TICKS") == "plan"
    assert SizedMeter.kind("ORG#123456789012#DIR") == "directory"
    assert SizedMeter.kind("SCOPE#123456789012/222222222222/us-east-1") == "ledger"
    delta = {"write:plan": 3, "write:ledger": 6, "read:ledger": 8, "read:directory": 1}
    assert units_of(delta) == {"write_units": 9, "read_units": 9}


def test_a_fan_out_with_the_sqs_stand_in_gets_each_real_sends_client_time_back() -> None:
    # GIVEN a fan-out measured at 0.05 s of ours with 12 sends to the stand-in, and a real
    # SendMessageBatch measured at 2 ms of ours
    fan = {
        "seconds_ours": 0.05,
        "calls": {"dynamodb.Query": 2, "sqs.SendMessageBatch": 12, "dynamodb.PutItem": 1},
    }
    member = {"send_batch": {"seconds_ours_per_call": 0.002}}
    # THEN 0.05 + 12 x 0.002 + 15 hub calls x 0.01 s
    assert fanout_seconds(fan, member) == pytest.approx(0.224)
