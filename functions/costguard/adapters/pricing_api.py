"""Rebuild the price catalog from the AWS Price List Query API (``pricing:GetProducts``).

Only list prices are read: EC2 Linux shared-tenancy on-demand for the accelerated
types, SageMaker on-demand ``ml.*`` rates, and storage: EBS GB-month, EBS snapshot
storage (standard tier), EBS provisioned IOPS (gp3 above 3,000, io1, io2 in its three
tiers) and gp3 throughput above 125 MiB/s, and S3 storage by class (the first tier of a
tiered price: ``domain.storage`` prices every byte at it). Anything the API does not
return is kept from the previous catalog and reported, never dropped to $0.

Calls: per region, one query per EC2/SageMaker batch of 50 names, and one query per
storage product family (EBS volumes, snapshots, "System Operation" for IOPS,
"Provisioned Throughput", S3 storage, and S3 Glacier Deep Archive, which the Price List
files under its own service code), each paginated; never one per name.

Storage items are picked by their usage type (region prefix such as ``USW2-`` removed),
matched exactly: a family holds more than storage rates (EBS I/O requests, S3 staging
and small-object overheads), and the ``group`` attribute of io2's higher tiers is not
documented; an item of another unit than the one asked is not taken.

``as_of`` means "every rate here was checked against the API on or after that day":
it is tracked per (service, region), and the catalog's is the oldest of them. A region
that returns none (a typo the API does not know, such as ``us-est-1``) keeps its date
and is an error for that region. How fetched prices are merged: ``domain.catalog_merge``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from costguard.adapters.aws import chunks, reading
from costguard.domain.storage import IOPS, SNAPSHOT_TIER, THROUGHPUT, tier_key
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


def _units(price_item: Mapping[str, Any]) -> set[str]:
    """The units of an item's on-demand price dimensions."""
    return {
        str(dim.get("unit"))
        for term in (price_item.get("terms", {}).get("OnDemand") or {}).values()
        for dim in (term.get("priceDimensions") or {}).values()
    }


def first_tier_usd(price_item: dict[str, Any], unit: str) -> Decimal | None:
    """The on-demand USD price per ``unit`` of the first tier of one Price List item (the
    dimension with the lowest ``beginRange``; S3 Standard's first 50 TB): the tier
    ``domain.storage`` prices every byte at. An item of one dimension is its own first tier.

    Raises :class:`MalformedPriceError` when the tiers cannot be ordered (a ``beginRange``
    missing or not a number), when none begins at 0 (the first tier missing, or a range
    below zero), when two dimensions claim the first tier at different prices,
    or when the first tier is not a positive finite number (a free first tier would
    price every byte at $0). None when the item has no on-demand price per ``unit``.
    """
    dims = [
        dim
        for term in (price_item.get("terms", {}).get("OnDemand") or {}).values()
        for dim in (term.get("priceDimensions") or {}).values()
        if dim.get("unit") == unit
    ]
    if not dims:
        return None
    tiers: list[tuple[Decimal, Decimal]] = []
    for dim in dims:
        raw = (dim.get("pricePerUnit") or {}).get("USD", "")
        begin = dim.get("beginRange", "0" if len(dims) == 1 else None)
        try:
            usd, start = Decimal(str(raw)), Decimal(str(begin))
        except InvalidOperation:
            raise MalformedPriceError(
                f"tier {one_line(str(begin), 20)!r} at {one_line(str(raw), 40)!r} is not a "
                "price of a tier"
            ) from None
        if not (usd.is_finite() and start.is_finite()):
            raise MalformedPriceError(f"price {one_line(str(raw), 40)!r} is not a finite number")
        tiers.append((start, usd))
    floor = min(start for start, _ in tiers)
    if floor != 0:
        # Below zero is no tier; from above zero, the first tier (the one every byte is
        # priced at) is missing, and a later one would understate every byte.
        raise MalformedPriceError(f"no tier begins at 0 (the lowest begins at {floor})")
    first = {usd for start, usd in tiers if start == floor}
    if len(first) > 1:
        said = ", ".join(f"${p}" for p in sorted(first))
        raise MalformedPriceError(f"first tier has {len(first)} prices ({said})")
    (usd,) = first
    if usd <= 0:
        raise MalformedPriceError(f"first tier is ${usd}, not a rate")
    return usd


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
STORAGE_ITEM = {"locationType": "AWS Region"}

