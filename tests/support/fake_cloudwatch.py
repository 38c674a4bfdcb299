"""An in-memory CloudWatch client for the idle guard's reads: GetMetricData (MetricStat and
the subset of ``SEARCH`` CostGuard emits) and ListMetrics, over stored datapoints.

moto evaluates no ``SEARCH`` (it answers an empty series), so the guard's default GPU
discovery is tested here. The fake is honest where the guard's correctness depends on it:

- **Limits, as AWS states them:** at most 500 queries a call (more is a
  ``ValidationError``); at most 500 different metrics read a call (more: the first 500 are
  read and the call carries the top-level ``MaxMetricsExceeded`` message, as AWS "executes
  as much of the operation as possible"); a ``SEARCH`` query string of at most 1,024
  characters; ``Id`` unique and starting with a lowercase letter.
- **SEARCH subset:** ``SEARCH('Name="value" …', 'Maximum', period)``: every term an exact
  match (``Namespace``, ``MetricName`` or a dimension name), all of them required; ``\\``
  escapes ``" \\ ( )``. Anything else is a ``ValidationError``: the guard must stay inside
  what is tested. It finds series with a datapoint in the two weeks before ``EndTime``, as
  CloudWatch's search does, and labels each by the dynamic label ``${PROP('Dim.name')}``
  (a missing dimension renders empty).
- **Pages:** ListMetrics lists 500 metrics a page; GetMetricData at most ``page_datapoints`` values a page (100,800 by default, GetMetricData's);
  a series cut by a page boundary is ``PartialData`` and continues on the next page.
- **Faults:** :meth:`fail` marks a series ``InternalError`` with its last values missing.

Every call is recorded in :attr:`calls` (operation name, parameters).
"""

from __future__ import annotations

import contextlib
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

MAX_QUERIES = 500
MAX_METRICS = 500
MAX_DATAPOINTS = 100_800
MAX_SEARCH_CHARS = 1024
LIST_PAGE = 500
SEARCH_FINDS = timedelta(days=14)

_SEARCH = re.compile(r"SEARCH\('(?P<query>.*)', '(?P<stat>[A-Za-z0-9.]+)', (?P<period>\d+)\)", re.S)
_TERM = re.compile(r'\s*(?P<name>[A-Za-z0-9_]+)="(?P<value>(?:[^"\\]|\\["\\()])*)"')
_UNESCAPE = re.compile(r'\\(["\\()])')
_PROP = re.compile(r"\$\{PROP\('(?P<prop>[^']+)'\)\}")
_ID = re.compile(r"[a-z][A-Za-z0-9_]*")

Identity = tuple[str, str, frozenset[tuple[str, str]]]


def _invalid(message: str) -> ClientError:
    return ClientError({"Error": {"Code": "ValidationError", "Message": message}}, "GetMetricData")


@dataclass(frozen=True)
class Search:
    """A parsed ``SEARCH`` of the subset: exact terms, all required."""

    terms: tuple[tuple[str, str], ...]
    period: timedelta

    def matches(self, namespace: str, name: str, dimensions: Mapping[str, str]) -> bool:
        return all(
            namespace == value
            if term == "Namespace"
            else name == value
            if term == "MetricName"
            else dimensions.get(term) == value
            for term, value in self.terms
        )


def parse_search(expression: str) -> Search:
    """The SEARCH subset CostGuard emits, or a ``ValidationError``."""
    match = _SEARCH.fullmatch(expression)
    if match is None:
        raise _invalid(f"not the SEARCH subset the fake evaluates: {expression!r}")
    if match["stat"] != "Maximum":
        raise _invalid("the fake answers Maximum only")
    text = match["query"]
    if len(text) > MAX_SEARCH_CHARS:
        raise _invalid("the search expression query is over 1024 characters")
    terms: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text.rstrip()):
        term = _TERM.match(text, pos)
        if term is None:
            raise _invalid(f"not the SEARCH subset the fake evaluates: {text!r}")
        terms.append((term["name"], _UNESCAPE.sub(r"\1", term["value"])))
        pos = term.end()
    return Search(tuple(terms), timedelta(seconds=int(match["period"])))


def render_label(template: str, namespace: str, name: str, dimensions: Mapping[str, str]) -> str:
    """A dynamic label (``${PROP('Dim.index')}``) for one series; a missing dimension is empty."""

    def prop(m: re.Match[str]) -> str:
        wanted = m["prop"]
        if wanted.startswith("Dim."):
            return dimensions.get(wanted.removeprefix("Dim."), "")
        return {"MetricName": name, "Namespace": namespace}.get(wanted, "")

    return _PROP.sub(prop, template) if template else name


@dataclass
class _Stored:
    namespace: str
    name: str
    dimensions: tuple[tuple[str, str], ...]
    points: dict[datetime, float] = field(default_factory=dict)
    failed: int = 0  # when > 0: InternalError, and this many of its last values missing


