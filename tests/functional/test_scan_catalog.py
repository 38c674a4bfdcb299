"""The deployed scan prices with the stored catalog (one GetItem, reused while warm), falls
back to the bundled one, and says which it used and when its rates are stale."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from costguard.adapters.catalog import read_catalog_file
from costguard.adapters.catalog_store import CatalogCache, CatalogReader, DynamoDbCatalogStore
from costguard.cli.scan_output import report_json
from costguard.domain.findings import FindingCode
from costguard.env import Env
from tests.support.clock import MIDDAY
from tests.support.ec2 import run_instance

TODAY = MIDDAY.date()


@pytest.fixture
def lambda_env(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from costguard import events
    from costguard_demo.plumbing import create_ledger_table

    monkeypatch.setattr(events, "CLOCK", lambda: MIDDAY + timedelta(hours=1))
    # The packaged catalog, as of two weeks before the scan: what the stored one supersedes
    # (the real file's date moves with every release; these tests must not).
    from costguard.adapters import catalog_store

    packaged = read_catalog_file().model_copy(update={"as_of": TODAY - timedelta(days=14)})
    monkeypatch.setattr(catalog_store, "read_catalog_file", lambda *_a, **_k: packaged)
    create_ledger_table(aws, "ledger", "us-east-1")
    for key, value in {
        Env.REGIONS: "us-east-1",
        Env.TABLE_NAME: "ledger",
        Env.SCOPE: "123456789012",
        Env.SAGEMAKER_TAGS: "per-resource",
        Env.SAGEMAKER_STUDIO: "false",
    }.items():
        monkeypatch.setenv(key, value)
    ec2 = aws.client("ec2", region_name="us-east-1")
    run_instance(ec2, {"costguard:project": "llm"})
    return aws


def store_catalog(session: Any, **changes: Any) -> dict[str, Any]:
    """A refreshed catalog in the store: g5.xlarge in us-east-1 at $2/h, as of ``TODAY``."""
    document: dict[str, Any] = json.loads(read_catalog_file().model_dump_json())
    document["ec2"]["us-east-1"]["g5.xlarge"] = "2.0"
    document.update({"version": 3, "as_of": TODAY.isoformat(), **changes})
    store = DynamoDbCatalogStore(session.client("dynamodb", region_name="us-east-1"), "ledger")
    assert store.put(document, expected_version=0, at=MIDDAY) == 3
    return document


def scan(session: Any) -> Any:
    from costguard.handlers.scan import process
    from costguard.settings import Settings

    calls: Counter[str] = Counter()

    def count(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key", {}).get("pk", {}).get("S") == "CATALOG":
            calls["catalog GetItem"] += 1

    session.events.register("before-parameter-build.dynamodb.GetItem", count)
    import os

    outcome = process({"time": MIDDAY.isoformat()}, Settings.from_env(os.environ), session)
    return outcome.report, calls


def g5_rate(report: Any) -> Any:
    (llm,) = [p for p in report.projects if p.project == "llm"]
    (instance,) = [a for a in llm.resources if a.priced.resource.kind.value == "ec2-instance"]
    return instance.priced.usd_per_hour


def codes(report: Any) -> list[tuple[str, str]]:
    return [(f.resource, f.message) for f in report.findings if f.code is FindingCode.PRICE_CATALOG]


def test_the_scan_prices_with_the_stored_catalog_read_with_one_get_item(lambda_env: Any) -> None:
    # GIVEN the price-refresh Lambda stored a catalog
    store_catalog(lambda_env)
    # WHEN the scan runs
    report, calls = scan(lambda_env)
    # THEN its rate is used, with one read, and the report says which catalog it was
    assert g5_rate(report) == 2
    assert calls == {"catalog GetItem": 1}
    body = report_json(report)
    assert (body["price_catalog_source"], body["price_catalog_version"]) == ("stored", 3)
    assert body["price_catalog_as_of"] == TODAY.isoformat()
    assert codes(report) == []


def test_a_warm_lambda_reuses_the_catalog_for_a_few_minutes_only(lambda_env: Any) -> None:
    store_catalog(lambda_env)
    reads: Counter[str] = Counter()
    lambda_env.events.register("before-call.dynamodb.GetItem", lambda **_: reads.update(["get"]))
    store = DynamoDbCatalogStore(lambda_env.client("dynamodb", region_name="us-east-1"), "ledger")
    clock = [0.0]
    cache = CatalogCache(reuse_s=300, clock=lambda: clock[0])
    reader = CatalogReader(store, key="t", cache=cache)
    reader.read()
    clock[0] = 299.0
    CatalogReader(store, key="t", cache=cache).read()
    assert reads["get"] == 1
    clock[0] = 300.0
    CatalogReader(store, key="t", cache=cache).read()
    assert reads["get"] == 2


def test_without_a_stored_catalog_the_bundled_one_prices_the_scan(lambda_env: Any) -> None:
    from costguard.adapters import catalog_store

    report, calls = scan(lambda_env)
    bundled = catalog_store.read_catalog_file()  # the packaged catalog (the fixture's)
    assert g5_rate(report) == bundled.ec2["us-east-1"]["g5.xlarge"]
    assert report_json(report)["price_catalog_source"] == "bundled"
    assert report.catalog_as_of == bundled.as_of.isoformat()
    assert calls == {"catalog GetItem": 1}


def test_an_invalid_stored_catalog_is_a_finding_and_the_bundled_one_prices_the_scan(
    lambda_env: Any,
) -> None:
    # GIVEN a stored catalog with a negative rate (a bug, a hand edit)
    store = DynamoDbCatalogStore(lambda_env.client("dynamodb", region_name="us-east-1"), "ledger")
    document = json.loads(read_catalog_file().model_dump_json())
    document["ec2"]["us-east-1"]["g5.xlarge"] = "-1"
    document["version"] = 3
    store.put(document, expected_version=0, at=MIDDAY)
    # WHEN the scan runs, THEN it does not crash: bundled prices, and a finding says why
    report, _ = scan(lambda_env)
    assert g5_rate(report) == read_catalog_file().ec2["us-east-1"]["g5.xlarge"]
    ((where, message),) = codes(report)
    assert where == "price-catalog/stored"
    assert "price must be positive" in message and "bundled catalog" in message


def test_an_unreadable_stored_item_is_a_finding_not_a_crash(lambda_env: Any) -> None:
    lambda_env.client("dynamodb", region_name="us-east-1").put_item(
        TableName="ledger",
        Item={
            "pk": {"S": "CATALOG"},
            "sk": {"S": "CURRENT"},
            "version": {"N": "3"},
            "stored_at": {"S": "2026-11-20T00:00:00.000000Z"},
            "data": {"B": b"\x00garbage"},
        },
    )
    report, _ = scan(lambda_env)
    ((where, message),) = codes(report)
    assert where == "price-catalog/stored" and "could not be read" in message


def test_rates_older_than_the_limit_for_a_scanned_region_are_a_finding(
    lambda_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN us-east-1's EC2 rates were last read 31 days ago, us-west-2's today (so the
    # stored catalog is still newer than the package's)
    old = (TODAY - timedelta(days=31)).isoformat()
    store_catalog(
        lambda_env,
        as_of=old,
        as_of_by={"ec2": {"us-east-1": old, "us-west-2": TODAY.isoformat()}},
    )
    # WHEN us-east-1 is scanned with the default limit of 30 days
    report, _ = scan(lambda_env)
    # THEN the staleness is a finding, named by region and date
    stale = [(w, m) for w, m in codes(report) if w == "price-catalog/us-east-1"]
    ((_, message),) = stale
    assert f"last checked {old}, 31 days ago (more than 30)" in message
    # AND with a limit of 40 days it is not
    monkeypatch.setenv(Env.PRICE_CATALOG_MAX_AGE_DAYS, "40")
    from costguard.wiring import CATALOG_CACHE

    CATALOG_CACHE.clear()
    report, _ = scan(lambda_env)
    assert [w for w, _ in codes(report) if w == "price-catalog/us-east-1"] == []


def test_a_rate_held_for_review_is_a_finding_of_every_scan(lambda_env: Any) -> None:
    store_catalog(
        lambda_env,
        rate_sources={
            "ec2": {
                "us-east-1": {
                    "g5.xlarge": {
                        "source": "price-list-api",
                        "as_of": TODAY.isoformat(),
                        "held_usd": "9.0",
                        "held_since": TODAY.isoformat(),
                    }
                }
            }
        },
    )
    report, _ = scan(lambda_env)
    assert g5_rate(report) == 2  # the held value is not used
    ((where, message),) = codes(report)
    assert where == "price-catalog/ec2/us-east-1/g5.xlarge"
    assert "says $9.0, +350.0% from $2.0; held for review" in message


def test_a_newer_package_catalog_beats_an_older_stored_one(lambda_env: Any) -> None:
    # GIVEN a stored catalog older than the one the upgraded package ships
    from costguard.adapters import catalog_store

    packaged = catalog_store.read_catalog_file().as_of
    store_catalog(lambda_env, as_of=(packaged - timedelta(days=1)).isoformat())
    report, _ = scan(lambda_env)
    assert report_json(report)["price_catalog_source"] == "bundled"


def test_a_newer_package_keeps_the_stored_rates_it_lacks_with_their_dates() -> None:
    from datetime import date
    from decimal import Decimal

    from costguard.domain.catalog_merge import BUNDLED_AND_STORED, catalog_findings
    from tests.support.fakes import InMemoryCatalogStore

    # GIVEN a refresh stored, on 2026-10-01, a type and a region the package does not price
    packaged = read_catalog_file().model_copy(update={"as_of": TODAY})
    assert "zz9.xlarge" not in packaged.ec2["us-east-1"]
    document: dict[str, Any] = json.loads(packaged.model_dump_json())
    document["ec2"]["us-east-1"]["g5.xlarge"] = "2.0"
    document["ec2"]["us-east-1"]["zz9.xlarge"] = "9.5"
    document["ec2"]["ap-northeast-1"] = {"g5.xlarge": "1.459"}
    document.update(version=7, as_of="2026-10-01")
    store = InMemoryCatalogStore()
    store.put(document, expected_version=0, at=MIDDAY)
    # WHEN the upgraded package's (newer) catalog is read with it
    catalog, in_use = CatalogReader(store, bundled=lambda: packaged).read()
    # THEN the package's rates win where it has them, the stored ones fill in the rest
    assert catalog.ec2_on_demand("us-east-1", "g5.xlarge") == packaged.ec2["us-east-1"]["g5.xlarge"]
    assert catalog.ec2_on_demand("us-east-1", "zz9.xlarge") == Decimal("9.5")
    assert catalog.ec2_on_demand("ap-northeast-1", "g5.xlarge") == Decimal("1.459")
    assert in_use.source == BUNDLED_AND_STORED
    # AND each keeps its own date: the stored rates are as old as they are
    book = in_use.book
    stored_on = date(2026, 10, 1)
    assert book.source_of("ec2", "us-east-1", "zz9.xlarge").as_of == stored_on  # type: ignore[union-attr]
    assert book.source_of("ec2", "us-east-1", "g5.xlarge").as_of == TODAY  # type: ignore[union-attr]
    assert book.region_as_of("ec2", "ap-northeast-1") == stored_on
    stale = catalog_findings(in_use, ("ap-northeast-1",), TODAY, 30)
    assert [f.resource for f in stale] == ["price-catalog/ap-northeast-1"]
