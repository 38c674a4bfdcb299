"""The price-refresh Lambda's use case on moto's DynamoDB and a stubbed Price List API:
what it stores, the scan then reads; a region it could not read fails the invocation
(retries, DLQ, alarm) after what was read is stored."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from costguard.adapters.catalog import CatalogDocuments
from costguard.adapters.catalog_store import CatalogReader, DynamoDbCatalogStore
from costguard.adapters.pricing_api import PriceListApi
from costguard.handlers.refresh import RefreshIncompleteError, run
from costguard.services.price_refresh import PriceRefresh
from tests.functional.test_prices_refresh import (
    FULL_EAST,
    REFRESHED_AT,
    fixture_catalog,
    region_answers,
    throttled,
)


@pytest.fixture
def table(aws: Any) -> Any:
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    return DynamoDbCatalogStore(aws.client("dynamodb", region_name="us-east-1"), "ledger")


def refresh(store: Any, client: Any) -> PriceRefresh:
    return PriceRefresh(
        store, PriceListApi(client, sleep=lambda _s: None), CatalogDocuments(fixture_catalog())
    )


def test_what_the_refresh_stores_is_what_the_next_scan_prices_with(table: Any) -> None:
    client = boto3.client("pricing", region_name="us-east-1")
    with Stubber(client) as stub:
        region_answers(stub, "us-east-1", FULL_EAST, {"ml.g5.xlarge": "1.408"}, {"gp3": "0.08"})
        outcome = run(refresh(table, client), ("us-east-1",), REFRESHED_AT)
    assert outcome.written
    catalog, in_use = CatalogReader(table, bundled=fixture_catalog).read()
    assert (in_use.source, in_use.version) == ("stored", 3)
    assert str(catalog.ec2["us-east-1"]["g5.xlarge"]) == "0.999"


def test_a_region_left_unread_fails_the_invocation_after_storing_the_rest(table: Any) -> None:
    client = boto3.client("pricing", region_name="us-east-1")
    with Stubber(client) as stub:
        region_answers(stub, "us-east-1", FULL_EAST, {"ml.g5.xlarge": "1.408"}, {"gp3": "0.08"})
        throttled(stub, 4)
        with pytest.raises(
            RefreshIncompleteError, match="us-west-2: GetProducts failed with ThrottlingException"
        ):
            run(refresh(table, client), ("us-east-1", "us-west-2"), REFRESHED_AT)
    stored = table.current()
    assert stored is not None and stored.document["ec2"]["us-east-1"]["g5.xlarge"] == "0.999"
    assert stored.document["ec2"]["us-west-2"]["g5.xlarge"] == "1.006"


def test_the_handler_refuses_an_implausible_event_time_before_any_call(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.env import Env
    from costguard.handlers.refresh import handler
    from tests.functional.test_scan_handler import Context

    monkeypatch.setenv(Env.REGIONS, "us-east-1")
    monkeypatch.setenv(Env.TABLE_NAME, "ledger")
    calls: list[str] = []
    monkeypatch.setattr(boto3, "Session", lambda *a, **k: calls.append("session"))
    result = handler({"time": "1970-01-01T00:00:00Z"}, Context())
    assert "refused" in result and calls == []
