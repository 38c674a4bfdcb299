"""Alert service with the in-memory ledger and a recording notifier: exactly-once, anomalies."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.alerts import Alert, AlertKind, cost_anomaly_alert
from costguard.domain.models import Accelerator, AcceleratorKind, Resource, ResourceKind
from costguard.ports import AccessDeniedError, Inventory
from costguard.services.alerts import AlertDeliveryError, AlertService, AlertSettings
from costguard.services.scan import ScanReport, ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.fakes import RecordingNotifier, StaticInventory, StaticSpotPrices

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
A100 = Accelerator(AcceleratorKind.GPU, "A100", 8, 327680, "NVIDIA")
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


class ScriptedNotifier:
    """Records what it publishes; fails the next ``fail[kind]`` publishes of a kind."""

    def __init__(self, sent: list[object]) -> None:
        self.sent = sent
        self.fail: dict[str, int] = {}
        self.before_publish: Callable[[Alert], None] | None = None

    def publish(self, alert: Alert) -> str:
        if self.before_publish is not None:
            hook, self.before_publish = self.before_publish, None
            hook(alert)
        if self.fail.get(alert.kind.value, 0) > 0:
            self.fail[alert.kind.value] -= 1
            raise RuntimeError(f"publish of {alert.kind.value} failed")
        self.sent.append(alert)
        return f"msg-{len(self.sent)}"


class Guard:
    """One account's scan + alerts, run cycle by cycle."""

    def __init__(self) -> None:
        self.ledger = InMemoryLedger()
        self.sent: list[object] = []
        self.fleet: list[Resource] = []
        self.notifier = ScriptedNotifier(self.sent)
        #: region -> error raised by the EC2 source (a failed read)
        self.failing: dict[str, Exception] = {}
        self.settings = AlertSettings(scope="acct")
        self.regions: tuple[str, ...] = ("us-east-1",)

    def scan(self, now: datetime) -> ScanReport:
        return ScanService(
            [
                StaticInventory(
                    "ec2",
                    {"us-east-1": Inventory(tuple(self.fleet))},
                    failing=dict(self.failing),
                )
            ],
            StaticSpotPrices({}),
            fixture_catalog(),
            self.ledger,
            ScanSettings(scope="acct", regions=self.regions),
        ).run(now)

    def service(self) -> AlertService:
        return AlertService(self.ledger, self.notifier, self.settings)

    def cycle(self, now: datetime) -> list[object]:
        report = self.scan(now)
        return list(self.service().run(report, report.previous, now))

    def cycle_failing(self, now: datetime) -> list[object]:
        """A cycle whose alerting raises at the end: what it sent before raising."""
        before = len(self.sent)
        with pytest.raises(Exception, match="failed"):
            self.cycle(now)
        return self.sent[before:]


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
        fixture_catalog(),
        ledger,
        ScanSettings(scope="acct", regions=("us-east-1",)),
    ).run(T0)
    failing = AlertService(ledger, RecordingNotifier([], fail=True), AlertSettings(scope="acct"))
    with pytest.raises(AlertDeliveryError):
        failing.run(report, report.previous, T0)
    sent: list[object] = []
    AlertService(ledger, RecordingNotifier(sent), AlertSettings(scope="acct")).run(
        report, report.previous, T0
    )
    assert "budget-threshold" in kinds(sent)


# -- isolation: one alert's failure never stops the others -------------------------------


def test_one_failing_alert_does_not_stop_the_others_and_the_error_comes_at_the_end() -> None:
    # GIVEN a project over budget (a threshold and a forecast alert are due)
    guard = Guard()
    guard.fleet = [gpu("i-1", "p4d.24xlarge", budget="1000", hours=40)]
    # AND the channel refuses the threshold alert once
    guard.notifier.fail = {"budget-threshold": 1}
    # WHEN the scan alerts
    sent = guard.cycle_failing(T0)
    # THEN the forecast alert still went out, and the run raised once, at the end
    assert kinds(sent) == ["budget-forecast"]
    # AND the next scan sends the threshold alert that failed, and nothing twice
    assert kinds(guard.cycle(T0 + STEP)) == ["budget-threshold"]


