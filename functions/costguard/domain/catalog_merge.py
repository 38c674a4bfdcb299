"""Merge freshly fetched list prices into the current catalog so that a refresh never
makes it worse.

- A rate the Price List API did not return keeps its last value, is listed, and its
  provenance says since when it was kept (``kept_since``).
- A change larger than the hold threshold (default ±50 %) is *held*: the old rate stays
  in force, the new one is recorded next to it for review. A list price rarely moves
  that much; a parser or filter gone wrong does, and one wrong rate misprices every
  instance of a type.
- ``as_of`` is tracked per (service, region): a region, or one service in a region,
  that returned nothing keeps its date, so a stale part of the catalog looks stale.
  The catalog's own ``as_of`` is the oldest of them: "every rate here was checked
  against the API on or after this day".
- Retired types are never touched beyond their rate: whether a type is retired is
  reference data the refresh does not own.

Pure: no I/O, no clock; ``today`` is an argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, localcontext

from costguard.domain.findings import Finding, FindingCode, Severity

#: The catalog sections a refresh fetches, each ``region -> name -> USD``. The storage
#: sections are flat here whatever their shape in the catalog document: a snapshot rate is
#: named by its tier ("standard"), an S3 rate by its storage class ("standard_ia"), an EBS
#: provisioned tier by ``domain.storage.tier_key`` ("io2/iops/32000").
INSTANCE_SECTIONS = ("ec2", "sagemaker")
STORAGE_SECTIONS = (
    "ebs_gb_month",
    "ebs_snapshot_gb_month",
    "ebs_provisioned_month",
    "s3_class_gb_month",
)
SECTIONS = (*INSTANCE_SECTIONS, *STORAGE_SECTIONS)
#: Where a rate came from.
BUNDLED = "bundled"
PRICE_LIST_API = "price-list-api"
#: A change of more than this percentage either way is held for review.
DEFAULT_HOLD_PCT = Decimal(50)
#: A change reported beyond this percentage is said as ">+1000000%": a held price can be
#: absurd (that is why it is held), and its exact ratio is not worth a crash.
CHANGE_PCT_CAP = Decimal(1_000_000)


def _wide() -> Context:
    """Arithmetic on prices that may be absurd (1e30, 1e-300): no overflow, no traps."""
    return Context(prec=28, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[])


def is_price(usd: Decimal) -> bool:
    """A rate a catalog may hold: a finite number above zero (never NaN, never $0)."""
    return usd.is_finite() and usd > 0


Rates = Mapping[str, Mapping[str, Mapping[str, Decimal]]]
"""section -> region -> name -> USD"""


@dataclass(frozen=True, slots=True)
class RateSource:
    """Where one rate came from and how fresh it is."""

    source: str
    as_of: date
    #: The first refresh that asked for this rate and did not get it; None while it is current.
    kept_since: date | None = None
    #: A fetched value not applied because it changed too much, and when it was first seen.
    held_usd: Decimal | None = None
    held_since: date | None = None


@dataclass(frozen=True, slots=True)
class NoRate:
    """Why the Price List API gave no rate for a name a refresh asked for in one region,
    and the first refresh that said so."""

    reason: str
    since: date

    def describe(self) -> str:
        return f"{self.reason} (Price List API, since {self.since.isoformat()})"


@dataclass(frozen=True, slots=True)
class RateBook:
    """The part of a price catalog a refresh owns, plus what it must carry untouched."""

    version: int
    as_of: date
    rates: Rates
    #: Explicit provenance; a rate without an entry is bundled, as of its section's date.
    sources: Mapping[str, Mapping[str, Mapping[str, RateSource]]] = field(default_factory=dict)
    #: section -> region -> the last day the API returned prices for it.
    as_of_by: Mapping[str, Mapping[str, date]] = field(default_factory=dict)
    #: Instance types AWS no longer offers (reference data; read, never changed here).
    retired: frozenset[str] = frozenset()
    #: section -> region -> name -> why the API had no rate for a name it was asked for
    #: there, and the region holds none (a rate the API stopped returning is *kept* instead).
    no_rate: Mapping[str, Mapping[str, Mapping[str, NoRate]]] = field(default_factory=dict)

    def source_of(self, section: str, region: str, name: str) -> RateSource | None:
        """The provenance of one rate; None if the catalog has no such rate."""
        if name not in self.rates.get(section, {}).get(region, {}):
            return None
        explicit = self.sources.get(section, {}).get(region, {}).get(name)
        if explicit is not None:
            return explicit
        return RateSource(BUNDLED, self.region_as_of(section, region))

    def region_as_of(self, section: str, region: str) -> date:
        return self.as_of_by.get(section, {}).get(region, self.as_of)

    def oldest_as_of(self, regions: tuple[str, ...] | None = None) -> date:
        """The oldest date of the (service, region) parts that hold rates, in ``regions``."""
        days = [
            self.region_as_of(section, region)
            for section in SECTIONS
            for region, rates in self.rates.get(section, {}).items()
            if rates and (regions is None or region in regions)
        ]
        return min(days, default=self.as_of)

    def newest_as_of(self) -> date:
        """The last day any of its rates was checked: when a refresh last read anything."""
        return max(
            [self.as_of, *(d for regions in self.as_of_by.values() for d in regions.values())]
        )

    def held(self) -> list[HeldRate]:
        out = []
        for section, regions in sorted(self.sources.items()):
            for region, names in sorted(regions.items()):
                for name, src in sorted(names.items()):
                    current = self.rates.get(section, {}).get(region, {}).get(name)
                    if src.held_usd is not None and current is not None:
                        out.append(
                            HeldRate(section, region, name, current, src.held_usd, src.held_since)
                        )
        return out


@dataclass(frozen=True, slots=True)
class HeldRate:
    section: str
    region: str
    name: str
    current_usd: Decimal
    fetched_usd: Decimal
    since: date | None

    @property
    def change_pct(self) -> Decimal:
        """The change in percent, to one decimal place, capped at ±:data:`CHANGE_PCT_CAP`."""
        if not (is_price(self.current_usd) and self.fetched_usd.is_finite()):
            return CHANGE_PCT_CAP
        with localcontext(_wide()):
            pct = (self.fetched_usd - self.current_usd) * 100 / self.current_usd
        if abs(pct) >= CHANGE_PCT_CAP:
            return CHANGE_PCT_CAP.copy_sign(pct)
        return pct.quantize(Decimal("0.1"))

    def describe(self) -> str:
        pct = self.change_pct
        said = f">{pct:+}" if abs(pct) >= CHANGE_PCT_CAP else f"{pct:+}"
        return (
            f"{self.section}/{self.region}/{self.name}: the Price List API says "
            f"${self.fetched_usd}, {said}% from ${self.current_usd}; held for "
            f"review since {self.since}, the old rate is still used"
        )


@dataclass(frozen=True, slots=True)
class Fetched:
    """What the API returned for one region: section -> name -> USD.

    ``failed`` (throttled, denied) is not the same as empty: a failed region is neither
    merged nor reported as unknown to the API.
    """

    region: str
    prices: Mapping[str, Mapping[str, Decimal]]
    failed: str | None = None
    #: "section/region/name: why" for each answer the source refused to read as a price
    #: (malformed, ambiguous): its last rate is kept.
    rejected: tuple[str, ...] = ()
    #: section -> name -> why the source has no rate for a name asked for ("not offered in
    #: eu-west-1", "no on-demand rate in the Price List"); recorded where no rate is held.
    absent: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.failed is None and not any(self.prices.values())


@dataclass(frozen=True, slots=True)
class MergeResult:
    book: RateBook
    #: "section/region/name: old -> new" for every applied change.
    changed: tuple[str, ...]
    #: "section/region/name" asked for and not returned: its last rate is kept.
    kept: tuple[str, ...]
    held: tuple[HeldRate, ...]
    #: Regions the API returned no prices at all for (not a region it knows?).
    empty_regions: tuple[str, ...]
    #: Regions that could not be read (throttling that outlasted the retries, ...).
    failed_regions: Mapping[str, str]
    #: "section/region/name: why" for every answer not taken as a price (malformed,
    #: ambiguous, not a positive finite number): its last rate is kept.
    rejected: tuple[str, ...] = ()
    #: "section/region/name: why" for every name asked for that the API has no rate for,
    #: in a region that holds none (recorded in the catalog's ``no_rate``).
    without_rate: tuple[str, ...] = ()


def change_is_suspicious(old: Decimal, new: Decimal, hold_pct: Decimal) -> bool:
    """A change of more than ``hold_pct`` percent of the old rate, either way."""
    with localcontext(_wide()):
        return bool(abs(new - old) * 100 > old * hold_pct)


def merge(
    book: RateBook,
    fetched: list[Fetched],
    *,
    today: date,
    hold_pct: Decimal = DEFAULT_HOLD_PCT,
) -> MergeResult:
    """The catalog after a refresh; see the module docstring for the rules."""
    rates = {s: {r: dict(v) for r, v in book.rates.get(s, {}).items()} for s in SECTIONS}
    sources = {s: {r: dict(v) for r, v in book.sources.get(s, {}).items()} for s in book.sources}
    as_of_by = {s: dict(v) for s, v in book.as_of_by.items()}
    no_rate = {s: {r: dict(v) for r, v in book.no_rate.get(s, {}).items()} for s in book.no_rate}
    changed: list[str] = []
    kept: list[str] = []
    held: list[HeldRate] = []
    empty: list[str] = []
    failed: dict[str, str] = {}
    rejected: list[str] = []
    for result in fetched:
        region = result.region
        if result.failed is not None:
            failed[region] = result.failed
            continue
        rejected.extend(result.rejected)
        if result.empty:
            empty.append(region)
            continue
        for section in SECTIONS:
            got: dict[str, Decimal] = {}
            for name, usd in result.prices.get(section, {}).items():
                if is_price(usd):
                    got[name] = usd
                else:
                    rejected.append(
                        f"{section}/{region}/{name}: ${usd} is not a positive finite price"
                    )
            table = rates[section].get(region, {})
            old_sources = sources.get(section, {}).get(region, {})
            new_sources: dict[str, RateSource] = {}
            for name in sorted(set(table) | set(got)):
                where = f"{section}/{region}/{name}"
                previous = book.source_of(section, region, name) or RateSource(
                    PRICE_LIST_API, today
                )
                if name not in got:
                    retired = name in book.retired or name.removeprefix("ml.") in book.retired
                    kept.append(f"{where} (retired)" if retired else where)
                    new_sources[name] = replace(previous, kept_since=previous.kept_since or today)
                    continue
                usd = got[name]
                old = table.get(name)
                if old is not None and change_is_suspicious(old, usd, hold_pct):
                    was_held = old_sources.get(name)
                    since = (
                        was_held.held_since
                        if was_held is not None and was_held.held_usd == usd and was_held.held_since
                        else today
                    )
                    new_sources[name] = replace(
                        previous, kept_since=None, held_usd=usd, held_since=since
                    )
                    held.append(HeldRate(section, region, name, old, usd, since))
                    continue
                if old != usd:
                    changed.append(f"{where}: {old} -> {usd}")
                table[name] = usd
                new_sources[name] = RateSource(PRICE_LIST_API, today)
            _note_absent(no_rate, section, region, table, result.absent.get(section, {}), today)
            if not table:
                continue
            rates[section][region] = table
            sources.setdefault(section, {})[region] = new_sources
            if got:
                as_of_by.setdefault(section, {})[region] = today
            else:
                as_of_by.setdefault(section, {}).setdefault(
                    region, book.region_as_of(section, region)
                )
    no_rate = {s: {r: v for r, v in regions.items() if v} for s, regions in no_rate.items()}
    new = replace(
        book,
        rates=rates,
        sources=sources,
        as_of_by=as_of_by,
        no_rate={s: regions for s, regions in no_rate.items() if regions},
    )
    as_of = new.oldest_as_of()
    if empty or failed:
        # "Every rate here was checked on or after as_of" is about every region asked
        # for: one that returned nothing (a typo such as us-est-1 holds no rates, so
        # oldest_as_of cannot see it) keeps the catalog's date where it was.
        as_of = min(as_of, book.as_of)
    new = replace(new, as_of=as_of)
    read = {f.region for f in fetched if f.failed is None and not f.empty}
    without_rate = tuple(
        f"{section}/{region}/{name}: {note.reason}"
        for section, regions in sorted(new.no_rate.items())
        for region, names in sorted(regions.items())
        if region in read
        for name, note in sorted(names.items())
    )
    return MergeResult(
        book=new,
        changed=tuple(changed),
        kept=tuple(kept),
        held=tuple(held),
        empty_regions=tuple(empty),
        failed_regions=failed,
        rejected=tuple(rejected),
        without_rate=without_rate,
    )


def _note_absent(
    no_rate: dict[str, dict[str, dict[str, NoRate]]],
    section: str,
    region: str,
    table: Mapping[str, Decimal],
    absent: Mapping[str, str],
    today: date,
) -> None:
    """Record why the API had no rate for each name ``absent`` names and ``table`` (the
    region's rates after the merge) does not hold; forget the reason of a name now priced.
    A reason already recorded keeps the day it was first given."""
    notes = no_rate.setdefault(section, {}).setdefault(region, {})
    for name in [n for n in notes if n in table]:
        del notes[name]
    for name, why in absent.items():
        if name in table:
            continue
        was = notes.get(name)
        notes[name] = was if was is not None and was.reason == why else NoRate(why, today)


# -- what a scan says about the catalog it priced with ---------------------------------------

STORED = "stored"
#: The package's catalog with the rates only the stored one has (a newer package).
BUNDLED_AND_STORED = "bundled+stored"


@dataclass(frozen=True, slots=True)
class CatalogInUse:
    """Which catalog a scan priced with: the refreshed one in the store, or the bundled one."""

    source: str
    version: int
    book: RateBook
    #: Why the stored catalog was not used (unreadable, invalid), when that is the reason.
    problem: str | None = None

    @property
    def as_of(self) -> date:
        return self.book.as_of

    def describe(self) -> str:
        return f"{self.source} catalog v{self.version}, as of {self.as_of.isoformat()}"

    def age_days(self, regions: tuple[str, ...], today: date) -> int:
        """Days since the scanned regions' rates were checked; never negative (a date
        after ``today`` is a wrong clock or a hand edit, counted as today)."""
        return max(0, (today - self.book.oldest_as_of(regions)).days)


def catalog_findings(
    in_use: CatalogInUse, regions: tuple[str, ...], today: date, max_age_days: int
) -> list[Finding]:
    """Findings about the catalog itself: stale for a scanned region, unusable, held rates.

    Staleness is judged on the scanned regions only: a region nobody scans does not make
    the prices of the others stale, and a region the refresh could not read does.
    """
    found = []
    if in_use.problem:
        found.append(
            Finding(
                FindingCode.PRICE_CATALOG,
                "price-catalog/stored",
                f"{in_use.problem}; priced with the {in_use.describe()} instead",
                Severity.WARNING,
            )
        )
    dated = {
        (region, in_use.book.region_as_of(section, region))
        for section in SECTIONS
        for region, rates in in_use.book.rates.get(section, {}).items()
        if region in regions and rates
    }
    future = sorted((r, d) for r, d in dated if d > today)
    if (future or in_use.as_of > today) and in_use.source != BUNDLED:
        # A date after today (a wrong clock, a hand edit) would make the catalog look fresh
        # forever: it is said, and its rates are aged as if checked today, never younger.
        # The package's own catalog is dated when it was built: a scan "before" it is a
        # test's fixed clock or a replayed event, not a catalog to distrust.
        said = ", ".join(f"{r} {d.isoformat()}" for r, d in future) or in_use.as_of.isoformat()
        found.append(
            Finding(
                FindingCode.PRICE_CATALOG,
                "price-catalog/future-date",
                f"the {in_use.describe()} says its rates were checked after today "
                f"({today.isoformat()}): {said}; a clock or a hand edit is wrong, so how "
                "fresh its prices are is unknown; run `costguard prices refresh`",
                Severity.WARNING,
            )
        )
    stale = sorted(
        (region, day) for region, day in dated if (today - min(day, today)).days > max_age_days
    )
    for region in sorted({r for r, _ in stale}):
        oldest = min(d for r, d in stale if r == region)
        found.append(
            Finding(
                FindingCode.PRICE_CATALOG,
                f"price-catalog/{region}",
                f"the {in_use.source} price catalog's rates for {region} were last checked "
                f"{oldest.isoformat()}, {(today - oldest).days} days ago (more than "
                f"{max_age_days}): prices may have changed; check the price-refresh Lambda, or "
                "run `costguard prices refresh`",
                Severity.WARNING,
            )
        )
    for held in in_use.book.held():
        if held.region in regions:
            found.append(
                Finding(
                    FindingCode.PRICE_CATALOG,
                    f"price-catalog/{held.section}/{held.region}/{held.name}",
                    held.describe(),
                    Severity.WARNING,
                )
            )
    return found
