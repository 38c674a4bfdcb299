"""What CostGuard itself costs a month, itemized, from a measured steady-state scan.

The whole scan Lambda path (``handlers.scan.process``: scan, ledger commit, findings,
alerts, figures) runs against moto with a fleet of N accelerator instances in P
projects. Every DynamoDB request is sized as DynamoDB bills it (write units per 1 KB
item, doubled in transactions; read units per 4 KB, strongly consistent), the log
bytes the scan writes are counted, and the list prices below turn a month of scans
into dollars. Run with ``make bench``; the README's table comes from these figures.
"""

from __future__ import annotations

import io
import math
import os
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

#: us-east-1 list prices (2026-11).
PRICES = {
    "dynamodb_write_unit": 0.625 / 1_000_000,
    "dynamodb_read_unit": 0.125 / 1_000_000,
    "lambda_gb_second_arm64": 0.0000133334,
    "lambda_request": 0.20 / 1_000_000,
    "custom_metric_month": 0.30,
    "alarm_month": 0.10,
    "logs_ingest_gb": 0.50,
    "logs_store_gb_month": 0.03,
    "kms_key_month": 1.00,
    "kms_request": 0.03 / 10_000,
    "secret_month": 0.40,
    "cloudwatch_metric_read": 0.01 / 1000,  # GetMetricData, per metric requested
    "cloudwatch_list_request": 0.01 / 1000,  # ListMetrics, per request
    "s3_list_request": 0.005 / 1000,  # ListBuckets
}
DAYS_PER_MONTH = 30.4
#: Storage seeded per project: tagged S3 buckets (two storage classes each), one tagged
#: unattached gp3 volume with provisioned IOPS, one tagged snapshot.
BUCKETS_PER_PROJECT = 2
SCANS_PER_MONTH = 2920  # every 15 minutes, 30.4 days
LAMBDA_MEMORY_GB = 1.0
#: Errors, throttles and DLQ depth for each of 8 Lambdas (scan, Slack notifier, the four
#: guards, the price refresh, the on-launch check), "no scan in two intervals", and the
#: launch rules' undeliverable events (their target dead-letter queue).
ALARMS = 26
#: The guards' invocations a month (idle hourly, volumes every 30 minutes, objects hourly,
#: maximum lifetime every 15 minutes), each priced as an upper bound of 5 s at 512 MB;
#: their CloudWatch reads (the idle pass) are itemized by benchmarks/idle_pass.py.
GUARD_INVOCATIONS = 730 + 1460 + 730 + 2920
GUARD_SECONDS_UPPER_BOUND = 5.0
#: The price refresh, weekly: per region one Price List query per EC2 and SageMaker batch of
#: 50 types and one per storage product family (EBS volumes, snapshots, IOPS, throughput,
#: S3, S3 Glacier Deep Archive): 9 queries a region for the packaged catalog, 27 for its
#: three regions (12 before storage was read). GetProducts is free; its time is not: priced
#: as an upper bound of 30 s at 512 MB (about 1 s a query).
REFRESH_INVOCATIONS = 4
REFRESH_QUERIES_PER_REGION = 9
REFRESH_SECONDS_UPPER_BOUND = 30.0
GUARD_MEMORY_GB = 0.5
CUSTOM_METRICS = 2  # ScanCompleted (the heartbeat alarm) and Findings
START = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def refresh_month() -> float:
    """The price-refresh Lambda's $ a month at its upper bound (its queries are free)."""
    return REFRESH_INVOCATIONS * (
        REFRESH_SECONDS_UPPER_BOUND * GUARD_MEMORY_GB * PRICES["lambda_gb_second_arm64"]
        + PRICES["lambda_request"]
    )


def _size(value: Any) -> int:
    """DynamoDB's item size: attribute names plus values, in UTF-8 bytes."""
    if isinstance(value, dict) and len(value) == 1:
        (kind, inner), *_ = value.items()
        if kind in {"S", "N"}:
            return len(str(inner).encode())
        if kind == "B":
            return len(inner) if isinstance(inner, bytes | bytearray) else len(str(inner))
        if kind in {"SS", "NS"}:  # sets: the sum of their members (the plans' slice sets)
            return sum(len(str(v).encode()) for v in inner)
        if kind == "BS":
            return sum(len(v) if isinstance(v, bytes | bytearray) else len(str(v)) for v in inner)
        if kind == "M":
            return 3 + sum(len(k.encode()) + _size(v) for k, v in inner.items())
        if kind == "L":
            return 3 + sum(_size(v) for v in inner)
        if kind in {"BOOL", "NULL"}:
            return 1
    if isinstance(value, dict):  # an item
        return sum(len(k.encode()) + _size(v) for k, v in value.items())
    return 0