class _Paginator:
    def __init__(self, fake: FakeCloudWatch, operation: str) -> None:
        self._fake = fake
        self._operation = operation

    def paginate(self, **params: Any) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            page = getattr(self._fake, self._operation)(
                **params, **({"NextToken": token} if token else {})
            )
            yield page
            token = page.get("NextToken")
            if not token:
                return


class FakeCloudWatch:
    def __init__(self, page_datapoints: int = MAX_DATAPOINTS) -> None:
        self.page_datapoints = page_datapoints
        self._metrics: dict[Identity, _Stored] = {}
        #: (dimension name, value) -> the metrics that carry it: a search looks there.
        self._by_dimension: dict[tuple[str, str], list[_Stored]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        #: Calls answered MaxMetricsExceeded (their parameters).
        self.truncated: list[dict[str, Any]] = []

    # -- storing -----------------------------------------------------------------------

    def put(
        self,
        namespace: str,
        name: str,
        dimensions: Mapping[str, str],
        points: Iterable[tuple[datetime, float]],
    ) -> None:
        """Datapoints of one metric (dimensions as published, in their order)."""
        key = (namespace, name, frozenset(dimensions.items()))
        stored = self._metrics.get(key)
        if stored is None:
            stored = self._metrics[key] = _Stored(namespace, name, tuple(dimensions.items()))
            for pair in dimensions.items():
                self._by_dimension.setdefault(pair, []).append(stored)
        for t, v in points:
            stored.points[t] = max(v, stored.points.get(t, v))

    def fail(self, namespace: str, name: str, dimensions: Mapping[str, str], missing: int) -> None:
        """Answer this metric ``InternalError`` with its last ``missing`` values left out."""
        self._metrics[(namespace, name, frozenset(dimensions.items()))].failed = missing

    # -- the client --------------------------------------------------------------------

    def get_paginator(self, operation: str) -> _Paginator:
        assert operation in {"get_metric_data", "list_metrics"}, operation
        return _Paginator(self, operation)

    def list_metrics(self, **params: Any) -> dict[str, Any]:
        """500 metrics a page, as AWS lists them (``RecentlyActive`` is not evaluated: the
        fake has no clock; every stored metric is recent)."""
        self.calls.append(("ListMetrics", params))
        assert set(params) <= {"Namespace", "MetricName", "RecentlyActive", "NextToken"}
        listed = [
            {
                "Namespace": m.namespace,
                "MetricName": m.name,
                "Dimensions": [{"Name": n, "Value": v} for n, v in m.dimensions],
            }
            for m in self._metrics.values()
            if m.namespace == params.get("Namespace", m.namespace)
            and m.name == params.get("MetricName", m.name)
        ]
        start = int(params.get("NextToken", 0))
        page: dict[str, Any] = {"Metrics": listed[start : start + LIST_PAGE]}
        if start + LIST_PAGE < len(listed):
            page["NextToken"] = str(start + LIST_PAGE)
        return page

    def get_metric_data(self, **params: Any) -> dict[str, Any]:
        self.calls.append(("GetMetricData", params))
        queries = params["MetricDataQueries"]
        start, end = params["StartTime"], params["EndTime"]
        if not 1 <= len(queries) <= MAX_QUERIES:
            raise _invalid(f"{len(queries)} queries: at most {MAX_QUERIES} per call")
        ids = [q["Id"] for q in queries]
        if len(set(ids)) != len(ids) or not all(_ID.fullmatch(i) for i in ids):
            raise _invalid("Ids must be unique and start with a lowercase letter")
        if params.get("ScanBy", "TimestampDescending") != "TimestampAscending":
            raise _invalid("the fake answers TimestampAscending only")
        # Each query's series: (id, label, stored, period), in query order.
        planned: list[tuple[str, str, _Stored, timedelta]] = []
        for q in queries:
            planned.extend(self._plan(q, end))
        messages: list[dict[str, str]] = []
        distinct: set[int] = set()
        kept: list[tuple[str, str, _Stored, timedelta]] = []
        for entry in planned:
            if id(entry[2]) not in distinct:
                if len(distinct) == MAX_METRICS:
                    if not messages:
                        messages.append(
                            {
                                "Code": "MaxMetricsExceeded",
                                "Value": "Maximum number of allowed metrics exceeded",
                            }
                        )
                    continue
                distinct.add(id(entry[2]))
            kept.append(entry)
        if messages:
            self.truncated.append(params)
        results = [
            self._result(rid, label, m, period, start, end) for rid, label, m, period in kept
        ]
        return self._page(results, messages, params.get("NextToken"))

    # -- evaluation --------------------------------------------------------------------

    def _plan(
        self, query: Mapping[str, Any], end: datetime
    ) -> list[tuple[str, str, _Stored, timedelta]]:
        rid = query["Id"]
        if "MetricStat" in query:
            stat = query["MetricStat"]
            if stat["Stat"] != "Maximum":
                raise _invalid("the fake answers Maximum only")
            m = stat["Metric"]
            key = (
                m["Namespace"],
                m["MetricName"],
                frozenset((d["Name"], d["Value"]) for d in m.get("Dimensions", [])),
            )
            stored = self._metrics.get(key) or _Stored(m["Namespace"], m["MetricName"], ())
            label = query.get("Label") or m["MetricName"]
            return [(rid, label, stored, timedelta(seconds=int(stat["Period"])))]
        search = parse_search(query.get("Expression", ""))
        found = []
        dimension_terms = [t for t in search.terms if t[0] not in {"Namespace", "MetricName"}]
        candidates = (
            self._by_dimension.get(dimension_terms[0], [])
            if dimension_terms
            else list(self._metrics.values())
        )
        for stored in sorted(candidates, key=lambda s: (s.name, s.dimensions)):
            dims = dict(stored.dimensions)
            if search.matches(stored.namespace, stored.name, dims) and any(
                end - SEARCH_FINDS <= t <= end for t in stored.points
            ):
                label = render_label(query.get("Label", ""), stored.namespace, stored.name, dims)
                found.append((rid, label, stored, search.period))
        return found

    @staticmethod
    def _result(
        rid: str, label: str, m: _Stored, period: timedelta, start: datetime, end: datetime
    ) -> dict[str, Any]:
        buckets: dict[datetime, float] = {}
        for t, v in m.points.items():
            if start <= t < end:
                b = start + period * ((t - start) // period)
                buckets[b] = max(v, buckets.get(b, v))
        times = sorted(buckets)
        if m.failed:
            times = times[: max(0, len(times) - m.failed)]
        return {
            "Id": rid,
            "Label": label,
            "Timestamps": times,
            "Values": [buckets[t] for t in times],
            "StatusCode": "InternalError" if m.failed else "Complete",
        }

    def _page(
        self, results: list[dict[str, Any]], messages: list[dict[str, str]], token: str | None
    ) -> dict[str, Any]:
        pages: list[list[dict[str, Any]]] = [[]]
        room = self.page_datapoints
        for r in results:
            values = list(zip(r["Timestamps"], r["Values"], strict=True))
            if not values:
                pages[-1].append(r)
            while values:
                if room == 0:
                    pages.append([])
                    room = self.page_datapoints
                chunk, values = values[:room], values[room:]
                pages[-1].append(
                    {
                        **r,
                        "Timestamps": [t for t, _ in chunk],
                        "Values": [v for _, v in chunk],
                        "StatusCode": "PartialData" if values else r["StatusCode"],
                    }
                )
                room -= len(chunk)
        n = int(token) if token else 0
        page: dict[str, Any] = {"MetricDataResults": pages[n], "Messages": messages}
        if n + 1 < len(pages):
            page["NextToken"] = str(n + 1)
        return page


def _indexed_get_metric_data(
    self: Any,
    queries: list[dict[str, Any]],
    start_time: datetime,
    end_time: datetime,
    scan_by: str = "TimestampAscending",
) -> list[dict[str, Any]]:
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


#: Series read by each GetMetricData call while :func:`indexed_moto_cloudwatch` is on.
_READ_PER_CALL: list[int] = []


@contextlib.contextmanager
def indexed_moto_cloudwatch() -> Iterator[list[int]]:
    """moto's CloudWatch with an indexed ``get_metric_data``: the same answers (the
    per-period Maximum of the series whose namespace, name and dimensions match), the
    ``SEARCH`` subset above evaluated (moto answers none), in time linear in the data.

    moto's own scans every datapoint for every query and period, which takes minutes for
    a fleet of hundreds. Yields the list of series each call read (what AWS bills; at
    most 500 a call). moto 5.2.5 also lists a metric with several dimensions once per
    datapoint (its ``are_dimensions_same`` compares every dimension with every other);
    AWS lists it once, and so does moto while this is on.
    """
    import moto.cloudwatch.models as cw_models
    from moto.cloudwatch.models import CloudWatchBackend

    original = CloudWatchBackend.get_metric_data
    same = cw_models.are_dimensions_same
    CloudWatchBackend.get_metric_data = _indexed_get_metric_data  # type: ignore[method-assign,assignment]
    cw_models.are_dimensions_same = lambda a, b: (
        sorted((d.name, d.value) for d in a) == sorted((d.name, d.value) for d in b)
    )
    _READ_PER_CALL.clear()
    try:
        yield _READ_PER_CALL
    finally:
        CloudWatchBackend.get_metric_data = original  # type: ignore[method-assign]
        cw_models.are_dimensions_same = same
