"""Rebuild the price catalog from the AWS Price List Query API (``pricing:GetProducts``).

Only list prices are read: EC2 Linux shared-tenancy on-demand for the accelerated
types, SageMaker on-demand ``ml.*`` rates, and EBS GB-month. Anything the API does
not return is kept from the previous catalog and reported, never dropped to $0.

``as_of`` means "every region here was checked against the API that day", so it
moves only when every requested region returned prices. A region that returns none
(a typo the API does not know, such as ``us-est-1``) is an error for that region.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from costguard.adapters.aws import chunks, reading
from costguard.adapters.catalog import CatalogFile, read_catalog_file, write_catalog_file
from costguard.settings import REGION

if TYPE_CHECKING:
    from mypy_boto3_pricing import PricingClient
    from mypy_boto3_pricing.type_defs import FilterTypeDef

#: ANY_OF filters take a bounded list of values; stay well inside it.
ANY_OF_LIMIT = 50
EC2_FILTERS = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
}


def _filters(
    fixed: dict[str, str], any_of: tuple[str, list[str]] | None = None
) -> list[FilterTypeDef]:
    out: list[FilterTypeDef] = [
        {"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fixed.items()
    ]
    if any_of is not None:
        out.append({"Type": "ANY_OF", "Field": any_of[0], "Value": ",".join(any_of[1])})
    return out


def on_demand_usd(price_item: dict[str, Any], unit: str) -> Decimal | None:
    """The single positive on-demand USD price per ``unit`` in one Price List item."""
    prices = []
    for term in (price_item.get("terms", {}).get("OnDemand") or {}).values():
        for dim in (term.get("priceDimensions") or {}).values():
            if dim.get("unit") != unit:
                continue
            usd = Decimal(str(dim.get("pricePerUnit", {}).get("USD", "0")))
            if usd > 0:
                prices.append(usd)
    return min(prices) if prices else None


def _products(
    client: PricingClient, service: str, filters: Sequence[FilterTypeDef]
) -> Iterator[dict[str, Any]]:
    with reading("pricing", client.meta.region_name or "us-east-1", "GetProducts"):
        pages = client.get_paginator("get_products").paginate(
            ServiceCode=service, Filters=filters, FormatVersion="aws_v1"
        )
        for page in pages:
            for raw in page.get("PriceList", []):
                yield json.loads(raw) if isinstance(raw, str) else raw


def _normalise(value: Decimal) -> Decimal:
    return value.normalize() if value == value.to_integral() else Decimal(str(float(value)))


def fetch_ec2(client: PricingClient, region: str, types: Iterable[str]) -> dict[str, Decimal]:
    found: dict[str, Decimal] = {}
    for batch in chunks(sorted(set(types)), ANY_OF_LIMIT):
        filters = _filters({**EC2_FILTERS, "regionCode": region}, ("instanceType", batch))
        for item in _products(client, "AmazonEC2", filters):
            attrs = item.get("product", {}).get("attributes", {})
            usd = on_demand_usd(item, "Hrs")
            if usd is not None and attrs.get("instanceType"):
                found[attrs["instanceType"]] = _normalise(usd)
    return found


def fetch_sagemaker(client: PricingClient, region: str, types: Iterable[str]) -> dict[str, Decimal]:
    found: dict[str, Decimal] = {}
    for batch in chunks(sorted(set(types)), ANY_OF_LIMIT):
        filters = _filters({"regionCode": region, "component": "Hosting"}, ("instanceName", batch))
        for item in _products(client, "AmazonSageMaker", filters):
            attrs = item.get("product", {}).get("attributes", {})
            usd = on_demand_usd(item, "Hrs")
            name = attrs.get("instanceName") or attrs.get("instanceType")
            if usd is not None and name:
                found[name] = _normalise(usd)
    return found


def fetch_ebs(client: PricingClient, region: str) -> dict[str, Decimal]:
    found: dict[str, Decimal] = {}
    filters = _filters({"regionCode": region, "productFamily": "Storage"})
    for item in _products(client, "AmazonEC2", filters):
        attrs = item.get("product", {}).get("attributes", {})
        usd = on_demand_usd(item, "GB-Mo")
        if usd is not None and attrs.get("volumeApiName"):
            found[attrs["volumeApiName"]] = _normalise(usd)
    return found


def refresh_catalog(
    client: PricingClient,
    *,
    regions: tuple[str, ...],
    output: Path,
    today: date,
    progress: Callable[[str], None] = lambda _m: None,
    previous: CatalogFile | None = None,
) -> dict[str, Any]:
    """Fetch current list prices and write a new catalog; return what changed.

    Regions that return prices are updated. If any requested region returns none,
    ``as_of`` keeps its old date (the catalog is not marked fresh), the summary lists
    the region under ``regions_without_prices``, and the caller should fail; the file
    is written only if some price actually changed.
    """
    regions = tuple(dict.fromkeys(regions))
    bad = [r for r in regions if not (r.isascii() and REGION.fullmatch(r))]
    if not regions:
        raise ValueError("no regions to refresh")
    if bad:
        raise ValueError(f"not AWS region names: {', '.join(map(repr, bad))}")
    old = previous or read_catalog_file()
    ec2_types = {t for rates in old.ec2.values() for t in rates}
    sm_types = {t for rates in old.sagemaker.values() for t in rates}
    new = old.model_copy(deep=True)
    changed: list[str] = []
    kept: list[str] = []
    empty: list[str] = []
    for region in regions:
        progress(f"fetching {region} prices")
        sections = (
            ("ec2", fetch_ec2(client, region, ec2_types), ec2_types),
            ("sagemaker", fetch_sagemaker(client, region, sm_types), sm_types),
            ("ebs_gb_month", fetch_ebs(client, region), set(old.ebs_gb_month.get(region, {}))),
        )
        if not any(fetched for _, fetched, _ in sections):
            # Nothing at all (EBS is sold in every region): not a region the API knows.
            empty.append(region)
            progress(f"{region}: the Price List API returned no prices; {region} is left as it was")
            continue
        for section, fetched, wanted in sections:
            table: dict[str, dict[str, Decimal]] = getattr(new, section)
            rates = table.setdefault(region, {})
            for name, usd in fetched.items():
                if rates.get(name) != usd:
                    changed.append(f"{section}/{region}/{name}: {rates.get(name)} -> {usd}")
                rates[name] = usd
            kept += [f"{section}/{region}/{n}" for n in sorted(wanted - set(fetched)) if n in rates]
    fresh = not empty
    fetched_from = [r for r in regions if r not in empty]
    if fresh:
        new.as_of = today
        line = f"AWS Price List Query API (pricing:GetProducts), fetched {today.isoformat()}"
    else:
        line = (
            f"AWS Price List Query API (pricing:GetProducts), fetched {today.isoformat()} "
            f"for {', '.join(fetched_from)} only"
        )
    written = fresh or bool(changed)
    if written:
        new.version = old.version + 1
        new.sources = [line, *[s for s in old.sources if "Price List Query API" not in s]]
        CatalogFile.model_validate(json.loads(new.model_dump_json()))
        write_catalog_file(new, output)
    return {
        "output": str(output),
        "written": written,
        "version": new.version if written else old.version,
        "as_of": (today if fresh else old.as_of).isoformat(),
        "as_of_moved": fresh,
        "regions_without_prices": empty,
        "changed": changed,
        "kept_from_previous": kept,
    }
