"""The hub's schedule model: SQS FIFO groups and Lambda's batches, hand-computed."""

from __future__ import annotations

import pytest

from benchmarks.hub_schedule import Message, schedule


def _m(group: str, seconds: float = 1.0) -> Message:
    return Message(group, seconds)


def test_one_groups_items_share_a_batch_and_run_one_after_the_other() -> None:
    # GIVEN three one-second items of one account, plenty of consumers
    run = schedule([_m("a"), _m("a"), _m("a")], concurrency=5)
    # THEN one invocation receives all three and runs them in 3 s
    assert run.makespan == pytest.approx(3.0)
    assert (run.invocations, run.containers, run.batch_sizes) == (1, 1, (3,))


def test_the_concurrency_cap_queues_batches_and_reuses_warm_containers() -> None:
    # GIVEN four accounts' items, one a batch, two consumers at most, a 0.5 s cold start
    run = schedule(
        [_m("a"), _m("b"), _m("c"), _m("d")], concurrency=2, batch_size=1, cold_start=0.5
    )
    # THEN two cold invocations end at 1.5 s, two warm ones reuse them and end at 2.5 s
    assert run.makespan == pytest.approx(2.5)
    assert (run.invocations, run.containers, run.peak_concurrency) == (4, 2, 2)
    assert run.busy_seconds == pytest.approx(1.5 + 1.5 + 1.0 + 1.0)


def test_an_accounts_items_wait_for_its_group_whatever_the_free_consumers() -> None:
    # GIVEN an account with three items in one FIFO group and another with one item
    run = schedule([_m("a"), _m("a"), _m("a"), _m("b")], concurrency=10, batch_size=1)
    # THEN the account's items run one at a time (3 s); the other runs beside them
    assert run.makespan == pytest.approx(3.0)
    assert run.peak_concurrency == 2
    assert run.invocations == 4


def test_a_group_in_flight_is_skipped_and_its_next_message_keeps_its_order() -> None:
    # GIVEN a1 (1 s), a2 (2 s), a3 (4 s) in one group, batches of two
    run = schedule([_m("a", 1), _m("a", 2), _m("a", 4)], concurrency=5, batch_size=2)
    # THEN [a1, a2] run first (3 s); a3 only once the group is free: 3 + 4 = 7 s
    assert run.makespan == pytest.approx(7.0)
    assert run.batch_sizes == (2, 1)


def test_a_batch_takes_the_next_free_group_past_a_locked_one() -> None:
    # GIVEN a1, a2, b1 and single-item batches on two consumers
    run = schedule([_m("a"), _m("a"), _m("b")], concurrency=2, batch_size=1)
    # THEN a1 and b1 start at once (a2 waits for its group), a2 runs from 1 s to 2 s
    assert run.makespan == pytest.approx(2.0)
    assert run.peak_concurrency == 2


def test_each_invocation_pays_its_overhead_once_and_warm_containers_no_cold_start() -> None:
    # GIVEN three accounts' items, one a batch, two containers warm from the last tick
    run = schedule(
        [_m("a"), _m("b"), _m("c")],
        concurrency=3,
        batch_size=1,
        per_invocation=0.25,
        cold_start=1.0,
        warm_containers=2,
    )
    # THEN two warm invocations take 1.25 s, the third a cold start more: 2.25 s
    assert run.makespan == pytest.approx(2.25)
    assert run.containers == 3
    assert run.busy_seconds == pytest.approx(1.25 + 1.25 + 2.25)


def test_an_empty_tick_takes_no_time_and_no_invocation() -> None:
    run = schedule([], concurrency=20)
    assert (run.makespan, run.invocations, run.containers) == (0.0, 0, 0)


@pytest.mark.parametrize(("concurrency", "batch"), [(0, 10), (5, 0)])
def test_a_cap_or_batch_below_one_is_refused(concurrency: int, batch: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        schedule([_m("a")], concurrency=concurrency, batch_size=batch)


def test_the_queue_is_not_changed_by_scheduling_it() -> None:
    messages = [_m("a"), _m("b")]
    schedule(messages, concurrency=1)
    assert messages == [_m("a"), _m("b")]
