"""The price refresh use case: fetch list prices, merge them so the catalog never gets
worse, and store the result as a new version, once, even when two refreshes race.

Prices are fetched once; if another refresh stores a version meanwhile, the fetched
prices are merged again onto that version (a conditional write, never a blind one).
A region that could not be read (throttling that outlasted the retries) is left
exactly as it was and reported; the regions that were read are still stored, since
each of them only got better.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Protocol

from costguard.domain.calendar import require_utc
from costguard.domain.catalog_merge import (
    DEFAULT_HOLD_PCT,
    SECTIONS,
    Fetched,
    MergeResult,
    RateBook,
    merge,
)
from costguard.ports import (
    CatalogStore,
    CatalogStoreError,
    PriceAnswer,
    PriceSource,
    StoredCatalog,
    ThrottledError,
)

#: Conditional writes lost to concurrent refreshes before giving up.
MAX_CONTENDED = 3


class RefreshContendedError(RuntimeError):
    """Other refreshes kept storing first; nothing of this one was written."""


class CatalogDocuments(Protocol):
    """How the refresh reads and writes catalog documents (``adapters.catalog``)."""

    def start(self, stored: Mapping[str, Any] | None) -> tuple[Mapping[str, Any], str | None]:
        """The document a refresh starts from, and why the stored one was not usable."""
        ...

    def book(self, document: Mapping[str, Any]) -> RateBook: ...

    def document(
        self, base: Mapping[str, Any], book: RateBook, *, source_line: str
    ) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class RefreshOutcome:
    result: MergeResult
    written: bool
    version: int
    previous_as_of: date
    #: Why the stored catalog was not the starting point (corrupt, invalid), if it was not.
    problem: str | None = None

    @property
    def as_of(self) -> date:
        return self.result.book.as_of

    def summary(self) -> dict[str, Any]:
        r = self.result
        return {
            "written": self.written,
            "version": self.version,
            "as_of": self.as_of.isoformat(),
            "as_of_moved": self.as_of != self.previous_as_of,
            "regions_without_prices": list(r.empty_regions),
            "failed_regions": dict(r.failed_regions),
            "changed": list(r.changed),
            "held_for_review": [h.describe() for h in r.held],
            "rejected_answers": list(r.rejected),
            "kept_from_previous": list(r.kept),
            "without_a_rate": list(r.without_rate),
            **({"stored_catalog_problem": self.problem} if self.problem else {}),
        }


def wanted_names(book: RateBook) -> dict[str, frozenset[str]]:
    """Every name the catalog prices in any region, per section: asked for in each region."""
    return {
        s: frozenset(n for rates in book.rates.get(s, {}).values() for n in rates) for s in SECTIONS
    }


def fetch_regions(
    prices: PriceSource,
    regions: tuple[str, ...],
    wanted: Mapping[str, frozenset[str]],
    progress: Callable[[str], None],
) -> list[Fetched]:
    fetched = []
    for region in regions:
        progress(f"fetching {region} prices")
        try:
            got = prices.fetch(region, wanted)
        except ThrottledError as exc:
            # Anything else (expired credentials, access denied) is not about one region:
            # it propagates, and nothing is written.
            why = f"{exc.operation} failed with {exc.code}: {exc.detail or 'no message'}"
            progress(f"{region}: {why}; {region} is left as it was")
            fetched.append(Fetched(region, {}, failed=why))
            continue
        rejected = got.rejected if isinstance(got, PriceAnswer) else ()
        absent = got.absent if isinstance(got, PriceAnswer) else {}
        for line in rejected:
            progress(f"not taken as a price: {line}")
        result = Fetched(region, got, rejected=rejected, absent=absent)
        if result.empty:
            progress(f"{region}: the Price List API returned no prices; {region} is left as it was")
        fetched.append(result)
    return fetched


class PriceRefresh:
    def __init__(
        self,
        store: CatalogStore,
        prices: PriceSource,
        documents: CatalogDocuments,
        *,
        hold_pct: Decimal = DEFAULT_HOLD_PCT,
        progress: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self._store = store
        self._prices = prices
        self._documents = documents
        self._hold_pct = hold_pct
        self._progress = progress

    def run(self, regions: tuple[str, ...], now: datetime) -> RefreshOutcome:
        now = require_utc(now)
        regions = tuple(dict.fromkeys(regions))
        if not regions:
            raise ValueError("no regions to refresh")
        fetched: list[Fetched] | None = None
        for _ in range(MAX_CONTENDED):
            stored, expected, unreadable = self._current()
            base, problem = self._documents.start(stored.document if stored else None)
            problem = unreadable or problem
            book = self._documents.book(base)
            if fetched is None:
                fetched = fetch_regions(self._prices, regions, wanted_names(book), self._progress)
            result = merge(book, fetched, today=now.date(), hold_pct=self._hold_pct)
            read = [f.region for f in fetched if f.failed is None and not f.empty]
            unchanged = stored is not None and problem is None and result.book == book
            if not read or unchanged:
                return RefreshOutcome(result, False, expected, book.as_of, problem)
            # Above every version ever stored, not only the current one: after an operator
            # rolled CURRENT back, the versions above it are still in the history, and
            # reusing one would be refused as if another refresh had won, forever.
            version = max(book.version, expected, self._store.latest_version()) + 1
            new = replace(result.book, version=version)
            line = (
                f"AWS Price List Query API (pricing:GetProducts), fetched {now.date().isoformat()}"
                + f" for {', '.join(read)}"
            )
            document = self._documents.document(base, new, source_line=line)
            if self._store.put(document, expected_version=expected, at=now) is not None:
                return RefreshOutcome(replace(result, book=new), True, version, book.as_of, problem)
            self._progress("another refresh stored a catalog meanwhile; merging onto it")
        raise RefreshContendedError(
            f"{MAX_CONTENDED} other refreshes stored first; this one wrote nothing"
        )

    def _current(self) -> tuple[StoredCatalog | None, int, str | None]:
        """The stored catalog, the version a new one must replace, and why it is unusable.

        An item that cannot be decoded (not zlib, not JSON) is treated like an invalid
        document: the refresh starts from the bundled catalog and replaces it, which is
        the repair. Only an item whose version cannot be read at all stops the refresh: a
        conditional write needs to know what it replaces.
        """
        try:
            stored = self._store.current()
        except CatalogStoreError as exc:
            if exc.version is None:
                raise
            self._progress(f"{exc}; starting from the bundled catalog")
            return None, exc.version, str(exc)
        return stored, (stored.version if stored else 0), None
