"""SageMaker endpoints on moto that the oversized-endpoint advice acts on, and their metrics
(GPU utilization, and the invocations the cost per prediction reads)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from costguard.adapters.cloudwatch import (
    ENDPOINT_GPU_METRIC,
    ENDPOINT_NAMESPACE,
    INVOCATIONS_METRIC,
    INVOCATIONS_NAMESPACE,
)


def put_gpu(cw: Any, endpoint: str, variant: str, points: list[tuple[datetime, float]]) -> None:
    """GPUUtilization as a SageMaker endpoint publishes it (dimensions in this order:
    moto 5.2.5 compares dimension lists by a broken sort, so the query uses the same)."""
    for first in range(0, len(points), 1000):
        cw.put_metric_data(
            Namespace=ENDPOINT_NAMESPACE,
            MetricData=[
                {
                    "MetricName": ENDPOINT_GPU_METRIC,
                    "Dimensions": [
                        {"Name": "EndpointName", "Value": endpoint},
                        {"Name": "VariantName", "Value": variant},
                    ],
                    "Timestamp": at,
                    "Value": value,
                    "Unit": "Percent",
                }
                for at, value in points[first : first + 1000]
            ],
        )


def put_invocations(
    cw: Any, endpoint: str, variant: str, points: list[tuple[datetime, float]]
) -> None:
    """Invocations as a SageMaker endpoint publishes them (a datapoint a minute that served
    some; dimensions in the order the reader asks, for moto 5.2.5)."""
    for first in range(0, len(points), 1000):
        cw.put_metric_data(
            Namespace=INVOCATIONS_NAMESPACE,
            MetricData=[
                {
                    "MetricName": INVOCATIONS_METRIC,
                    "Dimensions": [
                        {"Name": "EndpointName", "Value": endpoint},
                        {"Name": "VariantName", "Value": variant},
                    ],
                    "Timestamp": at,
                    "Value": value,
                    "Unit": "None",
                }
                for at, value in points[first : first + 1000]
            ],
        )


def oversized_endpoint(
    session: Any, name: str, project: str, created: datetime, region: str = "us-east-1"
) -> None:
    """An ml.p4d.24xlarge endpoint (one instance) created at ``created``.

    moto refuses ml.p4d in CreateEndpointConfig, so the type is set on its backend object
    after an accepted one, as the demo back-dates.
    """
    from costguard_demo.fleet import backdate_sagemaker
    from costguard_demo.server import moto_backend

    sm = session.client("sagemaker", region_name=region)
    role = "arn:aws:iam::123456789012:role/sagemaker"
    sm.create_model(ModelName=name, ExecutionRoleArn=role, PrimaryContainer={"Image": "x:1"})
    sm.create_endpoint_config(
        EndpointConfigName=f"{name}-config",
        ProductionVariants=[
            {
                "VariantName": "primary",
                "ModelName": name,
                "InitialInstanceCount": 1,
                "InstanceType": "ml.g4dn.xlarge",
            }
        ],
    )
    sm.create_endpoint(
        EndpointName=name,
        EndpointConfigName=f"{name}-config",
        Tags=[{"Key": "costguard:project", "Value": project}],
    )
    backend = moto_backend("sagemaker", region)
    backend.endpoint_configs[f"{name}-config"].production_variants[0]["InstanceType"] = (
        "ml.p4d.24xlarge"
    )
    backdate_sagemaker(region, {}, {name: created})


def steady_invocations(per_hour: int, now: datetime) -> dict[datetime, Decimal]:
    """``per_hour`` invocations in every hour of the cost per prediction's window at ``now``
    (the hourly sums the batched read hands back)."""
    from datetime import timedelta

    from costguard.domain.predictions import prediction_window

    start, end = prediction_window(now)
    out, at = {}, start
    while at < end:
        out[at] = Decimal(per_hour)
        at += timedelta(hours=1)
    return out
