"""The idle guard's default GPU discovery, SEARCH, on a fake CloudWatch (moto evaluates no
SEARCH): the same rules as ListMetrics, fewer calls.

EC2 is moto; CloudWatch is :class:`tests.support.fake_cloudwatch.FakeCloudWatch`, which
enforces GetMetricData's limits and evaluates the SEARCH subset the reader emits.
tests/functional/test_idle_search_stubbed.py checks the same requests against botocore's
service model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import pytest

from costguard.adapters.aws import ClientFactory
from costguard.adapters.catalog import load_catalog
from costguard.adapters.cloudwatch import MAX_METRICS_PER_CALL, CloudWatchMetrics
from costguard.adapters.ec2 import InstanceTypeCache
from costguard.adapters.notebooks import NotebookCandidateSource
from costguard.adapters.sagemaker import PerResourceTags
from costguard.domain.decisions import Action
from costguard.domain.idle import AgentGpu, GpuDiscovery, MetricQuery, SeriesSearch
from costguard.domain.tags import Tags
from costguard.services.idle import IdlePolicy, IdleSettings
from tests.support.clock import MIDDAY
from tests.support.fake_cloudwatch import FakeCloudWatch
from tests.support.idle_fleet import REGION, gpu_dims, launch, notebook_tags, points

ACCOUNT = "123456789012"
HOUR = timedelta(hours=1)


def publish(
    cw: FakeCloudWatch,
    iid: str,
    *,
    gpu: Sequence[float] = (0.0,),
    cpu: float = 1.0,
    net: float = 10_000.0,
    start: datetime = MIDDAY - 2 * HOUR,
    end: datetime = MIDDAY + 2 * HOUR,
    host: str | None = None,
) -> None:
    """What the agent and EC2 publish: one GPU series per value, CPU and network."""
    for index, value in enumerate(gpu):
        cw.put(
            AgentGpu.NAMESPACE,
            AgentGpu.UTILIZATION,
            gpu_dims(iid, index, host),
            points(start, end, value),
        )
    cw.put("AWS/EC2", "CPUUtilization", {"InstanceId": iid}, points(start, end, cpu))
    for metric in ("NetworkIn", "NetworkOut"):
        cw.put("AWS/EC2", metric, {"InstanceId": iid}, points(start, end, net))


class Ec2Calls:
    def __init__(self, session: Any) -> None:
        self.calls: Counter[str] = Counter()
        session.events.register("provide-client-params.ec2", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1


def policy(
    session: Any, cw: FakeCloudWatch, discovery: GpuDiscovery = GpuDiscovery.SEARCH
) -> IdlePolicy:
    clients = ClientFactory(session, account=ACCOUNT)
    return IdlePolicy(
        NotebookCandidateSource(
            clients, PerResourceTags(clients), types=InstanceTypeCache(), sagemaker=False
        ),
        CloudWatchMetrics(lambda region: cw),
        load_catalog(),
        IdleSettings(regions=(REGION,), account=ACCOUNT, gpu_discovery=discovery),
    )


def cw_calls(cw: FakeCloudWatch) -> Counter[str]:
    return Counter(name for name, _ in cw.calls)


# -- the reader ------------------------------------------------------------------------------


def search(iid: str, expected: int = 1, key: str | None = None) -> SeriesSearch:
    return SeriesSearch(
        key or iid,
        AgentGpu.NAMESPACE,
        AgentGpu.UTILIZATION,
        ((AgentGpu.INSTANCE, iid),),
        AgentGpu.INDEX,
        MIDDAY - HOUR,
        MIDDAY,
        timedelta(minutes=5),
        expected,
    )


def test_a_search_finds_every_gpu_of_its_instance_by_index_and_merges_a_restart() -> None:
    # GIVEN i-1 with GPU 0 under two hosts (restarted half-way) and GPU 1, and i-10 whose
    # id starts like i-1's
    cw = FakeCloudWatch()
    half = MIDDAY - timedelta(minutes=30)
    cw.put(
        AgentGpu.NAMESPACE,
        AgentGpu.UTILIZATION,
        gpu_dims("i-1", 0, "old"),
        points(MIDDAY - HOUR, half, 2.0),
    )
    cw.put(
        AgentGpu.NAMESPACE,
        AgentGpu.UTILIZATION,
        gpu_dims("i-1", 0, "new"),
        points(half, MIDDAY, 3.0),
    )
    cw.put(
        AgentGpu.NAMESPACE,
        AgentGpu.UTILIZATION,
        gpu_dims("i-1", 1),
        points(MIDDAY - HOUR, MIDDAY, 0.0),
    )
    cw.put(
        AgentGpu.NAMESPACE,
        AgentGpu.UTILIZATION,
        gpu_dims("i-10", 0),
        points(MIDDAY - HOUR, MIDDAY, 90.0),
    )
    # WHEN i-1's GPUs are searched
    found = CloudWatchMetrics(lambda region: cw).read(REGION, [], [search("i-1", 2)]).found
    # THEN one call found both GPUs, GPU 0 whole across its hosts, and nothing of i-10
    assert cw_calls(cw) == Counter({"GetMetricData": 1})
    assert sorted(found["i-1"]) == ["0", "1"]
    assert found["i-1"]["0"].values == (2.0,) * 6 + (3.0,) * 6
    assert found["i-1"]["1"].values == (0.0,) * 12


def test_searches_are_packed_by_the_series_they_expect_under_500_metrics_a_call() -> None:
    # GIVEN 300 instances of 2 GPUs and 100 CPU reads: 700 metrics in all
    cw = FakeCloudWatch()
    for n in range(300):
        for index in range(2):
            cw.put(
                AgentGpu.NAMESPACE,
                AgentGpu.UTILIZATION,
                gpu_dims(f"i-{n}", index),
                points(MIDDAY - HOUR, MIDDAY, 1.0),
            )
    cpu = [
        MetricQuery(
            f"cpu{n}",
            "AWS/EC2",
            "CPUUtilization",
            (("InstanceId", f"i-{n}"),),
            MIDDAY - HOUR,
            MIDDAY,
            timedelta(minutes=5),
        )
        for n in range(100)
    ]
    # WHEN read together
    got = CloudWatchMetrics(lambda region: cw).read(
        REGION, cpu, [search(f"i-{n}", 2) for n in range(300)]
    )
    # THEN two calls, none over 500 metrics (the fake would have said MaxMetricsExceeded),
    # and every instance has both GPUs
    calls = [p for name, p in cw.calls if name == "GetMetricData"]
    assert len(calls) == 2
    assert not cw.truncated
    sizes = [sum(1 if "MetricStat" in q else 2 for q in p["MetricDataQueries"]) for p in calls]
    assert max(sizes) <= MAX_METRICS_PER_CALL and sum(sizes) == 700
    assert all(sorted(f) == ["0", "1"] for f in got.found.values())
    assert len(got.found) == 300 and len(got.series) == 100


def test_a_call_that_finds_more_series_than_expected_is_read_again_in_halves() -> None:
    # GIVEN 500 one-GPU instances, 20 of which also left a stale series (an earlier
    # instance type in the agent's dimensions) that a search still finds: 520 series
    cw = FakeCloudWatch()
    for n in range(500):
        cw.put(
            AgentGpu.NAMESPACE,
            AgentGpu.UTILIZATION,
            gpu_dims(f"i-{n}", 0),
            points(MIDDAY - HOUR, MIDDAY, 1.0),
        )
        if n % 25 == 0:
            stale = {**gpu_dims(f"i-{n}", 0), "InstanceType": "g4dn.xlarge"}
            cw.put(
                AgentGpu.NAMESPACE,
                AgentGpu.UTILIZATION,
                stale,
                points(MIDDAY - timedelta(days=3), MIDDAY - timedelta(days=2), 0.0),
            )
    # WHEN their GPUs are searched, expecting one series each
    found = (
        CloudWatchMetrics(lambda region: cw)
        .read(REGION, [], [search(f"i-{n}") for n in range(500)])
        .found
    )
    # THEN the call CloudWatch truncated is read again in two halves, and every instance
    # is judged on its whole answer (the stale series merged into its index, adding nothing)
    assert cw_calls(cw)["GetMetricData"] == 3 and len(cw.truncated) == 1
    assert all(f["0"].values == (1.0,) * 12 for f in found.values())


def test_a_value_that_cannot_be_searched_finds_nothing_and_costs_no_call() -> None:
    cw = FakeCloudWatch()
    found = CloudWatchMetrics(lambda region: cw).read(REGION, [], [search("i-'1")]).found
    assert found == {"i-'1": {}}
    assert not cw.calls


def test_a_result_cloudwatch_could_not_read_in_full_is_missing_data() -> None:
    # GIVEN a CPU series CloudWatch answers InternalError, with 11 of its 12 values
    cw = FakeCloudWatch()
    cw.put("AWS/EC2", "CPUUtilization", {"InstanceId": "i-1"}, points(MIDDAY - HOUR, MIDDAY, 1.0))
    cw.fail("AWS/EC2", "CPUUtilization", {"InstanceId": "i-1"}, missing=1)
    q = MetricQuery(
        "cpu",
        "AWS/EC2",
        "CPUUtilization",
        (("InstanceId", "i-1"),),
        MIDDAY - HOUR,
        MIDDAY,
        timedelta(minutes=5),
    )
    # WHEN read THEN nothing of it is kept: a partial series could hide the busy minute
    assert CloudWatchMetrics(lambda region: cw).maxima(REGION, [q])["cpu"].values == ()


# -- the guard -------------------------------------------------------------------------------


@pytest.fixture
def fleet(aws: Any) -> tuple[FakeCloudWatch, dict[str, str]]:
    """Notebooks launched 3 hours ago, each a case of the rules."""
    cw = FakeCloudWatch()
    at = MIDDAY - timedelta(hours=3)

    def one(name: str, itype: str = "g5.xlarge") -> str:
        (iid,) = launch(aws, notebook_tags(Name=name), itype, at=at)
        return iid

    ids = {
        "idle": one("idle"),
        "busy": one("busy"),
        "idle4": one("idle4", "g5.12xlarge"),
        "one-busy-of-4": one("one-busy-of-4", "g5.12xlarge"),
        "three-of-4": one("three-of-4", "g5.12xlarge"),
        "silent": one("silent"),
        "gpu-only": one("gpu-only"),
        "cpu": one("cpu", "m5.large"),
        "trainium": one("trainium", "trn1.2xlarge"),
    }
    publish(cw, ids["idle"])
    publish(cw, ids["busy"], gpu=(64.0,))
    publish(cw, ids["idle4"], gpu=(0.0, 1.0, 2.0, 0.0))
    publish(cw, ids["one-busy-of-4"], gpu=(0.0, 0.0, 97.0, 0.0))
    publish(cw, ids["three-of-4"], gpu=(0.0, 0.0, 0.0))
    # the GPU reports, EC2's metrics do not
    cw.put(
        AgentGpu.NAMESPACE,
        AgentGpu.UTILIZATION,
        gpu_dims(ids["gpu-only"], 0),
        points(MIDDAY - 2 * HOUR, MIDDAY, 0.0),
    )
    publish(cw, ids["cpu"], gpu=())
    publish(cw, ids["trainium"], gpu=())
    return cw, ids


EXPECTED = {
    "idle": "idle",
    "busy": "busy",
    "idle4": "idle",
    "one-busy-of-4": "busy",
    "three-of-4": "unknown",
    "silent": "unknown",
    "gpu-only": "unknown",
    "cpu": "idle",
    "trainium": "unknown",
}


def test_search_judges_every_rule_as_listing_does(
    aws: Any, fleet: tuple[FakeCloudWatch, dict[str, str]]
) -> None:
    cw, ids = fleet
    name = {iid: n for n, iid in ids.items()}
    verdicts = {}
    for discovery in GpuDiscovery:
        decisions = policy(aws, cw, discovery).decide(MIDDAY)
        verdicts[discovery] = {name[d.target.id]: d.evidence["verdict"] for d in decisions}
    # THEN both ways find the same verdicts, and they are the rules': every GPU of four
    # must be idle and report, missing data is unknown, a Trainium is never judged idle
    assert verdicts[GpuDiscovery.SEARCH] == verdicts[GpuDiscovery.LIST] == EXPECTED


def test_search_reports_the_missing_gpu_and_reads_no_cpu_where_a_gpu_is_busy(
    aws: Any, fleet: tuple[FakeCloudWatch, dict[str, str]]
) -> None:
    cw, ids = fleet
    guard = policy(aws, cw)
    ec2 = Ec2Calls(aws)
    by_id = {d.target.id: d for d in guard.decide(MIDDAY)}
    # THEN the instance with 3 of its 4 GPUs reporting is unknown, with a finding
    three = by_id[ids["three-of-4"]]
    assert three.action is Action.NONE and "3 of its 4 GPUs" in three.reason
    assert any(
        f.code.value == "idle-metrics-missing" and ids["three-of-4"] in f.resource
        for f in guard.findings
    )
    assert by_id[ids["idle4"]].evidence["gpu3_max"] == "0.0%"
    # AND no ListMetrics; EC2 asked only about the type the accelerator table lacks
    assert "ListMetrics" not in cw_calls(cw)
    assert ec2.calls == Counter({"DescribeInstances": 1, "DescribeInstanceTypes": 1})
    described = [p for n, p in cw.calls if n == "GetMetricData"]
    # AND CPU and network are read only where every GPU looked idle (and for CPU types)
    host_reads = {
        q["MetricStat"]["Metric"]["Dimensions"][0]["Value"]
        for p in described
        for q in p["MetricDataQueries"]
        if "MetricStat" in q
    }
    assert host_reads == {ids[n] for n in ("idle", "idle4", "gpu-only", "cpu")}


def test_an_exempt_or_young_notebook_is_never_searched(aws: Any) -> None:
    cw = FakeCloudWatch()
    (exempt,) = launch(
        aws, notebook_tags(**{Tags.EXEMPT: "2027-01-01"}), at=MIDDAY - timedelta(hours=3)
    )
    (young,) = launch(aws, notebook_tags(), at=MIDDAY - timedelta(minutes=20))
    for iid in (exempt, young):
        publish(cw, iid)
    decisions = policy(aws, cw).decide(MIDDAY)
    assert {d.action for d in decisions} == {Action.NONE}
    assert not cw.calls


class FakeEc2:
    """DescribeInstances over a fleet held in memory (moto takes most of a minute to
    describe 1,000 tagged instances); any other call is recorded, and answers nothing."""

    def __init__(self, instances: list[dict[str, Any]]) -> None:
        self.instances = instances
        self.calls: Counter[str] = Counter()

    def ec2(self, region: str) -> FakeEc2:
        return self

    def get_paginator(self, operation: str) -> Any:
        fake = self

        class Pages:
            def paginate(self, **params: Any) -> list[dict[str, Any]]:
                if operation != "describe_instances":
                    fake.calls[operation] += 1
                    return [{}]
                fake.calls["describe_instances"] += 1
                wanted = {f["Name"]: set(f["Values"]) for f in params["Filters"]}
                role = wanted.get(f"tag:{Tags.ROLE}")
                found = [
                    i
                    for i in fake.instances
                    if i["State"]["Name"] in wanted["instance-state-name"]
                    and (
                        role is None
                        or any(t["Key"] == Tags.ROLE and t["Value"] in role for t in i["Tags"])
                    )
                ]
                assert len(found) <= params["PaginationConfig"]["PageSize"]
                return [{"Reservations": [{"Instances": found}]}]

        return Pages()


def test_an_all_idle_pass_over_1000_notebooks_takes_at_most_10_calls() -> None:
    # GIVEN 1,000 idle one-GPU notebooks (the target: at most 10 calls in all)
    cw = FakeCloudWatch()
    ec2 = FakeEc2(
        [
            {
                "InstanceId": f"i-{n:017x}",
                "InstanceType": "g5.xlarge",
                "State": {"Name": "running"},
                "LaunchTime": MIDDAY - timedelta(hours=3),
                "Tags": [{"Key": k, "Value": v} for k, v in notebook_tags().items()],
            }
            for n in range(1000)
        ]
    )
    for i in ec2.instances:
        publish(cw, i["InstanceId"])
    guard = IdlePolicy(
        NotebookCandidateSource(
            cast("ClientFactory", ec2),
            cast("Any", None),
            types=InstanceTypeCache(),
            sagemaker=False,
        ),
        CloudWatchMetrics(lambda region: cw),
        load_catalog(),
        IdleSettings(regions=(REGION,), account=ACCOUNT),
    )
    # WHEN one pass judges them, with the default settings
    decisions = guard.decide(MIDDAY)
    # THEN all are idle, after 1 EC2 call and 8 GetMetricData calls (1,000 GPU series,
    # then 3,000 CPU and network metrics, at 500 a call): 9 in all
    assert [d.evidence["verdict"] for d in decisions] == ["idle"] * 1000
    assert ec2.calls == Counter({"describe_instances": 1})
    assert cw_calls(cw) == Counter({"GetMetricData": 8})
    assert sum(ec2.calls.values()) + len(cw.calls) <= 10


# -- GPU counts without DescribeInstanceTypes -----------------------------------------------


def test_the_accelerator_table_agrees_with_describe_instance_types(aws: Any) -> None:
    # moto's instance types are AWS's own DescribeInstanceTypes answers: for every type
    # both know, the idle guard's count and maker of GPUs must be what EC2 says
    from costguard.adapters.notebooks import _listed
    from costguard.domain.accelerators import BY_INSTANCE

    ec2 = aws.client("ec2", region_name=REGION)
    described = InstanceTypeCache().resolve(ec2, REGION, sorted(BY_INSTANCE))
    compared = 0
    for itype, info in described.items():
        if not hasattr(info, "count"):
            continue  # retired: EC2 no longer describes it
        listed = _listed(itype)
        assert listed is not None
        assert (listed.kind, listed.manufacturer, listed.count) == (
            info.kind,  # type: ignore[union-attr]
            info.manufacturer,  # type: ignore[union-attr]
            info.count,  # type: ignore[union-attr]
        ), itype
        compared += 1
    assert compared >= 40


def test_only_types_the_table_lacks_are_asked_of_ec2_in_one_batched_call(aws: Any) -> None:
    at = MIDDAY - timedelta(hours=3)
    for itype in ("g5.xlarge", "p4d.24xlarge", "m5.large", "c5.xlarge", "trn1.2xlarge"):
        launch(aws, notebook_tags(), itype, at=at)
    clients = ClientFactory(aws, account=ACCOUNT)
    asked: list[list[str]] = []
    aws.events.register(
        "provide-client-params.ec2.DescribeInstanceTypes",
        lambda params, **_: asked.append(sorted(params["InstanceTypes"])),
    )
    source = NotebookCandidateSource(
        clients, PerResourceTags(clients), types=InstanceTypeCache(), sagemaker=False
    )
    found = {n.instance_type: n for n in source.ec2_notebooks(REGION)}
    assert asked == [["c5.xlarge", "m5.large"]]
    assert found["p4d.24xlarge"].gpu_count == 8 and found["g5.xlarge"].gpu_count == 1
    assert found["m5.large"].gpu_count == 0
    assert found["trn1.2xlarge"].gpu_count == 0
    assert found["trn1.2xlarge"].accelerator == "AWS Trainium"


def test_a_late_deadline_run_searches_the_whole_time_since_the_warning(aws: Any) -> None:
    # GIVEN two notebooks warned 6 hours ago (deadline 5 hours ago, a late run): one used
    # its GPU once since, 3 hours ago; the other idle all along
    cw = FakeCloudWatch()
    warned = {Tags.ACTION_AFTER: (MIDDAY - timedelta(hours=5)).strftime("%Y-%m-%dT%H:%M:%SZ")}
    at = MIDDAY - timedelta(hours=10)
    (used,) = launch(aws, notebook_tags(**warned), at=at)
    (idle,) = launch(aws, notebook_tags(**warned), at=at)
    for iid in (used, idle):
        publish(cw, iid, start=MIDDAY - timedelta(hours=9), end=MIDDAY + HOUR)
    cw.put(
        AgentGpu.NAMESPACE,
        AgentGpu.UTILIZATION,
        gpu_dims(used, 0),
        [(MIDDAY - timedelta(hours=3), 80.0)],
    )
    # WHEN the guard runs
    by_id = {d.target.id: d for d in policy(aws, cw).decide(MIDDAY)}
    # THEN both were searched over the 7 hours from the window before the warning, in one
    # call: the activity since the warning keeps one running, the other is stopped
    assert by_id[used].evidence["verdict"] == "busy" and "80.0%" in by_id[used].reason
    assert by_id[idle].action is Action.STOP_INSTANCE
    assert by_id[idle].evidence["window_minutes"] == str(7 * 60)
    first = next(p for n, p in cw.calls if n == "GetMetricData")
    assert first["StartTime"] == MIDDAY - timedelta(hours=7)
    assert [q["Id"][0] for q in first["MetricDataQueries"]] == ["s", "s"]
