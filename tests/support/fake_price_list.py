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


def price_item(
    attrs: dict[str, str],
    usd: str,
    unit: str = "Hrs",
    *,
    family: str = "Compute Instance",
    tiers: list[tuple[str, str, str]] | None = None,
) -> str:
    """One Price List item as the API returns it: a JSON document inside a string.

    ``tiers``: (beginRange, endRange, USD) of a tiered price, as S3 storage lists them;
    without it, one dimension at ``usd`` (the API's "0" to "Inf")."""
    dims = {
        f"SKU1.JRTCKXETXF.{i}": {
            "unit": unit,
            "pricePerUnit": {"USD": price},
            "beginRange": begin,
            "endRange": end,
            "description": "x",
        }
        for i, (begin, end, price) in enumerate(tiers or [("0", "Inf", usd)])
    }
    if tiers is None:  # as the fixtures were written before tiers: no range at all
        for dim in dims.values():
            del dim["beginRange"], dim["endRange"]
    return json.dumps(
        {
            "product": {"productFamily": family, "attributes": attrs, "sku": "SKU1"},
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    "SKU1.JRTCKXETXF": {
                        "priceDimensions": dims,
                        "sku": "SKU1",
                        "effectiveDate": "2025-06-01T00:00:00Z",
                    }
                }
            },
            "version": "20251101",
            "publicationDate": "2025-11-01T00:00:00Z",
        }
    )


#: The usage-type prefix of a region's items, as AWS writes them (us-east-1 has none).
USAGE_PREFIX = {"us-east-1": "", "us-west-2": "USW2-", "eu-west-1": "EU-"}
#: EBS provisioned tiers by usage type: (volume type, unit, above, Price List unit).
PROVISIONED_ITEMS = {
    "EBS:VolumeP-IOPS.gp3": ("gp3", "iops", 3000, "IOPS-Mo"),
    "EBS:VolumeP-IOPS.piops": ("io1", "iops", 0, "IOPS-Mo"),
    "EBS:VolumeP-IOPS.io2": ("io2", "iops", 0, "IOPS-Mo"),
    "EBS:VolumeP-IOPS.io2.tier2": ("io2", "iops", 32000, "IOPS-Mo"),
    "EBS:VolumeP-IOPS.io2.tier3": ("io2", "iops", 64000, "IOPS-Mo"),
    "EBS:VolumeP-Throughput.gp3": ("gp3", "throughput_mibps", 125, "GiBps-mo"),
}
#: S3 storage classes by usage type (Deep Archive is its own service).
S3_ITEMS = {
    "TimedStorage-ByteHrs": "standard",
    "TimedStorage-RRS-ByteHrs": "reduced_redundancy",
    "TimedStorage-SIA-ByteHrs": "standard_ia",
    "TimedStorage-ZIA-ByteHrs": "onezone_ia",
    "TimedStorage-GIR-ByteHrs": "glacier_ir",
    "TimedStorage-GlacierByteHrs": "glacier",
    "TimedStorage-INT-FA-ByteHrs": "intelligent_frequent",
    "TimedStorage-INT-IA-ByteHrs": "intelligent_infrequent",
    "TimedStorage-INT-AIA-ByteHrs": "intelligent_archive_instant",
    "TimedStorage-XZ-ByteHrs": "express_onezone",
}


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
    #: Pages answered (one a request: every answer fits one page).
    pages: int = 0
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
            items = self._storage(body.get("ServiceCode", ""), filters.get("productFamily"), region)
        self.pages += 1
        return 200, {"FormatVersion": "aws_v1", "PriceList": items}

    def _storage(self, service: str, family: str | None, region: str) -> list[str]:
        """The region's storage items of one product family, at the packaged catalog's
        rates (times ``scale``), shaped as AWS lists them."""
        from costguard.adapters.catalog import read_catalog_file

        catalog = read_catalog_file()
        where = {"regionCode": region, "locationType": "AWS Region"}
        prefix = USAGE_PREFIX.get(region, "")
        items: list[str] = []
        if service == "AmazonEC2" and family == "Storage":
            for vtype, usd in catalog.ebs_gb_month.get(region, {}).items():
                items.append(price_item({**where, "volumeApiName": vtype}, self._at(usd), "GB-Mo"))
        elif service == "AmazonEC2" and family == "Storage Snapshot":
            usd = catalog.ebs_snapshot_gb_month.get(region)
            if usd is not None:
                attrs = {**where, "usagetype": f"{prefix}EBS:SnapshotUsage"}
                items.append(price_item(attrs, self._at(usd), "GB-Mo", family=family))
                # the archive tier beside it: never the standard tier's rate
                archive = {**where, "usagetype": f"{prefix}EBS:SnapshotArchiveStorage"}
                items.append(price_item(archive, "0.0125", "GB-Mo", family=family))
        elif service == "AmazonEC2" and family in ("System Operation", "Provisioned Throughput"):
            tiers = catalog.ebs_provisioned_month.get(region, {})
            for usage, (vtype, unit, above, pl_unit) in PROVISIONED_ITEMS.items():
                if (unit == "iops") != (family == "System Operation"):
                    continue
                usd = dict(tiers.get(vtype, {}).get(unit, [])).get(above)
                if usd is None:
                    continue
                if pl_unit == "GiBps-mo":  # the Price List's unit: 1 GiB/s = 1024 MiB/s
                    usd = usd * 1024
                attrs = {**where, "usagetype": f"{prefix}{usage}", "volumeApiName": vtype}
                items.append(price_item(attrs, self._at(usd), pl_unit, family=family))
            if family == "System Operation":  # the I/O requests of magnetic volumes
                io = {**where, "usagetype": f"{prefix}EBS:VolumeIOUsage"}
                items.append(price_item(io, "0.0000000500", "IOs", family=family))
        elif service == "AmazonS3" and family == "Storage":
            classes = catalog.s3_class_gb_month.get(region, {})
            for usage, cls in S3_ITEMS.items():
                if cls in classes:
                    items.append(self._s3(where, f"{prefix}{usage}", classes[cls], family))
        elif service == "AmazonS3GlacierDeepArchive":
            usd = catalog.s3_class_gb_month.get(region, {}).get("deep_archive")
            if usd is not None:
                items.append(self._s3(where, f"{prefix}TimedStorage-GDA-ByteHrs", usd, "Storage"))
        return items

    def _s3(self, where: dict[str, str], usage: str, usd: Decimal, family: str) -> str:
        """An S3 storage item in its three tiers (first 50 TB, next 450 TB, over 500 TB),
        each cheaper than the one before, as S3 Standard is listed."""
        said = self._at(usd)
        if self.usd is None:
            first = Decimal(said)
            lower = [f"{first * Decimal(k):.10f}" for k in ("0.95", "0.9")]
        else:  # whatever the test says the API answers, in every tier
            lower = [said, said]
        tiers = [("0", "51200", said), ("51200", "512000", lower[0]), ("512000", "Inf", lower[1])]
        attrs = {**where, "usagetype": usage}
        return price_item(attrs, "", "GB-Mo", family=family, tiers=tiers)

    def _at(self, usd: Decimal) -> str:
        return self.usd if self.usd is not None else f"{usd * Decimal(self.scale):.10f}"

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
