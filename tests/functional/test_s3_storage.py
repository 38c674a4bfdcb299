"""S3 storage in the scan, on moto: project-tagged buckets priced by storage class from the
daily BucketSizeBytes metric, read once a day (cached in the ledger's state), in batched
calls; counted as storage in the project's run-rate and month-to-date."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from decimal import Decimal
from typing import Any

from costguard.adapters.aws import ClientFactory
from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.s3_storage import CloudWatchBucketSizes
from costguard.domain.models import ResourceKind
from costguard.domain.storage import GIB
from costguard.domain.tags import Tags
from costguard.ports import SourceError
from costguard.services.bucket_storage import BucketStorageSource
from costguard.services.scan import ScanService, ScanSettings
from tests.support.catalog import storage_catalog
from tests.support.clock import MIDDAY

PROJECT_KEYS = (Tags.PROJECT, *Tags.PROJECT_FALLBACKS)
REGION = "us-east-1"
D = Decimal


def counted(session: Any) -> tuple[ClientFactory, Counter[str]]:
    calls: Counter[str] = Counter()
    session.events.register("before-call", lambda model, **_: calls.update([model.name]))
    return ClientFactory(session), calls


def bucket(aws: Any, name: str, tags: dict[str, str] | None, **sizes: int) -> None:
    """A bucket with ``tags`` and a BucketSizeBytes datapoint a day before MIDDAY per
    storage type (``StandardStorage=...``)."""
    s3 = aws.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=name)
    # moto stamps a bucket's creation with the wall clock: put it before the story.
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    backend.buckets[name].creation_date = MIDDAY - timedelta(days=30)
    if tags:
        s3.put_bucket_tagging(
            Bucket=name, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]}
        )
    cw = aws.client("cloudwatch", region_name=REGION)
    for storage_type, size in sizes.items():
        cw.put_metric_data(
            Namespace="AWS/S3",
            MetricData=[
                {
                    "MetricName": "BucketSizeBytes",
                    "Dimensions": [
                        {"Name": "BucketName", "Value": name},
                        {"Name": "StorageType", "Value": storage_type},
                    ],
                    "Timestamp": MIDDAY - timedelta(days=1),
                    "Value": float(size),
                    "Unit": "Bytes",
                }
            ],
        )


def source(clients: ClientFactory, ledger: InMemoryLedger) -> BucketStorageSource:
    return BucketStorageSource(
        CloudWatchBucketSizes(clients),
        ledger,
        scope="test",
        account="",
        project_keys=PROJECT_KEYS,
    )


def test_a_tagged_bucket_is_storage_of_its_project_priced_by_class(aws: Any) -> None:
    """GIVEN a bucket tagged costguard:project=data holding 100 GiB in Standard and 200 GiB
    in Standard-IA, and an untagged bucket
    WHEN the scan runs twice, an hour apart
    THEN data holds the bucket at (100 x 0.023 + 200 x 0.0125) / 730 an hour = $4.80 a
    month, labelled storage, requests not included, and its month-to-date holds the month since the 1st;
    the untagged bucket is not scanned."""
    bucket(
        aws,
        "training-data",
        {"costguard:project": "data"},
        StandardStorage=100 * GIB,
        StandardIAStorage=200 * GIB,
    )
    bucket(aws, "scratch", None, StandardStorage=GIB)
    ledger = InMemoryLedger()
    scan = ScanService(
        sources=[source(ClientFactory(aws), ledger)],
        spot_prices=_NoSpot(),
        catalog=storage_catalog(),
        ledger=ledger,
        settings=ScanSettings(scope="test", regions=(REGION,)),
    )
    scan.run(MIDDAY)
    report = scan.run(MIDDAY + timedelta(hours=1))
    (data,) = [p for p in report.projects if p.project == "data"]
    (held,) = data.resources
    assert held.priced.resource.kind is ResourceKind.S3_BUCKET
    assert held.priced.resource.category == "storage"
    assert held.priced.usd_per_hour == D("4.8") / 730
    assert data.run_rate_usd_per_hour == D("4.8") / 730
    assert "requests not included" in held.priced.basis
    # Created before the month: its month is back-filled from the 1st (estimated), 19.5
    # days to MIDDAY, then the hour to the second scan, exact.
    assert data.month_to_date_usd == D("4.8") / 730 * (19 * 24 + 12 + 1)
    assert data.estimated_usd == D("4.8") / 730 * (19 * 24 + 12)
    assert all(
        a.priced.resource.id != "scratch" for a in report.unattributed.resources + data.resources
    )


def test_sizes_are_read_once_a_day_in_batched_calls(aws: Any) -> None:
    """GIVEN 30 tagged buckets with two storage classes each
    WHEN the source collects three times: twice on one day, once the next
    THEN the first read is one ListBuckets, one GetResources, one ListMetrics and one
    GetMetricData (60 series in one call); the second reads nothing from AWS (the day's
    figures come from the ledger's state); the next day reads again."""
    for n in range(30):
        bucket(aws, f"b{n:02}", {"Project": "p"}, StandardStorage=GIB, GlacierStorage=2 * GIB)
    clients, calls = counted(aws)
    ledger = InMemoryLedger()
    src = source(clients, ledger)

    first = src.collect(REGION, MIDDAY)
    assert len(first.resources) == 30
    assert dict(first.resources[0].stored_bytes) == {
        "GlacierStorage": 2 * GIB,
        "StandardStorage": GIB,
    }
    assert calls == Counter(
        {"ListBuckets": 1, "GetResources": 1, "ListMetrics": 1, "GetMetricData": 1}
    )

    calls.clear()
    again = src.collect(REGION, MIDDAY + timedelta(hours=6))
    assert calls == Counter()
    assert again.resources == first.resources

    src.collect(REGION, MIDDAY + timedelta(days=1))
    assert calls["GetMetricData"] == 1
    state, _ = ledger.get_state("test", f"s3-sizes/{REGION}")
    assert state["day"] == (MIDDAY + timedelta(days=1)).date().isoformat()


def test_a_failed_read_prices_at_the_last_days_figures_with_a_finding() -> None:
    """GIVEN a day's figures in the ledger and a read that fails the next day
    WHEN the source collects
    THEN the buckets are priced at the held figures, and a finding names their day."""
    ledger = InMemoryLedger()
    good = _Sizes()
    src = BucketStorageSource(good, ledger, scope="s", account="", project_keys=PROJECT_KEYS)
    src.collect(REGION, MIDDAY)
    good.fail = True
    later = src.collect(REGION, MIDDAY + timedelta(days=1))
    assert [r.id for r in later.resources] == ["models"]
    (finding,) = later.findings
    assert MIDDAY.date().isoformat() in finding.message


def test_a_failed_first_read_fails_the_source() -> None:
    """GIVEN no figures held and a failing read
    WHEN the source collects
    THEN it raises, so the scan reports the source as failed (spend unknown, not $0)."""
    src = BucketStorageSource(
        _Sizes(fail=True), InMemoryLedger(), scope="s", account="", project_keys=PROJECT_KEYS
    )
    try:
        src.collect(REGION, MIDDAY)
    except SourceError:
        return
    raise AssertionError("a failed first read must fail the source")


def test_a_creation_date_after_the_scan_is_not_a_launch() -> None:
    """GIVEN a bucket whose reported creation date is after the scan's time (another clock)
    WHEN the source collects
    THEN the bucket has no launch time, so its month is back-filled (estimated) from the
    1st, rather than never accrued; a creation date before the scan is kept."""
    later = _Sizes(created=MIDDAY + timedelta(days=3))
    src = BucketStorageSource(
        later, InMemoryLedger(), scope="s", account="", project_keys=PROJECT_KEYS
    )
    (bucket_now,) = src.collect(REGION, MIDDAY).resources
    assert bucket_now.launched_at is None
    earlier = _Sizes(created=MIDDAY - timedelta(days=3))
    src = BucketStorageSource(
        earlier, InMemoryLedger(), scope="s", account="", project_keys=PROJECT_KEYS
    )
    assert src.collect(REGION, MIDDAY).resources[0].launched_at == MIDDAY - timedelta(days=3)


class _Sizes:
    def __init__(self, fail: bool = False, created: Any = None) -> None:
        self.fail = fail
        self.created = created

    def read(self, region: str, project_keys: Any, now: Any) -> list[Any]:
        from costguard.ports import BucketReading

        if self.fail:
            raise SourceError("cloudwatch", region, "GetMetricData", "Throttling", "slow down")
        return [
            BucketReading(
                "models", {"costguard:project": "m"}, self.created, (("StandardStorage", GIB),)
            )
        ]


class _NoSpot:
    def latest(self, region: str, instance_types: Any, now: Any) -> dict[Any, Decimal]:
        return {}
