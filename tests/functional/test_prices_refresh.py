"""The price refresh against botocore's Stubber with Price List responses shaped as the
API records them (``PriceList`` holds JSON documents as strings), on a small fixture
catalog, never the packaged one: a routine refresh of the packaged file cannot break
these tests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from costguard.adapters.catalog import (
    CatalogDocuments,
    CatalogFile,
    read_catalog_file,
    write_catalog_file,
)
from costguard.adapters.pricing_api import PriceListApi
from costguard.services.price_refresh import PriceRefresh, RefreshContendedError
from costguard.wiring.refresh import refresh_catalog
from tests.support.fake_price_list import FakePriceList, price_item, price_list_server
from tests.support.fakes import InMemoryCatalogStore

BUNDLED_AS_OF = date(2026, 11, 15)
#: When the refresh runs; the catalog it stores is dated that day (TODAY).
REFRESHED_AT = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
TODAY = REFRESHED_AT.date()


def fixture_catalog(**changes: Any) -> CatalogFile:
    """Two regions, a retired type, and a field of the catalog's schema this code does not own."""
    data: dict[str, Any] = {
        "version": 2,
        "as_of": BUNDLED_AS_OF.isoformat(),
        "sources": ["fixture"],
        "ec2": {
            "us-east-1": {"g5.xlarge": "1.006", "p5.48xlarge": "55.04", "p3.2xlarge": "3.06"},
            "us-west-2": {"g5.xlarge": "1.006"},
        },
        "sagemaker": {"us-east-1": {"ml.g5.xlarge": "1.408"}},
        "ebs_gb_month": {"us-east-1": {"gp3": "0.08"}, "us-west-2": {"gp3": "0.08"}},
        "s3_standard_gb_month": {"us-east-1": "0.023"},
        "eks_cluster_hour": {"standard": "0.10", "extended": "0.60"},
        "retired": {"p3.2xlarge": "AWS no longer offers p3"},
        "confidence": {"ec2/p5.48xlarge": "low"},
        "a_later_field": {"kept": "as written"},
    }
    data.update(changes)
    return CatalogFile.model_validate(data)


def answer(stub: Stubber, service: str, items: list[str]) -> None:
    stub.add_response(
        "get_products",
        {"PriceList": items, "FormatVersion": "aws_v1"},
        {"ServiceCode": service, "Filters": ANY, "FormatVersion": "aws_v1"},
    )


def region_answers(
    stub: Stubber,
    region: str,
    ec2: Mapping[str, str] = {},
    sagemaker: Mapping[str, str] = {},
    ebs: Mapping[str, str] = {},
) -> None:
    """One region of the fixture: one batch per section (the fixture has < 50 names)."""
    answer(
        stub,
        "AmazonEC2",
        [price_item({"instanceType": t, "regionCode": region}, usd) for t, usd in ec2.items()],
    )
    answer(
        stub, "AmazonSageMaker", [price_item({"instanceName": t}, u) for t, u in sagemaker.items()]
    )
    answer(
        stub,
        "AmazonEC2",
        [price_item({"volumeApiName": v}, usd, "GB-Mo") for v, usd in ebs.items()],
    )
    storage_answers(stub)


def storage_answers(stub: Stubber, families: Mapping[str, list[str]] = {}) -> None:
    """The storage queries of one region, in the order they are made: snapshots, IOPS,
    throughput, S3, S3 Glacier Deep Archive (none answered unless ``families`` says)."""
    for service, family in STORAGE_QUERIES:
        answer(stub, service, list(families.get(family, [])))


#: (service, product family) of each storage query a region makes, in order.
STORAGE_QUERIES = (
    ("AmazonEC2", "Storage Snapshot"),
    ("AmazonEC2", "System Operation"),
    ("AmazonEC2", "Provisioned Throughput"),
    ("AmazonS3", "Storage"),
    ("AmazonS3GlacierDeepArchive", "Deep Archive"),
)


def throttled(stub: Stubber, times: int) -> None:
    for _ in range(times):
        stub.add_client_error(
            "get_products", "ThrottlingException", "Rate exceeded", http_status_code=400
        )


@pytest.fixture
def client() -> Any:
    return boto3.client("pricing", region_name="us-east-1")


