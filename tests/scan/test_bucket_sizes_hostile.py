"""S3 buckets in the scan when CloudWatch's answer is hostile: a storage type the catalog
cannot price, and a size CloudWatch could not read. Either is unpriced or a failed read,
never a bucket at $0 (moto in-process)."""

from __future__ import annotations

from typing import Any

from costguard.adapters.aws import ClientFactory
from costguard.adapters.memory import InMemoryLedger
from costguard.domain.findings import FindingCode
from costguard.domain.storage import GIB
from costguard.ports import SourceError
from costguard.services.scan import ScanService, ScanSettings
from tests.functional.test_s3_storage import REGION, _NoSpot, bucket, source
from tests.support.catalog import storage_catalog
from tests.support.clock import MIDDAY


def _scan(aws: Any) -> Any:
    ledger = InMemoryLedger()
    return ScanService(
        sources=[source(ClientFactory(aws), ledger)],
        spot_prices=_NoSpot(),
        catalog=storage_catalog(),
        ledger=ledger,
        settings=ScanSettings(scope="test", regions=(REGION,)),
    ).run(MIDDAY)


def test_a_storage_type_the_catalog_lacks_makes_the_bucket_unpriced(aws: Any) -> None:
    # GIVEN a bucket with 10 GiB in Standard and 5 GiB in a storage type new to the catalog
    bucket(
        aws,
        "raw-events",
        {"costguard:project": "data"},
        StandardStorage=10 * GIB,
        FancyStorage=5 * GIB,
    )
    # WHEN scanned
    report = _scan(aws)
    (data,) = [p for p in report.projects if p.project == "data"]
    (held,) = data.resources
    # THEN the bucket is unpriced naming the type, never priced at its Standard part alone
    assert held.priced.usd_per_hour is None
    assert any(
        f.code is FindingCode.UNPRICED and "FancyStorage" in f.message for f in report.findings
    )


def test_a_size_cloudwatch_could_not_read_is_a_failed_read_not_an_empty_bucket(aws: Any) -> None:
    """Defect: a BucketSizeBytes series CloudWatch answered with ``StatusCode`` InternalError
    (or Forbidden) and no value was taken as "no datapoint: empty or new", and the bucket,
    100 GiB in Standard, was priced at $0 in the project's run-rate and month-to-date: the
    one thing a price must never be when it is not known."""
    bucket(aws, "training-data", {"costguard:project": "data"}, StandardStorage=100 * GIB)

    def unreadable(parsed: dict[str, Any], **_: Any) -> None:
        for result in parsed.get("MetricDataResults", []):
            result.update(StatusCode="InternalError", Values=[], Timestamps=[])

    aws.events.register("after-call.cloudwatch.GetMetricData", unreadable)
    # WHEN the region's sizes are read
    try:
        from costguard.adapters.s3_storage import CloudWatchBucketSizes

        CloudWatchBucketSizes(ClientFactory(aws)).read(REGION, ["costguard:project"], MIDDAY)
    except SourceError as exc:
        # THEN the read fails, naming the call and the series
        assert exc.operation == "GetMetricData" and exc.code == "InternalError"
        assert "training-data" in str(exc)
    else:
        raise AssertionError("an unreadable size must fail the read")
    # AND the scan's project holds no $0 bucket: the source is reported as failed
    report = _scan(aws)
    held = [r for p in report.projects if p.project == "data" for r in p.resources]
    assert all(r.priced.usd_per_hour != 0 for r in held)
    assert any(f.code is FindingCode.SCAN_FAILED for f in report.findings)
