"""Every rate the guard prices with, one row each, with where it came from, and every
rate it lacks for a name or region the catalog knows, with why (``costguard prices show``).

A missing rate is a row too: unpriced is never $0, and "no rate" alone tells a user
nothing they can act on, so each says why ("g6 instances are not offered in
eu-west-1", "sold through EC2 Capacity Blocks", what the last refresh was told).

Pure: the catalog's prices (:class:`PriceCatalog`, for reasons and reference rates) and
its provenance (:class:`RateBook`) in, rows out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from costguard.domain.catalog_merge import BUNDLED, PRICE_LIST_API, RateBook
from costguard.domain.pricing import PriceCatalog
from costguard.domain.storage import IOPS, SNAPSHOT_TIER, split_tier_key

#: The services a row belongs to, in the order they are shown.
SERVICES = ("ec2", "sagemaker", "ebs", "ebs-snapshot", "s3", "eks")
#: The catalog section a refresh keeps for each service it fetches.
SECTION_OF = {
    "ec2": "ec2",
    "sagemaker": "sagemaker",
    "ebs": "ebs_gb_month",
    "ebs-snapshot": "ebs_snapshot_gb_month",
    "s3": "s3_class_gb_month",
}
PROVISIONED = "ebs_provisioned_month"
#: The region of a rate that is the same in every region (EKS's cluster-hour).
EVERY_REGION = "all"
#: S3 storage classes as AWS names them, in the order they are shown (the catalog's keys
#: are ``s3_class_gb_month``'s; a class not named here is shown by its key).
S3_CLASS_NAMES = {
    "standard": "Standard",
    "intelligent_frequent": "Intelligent-Tiering Frequent",
    "intelligent_infrequent": "Intelligent-Tiering Infrequent",
    "intelligent_archive_instant": "Intelligent-Tiering Archive Instant",
    "standard_ia": "Standard-IA",
    "onezone_ia": "One Zone-IA",
    "express_onezone": "Express One Zone",
    "reduced_redundancy": "Reduced Redundancy",
    "glacier_ir": "Glacier Instant Retrieval",
    "glacier": "Glacier Flexible Retrieval",
    "deep_archive": "Glacier Deep Archive",
}
#: The S3 storage class the stale-object guard counts savings at.
S3_STANDARD = "standard"
SNAPSHOT_NAME = "standard tier"
EKS_STANDARD = "cluster (standard support)"
EKS_EXTENDED = "cluster (extended support)"


@dataclass(frozen=True, slots=True)
class RateRow:
    """One rate, or one known name's missing rate (``usd`` None, with ``reason``)."""

    service: str
    region: str
    name: str
    usd: Decimal | None
    unit: str
    #: "bundled" (the package's list) or "price-list-api" (a refresh read it).
    source: str
    #: The day the rate (or its absence) was last checked; None when the catalog does not say.
    as_of: date | None
    reason: str | None = None
    kept_since: date | None = None
    held_usd: Decimal | None = None
    retired: bool = False
    #: Why the rate is less certain than the rest of the catalog, when it is.
    confidence: str | None = None
    #: The catalog's own name of the rate ("standard_ia", "io2/iops/32000"), for scripts;
    #: ``name`` is what a person reads.
    key: str | None = None

    @property
    def priced(self) -> bool:
        return self.usd is not None


def catalog_regions(catalog: PriceCatalog, book: RateBook) -> tuple[str, ...]:
    """Every region the catalog says anything about: a rate, a reason, a refresh's date."""
    found: set[str] = set()
    for table in (catalog.ec2, catalog.sagemaker, catalog.ebs_gb_month):
        found |= set(table)
    found |= set(catalog.ebs_snapshot_gb_month) | set(catalog.s3_standard_gb_month)
    found |= set(catalog.not_offered)
    found |= {key.split("/", 1)[0] for key in catalog.unpriced_reasons if "/" in key}
    for section in (*book.rates, *book.as_of_by, *book.no_rate):
        found |= set(book.rates.get(section, {})) | set(book.as_of_by.get(section, {}))
        found |= set(book.no_rate.get(section, {}))
    return tuple(sorted(found))


