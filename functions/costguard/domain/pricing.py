"""Turn a resource into a $/h rate from a price catalog and live spot prices.

A resource the catalog does not know is *unpriced*: it carries ``usd_per_hour``
None and a finding. It is never $0, because $0 hides the most expensive mistakes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import NamedTuple

from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.models import Lifecycle, Resource, ResourceKind
from costguard.domain.spot import SpotTable
from costguard.domain.storage import (
    ProvisionedRates,
    StoragePrice,
    bucket_price,
    snapshot_price,
    volume_price,
)

# Enum members hoisted to module constants: this module runs per resource.
_NODEGROUP = ResourceKind.EKS_NODEGROUP
_CLUSTER = ResourceKind.EKS_CLUSTER
_VOLUME = ResourceKind.EBS_VOLUME
_SNAPSHOT = ResourceKind.EBS_SNAPSHOT
_BUCKET = ResourceKind.S3_BUCKET
_SPOT = Lifecycle.SPOT

#: Spot below this fraction of on-demand is not a real market price (moto, corrupt data).
MIN_PLAUSIBLE_SPOT_FRACTION = Decimal("0.02")

_SAGEMAKER_KINDS = frozenset(
    {
        ResourceKind.SAGEMAKER_NOTEBOOK,
        ResourceKind.SAGEMAKER_ENDPOINT,
        ResourceKind.SAGEMAKER_TRAINING_JOB,
        ResourceKind.SAGEMAKER_STUDIO_APP,
    }
)


@dataclass(frozen=True, slots=True)
class PriceCatalog:
    """Versioned list prices. Loaded from the package's data file by an adapter."""

    version: int
    as_of: date
    ec2: Mapping[str, Mapping[str, Decimal]]
    sagemaker: Mapping[str, Mapping[str, Decimal]]
    ebs_gb_month: Mapping[str, Mapping[str, Decimal]]
    s3_standard_gb_month: Mapping[str, Decimal]
    eks_cluster_hour: Decimal
    eks_extended_cluster_hour: Decimal
    #: Kubernetes minor version -> last day of EKS standard support.
    eks_standard_support_end: Mapping[str, date] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    not_offered: Mapping[str, frozenset[str]] = field(default_factory=dict)
    unpriced_reasons: Mapping[str, str] = field(default_factory=dict)
    #: instance family or type -> why and since when AWS no longer offers it anywhere.
    #: EC2 keys are bare ("p3"); SageMaker keys keep their prefix ("ml.p3"), because
    #: AWS retires an EC2 family and its SageMaker twin on different dates.
    retired: Mapping[str, str] = field(default_factory=dict)
    #: "<service>/<region>/<type>" or "<service>/<type>" -> why a rate is less certain.
    confidence: Mapping[str, str] = field(default_factory=dict)
    #: EBS snapshot storage (standard tier), $/GB-month by region.
    ebs_snapshot_gb_month: Mapping[str, Decimal] = field(default_factory=dict)
    #: The dated spot interruption-bucket and saving table (estimates and spot advice).
    spot: SpotTable | None = None
    #: Written by a refresh: section ("ec2", "sagemaker", "ebs_gb_month") -> region -> name
    #: -> why the Price List API gave no rate for a name it was asked for there ("not
    #: offered in eu-west-1", "no on-demand rate in the Price List"), with the day it said so.
    no_rate: Mapping[str, Mapping[str, Mapping[str, str]]] = field(default_factory=dict)
    #: The day the rates a refresh does not fetch (EKS, the flat S3 Standard table) were last reviewed,
    #: when the catalog says; None for a catalog written before it said.
    reference_as_of: date | None = None
    #: EBS provisioned IOPS and throughput, $/unit-month in tiers, by region and type
    #: (:mod:`costguard.domain.storage`), read by a refresh like the instance rates.
    ebs_provisioned_month: ProvisionedRates = field(default_factory=dict)
    #: S3 $/GB-month by region and storage class (``standard``, ``standard_ia``, ...).
    s3_class_gb_month: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)

    def s3_class_rates(self, region: str) -> Mapping[str, Decimal]:
        """S3 rates by storage class in ``region``; Standard falls back to the flat S3
        Standard table the stale-object guard prices with."""
        rates = dict(self.s3_class_gb_month.get(region, {}))
        if "standard" not in rates and region in self.s3_standard_gb_month:
            rates["standard"] = self.s3_standard_gb_month[region]
        return rates

    def why_unpriced(self, region: str, instance_type: str) -> str | None:
        """A known reason for a missing price: not offered in the region, no public rate,
        or what the last refresh was told by the Price List API; None when none is recorded."""
        bare = instance_type.removeprefix("ml.")
        if bare.split(".")[0] in self.not_offered.get(region, frozenset()):
            return f"{bare.split('.')[0]} instances are not offered in {region}"
        # SageMaker types have their own reasons: an EC2 Capacity Block says nothing of them.
        reasons = self.unpriced_reasons
        said = reasons.get(f"{region}/{instance_type}") or reasons.get(instance_type)
        if said is not None:
            return said
        section = "sagemaker" if instance_type.startswith("ml.") else "ec2"
        return self.no_rate.get(section, {}).get(region, {}).get(instance_type)

    def unpriced_reason(self, section: str, region: str, name: str) -> str:
        """Why ``name`` has no ``section`` rate in ``region``: the recorded reason when
        there is one, else what the catalog's own contents say (a region it has never
        priced, a name it prices elsewhere only, a name it does not know). Never empty:
        "no rate matches" tells a user nothing they can act on."""
        if section in ("ec2", "sagemaker"):
            retired = self.retirement(name)
            recorded = self.why_unpriced(region, name)
            if recorded is not None:
                return recorded
            if retired is not None:
                return f"retired: {retired}"
        else:
            recorded = self.no_rate.get(section, {}).get(region, {}).get(name)
            if recorded is not None:
                return recorded
        what = SECTION_NAMES.get(section, section)
        table = self._section(section)
        if not table.get(region):
            return (
                f"the price catalog has no {what} rates for {region} "
                f"(it has {_listed(sorted(r for r, v in table.items() if v))}); "
                f"`costguard prices refresh --region {region}` reads them"
                if any(table.values())
                else f"the price catalog has no {what} rates"
            )
        elsewhere = sorted(r for r, rates in table.items() if name in rates)
        if elsewhere:
            return (
                f"the price catalog prices {what} {name} in {_listed(elsewhere)} only; "
                f"`costguard prices refresh --region {region}` checks {region}"
            )
        return f"{what} type {name!r} is not in the price catalog"

    def _section(self, section: str) -> Mapping[str, Mapping[str, Decimal]]:
        if section == "ec2":
            return self.ec2
        if section == "sagemaker":
            return self.sagemaker
        return self.ebs_gb_month

    def retirement(self, instance_type: str) -> str | None:
        """Why ``instance_type`` is retired (the type itself, or its family), or None.

        ``ml.p3.2xlarge`` is looked up as ``ml.p3.2xlarge`` then ``ml.p3``; ``p3dn.24xlarge``
        as ``p3dn.24xlarge`` then ``p3dn``, never ``p3``: a family is the whole prefix.
        """
        found = self.retired.get(instance_type)
        if found is None and "." in instance_type:
            found = self.retired.get(instance_type.rsplit(".", 1)[0])
        return found

    def offered_types(self, region: str, service: str = "ec2") -> tuple[str, ...]:
        """The types worth proposing in ``region`` for an estimate or advice: priced there,
        not retired, and of a family AWS offers there. Sorted, for a stable answer."""
        rates = self.sagemaker if service == "sagemaker" else self.ec2
        absent = self.not_offered.get(region, frozenset())
        return tuple(
            sorted(
                itype
                for itype in rates.get(region, {})
                if self.retirement(itype) is None
                and itype.removeprefix("ml.").split(".")[0] not in absent
            )
        )

    def confidence_note(self, service: str, region: str, instance_type: str) -> str | None:
        """Why the rate of ``instance_type`` in ``region`` is less certain than the rest, or None."""
        return self.confidence.get(f"{service}/{region}/{instance_type}") or self.confidence.get(
            f"{service}/{instance_type}"
        )

    def s3_gb_month(self, region: str) -> Decimal | None:
        """S3 Standard $/GB-month in ``region``; in a region the catalog lacks, the dearest
        rate it has (an upper bound, never $0); None only if it has no S3 rate at all."""
        rates = self.s3_standard_gb_month
        return rates.get(region) or max(rates.values(), default=None)

    def ec2_on_demand(self, region: str, instance_type: str) -> Decimal | None:
        return self.ec2.get(region, {}).get(instance_type)

    def sagemaker_rate(self, region: str, instance_type: str) -> Decimal | None:
        return self.sagemaker.get(region, {}).get(instance_type)

    def in_extended_support(self, version: str, today: date) -> bool:
        return self.eks_support(version, today)[0]

    def eks_support(self, version: str, today: date) -> tuple[bool, str | None]:
        """Whether a cluster of ``version`` pays extended support on ``today``, and, when the
        table does not know the version, why the answer is an estimate.

        A version the table lacks is placed by the EKS cadence: a minor version every
        ~4 months, standard support for 14. One newer than the newest known is in standard
        support; an older one is in extended support once the newest known version is
        that much younger. A version that is not ``major.minor`` is priced at the
        extended rate, an upper bound: never a guess that hides the $0.60/h.
        """
        end = self.eks_standard_support_end.get(version)
        if end is not None:
            return today > end, None
        parsed = _minor(version)
        known = sorted((m, e) for v, e in self.eks_standard_support_end.items() if (m := _minor(v)))
        if parsed is None or not known:
            return True, (
                f"Kubernetes version {version!r} is not a known EKS version; "
                "priced at the extended-support rate, an upper bound"
            )
        newest, newest_end = known[-1]
        steps = (newest[0] - parsed[0]) * 100 + (newest[1] - parsed[1])
        months = 4 * steps  # positive: older than the newest known version
        estimated = _add_months(newest_end, -months)
        extended = today > estimated
        return extended, (
            f"Kubernetes {version} is not in the price catalog's EKS support table; its "
            f"standard support is estimated to end {estimated.isoformat()} (EKS releases a "
            f"minor version about every 4 months), so it is priced at the "
            f"{'extended' if extended else 'standard'} rate; update the catalog"
        )