class Run:
    def __init__(self, client: Any, store: InMemoryCatalogStore, hold_pct: str = "50") -> None:
        self.sleeps: list[float] = []
        self.service = PriceRefresh(
            store,
            PriceListApi(client, sleep=self.sleeps.append),
            CatalogDocuments(fixture_catalog()),
            hold_pct=Decimal(hold_pct),
        )


def stored(store: InMemoryCatalogStore) -> CatalogFile:
    current = store.current()
    assert current is not None
    return CatalogFile.model_validate(current.document)


FULL_EAST = {
    "g5.xlarge": "0.9990000000",
    "p5.48xlarge": "55.0400000000",
    "p3.2xlarge": "3.0600000000",
}


def test_a_normal_update_applies_the_new_rates_with_their_provenance(client: Any) -> None:
    # GIVEN the API answers every type of both regions, g5.xlarge a little cheaper
    store = InMemoryCatalogStore()
    with Stubber(client) as stub:
        region_answers(stub, "us-east-1", FULL_EAST, {"ml.g5.xlarge": "1.408"}, {"gp3": "0.08"})
        region_answers(stub, "us-west-2", {"g5.xlarge": "0.999"}, {}, {"gp3": "0.08"})
        # WHEN the guard refreshes
        outcome = Run(client, store).service.run(("us-east-1", "us-west-2"), REFRESHED_AT)
        stub.assert_no_pending_responses()
    # THEN the new rate is used, from the API as of today, and the catalog is fresh
    catalog = stored(store)
    assert outcome.written and catalog.version == 3 == outcome.version
    assert catalog.ec2["us-east-1"]["g5.xlarge"] == Decimal("0.999")
    source = catalog.rate_sources["ec2"]["us-east-1"]["g5.xlarge"]
    assert (source.source, source.as_of, source.kept_since) == ("price-list-api", TODAY, None)
    assert outcome.summary()["changed"] == [
        "ec2/us-east-1/g5.xlarge: 1.006 -> 0.999",
        "ec2/us-west-2/g5.xlarge: 1.006 -> 0.999",
    ]
    assert catalog.as_of == TODAY and outcome.summary()["as_of_moved"] is True
    assert catalog.sources[0].startswith("AWS Price List Query API")
    # AND the reference data it does not own is carried untouched: p3 stays retired
    assert catalog.model_extra is not None
    assert catalog.retired == {"p3.2xlarge": "AWS no longer offers p3"}
    assert catalog.confidence == {"ec2/p5.48xlarge": "low"}
    assert catalog.model_extra["a_later_field"] == {"kept": "as written"}
    # AND the first stored version is kept in the history
    assert store.get(3) == store.current()


def test_a_type_the_api_did_not_return_keeps_its_rate_and_is_listed(client: Any) -> None:
    store = InMemoryCatalogStore()
    east = {k: v for k, v in FULL_EAST.items() if k != "p5.48xlarge"}
    with Stubber(client) as stub:
        region_answers(stub, "us-east-1", east, {"ml.g5.xlarge": "1.408"}, {"gp3": "0.08"})
        first = Run(client, store).service.run(("us-east-1",), REFRESHED_AT)
        region_answers(stub, "us-east-1", east, {"ml.g5.xlarge": "1.408"}, {"gp3": "0.08"})
        later = Run(client, store).service.run(("us-east-1",), REFRESHED_AT + timedelta(days=7))
    catalog = stored(store)
    assert catalog.ec2["us-east-1"]["p5.48xlarge"] == Decimal("55.04")
    assert "ec2/us-east-1/p5.48xlarge" in first.summary()["kept_from_previous"]
    assert "ec2/us-east-1/p5.48xlarge" in later.summary()["kept_from_previous"]
    source = catalog.rate_sources["ec2"]["us-east-1"]["p5.48xlarge"]
    # Still the bundled rate, as of the bundled date, kept since the first refresh that missed it.
    assert (source.source, source.as_of, source.kept_since) == ("bundled", BUNDLED_AS_OF, TODAY)


