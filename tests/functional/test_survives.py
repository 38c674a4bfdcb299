"""What CostGuard survives: each defect found by attacking the spine, as a scenario.

Every scenario runs the scan use case against the DynamoDB ledger on moto, the way a
deployed guard runs, and checks the money against a hand computation. Read the test
names as the list of guarantees; the README's "Reliability" section points here.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError

from costguard.adapters.dynamodb import DynamoDbLedger
from costguard.domain.models import Resource, ResourceKind
from costguard.ports import CommitOutcome, Inventory, Ledger
from costguard.services.scan import ScanReport, ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.fakes import StaticInventory, StaticSpotPrices

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
STEP = timedelta(minutes=15)
LAUNCHED = T0 - timedelta(hours=2)
#: g5.xlarge on-demand in us-east-1, from the catalog.
RATE = Decimal("1.006")


class FaultyClient:
    """A DynamoDB client that fails the n-th call (1-based) made while ``armed``."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.fail_at: int | None = None
        self.calls = 0
        self._lock = threading.Lock()

    def _tick(self, name: str) -> None:
        with self._lock:
            self.calls += 1
            if self.fail_at is not None and self.calls == self.fail_at:
                raise ClientError(
                    {"Error": {"Code": "InternalServerError", "Message": "injected"}}, name
                )

    def get_paginator(self, operation: str) -> Any:
        paginator = self._client.get_paginator(operation)
        outer = self

        class Faulty:
            def paginate(self, **kwargs: Any) -> Any:
                outer._tick(operation)  # one fault point per paginated read
                return paginator.paginate(**kwargs)

        return Faulty()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._tick(name)
            return attr(*args, **kwargs)

        return call


@pytest.fixture
def ddb(aws: Any) -> Iterator[FaultyClient]:
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    yield FaultyClient(aws.client("dynamodb", region_name="us-east-1"))


def gpu(project: str = "vision", **extra: str) -> Resource:
    return Resource(
        id="i-0123456789abcdef0",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="g5.xlarge",
        availability_zone="us-east-1a",
        launched_at=LAUNCHED,
        tags={"costguard:project": project, **extra},
    )


def scan(ledger: Ledger, *resources: Resource) -> Callable[[datetime], ScanReport]:
    service = ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory(resources)})],
        StaticSpotPrices({}),
        fixture_catalog(),
        ledger,
        ScanSettings(scope="123456789012", regions=("us-east-1",)),
    )
    return service.run


def spent(ledger: Ledger, project: str = "vision") -> Decimal:
    return ledger.month_totals("123456789012", "2026-11")[project].usd


def hand_computed(until: datetime) -> Decimal:
    return RATE * Decimal((until - LAUNCHED).total_seconds()) / Decimal(3600)


# -- time only moves forward ------------------------------------------------------------


def test_a_late_retry_of_an_older_scan_counts_nothing_twice(ddb: FaultyClient) -> None:
    ledger = DynamoDbLedger(ddb, "ledger")
    run = scan(ledger, gpu())
    run(T0)
    run(T0 + 2 * STEP)
    # WHEN the retry of the scan scheduled at T0 + 15 min arrives after T0 + 30 min
    late = run(T0 + STEP)
    # THEN it is refused, and the next scan counts every minute exactly once
    assert late.ledger is CommitOutcome.CONTENDED
    run(T0 + 3 * STEP)
    assert ledger.watermark("123456789012") == T0 + 3 * STEP
    assert spent(ledger) == hand_computed(T0 + 3 * STEP)


#: How many DynamoDB calls one steady-state scan makes (checked below).
LEDGER_CALLS_PER_SCAN = 9


@pytest.mark.parametrize("failing_call", range(1, LEDGER_CALLS_PER_SCAN + 1))
def test_a_scan_failing_at_any_ledger_call_never_double_counts(
    ddb: FaultyClient, failing_call: int
) -> None:
    ledger = DynamoDbLedger(ddb, "ledger")
    run = scan(ledger, gpu())
    run(T0)
    # GIVEN the second scan's n-th DynamoDB call fails (reads, the commit, findings)
    ddb.calls, ddb.fail_at = 0, failing_call
    with pytest.raises(ClientError):
        run(T0 + STEP)
    ddb.fail_at = None
    # WHEN later scans succeed
    run(T0 + 2 * STEP)
    run(T0 + 3 * STEP)
    # THEN month-to-date is exactly the rate times the time the GPU ran
    assert spent(ledger) == hand_computed(T0 + 3 * STEP)