#: How a user names each section of the catalog.
SECTION_NAMES = {"ec2": "EC2", "sagemaker": "SageMaker", "ebs_gb_month": "EBS volume"}


def _listed(names: list[str]) -> str:
    return ", ".join(names) if names else "none"


def _minor(version: str) -> tuple[int, int] | None:
    parts = version.strip().removeprefix("v").split(".")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def _add_months(day: date, months: int) -> date:
    total = day.year * 12 + (day.month - 1) + months
    year, month = divmod(total, 12)
    if not 1 <= year <= 9999:
        return date.min if months < 0 else date.max
    return date(year, month + 1, min(day.day, 28))


#: A spot price below this is not a price (moto's static history says 0.00001).
MIN_PLAUSIBLE_SPOT_USD = Decimal("0.001")

SpotKey = tuple[str, str, str]
"""(region, availability zone, instance type)"""


class PricedResource(NamedTuple):
    """A resource with its $/h; ``usd_per_hour`` None means unpriced, never $0.

    NamedTuple rather than a frozen dataclass: it is built 100,000 times a scan.
    """

    resource: Resource
    usd_per_hour: Decimal | None
    basis: str

    @property
    def priced(self) -> bool:
        return self.usd_per_hour is not None


def _unpriced(resource: Resource, what: str, reason: str) -> tuple[PricedResource, Finding]:
    advice = f"{reason}; its spend is unknown, not $0"
    return (
        PricedResource(resource, None, "unpriced"),
        Finding(
            FindingCode.UNPRICED,
            resource.key,
            f"no price for {what} in {resource.region}: {advice}",
            Severity.ERROR,
        ),
    )


