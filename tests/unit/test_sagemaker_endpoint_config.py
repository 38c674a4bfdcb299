"""When an endpoint's current configuration took effect, as the inventory reads it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.adapters.sagemaker import SageMakerInventory
from tests.support.clock import MIDDAY
from tests.support.fakes import Pages

CREATED = MIDDAY - timedelta(days=30)


class _SageMaker:
    def __init__(self, modified: datetime | None, config_created: datetime | None) -> None:
        self._modified = modified
        self._config_created = config_created

    def get_paginator(self, name: str) -> Pages:
        return Pages(
            [
                {
                    "Endpoints": [
                        {
                            "EndpointName": "chat",
                            "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/chat",
                            "CreationTime": CREATED,
                        }
                    ]
                }
            ]
        )

    def describe_endpoint(self, EndpointName: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "EndpointName": EndpointName,
            "EndpointConfigName": "chat-v2",
            "CreationTime": CREATED,
            "ProductionVariants": [{"VariantName": "v", "CurrentInstanceCount": 1}],
        }
        if self._modified is not None:
            out["LastModifiedTime"] = self._modified
        return out

    def describe_endpoint_config(self, EndpointConfigName: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "EndpointConfigName": EndpointConfigName,
            "ProductionVariants": [{"VariantName": "v", "InstanceType": "ml.p4d.24xlarge"}],
        }
        if self._config_created is not None:
            out["CreationTime"] = self._config_created
        return out


@pytest.mark.parametrize(
    ("modified", "config_created", "expected"),
    [
        # never updated: since creation (the config was made just before the endpoint)
        (CREATED, CREATED - timedelta(minutes=5), CREATED),
        # UpdateEndpoint two hours ago to a config made a day ago: since the update
        (MIDDAY - timedelta(hours=2), MIDDAY - timedelta(days=1), MIDDAY - timedelta(hours=2)),
        # a config newer than the endpoint's last update (clock skew): the later of both
        (MIDDAY - timedelta(days=2), MIDDAY - timedelta(hours=1), MIDDAY - timedelta(hours=1)),
        # either date missing: unknown, so no utilization advice
        (None, CREATED, None),
        (CREATED, None, None),
    ],
)
def test_an_endpoints_configuration_dates_from_its_last_update_or_its_configs_creation(
    modified: datetime | None, config_created: datetime | None, expected: datetime | None
) -> None:
    ((_arn, endpoint),) = SageMakerInventory._endpoints(
        _SageMaker(modified, config_created),  # type: ignore[arg-type]
        "us-east-1",
    )
    assert endpoint.launched_at == CREATED  # billed since it was created
    assert endpoint.config_since == expected
