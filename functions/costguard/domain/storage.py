"""Storage prices: EBS volumes by type, size, IOPS and throughput; snapshots; S3 buckets by
storage class. Pure: the rates come from the price catalog, the sizes from the inventory.

What each figure is, and what it leaves out:

- **EBS volume**: provisioned GiB at its type's $/GB-month, plus provisioned IOPS and
  throughput above what the type includes (gp3: 3,000 IOPS and 125 MiB/s free; io1 every
  IOPS; io2 every IOPS, in tiers: the first 32,000 at one rate, the next 32,000 at a
  lower one, the rest lower still). gp2, st1, sc1 and standard (magnetic) are size only;
  magnetic volumes' I/O requests are not seen by the scan and not included.
- **EBS snapshot**: standard tier $/GB-month. The API does not give a snapshot's
  incremental size (what it really stores beyond its predecessors), so it is charged at
  ``FullSnapshotSizeInBytes`` when EC2 reports it, else at its source volume's size: an
  upper bound either way. An archive-tier snapshot is charged at the standard rate too
  (its own rate is lower), also an upper bound, and its basis says so.
- **S3 bucket**: the day's ``BucketSizeBytes`` per CloudWatch storage type at its storage
  class's $/GB-month (1 GB = 2^30 bytes, as S3 bills). The first tier of S3 Standard
  (the first 50 TB) is used for all of it: an upper bound for larger buckets. Requests,
  retrievals, Intelligent-Tiering's monitoring fee and data transfer are **not included**.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import NamedTuple

from costguard.domain.money import HOURS_PER_PRICING_MONTH, ZERO

GIB = 2**30

#: One tier of a provisioned rate: units above ``above`` (up to the next tier's) cost
#: ``usd`` each a month. gp3's IOPS are ``[(3000, rate)]``: the first 3,000 are included.
Tier = tuple[int, Decimal]
#: region -> volume type -> "iops" | "throughput_mibps" -> tiers.
ProvisionedRates = Mapping[str, Mapping[str, Mapping[str, Sequence[Tier]]]]

IOPS = "iops"
THROUGHPUT = "throughput_mibps"

#: CloudWatch's ``StorageType`` of ``BucketSizeBytes`` -> the storage class it is billed
#: at (the catalog's ``s3_class_gb_month`` keys). The overheads S3 adds per archived object are
#: billed at their class (the 32 KB index of an archived object) or at Standard (its 8 KB
#: name and metadata), as S3's pricing page says.
S3_CLASS_OF: Mapping[str, str] = {
    "StandardStorage": "standard",
    "ReducedRedundancyStorage": "reduced_redundancy",
    "StandardIAStorage": "standard_ia",
    "StandardIASizeOverhead": "standard_ia",
    "StandardIAObjectOverhead": "standard_ia",
    "OneZoneIAStorage": "onezone_ia",
    "OneZoneIASizeOverhead": "onezone_ia",
    "GlacierInstantRetrievalStorage": "glacier_ir",
    "GlacierInstantRetrievalSizeOverhead": "glacier_ir",
    "GlacierStorage": "glacier",
    "GlacierStagingStorage": "glacier",
    "GlacierObjectOverhead": "glacier",
    "GlacierS3ObjectOverhead": "standard",
    "DeepArchiveStorage": "deep_archive",
    "DeepArchiveStagingStorage": "deep_archive",
    "DeepArchiveObjectOverhead": "deep_archive",
    "DeepArchiveS3ObjectOverhead": "standard",
    "IntelligentTieringFAStorage": "intelligent_frequent",
    "IntelligentTieringIAStorage": "intelligent_infrequent",
    "IntelligentTieringAIAStorage": "intelligent_archive_instant",
    "IntelligentTieringAAStorage": "glacier",
    "IntelligentTieringDAAStorage": "deep_archive",
    "ExpressOneZone": "express_onezone",
}


#: The EBS snapshot tier the catalog prices (``ebs_snapshot_gb_month``; not the archive tier).
SNAPSHOT_TIER = "standard"


def tier_key(volume_type: str, unit: str, above: int) -> str:
    """One provisioned tier as one rate name ("io2/iops/32000"): how a refresh fetches it,
    merges it and records its provenance, like any other rate."""
    return f"{volume_type}/{unit}/{above}"


def split_tier_key(key: str) -> tuple[str, str, int] | None:
    """``(volume type, unit, above)`` of a :func:`tier_key`; None when it is not one."""
    parts = key.split("/")
    if len(parts) != 3 or parts[1] not in (IOPS, THROUGHPUT) or not parts[2].isdigit():
        return None
    return parts[0], parts[1], int(parts[2])


def flat_tiers(rates: ProvisionedRates) -> dict[str, dict[str, Decimal]]:
    """region -> :func:`tier_key` -> $/unit-month: the catalog's tiers as flat rates."""
    return {
        region: {
            tier_key(vtype, unit, above): usd
            for vtype, units in types.items()
            for unit, tiers in units.items()
            for above, usd in tiers
        }
        for region, types in rates.items()
    }


