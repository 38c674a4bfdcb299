"""Rebuild the price catalog from the AWS Price List Query API (``pricing:GetProducts``).

Only list prices are read: EC2 Linux shared-tenancy on-demand for the accelerated
types, SageMaker on-demand ``ml.*`` rates, and EBS GB-month. Anything the API does
not return is kept from the previous catalog and reported, never dropped to $0.

``as_of`` means "every rate here was checked against the API on or after that day":
it is tracked per (service, region), and the catalog's is the oldest of them. A region
that returns none (a typo the API does not know, such as ``us-est-1``) keeps its date
and is an error for that region. How fetched prices are merged: ``domain.catalog_merge``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from costguard.adapters.aws import chunks, reading
from costguard.ports import PriceAnswer, ThrottledError
from costguard.retry import exponential, retrying
from costguard.settings import one_line

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


class MalformedPriceError(ValueError):
    """A Price List item whose USD price is not a number (``NaN``, ``Infinity``, text)."""


def on_demand_usd(price_item: dict[str, Any], unit: str) -> Decimal | None:
    """The single positive on-demand USD price per ``unit`` in one Price List item.

    Only ``OnDemand`` terms are read (never ``Reserved``). A price that is not a finite
    number raises :class:`MalformedPriceError`: the item is not a rate, whatever else it says.
    """
    prices = []
    for term in (price_item.get("terms", {}).get("OnDemand") or {}).values():
        for dim in (term.get("priceDimensions") or {}).values():
            if dim.get("unit") != unit:
                continue
            raw = (dim.get("pricePerUnit") or {}).get("USD", "0")
            try:
                usd = Decimal(str(raw))
            except InvalidOperation:
                raise MalformedPriceError(
                    f"price {one_line(str(raw), 40)!r} is not a number"
                ) from None
            if not usd.is_finite():
                raise MalformedPriceError(
                    f"price {one_line(str(raw), 40)!r} is not a finite number"
                )
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


#: What every item read must say of itself, when it says it: the filters are asked of
#: the API, and checked again here, because an answer that ignored one (a Windows, BYOL,
#: Dedicated or capacity-reservation item) would otherwise replace the rate unseen.
EC2_ITEM = {**EC2_FILTERS, "marketoption": "OnDemand", "locationType": "AWS Region"}
SAGEMAKER_ITEM = {"component": "Hosting", "locationType": "AWS Region"}
EBS_ITEM = {"locationType": "AWS Region"}


def _off_filter(item: Mapping[str, Any], expected: Mapping[str, str]) -> bool:
    """An item one of whose attributes says something other than the filter asked."""
    attrs = (item.get("product") or {}).get("attributes") or {}
    return any(attrs.get(k) not in (None, v) for k, v in expected.items())


class _Candidates:
    """Each name's prices as read from the items that match; one price, or none.

    Several items for one name at one price are one rate (a duplicate SKU). At different
    prices it is ambiguous: no rate is taken (never the last one read), and the name is
    reported, so that its last rate is kept rather than silently replaced.
    """

    def __init__(self, section: str, region: str, rejected: list[str]) -> None:
        self._where = f"{section}/{region}"
        self._region = region
        self._prices: dict[str, set[Decimal]] = {}
        self._malformed: dict[str, str] = {}
        self._seen: set[str] = set()
        self._rejected = rejected

    def add(self, name: str, item: dict[str, Any], unit: str) -> None:
        self._seen.add(name)
        try:
            usd = on_demand_usd(item, unit)
        except MalformedPriceError as exc:
            self._malformed.setdefault(name, str(exc))
            return
        if usd is not None:
            self._prices.setdefault(name, set()).add(_normalise(usd))

    def found(self) -> dict[str, Decimal]:
        out: dict[str, Decimal] = {}
        for name in sorted(set(self._prices) | set(self._malformed)):
            prices = self._prices.get(name, set())
            if name in self._malformed:
                self._rejected.append(
                    f"{self._where}/{name}: the Price List API's {self._malformed[name]}; "
                    "the last rate is kept"
                )
            elif len(prices) > 1:
                said = ", ".join(f"${p}" for p in sorted(prices))
                self._rejected.append(
                    f"{self._where}/{name}: the Price List API answered {len(prices)} different "
                    f"prices ({said}); ambiguous, the last rate is kept"
                )
            else:
                out[name] = next(iter(prices))
        return out

    def absent(self, wanted: Iterable[str], product: str) -> dict[str, str]:
        """Why each name asked for has no rate: the region lists no such product (AWS does
        not offer it there), or lists it with no on-demand price (Capacity Blocks,
        Savings Plans or reservations only). A malformed or ambiguous answer is not absent:
        it is rejected, and said as such."""
        out = {}
        for name in sorted(set(wanted) - set(self._prices) - set(self._malformed)):
            out[name] = (
                f"no on-demand rate in the Price List for {self._region} (the product is "
                "listed with other terms only, such as Capacity Blocks or Savings Plans)"
                if name in self._seen
                else f"not offered in {self._region} (no {product} product in the Price List)"
            )
        return out


def fetch_ec2(
    client: PricingClient,
    region: str,
    types: Iterable[str],
    rejected: list[str] | None = None,
    absent: dict[str, str] | None = None,
) -> dict[str, Decimal]:
    found = _Candidates("ec2", region, rejected if rejected is not None else [])
    types = sorted(set(types))
    for batch in chunks(types, ANY_OF_LIMIT):
        filters = _filters({**EC2_FILTERS, "regionCode": region}, ("instanceType", batch))
        expected = {**EC2_ITEM, "regionCode": region}
        for item in _products(client, "AmazonEC2", filters):
            name = (item.get("product") or {}).get("attributes", {}).get("instanceType")
            if name in batch and not _off_filter(item, expected):
                found.add(name, item, "Hrs")
    out = found.found()
    if absent is not None:
        absent.update(found.absent(types, "EC2"))
    return out


def fetch_sagemaker(
    client: PricingClient,
    region: str,
    types: Iterable[str],
    rejected: list[str] | None = None,
    absent: dict[str, str] | None = None,
) -> dict[str, Decimal]:
    found = _Candidates("sagemaker", region, rejected if rejected is not None else [])
    types = sorted(set(types))
    for batch in chunks(types, ANY_OF_LIMIT):
        filters = _filters({"regionCode": region, "component": "Hosting"}, ("instanceName", batch))
        expected = {**SAGEMAKER_ITEM, "regionCode": region}
        for item in _products(client, "AmazonSageMaker", filters):
            attrs = (item.get("product") or {}).get("attributes", {})
            name = attrs.get("instanceName") or attrs.get("instanceType")
            if name in batch and not _off_filter(item, expected):
                found.add(name, item, "Hrs")
    out = found.found()
    if absent is not None:
        absent.update(found.absent(types, "SageMaker hosting"))
    return out


def fetch_ebs(
    client: PricingClient, region: str, rejected: list[str] | None = None
) -> dict[str, Decimal]:
    found = _Candidates("ebs_gb_month", region, rejected if rejected is not None else [])
    filters = _filters({"regionCode": region, "productFamily": "Storage"})
    expected = {**EBS_ITEM, "regionCode": region}
    for item in _products(client, "AmazonEC2", filters):
        name = (item.get("product") or {}).get("attributes", {}).get("volumeApiName")
        if name and not _off_filter(item, expected):
            found.add(name, item, "GB-Mo")
    return found.found()


class PriceListApi:
    """:class:`costguard.ports.PriceSource` on the Price List Query API.

    A throttled batch is retried with exponential backoff (on top of botocore's own
    retries) before the region is given up as failed: the refresh runs weekly, so a
    minute of patience is cheap, and a half-read region is never stored.
    """

    def __init__(
        self,
        client: PricingClient,
        *,
        attempts: int = 4,
        backoff_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._sleep = sleep

    def _patiently(self, fetch: Callable[[], dict[str, Decimal]]) -> dict[str, Decimal]:
        backoff = exponential(self._backoff_s)
        return retrying(
            fetch,
            attempts=self._attempts,
            delay=lambda e, n: backoff(n) if isinstance(e, ThrottledError) else None,
            sleep=self._sleep,
        )

    def fetch(self, region: str, wanted: Mapping[str, frozenset[str]]) -> PriceAnswer:
        c = self._client
        rejected: list[str] = []
        absent: dict[str, dict[str, str]] = {}

        def noting(
            section: str, fetch: Callable[[list[str], dict[str, str]], dict[str, Decimal]]
        ) -> dict[str, Decimal]:
            # A retried batch starts its notes again: only the read that counted reports.
            def once() -> dict[str, Decimal]:
                notes: list[str] = []
                missing: dict[str, str] = {}
                got = fetch(notes, missing)
                rejected.extend(notes)
                if missing:
                    absent[section] = missing
                return got

            return self._patiently(once)

        prices = {
            "ec2": noting("ec2", lambda n, a: fetch_ec2(c, region, wanted.get("ec2", ()), n, a)),
            "sagemaker": noting(
                "sagemaker",
                lambda n, a: fetch_sagemaker(c, region, wanted.get("sagemaker", ()), n, a),
            ),
            # Every EBS volume type of the region: one small query, no names needed.
            "ebs_gb_month": noting("ebs_gb_month", lambda n, _a: fetch_ebs(c, region, n)),
        }
        return PriceAnswer(prices, rejected, absent)
