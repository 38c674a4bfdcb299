"""Endpoint invocations on moto: hourly sums, 500 variants a call, no call per endpoint; and a
scan on moto that turns them into $ per 1,000 predictions."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from decimal import Decimal
from typing import Any

from botocore.stub import Stubber

from costguard.adapters.aws import ClientFactory
from costguard.adapters.cloudwatch import EndpointGpuMetrics
from costguard.domain.advice import EndpointVariant
from costguard.domain.predictions import prediction_window
from tests.support.clock import MIDDAY
from tests.support.endpoints import put_invocations

START, END = prediction_window(MIDDAY)


def variant(endpoint: str, name: str = "primary") -> EndpointVariant:
    return EndpointVariant(f"us-east-1/sagemaker-endpoint/{endpoint}/{name}", endpoint, name)


def recorder(session: Any) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "GetMetricData":
            requests.append(params)

    session.events.register("provide-client-params.monitoring.GetMetricData", record)
    return requests


def test_reads_each_variants_invocations_summed_by_the_hour_back_dated_on_moto(aws: Any) -> None:
    # GIVEN "chat" served 100 + 21 in the first minutes of 11:00 today and 5 yesterday at
    # 03:10; "quiet" served nothing; "old" only before the window
    cw = aws.client("cloudwatch", region_name="us-east-1")
    eleven = END - timedelta(hours=1)
    yesterday = START + timedelta(days=6, hours=3, minutes=10)
    put_invocations(
        cw,
        "chat",
        "primary",
        [(eleven + timedelta(minutes=1), 100.0), (eleven + timedelta(minutes=2), 21.0)],
    )
    put_invocations(cw, "chat", "primary", [(yesterday, 5.0)])
    put_invocations(cw, "old", "primary", [(START - timedelta(minutes=5), 9.0)])
    requests = recorder(aws)
    reader = EndpointGpuMetrics(ClientFactory(aws).cloudwatch)
    # WHEN the three are read over the window
    found = reader.invocations(
        "us-east-1", [variant("chat"), variant("quiet"), variant("old")], START, END
    )
    # THEN chat's hours hold their sums; the quiet and the old served none in the window
    # (an empty mapping: read in full, no traffic; never absent, which is unknown)
    assert found[variant("chat").key] == {
        eleven: Decimal(121),
        yesterday.replace(minute=0): Decimal(5),
    }
    assert found[variant("quiet").key] == {} and found[variant("old").key] == {}
    # AND one call over the whole window, asking for what SageMaker publishes, hourly sums
    (request,) = requests
    assert (request["StartTime"], request["EndTime"]) == (START, END)
    query = request["MetricDataQueries"][0]["MetricStat"]
    assert query["Metric"]["Namespace"] == "AWS/SageMaker"
    assert query["Metric"]["MetricName"] == "Invocations"
    assert query["Metric"]["Dimensions"] == [
        {"Name": "EndpointName", "Value": "chat"},
        {"Name": "VariantName", "Value": "primary"},
    ]
    assert (query["Stat"], query["Period"]) == ("Sum", 3600)


def test_600_endpoints_take_two_calls_under_every_limit(aws: Any) -> None:
    # GIVEN 600 variants (moto does not enforce GetMetricData's limits: we count ourselves)
    requests = recorder(aws)
    variants = [variant(f"ep-{n}") for n in range(600)]
    # WHEN read over the 188-hour window (7 days and 12 hours)
    found = EndpointGpuMetrics(ClientFactory(aws).cloudwatch).invocations(
        "us-east-1", [*variants, variants[0]], START, END
    )
    # THEN two calls: at most 500 queries and 500 x 189 datapoints (under 100,800) each
    assert [len(r["MetricDataQueries"]) for r in requests] == [500, 100]
    asked = Counter(
        q["MetricStat"]["Metric"]["Dimensions"][0]["Value"]
        for r in requests
        for q in r["MetricDataQueries"]
    )
    assert len(asked) == 600 and set(asked.values()) == {1}
    assert len(found) == 600


def test_a_series_cloudwatch_could_not_read_in_full_is_unknown_not_no_traffic() -> None:
    import boto3

    client = boto3.client("cloudwatch", region_name="us-east-1")
    stub = Stubber(client)
    stub.add_response(
        "get_metric_data",
        {
            "MetricDataResults": [
                {"Id": "i0", "StatusCode": "InternalError", "Values": [], "Timestamps": []},
                {"Id": "i1", "StatusCode": "Complete", "Values": [4.0], "Timestamps": [START]},
            ]
        },
    )
    reader = EndpointGpuMetrics(lambda _region: client)
    with stub:
        found = reader.invocations("us-east-1", [variant("a"), variant("b")], START, END)
    assert found == {variant("b").key: {START: Decimal(4)}}


def test_no_variant_no_call(aws: Any) -> None:
    requests = recorder(aws)
    reader = EndpointGpuMetrics(ClientFactory(aws).cloudwatch)
    assert reader.invocations("us-east-1", [], START, END) == {}
    assert requests == []


def test_a_scan_on_moto_gives_an_endpoints_cost_per_1000_predictions(aws: Any) -> None:
    """GIVEN an ml.g4dn.xlarge endpoint ($0.7364/h in the bundled catalog) three days old
    that served 7,364 invocations an hour (122.73 a minute, as minute datapoints)
    WHEN the scan runs on moto
    THEN its cost per 1,000 predictions is $0.7364 / 7,364 x 1,000 = $0.10, per day too,
    from one GetMetricData for its invocations."""
    from costguard.adapters.memory import InMemoryLedger
    from costguard.domain.predictions import CostStatus
    from costguard.env import Env
    from costguard.settings import Settings
    from costguard.wiring.scan import build_scan_service
    from costguard_demo.fleet import backdate_sagemaker

    sm = aws.client("sagemaker", region_name="us-east-1")
    sm.create_model(
        ModelName="chat",
        ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker",
        PrimaryContainer={"Image": "x:1"},
    )
    sm.create_endpoint_config(
        EndpointConfigName="chat-config",
        ProductionVariants=[
            {
                "VariantName": "primary",
                "ModelName": "chat",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.g4dn.xlarge",
            }
        ],
    )
    sm.create_endpoint(
        EndpointName="chat",
        EndpointConfigName="chat-config",
        Tags=[{"Key": "costguard:project", "Value": "serving"}],
    )
    backdate_sagemaker("us-east-1", {}, {"chat": MIDDAY - timedelta(days=3)})
    cw = aws.client("cloudwatch", region_name="us-east-1")
    # 7,364 an hour over the last 24 hours: 4 datapoints an hour of 1,841
    points = [(END - timedelta(hours=24) + timedelta(minutes=15 * n), 1841.0) for n in range(96)]
    put_invocations(cw, "chat", "primary", points)
    requests = recorder(aws)
    settings = Settings.from_env(
        {
            Env.REGIONS: "us-east-1",
            Env.SAGEMAKER_TAGS: "per-resource",
            Env.SAGEMAKER_STUDIO: "false",
        }
    )
    service = build_scan_service(settings, ClientFactory(aws), ledger=InMemoryLedger())
    report = service.run(MIDDAY)
    (cost,) = report.prediction_costs
    assert cost.status is CostStatus.PRICED
    assert (cost.invocations_per_hour, cost.usd_per_1000) == (Decimal(7364), Decimal("0.1"))
    # the 19th from noon and the 20th until noon: 12 h x $0.7364 over 12 x 7,364 each
    by_day = {d.day.day: d for d in cost.days}
    assert by_day[19].usd_per_1000 == Decimal("0.2")  # a whole day's cost, half a day's traffic
    assert by_day[20].usd_per_1000 == Decimal("0.1")
    assert by_day[17].status is CostStatus.NO_TRAFFIC
    # one invocations call (the GPU read asks for nothing: g4dn is not an A100-class type)
    invocations = [
        r
        for r in requests
        if r["MetricDataQueries"][0]["MetricStat"]["Metric"]["MetricName"] == "Invocations"
    ]
    assert len(invocations) == 1 and len(requests) == 1
