"""The Organization's aggregation: claimed before the work, done only after it, never lost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.slices import InMemorySliceBook
from costguard.domain.alerts import AlertKind
from costguard.domain.org import Slice
from costguard.ports import ThrottledError
from costguard.services.alerts import AlertDeliveryError, AlertService, AlertSettings
from costguard.services.org import (
    AGGREGATION_LEASE,
    Aggregation,
    AggregationError,
    OrgSettings,
    alert_after,
)
from tests.support.fakes import RecordingNotifier

HUB = "999999999999"
A, B = Slice("111111111111", "us-east-1"), Slice("222222222222", "us-east-1")
T0 = datetime(2026, 12, 31, 23, 45, tzinfo=UTC)  # the last tick of a year
DEADLINE = timedelta(minutes=10)
LOOKBACK = timedelta(hours=6)


class _Throttled:
    """The ledger, with ``month_totals`` throttled ``n`` times, then answering."""

    def __init__(self, inner: InMemoryLedger, n: int) -> None:
        self._inner = inner
        self.left = n

    def month_totals(self, scope: str, month: str) -> Any:
        if self.left:
            self.left -= 1
            raise ThrottledError("dynamodb", "us-east-1", "Query", "Throttling", "slow down")
        return self._inner.month_totals(scope, month)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _missing_b(book: InMemorySliceBook, tick: datetime) -> None:
    book.plan(tick, [A, B], tick + DEADLINE)
    book.mark_done(tick, A)
    book.mark_failed(tick, B, "AccessDenied", "no role")


def test_an_aggregation_whose_alert_failed_is_given_back_and_sent_by_the_next_sweep() -> None:
    # GIVEN a time missing account B, and an alert channel that fails once
    book, ledger = InMemorySliceBook(), InMemoryLedger()
    notifier = RecordingNotifier([], fail=True)
    alerts = AlertService(ledger, notifier, AlertSettings(scope=HUB))
    aggregation = Aggregation(book, ledger, OrgSettings(scope=HUB), after=alert_after(alerts))
    _missing_b(book, T0)
    # WHEN the deadline sweep cannot publish the missing-account alert
    with pytest.raises(AggregationError) as failed:
        aggregation.sweep(T0 + DEADLINE, LOOKBACK)
    assert isinstance(failed.value.__cause__, AlertDeliveryError)
    # THEN the time is not marked aggregated, and its claim was given back at once
    plan = book.get(T0)
    assert plan is not None and plan.aggregated_at is None and plan.aggregation_expires is None
    # WHEN the channel is back and the next fan-out tick sweeps (a new year by now)
    notifier.fail = False
    (report,) = aggregation.sweep(T0 + DEADLINE + timedelta(minutes=15), LOOKBACK)
    # THEN the time is aggregated, B is alerted once, and nothing is aggregated twice
    assert report.tick == T0 and report.missing == (B,)
    assert [a.kind for a in notifier.published] == [AlertKind.SCAN_FAILED]
    assert aggregation.sweep(T0 + timedelta(hours=1), LOOKBACK) == []
    assert len(notifier.published) == 1


def test_an_aggregation_that_crashed_after_its_claim_is_taken_over_after_the_lease() -> None:
    # GIVEN a due time claimed by a consumer that then crashed (no release, no confirm)
    book, ledger = InMemorySliceBook(), InMemoryLedger()
    aggregation = Aggregation(book, ledger, OrgSettings(scope=HUB))
    _missing_b(book, T0)
    crashed_at = T0 + DEADLINE
    assert book.claim_aggregation(T0, crashed_at, AGGREGATION_LEASE)
    # WHEN the sweeps run while the lease runs, and after it
    during = aggregation.sweep(crashed_at + AGGREGATION_LEASE - timedelta(seconds=1), LOOKBACK)
    after = aggregation.sweep(crashed_at + AGGREGATION_LEASE, LOOKBACK)
    # THEN nobody overtakes a holder that may still be at work, and then one sweep does
    assert during == []
    assert [r.tick for r in after] == [T0]
    assert book.get(T0).aggregated_at == crashed_at + AGGREGATION_LEASE  # type: ignore[union-attr]


def test_one_time_that_cannot_be_aggregated_does_not_stop_the_sweep_of_the_others() -> None:
    # GIVEN two due times, and a ledger whose first read is throttled
    book = InMemorySliceBook()
    ledger = _Throttled(InMemoryLedger(), 1)
    aggregation = Aggregation(book, ledger, OrgSettings(scope=HUB, read_workers=1))  # type: ignore[arg-type]
    t1 = T0 + timedelta(minutes=15)
    _missing_b(book, T0)
    _missing_b(book, t1)
    # WHEN the sweep runs after both deadlines
    with pytest.raises(AggregationError) as failed:
        aggregation.sweep(t1 + DEADLINE, LOOKBACK)
    # THEN the second time is aggregated, the first is reported and retried next sweep
    assert [r.tick for r in failed.value.reports] == [t1]
    assert [tick for tick, _exc in failed.value.failures] == [T0]
    assert [r.tick for r in aggregation.sweep(t1 + DEADLINE + DEADLINE, LOOKBACK)] == [T0]


def test_a_failing_account_is_alerted_again_the_next_utc_day_and_a_new_one_at_once() -> None:
    # GIVEN B failing every tick across UTC midnight, and C starting to fail at 00:15
    book, ledger = InMemorySliceBook(), InMemoryLedger()
    notifier = RecordingNotifier([])
    alerts = AlertService(ledger, notifier, AlertSettings(scope=HUB))
    aggregation = Aggregation(book, ledger, OrgSettings(scope=HUB), after=alert_after(alerts))
    c = Slice("333333333333", "eu-west-1")
    findings = 0
    for n in range(4):  # 23:45, 00:00, 00:15, 00:30
        tick = T0 + timedelta(minutes=15 * n)
        failing = [B, c] if n >= 2 else [B]
        book.plan(tick, [A, *failing], tick + DEADLINE)
        book.mark_done(tick, A)
        for s in failing:
            book.mark_failed(tick, s, "AccessDenied", "no role")
        (report,) = aggregation.sweep(tick + DEADLINE, LOOKBACK)
        findings += len(report.findings)
    # THEN one alert on the 31st (B), one on the 1st (B again), one when C first failed
    sent = [a.facts["accounts"] for a in notifier.published if a.kind is AlertKind.SCAN_FAILED]
    assert sent == [
        B.account,
        B.account,
        f"{B.account}, {c.account}",
    ]
    # AND the findings stay one per missing slice per tick
    assert findings == 1 + 1 + 2 + 2
