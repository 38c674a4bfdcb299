"""One contract, two catalog stores: the in-memory fake and DynamoDB (moto) behave the same."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.adapters.catalog_store import CatalogStoreError
from costguard.ports import CatalogStore
from tests.support.atomic import AtomicCalls
from tests.support.fakes import InMemoryCatalogStore

T0 = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)


def doc(version: int, **extra: Any) -> dict[str, Any]:
    return {
        "version": version,
        "as_of": "2026-11-29",
        "ec2": {"us-east-1": {"g5.xlarge": "1.006"}},
        **extra,
    }


@pytest.fixture(params=["memory", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Iterator[CatalogStore]:
    if request.param == "memory":
        yield InMemoryCatalogStore()
        return
    import boto3
    from moto import mock_aws

    from costguard.adapters.catalog_store import DynamoDbCatalogStore
    from tests.functional.test_ledger_contract import make_table

    with mock_aws():
        session = boto3.Session()
        make_table(session)
        yield DynamoDbCatalogStore(
            AtomicCalls(session.client("dynamodb", region_name="us-east-1")), "ledger"
        )


def test_an_empty_store_has_no_current_catalog(store: CatalogStore) -> None:
    assert store.current() is None
    assert store.get(1) is None


def test_stores_a_first_version_and_reads_it_back_whole(store: CatalogStore) -> None:
    # GIVEN a document with a field no code knows and text outside ASCII
    document = doc(3, confidence={"p5.48xlarge": "low"}, notes="prix « HT » 東京")
    # WHEN it is stored as the first version
    assert store.put(document, expected_version=0, at=T0) == 3
    # THEN current and the history hold it, word for word
    current = store.current()
    assert current is not None and current.version == 3 and current.stored_at == T0
    assert current.document == document
    assert store.get(3) == current


def test_a_writer_that_started_from_an_old_version_is_refused_and_writes_nothing(
    store: CatalogStore,
) -> None:
    assert store.put(doc(3), expected_version=0, at=T0) == 3
    assert store.put(doc(4, as_of="2026-12-06"), expected_version=3, at=T0 + timedelta(days=7)) == 4
    # WHEN a refresh that read version 3 tries to store its version 4
    assert store.put(doc(4, as_of="2026-11-30"), expected_version=3, at=T0) is None
    # THEN the current catalog and the history are the first writer's
    current = store.current()
    assert current is not None and current.document["as_of"] == "2026-12-06"
    assert store.get(4) == current
    assert store.get(3) is not None and store.get(3).document == doc(3)  # type: ignore[union-attr]


def test_a_first_write_is_refused_once_a_catalog_exists(store: CatalogStore) -> None:
    assert store.put(doc(3), expected_version=0, at=T0) == 3
    assert store.put(doc(7), expected_version=0, at=T0) is None
    assert store.get(7) is None


def test_a_version_must_move_forward(store: CatalogStore) -> None:
    assert store.put(doc(3), expected_version=0, at=T0) == 3
    with pytest.raises(CatalogStoreError):
        store.put(doc(3), expected_version=3, at=T0)


def test_two_refreshes_racing_from_one_version_store_once(store: CatalogStore) -> None:
    assert store.put(doc(3), expected_version=0, at=T0) == 3
    start = threading.Barrier(8)
    won: list[int | None] = []

    def race(n: int) -> None:
        start.wait()
        won.append(store.put(doc(4, writer=n), expected_version=3, at=T0))

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won, key=str) == [4] + [None] * 7
    current = store.current()
    assert current is not None and current.version == 4
    assert store.get(4) == current


def test_the_bundled_catalog_fits_one_item_with_room_to_spare() -> None:
    import json

    from costguard.adapters.catalog import bundled_catalog_path
    from costguard.adapters.catalog_store import encode_document
    from costguard.adapters.dynamodb import ITEM_BUDGET_BYTES

    document = json.loads(bundled_catalog_path().read_text(encoding="utf-8"))
    size = len(encode_document(document))
    # One eventually consistent GetItem of <= 8 KB costs 1 read unit.
    assert size < 8 * 1024 < ITEM_BUDGET_BYTES, size


def test_a_corrupt_stored_item_is_an_error_not_a_crash() -> None:
    import boto3
    from moto import mock_aws

    from costguard.adapters.catalog_store import DynamoDbCatalogStore
    from tests.functional.test_ledger_contract import make_table

    with mock_aws():
        session = boto3.Session()
        make_table(session)
        client = session.client("dynamodb", region_name="us-east-1")
        client.put_item(
            TableName="ledger",
            Item={
                "pk": {"S": "CATALOG"},
                "sk": {"S": "CURRENT"},
                "version": {"N": "3"},
                "stored_at": {"S": "2026-11-29T06:00:00.000000Z"},
                "data": {"B": b"not zlib"},
            },
        )
        with pytest.raises(CatalogStoreError, match="not readable"):
            DynamoDbCatalogStore(client, "ledger").current()


def test_the_latest_version_is_the_highest_ever_stored_not_the_current_one(
    store: CatalogStore,
) -> None:
    # GIVEN an empty store, then two versions stored
    assert store.latest_version() == 0
    assert store.put(doc(1), expected_version=0, at=T0) == 1
    assert store.put(doc(2), expected_version=1, at=T0) == 2
    # WHEN asked for the latest version
    # THEN it is the highest in the history (a rollback of CURRENT does not lower it)
    assert store.latest_version() == 2
