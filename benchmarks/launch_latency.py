"""The on-launch path: CostGuard's own time from a launch event to its alert, and what the
event path costs a month at 1,000 launches a day.

Each of N untagged p5.48xlarge launches on moto's HTTP server gets the two events
EventBridge delivers for it (``pending``, then ``running``: the EC2 state-change event
carries no instance type, so the rule cannot filter on it and both reach the Lambda), each
handed to the shipped ``handlers.on_launch.process`` as the Lambda's handler does (the
check is built per invocation). For the event that alerts, the time from the event handed
to ``process()`` to ``sns:Publish`` returned is CostGuard's own part of "launch to
alert"; the rest is EventBridge's delivery, which AWS documents only as "near real time"
(tests/fixtures/events/README.md quotes it), and the Lambda's cold start.

Every API call is counted (``before-call``, retries excluded; ``before-send``, every HTTP
attempt), and DynamoDB's read and write units are sized as DynamoDB bills them
(``guard_bill.CapacityMeter``). The month's bill uses ``guard_bill.PRICES`` and the event
path's own list prices below. moto over HTTP on a shared 2-core machine is slower than
AWS: the durations, and so the GB-seconds, are upper bounds.
"""

from __future__ import annotations

import io
import os
import statistics
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.guard_bill import PRICES, CapacityMeter

START = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ACCOUNT = "123456789012"
REGION = "us-east-1"
LAUNCHES_PER_DAY = 1000
DAYS_PER_MONTH = 30.4
#: The on-launch Lambda's memory (the stack's), in GB.
MEMORY_GB = 0.5
#: us-east-1 list prices (2026-11) of the event path, beyond ``guard_bill.PRICES``:
#: SNS publishes ($0.50 a million API requests, 64 KB chunks; deliveries to SQS are free);
#: EventBridge events on the default bus from AWS services are free, and an event a member
#: account's rule sends to the hub's bus (Organization mode) is billed as a custom event,
#: $1.00 a million; CloudTrail's LookupEvents is free (management events' history).
EVENT_PRICES = {
    "sns_publish": 0.50 / 1_000_000,
    "eventbridge_aws_service_event": 0.0,
    "eventbridge_cross_account_event": 1.00 / 1_000_000,
    "cloudtrail_lookup_events": 0.0,
}
#: EventBridge events per launch that reach the Lambda (``pending`` and ``running``).
EVENTS_PER_LAUNCH = 2


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def measure(launches: int = 200) -> dict[str, Any]:
    import boto3
    from aws_lambda_powertools import Logger

    from costguard.env import Env
    from costguard.handlers import on_launch
    from costguard.settings import Settings
    from costguard_demo.plumbing import create_alert_channels, create_ledger_table
    from costguard_demo.server import embedded_aws
    from tests.support.events import load_event

    saved = dict(os.environ)
    os.environ.update(
        {"POWERTOOLS_METRICS_DISABLED": "true", "MOTO_EC2_LOAD_DEFAULT_AMIS": "false"}
    )
    try:
        with embedded_aws():
            session = boto3.Session()
            create_ledger_table(session, "ledger", REGION)
            topic, _queue = create_alert_channels(session, REGION)
            settings = Settings.from_env(
                {
                    Env.REGIONS: REGION,
                    Env.TABLE_NAME: "ledger",
                    Env.SCOPE: ACCOUNT,
                    Env.TOPIC_ARN: topic,
                    Env.SAGEMAKER_TAGS: "per-resource",
                    Env.SAGEMAKER_STUDIO: "false",
                }
            )
            ec2 = session.client("ec2", region_name=REGION)
            instances = [
                str(i["InstanceId"])
                for i in ec2.run_instances(
                    ImageId="ami-12345678",
                    InstanceType="p5.48xlarge",
                    MinCount=launches,
                    MaxCount=launches,
                )["Instances"]
            ]
            # The Lambda's session: its calls, attempts, units and publish times counted.
            lam = boto3.Session()
            calls: Counter[str] = Counter()
            attempts: Counter[str] = Counter()
            published: list[float] = []
            lam.events.register(
                "before-call",
                lambda model, **_: calls.update(
                    [f"{model.service_model.service_name}.{model.name}"]
                ),
            )
            lam.events.register_first(
                "before-send", lambda event_name, **_: attempts.update([event_name])
            )
            lam.events.register(
                "after-call.sns.Publish", lambda **_: published.append(time.perf_counter())
            )
            meter = CapacityMeter()
            meter.attach(lam)
            log = io.StringIO()
            saved_logger = on_launch.logger
            on_launch.logger = Logger(service="bench-on-launch", stream=log)
            to_publish: list[float] = []
            alerting: list[float] = []
            quiet: list[float] = []
            outcomes: Counter[str] = Counter()
            try:
                for n, instance in enumerate(instances):
                    at = START + timedelta(seconds=30 * n)
                    for state, durations in (("pending", alerting), ("running", quiet)):
                        event = load_event(
                            f"ec2-instance-state-{state}",
                            resource_id=instance,
                            time=at.isoformat().replace("+00:00", "Z"),
                        )
                        before = len(published)
                        started = time.perf_counter()
                        result = on_launch.process(event, settings, lam, at + timedelta(seconds=5))
                        durations.append(time.perf_counter() - started)
                        outcomes.update(v["outcome"] for v in result["launches"])
                        if len(published) > before:
                            to_publish.append(published[-1] - started)
            finally:
                on_launch.logger = saved_logger
    finally:
        os.environ.clear()
        os.environ.update(saved)
    events = 2 * launches
    per_launch_calls = sum(calls.values()) / launches
    wru = sum(meter.write_units.values()) / launches
    rru = sum(meter.read_units.values()) / launches
    seconds_per_launch = (sum(alerting) + sum(quiet)) / launches
    log_bytes_per_launch = len(log.getvalue().encode()) / launches
    publishes_per_launch = calls["sns.Publish"] / launches
    month_launches = LAUNCHES_PER_DAY * DAYS_PER_MONTH
    month_events = month_launches * EVENTS_PER_LAUNCH
    month = {
        "lambda_requests": month_events * PRICES["lambda_request"],
        "lambda_compute": month_launches
        * seconds_per_launch
        * MEMORY_GB
        * PRICES["lambda_gb_second_arm64"],
        "dynamodb_writes": month_launches * wru * PRICES["dynamodb_write_unit"],
        "dynamodb_reads": month_launches * rru * PRICES["dynamodb_read_unit"],
        "sns_publishes": month_launches * publishes_per_launch * EVENT_PRICES["sns_publish"],
        # SNS asks KMS for the encrypted topic's data key: at most one request a publish.
        "kms_requests": month_launches * publishes_per_launch * PRICES["kms_request"],
        "eventbridge_single_account": month_events * EVENT_PRICES["eventbridge_aws_service_event"],
        "cloudtrail_lookups": 0.0,
        "logs": month_launches
        * log_bytes_per_launch
        / 1e9
        * (PRICES["logs_ingest_gb"] + PRICES["logs_store_gb_month"] * 3),
    }
    org_extra = month_events * EVENT_PRICES["eventbridge_cross_account_event"]
    total = sum(month.values())
    return {
        "launches": launches,
        "events": events,
        "outcomes": dict(sorted(outcomes.items())),
        "event_to_publish_seconds": {
            "p50": round(statistics.median(to_publish), 3),
            "p99": round(_quantile(to_publish, 0.99), 3),
            "max": round(max(to_publish), 3),
            "samples": len(to_publish),
        },
        "invocation_seconds": {
            "alerting_p50": round(statistics.median(alerting), 3),
            "alerting_p99": round(_quantile(alerting, 0.99), 3),
            "quiet_p50": round(statistics.median(quiet), 3),
            "quiet_p99": round(_quantile(quiet, 0.99), 3),
        },
        "per_launch": {
            "api_calls": round(per_launch_calls, 2),
            "http_attempts": round(sum(attempts.values()) / launches, 2),
            "api_calls_by_operation": {k: round(v / launches, 3) for k, v in sorted(calls.items())},
            "dynamodb_write_units": round(wru, 2),
            "dynamodb_read_units": round(rru, 2),
            "sns_publishes": round(publishes_per_launch, 2),
            "lambda_gb_seconds": round(seconds_per_launch * MEMORY_GB, 4),
            "log_bytes": round(log_bytes_per_launch),
        },
        "month_at_1000_launches_a_day": {
            "launches": round(month_launches),
            "lambda_requests": round(month_events),
            "lambda_gb_seconds": round(month_launches * seconds_per_launch * MEMORY_GB),
            "usd": {k: round(v, 4) for k, v in month.items()},
            "usd_total": round(total, 2),
            "usd_organization_mode_extra": round(org_extra, 4),
            "usd_total_organization_mode": round(total + org_extra, 2),
        },
        "prices": {**EVENT_PRICES, "lambda_gb_second_arm64": PRICES["lambda_gb_second_arm64"]},
        "notes": (
            "Every launch here alerts (untagged p5.48xlarge): an upper bound on publishes. "
            "Durations are on moto's HTTP server on a shared 2-core machine, the check "
            "built per invocation as the handler does, warm process (no cold start): an "
            "upper bound on AWS's. Free tiers left out. EventBridge delivery is documented "
            "only as near real time; add it and a cold start to state the end-to-end time."
        ),
    }


def write(result: dict[str, Any]) -> None:
    """Put this benchmark's figures in benchmarks/results.json, keeping the others'."""
    import json
    from pathlib import Path

    out = Path(__file__).with_name("results.json")
    results = json.loads(out.read_text()) if out.exists() else {}
    results["launch_latency"] = result
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    figures = measure(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
    print(json.dumps(figures, indent=2))
    if "--write" in sys.argv:
        write(figures)