def test_a_retired_type_the_api_no_longer_returns_is_kept_and_said_to_be_retired(
    client: Any,
) -> None:
    store = InMemoryCatalogStore()
    east = {k: v for k, v in FULL_EAST.items() if k != "p3.2xlarge"}
    with Stubber(client) as stub:
        region_answers(stub, "us-east-1", east, {"ml.g5.xlarge": "1.408"}, {"gp3": "0.08"})
        outcome = Run(client, store).service.run(("us-east-1",), REFRESHED_AT)
    assert stored(store).ec2["us-east-1"]["p3.2xlarge"] == Decimal("3.06")
    assert "ec2/us-east-1/p3.2xlarge (retired)" in outcome.summary()["kept_from_previous"]
    assert stored(store).retired == {"p3.2xlarge": "AWS no longer offers p3"}


@pytest.mark.parametrize(("usd", "held"), [("110.08", True), ("22.00", True), ("80.00", False)])
def test_a_suspicious_jump_is_held_for_review_not_applied(
    client: Any, usd: str, held: bool
) -> None:
    # GIVEN the API says p5.48xlarge moved from $55.04 by +100 %, -60 % or +45 %
    store = InMemoryCatalogStore()
    with Stubber(client) as stub:
        region_answers(
            stub,
            "us-east-1",
            {**FULL_EAST, "p5.48xlarge": usd},
            {"ml.g5.xlarge": "1.408"},
            {"gp3": "0.08"},
        )
        outcome = Run(client, store).service.run(("us-east-1",), REFRESHED_AT)
    catalog = stored(store)
    source = catalog.rate_sources["ec2"]["us-east-1"]["p5.48xlarge"]
    if held:
        # THEN beyond ±50 % the old rate stays in force and the new one waits for review
        assert catalog.ec2["us-east-1"]["p5.48xlarge"] == Decimal("55.04")
        assert (source.held_usd, source.held_since) == (Decimal(usd), TODAY)
        (line,) = outcome.summary()["held_for_review"]
        assert line.startswith("ec2/us-east-1/p5.48xlarge: the Price List API says $")
        assert "the old rate is still used" in line
    else:
        assert catalog.ec2["us-east-1"]["p5.48xlarge"] == Decimal(usd)
        assert source.held_usd is None and outcome.summary()["held_for_review"] == []


def test_the_hold_threshold_is_configurable(client: Any) -> None:
    store = InMemoryCatalogStore()
    with Stubber(client) as stub:
        region_answers(
            stub,
            "us-east-1",
            {**FULL_EAST, "p5.48xlarge": "110.08"},
            {"ml.g5.xlarge": "1.408"},
            {"gp3": "0.08"},
        )
        Run(client, store, hold_pct="150").service.run(("us-east-1",), REFRESHED_AT)
    assert stored(store).ec2["us-east-1"]["p5.48xlarge"] == Decimal("110.08")


def test_an_empty_region_keeps_its_date_and_the_catalog_is_not_marked_fresh(client: Any) -> None:
    # GIVEN us-west-2 answers nothing at all (as the API answers a region it does not know)
    store = InMemoryCatalogStore()
    with Stubber(client) as stub:
        region_answers(stub, "us-east-1", FULL_EAST, {"ml.g5.xlarge": "1.408"}, {"gp3": "0.08"})
        region_answers(stub, "us-west-2")
        outcome = Run(client, store).service.run(("us-east-1", "us-west-2"), REFRESHED_AT)
    catalog = stored(store)
    # THEN us-east-1 is fresh, us-west-2 keeps the bundled date, and so does the catalog
    assert catalog.as_of_by["ec2"]["us-east-1"] == TODAY
    assert catalog.as_of_by.get("ec2", {}).get("us-west-2", BUNDLED_AS_OF) == BUNDLED_AS_OF
    assert catalog.as_of == BUNDLED_AS_OF
    assert outcome.summary()["regions_without_prices"] == ["us-west-2"]
    assert outcome.summary()["as_of_moved"] is False
    assert catalog.ec2["us-west-2"]["g5.xlarge"] == Decimal("1.006")