def test_every_alert_is_attempted_and_the_failures_are_returned_not_raised() -> None:
    guard = Guard()
    guard.fleet = [
        gpu("i-1", "p4d.24xlarge", budget="1000", hours=40),
        gpu("i-x", "g5.xlarge", project=None, budget=None),
    ]
    guard.notifier.fail = {"budget-threshold": 1, "unattributed-spend": 1}
    report = guard.scan(T0)
    run = guard.service().attempt(report, T0)
    assert kinds(list(run.sent)) == ["budget-forecast", "findings-digest"]
    assert sorted(f.kind for f in run.failed) == ["budget-threshold", "unattributed-spend"]
    with pytest.raises(AlertDeliveryError, match="2 alert") as raised:
        run.raise_if_failed()
    assert raised.value.run is run
    assert isinstance(raised.value.__cause__, RuntimeError)


# -- the burn-rate state follows delivery -------------------------------------------------


def steady_then_p5(guard: Guard) -> Resource:
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
    return p5


def test_a_spike_whose_publish_failed_is_sent_by_the_next_scan_then_recovers() -> None:
    guard = Guard()
    p5 = steady_then_p5(guard)
    state_before = guard.ledger.get_state("acct", "burn-rate-anomalies")
    # WHEN the spike's publish fails
    guard.notifier.fail = {"burn-rate-anomaly": 1}
    assert guard.cycle_failing(T0 + STEP * 8) == []
    # THEN the anomaly state did not move: nobody was told
    assert guard.ledger.get_state("acct", "burn-rate-anomalies") == state_before
    # AND the next scan sends the spike
    assert kinds(guard.cycle(T0 + STEP * 9)) == ["burn-rate-anomaly"]
    assert kinds(guard.cycle(T0 + STEP * 10)) == []
    # AND the recovery follows the delivered spike
    guard.fleet.remove(p5)
    assert kinds(guard.cycle(T0 + STEP * 11)) == ["burn-rate-recovered"]


def test_no_recovery_is_announced_for_a_spike_nobody_was_told_about() -> None:
    guard = Guard()
    p5 = steady_then_p5(guard)
    guard.notifier.fail = {"burn-rate-anomaly": 1}
    guard.cycle_failing(T0 + STEP * 8)
    guard.fleet.remove(p5)
    assert guard.cycle(T0 + STEP * 9) == []
    assert guard.cycle(T0 + STEP * 10) == []


def test_a_failed_recovery_publish_is_retried_and_sent_once() -> None:
    guard = Guard()
    p5 = steady_then_p5(guard)
    assert kinds(guard.cycle(T0 + STEP * 8)) == ["burn-rate-anomaly"]
    guard.fleet.remove(p5)
    guard.notifier.fail = {"burn-rate-recovered": 1}
    assert guard.cycle_failing(T0 + STEP * 9) == []
    assert kinds(guard.cycle(T0 + STEP * 10)) == ["burn-rate-recovered"]
    assert guard.cycle(T0 + STEP * 11) == []


def test_overlapping_scans_send_one_spike() -> None:
    # GIVEN a spike, and a second scan (one minute later) that starts while the
    # first is still publishing it, from the same anomaly state
    guard = Guard()
    steady_then_p5(guard)
    first = guard.scan(T0 + STEP * 8)
    second_now = T0 + STEP * 8 + timedelta(minutes=1)
    second = guard.scan(second_now)
    overlapping: list[object] = []

    def second_scan(_: Alert) -> None:
        overlapping.extend(guard.service().run(second, second.previous, second_now))

    guard.notifier.before_publish = second_scan
    sent = guard.service().run(first, first.previous, T0 + STEP * 8)
    # THEN exactly one spike was sent, by one of them
    assert kinds(list(sent) + overlapping) == ["burn-rate-anomaly"]
    assert kinds(guard.sent) == ["burn-rate-anomaly"]


