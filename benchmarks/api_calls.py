"""AWS API calls per scan, by operation, for 100- and 1,000-instance fleets (moto server).

Calls must grow with pages, not with resources: compare the two fleets. With
``endpoints``, that many idle A100 SageMaker endpoints are seeded in us-east-1 as well:
their GPU utilization is one ``GetMetricData`` per 500 endpoints, and so are their
``Invocations`` for the cost per prediction (hourly sums over 7 days and today: another
range, so its own calls; 0 per endpoint). SageMaker's own Describe calls are per endpoint,
as its API has no batch read.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from benchmarks.engine import FLEET_TYPES as TYPES


def seed(session: Any, n: int) -> None:
    for region in ("us-east-1", "us-west-2"):
        ec2 = session.client("ec2", region_name=region)
        per_region = n // 2
        for i, itype in enumerate(TYPES):
            count = per_region // len(TYPES) + (1 if i < per_region % len(TYPES) else 0)
            while count:
                batch = min(count, 100)
                ec2.run_instances(
                    ImageId="ami-12345678",
                    InstanceType=itype,
                    MinCount=batch,
                    MaxCount=batch,
                    TagSpecifications=[
                        {
                            "ResourceType": "instance",
                            "Tags": [{"Key": "costguard:project", "Value": f"p{i}"}],
                        }
                    ],
                )
                count -= batch
        ec2.run_instances(ImageId="ami-12345678", InstanceType="m5.large", MinCount=50, MaxCount=50)


def seed_endpoints(session: Any, n: int, now: datetime) -> None:
    """``n`` ml.p4d.24xlarge endpoints, three days old, at 8 (of 800) GPUUtilization,
    serving 100 invocations an hour ago."""
    from datetime import timedelta

    from costguard_demo.fleet import backdate_sagemaker
    from costguard_demo.server import moto_backend

    sm = session.client("sagemaker", region_name="us-east-1")
    cw = session.client("cloudwatch", region_name="us-east-1")
    role = "arn:aws:iam::123456789012:role/sagemaker"
    sm.create_model(ModelName="m", ExecutionRoleArn=role, PrimaryContainer={"Image": "x:1"})
    backend = moto_backend("sagemaker", "us-east-1")
    for i in range(n):
        name = f"ep-{i}"
        sm.create_endpoint_config(
            EndpointConfigName=name,
            ProductionVariants=[
                {
                    "VariantName": "primary",
                    "ModelName": "m",
                    "InitialInstanceCount": 1,
                    "InstanceType": "ml.g4dn.xlarge",  # moto refuses ml.p4d here
                }
            ],
        )
        sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
        backend.endpoint_configs[name].production_variants[0]["InstanceType"] = "ml.p4d.24xlarge"
        cw.put_metric_data(
            Namespace="/aws/sagemaker/Endpoints",
            MetricData=[
                {
                    "MetricName": "GPUUtilization",
                    "Dimensions": [
                        {"Name": "EndpointName", "Value": name},
                        {"Name": "VariantName", "Value": "primary"},
                    ],
                    "Timestamp": now - timedelta(hours=3),
                    "Value": 8.0,
                }
            ],
        )
        cw.put_metric_data(
            Namespace="AWS/SageMaker",
            MetricData=[
                {
                    "MetricName": "Invocations",
                    "Dimensions": [
                        {"Name": "EndpointName", "Value": name},
                        {"Name": "VariantName", "Value": "primary"},
                    ],
                    "Timestamp": now - timedelta(hours=2),
                    "Value": 100.0,
                }
            ],
        )
    backdate_sagemaker("us-east-1", {}, {f"ep-{i}": now - timedelta(days=3) for i in range(n)})


def measure(n: int, endpoints: int = 0) -> dict[str, Any]:
    import boto3

    from costguard.adapters.ec2 import InstanceTypeCache
    from costguard.settings import Settings
    from costguard.wiring import CallCounter, build_scan_service, clients_for
    from costguard_demo.server import embedded_aws

    now = datetime.now(UTC)
    with embedded_aws():
        session = boto3.Session()
        seed(session, n)
        seed_endpoints(session, endpoints, now)
        counter = CallCounter()
        counter.attach(session)
        settings = Settings(
            regions=("us-east-1", "us-west-2"),
            sagemaker_tags="per-resource",
            sagemaker_studio=False,
        )
        # A cold cache, as a Lambda's first invocation has.
        service = build_scan_service(
            settings,
            clients_for(settings, session),
            counter=counter,
            instance_types=InstanceTypeCache(),
        )
        started = time.perf_counter()
        report = service.run(now)
        elapsed = time.perf_counter() - started
    calls = dict(sorted(counter.snapshot().items()))
    return {
        "accelerator_instances": n,
        "idle_a100_endpoints": endpoints,
        "resources_found": report.resource_count,
        "oversized_endpoint_advice": sum(
            a.code.value == "oversized-endpoint" for a in report.advice
        ),
        # Endpoint variants given a $ per 1,000 predictions (the rest: no traffic, unknown).
        "cost_per_prediction_priced": sum(
            c.status.value == "priced" for c in report.prediction_costs
        ),
        "api_calls_total": sum(calls.values()),
        "api_calls": calls,
        "scan_seconds_on_moto": round(elapsed, 2),
    }


if __name__ == "__main__":
    import sys

    if "--endpoints-only" not in sys.argv:
        for size in (100, 1000):
            print(measure(size))
    for endpoints in (10, 600):
        print(measure(100, endpoints))