def test_a_scan_calls_the_ledger_few_enough_times_for_the_fault_sweep(ddb: FaultyClient) -> None:
    # The sweep above must cover every call a scan makes, no more and no fewer.
    ledger = DynamoDbLedger(ddb, "ledger")
    run = scan(ledger, gpu())
    run(T0)
    ddb.calls = 0
    run(T0 + STEP)
    assert ddb.calls == LEDGER_CALLS_PER_SCAN


def test_a_failure_that_repeats_every_scan_does_not_grow_the_count(ddb: FaultyClient) -> None:
    ledger = DynamoDbLedger(ddb, "ledger")
    run = scan(ledger, gpu(**{"costguard:budget": "abc"}))  # a finding to write every scan
    # GIVEN the write after the commit (the day's findings) fails on every scan, from the
    # first (so the finding is never written and every scan tries again)
    original = ddb._client.batch_write_item

    def broken(**kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "x"}}, "Batch")

    ddb._client.batch_write_item = broken
    for n in range(5):
        with pytest.raises(ClientError):
            run(T0 + n * STEP)
    ddb._client.batch_write_item = original
    run(T0 + 5 * STEP)
    assert spent(ledger) == hand_computed(T0 + 5 * STEP)


# -- one resource never stops the scan -----------------------------------------------


def test_a_long_cjk_project_name_is_a_project_not_a_failed_scan(ddb: FaultyClient) -> None:
    # 120 CJK characters: within the tag contract, 1,088 bytes once percent-encoded.
    name = "計算機視覚" * 24
    ledger = DynamoDbLedger(ddb, "ledger")
    run = scan(ledger, gpu(project=name))
    run(T0)
    report = run(T0 + STEP)
    assert [p.project for p in report.projects] == [name]
    assert spent(ledger, name) == hand_computed(T0 + STEP)


# -- no alert is lost, none is too big to send --------------------------------------------


class Guard:
    """The scan and the alerts, as the scan Lambda runs them, on DynamoDB and SNS (moto)."""

    def __init__(self, aws: Any, ddb: FaultyClient) -> None:
        from costguard.adapters.sns import SnsNotifier
        from costguard.services.alerts import AlertService, AlertSettings
        from costguard_demo.plumbing import create_alert_channels

        self.aws = aws
        self.ledger = DynamoDbLedger(ddb, "ledger")
        self.topic, self.queue = create_alert_channels(aws, "us-east-1")
        self.notifier = SnsNotifier(aws.client("sns", region_name="us-east-1"), self.topic)
        self.alerts = AlertService(
            self.ledger,
            self.notifier,
            AlertSettings(scope="123456789012", digest_hour_utc=12, scan_failed_after=3),
        )

    def scan(
        self, now: datetime, *resources: Resource, failing: Exception | None = None
    ) -> tuple[ScanReport, Any]:
        service = ScanService(
            [
                StaticInventory(
                    "ec2",
                    {"us-east-1": Inventory(resources)},
                    {"us-east-1": failing} if failing else None,
                )
            ],
            StaticSpotPrices({}),
            fixture_catalog(),
            self.ledger,
            ScanSettings(scope="123456789012", regions=("us-east-1",)),
        )
        report = service.run(now)
        return report, self.alerts.attempt(report, now)

    def received(self) -> list[dict[str, Any]]:
        from costguard_demo.plumbing import drain

        return drain(self.aws, self.queue, "us-east-1")


@pytest.fixture
def guard(aws: Any, ddb: FaultyClient) -> Guard:
    return Guard(aws, ddb)


def untagged(n: int) -> Resource:
    return Resource(
        id=f"i-{n:017x}",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="p5.48xlarge",
        launched_at=LAUNCHED,
        tags={"Name": "scratch-" + "実験" * 20},
    )


def test_hundreds_of_untagged_gpus_are_one_alert_that_fits_in_sns(guard: Guard) -> None:
    # 93 untagged instances once made the SNS message exceed 256 KiB and failed every scan.
    fleet = [untagged(n) for n in range(400)]
    _, run = guard.scan(T0, *fleet)
    assert not run.failed, run.failed
    (alert,) = [m for m in guard.received() if m["kind"] == "unattributed-spend"]
    assert alert["resources_total"] == 400
    assert len(alert["resources"]) <= 20