def price_resource(
    resource: Resource,
    catalog: PriceCatalog,
    spot_prices: Mapping[SpotKey, Decimal],
    today: date,
) -> tuple[PricedResource, list[Finding]]:
    """Price one resource on ``today``. Returns the priced resource and any findings."""
    kind = resource.kind
    if kind is _NODEGROUP:
        return PricedResource(resource, Decimal(0), "priced through its instances"), []
    if kind is _CLUSTER:
        extended, estimate = catalog.eks_support(resource.version or "", today)
        hourly = catalog.eks_extended_cluster_hour if extended else catalog.eks_cluster_hour
        basis = "eks extended support" if extended else "eks standard support"
        findings = (
            [Finding(FindingCode.EKS_VERSION_UNKNOWN, resource.key, estimate, Severity.WARNING)]
            if estimate
            else []
        )
        return PricedResource(resource, hourly, basis), findings
    if kind is _VOLUME:
        vtype = resource.volume_type or ""
        region = resource.region
        per_gb = catalog.ebs_gb_month.get(region, {}).get(vtype)
        if per_gb is None:
            why = catalog.unpriced_reason("ebs_gb_month", region, vtype)
            priced, finding = _unpriced(resource, f"EBS {vtype}", why)
            return priced, [finding]
        return _storage(
            resource,
            volume_price(
                per_gb,
                catalog.ebs_provisioned_month.get(region, {}).get(vtype),
                vtype,
                resource.size_gib,
                resource.iops,
                resource.throughput_mibps,
            ),
        )
    if kind is _SNAPSHOT:
        return _storage(
            resource,
            snapshot_price(
                catalog.ebs_snapshot_gb_month.get(resource.region),
                resource.size_gib,
                resource.storage_tier == "archive",
            ),
        )
    if kind is _BUCKET:
        return _storage(
            resource, bucket_price(catalog.s3_class_rates(resource.region), resource.stored_bytes)
        )

    itype = resource.instance_type or ""
    priced, findings = _price_instance(resource, catalog, spot_prices, itype)
    return _with_caveats(priced, findings, catalog, itype)


