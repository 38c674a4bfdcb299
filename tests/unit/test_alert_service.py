"""Alert service with the in-memory ledger and a recording notifier: exactly-once, anomalies."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from costguard.adapters.catalog import load_catalog
from costguard.adapters.memory import (
    InMemoryLedger,
    RecordingNotifier,
    StaticInventory,
    StaticSpotPrices,
)
from costguard.domain.alerts import AlertKind
from costguard.domain.models import Resource, ResourceKind
from costguard.ports import Inventory
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.scan import ScanService, ScanSettings

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
STEP = timedelta(minutes=15)


def gpu(
    id_: str,
    itype: str,
    project: str | None = "llm",
    budget: str | None = "5000",
    hours: float = 30,
) -> Resource:
    tags = {}
    if project:
        tags["costguard:project"] = project
    if budget:
        tags["costguard:budget"] = budget
    return Resource(
        id=id_,
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type=itype,
        launched_at=T0 - timedelta(hours=hours),
        tags=tags,
    )


class Guard:
    """One account's scan + alerts, run cycle by cycle."""

    def __init__(self) -> None:
        self.ledger = InMemoryLedger()
        self.sent: list[object] = []
        self.fleet: list[Resource] = []

    def cycle(self, now: datetime) -> list[object]:
        report = ScanService(
            [StaticInventory("ec2", {"us-east-1": Inventory(tuple(self.fleet))})],
            StaticSpotPrices({}),
            load_catalog(),
            self.ledger,
            ScanSettings(scope="acct", regions=("us-east-1",)),
        ).run(now)
        alerts = AlertService(
            self.ledger, RecordingNotifier(self.sent), AlertSettings(scope="acct")
        ).run(report, report.previous, now)
        return list(alerts)


def kinds(alerts: list[object]) -> list[str]:
    return [a.kind.value for a in alerts]  # type: ignore[attr-defined]


def test_over_budget_project_alerts_once_per_threshold_across_many_scans() -> None:
    # GIVEN a p4d that has already burnt most of a $1,000 budget
    guard = Guard()
    guard.fleet = [gpu("i-1", "p4d.24xlarge", budget="1000", hours=48)]
    # WHEN the guard scans every 15 minutes for five hours
    for n in range(20):
        guard.cycle(T0 + STEP * n)
    # THEN the threshold and the forecast were each announced exactly once
    counts = {k: kinds(guard.sent).count(k) for k in set(kinds(guard.sent))}
    assert counts == {"budget-threshold": 1, "budget-forecast": 1}
    assert guard.sent[0].title == "llm: 100% of the monthly budget spent"  # type: ignore[attr-defined]
    assert [a["alert_id"] for a in guard.ledger.recent_alerts("acct", T0, T0 + STEP * 20)] == [
        a.alert_id for a in guard.sent
    ]  # type: ignore[attr-defined]


def test_concurrent_scans_send_each_threshold_once() -> None:
    guard = Guard()
    guard.fleet = [gpu("i-1", "p4d.24xlarge", budget="1000", hours=40)]
    guard.cycle(T0)
    guard.sent.clear()
    guard.ledger = InMemoryLedger()  # a fresh month of claims, same spend
    barrier = threading.Barrier(4)

    def scan() -> None:
        barrier.wait()
        guard.cycle(T0 + STEP)

    threads = [threading.Thread(target=scan) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(kinds(guard.sent)) == ["budget-forecast", "budget-threshold"]


def test_a_new_p5_alerts_on_the_next_scan_naming_it_and_its_owner_then_recovers() -> None:
    guard = Guard()
    guard.fleet = [gpu("i-a", "g5.12xlarge", budget=None), gpu("i-b", "g5.12xlarge", budget=None)]
    for n in range(8):  # two hours of steady $11.34/h
        assert guard.cycle(T0 + STEP * n) == []
    p5 = Resource(
        id="i-p5",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="p5.48xlarge",
        launched_at=T0 + STEP * 8 - timedelta(minutes=5),
        tags={"costguard:project": "llm", "costguard:owner": "dave@example.com"},
    )
    guard.fleet.append(p5)
    (spike,) = guard.cycle(T0 + STEP * 8)
    assert spike.kind is AlertKind.BURN_RATE_ANOMALY  # type: ignore[attr-defined]
    assert spike.resources[0].key == "us-east-1/ec2-instance/i-p5"  # type: ignore[attr-defined]
    assert "dave@example.com" in spike.owners  # type: ignore[attr-defined]
    assert guard.cycle(T0 + STEP * 9) == []  # still high: no repeat
    guard.fleet.remove(p5)
    (recovered,) = guard.cycle(T0 + STEP * 10)
    assert recovered.kind is AlertKind.BURN_RATE_RECOVERED  # type: ignore[attr-defined]


def test_unattributed_gpus_are_reported_once_per_resource_per_day() -> None:
    guard = Guard()
    guard.fleet = [gpu("i-x", "g5.xlarge", project=None, budget=None)]
    first = [a for a in guard.cycle(T0) if a.kind is AlertKind.UNATTRIBUTED]  # type: ignore[attr-defined]
    assert kinds(first) == ["unattributed-spend"]
    guard.fleet.append(gpu("i-y", "g6.xlarge", project=None, budget=None))
    second = [a for a in guard.cycle(T0 + STEP) if a.kind is AlertKind.UNATTRIBUTED]  # type: ignore[attr-defined]
    assert [r.key for r in second[0].resources] == ["us-east-1/ec2-instance/i-y"]  # type: ignore[attr-defined]
    assert guard.cycle(T0 + STEP * 2) == []
    assert "unattributed-spend" in kinds(guard.cycle(T0 + timedelta(days=1)))


def test_findings_become_one_daily_digest_not_one_message_per_scan() -> None:
    guard = Guard()
    guard.fleet = [gpu("i-1", "g5.xlarge", budget="abc")]
    digests = [
        a
        for n in range(10)
        for a in guard.cycle(T0 + STEP * n)
        if a.kind is AlertKind.FINDINGS_DIGEST
    ]  # type: ignore[attr-defined]
    assert len(digests) == 1
    assert "malformed-budget" in digests[0].summary  # type: ignore[attr-defined]


def test_a_failed_publish_releases_the_claim_so_the_next_scan_retries() -> None:
    ledger = InMemoryLedger()
    fleet = [gpu("i-1", "p4d.24xlarge", budget="1000", hours=40)]
    report = ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory(tuple(fleet))})],
        StaticSpotPrices({}),
        load_catalog(),
        ledger,
        ScanSettings(scope="acct", regions=("us-east-1",)),
    ).run(T0)
    failing = AlertService(ledger, RecordingNotifier([], fail=True), AlertSettings(scope="acct"))
    with pytest.raises(RuntimeError):
        failing.run(report, report.previous, T0)
    sent: list[object] = []
    AlertService(ledger, RecordingNotifier(sent), AlertSettings(scope="acct")).run(
        report, report.previous, T0
    )
    assert "budget-threshold" in kinds(sent)
