"""One contract over both slice books: plans, exactly-once "done", one aggregation claim."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.slices import DynamoDbSliceBook, InMemorySliceBook
from costguard.domain.org import Slice
from tests.support.atomic import AtomicCalls

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
A, B = Slice("222222222222", "us-east-1"), Slice("333333333333", "eu-west-1")


@pytest.fixture(params=["memory", "dynamodb"])
def book(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemorySliceBook()
        return
    import boto3
    from moto import mock_aws

    from costguard_demo.run import create_ledger_table

    with mock_aws():
        session = boto3.Session()
        create_ledger_table(session, "ledger", "us-east-1")
        client = AtomicCalls(session.client("dynamodb", region_name="us-east-1"))
        yield DynamoDbSliceBook(client, "ledger", "111111111111")


def test_a_time_is_planned_once(book: Any) -> None:
    assert book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    assert not book.plan(T0, [A], T0 + timedelta(minutes=5))
    plan = book.get(T0)
    assert plan.expected == {A, B} and plan.deadline == T0 + timedelta(minutes=10)
    assert not book.plan(T0 + timedelta(minutes=1), [], T0)  # nothing to plan


def test_a_slice_is_marked_done_once_even_by_racing_consumers(book: Any) -> None:
    book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    start = threading.Barrier(8)
    wins: list[bool] = []

    def mark() -> None:
        start.wait()
        wins.append(book.mark_done(T0, A)[0])

    threads = [threading.Thread(target=mark) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 7 + [True]
    newly, plan = book.mark_done(T0, B)
    assert newly and plan.complete


def test_a_slice_without_plan_is_not_done(book: Any) -> None:
    assert book.mark_done(T0, A) == (False, None)
    book.mark_failed(T0, A, "AccessDenied", "x")  # no plan: nothing to record, no error


def test_failures_count_attempts_and_keep_the_last_error(book: Any) -> None:
    book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    book.mark_failed(T0, B, "Throttling", "slow down")
    book.mark_failed(T0, B, "AccessDenied", "é" * 1000)
    failure = book.get(T0).failures[B]
    assert (failure.code, failure.attempts, len(failure.message)) == ("AccessDenied", 2, 300)


LEASE = timedelta(minutes=15)


def test_aggregation_is_claimed_once_and_due_only_after_the_deadline(book: Any) -> None:
    book.plan(T0, [A], T0 + timedelta(minutes=10))
    assert book.due(T0 - timedelta(hours=1), T0 + timedelta(minutes=9)) == []
    (due,) = book.due(T0 - timedelta(hours=1), T0 + timedelta(minutes=10))
    assert due.tick == T0
    assert book.claim_aggregation(T0, T0 + timedelta(minutes=10), LEASE)
    assert not book.claim_aggregation(T0, T0 + timedelta(minutes=11), LEASE)
    book.confirm_aggregation(T0, T0 + timedelta(minutes=12))
    assert book.get(T0).aggregated_at == T0 + timedelta(minutes=12)
    assert book.due(T0 - timedelta(hours=1), T0 + timedelta(hours=1)) == []
    # a confirmed time is never claimable again, whatever the lease
    assert not book.claim_aggregation(T0, T0 + timedelta(days=1), LEASE)
    assert not book.claim_aggregation(T0 + timedelta(minutes=1), T0, LEASE)  # no plan


def test_a_claimed_but_unconfirmed_aggregation_is_due_and_claimable_after_its_lease(
    book: Any,
) -> None:
    # GIVEN a time claimed at its deadline by a holder that then crashed (never confirmed)
    book.plan(T0, [A], T0 + timedelta(minutes=10))
    held_at = T0 + timedelta(minutes=10)
    assert book.claim_aggregation(T0, held_at, LEASE)
    assert book.get(T0).aggregated_at is None
    # THEN the sweep still lists it, but nobody takes it while the lease runs
    (due,) = book.due(T0 - timedelta(hours=1), held_at + timedelta(minutes=5))
    assert due.tick == T0 and due.aggregation_expires == held_at + LEASE
    assert not book.claim_aggregation(T0, held_at + LEASE - timedelta(seconds=1), LEASE)
    # AND once it has run out, one caller takes it over
    assert book.claim_aggregation(T0, held_at + LEASE, LEASE)
    assert not book.claim_aggregation(T0, held_at + LEASE, LEASE)
    # AND the crashed holder, back late, cannot free the claim of the run that took over
    book.release_aggregation(T0, held_at)
    assert not book.claim_aggregation(T0, held_at + LEASE + timedelta(minutes=1), LEASE)
    # AND the holder's own release makes it claimable at once
    book.release_aggregation(T0, held_at + LEASE)
    assert book.get(T0).aggregation_expires is None
    assert book.claim_aggregation(T0, held_at + LEASE + timedelta(minutes=1), LEASE)


def test_racing_sweeps_claim_an_aggregation_once(book: Any) -> None:
    book.plan(T0, [A], T0 + timedelta(minutes=10))
    start = threading.Barrier(6)
    wins: list[bool] = []

    def claim() -> None:
        start.wait()
        wins.append(book.claim_aggregation(T0, T0 + timedelta(minutes=10), LEASE))

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 5 + [True]


def test_a_plan_carries_the_empty_slices_it_rolls_up_without_awaiting_them(book: Any) -> None:
    # GIVEN a plan of A, carrying B (empty now, with spend earlier this month) and A again
    assert book.plan(T0, [A], T0 + timedelta(minutes=10), [B, A])
    plan = book.get(T0)
    # THEN B is rolled up but not awaited: A alone completes the plan
    assert plan.carried == {B} and plan.rolled_up == {A, B}
    _newly, plan = book.mark_done(T0, A)
    assert plan.complete


def test_a_done_slice_keeps_the_budgets_its_scan_found_tagged_once(book: Any) -> None:
    # GIVEN a plan of A and B
    book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    # WHEN A is done with the budgets tagged on its projects, then redelivered with others,
    # and B is done without any
    budgets = {"vision": Decimal("50"), "llm-é 漢": Decimal("12000.5"), "big": Decimal("1E+6")}
    newly, plan = book.mark_done(T0, A, budgets)
    assert newly and plan.tag_budgets == {A: budgets}
    assert book.mark_done(T0, A, {"vision": Decimal("1")}) == (False, plan)
    _newly, plan = book.mark_done(T0, B, {})
    # THEN the plan holds A's first budgets only (exactly, in any unit), and B's none
    assert book.get(T0).tag_budgets == {A: budgets} == plan.tag_budgets