def _storage(resource: Resource, price: StoragePrice) -> tuple[PricedResource, list[Finding]]:
    hourly = price.usd_per_hour
    if hourly is None:
        priced, finding = _unpriced(
            resource, price.missing, "the price catalog has no rate for it there"
        )
        return priced, [finding]
    return PricedResource(resource, hourly, price.basis), []


def _with_caveats(
    priced: PricedResource, findings: list[Finding], catalog: PriceCatalog, itype: str
) -> tuple[PricedResource, list[Finding]]:
    """Add what a rate alone does not say: the type is retired, or its rate is uncertain."""
    resource = priced.resource
    retired = catalog.retirement(itype)
    if retired is not None:
        findings.append(
            Finding(
                FindingCode.INSTANCE_TYPE_RETIRED,
                resource.key,
                f"{itype} is a type AWS has retired ({retired}); this one is "
                "still billed at its last rate, but may not start again once stopped: "
                "plan its move to a current type",
                Severity.WARNING,
            )
        )
    if priced.usd_per_hour is not None and priced.usd_per_hour > 0:
        service = "sagemaker" if resource.kind in _SAGEMAKER_KINDS else "ec2"
        note = catalog.confidence_note(service, resource.region, itype)
        if note is not None:
            priced = priced._replace(basis=f"{priced.basis} (low confidence)")
            findings.append(
                Finding(
                    FindingCode.PRICE_LOW_CONFIDENCE,
                    resource.key,
                    f"the {service} rate for {itype} in {resource.region} is less certain "
                    f"than the rest of the catalog: {note}",
                    Severity.INFO,
                )
            )
    return priced, findings