def test_one_failed_publish_loses_nothing_and_stops_nothing(guard: Guard) -> None:
    over = gpu(**{"costguard:budget": "1"})  # $1 budget: already over on the first scan
    publish = guard.notifier.publish
    calls: list[str] = []

    def flaky(alert: Any) -> str:
        calls.append(alert.kind.value)
        if alert.kind.value == "budget-threshold" and calls.count("budget-threshold") == 1:
            raise RuntimeError("SNS 500")
        return publish(alert)

    guard.notifier.publish = flaky  # type: ignore[method-assign]
    report, run = guard.scan(T0, over)
    # THEN the commit happened, the other alert went out, and the failure is reported
    assert report.ledger is CommitOutcome.APPLIED
    assert [f.kind for f in run.failed] == ["budget-threshold"]
    assert [m["kind"] for m in guard.received()] == ["budget-forecast"]
    # AND the next scan sends the one that failed, once
    guard.scan(T0 + STEP, over)
    assert [m["kind"] for m in guard.received()] == ["budget-threshold"]
    guard.scan(T0 + 2 * STEP, over)
    assert guard.received() == []


def test_a_failed_read_is_not_a_recovery_and_not_a_spike(guard: Guard) -> None:
    from costguard.ports import AccessDeniedError

    p5 = gpu()
    big = Resource(
        id="i-p5",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="p5.48xlarge",
        availability_zone="us-east-1a",
        launched_at=LAUNCHED,
        tags={"costguard:project": "vision"},
    )
    # GIVEN a small baseline for a day, then a p5: one spike alert
    for n in range(8):
        guard.scan(T0 - timedelta(hours=8 - n), p5)
    guard.scan(T0, p5, big)
    assert [m["kind"] for m in guard.received()] == ["burn-rate-anomaly"]
    # WHEN EC2 cannot be read for three scans while the p5 still runs
    denied = AccessDeniedError("ec2", "us-east-1", "DescribeInstances", "AccessDenied", "no")
    for n in range(1, 4):
        guard.scan(T0 + n * STEP, failing=denied)
    # THEN no "back to $0/h" recovery, only the failure, told after 3 failed scans
    kinds = [m["kind"] for m in guard.received() if m["kind"] != "findings-digest"]
    assert "burn-rate-recovered" not in kinds
    assert kinds == ["scan-failed"]
    # AND when it is read again, no false spike "from a $0 baseline"
    guard.scan(T0 + 4 * STEP, p5, big)
    kinds = [m["kind"] for m in guard.received()]
    assert "burn-rate-anomaly" not in kinds


def test_the_digest_covers_an_outage_that_ended_before_the_digest_hour(guard: Guard) -> None:
    from costguard.ports import AccessDeniedError

    denied = AccessDeniedError("ec2", "us-east-1", "DescribeInstances", "AccessDenied", "no")
    outage_start = T0 - timedelta(hours=8)
    for n in range(0, 24):  # six hours of failed scans, ended two hours before 12:00
        guard.scan(outage_start + n * STEP, failing=denied)
    guard.received()
    # WHEN the first scan of the digest hour runs, healthy
    guard.scan(T0, gpu())
    digest = [m for m in guard.received() if m["kind"] == "findings-digest"]
    assert digest, "the outage is in the day's digest"
    assert "scan-failed" in json.dumps(digest[0])


# -- identity carries the account ---------------------------------------------------------


def test_upgrading_to_account_keys_counts_nothing_twice(ddb: FaultyClient) -> None:
    # GIVEN a ledger written before resource keys carried the account
    ledger = DynamoDbLedger(ddb, "ledger")
    scan(ledger, gpu())(T0)
    assert list(ledger.observations("123456789012")) == [
        "us-east-1/ec2-instance/i-0123456789abcdef0"
    ]
    # WHEN the upgraded scan keys the same instance with its account
    upgraded = ScanService(
        [
            StaticInventory(
                "ec2", {"us-east-1": Inventory((replace(gpu(), account="123456789012"),))}
            )
        ],
        StaticSpotPrices({}),
        fixture_catalog(),
        ledger,
        ScanSettings(scope="123456789012", regions=("us-east-1",), account="123456789012"),
    )
    upgraded.run(T0 + STEP)
    # THEN it is the same instance: no second back-fill of its month
    assert spent(ledger) == hand_computed(T0 + STEP)
    assert list(ledger.observations("123456789012")) == [
        "123456789012/us-east-1/ec2-instance/i-0123456789abcdef0"
    ]


def test_a_project_spanning_accounts_is_one_project(ddb: FaultyClient) -> None:
    ledger = DynamoDbLedger(ddb, "ledger")
    here = replace(gpu(), account="111111111111")
    there = replace(gpu(), account="222222222222")  # the same instance id, another account
    report = scan(ledger, here, there)(T0)
    (vision,) = report.projects
    assert len(vision.resources) == 2
    assert vision.run_rate_usd_per_hour == 2 * RATE