def test_a_retried_scan_does_not_resend_the_spike() -> None:
    guard = Guard()
    steady_then_p5(guard)
    assert kinds(guard.cycle(T0 + STEP * 8)) == ["burn-rate-anomaly"]
    assert guard.cycle(T0 + STEP * 8) == []  # the Lambda retried the same event


# -- a failed read is not $0 ----------------------------------------------------------------


def denied() -> AccessDeniedError:
    return AccessDeniedError(
        "ec2", "us-east-1", "DescribeInstances", "UnauthorizedOperation", "not authorized"
    )


def test_a_failed_ec2_read_is_not_a_recovery_to_zero() -> None:
    # GIVEN a spike that was announced while a p5 runs
    guard = Guard()
    steady_then_p5(guard)
    assert kinds(guard.cycle(T0 + STEP * 8)) == ["burn-rate-anomaly"]
    # WHEN EC2 cannot be read for two scans
    guard.failing = {"us-east-1": denied()}
    # THEN nobody is told the spend is back to $0/h
    assert AlertKind.BURN_RATE_RECOVERED.value not in kinds(guard.cycle(T0 + STEP * 9))
    assert AlertKind.BURN_RATE_RECOVERED.value not in kinds(guard.cycle(T0 + STEP * 10))
    # AND when the read works again, the p5 is still a spike, not a new one
    guard.failing = {}
    assert guard.cycle(T0 + STEP * 11) == []


def test_failed_reads_never_become_a_zero_baseline_for_a_false_spike() -> None:
    # GIVEN a steady project
    guard = Guard()
    guard.fleet = [gpu("i-a", "g5.12xlarge", budget=None), gpu("i-b", "g5.12xlarge", budget=None)]
    for n in range(3):
        guard.cycle(T0 + STEP * n)
    # WHEN EC2 cannot be read for six scans (an hour and a half)
    guard.failing = {"us-east-1": denied()}
    for n in range(3, 9):
        guard.cycle(T0 + STEP * n)
    # THEN no $0 samples were kept
    history = guard.ledger.rate_history("acct", T0 - timedelta(days=1))
    assert all(rate > 0 for _, rate in history["llm"])
    # AND the read working again is not a spike "from a $0 baseline"
    guard.failing = {}
    assert AlertKind.BURN_RATE_ANOMALY.value not in kinds(guard.cycle(T0 + STEP * 9))


# -- failures are told sooner ---------------------------------------------------------------

NIGHT = T0.replace(hour=1)  # before the digest hour: only the failure alert speaks


def test_a_source_failing_three_scans_in_a_row_is_alerted_once_then_recovers() -> None:
    guard = Guard()
    guard.fleet = [gpu("i-1", "g5.xlarge", budget=None)]
    guard.failing = {"us-east-1": denied()}
    assert kinds(guard.cycle(NIGHT)) == []
    assert kinds(guard.cycle(NIGHT + STEP)) == []
    (alert,) = guard.cycle(NIGHT + STEP * 2)
    assert alert.kind.value == "scan-failed"  # type: ignore[attr-defined]
    text = f"{alert.title} {alert.summary} {dict(alert.facts)}"  # type: ignore[attr-defined]
    for needle in ("us-east-1", "ec2", "DescribeInstances", "UnauthorizedOperation"):
        assert needle in text
    # AND it is not repeated while the failure lasts
    for n in range(3, 8):
        assert guard.cycle(NIGHT + STEP * n) == []
    # AND one recovery says the source is read again
    guard.failing = {}
    assert kinds(guard.cycle(NIGHT + STEP * 8)) == ["scan-recovered"]
    assert guard.cycle(NIGHT + STEP * 9) == []


def test_a_good_scan_in_between_starts_the_count_again() -> None:
    guard = Guard()
    guard.fleet = [gpu("i-1", "g5.xlarge", budget=None)]
    for n, failing in enumerate([True, True, False, True, True, False]):
        guard.failing = {"us-east-1": denied()} if failing else {}
        assert guard.cycle(NIGHT + STEP * n) == []


