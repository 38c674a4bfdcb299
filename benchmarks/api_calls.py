"""AWS API calls per scan, by operation, for 100- and 1,000-instance fleets (moto server).

Calls must grow with pages, not with resources: compare the two fleets.
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


def measure(n: int) -> dict[str, Any]:
    import boto3

    from costguard.adapters.ec2 import InstanceTypeCache
    from costguard.settings import Settings
    from costguard.wiring import CallCounter, build_scan_service, clients_for
    from costguard_demo.server import embedded_aws

    with embedded_aws():
        session = boto3.Session()
        seed(session, n)
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
        report = service.run(datetime.now(UTC))
        elapsed = time.perf_counter() - started
    calls = dict(sorted(counter.snapshot().items()))
    return {
        "accelerator_instances": n,
        "resources_found": report.resource_count,
        "api_calls_total": sum(calls.values()),
        "api_calls": calls,
        "scan_seconds_on_moto": round(elapsed, 2),
    }


if __name__ == "__main__":
    for size in (100, 1000):
        print(measure(size))
