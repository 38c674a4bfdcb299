"""Load and save the versioned price catalog that ships inside the package."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from costguard.domain.catalog_merge import (
    INSTANCE_SECTIONS,
    SECTIONS,
    NoRate,
    RateBook,
    RateSource,
)
from costguard.domain.pricing import PriceCatalog
from costguard.domain.spot import BUCKETS, SpotProfile, SpotTable
from costguard.domain.storage import SNAPSHOT_TIER, flat_tiers, nested_tiers
from costguard.ports import StoredCatalog
from costguard.settings import one_line, validation_problems

_RegionRates = dict[str, dict[str, Decimal]]


class CatalogError(ValueError):
    """A price catalog file cannot be read or written; the message names the file and why."""


class RateSourceFile(BaseModel):
    """Where one rate came from (``rate_sources``); see ``domain.catalog_merge.RateSource``."""

    model_config = ConfigDict(extra="allow")

    source: str
    as_of: date
    kept_since: date | None = None
    held_usd: Decimal | None = None
    held_since: date | None = None


class NoRateFile(BaseModel):
    """Why a refresh found no rate for a name (``no_rate``); see ``catalog_merge.NoRate``."""

    model_config = ConfigDict(extra="allow")

    reason: str = Field(min_length=1)
    since: date


class SpotProfileFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    bucket: str
    #: Typical saving over on-demand, in percent (the Spot Instance Advisor's column).
    savings_pct: Decimal = Field(ge=0, lt=100)

    @field_validator("bucket")
    @classmethod
    def _known_bucket(cls, value: str) -> str:
        if value not in BUCKETS:
            raise ValueError(f"bucket must be one of {', '.join(BUCKETS)}, got {value!r}")
        return value

    def to_domain(self, basis: str = "table") -> SpotProfile:
        return SpotProfile(self.bucket, self.savings_pct / 100, basis)


class SpotAdvisorFile(BaseModel):
    """The dated spot bucket table: interruption bucket and saving per family or type."""

    model_config = ConfigDict(extra="allow")

    as_of: date
    source: str = Field(min_length=1)
    #: Bucket -> the monthly interruption probability that stands for it.
    bucket_monthly_rate: dict[str, Decimal]
    default: SpotProfileFile
    profiles: dict[str, SpotProfileFile] = Field(default_factory=dict)

    @field_validator("bucket_monthly_rate")
    @classmethod
    def _every_bucket(cls, value: dict[str, Decimal]) -> dict[str, Decimal]:
        if set(value) != set(BUCKETS):
            raise ValueError(f"needs exactly the buckets {', '.join(BUCKETS)}")
        for bucket, rate in value.items():
            if not Decimal(0) <= rate < 1:
                raise ValueError(f"{bucket}: a monthly probability in [0, 1), got {rate}")
        return value

    def to_domain(self) -> SpotTable:
        return SpotTable(
            as_of=self.as_of,
            source=self.source,
            bucket_monthly_rate=self.bucket_monthly_rate,
            default=self.default.to_domain("default"),
            profiles={k: v.to_domain() for k, v in self.profiles.items()},
        )


class CatalogFile(BaseModel):
    """The on-disk shape of ``data/prices.json``; prices are strings, kept exact."""

    model_config = ConfigDict(extra="allow")

    version: int = Field(ge=1)
    as_of: date
    currency: str = "USD"
    sources: list[str] = Field(min_length=1)
    ec2: _RegionRates
    sagemaker: _RegionRates
    ebs_gb_month: _RegionRates
    #: region -> S3 Standard $/GB-month; at least one (the stale-object guard counts a
    #: region it lacks at the dearest of them). A refresh sets it to ``s3_class_gb_month``'s
    #: Standard rate wherever that holds one.
    s3_standard_gb_month: dict[str, Decimal] = Field(min_length=1)
    #: region -> EBS snapshot storage, standard tier, $/GB-month (absent: unpriced); a
    #: refresh reads it (section "ebs_snapshot_gb_month", rate name "standard").
    ebs_snapshot_gb_month: dict[str, Decimal] = Field(default_factory=dict)
    #: region -> volume type -> "iops" | "throughput_mibps" -> [[above, $/unit-month], ...]:
    #: EBS provisioned IOPS and throughput beyond what the type includes; a refresh reads
    #: each tier (rate name ``domain.storage.tier_key``: "io2/iops/32000").
    ebs_provisioned_month: dict[str, dict[str, dict[str, list[tuple[int, Decimal]]]]] = Field(
        default_factory=dict
    )
    #: region -> S3 storage class -> $/GB-month, the first tier (absent: unpriced); a
    #: refresh reads it.
    s3_class_gb_month: dict[str, dict[str, Decimal]] = Field(default_factory=dict)
    eks_cluster_hour: dict[str, Decimal]
    eks_standard_support_end: dict[str, date] = Field(default_factory=dict)
    #: region -> instance families AWS does not offer there (so "unpriced" can say why).
    not_offered: dict[str, list[str]] = Field(default_factory=dict)
    #: instance type -> why it has no on-demand rate (Capacity Blocks only, ...).
    unpriced_reasons: dict[str, str] = Field(default_factory=dict)
    #: instance family or type -> why/since when AWS no longer offers it (rate kept: it still bills).
    retired: dict[str, str] = Field(default_factory=dict)
    #: "<service>/<region>/<type>" or "<service>/<type>" -> why that rate is less certain.
    confidence: dict[str, str] = Field(default_factory=dict)
    #: Written by a refresh: section -> region -> the last day the Price List API answered.
    as_of_by: dict[str, dict[str, date]] = Field(default_factory=dict)
    #: Written by a refresh: section -> region -> name -> where the rate came from.
    rate_sources: dict[str, dict[str, dict[str, RateSourceFile]]] = Field(default_factory=dict)
    #: Spot interruption buckets and savings, dated (estimates and spot advice).
    spot_advisor: SpotAdvisorFile | None = None
    #: Written by a refresh: section -> region -> name -> why the Price List API had no
    #: rate for it there. Absent from catalogs written before it existed (read as empty).
    no_rate: dict[str, dict[str, dict[str, NoRateFile]]] = Field(default_factory=dict)
    #: The day the reference rates (EKS; S3 Standard's flat table where no class table
    #: prices it: a refresh does not fetch them) were last reviewed. Absent from older catalogs: then the catalog's own date if it was
    #: never refreshed, else unknown.
    reference_as_of: date | None = None

    @field_validator("currency")
    @classmethod
    def _usd_only(cls, value: str) -> str:
        if value != "USD":
            raise ValueError(f"only USD catalogs are supported, got {value!r}")
        return value

    @field_validator("eks_cluster_hour")
    @classmethod
    def _eks_tiers(cls, value: dict[str, Decimal]) -> dict[str, Decimal]:
        missing = {"standard", "extended"} - set(value)
        if missing:
            raise ValueError(f"needs a rate for {', '.join(sorted(missing))} support")
        return value

    @field_validator("ec2", "sagemaker", "ebs_gb_month")
    @classmethod
    def _positive(cls, value: _RegionRates) -> _RegionRates:
        for region, rates in value.items():
            for name, price in rates.items():
                if price <= 0:
                    raise ValueError(f"{region}/{name}: price must be positive, got {price}")
        return value

    @field_validator("s3_standard_gb_month", "ebs_snapshot_gb_month")
    @classmethod
    def _positive_flat(cls, value: dict[str, Decimal]) -> dict[str, Decimal]:
        for region, price in value.items():
            if not (price.is_finite() and price > 0):
                raise ValueError(f"{region}: price must be positive, got {price}")
        return value

    @field_validator("ebs_provisioned_month")
    @classmethod
    def _tiers(
        cls, value: dict[str, dict[str, dict[str, list[tuple[int, Decimal]]]]]
    ) -> dict[str, dict[str, dict[str, list[tuple[int, Decimal]]]]]:
        for region, types in value.items():
            for vtype, units in types.items():
                for unit, tiers in units.items():
                    where = f"{region}/{vtype}/{unit}"
                    if unit not in ("iops", "throughput_mibps") or not tiers:
                        raise ValueError(f"{where}: iops or throughput_mibps tiers expected")
                    for above, usd in tiers:
                        if above < 0 or not (usd.is_finite() and usd > 0):
                            raise ValueError(f"{where}: tier [{above}, {usd}] is not a price")
        return value

    @field_validator("s3_class_gb_month")
    @classmethod
    def _positive_classes(
        cls, value: dict[str, dict[str, Decimal]]
    ) -> dict[str, dict[str, Decimal]]:
        for region, rates in value.items():
            for name, price in rates.items():
                if not (price.is_finite() and price > 0):
                    raise ValueError(f"{region}/{name}: price must be positive, got {price}")
        return value

    def to_domain(self) -> PriceCatalog:
        return PriceCatalog(
            version=self.version,
            as_of=self.as_of,
            ec2=self.ec2,
            sagemaker=self.sagemaker,
            ebs_gb_month=self.ebs_gb_month,
            s3_standard_gb_month=self.s3_standard_gb_month,
            eks_cluster_hour=self.eks_cluster_hour["standard"],
            eks_extended_cluster_hour=self.eks_cluster_hour["extended"],
            eks_standard_support_end=self.eks_standard_support_end,
            sources=tuple(self.sources),
            not_offered={
                region: frozenset(families) for region, families in self.not_offered.items()
            },
            unpriced_reasons=self.unpriced_reasons,
            retired=self.retired,
            confidence=self.confidence,
            ebs_snapshot_gb_month=self.ebs_snapshot_gb_month,
            ebs_provisioned_month=self.ebs_provisioned_month,
            s3_class_gb_month=self.s3_class_gb_month,
            spot=self.spot_advisor.to_domain() if self.spot_advisor else None,
            no_rate={
                section: {
                    region: {
                        name: NoRate(note.reason, note.since).describe()
                        for name, note in names.items()
                    }
                    for region, names in regions.items()
                }
                for section, regions in self.no_rate.items()
            },
            reference_as_of=self.reference_as_of
            or (None if self.as_of_by or self.rate_sources else self.as_of),
        )


def bundled_catalog_path() -> Path:
    return Path(str(resources.files("costguard") / "data" / "prices.json"))


#: A catalog of every region and type is a few MB: anything larger is not a catalog (and
#: ``--catalog /dev/zero`` must not read until memory runs out).
MAX_CATALOG_BYTES = 64 * 1024 * 1024


def read_catalog_file(path: Path | None = None) -> CatalogFile:
    path = path or bundled_catalog_path()
    try:
        with path.open("rb") as f:
            data = f.read(MAX_CATALOG_BYTES + 1)
        if len(data) > MAX_CATALOG_BYTES:
            raise CatalogError(
                f"price catalog {path} is larger than {MAX_CATALOG_BYTES // 2**20} MiB: not a catalog"
            )
        raw = json.loads(data.decode("utf-8"))
    except OSError as exc:
        raise CatalogError(f"price catalog {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(f"price catalog {path} is not JSON: {one_line(str(exc))}") from None
    return parse_catalog(raw, f"price catalog {path}")


def load_catalog(path: Path | None = None) -> PriceCatalog:
    return read_catalog_file(path).to_domain()


def write_catalog_file(catalog: CatalogFile, path: Path) -> None:
    """Write through a temporary file and a rename, so a failure never leaves half a catalog."""
    data = json.loads(catalog.model_dump_json())
    text = json.dumps(data, indent=1) + "\n"
    target = Path(os.path.realpath(path))  # through a symlink, to the file it names
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        # mkstemp makes the file private; a catalog is as readable as the one it replaces.
        os.chmod(tmp, target.stat().st_mode & 0o777 if target.is_file() else 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise CatalogError(
            f"cannot write the price catalog to {path}: {exc.strerror or exc}"
        ) from None


# -- the refresh's view of a catalog (domain.catalog_merge.RateBook) ------------------------

#: Fields a refresh writes; every other field is reference data it carries untouched.
REFRESH_OWNED = frozenset(
    {"version", "as_of", "sources", *SECTIONS, "as_of_by", "rate_sources", "no_rate"}
)


def retired_names(value: object) -> frozenset[str]:
    """Instance types named by a ``retired`` field of any reasonable shape.

    The field is reference data another part of the catalog defines (a list of types, or
    type -> reason, possibly per region): whatever its shape, the names in it that look
    like instance types are retired.
    """
    found: set[str] = set()
    if isinstance(value, str):
        if "." in value:
            found.add(value)
    elif isinstance(value, dict):
        for key, inner in value.items():
            found |= retired_names(key) | retired_names(inner)
    elif isinstance(value, list | tuple | set | frozenset):
        for inner in value:
            found |= retired_names(inner)
    return frozenset(found)


def section_rates(catalog: CatalogFile, section: str) -> dict[str, dict[str, Decimal]]:
    """One refreshed section as ``region -> name -> USD`` (``catalog_merge.SECTIONS``),
    whatever its shape in the document: snapshots are one rate per region (named by its
    tier), provisioned EBS rates are tiers per volume type (named by ``tier_key``)."""
    if section == "ebs_snapshot_gb_month":
        return {r: {SNAPSHOT_TIER: usd} for r, usd in catalog.ebs_snapshot_gb_month.items()}
    if section == "ebs_provisioned_month":
        return flat_tiers(catalog.ebs_provisioned_month)
    table: dict[str, dict[str, Decimal]] = getattr(catalog, section)
    return {region: dict(rates) for region, rates in table.items()}


def section_json(section: str, rates: Mapping[str, Mapping[str, Decimal]]) -> Any:
    """The document's shape of one section from its flat rates (the inverse of
    :func:`section_rates`), prices as exact strings."""
    if section == "ebs_snapshot_gb_month":
        return {
            region: str(names[SNAPSHOT_TIER])
            for region, names in sorted(rates.items())
            if SNAPSHOT_TIER in names
        }
    if section == "ebs_provisioned_month":
        return {
            region: {
                vtype: {
                    unit: [[above, str(usd)] for above, usd in tiers]
                    for unit, tiers in units.items()
                }
                for vtype, units in sorted(types.items())
            }
            for region, types in sorted(nested_tiers(rates).items())
        }
    return {
        region: {name: str(usd) for name, usd in sorted(names.items())}
        for region, names in sorted(rates.items())
    }


def rate_book(catalog: CatalogFile) -> RateBook:
    rates = {s: section_rates(catalog, s) for s in SECTIONS}
    as_of_by = {s: dict(v) for s, v in catalog.as_of_by.items()}
    if catalog.as_of_by and catalog.reference_as_of is not None:
        # Refreshed, but not every part by a refresh (storage, before a refresh read it):
        # those rates were reviewed on the reference date, not on the day of the refresh
        # that carried them.
        for section, regions in rates.items():
            for region, names in regions.items():
                if names and region not in as_of_by.get(section, {}):
                    as_of_by.setdefault(section, {})[region] = catalog.reference_as_of
    return RateBook(
        version=catalog.version,
        as_of=catalog.as_of,
        rates=rates,
        sources={
            section: {
                region: {
                    name: RateSource(
                        src.source, src.as_of, src.kept_since, src.held_usd, src.held_since
                    )
                    for name, src in names.items()
                }
                for region, names in regions.items()
            }
            for section, regions in catalog.rate_sources.items()
        },
        as_of_by=as_of_by,
        retired=retired_names(_field(catalog, "retired")) | _retired_rates(catalog),
        no_rate={
            section: {
                region: {name: NoRate(n.reason, n.since) for name, n in names.items()}
                for region, names in regions.items()
            }
            for section, regions in catalog.no_rate.items()
        },
    )


def _retired_rates(catalog: CatalogFile) -> frozenset[str]:
    """Every rate name the catalog's own rule calls retired (a family retires its sizes)."""
    domain = PriceCatalog(
        version=catalog.version,
        as_of=catalog.as_of,
        ec2={},
        sagemaker={},
        ebs_gb_month={},
        s3_standard_gb_month={},
        eks_cluster_hour=Decimal(0),
        eks_extended_cluster_hour=Decimal(0),
        retired=catalog.retired,
    )
    return frozenset(
        name
        for section in INSTANCE_SECTIONS
        for region in getattr(catalog, section).values()
        for name in region
        if domain.retirement(name)
    )