def rate_sheet(catalog: PriceCatalog, book: RateBook) -> list[RateRow]:
    """Every row, in :data:`SERVICES` order, then region, then name."""
    regions = catalog_regions(catalog, book)
    rows: list[RateRow] = []
    for service in ("ec2", "sagemaker"):
        rows.extend(_instance_rows(service, catalog, book, regions))
    for region in regions:
        rows.extend(_instance_rows("ebs", catalog, book, (region,)))
        rows.extend(_provisioned_rows(catalog, book, region))
    snapshot = {SNAPSHOT_TIER: (SNAPSHOT_NAME, "GB-month")}
    for region in regions:
        rows.extend(_storage_rows("ebs-snapshot", snapshot, catalog, book, region))
    for region in regions:
        rows.extend(_storage_rows("s3", _s3_names(book), catalog, book, region))
    for name, usd in (
        (EKS_STANDARD, catalog.eks_cluster_hour),
        (EKS_EXTENDED, catalog.eks_extended_cluster_hour),
    ):
        rows.append(
            RateRow("eks", EVERY_REGION, name, usd, "hour", BUNDLED, catalog.reference_as_of)
        )
    return rows


_SIZES = {"nano": 0, "micro": 1, "small": 2, "medium": 3, "large": 4, "xlarge": 5}


def by_size(name: str) -> tuple[str, int, str]:
    """Sort key: a family's sizes smallest first (g5.xlarge, g5.2xlarge, ... g5.48xlarge,
    g5.metal), as AWS lists them, not as text sorts them (g5.12xlarge before g5.2xlarge)."""
    family, _, size = name.rpartition(".")
    if size in _SIZES:
        rank = _SIZES[size]
    elif size.endswith("xlarge") and size[:-6].isdigit():
        rank = 5 + int(size[:-6])
    else:
        rank = 10_000  # metal, and whatever else: after the numbered sizes
    return family, rank, size


def _known_names(service: str, catalog: PriceCatalog, book: RateBook) -> set[str]:
    """Every name of ``service`` the catalog knows: priced anywhere, given a reason, or
    reported by a refresh."""
    section = SECTION_OF[service]
    names = {n for rates in book.rates.get(section, {}).values() for n in rates}
    names |= {n for found in book.no_rate.get(section, {}).values() for n in found}
    if service != "ebs":
        for key in catalog.unpriced_reasons:
            name = key.split("/", 1)[-1]
            if name.startswith("ml.") == (service == "sagemaker"):
                names.add(name)
    return names


def _priced_row(
    book: RateBook,
    section: str,
    rate: str,
    row: tuple[str, str, str, Decimal, str],
    **more: Any,
) -> RateRow:
    """The region's rate ``rate`` of ``section`` (``row``: service, region, shown name,
    dollars and unit), with where it came from: its source, its date, and since when a held
    rate has been kept."""
    service, region, name, usd, unit = row
    src = book.source_of(section, region, rate)
    assert src is not None  # ``rate`` is one of the region's rates
    return RateRow(
        service,
        region,
        name,
        usd,
        unit,
        src.source,
        src.as_of,
        kept_since=src.kept_since,
        held_usd=src.held_usd,
        **more,
    )


def _instance_rows(
    service: str, catalog: PriceCatalog, book: RateBook, regions: Iterable[str]
) -> Iterator[RateRow]:
    section = SECTION_OF[service]
    unit = "GB-month" if service == "ebs" else "hour"
    known = sorted(_known_names(service, catalog, book), key=by_size)
    for region in regions:
        rates = book.rates.get(section, {}).get(region, {})
        for name in known:
            usd = rates.get(name)
            retired = service != "ebs" and catalog.retirement(name) is not None
            if usd is None:
                recorded = book.no_rate.get(section, {}).get(region, {}).get(name)
                yield RateRow(
                    service,
                    region,
                    name,
                    None,
                    unit,
                    PRICE_LIST_API if recorded is not None else BUNDLED,
                    recorded.since if recorded is not None else book.region_as_of(section, region),
                    reason=catalog.unpriced_reason(section, region, name),
                    retired=retired,
                )
                continue
            yield _priced_row(
                book,
                section,
                name,
                (service, region, name, usd, unit),
                retired=retired,
                confidence=(
                    catalog.confidence_note(service, region, name) if service != "ebs" else None
                ),
            )


#: What a storage section's rates are, in a reason.
_WHAT = {
    "ebs-snapshot": "EBS snapshot storage",
    "s3": "S3 storage",
    "ebs": "EBS provisioned IOPS and throughput",
}


def _s3_names(book: RateBook) -> dict[str, tuple[str, str]]:
    """Every S3 class the catalog knows (priced anywhere, or reported by a refresh), in
    :data:`S3_CLASS_NAMES` order, with its name and unit; Standard always."""
    section = SECTION_OF["s3"]
    known = {n for rates in book.rates.get(section, {}).values() for n in rates}
    known |= {n for found in book.no_rate.get(section, {}).values() for n in found}
    known.add(S3_STANDARD)
    order = list(S3_CLASS_NAMES)
    ranked = sorted(known, key=lambda n: (order.index(n) if n in order else len(order), n))
    return {n: (S3_CLASS_NAMES.get(n, n), "GB-month") for n in ranked}


