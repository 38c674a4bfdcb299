"""Load and save the versioned price catalog that ships inside the package."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import date
from decimal import Decimal
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from costguard.domain.pricing import PriceCatalog
from costguard.domain.spot import BUCKETS, SpotProfile, SpotTable
from costguard.settings import one_line, validation_problems

_RegionRates = dict[str, dict[str, Decimal]]


class CatalogError(ValueError):
    """A price catalog file cannot be read or written; the message names the file and why."""


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
    s3_standard_gb_month: dict[str, Decimal]
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
    #: Spot interruption buckets and savings, dated (estimates and spot advice).
    spot_advisor: SpotAdvisorFile | None = None

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
            spot=self.spot_advisor.to_domain() if self.spot_advisor else None,
        )


def bundled_catalog_path() -> Path:
    return Path(str(resources.files("costguard") / "data" / "prices.json"))


def read_catalog_file(path: Path | None = None) -> CatalogFile:
    path = path or bundled_catalog_path()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CatalogError(f"price catalog {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(f"price catalog {path} is not JSON: {one_line(str(exc))}") from None
    try:
        return CatalogFile.model_validate(raw)
    except ValidationError as exc:
        problems = validation_problems(exc)
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CatalogError(f"price catalog {path}: {problems[0]}{more}") from None


def load_catalog(path: Path | None = None) -> PriceCatalog:
    return read_catalog_file(path).to_domain()


def write_catalog_file(catalog: CatalogFile, path: Path) -> None:
    """Write through a temporary file and a rename, so a failure never leaves half a catalog."""
    data = json.loads(catalog.model_dump_json())
    text = json.dumps(data, indent=1) + "\n"
    target = Path(os.path.realpath(path))  # through a symlink, to the file it names
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise CatalogError(
            f"cannot write the price catalog to {path}: {exc.strerror or exc}"
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        # mkstemp makes the file private; a catalog is as readable as the one it replaces.
        os.chmod(tmp, target.stat().st_mode & 0o777 if target.is_file() else 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise CatalogError(
            f"cannot write the price catalog to {path}: {exc.strerror or exc}"
        ) from None