def _field(catalog: CatalogFile, name: str) -> object:
    """A field, declared or extra (``retired`` is declared by the catalog's own schema)."""
    if name in type(catalog).model_fields:
        return getattr(catalog, name)
    return (catalog.model_extra or {}).get(name)


def with_rate_book(catalog: CatalogFile, book: RateBook, *, sources: list[str]) -> CatalogFile:
    """``catalog`` with the refresh's fields from ``book``; every other field kept as is."""
    data = json.loads(catalog.model_dump_json())
    data.update(
        version=book.version,
        as_of=book.as_of.isoformat(),
        sources=sources,
        as_of_by={s: {r: d.isoformat() for r, d in v.items()} for s, v in book.as_of_by.items()},
        rate_sources={
            section: {
                region: {
                    name: {
                        "source": src.source,
                        "as_of": src.as_of.isoformat(),
                        **({"kept_since": src.kept_since.isoformat()} if src.kept_since else {}),
                        **({"held_usd": str(src.held_usd)} if src.held_usd is not None else {}),
                        **({"held_since": src.held_since.isoformat()} if src.held_since else {}),
                    }
                    for name, src in sorted(names.items())
                }
                for region, names in sorted(regions.items())
            }
            for section, regions in sorted(book.sources.items())
        },
        no_rate={
            section: {
                region: {
                    name: {"reason": n.reason, "since": n.since.isoformat()}
                    for name, n in sorted(names.items())
                }
                for region, names in sorted(regions.items())
            }
            for section, regions in sorted(book.no_rate.items())
        },
    )
    for section in SECTIONS:
        data[section] = section_json(section, book.rates.get(section, {}))
    # The flat S3 Standard table (the stale-object guard's) follows the class table's
    # Standard rate wherever a refresh keeps one: one rate, never two that disagree.
    for region, classes in book.rates.get("s3_class_gb_month", {}).items():
        if "standard" in classes:
            data["s3_standard_gb_month"][region] = str(classes["standard"])
    return CatalogFile.model_validate(data)