def test_a_retried_invocation_does_not_count_twice() -> None:
    guard = Guard()
    guard.fleet = [gpu("i-1", "g5.xlarge", budget=None)]
    guard.failing = {"us-east-1": denied()}
    for _ in range(3):
        assert guard.cycle(NIGHT) == []
    assert guard.cycle(NIGHT + STEP) == []
    assert kinds(guard.cycle(NIGHT + STEP * 2)) == ["scan-failed"]


def test_the_failure_threshold_is_configurable() -> None:
    guard = Guard()
    guard.settings = AlertSettings(scope="acct", scan_failed_after=1)
    guard.failing = {"us-east-1": denied()}
    assert kinds(guard.cycle(NIGHT)) == ["scan-failed"]


# -- the digest covers the day --------------------------------------------------------------


def test_an_outage_hours_before_the_digest_is_in_the_digest() -> None:
    # GIVEN EC2 could not be read from 01:00 to 06:00, and works again at 07:00
    guard = Guard()
    guard.fleet = [gpu("i-1", "g5.xlarge", budget=None)]
    morning = T0.replace(hour=0)
    guard.cycle(morning)
    guard.failing = {"us-east-1": denied()}
    for h in range(1, 7):
        guard.cycle(morning + timedelta(hours=h))
    guard.failing = {}
    guard.cycle(morning + timedelta(hours=7))
    # WHEN the 08:00 scan (the digest hour) finds nothing wrong any more
    digests = [
        a
        for a in guard.cycle(morning + timedelta(hours=8))
        if a.kind is AlertKind.FINDINGS_DIGEST  # type: ignore[attr-defined]
    ]
    # THEN the digest still reports the outage
    (digest,) = digests
    assert "scan-failed" in digest.summary  # type: ignore[attr-defined]
    assert any("us-east-1/ec2" in line for line in digest.details)  # type: ignore[attr-defined]


def test_the_digest_includes_what_was_found_yesterday_evening() -> None:
    guard = Guard()
    guard.fleet = [gpu("i-1", "g5.xlarge", budget="abc")]
    yesterday_evening = T0.replace(hour=22) - timedelta(days=1)
    guard.cycle(yesterday_evening)
    guard.fleet = [gpu("i-1", "g5.xlarge", budget="1000")]  # fixed overnight
    digests = [
        a
        for a in guard.cycle(T0.replace(hour=8))
        if a.kind is AlertKind.FINDINGS_DIGEST  # type: ignore[attr-defined]
    ]
    (digest,) = digests
    assert "malformed-budget" in digest.summary  # type: ignore[attr-defined]


# -- size ----------------------------------------------------------------------------------


def test_thousands_of_unattributed_gpus_make_one_alert_with_the_top_ones_and_a_count() -> None:
    guard = Guard()
    guard.fleet = [
        gpu(f"i-{n:05d}", "p5.48xlarge" if n % 100 == 0 else "g5.xlarge", None, None)
        for n in range(3000)
    ]
    (alert,) = [a for a in guard.cycle(T0) if a.kind is AlertKind.UNATTRIBUTED]  # type: ignore[attr-defined]
    listed = alert.resources  # type: ignore[attr-defined]
    assert 0 < len(listed) <= 20
    assert {r.instance_type for r in listed[:5]} == {"p5.48xlarge"}  # the top by $/h
    assert "3,000" in alert.title  # type: ignore[attr-defined]
    assert any(f"{3000 - len(listed):,} more" in d for d in alert.details)  # type: ignore[attr-defined]
    # AND every one of them counts as reported today, listed or not
    assert [a for a in guard.cycle(T0 + STEP) if a.kind is AlertKind.UNATTRIBUTED] == []  # type: ignore[attr-defined]