def test_throttling_is_retried_with_backoff_then_the_rates_are_applied(client: Any) -> None:
    store = InMemoryCatalogStore()
    run = Run(client, store)
    with Stubber(client) as stub:
        throttled(stub, 2)
        region_answers(stub, "us-east-1", FULL_EAST, {"ml.g5.xlarge": "1.408"}, {"gp3": "0.08"})
        outcome = run.service.run(("us-east-1",), REFRESHED_AT)
        stub.assert_no_pending_responses()
    assert run.sleeps == [2.0, 4.0]
    assert outcome.written and outcome.summary()["failed_regions"] == {}
    assert stored(store).ec2["us-east-1"]["g5.xlarge"] == Decimal("0.999")


def test_a_region_throttled_past_the_retries_is_reported_and_left_as_it_was(client: Any) -> None:
    # GIVEN us-east-1 is read, and us-west-2 is throttled on every attempt
    store = InMemoryCatalogStore()
    run = Run(client, store)
    with Stubber(client) as stub:
        region_answers(stub, "us-east-1", FULL_EAST, {"ml.g5.xlarge": "1.408"}, {"gp3": "0.08"})
        throttled(stub, 4)
        outcome = run.service.run(("us-east-1", "us-west-2"), REFRESHED_AT)
        stub.assert_no_pending_responses()
    # THEN us-east-1 is stored, us-west-2 is untouched and named, never half-written
    catalog = stored(store)
    assert run.sleeps == [2.0, 4.0, 8.0]
    (why,) = outcome.summary()["failed_regions"].values()
    assert (
        list(outcome.summary()["failed_regions"]) == ["us-west-2"] and "ThrottlingException" in why
    )
    assert catalog.ec2["us-west-2"] == {"g5.xlarge": Decimal("1.006")}
    assert "us-west-2" not in catalog.as_of_by.get("ec2", {})
    assert "us-west-2" not in catalog.rate_sources.get("ec2", {})
    assert catalog.as_of == BUNDLED_AS_OF


def test_nothing_is_written_when_every_region_is_throttled(client: Any) -> None:
    store = InMemoryCatalogStore()
    with Stubber(client) as stub:
        throttled(stub, 4)
        outcome = Run(client, store).service.run(("us-east-1",), REFRESHED_AT)
    assert not outcome.written and store.current() is None and store.puts == 0


def test_a_refresh_that_loses_the_race_merges_onto_the_winner(client: Any) -> None:
    # GIVEN another refresh stores a version between our read and our write
    store = InMemoryCatalogStore()
    winner = fixture_catalog(
        version=3, ec2={"us-east-1": {"g5.xlarge": "1.1"}, "us-west-2": {"g5.xlarge": "1.006"}}
    )
    real_put = store.put
    raced = []

    def put(document: Mapping[str, Any], *, expected_version: int, at: datetime) -> int | None:
        if not raced:
            raced.append(real_put(winner.model_dump(mode="json"), expected_version=0, at=at))
        return real_put(document, expected_version=expected_version, at=at)

    store.put = put  # type: ignore[method-assign]
    with Stubber(client) as stub:
        region_answers(stub, "us-east-1", {"p5.48xlarge": "55.04"}, {}, {"gp3": "0.08"})
        outcome = Run(client, store).service.run(("us-east-1",), REFRESHED_AT)
    # THEN ours is stored on top of theirs (their g5 rate kept), fetched only once
    catalog = stored(store)
    assert raced == [3] and outcome.version == 4 == catalog.version
    assert catalog.ec2["us-east-1"]["g5.xlarge"] == Decimal("1.1")
    assert store.get(3) is not None


def test_gives_up_when_other_refreshes_keep_winning(client: Any) -> None:
    store = InMemoryCatalogStore()
    store.put = lambda document, *, expected_version, at: None  # type: ignore[method-assign]
    with Stubber(client) as stub:
        region_answers(stub, "us-east-1", FULL_EAST, {}, {"gp3": "0.08"})
        with pytest.raises(RefreshContendedError):
            Run(client, store).service.run(("us-east-1",), REFRESHED_AT)


def test_an_invalid_stored_catalog_is_replaced_from_the_bundled_one_and_said(client: Any) -> None:
    store = InMemoryCatalogStore()
    store.put({"version": 3, "as_of": "yesterday"}, expected_version=0, at=REFRESHED_AT)
    with Stubber(client) as stub:
        region_answers(stub, "us-east-1", FULL_EAST, {"ml.g5.xlarge": "1.408"}, {"gp3": "0.08"})
        outcome = Run(client, store).service.run(("us-east-1",), REFRESHED_AT)
    assert outcome.written and stored(store).version == 4
    assert "stored price catalog" in outcome.summary()["stored_catalog_problem"]