def _provisioned_names(book: RateBook) -> dict[str, tuple[str, str]]:
    """Every EBS provisioned tier the catalog knows, by volume type, IOPS before
    throughput, lowest tier first, each named as a person reads it ("io2 IOPS 32,001 to
    64,000", "gp3 throughput above 125 MiB/s") with its unit."""
    keys = {n for rates in book.rates.get(PROVISIONED, {}).values() for n in rates}
    keys |= {n for found in book.no_rate.get(PROVISIONED, {}).values() for n in found}
    tiers: dict[tuple[str, str], list[int]] = {}
    for key in keys:
        split = split_tier_key(key)
        if split is not None:
            tiers.setdefault(split[:2], []).append(split[2])
    out: dict[str, tuple[str, str]] = {}
    for (vtype, unit), listed in sorted(tiers.items(), key=lambda t: (t[0][0], t[0][1] != IOPS)):
        floors = sorted(set(listed))
        what = "IOPS" if unit == IOPS else "throughput"
        suffix = "" if unit == IOPS else " MiB/s"
        for i, floor in enumerate(floors):
            top = floors[i + 1] if i + 1 < len(floors) else None
            if top is None:
                span = f" above {floor:,}{suffix}" if floor else ""
            elif floor == 0:
                span = f" up to {top:,}{suffix}"
            else:
                span = f" {floor + 1:,} to {top:,}{suffix}"
            out[f"{vtype}/{unit}/{floor}"] = (
                f"{vtype} {what}{span}",
                "IOPS-month" if unit == IOPS else "MiB/s-month",
            )
    return out


def _provisioned_rows(catalog: PriceCatalog, book: RateBook, region: str) -> Iterator[RateRow]:
    yield from _storage_rows("ebs", _provisioned_names(book), catalog, book, region, PROVISIONED)


def _storage_rows(
    service: str,
    names: Mapping[str, tuple[str, str]],
    catalog: PriceCatalog,
    book: RateBook,
    region: str,
    section: str | None = None,
) -> Iterator[RateRow]:
    """One region's storage rates of ``section``, in ``names`` order (key -> shown name
    and unit), with their provenance; a known rate the region lacks is unpriced, with why."""
    section = section or SECTION_OF[service]
    table = book.rates.get(section, {})
    for key, (name, unit) in names.items():
        usd = table.get(region, {}).get(key)
        if usd is not None:
            yield _priced_row(book, section, key, (service, region, name, usd, unit), key=key)
            continue
        if service == "s3" and key == S3_STANDARD and region in catalog.s3_standard_gb_month:
            # A catalog from before S3 classes: the stale-object guard's flat table.
            flat = catalog.s3_standard_gb_month[region]
            yield RateRow(
                service, region, name, flat, unit, BUNDLED, catalog.reference_as_of, key=key
            )
            continue
        recorded = book.no_rate.get(section, {}).get(region, {}).get(key)
        yield RateRow(
            service,
            region,
            name,
            None,
            unit,
            PRICE_LIST_API if recorded is not None else BUNDLED,
            recorded.since if recorded is not None else book.region_as_of(section, region),
            reason=(
                recorded.describe()
                if recorded is not None
                else _storage_reason(service, section, key, name, table, catalog, region)
            ),
            key=key,
        )


def _storage_reason(
    service: str,
    section: str,
    key: str,
    name: str,
    table: Mapping[str, Mapping[str, Decimal]],
    catalog: PriceCatalog,
    region: str,
) -> str:
    """Why a storage rate the catalog knows is missing in ``region``, from its contents."""
    what = _WHAT[service]
    elsewhere = sorted(r for r, rates in table.items() if key in rates)
    if elsewhere:
        reason = (
            f"the price catalog prices {what} {name} in {', '.join(elsewhere)} only; "
            f"`costguard prices refresh --region {region}` checks {region}"
        )
    else:
        reason = f"the price catalog has no {what} rates; `costguard prices refresh` reads them"
    if service == "s3" and key == S3_STANDARD and catalog.s3_standard_gb_month:
        dearest = max(catalog.s3_standard_gb_month.values())
        reason += (
            f"; the stale-object guard counts savings there at the dearest known "
            f"rate, ${dearest}/GB-month (an upper bound)"
        )
    return reason
