"""One idle-notebook pass over N EC2 notebook candidates on moto: API calls and the
CloudWatch bill (``GetMetricData`` is $0.01 per 1,000 metrics read; a ``SEARCH`` is billed
for each series it returns).

moto's ``get_metric_data`` scans every stored datapoint for every query and period
(O(queries x datapoints)); for 1,000 instances that takes minutes, so this benchmark
swaps in an indexed version with the same answers (per-period Maximum of the series
whose namespace, name and dimensions match). moto evaluates no ``SEARCH``: the swapped-in
version also evaluates the subset the guard emits, as tests/support/fake_cloudwatch.py
does (exact terms, dynamic labels), and counts the series each call reads, which must
stay within GetMetricData's 500. Every call still goes through botocore to moto and is
counted at ``provide-client-params``. Both GPU discoveries are measured: ``search`` (the
default) and ``list`` (``ListMetrics`` first, for back-ends without SEARCH).
"""

from __future__ import annotations

import os
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
USD_PER_1000_METRICS = Decimal("0.01")
RUNS_PER_MONTH_AT_60_MIN = 730  # 8,760 h a year / 12
#: Series read by each GetMetricData call of the current measurement (what AWS bills).
_READ_PER_CALL: list[int] = []


def _fast_get_metric_data(
    self: Any,
    queries: list[dict[str, Any]],
    start_time: datetime,
    end_time: datetime,
    scan_by: str = "TimestampAscending",
) -> list[dict[str, Any]]:
    from tests.support.fake_cloudwatch import parse_search, render_label

    index: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[Any]] = defaultdict(list)
    by_dimension: dict[tuple[str, str], set[tuple[str, str, tuple[tuple[str, str], ...]]]] = (
        defaultdict(set)
    )
    for md in self.get_all_metrics():
        dims = tuple(sorted((d.name, d.value) for d in md.dimensions))
        index[(md.namespace, md.name, dims)].append(md)
        for pair in dims:
            by_dimension[pair].add((md.namespace, md.name, dims))

    def series(
        qid: str, label: str, key: tuple[str, str, tuple[tuple[str, str], ...]], period: timedelta
    ) -> dict[str, Any]:
        buckets: dict[datetime, float] = {}
        for md in index.get(key, []):
            if start_time <= md.timestamp < end_time:
                b = start_time + period * ((md.timestamp - start_time) // period)
                buckets[b] = max(buckets.get(b, float("-inf")), float(md.value))
        ts = sorted(buckets)
        return {
            "id": qid,
            "label": label,
            "values": [buckets[t] for t in ts],
            "timestamps": ts,
            "status_code": "Complete",
        }

    out = []
    read = 0
    for q in queries:
        if "Expression" in q:
            search = parse_search(q["Expression"])
            named = [t for t in search.terms if t[0] not in {"Namespace", "MetricName"}]
            for key in sorted(by_dimension.get(named[0], set()) if named else index):
                if search.matches(key[0], key[1], dict(key[2])):
                    label = render_label(q.get("Label", ""), key[0], key[1], dict(key[2]))
                    out.append(series(q["Id"], label, key, search.period))
                    read += 1
            continue
        stat = q["MetricStat"]
        m = stat["Metric"]
        dims = tuple(sorted((d["Name"], d["Value"]) for d in m.get("Dimensions", [])))
        period = timedelta(seconds=int(stat["Period"]))
        out.append(series(q["Id"], q["Id"], (m["Namespace"], m["MetricName"], dims), period))
        read += 1
    _READ_PER_CALL.append(read)
    return out


def measure(n: int = 1000, idle_share: float = 1.0, discovery: str = "search") -> dict[str, Any]:
    os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(k, "testing")
    import boto3
    import moto.cloudwatch.models as cw_models
    from moto import mock_aws
    from moto.cloudwatch.models import CloudWatchBackend

    from costguard.adapters.aws import ClientFactory
    from costguard.adapters.catalog import load_catalog
    from costguard.adapters.cloudwatch import CloudWatchMetrics
    from costguard.adapters.ec2 import InstanceTypeCache
    from costguard.adapters.notebooks import NotebookCandidateSource
    from costguard.adapters.sagemaker import PerResourceTags
    from costguard.domain.idle import GpuDiscovery
    from costguard.services.idle import IdlePolicy, IdleSettings, counts
    from tests.support.idle_fleet import launch, notebook_tags, publish_ec2

    original = CloudWatchBackend.get_metric_data
    same = cw_models.are_dimensions_same
    CloudWatchBackend.get_metric_data = _fast_get_metric_data  # type: ignore[method-assign]
    # moto 5.2.5 lists a metric with several dimensions once per datapoint (its
    # are_dimensions_same compares every dimension with every other); AWS lists it once.
    cw_models.are_dimensions_same = lambda a, b: (
        sorted((d.name, d.value) for d in a) == sorted((d.name, d.value) for d in b)
    )
    try:
        with mock_aws():
            session = boto3.Session(region_name="us-east-1")
            ids = launch(session, notebook_tags(), at=NOW - timedelta(hours=3), count=n)
            busy = set(ids[int(n * idle_share) :])
            for iid in ids:
                publish_ec2(
                    session, iid, NOW - timedelta(hours=1), NOW, gpu=(60.0 if iid in busy else 0.0,)
                )
            calls: Counter[str] = Counter()
            queries: list[int] = []

            def count(model: Any, params: dict[str, Any], **_: Any) -> None:
                calls[model.name] += 1
                if model.name == "GetMetricData":
                    queries.append(len(params["MetricDataQueries"]))

            session.events.register("provide-client-params", count)
            clients = ClientFactory(session, account="123456789012")
            policy = IdlePolicy(
                NotebookCandidateSource(
                    clients, PerResourceTags(clients), types=InstanceTypeCache(), sagemaker=False
                ),
                CloudWatchMetrics(clients.cloudwatch),
                load_catalog(),
                IdleSettings(
                    regions=("us-east-1",),
                    account="123456789012",
                    gpu_discovery=GpuDiscovery(discovery),
                ),
            )
            _READ_PER_CALL.clear()
            started = time.perf_counter()
            decisions = policy.decide(NOW)
            seconds = time.perf_counter() - started
    finally:
        CloudWatchBackend.get_metric_data = original  # type: ignore[method-assign]
        cw_models.are_dimensions_same = same
    metrics = sum(_READ_PER_CALL)
    assert max(_READ_PER_CALL, default=0) <= 500, _READ_PER_CALL
    per_month = Decimal(metrics) * RUNS_PER_MONTH_AT_60_MIN * USD_PER_1000_METRICS / 1000
    return {
        "candidates": n,
        "idle_share": idle_share,
        "gpu_discovery": discovery,
        "verdicts": counts(decisions),
        "api_calls": sum(calls.values()),
        "calls": dict(calls),
        "get_metric_data_queries_per_call": queries,
        "get_metric_data_metrics_per_call": list(_READ_PER_CALL),
        "metrics_read": metrics,
        "cloudwatch_usd_per_month_if_every_pass_were_like_this": float(
            per_month.quantize(Decimal("0.01"))
        ),
        "seconds_on_moto": round(seconds, 2),
    }


def steady_state_bill(n: int = 1000, gpus: int = 1) -> dict[str, Any]:
    """The month at the default schedule: every running notebook is read once an hour.

    A busy notebook costs its GPU series (its CPU and network are never read); an idle one
    is read in full when first seen (GPU + CPU + NetworkIn + NetworkOut), not at all while
    warned, and once more at its deadline (one read over the grace period and window),
    then stopped: about 2 x (gpus + 3) metrics per idle episode, whatever the grace.
    The same with either GPU discovery: a SEARCH is billed for each series it returns,
    which are the series ListMetrics would list and a MetricStat read (ListMetrics itself
    is an API request, $0.01 per 1,000 beyond the free million: nothing at 2 a pass).
    """
    busy_per_pass = n * gpus
    month_busy = busy_per_pass * RUNS_PER_MONTH_AT_60_MIN
    episodes = n  # one idle episode per notebook per day would be 30 n; a generous allowance
    month_idle = episodes * 30 * 2 * (gpus + 3)
    usd = lambda m: float((Decimal(m) * USD_PER_1000_METRICS / 1000).quantize(Decimal("0.01")))  # noqa: E731
    return {
        "candidates": n,
        "gpus_each": gpus,
        "passes_per_month": RUNS_PER_MONTH_AT_60_MIN,
        "busy_reads_metrics": month_busy,
        "busy_reads_usd": usd(month_busy),
        "idle_episodes_per_month": episodes * 30,
        "idle_reads_metrics": month_idle,
        "idle_reads_usd": usd(month_idle),
        "total_usd_per_month": usd(month_busy + month_idle),
        "per_resource_approach_usd_per_month": usd(n * 3 * 4 * 24 * 30),  # 3 metrics, every 15 min
    }


if __name__ == "__main__":
    import json

    print(
        json.dumps(
            {
                "all_idle": measure(1000, 1.0),
                "all_busy": measure(1000, 0.0),
                "all_idle_list": measure(1000, 1.0, "list"),
                "all_busy_list": measure(1000, 0.0, "list"),
                "bill": steady_state_bill(),
            },
            indent=2,
        )
    )
