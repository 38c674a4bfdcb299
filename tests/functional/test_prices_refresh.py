"""`costguard prices refresh` against botocore's Stubber with real-shaped Price List items."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import boto3
from botocore.stub import ANY, Stubber

from costguard.adapters.catalog import load_catalog, read_catalog_file
from costguard.adapters.pricing_api import refresh_catalog


def price_item(attrs: dict[str, str], usd: str, unit: str = "Hrs") -> str:
    return json.dumps(
        {
            "product": {"productFamily": "Compute Instance", "attributes": attrs, "sku": "SKU1"},
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    "SKU1.JRTCKXETXF": {
                        "priceDimensions": {
                            "SKU1.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": unit,
                                "pricePerUnit": {"USD": usd},
                                "description": "x",
                            }
                        },
                        "sku": "SKU1",
                        "effectiveDate": "2025-06-01T00:00:00Z",
                    }
                }
            },
            "version": "20251101",
            "publicationDate": "2025-11-01T00:00:00Z",
        }
    )


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
