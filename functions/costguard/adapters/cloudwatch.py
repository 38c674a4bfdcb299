"""CloudWatch metrics for the idle-notebook guard and the scan's endpoint advice: batched
readers, never a call per resource.

- ``GetMetricData`` takes at most 500 queries, reads at most 500 different metrics and
  returns at most 100,800 datapoints per call; :class:`CloudWatchMetrics` packs queries
  into calls under all three and follows ``NextToken`` (botocore's paginator). It is
  billed per metric read ($0.01 per 1,000), not per datapoint or call, so a query asks
  for a whole window at once.
- The CloudWatch agent's NVIDIA metrics (``CWAgent`` ``nvidia_smi_utilization_gpu``) carry
  dimensions we cannot predict (``host``, ``index``, ``name``, and whatever
  ``append_dimensions`` adds), and a MetricStat needs the exact set. Two ways to find them
  (``GpuDiscovery``):

  - **search** (the default): one ``SEARCH`` expression per instance, matching its
    ``InstanceId`` whatever the other dimensions, inside the same ``GetMetricData`` calls
    as the other reads. Each series found is billed as a metric read, exactly as the
    MetricStat that would read it, so nothing is paid for finding them; calls are packed by
    the series each search is *expected* to find (the instance's GPUs) under the 500-metric
    limit. Each series comes back labelled with its ``index`` (a dynamic label), and series
    of one index under several dimension sets (a new ``host``) are merged. A call that
    still exceeds the limit (CloudWatch answers ``MaxMetricsExceeded`` and reads what it
    can) is read again in halves, so nothing is judged on a truncated answer.
  - **list**: ``ListMetrics`` once per region, paginated (500 metrics a page, for the
    whole fleet, not per instance), filtered to the candidates on our side, then each
    series read by MetricStat. For back-ends that do not evaluate ``SEARCH`` (moto).

- A result CloudWatch marks ``InternalError`` or ``Forbidden`` is dropped: a series it could
  not read in full is missing data, and missing data is never idle.
- SageMaker endpoints publish ``GPUUtilization`` under ``/aws/sagemaker/Endpoints`` with
  exactly ``EndpointName`` and ``VariantName``, so :class:`EndpointGpuMetrics` needs no
  ``ListMetrics``: one MetricStat a variant, the window's ``Average`` in one period.
- They publish ``Invocations`` under ``AWS/SageMaker`` with the same two dimensions (a
  datapoint only for a minute that served some): the cost per prediction reads its hourly
  ``Sum`` over 7 days and today so far (at most 191 datapoints a variant), 500 variants a
  call. It shares no call with ``GPUUtilization``, whose window is another time range
  (GetMetricData takes one range per call).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from costguard.adapters.aws import reading
from costguard.domain.advice import EndpointVariant
from costguard.domain.idle import (
    UNLABELLED,
    AgentGpu,
    GpuSeries,
    MetricQuery,
    Readings,
    Series,
    SeriesSearch,
    merge_max,
)
from costguard.iam import ENDPOINT_METRICS, Permission
from costguard.ports import PartialReadError, SourceError

#: GetMetricData limits per call.
MAX_QUERIES_PER_CALL = 500
MAX_METRICS_PER_CALL = 500
MAX_DATAPOINTS_PER_CALL = 100_800
#: A SEARCH expression's query string may be at most this long.
MAX_SEARCH_CHARS = 1024
#: The top-level message of a call that matched more metrics than it may read.
TOO_MANY_METRICS = "MaxMetricsExceeded"
#: Result statuses whose values are not the whole series.
FAILED = frozenset({"InternalError", "Forbidden"})

GPU_NAMESPACE = AgentGpu.NAMESPACE
GPU_METRIC = AgentGpu.UTILIZATION
INSTANCE_DIMENSION = AgentGpu.INSTANCE
GPU_INDEX_DIMENSION = AgentGpu.INDEX
ENDPOINT_NAMESPACE = "/aws/sagemaker/Endpoints"
ENDPOINT_GPU_METRIC = "GPUUtilization"
INVOCATIONS_NAMESPACE = "AWS/SageMaker"
INVOCATIONS_METRIC = "Invocations"
#: The invocations are summed by the hour.
INVOCATIONS_PERIOD_S = 3600
#: Only series with data in the last 3 hours (longer windows than that fall back to
#: everything ListMetrics keeps, two weeks).
RECENTLY_ACTIVE_HOURS = 3

PERMISSIONS = (
    Permission(
        ("cloudwatch:GetMetricData", "cloudwatch:ListMetrics"),
        "read notebook utilization (CPU, network, the agent's GPU metrics found by SEARCH or "
        "ListMetrics, CostGuard's heartbeat) in batches; CloudWatch metric reads have no "
        "resource-level permissions",
    ),
)

Dimensions = tuple[tuple[str, str], ...]
_NAME = re.compile(r"[A-Za-z0-9_]+")
#: An exact-match search term escapes these with a backslash.
_ESCAPED = re.compile(r'(["\\()])')


def _exact(value: str) -> str | None:
    """``"value"`` as an exact-match search term; None if it cannot be written in one
    (a single quote would end the SEARCH string, control characters are no value's)."""
    if "'" in value or any(ord(c) < 32 or ord(c) == 127 for c in value):
        return None
    return '"' + _ESCAPED.sub(r"\\\1", value) + '"'


def search_expression(s: SeriesSearch) -> str | None:
    """``SEARCH('Namespace="…" MetricName="…" InstanceId="…"', 'Maximum', period)``.

    No metric schema (``{namespace, dims…}``): a schema matches only series with exactly
    those dimensions, and the agent's depend on its ``append_dimensions``. Every term is an
    exact match, so ``i-1`` does not find ``i-10``. None when a term cannot be written.
    """
    terms = [("Namespace", s.namespace), ("MetricName", s.metric), *s.match]
    parts = []
    for name, value in terms:
        exact = _exact(value)
        if exact is None or not _NAME.fullmatch(name):
            return None
        parts.append(f"{name}={exact}")
    query = " ".join(parts)
    if len(query) > MAX_SEARCH_CHARS:
        return None
    return f"SEARCH('{query}', 'Maximum', {int(s.period.total_seconds())})"


def search_label(s: SeriesSearch) -> str:
    """A dynamic label: each series found is labelled with its ``label_dimension`` value."""
    return f"${{PROP('Dim.{s.label_dimension}')}}"


def _name_of(label: str) -> str:
    """A searched series' name from its label (``?`` if the dimension was not rendered)."""
    label = label.strip()
    return UNLABELLED if not label or "${" in label else label


@dataclass(frozen=True, slots=True)
class _Read:
    """One MetricDataQuery: a MetricStat, or a SEARCH that may find several series."""

    id: str
    item: MetricQuery | SeriesSearch
    expression: str | None = None

    @property
    def metrics(self) -> int:
        return max(1, self.item.expected) if isinstance(self.item, SeriesSearch) else 1

    @property
    def datapoints(self) -> int:
        return self.metrics * (self.item.periods + 1)  # an unaligned edge can add a period

    def request(self) -> dict[str, Any]:
        q = self.item
        if isinstance(q, SeriesSearch):
            return {
                "Id": self.id,
                "Expression": self.expression,
                "Label": search_label(q),
                "ReturnData": True,
            }
        return {
            "Id": self.id,
            "MetricStat": {
                "Metric": {
                    "Namespace": q.namespace,
                    "MetricName": q.metric,
                    "Dimensions": [{"Name": n, "Value": v} for n, v in q.dimensions],
                },
                "Period": int(q.period.total_seconds()),
                "Stat": "Maximum",
            },
            "ReturnData": True,
        }


def _batches(reads: Sequence[_Read]) -> Iterator[list[_Read]]:
    """Calls under every limit: 500 queries, 500 metrics and 100,800 datapoints per call."""
    batch: list[_Read] = []
    metrics = points = 0
    for r in reads:
        if batch and (
            len(batch) == MAX_QUERIES_PER_CALL
            or metrics + r.metrics > MAX_METRICS_PER_CALL
            or points + r.datapoints > MAX_DATAPOINTS_PER_CALL
        ):
            yield batch
            batch, metrics, points = [], 0, 0
        batch.append(r)
        metrics += r.metrics
        points += r.datapoints
    if batch:
        yield batch


class CloudWatchMetrics:
    """Reads metric maxima for many resources in as few calls as the limits allow."""

    permissions = PERMISSIONS

    def __init__(self, client_for: Any) -> None:
        #: ``region -> CloudWatch client`` (``ClientFactory.cloudwatch``).
        self._client_for = client_for

    def maxima(self, region: str, queries: Sequence[MetricQuery]) -> dict[str, Series]:
        """Each query's series (its period maxima, oldest first), by ``query.key``."""
        return dict(self.read(region, queries).series)

    def read(
        self,
        region: str,
        queries: Sequence[MetricQuery],
        searches: Sequence[SeriesSearch] = (),
    ) -> Readings:
        """Queries and searches in shared calls; a query with no datapoints is an empty
        series, a search that found nothing an empty mapping, never absent."""
        series: dict[str, Series] = {q.key: Series() for q in queries}
        found: dict[str, dict[str, Series]] = {s.key: {} for s in searches}
        # Reads of one time range share calls: GetMetricData takes one range per call.
        by_range: dict[tuple[datetime, datetime], list[MetricQuery | SeriesSearch]] = defaultdict(
            list
        )
        items: list[MetricQuery | SeriesSearch] = [*queries, *searches]
        for item in items:
            by_range[(item.start, item.end)].append(item)
        if not by_range:
            return Readings(series, found)
        client = self._client_for(region)
        for (start, end), group in by_range.items():
            reads: list[_Read] = []
            for n, item in enumerate(group):
                if isinstance(item, SeriesSearch):
                    expression = search_expression(item)
                    if expression is None:
                        continue  # cannot be searched: nothing found, so unknown
                    reads.append(_Read(f"s{n}", item, expression))
                else:
                    reads.append(_Read(f"q{n}", item))
            for batch in _batches(reads):
                self._call(client, region, start, end, batch, series, found)
        return Readings(series, found)

    def _call(
        self,
        client: Any,
        region: str,
        start: datetime,
        end: datetime,
        batch: list[_Read],
        series: dict[str, Series],
        found: dict[str, dict[str, Series]],
    ) -> None:
        by_id = {r.id: r for r in batch}
        points: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
        named: dict[tuple[str, str], list[tuple[datetime, float]]] = defaultdict(list)
        failed: set[str] = set()
        truncated = False
        with reading("cloudwatch", region, "GetMetricData"):
            pages = client.get_paginator("get_metric_data").paginate(
                MetricDataQueries=[r.request() for r in batch],
                StartTime=start,
                EndTime=end,
                ScanBy="TimestampAscending",
            )
            for page in pages:
                truncated |= any(
                    m.get("Code") == TOO_MANY_METRICS for m in page.get("Messages", [])
                )
                for result in page.get("MetricDataResults", []):
                    rid = str(result.get("Id", ""))
                    if result.get("StatusCode") in FAILED:
                        failed.add(rid)
                    got = list(
                        zip(result.get("Timestamps", []), result.get("Values", []), strict=False)
                    )
                    if rid in by_id and isinstance(by_id[rid].item, SeriesSearch):
                        named[(rid, _name_of(str(result.get("Label", ""))))].extend(got)
                    else:
                        points[rid].extend(got)
        if truncated and len(batch) > 1:
            # More series than expected (stale dimension sets stay searchable for two
            # weeks): read each half again rather than judge on what fitted.
            middle = len(batch) // 2
            self._call(client, region, start, end, batch[:middle], series, found)
            self._call(client, region, start, end, batch[middle:], series, found)
            return
        for rid, pts in points.items():
            r = by_id.get(rid)
            if r is not None and rid not in failed:
                series[r.item.key] = merge_max(pts)
        if truncated:
            return  # one search found over 500 series: not the whole answer, so none
        for (rid, name), pts in named.items():
            if rid in failed or (not pts and name == UNLABELLED):
                continue  # a placeholder for "nothing found" is not a series
            found[by_id[rid].item.key][name] = merge_max(pts)

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
                    index = named.get(GPU_INDEX_DIMENSION, UNLABELLED)
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
            series, failed = _variant_series(
                client,
                region,
                batch,
                (ENDPOINT_NAMESPACE, ENDPOINT_GPU_METRIC, period, "Average"),
                start,
                end,
            )
            values = {qid: [value for _, value in points] for qid, points in series.items()}
            for qid, v in batch.items():
                if qid in failed:
                    continue  # a partial series is missing data: no advice on it
                average = _mean(values.get(qid, []))
                if average is not None:
                    found[v.key] = average
        return found

    def invocations(
        self, region: str, variants: Sequence[EndpointVariant], start: datetime, end: datetime
    ) -> dict[str, dict[datetime, Decimal]]:
        """Each variant's ``Invocations`` summed by the hour over ``[start, end)`` (hour
        start -> invocations); a variant that served none has an empty mapping, and one
        whose series CloudWatch could not read in full is absent (unknown, not none).

        Calls are packed under 500 queries and 100,800 datapoints each: at 191 hours, 500
        variants a call, so 600 variants are 2 calls a region, whatever the endpoints.
        """
        if (end - start).total_seconds() % INVOCATIONS_PERIOD_S or end <= start:
            raise ValueError(f"the window must be whole hours, got {start} to {end}")
        unique = list({v.key: v for v in variants}.values())
        if not unique:
            return {}
        hours = int((end - start).total_seconds()) // INVOCATIONS_PERIOD_S
        per_call = max(1, min(MAX_QUERIES_PER_CALL, MAX_DATAPOINTS_PER_CALL // (hours + 1)))
        client = self._client_for(region)
        found: dict[str, dict[datetime, Decimal]] = {}
        error: SourceError | None = None
        for first in range(0, len(unique), per_call):
            batch = {f"i{i}": v for i, v in enumerate(unique[first : first + per_call])}
            try:
                series, failed = _variant_series(
                    client,
                    region,
                    batch,
                    (INVOCATIONS_NAMESPACE, INVOCATIONS_METRIC, INVOCATIONS_PERIOD_S, "Sum"),
                    start,
                    end,
                )
            except SourceError as exc:
                # This call's variants are unknown; the other calls' answers still count.
                error = error or exc
                continue
            sums: dict[str, dict[datetime, Decimal]] = defaultdict(dict)
            for qid, points in series.items():
                for at, value in points:
                    number = Decimal(str(value))
                    if not number.is_finite() or number < 0:
                        continue
                    hour = at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
                    sums[qid][hour] = sums[qid].get(hour, Decimal(0)) + number
            for qid, v in batch.items():
                if qid not in failed:
                    found[v.key] = dict(sums.get(qid, {}))
        if error is not None:
            if not found:
                raise error  # nothing read: the error as it was (throttled, denied...)
            partial = PartialReadError(
                error.service, error.region, error.operation, error.code, error.detail
            )
            partial.found = found
            raise partial from error
        return found


def _variant_series(
    client: Any,
    region: str,
    batch: Mapping[str, EndpointVariant],
    metric: tuple[str, str, int, str],
    start: datetime,
    end: datetime,
) -> tuple[dict[str, list[tuple[datetime, float]]], set[str]]:
    """One batched GetMetricData (its pages) of a metric of endpoint variants, by query
    id: each query's (timestamp, value) points, and the ids CloudWatch could not read in
    full. ``metric``: namespace, metric name, period in seconds and statistic."""
    namespace, name, period, stat = metric
    points: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    failed: set[str] = set()
    with reading("cloudwatch", region, "GetMetricData"):
        pages = client.get_paginator("get_metric_data").paginate(
            MetricDataQueries=[
                {
                    "Id": qid,
                    "MetricStat": {
                        "Metric": {
                            "Namespace": namespace,
                            "MetricName": name,
                            "Dimensions": [
                                {"Name": "EndpointName", "Value": v.endpoint},
                                {"Name": "VariantName", "Value": v.variant},
                            ],
                        },
                        "Period": period,
                        "Stat": stat,
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
                qid = str(result.get("Id", ""))
                if result.get("StatusCode") in FAILED:
                    failed.add(qid)
                points[qid].extend(
                    zip(result.get("Timestamps", []), result.get("Values", []), strict=False)
                )
    return points, failed


def _mean(values: Sequence[float]) -> Decimal | None:
    """The mean of a window's datapoints (one, for an aligned window); None without any."""
    numbers = [n for n in (Decimal(str(v)) for v in values) if n.is_finite()]
    if not numbers:
        return None
    return sum(numbers, Decimal(0)) / len(numbers)
