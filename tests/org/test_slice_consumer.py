"""Hostile tests of the org slice consumer: messages it should not trust."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from costguard.adapters.slices import InMemorySliceBook
from costguard.domain.org import Slice
from costguard.handlers.org import consume
from costguard.ports import CommitOutcome
from costguard.services.org import SliceWork
from tests.functional.test_org_slices import _event
from tests.support.clock import MIDDAY

S = Slice("111111111111", "us-east-1")


class RecordingScan:
    def __init__(self, calls: list[datetime]) -> None:
        self.calls = calls

    def run(self, now: datetime) -> Any:
        self.calls.append(now)
        raise AssertionError("scanned")  # never reached in the fixed product


def test_a_message_for_an_implausible_or_unplanned_time_is_not_scanned() -> None:
    """Defect: the org consumer scans at whatever ``time`` a message body carries.

    The scan Lambda refuses a time more than 3 h old or 5 min ahead (a 1970 time would
    accrue every instance's whole life again; a future one accrues the rest of the
    month at once and freezes accrual). ``WorkItem`` checks only that the time is UTC,
    and ``SliceWork.run`` scans before it looks for the fan-out's plan, so a stale,
    replayed or hand-sent message (a redrive from the DLQ days later, a console test
    message) runs a member account's scan at a time nobody planned.
    """
    # GIVEN a consumer whose book has no plan for these times
    calls: list[datetime] = []
    book = InMemorySliceBook()
    work = SliceWork(book, lambda s: RecordingScan(calls), None, ())
    for tick in (
        datetime(1970, 1, 1, tzinfo=UTC),
        MIDDAY + timedelta(days=30),
        MIDDAY - timedelta(days=9),
    ):
        # WHEN a message for that time reaches the consumer
        with contextlib.suppress(BatchProcessingError):  # a refusal may fail the batch
            consume(_event((tick, S)), work, MIDDAY)
    # THEN no member account was scanned at those times
    assert calls == [], f"scanned at implausible, unplanned times: {calls}"


def test_a_malformed_body_fails_alone_not_the_batch() -> None:
    """Control: a malformed body is a batch item failure; the rest of the batch runs."""
    calls: list[datetime] = []

    class Ok:
        def run(self, now: datetime) -> Any:
            calls.append(now)

            class R:
                ledger = CommitOutcome.APPLIED
                resource_count = 0
                failed_sources: frozenset[tuple[str, str]] = frozenset()
                projects: tuple[Any, ...] = ()
                teams: tuple[Any, ...] = ()
                prediction_costs: tuple[Any, ...] = ()

            return R()

    book = InMemorySliceBook()
    book.plan(MIDDAY, [S, Slice("222222222222", "us-east-1")], MIDDAY + timedelta(minutes=30))
    work = SliceWork(book, lambda s: Ok(), None, ())
    event = _event((MIDDAY, S), (MIDDAY, Slice("222222222222", "us-east-1")))
    event["Records"][0]["body"] = '{"time": "2026-11-20T12:00:00Z", "account": "1", "region": "x"}'
    response = consume(event, work, MIDDAY)
    assert response["batchItemFailures"] == [{"itemIdentifier": "m0"}]
    assert calls == [MIDDAY]