def test_sources_failing_together_are_one_alert_each_claimed_once() -> None:
    # GIVEN a permission missing in two regions, and a third region that works
    guard = Guard()
    guard.regions = ("eu-west-1", "us-east-1", "us-west-2")
    west = AccessDeniedError("ec2", "us-west-2", "DescribeInstances", "AccessDenied", "SCP")
    guard.failing = {"us-east-1": denied(), "us-west-2": west}
    guard.cycle(NIGHT)
    guard.cycle(NIGHT + STEP)
    # WHEN both reach the threshold at the same scan
    (alert,) = guard.cycle(NIGHT + STEP * 2)
    # THEN one alert names both, and each source's episode is claimed on its own
    assert alert.title == "CostGuard cannot read 2 sources: AccessDenied, UnauthorizedOperation"  # type: ignore[attr-defined]
    assert [d.split(":")[0] for d in alert.details] == [  # type: ignore[attr-defined]
        "us-east-1 ec2",
        "us-west-2 ec2",
    ]
    assert len(alert.dedupe) == 2  # type: ignore[attr-defined]
    # AND when one of them is fixed, only that one is announced as recovered
    guard.failing = {"us-west-2": west}
    (recovered,) = guard.cycle(NIGHT + STEP * 3)
    assert recovered.kind is AlertKind.SCAN_RECOVERED  # type: ignore[attr-defined]
    assert recovered.details == (  # type: ignore[attr-defined]
        "us-east-1/ec2: failing since 2026-11-20 01:00 UTC",
    )
    assert guard.cycle(NIGHT + STEP * 4) == []


# -- every publish is claim -> publish -> confirm (or release) -------------------------------


class SpyLedger(InMemoryLedger):
    """The in-memory ledger, logging claims and their outcome next to the publishes."""

    def __init__(self, log: list[tuple[str, str]]) -> None:
        super().__init__()
        self.log = log

    def claim(self, namespace: str, key: str, now: datetime, lease: timedelta, attrs: Any) -> bool:
        won = super().claim(namespace, key, now, lease, attrs)
        if won:
            self.log.append(("claim", key))
        return won

    def confirm(self, namespace: str, key: str, now: datetime) -> None:
        self.log.append(("confirm", key))
        super().confirm(namespace, key, now)

    def release(self, namespace: str, key: str, now: datetime) -> None:
        self.log.append(("release", key))
        super().release(namespace, key, now)


class LoggingNotifier(ScriptedNotifier):
    def __init__(self, sent: list[object], log: list[tuple[str, str]]) -> None:
        super().__init__(sent)
        self.log = log

    def publish(self, alert: Alert) -> str:
        self.log.append(("publish", "\n".join(alert.dedupe)))
        return super().publish(alert)


