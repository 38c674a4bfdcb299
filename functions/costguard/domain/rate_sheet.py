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

from costguard.domain.catalog_merge import BUNDLED, PRICE_LIST_API, RateBook
from costguard.domain.pricing import PriceCatalog

#: The services a row belongs to, in the order they are shown.
SERVICES = ("ec2", "sagemaker", "ebs", "ebs-snapshot", "s3", "eks")
#: The catalog section a refresh keeps for each service it fetches.
SECTION_OF = {"ec2": "ec2", "sagemaker": "sagemaker", "ebs": "ebs_gb_month"}
#: The region of a rate that is the same in every region (EKS's cluster-hour).
EVERY_REGION = "all"
#: The S3 storage class the stale-object guard counts savings at (the only one it prices).
S3_CLASS = "STANDARD"
#: The EBS snapshot tier the catalog prices (not the archive tier).
SNAPSHOT_TIER = "standard"
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
    for service in ("ec2", "sagemaker", "ebs"):
        rows.extend(_instance_rows(service, catalog, book, regions))
    rows.extend(
        _reference_rows(
            "ebs-snapshot", SNAPSHOT_TIER, catalog.ebs_snapshot_gb_month, catalog, regions
        )
    )
    rows.extend(_reference_rows("s3", S3_CLASS, catalog.s3_standard_gb_month, catalog, regions))
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
            src = book.source_of(section, region, name)
            assert src is not None  # the name is one of the region's rates
            yield RateRow(
                service,
                region,
                name,
                usd,
                unit,
                src.source,
                src.as_of,
                kept_since=src.kept_since,
                held_usd=src.held_usd,
                retired=retired,
                confidence=(
                    catalog.confidence_note(service, region, name) if service != "ebs" else None
                ),
            )


def _reference_rows(
    service: str,
    name: str,
    table: Mapping[str, Decimal],
    catalog: PriceCatalog,
    regions: Iterable[str],
) -> Iterator[RateRow]:
    """Rates a refresh does not fetch: bundled, dated by the catalog's reference date."""
    what = "EBS snapshot storage" if service == "ebs-snapshot" else "S3 Standard storage"
    for region in regions:
        usd = table.get(region)
        reason = None
        if usd is None:
            priced = sorted(table)
            reason = (
                f"the price catalog has no {what} rate for {region} (it has one for "
                f"{', '.join(priced)}); a refresh does not fetch it"
                if priced
                else f"the price catalog has no {what} rates; a refresh does not fetch them"
            )
            if service == "s3" and priced:
                dearest = max(table[r] for r in priced)
                reason += (
                    f"; the stale-object guard counts savings there at the dearest known "
                    f"rate, ${dearest}/GB-month (an upper bound)"
                )
        yield RateRow(
            service, region, name, usd, "GB-month", BUNDLED, catalog.reference_as_of, reason=reason
        )
