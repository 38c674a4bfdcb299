"""CloudWatch metrics for the idle-notebook guard and the scan's endpoint advice: batched
readers, never a call per resource.

- ``GetMetricData`` takes at most 500 queries and returns at most 100,800 datapoints per
  call; :class:`CloudWatchMetrics` packs queries into calls under both limits and follows
  ``NextToken`` (botocore's paginator). It is billed per metric requested ($0.01 per
  1,000), not per datapoint or call, so a query asks for a whole window at once.
- The CloudWatch agent's NVIDIA metrics (``CWAgent`` ``nvidia_smi_utilization_gpu``) carry
  dimensions we cannot predict (``host``, ``index``, ``name``, and whatever
  ``append_dimensions`` adds), and a MetricStat needs the exact set. ``SEARCH()`` would
  find them, but is billed per metric it returns as well and cannot be tested here (moto
  does not evaluate it). So ``ListMetrics`` is read once per region, paginated (500
  metrics a page, for the whole fleet, not per instance), filtered to the candidates on
  our side, and each series is read by MetricStat. Series of one GPU (its ``index``)
  under different dimension sets (a new ``host`` after a restart) are merged.
- SageMaker endpoints publish ``GPUUtilization`` under ``/aws/sagemaker/Endpoints`` with
  exactly ``EndpointName`` and ``VariantName``, so :class:`EndpointGpuMetrics` needs no
  ``ListMetrics``: one MetricStat a variant, the window's ``Average`` in one period.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from costguard.adapters.aws import reading
from costguard.domain.advice import EndpointVariant
from costguard.domain.idle import GpuSeries, MetricQuery, Series
from costguard.iam import ENDPOINT_METRICS, Permission

#: GetMetricData limits per call.
MAX_QUERIES_PER_CALL = 500
MAX_DATAPOINTS_PER_CALL = 100_800

GPU_NAMESPACE = "CWAgent"
GPU_METRIC = "nvidia_smi_utilization_gpu"
INSTANCE_DIMENSION = "InstanceId"
GPU_INDEX_DIMENSION = "index"
ENDPOINT_NAMESPACE = "/aws/sagemaker/Endpoints"
ENDPOINT_GPU_METRIC = "GPUUtilization"
#: Only series with data in the last 3 hours (longer windows than that fall back to
#: everything ListMetrics keeps, two weeks).
RECENTLY_ACTIVE_HOURS = 3

PERMISSIONS = (
    Permission(
        ("cloudwatch:GetMetricData", "cloudwatch:ListMetrics"),
        "read notebook utilization (CPU, network, the agent's GPU metrics, CostGuard's "
        "heartbeat) in batches; CloudWatch metric reads have no resource-level permissions",
    ),
)

Dimensions = tuple[tuple[str, str], ...]


def _batches(queries: Sequence[MetricQuery]) -> Iterator[list[MetricQuery]]:
    """Calls under both limits: 500 queries, and 100,800 datapoints, per call."""
    batch: list[MetricQuery] = []
    points = 0
    for q in queries:
        expected = q.periods + 1  # an unaligned edge can add a period
        if batch and (
            len(batch) == MAX_QUERIES_PER_CALL or points + expected > MAX_DATAPOINTS_PER_CALL
        ):
            yield batch
            batch, points = [], 0
        batch.append(q)
        points += expected
    if batch:
        yield batch


class CloudWatchMetrics:
    """Reads metric maxima for many resources in as few calls as the limits allow."""

    permissions = PERMISSIONS

    def __init__(self, client_for: Any) -> None:
        #: ``region -> CloudWatch client`` (``ClientFactory.cloudwatch``).
        self._client_for = client_for

    def maxima(self, region: str, queries: Sequence[MetricQuery]) -> dict[str, Series]:
        """Each query's series (its period maxima, oldest first), by ``query.key``.

        A query with no datapoints is an empty series, never absent.
        """
        client = self._client_for(region)
        out: dict[str, Series] = {q.key: Series() for q in queries}
        # Queries of one time range share calls: GetMetricData takes one range per call.
        by_range: dict[tuple[datetime, datetime], list[MetricQuery]] = defaultdict(list)
        for q in queries:
            by_range[(q.start, q.end)].append(q)
        for (start, end), group in by_range.items():
            for batch in _batches(group):
                ids = {f"q{i}": q for i, q in enumerate(batch)}
                points: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
                with reading("cloudwatch", region, "GetMetricData"):
                    pages = client.get_paginator("get_metric_data").paginate(
                        MetricDataQueries=[
                            {
                                "Id": qid,
                                "MetricStat": {
                                    "Metric": {
                                        "Namespace": q.namespace,
                                        "MetricName": q.metric,
                                        "Dimensions": [
                                            {"Name": n, "Value": v} for n, v in q.dimensions
                                        ],
                                    },
                                    "Period": int(q.period.total_seconds()),
                                    "Stat": "Maximum",
                                },
                                "ReturnData": True,
                            }
                            for qid, q in ids.items()
                        ],
                        StartTime=start,
                        EndTime=end,
                        ScanBy="TimestampAscending",
                    )
                    for page in pages:
                        for result in page.get("MetricDataResults", []):
                            points[str(result["Id"])].extend(
                                zip(
                                    result.get("Timestamps", []),
                                    result.get("Values", []),
                                    strict=False,
                                )
                            )
                for qid, q in ids.items():
                    merged = sorted(points.get(qid, []))
                    out[q.key] = Series(
                        tuple(float(v) for _, v in merged), tuple(t for t, _ in merged)
                    )
        return out

    def gpu_series(
        self, region: str, instance_ids: Collection[str]
    ) -> Mapping[str, tuple[GpuSeries, ...]]:
        """The GPU series of each candidate instance (absent: the agent reports none)."""
        wanted = set(instance_ids)
        if not wanted:
            return {}
        found: dict[str, dict[str, list[Dimensions]]] = defaultdict(lambda: defaultdict(list))
        client = self._client_for(region)
        with reading("cloudwatch", region, "ListMetrics"):
            pages = client.get_paginator("list_metrics").paginate(
                Namespace=GPU_NAMESPACE,
                MetricName=GPU_METRIC,
                RecentlyActive=f"PT{RECENTLY_ACTIVE_HOURS}H",
            )
            for page in pages:
                for metric in page.get("Metrics", []):
                    # In ListMetrics' order: AWS ignores it, moto 5.2.5 does not (its
                    # Dimension.__lt__ is broken, so a reordered set may not match).
                    dims: Dimensions = tuple(
                        (str(d["Name"]), str(d["Value"])) for d in metric.get("Dimensions", [])
                    )
                    named = dict(dims)
                    instance = named.get(INSTANCE_DIMENSION)
                    if instance not in wanted:
                        continue
                    index = named.get(GPU_INDEX_DIMENSION, "?")
                    found[instance][index].append(dims)
        return {
            instance: tuple(
                GpuSeries(index, tuple(dict.fromkeys(sets))) for index, sets in sorted(gpus.items())
            )
            for instance, gpus in found.items()
        }


class EndpointGpuMetrics:
    """SageMaker endpoint variants' ``GPUUtilization``, 500 variants a call.

    CloudWatch reports it summed over an instance's GPUs (0-100 x GPUs); the ``Average``
    statistic is the mean over the variant's instances and the window. Normalising per GPU
    is the domain's (:func:`costguard.domain.advice.per_gpu_utilization`).
    """

    permissions = ENDPOINT_METRICS

    def __init__(self, client_for: Any) -> None:
        #: ``region -> CloudWatch client`` (``ClientFactory.cloudwatch``).
        self._client_for = client_for

    def gpu_utilization(
        self, region: str, variants: Sequence[EndpointVariant], start: datetime, end: datetime
    ) -> dict[str, Decimal]:
        period = int((end - start).total_seconds())
        if period <= 0 or period % 60:
            raise ValueError(f"the window must be whole minutes, got {start} to {end}")
        unique = list({v.key: v for v in variants}.values())
        if not unique:
            return {}
        client = self._client_for(region)
        found: dict[str, Decimal] = {}
        for first in range(0, len(unique), MAX_QUERIES_PER_CALL):
            batch = {f"e{i}": v for i, v in enumerate(unique[first : first + MAX_QUERIES_PER_CALL])}
            values: dict[str, list[float]] = defaultdict(list)
            with reading("cloudwatch", region, "GetMetricData"):
                pages = client.get_paginator("get_metric_data").paginate(
                    MetricDataQueries=[
                        {
                            "Id": qid,
                            "MetricStat": {
                                "Metric": {
                                    "Namespace": ENDPOINT_NAMESPACE,
                                    "MetricName": ENDPOINT_GPU_METRIC,
                                    "Dimensions": [
                                        {"Name": "EndpointName", "Value": v.endpoint},
                                        {"Name": "VariantName", "Value": v.variant},
                                    ],
                                },
                                "Period": period,
                                "Stat": "Average",
                            },
                            "ReturnData": True,
                        }
                        for qid, v in batch.items()
                    ],
                    StartTime=start,
                    EndTime=end,
                    ScanBy="TimestampAscending",
                )
                for page in pages:
                    for result in page.get("MetricDataResults", []):
                        values[str(result["Id"])].extend(result.get("Values", []))
            for qid, v in batch.items():
                average = _mean(values.get(qid, []))
                if average is not None:
                    found[v.key] = average
        return found


def _mean(values: Sequence[float]) -> Decimal | None:
    """The mean of a window's datapoints (one, for an aligned window); None without any."""
    numbers = [n for n in (Decimal(str(v)) for v in values) if n.is_finite()]
    if not numbers:
        return None
    return sum(numbers, Decimal(0)) / len(numbers)