def _price_instance(
    resource: Resource,
    catalog: PriceCatalog,
    spot_prices: Mapping[SpotKey, Decimal],
    itype: str,
) -> tuple[PricedResource, list[Finding]]:
    kind = resource.kind
    if kind in _SAGEMAKER_KINDS:
        unit = catalog.sagemaker_rate(resource.region, itype)
        if unit is None:
            priced, finding = _unpriced(
                resource,
                f"SageMaker {itype}",
                catalog.unpriced_reason("sagemaker", resource.region, itype),
            )
            return priced, [finding]
        hourly = unit * resource.count
        if resource.lifecycle is _SPOT:
            # Managed spot training bills a discount SageMaker only reports after the job.
            return PricedResource(
                resource, hourly, "sagemaker on-demand (managed spot upper bound)"
            ), [
                Finding(
                    FindingCode.SPOT_PRICE_FALLBACK,
                    resource.key,
                    f"managed spot training on {resource.count} x {itype} is priced at the "
                    "on-demand rate as an upper bound; SageMaker reports the spot saving when the job ends",
                    Severity.INFO,
                )
            ]
        return PricedResource(resource, hourly, "sagemaker on-demand"), []

    on_demand = catalog.ec2_on_demand(resource.region, itype)
    if on_demand is None:
        priced, finding = _unpriced(
            resource, f"EC2 {itype}", catalog.unpriced_reason("ec2", resource.region, itype)
        )
        spot = spot_prices.get((resource.region, resource.availability_zone or "", itype))
        if resource.lifecycle is _SPOT and spot is not None and spot >= MIN_PLAUSIBLE_SPOT_USD:
            # The live spot price is what this instance costs; only the on-demand rate
            # (the plausibility check, the fallback) is unknown, and the finding says so.
            known = Finding(
                FindingCode.UNPRICED,
                resource.key,
                f"no on-demand price for EC2 {itype} in {resource.region}; priced at its live "
                f"spot price ${spot}/h, which cannot be checked against on-demand or fall back "
                "to it (run `costguard prices refresh` or add it to the catalog)",
                Severity.WARNING,
            )
            return PricedResource(
                resource, spot * resource.count, "ec2 spot (on-demand rate unknown)"
            ), [known]
        return priced, [finding]
    if resource.lifecycle is _SPOT:
        spot = spot_prices.get((resource.region, resource.availability_zone or "", itype))
        if spot is not None and on_demand * MIN_PLAUSIBLE_SPOT_FRACTION <= spot <= on_demand:
            return PricedResource(resource, spot * resource.count, "ec2 spot"), []
        why = "no spot price was found" if spot is None else f"spot price {spot} is implausible"
        return (
            PricedResource(resource, on_demand * resource.count, "ec2 on-demand (spot fallback)"),
            [
                Finding(
                    FindingCode.SPOT_PRICE_FALLBACK,
                    resource.key,
                    f"{why} for {itype} in {resource.availability_zone or resource.region}; "
                    f"priced at on-demand ${on_demand}/h as an upper bound",
                    Severity.INFO,
                )
            ],
        )
    return PricedResource(resource, on_demand * resource.count, "ec2 on-demand"), []


class Pricer:
    """Prices a whole scan, pricing each distinct (type, region, market, ...) once.

    A fleet is thousands of instances of a handful of shapes; the findings for a
    shape (unpriced, spot fallback) are re-addressed to each resource.
    """

    def __init__(self, catalog: PriceCatalog, spot_prices: Mapping[SpotKey, Decimal], today: date):
        self._catalog = catalog
        self._spot = spot_prices
        self._today = today
        self._memo: dict[tuple[object, ...], tuple[Decimal | None, str, tuple[Finding, ...]]] = {}

    def price(self, resource: Resource) -> tuple[PricedResource, list[Finding]]:
        r = resource
        shape = (
            r.kind,
            r.region,
            r.instance_type,
            r.count,
            r.lifecycle,
            r.availability_zone,
            r.volume_type,
            r.size_gib,
            r.version,
            r.iops,
            r.throughput_mibps,
            r.stored_bytes,
            r.storage_tier,
        )
        hit = self._memo.get(shape)
        if hit is None:
            priced, found = price_resource(r, self._catalog, self._spot, self._today)
            self._memo[shape] = (priced.usd_per_hour, priced.basis, tuple(found))
            return priced, found
        usd, basis, found_for_shape = hit
        priced = PricedResource(r, usd, basis)
        if not found_for_shape:
            return priced, []
        key = r.key
        return priced, [Finding(f.code, key, f.message, f.severity) for f in found_for_shape]
