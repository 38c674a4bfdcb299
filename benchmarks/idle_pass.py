"""One idle-notebook pass over N EC2 notebook candidates on moto: API calls and the
CloudWatch bill (``GetMetricData`` is $0.01 per 1,000 metrics read; a ``SEARCH`` is billed
for each series it returns).

moto's ``get_metric_data`` scans every stored datapoint for every query and period
(O(queries x datapoints)); for 1,000 instances that takes minutes, so this benchmark
swaps in an indexed version with the same answers
(``tests.support.fake_cloudwatch.indexed_moto_cloudwatch``), which also evaluates the
``SEARCH`` subset the guard emits and counts the series each call reads, which must stay
within GetMetricData's 500. Every call still goes through botocore to moto and is
counted at ``provide-client-params``. Both GPU discoveries are measured: ``search`` (the
default) and ``list`` (``ListMetrics`` first, for back-ends without SEARCH).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
USD_PER_1000_METRICS = Decimal("0.01")
RUNS_PER_MONTH_AT_60_MIN = 730  # 8,760 h a year / 12


def measure(n: int = 1000, idle_share: float = 1.0, discovery: str = "search") -> dict[str, Any]:
    os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(k, "testing")
    import boto3
    from moto import mock_aws

    from costguard.adapters.aws import ClientFactory
    from costguard.adapters.catalog import load_catalog
    from costguard.adapters.cloudwatch import CloudWatchMetrics
    from costguard.adapters.ec2 import InstanceTypeCache
    from costguard.adapters.notebooks import NotebookCandidateSource
    from costguard.adapters.sagemaker import PerResourceTags
    from costguard.domain.idle import GpuDiscovery
    from costguard.services.idle import IdlePolicy, IdleSettings, counts
    from tests.support.fake_cloudwatch import indexed_moto_cloudwatch
    from tests.support.idle_fleet import launch, notebook_tags, publish_ec2

    with indexed_moto_cloudwatch() as read_per_call, mock_aws():
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
        read_per_call.clear()
        started = time.perf_counter()
        decisions = policy.decide(NOW)
        seconds = time.perf_counter() - started
    metrics = sum(read_per_call)
    assert max(read_per_call, default=0) <= 500, read_per_call
    per_month = Decimal(metrics) * RUNS_PER_MONTH_AT_60_MIN * USD_PER_1000_METRICS / 1000
    return {
        "candidates": n,
        "idle_share": idle_share,
        "gpu_discovery": discovery,
        "verdicts": counts(decisions),
        "api_calls": sum(calls.values()),
        "calls": dict(calls),
        "get_metric_data_queries_per_call": queries,
        "get_metric_data_metrics_per_call": list(read_per_call),
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