#: A usage type's region prefix ("USW2-", "EU-", "APN1-"): us-east-1's have none.
_REGION_PREFIX = re.compile(r"^[A-Z]{2,4}[0-9]?-")

#: EBS provisioned rates by usage type: (volume type, unit, units included below the tier).
#: io1's usage type says "piops"; io2's higher tiers are its own usage types.
EBS_IOPS_USAGE: dict[str, tuple[str, str, int]] = {
    "EBS:VolumeP-IOPS.gp3": ("gp3", IOPS, 3000),
    "EBS:VolumeP-IOPS.piops": ("io1", IOPS, 0),
    "EBS:VolumeP-IOPS.io2": ("io2", IOPS, 0),
    "EBS:VolumeP-IOPS.io2.tier2": ("io2", IOPS, 32000),
    "EBS:VolumeP-IOPS.io2.tier3": ("io2", IOPS, 64000),
}
EBS_THROUGHPUT_USAGE: dict[str, tuple[str, str, int]] = {
    "EBS:VolumeP-Throughput.gp3": ("gp3", THROUGHPUT, 125),
}
#: The Price List's throughput units -> MiB/s in one of them. The catalog stores $ per
#: MiB/s-month; the Price List quotes gp3 throughput per GiBps-month (1 GiB/s = 1024 MiB/s).
THROUGHPUT_UNITS: dict[str, int] = {"GiBps-mo": 1024, "MiBps-Mo": 1}
SNAPSHOT_USAGE = "EBS:SnapshotUsage"
#: S3 storage usage types -> the storage class (``s3_class_gb_month`` keys). Only the
#: storage itself: not the staging, small-object or overhead usage types beside it.
S3_STORAGE_USAGE: dict[str, str] = {
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
#: S3 Glacier Deep Archive storage is listed under its own service code.
S3_DEEP_ARCHIVE_SERVICE = "AmazonS3GlacierDeepArchive"
S3_DEEP_ARCHIVE_USAGE = {"TimedStorage-GDA-ByteHrs": "deep_archive"}


def usage_type(item: Mapping[str, Any]) -> str:
    """An item's usage type without its region prefix ("USW2-EBS:SnapshotUsage" ->
    "EBS:SnapshotUsage"); "" when it has none."""
    raw = ((item.get("product") or {}).get("attributes") or {}).get("usagetype")
    return _REGION_PREFIX.sub("", raw, count=1) if isinstance(raw, str) else ""


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

    def add(
        self,
        name: str,
        item: dict[str, Any],
        unit: str,
        *,
        per: int = 1,
        reader: Callable[[dict[str, Any], str], Decimal | None] = on_demand_usd,
    ) -> None:
        """Read ``item``'s price per ``unit`` as ``name``'s, divided by ``per`` (a price per
        GiBps-month is ``per=1024`` MiB/s-months)."""
        self._seen.add(name)
        try:
            usd = reader(item, unit)
        except MalformedPriceError as exc:
            self._malformed.setdefault(name, str(exc))
            return
        if usd is not None:
            self._prices.setdefault(name, set()).add(_normalise(usd / per))

    def refuse(self, name: str, why: str) -> None:
        """``name``'s item is not read as a price (``why``): reported, its last rate kept."""
        self._seen.add(name)
        self._malformed.setdefault(name, why)

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


def _storage(
    client: PricingClient,
    section: str,
    region: str,
    queries: Iterable[tuple[str, dict[str, str], Mapping[str, str]]],
    units: Mapping[str, int],
    rejected: list[str],
    *,
    expected: Callable[[str], Mapping[str, str]] = lambda _n: {},
) -> _Candidates:
    """One query per (service, filters), each item taken by its exact usage type in
    ``usages`` (usage type -> rate name) at its first tier, unless one of its attributes
    says other than ``expected`` of that name does.

    ``units``: the units a price may be quoted in, each with what it is divided by to give
    the stored unit (a price per GiBps-month is 1,024 MiB/s-months). An item priced on
    demand in none of them, or in two, is refused naming its units: a price per GB-hour
    is no price per GB-month. One with no on-demand price at all is listed with other
    terms only, and said so."""
    found = _Candidates(section, region, rejected)
    for service, filters, usages in queries:
        for item in _products(client, service, _filters({"regionCode": region, **filters})):
            name = usages.get(usage_type(item))
            where = {**STORAGE_ITEM, "regionCode": region, **expected(name or "")}
            if name is None or _off_filter(item, where):
                continue
            quoted = _units(item)
            usable = [u for u in units if u in quoted]
            if quoted and len(usable) != 1:
                said = ", ".join(repr(one_line(u, 20)) for u in sorted(quoted))
                found.refuse(name, f"price per {said} is not per {' or '.join(units)} alone")
                continue
            unit = usable[0] if usable else next(iter(units))
            found.add(name, item, unit, per=units[unit], reader=first_tier_usd)
    return found


def fetch_snapshots(
    client: PricingClient, region: str, rejected: list[str] | None = None
) -> dict[str, Decimal]:
    """EBS snapshot storage, standard tier, $/GB-month (not the archive tier)."""
    return _storage(
        client,
        "ebs_snapshot_gb_month",
        region,
        [("AmazonEC2", {"productFamily": "Storage Snapshot"}, {SNAPSHOT_USAGE: SNAPSHOT_TIER})],
        {"GB-Mo": 1},
        rejected if rejected is not None else [],
    ).found()


def _volume_type_of(name: str) -> Mapping[str, str]:
    """What an EBS provisioned item must say of its volume type, when it says one."""
    return {"volumeApiName": name.split("/", 1)[0]} if name else {}


def fetch_provisioned(
    client: PricingClient,
    region: str,
    wanted: Iterable[str] = (),
    rejected: list[str] | None = None,
    absent: dict[str, str] | None = None,
) -> dict[str, Decimal]:
    """EBS provisioned IOPS ($/IOPS-month) and gp3 throughput ($/MiB/s-month), each tier
    named by ``tier_key``: two queries, "System Operation" and "Provisioned Throughput"."""
    notes = rejected if rejected is not None else []
    iops = _storage(
        client,
        "ebs_provisioned_month",
        region,
        [
            (
                "AmazonEC2",
                {"productFamily": "System Operation"},
                {u: tier_key(*t) for u, t in EBS_IOPS_USAGE.items()},
            )
        ],
        {"IOPS-Mo": 1},
        notes,
        expected=_volume_type_of,
    )
    throughput = _storage(
        client,
        "ebs_provisioned_month",
        region,
        [
            (
                "AmazonEC2",
                {"productFamily": "Provisioned Throughput"},
                {u: tier_key(*t) for u, t in EBS_THROUGHPUT_USAGE.items()},
            )
        ],
        THROUGHPUT_UNITS,
        notes,
        expected=_volume_type_of,
    )
    out = {**iops.found(), **throughput.found()}
    if absent is not None:
        names = sorted(set(wanted))
        absent.update(iops.absent([n for n in names if "/iops/" in n], "EBS provisioned IOPS"))
        absent.update(
            throughput.absent([n for n in names if "/iops/" not in n], "EBS provisioned throughput")
        )
    return out


def fetch_s3(
    client: PricingClient,
    region: str,
    wanted: Iterable[str] = (),
    rejected: list[str] | None = None,
    absent: dict[str, str] | None = None,
) -> dict[str, Decimal]:
    """S3 storage by class, $/GB-month, the first tier of each: two queries, S3's
    "Storage" family and S3 Glacier Deep Archive's own service."""
    found = _storage(
        client,
        "s3_class_gb_month",
        region,
        [
            ("AmazonS3", {"productFamily": "Storage"}, S3_STORAGE_USAGE),
            (S3_DEEP_ARCHIVE_SERVICE, {}, S3_DEEP_ARCHIVE_USAGE),
        ],
        {"GB-Mo": 1},
        rejected if rejected is not None else [],
    )
    out = found.found()
    if absent is not None:
        absent.update(found.absent(wanted, "S3 storage"))
    return out


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
            # Storage: one query per product family, every rate of the family at once.
            "ebs_snapshot_gb_month": noting(
                "ebs_snapshot_gb_month", lambda n, _a: fetch_snapshots(c, region, n)
            ),
            "ebs_provisioned_month": noting(
                "ebs_provisioned_month",
                lambda n, a: fetch_provisioned(
                    c, region, wanted.get("ebs_provisioned_month", ()), n, a
                ),
            ),
            "s3_class_gb_month": noting(
                "s3_class_gb_month",
                lambda n, a: fetch_s3(c, region, wanted.get("s3_class_gb_month", ()), n, a),
            ),
        }
        return PriceAnswer(prices, rejected, absent)