# -- prices refresh --out: the same refresh into a file ---------------------------------------


@pytest.fixture
def price_list() -> Iterator[tuple[FakePriceList, Any]]:
    """The fake Price List API over HTTP, and a real boto3 client pointed at it."""
    fake = FakePriceList()
    with price_list_server(fake) as url:
        yield fake, boto3.client("pricing", region_name="us-east-1", endpoint_url=url)


def test_refresh_into_a_file_starts_from_the_file_already_there(
    tmp_path: Path, price_list: tuple[FakePriceList, Any]
) -> None:
    # GIVEN a catalog file a previous refresh wrote, with a held rate in it
    fake, client = price_list
    out = tmp_path / "prices.json"
    write_catalog_file(fixture_catalog(), out)
    fake.scale = "1.01"
    # WHEN it is refreshed again
    summary = refresh_catalog(client, regions=("us-east-1",), output=out, today=TODAY)
    # THEN the file's own catalog was the base (its version, its retired field)
    catalog = read_catalog_file(out)
    assert summary["written"] and catalog.version == 3
    assert catalog.retired
    assert catalog.ec2["us-east-1"]["g5.xlarge"] == Decimal("1.01606")


def test_writes_nothing_when_no_region_returns_prices(
    tmp_path: Path, price_list: tuple[FakePriceList, Any]
) -> None:
    _, client = price_list
    out = tmp_path / "prices.json"
    summary = refresh_catalog(client, regions=("us-east-9",), output=out, today=TODAY)
    assert not out.exists()
    assert summary["written"] is False
    assert summary["regions_without_prices"] == ["us-east-9"]


def test_moves_as_of_only_when_every_region_of_the_catalog_was_read(
    tmp_path: Path, price_list: tuple[FakePriceList, Any]
) -> None:
    _, client = price_list
    previous = read_catalog_file()
    today = previous.as_of + timedelta(days=7)  # a week after the packaged catalog
    out = tmp_path / "prices.json"
    partial = refresh_catalog(client, regions=("us-east-1", "us-east-1"), output=out, today=today)
    assert read_catalog_file(out).as_of == previous.as_of and partial["as_of_moved"] is False
    whole = refresh_catalog(
        client, regions=("us-east-1", "us-west-2", "eu-west-1"), output=out, today=today
    )
    catalog = read_catalog_file(out)
    assert whole["as_of_moved"] is True and catalog.as_of == today
    assert catalog.version == previous.version + 2
    assert whole["held_for_review"] == []  # the fake answers today's rates


@pytest.mark.parametrize("region", ["us-east-1\n", "US-EAST-1", "us-east-١", "", "mars"])
def test_rejects_a_malformed_region_before_asking_the_api(
    tmp_path: Path, price_list: tuple[FakePriceList, Any], region: str
) -> None:
    fake, client = price_list
    with pytest.raises(ValueError, match="not AWS region names"):
        refresh_catalog(client, regions=(region,), output=tmp_path / "p.json", today=TODAY)
    assert fake.requests == []


#: A real EC2 on-demand item's attributes (abridged), as the Price List API records them.
LINUX_G5 = {
    "instanceType": "g5.xlarge",
    "regionCode": "us-east-1",
    "locationType": "AWS Region",
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
    "marketoption": "OnDemand",
    "operation": "RunInstances",
    "usagetype": "BoxUsage:g5.xlarge",
}