class CapacityMeter:
    """Write and read units by operation, from the requests and responses botocore sees."""

    def __init__(self) -> None:
        self.write_units: Counter[str] = Counter()
        self.read_units: Counter[str] = Counter()

    def attach(self, session: Any) -> None:
        session.events.register("provide-client-params.dynamodb", self._before)
        session.events.register("after-call.dynamodb", self._after)

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        name = model.name
        if name == "PutItem":
            self.write_units[name] += math.ceil(_size(params["Item"]) / 1024) or 1
        elif name == "UpdateItem":
            self.write_units[name] += 1  # small items; updates bill the item's new size
        elif name == "BatchWriteItem":
            for requests in params["RequestItems"].values():
                for r in requests:
                    item = r.get("PutRequest", {}).get("Item", {})
                    self.write_units[name] += math.ceil(_size(item) / 1024) or 1
        elif name == "TransactWriteItems":
            for entry in params["TransactItems"]:
                item = entry.get("Put", {}).get("Item")
                units = math.ceil(_size(item) / 1024) if item else 1
                self.write_units[name] += 2 * max(units, 1)

    def _after(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "GetItem":
            self.read_units["GetItem"] += max(1, math.ceil(_size(parsed.get("Item", {})) / 4096))
        elif model.name == "Query":
            total = sum(_size(i) for i in parsed.get("Items", []))
            self.read_units["Query"] += max(1, math.ceil(total / 4096))


def seed(session: Any, instances: int, projects: int) -> None:
    ec2 = session.client("ec2", region_name="us-east-1")
    types = ("p5.48xlarge", "p4d.24xlarge", "g5.xlarge", "g6.2xlarge", "g6e.12xlarge")
    untagged = max(1, instances // 20)  # 5% untagged: unattributed findings every scan
    for p in range(projects):
        count = (instances - untagged) // projects
        tags = [
            {"Key": "costguard:project", "Value": f"project-{p:02d}"},
            {"Key": "costguard:budget", "Value": str(50_000 + 1000 * p)},
            {"Key": "costguard:owner", "Value": f"owner{p}@example.com"},
        ]
        while count:
            batch = min(count, 100)
            ec2.run_instances(
                ImageId="ami-12345678",
                InstanceType=types[p % len(types)],
                MinCount=batch,
                MaxCount=batch,
                TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
            )
            count -= batch
    ec2.run_instances(
        ImageId="ami-12345678", InstanceType="g5.xlarge", MinCount=untagged, MaxCount=untagged
    )
    seed_storage(session, projects)


def seed_storage(session: Any, projects: int) -> None:
    """Each project's storage: a gp3 volume (500 GiB, 6,000 IOPS) and a snapshot, both
    tagged, and tagged buckets with a day-old BucketSizeBytes in Standard and Standard-IA
    (the instances' root volumes are already attached to them)."""
    ec2 = session.client("ec2", region_name="us-east-1")
    s3 = session.client("s3", region_name="us-east-1")
    cw = session.client("cloudwatch", region_name="us-east-1")
    for p in range(projects):
        tag = [{"Key": "costguard:project", "Value": f"project-{p:02d}"}]
        vol = ec2.create_volume(
            AvailabilityZone="us-east-1a",
            Size=500,
            VolumeType="gp3",
            Iops=6000,
            TagSpecifications=[{"ResourceType": "volume", "Tags": tag}],
        )["VolumeId"]
        ec2.create_snapshot(
            VolumeId=vol, TagSpecifications=[{"ResourceType": "snapshot", "Tags": tag}]
        )
        for b in range(BUCKETS_PER_PROJECT):
            name = f"project-{p:02d}-data-{b}"
            s3.create_bucket(Bucket=name)
            s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": tag})
            cw.put_metric_data(
                Namespace="AWS/S3",
                MetricData=[
                    {
                        "MetricName": "BucketSizeBytes",
                        "Dimensions": [
                            {"Name": "BucketName", "Value": name},
                            {"Name": "StorageType", "Value": kind},
                        ],
                        "Timestamp": START - timedelta(days=1),
                        "Value": float(size),
                        "Unit": "Bytes",
                    }
                    for kind, size in (("StandardStorage", 2**40), ("StandardIAStorage", 2**39))
                ],
            )


def measure(instances: int = 1000, projects: int = 20, scans: int = 6) -> dict[str, Any]:
    import boto3
    from aws_lambda_powertools import Logger
    from moto import mock_aws

    from costguard.env import Env
    from costguard.handlers import scan
    from costguard.settings import Settings
    from costguard_demo.plumbing import create_alert_channels, create_ledger_table

    saved = dict(os.environ)
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
            "POWERTOOLS_METRICS_DISABLED": "true",
        }
    )
    os.environ.pop("AWS_ENDPOINT_URL", None)
    try:
        with mock_aws():
            session = boto3.Session()
            seed(session, instances, projects)
            create_ledger_table(session, "ledger", "us-east-1")
            topic, _queue = create_alert_channels(session, "us-east-1")
            settings = Settings.from_env(
                {
                    Env.REGIONS: "us-east-1",
                    Env.TABLE_NAME: "ledger",
                    Env.SCOPE: "123456789012",
                    Env.TOPIC_ARN: topic,
                    Env.SAGEMAKER_TAGS: "per-resource",
                    Env.SAGEMAKER_STUDIO: "false",
                }
            )
            meter = CapacityMeter()
            meter.attach(session)
            calls: list[Counter[str]] = []
            metrics_read: list[int] = []

            def count(model: Any, **_: Any) -> None:
                calls[-1][model.name] += 1

            def queries(params: dict[str, Any], **_: Any) -> None:
                metrics_read[-1] += len(params.get("MetricDataQueries", []))

            session.events.register("before-parameter-build.cloudwatch.GetMetricData", queries)
            session.events.register("before-call", count)
            log = io.StringIO()
            # A logger of its own per measurement (Powertools shares one per service name).
            saved_logger = scan.logger
            scan.logger = Logger(service=f"bill-{instances}-{projects}", stream=log)
            durations, logs_bytes = [], []
            for n in range(scans):
                now = START + timedelta(minutes=15 * n)
                if n == 1:  # the first scan back-fills and alerts: measure the steady state
                    meter.write_units.clear()
                    meter.read_units.clear()
                calls.append(Counter())
                metrics_read.append(0)
                log.seek(0)
                log.truncate()
                started = time.perf_counter()
                scan.process({"time": now.isoformat()}, settings, session, clock=now)
                durations.append(time.perf_counter() - started)
                logs_bytes.append(len(log.getvalue().encode()))
            scan.logger = saved_logger
    finally:
        os.environ.clear()
        os.environ.update(saved)
    steady = scans - 1
    wru = sum(meter.write_units.values()) / steady
    rru = sum(meter.read_units.values()) / steady
    seconds = sum(durations[1:]) / steady
    log_bytes = sum(logs_bytes[1:]) / steady
    # The first scan of a day reads S3 storage (the first scan here); later ones read the
    # day's figures from the ledger's state (in the steady DynamoDB reads above).
    daily = calls[0]
    storage_ops = ("ListBuckets", "GetResources", "ListMetrics", "GetMetricData")
    steady_storage = {op: sum(c[op] for c in calls[1:]) / steady for op in storage_ops}
    month = {
        "lambda_compute": seconds
        * LAMBDA_MEMORY_GB
        * PRICES["lambda_gb_second_arm64"]
        * SCANS_PER_MONTH
        + PRICES["lambda_request"] * SCANS_PER_MONTH,
        "dynamodb_writes": wru * PRICES["dynamodb_write_unit"] * SCANS_PER_MONTH,
        "dynamodb_reads": rru * PRICES["dynamodb_read_unit"] * SCANS_PER_MONTH,
        "guard_lambdas_upper_bound": GUARD_INVOCATIONS
        * (
            GUARD_SECONDS_UPPER_BOUND * GUARD_MEMORY_GB * PRICES["lambda_gb_second_arm64"]
            + PRICES["lambda_request"]
        )
        + refresh_month(),
        "custom_metrics": CUSTOM_METRICS * PRICES["custom_metric_month"],
        "alarms": ALARMS * PRICES["alarm_month"],
        "logs": log_bytes
        * SCANS_PER_MONTH
        / 1e9
        * (PRICES["logs_ingest_gb"] + PRICES["logs_store_gb_month"] * 3),
        "kms": PRICES["kms_key_month"] + 20 * SCANS_PER_MONTH * PRICES["kms_request"],
        "secrets_manager": PRICES["secret_month"],
        "s3_storage_daily_read": DAYS_PER_MONTH
        * (
            metrics_read[0] * PRICES["cloudwatch_metric_read"]
            + daily["ListMetrics"] * PRICES["cloudwatch_list_request"]
            + daily["ListBuckets"] * PRICES["s3_list_request"]
        ),
    }
    return {
        "instances": instances,
        "projects": projects,
        "per_scan": {
            "dynamodb_write_units": round(wru, 1),
            "dynamodb_write_units_by_operation": {
                k: round(v / steady, 1) for k, v in sorted(meter.write_units.items())
            },
            "dynamodb_read_units": round(rru, 1),
            "seconds_in_process_on_moto": round(seconds, 2),
            "log_bytes": round(log_bytes),
            "storage_calls_steady_scan": steady_storage,
            "ec2_storage_calls": {
                op: calls[1][op] for op in ("DescribeVolumes", "DescribeSnapshots")
            },
        },
        "storage_daily_read": {
            "buckets": projects * BUCKETS_PER_PROJECT,
            "calls": {op: daily[op] for op in storage_ops},
            "metrics_read": metrics_read[0],
        },
        "usd_per_month": {k: float(Decimal(v).quantize(Decimal("0.01"))) for k, v in month.items()},
        "usd_per_month_total": round(sum(month.values()), 2),
        "notes": (
            "Lambda time is measured in-process against moto, which is slower than AWS; "
            "Describe/List calls, SNS publishes, the schedule and X-Ray stay within free "
            "tiers; the dashboard is free up to three per account."
        ),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(measure(), indent=2))
