"""The SEARCH reads against botocore's model of CloudWatch (Stubber): every request the
reader makes is valid for the real service, and it reads real-shaped answers (results
that share an Id, told apart by their label; pages; MaxMetricsExceeded; failed results).

moto evaluates no SEARCH, so the shapes are checked here and the behaviour on
tests/support/fake_cloudwatch.py (tests/functional/test_idle_search.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from costguard.adapters.cloudwatch import CloudWatchMetrics
from costguard.domain.idle import AgentGpu, MetricQuery, SeriesSearch
from tests.support.clock import MIDDAY

REGION = "us-east-1"
START = MIDDAY - timedelta(hours=1)
STEP = timedelta(minutes=5)
TIMES = [START + STEP * n for n in range(12)]
GPU = 'SEARCH(\'Namespace="CWAgent" MetricName="nvidia_smi_utilization_gpu" InstanceId="{}"\', \'Maximum\', 300)'
LABEL = "${PROP('Dim.index')}"


@pytest.fixture
def stubbed() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client(
        "cloudwatch",
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def search(iid: str, expected: int = 1) -> SeriesSearch:
    return SeriesSearch(
        iid,
        AgentGpu.NAMESPACE,
        AgentGpu.UTILIZATION,
        ((AgentGpu.INSTANCE, iid),),
        AgentGpu.INDEX,
        START,
        MIDDAY,
        STEP,
        expected,
    )


def gpu_query(qid: str, iid: str) -> dict[str, Any]:
    return {"Id": qid, "Expression": GPU.format(iid), "Label": LABEL, "ReturnData": True}


def request(*queries: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    return {
        "MetricDataQueries": list(queries),
        "StartTime": START,
        "EndTime": MIDDAY,
        "ScanBy": "TimestampAscending",
        **({"NextToken": token} if token else {}),
    }


def result(
    rid: str,
    label: str,
    values: list[float],
    times: list[datetime] = TIMES,
    status: str = "Complete",
) -> dict[str, Any]:
    return {
        "Id": rid,
        "Label": label,
        "Timestamps": times[: len(values)],
        "Values": values,
        "StatusCode": status,
    }


def test_searches_and_stats_share_a_valid_request_and_are_read_by_id_and_label(
    stubbed: tuple[Any, Stubber],
) -> None:
    client, stubber = stubbed
    cpu = MetricQuery(
        "cpu", "AWS/EC2", "CPUUtilization", (("InstanceId", "i-0abc"),), START, MIDDAY, STEP
    )
    # GIVEN CloudWatch's answer in two pages: GPU 1 cut by the page boundary
    stubber.add_response(
        "get_metric_data",
        {
            "MetricDataResults": [
                result("q0", "CPUUtilization", [1.0] * 12),
                result("s1", "0", [0.0] * 12),
                result("s1", "1", [2.0] * 5, status="PartialData"),
            ],
            "NextToken": "page-2",
            "Messages": [],
        },
        request(
            {
                "Id": "q0",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/EC2",
                        "MetricName": "CPUUtilization",
                        "Dimensions": [{"Name": "InstanceId", "Value": "i-0abc"}],
                    },
                    "Period": 300,
                    "Stat": "Maximum",
                },
                "ReturnData": True,
            },
            gpu_query("s1", "i-0abc"),
        ),
    )
    stubber.add_response(
        "get_metric_data",
        {"MetricDataResults": [result("s1", "1", [3.0] * 7, TIMES[5:])]},
        request(
            {
                "Id": "q0",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/EC2",
                        "MetricName": "CPUUtilization",
                        "Dimensions": [{"Name": "InstanceId", "Value": "i-0abc"}],
                    },
                    "Period": 300,
                    "Stat": "Maximum",
                },
                "ReturnData": True,
            },
            gpu_query("s1", "i-0abc"),
            token="page-2",
        ),
    )
    # WHEN one read asks for the CPU and the GPUs
    got = CloudWatchMetrics(lambda region: client).read(REGION, [cpu], [search("i-0abc", 2)])
    # THEN each GPU is whole across the pages, named by its index
    assert got.series["cpu"].values == (1.0,) * 12
    assert sorted(got.found["i-0abc"]) == ["0", "1"]
    assert got.found["i-0abc"]["1"].values == (2.0,) * 5 + (3.0,) * 7
    assert got.found["i-0abc"]["1"].timestamps == tuple(TIMES)


def test_a_truncated_answer_is_read_again_in_halves(stubbed: tuple[Any, Stubber]) -> None:
    client, stubber = stubbed
    too_many = {"Code": "MaxMetricsExceeded", "Value": "Maximum number of allowed metrics exceeded"}
    stubber.add_response(
        "get_metric_data",
        {"MetricDataResults": [result("s0", "0", [0.0] * 12)], "Messages": [too_many]},
        request(gpu_query("s0", "i-a"), gpu_query("s1", "i-b")),
    )
    stubber.add_response(
        "get_metric_data",
        {"MetricDataResults": [result("s0", "0", [0.0] * 12)]},
        request(gpu_query("s0", "i-a")),
    )
    stubber.add_response(
        "get_metric_data",
        {"MetricDataResults": [result("s1", "0", [1.0] * 12), result("s1", "1", [4.0] * 12)]},
        request(gpu_query("s1", "i-b")),
    )
    got = CloudWatchMetrics(lambda region: client).read(REGION, [], [search("i-a"), search("i-b")])
    assert sorted(got.found["i-a"]) == ["0"]
    assert sorted(got.found["i-b"]) == ["0", "1"]


def test_a_search_alone_over_the_limit_finds_nothing(stubbed: tuple[Any, Stubber]) -> None:
    client, stubber = stubbed
    too_many = {"Code": "MaxMetricsExceeded", "Value": "Maximum number of allowed metrics exceeded"}
    stubber.add_response(
        "get_metric_data",
        {"MetricDataResults": [result("s0", "0", [0.0] * 12)], "Messages": [too_many]},
        request(gpu_query("s0", "i-a")),
    )
    got = CloudWatchMetrics(lambda region: client).read(REGION, [], [search("i-a")])
    assert got.found == {"i-a": {}}


@pytest.mark.parametrize("label", ["", LABEL])
def test_an_empty_unlabelled_answer_is_no_gpu(stubbed: tuple[Any, Stubber], label: str) -> None:
    # GIVEN a search that found nothing, answered with one empty result whose dynamic
    # label had nothing to render
    client, stubber = stubbed
    stubber.add_response(
        "get_metric_data",
        {"MetricDataResults": [result("s0", label, [])]},
        request(gpu_query("s0", "i-a")),
    )
    got = CloudWatchMetrics(lambda region: client).read(REGION, [], [search("i-a")])
    assert got.found == {"i-a": {}}


def test_a_series_without_the_index_dimension_is_one_gpu_named_unlabelled(
    stubbed: tuple[Any, Stubber],
) -> None:
    # GIVEN the agent's per-instance aggregate (no index), published next to GPU 0
    client, stubber = stubbed
    stubber.add_response(
        "get_metric_data",
        {"MetricDataResults": [result("s0", "0", [0.0] * 12), result("s0", "", [0.0] * 12)]},
        request(gpu_query("s0", "i-a")),
    )
    got = CloudWatchMetrics(lambda region: client).read(REGION, [], [search("i-a")])
    assert sorted(got.found["i-a"]) == ["0", "?"]  # as ListMetrics names it


@pytest.mark.parametrize("status", ["InternalError", "Forbidden"])
def test_a_failed_result_is_missing_data(stubbed: tuple[Any, Stubber], status: str) -> None:
    client, stubber = stubbed
    stubber.add_response(
        "get_metric_data",
        {
            "MetricDataResults": [
                result("s0", "0", [0.0] * 11, status=status),
                result("s0", "1", [0.0] * 12),
            ]
        },
        request(gpu_query("s0", "i-a")),
    )
    got = CloudWatchMetrics(lambda region: client).read(REGION, [], [search("i-a", 2)])
    # THEN none of the instance's GPUs count: it is unknown, never judged on a partial answer
    assert got.found == {"i-a": {}}


@pytest.mark.parametrize(
    ("value", "term"),
    [
        ('i-"q"', r'InstanceId="i-\"q\""'),
        ("a\\b(c)", r'InstanceId="a\\b\(c\)"'),
        ("ünï cødé", 'InstanceId="ünï cødé"'),
    ],
)
def test_a_value_is_an_exact_match_with_its_special_characters_escaped(
    value: str, term: str
) -> None:
    from costguard.adapters.cloudwatch import search_expression

    expression = search_expression(search(value))
    assert expression is not None and f" {term}'," in expression


@pytest.mark.parametrize("value", ["i-'1", "i-1\n", "i-\x00", "x" * 1000])
def test_a_value_that_cannot_be_searched_is_refused(value: str) -> None:
    from costguard.adapters.cloudwatch import search_expression

    assert search_expression(search(value)) is None


@pytest.mark.parametrize("value", ['i-"q"', "a\\b(c)", "ünï cødé", "i-0123456789abcdef0"])
def test_the_fake_cloudwatch_reads_each_emitted_search_back_to_its_value(value: str) -> None:
    # The fake that stands in for SEARCH parses by the documented escapes: what the reader
    # writes, it reads back exactly (else the SEARCH tests would test nothing)
    from costguard.adapters.cloudwatch import search_expression
    from tests.support.fake_cloudwatch import parse_search

    expression = search_expression(search(value))
    assert expression is not None
    parsed = parse_search(expression)
    assert parsed.terms == (
        ("Namespace", AgentGpu.NAMESPACE),
        ("MetricName", AgentGpu.UTILIZATION),
        (AgentGpu.INSTANCE, value),
    )
    assert parsed.period == STEP
