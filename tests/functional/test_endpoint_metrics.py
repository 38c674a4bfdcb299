"""Endpoint GPU utilization on moto: one GetMetricData per 500 variants, the window's average."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from botocore.stub import Stubber

from costguard.adapters.aws import ClientFactory
from costguard.adapters.cloudwatch import EndpointGpuMetrics
from costguard.domain.advice import EndpointVariant, endpoint_window
from costguard.iam import all_actions, scan_permissions
from costguard.ports import SourceError
from tests.support.clock import MIDDAY
from tests.support.endpoints import put_gpu

START, END = endpoint_window(MIDDAY)


def variant(endpoint: str, name: str = "primary") -> EndpointVariant:
    return EndpointVariant(f"us-east-1/sagemaker-endpoint/{endpoint}/{name}", endpoint, name)


def recorder(session: Any) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "GetMetricData":
            requests.append(params)

    session.events.register("provide-client-params.monitoring.GetMetricData", record)
    return requests


def test_reads_each_variants_average_over_the_window_back_dated_on_moto(aws: Any) -> None:
    # GIVEN back-dated datapoints: "chat" hourly at 16 and 48 within the last day (two
    # instances reporting at once count as two datapoints), "old" only before the window,
    # "quiet" nothing at all
    cw = aws.client("cloudwatch", region_name="us-east-1")
    hours = [START + timedelta(hours=h, minutes=30) for h in range(24)]
    put_gpu(cw, "chat", "primary", [(at, 16.0 if i % 2 else 48.0) for i, at in enumerate(hours)])
    put_gpu(cw, "chat", "primary", [(hours[0], 32.0)])  # the second instance, once
    put_gpu(cw, "old", "primary", [(START - timedelta(minutes=1), 5.0)])
    requests = recorder(aws)
    reader = EndpointGpuMetrics(ClientFactory(aws).cloudwatch)
    # WHEN the three variants are read
    found = reader.gpu_utilization(
        "us-east-1", [variant("chat"), variant("old"), variant("quiet")], START, END
    )
    # THEN chat's figure is the mean of its 25 datapoints: (12 x 16 + 12 x 48 + 32) / 25
    assert found == {variant("chat").key: Decimal(800) / 25}
    # AND the others are absent: no data is unknown, never 0
    # AND it was one call, asking for exactly what a SageMaker endpoint publishes
    (request,) = requests
    assert request["StartTime"] == START and request["EndTime"] == END
    query = request["MetricDataQueries"][0]["MetricStat"]
    assert query["Metric"]["Namespace"] == "/aws/sagemaker/Endpoints"
    assert query["Metric"]["MetricName"] == "GPUUtilization"
    assert query["Metric"]["Dimensions"] == [
        {"Name": "EndpointName", "Value": "chat"},
        {"Name": "VariantName", "Value": "primary"},
    ]
    assert (query["Stat"], query["Period"]) == ("Average", 86400)


def test_a_thousand_variants_take_three_calls_of_at_most_500_queries(aws: Any) -> None:
    # GIVEN 1,001 variants (moto does not enforce the 500-query limit: we count ourselves)
    cw = aws.client("cloudwatch", region_name="us-east-1")
    put_gpu(cw, "ep-1000", "primary", [(START + timedelta(hours=1), 3.0)])
    requests = recorder(aws)
    variants = [variant(f"ep-{n}") for n in range(1001)]
    # WHEN read
    found = EndpointGpuMetrics(ClientFactory(aws).cloudwatch).gpu_utilization(
        "us-east-1", [*variants, variants[0]], START, END
    )
    # THEN three calls, none over 500 queries, each variant asked once, the last one found
    assert [len(r["MetricDataQueries"]) for r in requests] == [500, 500, 1]
    asked = Counter(
        q["MetricStat"]["Metric"]["Dimensions"][0]["Value"]
        for r in requests
        for q in r["MetricDataQueries"]
    )
    assert len(asked) == 1001 and set(asked.values()) == {1}
    assert found == {variants[1000].key: Decimal(3)}


def test_no_variant_no_call(aws: Any) -> None:
    requests = recorder(aws)
    reader = EndpointGpuMetrics(ClientFactory(aws).cloudwatch)
    assert reader.gpu_utilization("us-east-1", [], START, END) == {}
    assert requests == []


def test_a_refused_read_is_a_source_error_naming_the_operation(aws: Any) -> None:
    client = aws.client("cloudwatch", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_client_error("get_metric_data", "AccessDenied", "not allowed", 403)
        reader = EndpointGpuMetrics(lambda _region: client)
        with pytest.raises(SourceError) as refused:
            reader.gpu_utilization("us-east-1", [variant("chat")], START, END)
    assert (refused.value.operation, refused.value.code) == ("GetMetricData", "AccessDenied")


def test_the_scan_role_is_granted_what_the_reader_calls() -> None:
    # The reader declares its permission; every configuration of the scan role holds it.
    needed = all_actions(EndpointGpuMetrics.permissions)
    assert needed == {"cloudwatch:GetMetricData"}
    for tags in ("tagging-api", "per-resource"):
        for studio in (True, False):
            granted = all_actions(scan_permissions(sagemaker_tags=tags, sagemaker_studio=studio))
            assert needed <= granted


def test_a_series_cloudwatch_could_not_read_in_full_gives_no_utilization() -> None:
    # GIVEN CloudWatch answers one variant's read as InternalError with a partial, low value
    # (a busy hour it could not read would otherwise make an endpoint look oversized)
    import boto3

    client = boto3.client("cloudwatch", region_name="us-east-1")
    stub = Stubber(client)
    stub.add_response(
        "get_metric_data",
        {
            "MetricDataResults": [
                {"Id": "e0", "StatusCode": "InternalError", "Values": [3.0], "Timestamps": [START]},
                {"Id": "e1", "StatusCode": "Complete", "Values": [4.0], "Timestamps": [START]},
            ]
        },
    )
    reader = EndpointGpuMetrics(lambda _region: client)
    # WHEN both variants are read
    with stub:
        found = reader.gpu_utilization("us-east-1", [variant("a"), variant("b")], START, END)
    # THEN only the complete series counts: the partial one is missing data, not idle
    assert found == {variant("b").key: Decimal("4")}