def rebase(base: CatalogFile, bundled: CatalogFile) -> CatalogFile:
    """The catalog a refresh starts from: ``base`` (the stored one) brought up to the
    installed package's reference data.

    After an upgrade, the package may know more than the stored catalog: an EKS support
    date, a retired type, a new family. Reference fields (everything a refresh does not
    own) come from the package, except that a field only the stored catalog has is kept
    and retirements are never undone; a rate the package has and the stored catalog
    lacks is added, as bundled. The stored catalog's own rates and provenance win.
    """
    data = json.loads(base.model_dump_json())
    packaged = json.loads(bundled.model_dump_json())
    for key, value in packaged.items():
        if key in REFRESH_OWNED:
            continue
        data[key] = _union(data[key], value) if key == "retired" and key in data else value
    for section in SECTIONS:
        merged = section_rates(base, section)
        for region, rates in section_rates(bundled, section).items():
            mine = merged.setdefault(region, {})
            said = data.get("rate_sources", {}).get(section, {}).get(region)
            for name, usd in rates.items():
                if name not in mine:
                    mine[name] = usd
                    if said is not None:  # the region's date is a refresh's, not this rate's
                        said[name] = {"source": "bundled", "as_of": packaged["as_of"]}
        data[section] = section_json(section, merged)
    return CatalogFile.model_validate(data)


