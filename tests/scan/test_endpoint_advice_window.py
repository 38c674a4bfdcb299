"""Hostile tests of the oversized-endpoint advice: what it reads, and what it advises from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from costguard.adapters.sagemaker import SageMakerInventory
from costguard.domain.advice import AdviceCode, advise, endpoint_variants, endpoint_window
from costguard.domain.pricing import PricedResource
from costguard.wiring import BundledCatalog
from tests.support.fakes import Pages

REGION = "us-east-1"
AFTER_LEAP_DAY = datetime(2028, 3, 1, 0, 20, tzinfo=UTC)  # just after a leap day, UTC midnight


class _SageMaker:
    """An endpoint created a month ago and moved to ml.p4d.24xlarge two hours ago
    (UpdateEndpoint to a new endpoint config: same endpoint, same variant name)."""

    def get_paginator(self, name: str) -> Pages:
        assert name == "list_endpoints"
        return Pages(
            [
                {
                    "Endpoints": [
                        {
                            "EndpointName": "chat",
                            "EndpointArn": f"arn:aws:sagemaker:{REGION}:1:endpoint/chat",
                            "CreationTime": AFTER_LEAP_DAY - timedelta(days=30),
                            "LastModifiedTime": AFTER_LEAP_DAY - timedelta(hours=2),
                            "EndpointStatus": "InService",
                        }
                    ]
                }
            ]
        )

    def describe_endpoint(self, EndpointName: str) -> dict[str, Any]:
        return {
            "EndpointName": EndpointName,
            "EndpointConfigName": "chat-p4d",
            "CreationTime": AFTER_LEAP_DAY - timedelta(days=30),
            "LastModifiedTime": AFTER_LEAP_DAY - timedelta(hours=2),
            "ProductionVariants": [{"VariantName": "AllTraffic", "CurrentInstanceCount": 1}],
        }

    def describe_endpoint_config(self, EndpointConfigName: str) -> dict[str, Any]:
        return {
            "EndpointConfigName": EndpointConfigName,
            "CreationTime": AFTER_LEAP_DAY - timedelta(hours=2),
            "ProductionVariants": [
                {"VariantName": "AllTraffic", "InstanceType": "ml.p4d.24xlarge"}
            ],
        }


def test_an_endpoint_moved_to_a_new_type_within_the_window_gets_no_advice() -> None:
    """Defect: the endpoint's window start is its ``CreationTime`` ("an update is not a
    restart"), so an endpoint moved by UpdateEndpoint from ml.g5.xlarge (1 GPU) to
    ml.p4d.24xlarge (8 GPUs) two hours ago is read over the last 24 h under the same
    variant name: CloudWatch's ``GPUUtilization`` then mixes 22 h of one busy A10G
    (90 on a 0-100 scale) with 2 h of eight A100s at 50 % (400 on 0-800), and the mixed
    average, divided by 8, reads 14.5 % per GPU. The user is told to shrink a p4d whose
    GPUs are 50 % busy, by a saving in the thousands a month: advice from data that is
    not the endpoint's.
    """
    # GIVEN the inventory of that endpoint
    found = SageMakerInventory._endpoints(_SageMaker(), REGION)  # type: ignore[arg-type]
    resources = [r for _arn, r in found]
    start, _end = endpoint_window(AFTER_LEAP_DAY)
    # WHEN the scan chooses the variants whose day of GPU utilization it reads and advises on
    variants = endpoint_variants(resources, start)
    blended = (Decimal(22) * 90 + Decimal(2) * 400) / 24  # what CloudWatch's Average reads
    catalog, _ = BundledCatalog().read()
    priced = [
        PricedResource(r, catalog.sagemaker_rate(REGION, "ml.p4d.24xlarge"), "list")
        for r in resources
    ]
    advice = advise(priced, [], catalog, AFTER_LEAP_DAY, {v.key: blended for v in variants})
    # THEN its mixed window is not read, and no endpoint is called oversized
    oversized = [a for a in advice if a.code is AdviceCode.OVERSIZED_ENDPOINT]
    assert variants == [] and oversized == [], (
        f"read {variants} and advised: {[a.why for a in oversized]}"
    )