def test_every_kind_of_alert_is_claimed_before_and_confirmed_after_its_publish() -> None:
    log: list[tuple[str, str]] = []
    guard = Guard()
    guard.ledger = SpyLedger(log)
    guard.notifier = LoggingNotifier(guard.sent, log)
    guard.fleet = [
        gpu("i-a", "g5.12xlarge", budget=None),
        gpu("i-b", "g5.12xlarge", budget=None),
        gpu("i-big", "p4d.24xlarge", project="big", budget="1000", hours=40),
        gpu("i-x", "g5.xlarge", project=None, budget=None),
        # an on-demand A100 box running for days: spot advice, in the daily advice digest
        replace(gpu("i-od", "p4d.24xlarge", budget=None, hours=72), accelerator=A100),
        # above its project's $/h limit: a launch-policy alert
        replace(
            gpu("i-lim", "g5.xlarge", project="capped", budget=None),
            tags={"costguard:project": "capped", "costguard:max-usd-per-hour": "0.50"},
        ),
    ]
    for n in range(8):
        guard.cycle(T0 + STEP * n)
    spike = Resource(
        id="i-p5",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="p5.48xlarge",
        launched_at=T0 + STEP * 8 - timedelta(minutes=5),
        tags={"costguard:project": "llm"},
    )
    guard.fleet.append(spike)
    guard.notifier.fail = {"burn-rate-anomaly": 1}  # one failed publish: released, retried
    guard.cycle_failing(T0 + STEP * 8)
    guard.cycle(T0 + STEP * 9)
    guard.fleet.remove(spike)
    guard.cycle(T0 + STEP * 10)
    guard.failing = {"us-east-1": denied()}
    for n in range(11, 14):
        guard.cycle(T0 + STEP * n)
    guard.failing = {}
    guard.cycle(T0 + STEP * 14)
    forwarded = cost_anomaly_alert(
        {"AnomalyId": "a-1", "Impact": {"TotalImpact": 2400.0}}, T0 + STEP * 14
    )
    assert forwarded is not None
    guard.service().attempt_delivery([forwarded]).raise_if_failed()

    actions = {AlertKind.ACTION_WARNING, AlertKind.ACTION_TAKEN}  # the executor's, not ours
    assert {a.kind for a in guard.sent} == set(AlertKind) - actions  # type: ignore[attr-defined]
    for i, (event, keys) in enumerate(log):
        if event != "publish":
            continue
        for key in keys.split("\n"):
            before = [e for e, k in log[:i] if k == key]
            after = [e for e, k in log[i + 1 :] if k == key]
            assert before and before[-1] == "claim", (key, before)
            assert after and after[0] in {"confirm", "release"}, (key, after)
    released = [k for e, k in log if e == "release"]
    assert len(released) == 1 and released[0].startswith("anomaly/llm/")


# -- crashes and lost writes delay an alert, never lose it ----------------------------------


class Crash(BaseException):
    """The Lambda timing out between the claim and the publish."""


def test_a_crash_after_the_claim_delays_the_spike_by_one_lease_and_no_more() -> None:
    guard = Guard()
    steady_then_p5(guard)
    spike_at = T0 + STEP * 8

    def crash(_: Alert) -> None:
        raise Crash

    guard.notifier.before_publish = crash
    with pytest.raises(Crash):
        guard.cycle(spike_at)
    # within the lease, the claim is still held: nothing is sent twice
    assert guard.cycle(spike_at + timedelta(minutes=5)) == []
    # after the lease, the next scan sends the spike
    assert kinds(guard.cycle(spike_at + timedelta(minutes=15))) == ["burn-rate-anomaly"]


class LosingStateLedger(InMemoryLedger):
    """Refuses the next ``lose`` writes of the anomaly state with an error."""

    lose = 0

    def put_state(self, scope: str, name: str, value: Any, expected_version: int) -> bool:
        if name == "burn-rate-anomalies" and self.lose > 0:
            self.lose -= 1
            raise RuntimeError("state write failed")
        return super().put_state(scope, name, value, expected_version)


def test_a_spike_whose_state_write_failed_is_sent_again_rather_than_lost() -> None:
    guard = Guard()
    ledger = LosingStateLedger()
    guard.ledger = ledger
    steady_then_p5(guard)
    ledger.lose = 1
    # WHEN the spike is published but its state cannot be written
    assert kinds(guard.cycle_failing(T0 + STEP * 8)) == ["burn-rate-anomaly"]
    # THEN the claim was not confirmed: after the lease the spike goes out again
    # (a duplicate at worst), and its state is then recorded
    assert kinds(guard.cycle(T0 + STEP * 9)) == ["burn-rate-anomaly"]
    assert guard.cycle(T0 + STEP * 10) == []
    state, _ = guard.ledger.get_state("acct", "burn-rate-anomalies")
    assert state["projects"]["llm"]["active"] is True


def test_four_scans_racing_on_the_same_spike_send_it_once() -> None:
    guard = Guard()
    steady_then_p5(guard)
    report = guard.scan(T0 + STEP * 8)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def alert() -> None:
        barrier.wait()
        try:
            guard.service().run(report, report.previous, T0 + STEP * 8)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=alert) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert kinds(guard.sent) == ["burn-rate-anomaly"]