def overlay(packaged: CatalogFile, stored: CatalogFile) -> CatalogFile | None:
    """The package's catalog, plus the rates only ``stored`` has; None if it has none.

    For a package newer than the last refresh: its rates win where it has them, but a
    region (or a type) only a refresh priced keeps its stored rate, with its provenance
    and its date, rather than becoming unpriced until the next refresh. A region's date
    is the older of the two when both contribute to it: the oldest rate speaks for it.
    """
    book = rate_book(stored)
    mine = rate_book(packaged)
    data = json.loads(packaged.model_dump_json())
    as_of_by = {
        section: {
            region: mine.region_as_of(section, region).isoformat()
            for region, rates in mine.rates.get(section, {}).items()
            if rates
        }
        for section in SECTIONS
    }
    rate_sources: dict[str, Any] = data.setdefault("rate_sources", {})
    added = False
    merged = {section: section_rates(packaged, section) for section in SECTIONS}
    for section in SECTIONS:
        for region, rates in book.rates.get(section, {}).items():
            theirs = merged[section].setdefault(region, {})
            for name, usd in rates.items():
                if name in theirs:
                    continue
                added = True
                theirs[name] = usd
                src = book.source_of(section, region, name)
                assert src is not None  # the name is one of its rates
                explicit = stored.rate_sources.get(section, {}).get(region, {}).get(name)
                said = rate_sources.setdefault(section, {}).setdefault(region, {})
                for own in mine.rates.get(section, {}).get(region, {}):
                    # The region's date may move back below: each package rate says its own.
                    if own not in said:
                        was = mine.source_of(section, region, own)
                        assert was is not None
                        said[own] = {"source": was.source, "as_of": was.as_of.isoformat()}
                said[name] = json.loads(
                    (
                        explicit or RateSourceFile(source=src.source, as_of=src.as_of)
                    ).model_dump_json(exclude_none=True)
                )
                day = book.region_as_of(section, region).isoformat()
                dated = as_of_by[section]
                dated[region] = min(dated.get(region, day), day)
    if not added:
        return None
    for section in SECTIONS:
        data[section] = section_json(section, merged[section])
    # What the last refresh said of a name it found no rate for still holds, unless the
    # package now prices it there.
    data["no_rate"] = {
        section: {
            region: kept
            for region, names in regions.items()
            if (
                kept := {
                    n: note.model_dump(mode="json")
                    for n, note in names.items()
                    if n not in merged.get(section, {}).get(region, {})
                }
            )
        }
        for section, regions in stored.no_rate.items()
    }
    data["as_of_by"] = {s: v for s, v in as_of_by.items() if v}
    data["as_of"] = min(
        [packaged.as_of.isoformat(), *(d for v in as_of_by.values() for d in v.values())]
    )
    return CatalogFile.model_validate(data)


