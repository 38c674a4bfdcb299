"""The scan reads endpoint GPU utilization for its advice: once a region, only when it can act."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.advice import AdviceCode, EndpointVariant
from costguard.domain.findings import FindingCode, Severity
from costguard.domain.models import Resource, ResourceKind
from costguard.ports import AccessDeniedError, Inventory
from costguard.services.scan import ScanReport, ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.fakes import StaticEndpointMetrics, StaticInventory, StaticSpotPrices

#: Seven minutes past the hour: the metrics window read ends on the hour before (12:00).
PAST_THE_HOUR = datetime(2026, 11, 20, 12, 7, tzinfo=UTC)
REGIONS = ("us-east-1", "us-west-2")


def endpoint(
    name: str,
    itype: str = "ml.p4d.24xlarge",
    region: str = "us-east-1",
    days: float = 3,
    variant: str = "primary",
) -> Resource:
    return Resource(
        id=f"{name}/{variant}",
        kind=ResourceKind.SAGEMAKER_ENDPOINT,
        region=region,
        instance_type=itype,
        launched_at=PAST_THE_HOUR - timedelta(days=days),
        config_since=PAST_THE_HOUR - timedelta(days=days),
        name=name,
        tags={"costguard:project": "serving"},
    )


def scan(resources: list[Resource], metrics: StaticEndpointMetrics | None) -> ScanReport:
    by_region: dict[str, list[Resource]] = {}
    for r in resources:
        by_region.setdefault(r.region, []).append(r)
    return ScanService(
        sources=[
            StaticInventory("sagemaker", {k: Inventory(tuple(v)) for k, v in by_region.items()})
        ],
        spot_prices=StaticSpotPrices({}),
        catalog=fixture_catalog(),
        ledger=InMemoryLedger(),
        settings=ScanSettings(scope="acct", regions=REGIONS),
        endpoint_metrics=metrics,
    ).run(PAST_THE_HOUR)


def test_an_idle_a100_endpoint_is_advised_a_smaller_type_from_its_measured_utilization() -> None:
    # GIVEN an ml.p4d.24xlarge endpoint reporting GPUUtilization 8 (of 800) over the last day
    ep = endpoint("chat")
    metrics = StaticEndpointMetrics({ep.key: Decimal(8)})
    # WHEN the scan runs
    report = scan([ep], metrics)
    # THEN it read the last whole day to 12:00, and advises one ml.g5.xlarge
    ((region, variants, start, end),) = metrics.reads
    assert (region, variants) == ("us-east-1", (EndpointVariant(ep.key, "chat", "primary"),))
    assert (start, end) == (
        datetime(2026, 11, 19, 12, tzinfo=UTC),
        datetime(2026, 11, 20, 12, tzinfo=UTC),
    )
    (advice,) = report.advice
    assert advice.code is AdviceCode.OVERSIZED_ENDPOINT
    assert advice.resource == ep.key
    assert advice.usd_per_month_saving == (Decimal("25.251") - Decimal("1.408")) * 730


def test_one_read_a_region_for_all_its_endpoints_and_none_without_a_candidate() -> None:
    # GIVEN 700 oversizable endpoints in one region, 3 in another, and small or young ones
    east = [endpoint(f"ep-{n}") for n in range(700)]
    west = [endpoint(f"w-{n}", region="us-west-2") for n in range(3)]
    others = [
        endpoint("small", "ml.g5.xlarge"),
        endpoint("young", days=0.5),  # not a whole day of data yet
    ]
    metrics = StaticEndpointMetrics({})
    # WHEN the scan runs
    report = scan([*east, *west, *others], metrics)
    # THEN one read a region (the adapter batches by 500), with only the candidates
    assert [(r[0], len(r[1])) for r in metrics.reads] == [("us-east-1", 700), ("us-west-2", 3)]
    # AND no figure, no advice
    assert not [a for a in report.advice if a.code is AdviceCode.OVERSIZED_ENDPOINT]
    # AND a fleet without a candidate costs no read at all
    quiet = StaticEndpointMetrics({})
    scan([endpoint("small", "ml.g5.xlarge"), endpoint("young", days=0.5)], quiet)
    assert quiet.reads == []


def test_an_unreadable_region_is_a_finding_and_the_rest_is_advised() -> None:
    # GIVEN CloudWatch refuses us-east-1 (a missing permission) and answers us-west-2
    east, west = endpoint("e"), endpoint("w", region="us-west-2")
    denied = AccessDeniedError("cloudwatch", "us-east-1", "GetMetricData", "AccessDenied", "no")
    metrics = StaticEndpointMetrics(
        {east.key: Decimal(0), west.key: Decimal(0)}, {"us-east-1": denied}
    )
    # WHEN the scan runs
    report = scan([east, west], metrics)
    # THEN the scan completes, us-west-2's endpoint is advised, us-east-1's is not guessed
    assert [a.resource for a in report.advice] == [west.key]
    # (the same refusal also leaves its invocations, so its cost per prediction, unknown)
    invocations, finding = sorted(
        (f for f in report.findings if f.code is FindingCode.SCAN_FAILED), key=lambda f: f.resource
    )
    assert finding.resource == "us-east-1/sagemaker-endpoint-metrics"
    assert finding.severity is Severity.WARNING
    assert "GetMetricData failed with AccessDenied" in finding.message
    assert invocations.resource == "us-east-1/sagemaker-endpoint-invocations"
    assert invocations.severity is Severity.WARNING
    east_cost = next(c for c in report.prediction_costs if c.key == east.key)
    assert east_cost.status.value == "unknown" and east_cost.usd_per_1000 is None
    # AND the spend is not marked incomplete: endpoint metrics are advice, not inventory
    assert report.failed_sources == frozenset()
    assert report.projects[0].run_rate_usd_per_hour == Decimal("25.251") * 2


def test_without_a_metrics_reader_the_scan_gives_no_endpoint_advice() -> None:
    report = scan([endpoint("chat")], None)
    assert report.advice == ()
