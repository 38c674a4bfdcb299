"""A region's endpoint invocations read in several calls, one of which fails: what was read
is kept, only the variants of the failed call are unknown, and the failure is a finding."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal

import boto3
from botocore.stub import Stubber

from costguard.adapters.cloudwatch import EndpointGpuMetrics
from costguard.adapters.memory import InMemoryLedger
from costguard.domain.advice import EndpointVariant
from costguard.domain.findings import FindingCode
from costguard.domain.predictions import CostStatus, prediction_window
from costguard.ports import PartialReadError, SourceError
from tests.scan.test_cost_per_prediction_scan import CREATED, NOW, scan, steady, variant

START, END = prediction_window(NOW)


def test_a_second_call_that_fails_keeps_the_first_calls_500_variants() -> None:
    """Defect: 600 variants of a region are read in two GetMetricData calls; when the
    second failed (throttled past the retries), the first call's 500 answers were thrown
    away with it, and every variant of the region showed "unknown": one failing page cost
    the user the cost per prediction of 500 endpoints that had been read."""
    client = boto3.client("cloudwatch", region_name="us-east-1")
    variants = [
        EndpointVariant(f"us-east-1/sagemaker-endpoint/ep-{n}/primary", f"ep-{n}", "primary")
        for n in range(600)
    ]
    with Stubber(client) as stub:
        stub.add_response(
            "get_metric_data",
            {
                "MetricDataResults": [
                    {
                        "Id": f"i{n}",
                        "StatusCode": "Complete",
                        "Values": [7.0],
                        "Timestamps": [START],
                    }
                    for n in range(500)
                ]
            },
        )
        stub.add_client_error(
            "get_metric_data", service_error_code="Throttling", http_status_code=400
        )
        reader = EndpointGpuMetrics(lambda _region: client)
        try:
            reader.invocations("us-east-1", variants, START, END)
        except PartialReadError as exc:
            raised: SourceError = exc
        else:  # pragma: no cover - the assertion below names what was expected
            raise AssertionError("a failed call must be reported")
    # THEN the error is the failed call's, and it carries the 500 variants read in full
    assert (raised.operation, raised.code) == ("GetMetricData", "Throttling")
    assert isinstance(raised, PartialReadError)
    assert len(raised.found) == 500
    assert raised.found[variants[0].key] == {START: Decimal(7)}
    assert variants[599].key not in raised.found


class _HalfRead:
    """Endpoint metrics whose read of a region fails after reading some variants."""

    def __init__(self, served: Mapping[str, Mapping[datetime, Decimal]]) -> None:
        self.served = served

    def gpu_utilization(self, *_: object) -> Mapping[str, Decimal]:
        return {}

    def invocations(
        self, region: str, variants: Sequence[EndpointVariant], start: datetime, end: datetime
    ) -> Mapping[str, Mapping[datetime, Decimal]]:
        error = PartialReadError(
            "cloudwatch", region, "GetMetricData", "Throttling", "Rate exceeded"
        )
        error.found = {v.key: self.served[v.key] for v in variants if v.key in self.served}
        raise error


def test_the_scan_prices_what_was_read_and_names_the_region_for_the_rest() -> None:
    # GIVEN two endpoints in a region; the read of the second one's call failed
    read, lost = variant("ml.g5.xlarge", CREATED, "read"), variant("ml.g5.xlarge", CREATED, "lost")
    metrics = _HalfRead({read.key: steady(1000, NOW)})
    # WHEN the account is scanned
    report = scan([read, lost], metrics, InMemoryLedger(), NOW)  # type: ignore[arg-type]
    # THEN the one read is priced ($1.408/h over 1,000 an hour), the other is unknown
    by_key = {c.key: c for c in report.prediction_costs}
    assert by_key[read.key].status is CostStatus.PRICED
    assert by_key[read.key].usd_per_1000 == Decimal("1.408")
    assert by_key[lost.key].status is CostStatus.UNKNOWN
    # AND the failure is a scan-failed finding naming the region and how many are unknown
    (finding,) = [f for f in report.findings if f.code is FindingCode.SCAN_FAILED]
    assert finding.resource == "us-east-1/sagemaker-endpoint-invocations"
    assert "Throttling" in finding.message and "1 of 2" in finding.message
