"""`costguard prices refresh` against botocore's Stubber and a fake Price List API over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from costguard.adapters.catalog import load_catalog, read_catalog_file, write_catalog_file
from costguard.adapters.pricing_api import refresh_catalog
from tests.fake_price_list import FakePriceList, price_item, price_list_server
from tests.support.catalog import FIXTURE_CATALOG_PATH


def test_refresh_rewrites_prices_it_finds_and_keeps_the_rest(tmp_path: Path) -> None:
    client = boto3.client("pricing", region_name="us-east-1")
    previous = read_catalog_file()
    n_ec2_batches = -(-len({t for r in previous.ec2.values() for t in r}) // 50)
    n_sm_batches = -(-len({t for r in previous.sagemaker.values() for t in r}) // 50)
    with Stubber(client) as stub:
        for i in range(n_ec2_batches):
            items = (
                [
                    price_item(
                        {"instanceType": "p5.48xlarge", "regionCode": "us-east-1"}, "55.0400000000"
                    )
                ]
                if i == 0
                else []
            )
            items += (
                [
                    price_item(
                        {"instanceType": "g5.xlarge", "regionCode": "us-east-1"}, "0.9990000000"
                    )
                ]
                if i == 0
                else []
            )
            stub.add_response(
                "get_products",
                {"PriceList": items, "FormatVersion": "aws_v1"},
                {"ServiceCode": "AmazonEC2", "Filters": ANY, "FormatVersion": "aws_v1"},
            )
        for _ in range(n_sm_batches):
            stub.add_response(
                "get_products",
                {
                    "PriceList": [price_item({"instanceName": "ml.p5.48xlarge"}, "63.2960000000")],
                    "FormatVersion": "aws_v1",
                },
                {"ServiceCode": "AmazonSageMaker", "Filters": ANY, "FormatVersion": "aws_v1"},
            )
        stub.add_response(
            "get_products",
            {
                "PriceList": [price_item({"volumeApiName": "gp3"}, "0.0800000000", "GB-Mo")],
                "FormatVersion": "aws_v1",
            },
            {"ServiceCode": "AmazonEC2", "Filters": ANY, "FormatVersion": "aws_v1"},
        )
        out = tmp_path / "prices.json"
        summary: dict[str, Any] = refresh_catalog(
            client, regions=("us-east-1",), output=out, today=date(2026, 11, 29)
        )

    catalog = load_catalog(out)
    assert catalog.as_of == date(2026, 11, 29)
    assert catalog.version == previous.version + 1
    assert str(catalog.ec2["us-east-1"]["g5.xlarge"]) == "0.999"
    assert summary["changed"] == ["ec2/us-east-1/g5.xlarge: 1.006 -> 0.999"]
    # Types the API did not return keep their previous price and are listed, never dropped.
    assert catalog.ec2["us-east-1"]["p4d.24xlarge"] == previous.ec2["us-east-1"]["p4d.24xlarge"]
    assert "ec2/us-east-1/p4d.24xlarge" in summary["kept_from_previous"]
    assert "Price List Query API" in catalog.sources[0]


TODAY = date(2026, 11, 29)


@pytest.fixture
def price_list() -> Iterator[tuple[FakePriceList, Any]]:
    """The fake Price List API over HTTP, and a real boto3 client pointed at it."""
    fake = FakePriceList()
    with price_list_server(fake) as url:
        yield fake, boto3.client("pricing", region_name="us-east-1", endpoint_url=url)


def test_keeps_as_of_when_a_requested_region_returns_no_prices(
    tmp_path: Path, price_list: tuple[FakePriceList, Any]
) -> None:
    # GIVEN a refresh of one real region and one typo the API answers with nothing
    _, client = price_list
    previous = read_catalog_file(
        FIXTURE_CATALOG_PATH
    )  # its as_of is not TODAY, whatever the bundled
    out = tmp_path / "prices.json"
    # WHEN the catalog is refreshed
    summary = refresh_catalog(
        client, regions=("us-east-1", "us-est-1"), output=out, today=TODAY, previous=previous
    )
    # THEN the real region's prices are updated, but the catalog is not marked fresh
    catalog = read_catalog_file(out)
    assert catalog.as_of == previous.as_of != TODAY
    assert summary["as_of"] == previous.as_of.isoformat()
    assert summary["as_of_moved"] is False
    assert summary["regions_without_prices"] == ["us-est-1"]
    assert str(catalog.ec2["us-east-1"]["p5.48xlarge"]) == "1.234"
    assert "us-est-1" not in catalog.ec2
    assert catalog.sources[0].endswith("for us-east-1 only")


def test_writes_nothing_when_no_region_returns_prices(
    tmp_path: Path, price_list: tuple[FakePriceList, Any]
) -> None:
    _, client = price_list
    out = tmp_path / "prices.json"
    summary = refresh_catalog(client, regions=("us-east-9",), output=out, today=TODAY)
    assert not out.exists()
    assert summary["written"] is False
    assert summary["regions_without_prices"] == ["us-east-9"]


def test_moves_as_of_only_when_every_region_returns_prices(
    tmp_path: Path, price_list: tuple[FakePriceList, Any]
) -> None:
    _, client = price_list
    previous = read_catalog_file()
    out = tmp_path / "prices.json"
    summary = refresh_catalog(
        client, regions=("us-east-1", "eu-west-1", "us-east-1"), output=out, today=TODAY
    )
    catalog = read_catalog_file(out)
    assert catalog.as_of == TODAY
    assert catalog.version == previous.version + 1
    assert summary["as_of_moved"] is True
    assert summary["regions_without_prices"] == []
    assert catalog.sources[0].endswith(f"fetched {TODAY.isoformat()}")


@pytest.mark.parametrize("region", ["us-east-1\n", "US-EAST-1", "us-east-١", "", "mars"])
def test_rejects_a_malformed_region_before_asking_the_api(
    tmp_path: Path, price_list: tuple[FakePriceList, Any], region: str
) -> None:
    fake, client = price_list
    with pytest.raises(ValueError, match="not AWS region names"):
        refresh_catalog(client, regions=(region,), output=tmp_path / "p.json", today=TODAY)
    assert fake.requests == []


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "is not JSON"),
        ('{"version": 0}', "version: Input should be greater than or equal to 1 (got 0)"),
    ],
)
def test_a_broken_catalog_file_is_one_clear_error(
    tmp_path: Path, content: str, expected: str
) -> None:
    from costguard.adapters.catalog import CatalogError

    path = tmp_path / "prices.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CatalogError) as caught:
        read_catalog_file(path)
    message = str(caught.value)
    assert expected in message and str(path) in message
    assert "pydantic.dev" not in message and "\n" not in message


def test_a_failed_write_leaves_the_previous_catalog_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.adapters.catalog import CatalogError

    def disk_full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    path = tmp_path / "prices.json"
    catalog = read_catalog_file()
    write_catalog_file(catalog, path)
    before = path.read_bytes()
    monkeypatch.setattr("os.replace", disk_full)
    with pytest.raises(CatalogError, match="No space"):
        write_catalog_file(catalog.model_copy(update={"version": 99}), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["prices.json"]  # no temporary file left