def _union(mine: object, theirs: object) -> object:
    """Two ``retired`` fields as one, so that no retirement is lost."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        return {**mine, **theirs}
    if isinstance(mine, list) and isinstance(theirs, list):
        return [*theirs, *(x for x in mine if x not in theirs)]
    return theirs


class CatalogDocuments:
    """Catalog documents for the refresh (``services.price_refresh.CatalogDocuments``)."""

    def __init__(self, bundled: CatalogFile | None = None) -> None:
        self._bundled = bundled

    @property
    def bundled(self) -> CatalogFile:
        if self._bundled is None:
            self._bundled = read_catalog_file()
        return self._bundled

    def start(self, stored: Mapping[str, Any] | None) -> tuple[dict[str, Any], str | None]:
        if stored is None:
            return _as_json(self.bundled), None
        try:
            current = parse_catalog(stored, "the stored price catalog")
        except CatalogError as exc:
            return _as_json(self.bundled), str(exc)
        return _as_json(rebase(current, self.bundled)), None

    def book(self, document: Mapping[str, Any]) -> RateBook:
        return rate_book(CatalogFile.model_validate(document))

    def document(
        self, base: Mapping[str, Any], book: RateBook, *, source_line: str
    ) -> dict[str, Any]:
        catalog = CatalogFile.model_validate(base)
        lines = [source_line, *[s for s in catalog.sources if "Price List Query API" not in s]]
        return _as_json(with_rate_book(catalog, book, sources=lines))


def _as_json(catalog: CatalogFile) -> dict[str, Any]:
    return dict(json.loads(catalog.model_dump_json()))


def parse_catalog(document: Mapping[str, Any], what: str) -> CatalogFile:
    """A catalog document validated, or a :class:`CatalogError` that names ``what``."""
    try:
        return CatalogFile.model_validate(document)
    except ValidationError as exc:
        problems = validation_problems(exc)
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CatalogError(f"{what}: {problems[0]}{more}") from None


class FileCatalogStore:
    """A catalog file as a :class:`costguard.ports.CatalogStore` (``prices refresh --out``).

    One version, the file's: no history. A file that exists but is not a valid catalog is
    refused rather than overwritten (it may be something else the user named by mistake).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def current(self) -> StoredCatalog | None:
        if not self.path.exists():
            return None
        catalog = read_catalog_file(self.path)
        stat = self.path.stat()
        return StoredCatalog(
            catalog.version, datetime.fromtimestamp(stat.st_mtime, UTC), _as_json(catalog)
        )

    def get(self, version: int) -> StoredCatalog | None:
        held = self.current()
        return held if held is not None and held.version == version else None

    def latest_version(self) -> int:
        held = self.current()
        return held.version if held is not None else 0

    def put(
        self, document: Mapping[str, Any], *, expected_version: int, at: datetime
    ) -> int | None:
        held = self.current()
        if (held.version if held else 0) != expected_version:
            return None
        catalog = CatalogFile.model_validate(document)
        write_catalog_file(catalog, self.path)
        return catalog.version
