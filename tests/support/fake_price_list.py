"""A stand-in for the AWS Price List Query API over HTTP (moto does not implement it).

It speaks the real wire protocol (JSON 1.1, ``AWSPriceListService.GetProducts``), so the
CLI runs unchanged with ``AWS_ENDPOINT_URL`` pointing here, as a user's would at AWS.
Like the real API, a region it does not know answers with no products, not an error.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def price_item(attrs: dict[str, str], usd: str, unit: str = "Hrs") -> str:
    """One Price List item as the API returns it: a JSON document inside a string."""
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


def _bundled_rate(section: str, region: str, name: str) -> str:
    """The packaged catalog's rate for ``name``, in ``region`` if it has one there."""
    from costguard.adapters.catalog import read_catalog_file

    table = getattr(read_catalog_file(), section)
    found = table.get(region, {}).get(name) or next(
        (rates[name] for rates in table.values() if name in rates), None
    )
    return f"{found:.10f}" if found is not None else "1.2340000000"


@dataclass
class FakePriceList:
    """Prices every requested type in ``regions``; nothing anywhere else.

    At ``usd`` when given; else at the packaged catalog's rate times ``scale``, so that a
    refresh against it changes prices by as much as the test says (a real week's change
    is a few percent at most).
    """

    regions: frozenset[str] = frozenset({"us-east-1", "us-west-2", "eu-west-1"})
    usd: str | None = None
    scale: str = "1"
    #: When set, every request fails with this error code (e.g. ExpiredTokenException).
    reject_with: str | None = None
    #: "region/name" answered with no product at all, as AWS does for a type it does not
    #: offer in that region.
    withheld: frozenset[str] = frozenset()
    #: Names answered with a product but no on-demand term (Capacity Blocks only, say).
    other_terms_only: frozenset[str] = frozenset()
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: Where :func:`price_list_server` serves it.
    url: str = ""

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append(body)
        if self.reject_with:
            return 400, {"__type": self.reject_with, "message": f"{self.reject_with} (fake)"}
        filters = {f["Field"]: f["Value"] for f in body.get("Filters", [])}
        if filters.get("regionCode") not in self.regions:
            return 200, {"FormatVersion": "aws_v1", "PriceList": []}
        region = filters["regionCode"]
        if "instanceType" in filters:
            items = [
                self._item({"instanceType": t, "regionCode": region}, "ec2", region, t)
                for t in filters["instanceType"].split(",")
                if f"{region}/{t}" not in self.withheld
            ]
        elif "instanceName" in filters:
            items = [
                self._item({"instanceName": t}, "sagemaker", region, t)
                for t in filters["instanceName"].split(",")
                if f"{region}/{t}" not in self.withheld
            ]
        else:
            items = [price_item({"volumeApiName": "gp3"}, "0.0800000000", "GB-Mo")]
        return 200, {"FormatVersion": "aws_v1", "PriceList": items}

    def _item(self, attrs: dict[str, str], section: str, region: str, name: str) -> str:
        item = price_item(attrs, self.price(section, region, name))
        if name in self.other_terms_only:
            doc = json.loads(item)
            doc["terms"] = {"Reserved": doc["terms"]["OnDemand"]}
            return json.dumps(doc)
        return item

    def price(self, section: str, region: str, name: str) -> str:
        if self.usd is not None:
            return self.usd
        return f"{Decimal(_bundled_rate(section, region, name)) * Decimal(self.scale):.10f}"


@contextmanager
def price_list_server(fake: FakePriceList) -> Iterator[str]:
    """Serve ``fake`` on a free loopback port; yield its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            status, payload = fake.answer(json.loads(self.rfile.read(length) or b"{}"))
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake.url
    finally:
        server.shutdown()
        server.server_close()
