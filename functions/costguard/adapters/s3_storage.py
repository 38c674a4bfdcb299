"""S3 buckets tagged with a project, and their size per storage class, from CloudWatch's
daily ``BucketSizeBytes`` (namespace ``AWS/S3``, dimensions ``BucketName`` and
``StorageType``).

One read of a region is, whatever the number of buckets:

- ``ListBuckets`` filtered to the region (``BucketRegion``), pages of 10,000;
- ``tag:GetResources`` for S3, pages of 100 (the tags of every tagged bucket; a bucket
  whose tags are not in the region's answer is not in scope);
- ``ListMetrics`` of ``BucketSizeBytes``, pages of 500 (which storage types each bucket
  has: a query per type the bucket does not use would be a metric paid for nothing);
- ``GetMetricData``, one call per 500 series, the last three days at a one-day period;
  the newest datapoint of each series is the bucket's size in that class.

S3 publishes the metric once a day, so the scan reads it once a day (the caller caches it:
``services.bucket_storage``). Request, retrieval and transfer charges are not in it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from costguard.adapters.aws import chunks, reading, tags_of
from costguard.adapters.cloudwatch import FAILED
from costguard.iam import S3_STORAGE
from costguard.ports import BucketReading, SourceError

if TYPE_CHECKING:
    from costguard.adapters.aws import ClientFactory

NAMESPACE = "AWS/S3"
METRIC = "BucketSizeBytes"
#: GetMetricData takes at most 500 queries a call.
QUERIES_PER_CALL = 500
#: The metric is daily and may be a day late: three days always hold the newest point.
WINDOW = timedelta(days=3)
DAY_S = 86_400

PERMISSIONS = S3_STORAGE


class CloudWatchBucketSizes:
    """:class:`costguard.ports.BucketSizes` on S3, the tagging API and CloudWatch."""

    def __init__(self, clients: ClientFactory) -> None:
        self._clients = clients

    def read(self, region: str, project_keys: Sequence[str], now: datetime) -> list[BucketReading]:
        buckets = self._buckets(region)
        tags = self._tags(region, set(buckets))
        wanted = {b for b, t in tags.items() if any(k in t for k in project_keys)}
        if not wanted:
            return []
        series = self._series(region, wanted)
        sizes = self._sizes(region, series, now)
        return [
            BucketReading(
                name=b,
                tags=tags[b],
                created_at=buckets[b],
                stored_bytes=tuple(sorted(sizes.get(b, {}).items())),
            )
            for b in sorted(wanted)
        ]

    def _buckets(self, region: str) -> dict[str, datetime | None]:
        s3 = self._clients("s3", region)
        found: dict[str, datetime | None] = {}
        with reading("s3", region, "ListBuckets"):
            for page in s3.get_paginator("list_buckets").paginate(
                BucketRegion=region, PaginationConfig={"PageSize": 10_000}
            ):
                for b in page.get("Buckets", []):
                    found[str(b["Name"])] = b.get("CreationDate")
        return found

    def _tags(self, region: str, names: set[str]) -> dict[str, dict[str, str]]:
        client = self._clients.tagging(region)
        found: dict[str, dict[str, str]] = {}
        with reading("tag", region, "GetResources"):
            for page in client.get_paginator("get_resources").paginate(ResourceTypeFilters=["s3"]):
                for item in page.get("ResourceTagMappingList", []):
                    name = str(item["ResourceARN"]).rsplit(":", 1)[-1]
                    if name in names:  # the tagging API may answer for other regions' buckets
                        found[name] = tags_of(item.get("Tags"))
        return found

    def _series(self, region: str, wanted: set[str]) -> list[list[dict[str, str]]]:
        """The dimension sets of ``wanted`` buckets' BucketSizeBytes, as ListMetrics
        orders them (a query must name them in that order on some back-ends)."""
        cw = self._clients.cloudwatch(region)
        seen: set[tuple[str, str]] = set()
        out: list[list[dict[str, str]]] = []
        with reading("cloudwatch", region, "ListMetrics"):
            for page in cw.get_paginator("list_metrics").paginate(
                Namespace=NAMESPACE, MetricName=METRIC
            ):
                for m in page.get("Metrics", []):
                    dims = {str(d["Name"]): str(d["Value"]) for d in m.get("Dimensions", [])}
                    key = (dims.get("BucketName", ""), dims.get("StorageType", ""))
                    exact = set(dims) == {"BucketName", "StorageType"}
                    if key[0] in wanted and key[1] and exact and key not in seen:
                        seen.add(key)
                        out.append([{"Name": n, "Value": v} for n, v in dims.items()])
        return out

    def _sizes(
        self, region: str, series: list[list[dict[str, str]]], now: datetime
    ) -> dict[str, dict[str, int]]:
        cw = self._clients.cloudwatch(region)
        sizes: dict[str, dict[str, int]] = defaultdict(dict)
        for batch in chunks(series, QUERIES_PER_CALL):
            queries: list[dict[str, Any]] = [
                {
                    "Id": f"s{i}",
                    "MetricStat": {
                        "Metric": {"Namespace": NAMESPACE, "MetricName": METRIC, "Dimensions": d},
                        "Period": DAY_S,
                        "Stat": "Average",
                    },
                }
                for i, d in enumerate(batch)
            ]
            with reading("cloudwatch", region, "GetMetricData"):
                for page in cw.get_paginator("get_metric_data").paginate(
                    MetricDataQueries=queries,
                    StartTime=now - WINDOW,
                    EndTime=now,
                    ScanBy="TimestampDescending",
                ):
                    for result in page.get("MetricDataResults", []):
                        values = result.get("Values") or []
                        stamps = result.get("Timestamps") or []
                        dims = {x["Name"]: x["Value"] for x in batch[int(result["Id"][1:])]}
                        status = str(result.get("StatusCode", ""))
                        if status in FAILED:
                            # Not read is not empty: a bucket without its size would be $0.
                            raise SourceError(
                                "cloudwatch",
                                region,
                                "GetMetricData",
                                status,
                                f"{METRIC} of bucket {dims['BucketName']} "
                                f"({dims['StorageType']}) could not be read",
                            )
                        if not values:
                            continue
                        newest = max(range(len(values)), key=lambda i: stamps[i])
                        sizes[dims["BucketName"]][dims["StorageType"]] = int(values[newest])
        return dict(sizes)
