"""One contract, two ledgers: the in-memory fake and DynamoDB (moto) behave the same."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.findings import Finding, FindingCode
from costguard.domain.spend import Increment, Observation
from costguard.ports import AuditEvent, CommitOutcome, Ledger, ScanCommit

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=15)
T2 = T1 + timedelta(minutes=15)


class AtomicCalls:
    """moto's DynamoDB checks conditions and writes without a lock, so two threads can
    both pass one condition. Real DynamoDB makes each API call atomic; this proxy gives
    moto the same per-call atomicity, while our code still interleaves between calls."""

    _lock = threading.Lock()

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr) or name in {"get_paginator"}:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return call


def make_table(session: object, name: str = "ledger") -> None:
    from costguard.demo.run import create_ledger_table

    create_ledger_table(session, name, "us-east-1")


@pytest.fixture(params=["memory", "dynamodb"])
def ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    if request.param == "memory":
        yield InMemoryLedger()
        return
    import boto3
    from moto import mock_aws

    from costguard.adapters.dynamodb import DynamoDbLedger

    with mock_aws():
        session = boto3.Session()
        make_table(session)
        client = AtomicCalls(session.client("dynamodb", region_name="us-east-1"))
        yield DynamoDbLedger(client, "ledger")


def commit(
    prev: datetime | None, now: datetime, usd: str, project: str | None = "vision"
) -> ScanCommit:
    obs = Observation("us-east-1/ec2-instance/i-1", project, Decimal(4), now, T0)
    return ScanCommit(
        "acct", prev, now, {(project, "2026-11"): Increment(Decimal(usd), Decimal(0))}, [obs]
    )


def test_commits_accumulate_month_to_date(ledger: Ledger) -> None:
    assert ledger.commit(commit(None, T0, "10")) is CommitOutcome.APPLIED
    assert ledger.commit(commit(T0, T1, "1")) is CommitOutcome.APPLIED
    assert ledger.watermark("acct") == T1
    totals = ledger.month_totals("acct", "2026-11")
    assert totals["vision"].usd == Decimal(11)
    assert ledger.observations("acct")["us-east-1/ec2-instance/i-1"].observed_at == T1


def test_a_retried_scan_adds_nothing_twice(ledger: Ledger) -> None:
    ledger.commit(commit(None, T0, "10"))
    # GIVEN the same scheduled scan is delivered again (Lambda retry)
    again = ledger.commit(commit(None, T0, "10"))
    # THEN it is recognised and the total is unchanged
    assert again is CommitOutcome.ALREADY_APPLIED
    assert ledger.month_totals("acct", "2026-11")["vision"].usd == Decimal(10)


def test_a_scan_that_lost_the_race_is_refused_not_doubled(ledger: Ledger) -> None:
    ledger.commit(commit(None, T0, "10"))
    assert ledger.commit(commit(T0, T2, "2")) is CommitOutcome.APPLIED
    # A slower scan that also started from T0 commits later: refused.
    assert ledger.commit(commit(T0, T1, "1")) is CommitOutcome.CONTENDED
    assert ledger.month_totals("acct", "2026-11")["vision"].usd == Decimal(12)


def test_concurrent_scans_from_the_same_watermark_apply_exactly_once(ledger: Ledger) -> None:
    ledger.commit(commit(None, T0, "10"))
    outcomes: list[CommitOutcome] = []
    barrier = threading.Barrier(6)

    def scan(minutes: int) -> None:
        barrier.wait()
        outcomes.append(ledger.commit(commit(T0, T0 + timedelta(minutes=minutes), "1")))

    threads = [threading.Thread(target=scan, args=(m,)) for m in range(10, 16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count(CommitOutcome.APPLIED) == 1
    assert ledger.month_totals("acct", "2026-11")["vision"].usd == Decimal(11)


def test_unattributed_spend_and_odd_project_names_round_trip(ledger: Ledger) -> None:
    odd = "Ünïcode team #1 / 計算 %UNATTRIBUTED"
    ledger.commit(
        ScanCommit(
            "acct",
            None,
            T0,
            {
                (None, "2026-11"): Increment(Decimal(3), Decimal(3)),
                (odd, "2026-11"): Increment(Decimal(5), Decimal(0)),
            },
            [],
        )
    )
    totals = ledger.month_totals("acct", "2026-11")
    assert totals[None].usd == Decimal(3)
    assert totals[None].estimated_usd == Decimal(3)
    assert totals[odd].usd == Decimal(5)


def test_put_once_admits_only_the_first_writer(ledger: Ledger) -> None:
    results: list[bool] = []
    barrier = threading.Barrier(5)

    def write() -> None:
        barrier.wait()
        results.append(ledger.put_once("budget-alert", "vision#2026-11#80", T0, {"pct": 80}))

    threads = [threading.Thread(target=write) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, False, False, False, True]


def test_audit_trail_is_append_once_and_ordered(ledger: Ledger) -> None:
    e1 = AuditEvent(
        "acct", T1, "stop-1", "stop-notebook", "nb-1", "dry-run", {"state": "InService"}
    )
    e0 = AuditEvent("acct", T0, "warn-1", "warn", "nb-1", "sent", {})
    assert ledger.audit(e1)
    assert ledger.audit(e0)
    assert not ledger.audit(e1)
    trail = ledger.audit_trail("acct", "2026-11")
    assert [e.event_id for e in trail] == ["warn-1", "stop-1"]
    assert trail[1].details == {"state": "InService"}


def test_findings_are_kept_once_per_code_and_resource_per_day(ledger: Ledger) -> None:
    unpriced = Finding(FindingCode.UNPRICED, "us-east-1/ec2-instance/i-1", "no price")
    budget = Finding(FindingCode.MALFORMED_BUDGET, "us-east-1/ec2-instance/i-2", "abc")
    ledger.record_findings("acct", T0, [unpriced, unpriced, budget])
    ledger.record_findings("acct", T1, [unpriced])  # a later scan of the same day
    assert ledger.findings("acct", "2026-11-20") == [budget, unpriced]
    assert ledger.findings("acct", "2026-11-21") == []


def test_many_projects_commit_in_chunks_and_a_retry_adds_nothing(ledger: Ledger) -> None:
    # DynamoDB transactions take 100 items: 150 projects need the chunked path.
    increments = {
        (f"project-{n:03d}", "2026-11"): Increment(Decimal(n), Decimal(0)) for n in range(150)
    }
    assert ledger.commit(ScanCommit("acct", None, T0, increments, [])) is CommitOutcome.APPLIED
    assert (
        ledger.commit(ScanCommit("acct", None, T0, increments, [])) is CommitOutcome.ALREADY_APPLIED
    )
    totals = ledger.month_totals("acct", "2026-11")
    assert len(totals) == 150
    assert sum(t.usd for t in totals.values()) == Decimal(sum(range(150)))