def nested_tiers(
    flat: Mapping[str, Mapping[str, Decimal]],
) -> dict[str, dict[str, dict[str, list[Tier]]]]:
    """The inverse of :func:`flat_tiers`: tiers sorted by floor; a name that is not a
    tier key is left out (it cannot be priced)."""
    out: dict[str, dict[str, dict[str, list[Tier]]]] = {}
    for region, names in flat.items():
        for key, usd in names.items():
            split = split_tier_key(key)
            if split is None:
                continue
            vtype, unit, above = split
            out.setdefault(region, {}).setdefault(vtype, {}).setdefault(unit, []).append(
                (above, usd)
            )
    for types in out.values():
        for units in types.values():
            for unit, tiers in units.items():
                units[unit] = sorted(tiers)
    return out


class StoragePrice(NamedTuple):
    """$/month of one storage resource, and how it was reached; ``usd_per_month`` None
    is unpriced (``missing`` says which rate), never $0."""

    usd_per_month: Decimal | None
    basis: str
    missing: str = ""

    @property
    def usd_per_hour(self) -> Decimal | None:
        m = self.usd_per_month
        return None if m is None else m / HOURS_PER_PRICING_MONTH


def tiered(units: int, tiers: Sequence[Tier]) -> Decimal:
    """$/month of ``units`` provisioned units over ``tiers`` (sorted or not).

    Each tier charges the units between its floor and the next tier's floor; units
    below the lowest floor are included in the volume's price.
    """
    ordered = sorted(tiers)
    total = ZERO
    for i, (above, usd) in enumerate(ordered):
        top = ordered[i + 1][0] if i + 1 < len(ordered) else None
        span = max(0, (units if top is None else min(units, top)) - above)
        total += usd * span
    return total


def volume_price(
    gb_month: Decimal | None,
    provisioned: Mapping[str, Sequence[Tier]] | None,
    volume_type: str,
    size_gib: int,
    iops: int,
    throughput_mibps: int,
) -> StoragePrice:
    """One EBS volume's $/month: size, plus IOPS and throughput above the type's baseline.

    ``provisioned``: this type's tiers in the volume's region (None: the type charges
    for neither). A gp3/io1/io2 volume whose IOPS rate the catalog lacks, or whose tiers
    begin above the type's baseline, is unpriced: the size alone would understate an io2
    volume many times over.
    """
    if gb_month is None:
        return StoragePrice(None, "unpriced", f"EBS {volume_type} storage")
    total = gb_month * size_gib
    parts = [f"{size_gib} GiB"]
    rates = provisioned or {}
    for unit, used, what in (
        (IOPS, iops, f"{iops} IOPS"),
        (THROUGHPUT, throughput_mibps, f"{throughput_mibps} MiB/s"),
    ):
        if (volume_type, unit) not in BASELINE:
            continue
        tiers, baseline = rates.get(unit), BASELINE[(volume_type, unit)]
        if not tiers or min(floor for floor, _ in tiers) > baseline:
            # Within gp3's baseline the price is the size alone, whatever the catalog
            # lacks; above it (or any io1/io2 IOPS) the size alone would understate it, as
            # would tiers that begin above the baseline (io2's first tier missing): the
            # units between would be priced at nothing.
            if used <= baseline:
                continue
            return StoragePrice(None, "unpriced", f"EBS {volume_type} provisioned {unit}")
        extra = tiered(used, tiers)
        total += extra
        if extra:
            parts.append(what)
    return StoragePrice(total, f"ebs {volume_type} gb-month ({' + '.join(parts)})")


#: What each type includes in its GB-month price, for each unit it bills when
#: provisioned: gp3 its baseline of 3,000 IOPS and 125 MiB/s; io1 and io2 no IOPS at all.
BASELINE: Mapping[tuple[str, str], int] = {
    ("gp3", IOPS): 3000,
    ("gp3", THROUGHPUT): 125,
    ("io1", IOPS): 0,
    ("io2", IOPS): 0,
}


def snapshot_price(gb_month: Decimal | None, size_gib: int, archived: bool) -> StoragePrice:
    """One snapshot's $/month at the standard tier, on the size the inventory charges it
    at (full size or source volume size: an upper bound; the incremental size is not in
    the API)."""
    if gb_month is None:
        return StoragePrice(None, "unpriced", "EBS snapshot storage")
    basis = "ebs snapshot gb-month (standard tier, full size: upper bound"
    if archived:
        basis += "; archive tier charged at the standard rate"
    return StoragePrice(gb_month * size_gib, basis + ")")


def bucket_price(
    rates: Mapping[str, Decimal], stored_bytes: Sequence[tuple[str, int]]
) -> StoragePrice:
    """One bucket's $/month: each storage type's bytes at its class's rate.

    A storage type CloudWatch reports that the catalog cannot price makes the bucket
    unpriced (naming it): part of a bill is not the bill.
    """
    total = ZERO
    classes: dict[str, Decimal] = {}
    for storage_type, size in stored_bytes:
        cls = S3_CLASS_OF.get(storage_type)
        rate = rates.get(cls) if cls is not None else None
        if rate is None:
            return StoragePrice(None, "unpriced", f"S3 storage type {storage_type}")
        gb = Decimal(size) / GIB
        total += rate * gb
        classes[cls or storage_type] = classes.get(cls or storage_type, ZERO) + gb
    shown = ", ".join(f"{c} {gb.quantize(Decimal('0.1'))} GB" for c, gb in sorted(classes.items()))
    shown = shown or "no BucketSizeBytes datapoint in the last 3 days: empty or new"
    return StoragePrice(total, f"s3 gb-month, storage only, requests not included ({shown})")