@pytest.mark.parametrize(
    "other",
    [
        pytest.param({"tenancy": "Dedicated", "usagetype": "DedicatedUsage:g5.xlarge"}, id="ded"),
        pytest.param({"licenseModel": "Bring your own license"}, id="byol"),
        pytest.param({"capacitystatus": "UnusedCapacityReservation"}, id="unused-odcr"),
        pytest.param({"operatingSystem": "Windows", "operation": "RunInstances:0002"}, id="win"),
        pytest.param({"regionCode": "us-west-2"}, id="another-region"),
    ],
)
def test_an_item_the_filters_exclude_is_never_read_as_the_linux_rate(
    client: Any, other: dict[str, str]
) -> None:
    # GIVEN an answer holding the Linux item, and an item for another OS, tenancy, license...
    store = InMemoryCatalogStore()
    with Stubber(client) as stub:
        answer(
            stub,
            "AmazonEC2",
            [price_item(LINUX_G5, "0.9990000000"), price_item({**LINUX_G5, **other}, "2.0")],
        )
        answer(stub, "AmazonSageMaker", [])
        answer(stub, "AmazonEC2", [price_item({"volumeApiName": "gp3"}, "0.08", "GB-Mo")])
        storage_answers(stub)
        # WHEN the guard refreshes
        outcome = Run(client, store).service.run(("us-east-1",), REFRESHED_AT)
    # THEN the Linux rate is applied; the other item is not a candidate at all
    assert stored(store).ec2["us-east-1"]["g5.xlarge"] == Decimal("0.999")
    assert outcome.summary()["rejected_answers"] == []


def test_two_items_at_different_prices_for_one_type_keep_the_last_rate_and_say_so(
    client: Any,
) -> None:
    # GIVEN SageMaker answers ml.g5.xlarge twice, at two prices, both matching the filters
    store = InMemoryCatalogStore()
    twice = [price_item({"instanceName": "ml.g5.xlarge"}, u) for u in ("1.41", "1.10")]
    with Stubber(client) as stub:
        answer(stub, "AmazonEC2", [price_item(LINUX_G5, "1.0060000000")])
        answer(stub, "AmazonSageMaker", twice)
        answer(stub, "AmazonEC2", [price_item({"volumeApiName": "gp3"}, "0.08", "GB-Mo")])
        storage_answers(stub)
        # WHEN the guard refreshes
        outcome = Run(client, store).service.run(("us-east-1",), REFRESHED_AT)
    # THEN neither price is taken: the rate stays, and the ambiguity is reported
    assert stored(store).sagemaker["us-east-1"]["ml.g5.xlarge"] == Decimal("1.408")
    (line,) = outcome.summary()["rejected_answers"]
    assert line.startswith("sagemaker/us-east-1/ml.g5.xlarge: ") and "$1.1, $1.41" in line


def test_a_duplicate_item_at_the_same_price_is_one_rate(client: Any) -> None:
    store = InMemoryCatalogStore()
    with Stubber(client) as stub:
        answer(stub, "AmazonEC2", [price_item(LINUX_G5, "0.999"), price_item(LINUX_G5, "0.99900")])
        answer(stub, "AmazonSageMaker", [])
        answer(stub, "AmazonEC2", [])
        storage_answers(stub)
        outcome = Run(client, store).service.run(("us-east-1",), REFRESHED_AT)
    assert stored(store).ec2["us-east-1"]["g5.xlarge"] == Decimal("0.999")
    assert outcome.summary()["rejected_answers"] == []


@pytest.mark.parametrize("usd", ["NaN", "Infinity", "sNaN", "1,006", "", "None"])
def test_a_malformed_price_is_rejected_and_the_other_rates_still_apply(
    client: Any, usd: str
) -> None:
    # GIVEN p5 answered with a price that is not a number, g5 with a good one
    store = InMemoryCatalogStore()
    p5 = {**LINUX_G5, "instanceType": "p5.48xlarge"}
    with Stubber(client) as stub:
        answer(stub, "AmazonEC2", [price_item(LINUX_G5, "0.999"), price_item(p5, usd)])
        answer(stub, "AmazonSageMaker", [])
        answer(stub, "AmazonEC2", [])
        storage_answers(stub)
        # WHEN the guard refreshes
        outcome = Run(client, store).service.run(("us-east-1",), REFRESHED_AT)
    # THEN g5 is updated, p5 keeps its rate, and the bad answer is reported
    catalog = stored(store)
    assert catalog.ec2["us-east-1"]["g5.xlarge"] == Decimal("0.999")
    assert catalog.ec2["us-east-1"]["p5.48xlarge"] == Decimal("55.04")
    (line,) = outcome.summary()["rejected_answers"]
    assert line.startswith("ec2/us-east-1/p5.48xlarge: ")
