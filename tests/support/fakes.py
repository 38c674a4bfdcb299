"""Test doubles for the ports: they return what they were given and record what they got."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from costguard.domain.pricing import SpotKey
from costguard.ports import Inventory


@dataclass
class StaticInventory:
    """An inventory source that returns what it was given, per region."""

    name: str
    by_region: Mapping[str, Inventory]
    failing: Mapping[str, Exception] | None = None

    def collect(self, region: str, now: datetime) -> Inventory:
        if self.failing and region in self.failing:
            raise self.failing[region]
        return self.by_region.get(region, Inventory())


@dataclass
class RecordingNotifier:
    """A notifier that keeps what it was asked to publish; ``fail`` makes it raise."""

    published: list[Any]
    fail: bool = False

    def publish(self, alert: Any) -> str:
        if self.fail:
            raise RuntimeError("publish failed")
        self.published.append(alert)
        return f"msg-{len(self.published)}"


@dataclass
class StaticSpotPrices:
    prices: Mapping[SpotKey, Decimal]

    def latest(
        self, region: str, instance_types: Sequence[str], now: datetime
    ) -> Mapping[SpotKey, Decimal]:
        wanted = set(instance_types)
        return {k: v for k, v in self.prices.items() if k[0] == region and k[2] in wanted}


class InMemoryCatalogStore:
    """:class:`costguard.ports.CatalogStore` in memory: the same contract as DynamoDB's.

    Documents are copied through JSON on the way in and out, as the real store does, so a
    caller that mutates what it stored or read cannot change the store behind its back.
    """

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._versions: dict[int, tuple[datetime, str]] = {}
        self._current: int | None = None
        self.puts = 0

    def _read(self, version: int | None) -> Any:
        import json

        from costguard.ports import StoredCatalog

        if version is None or version not in self._versions:
            return None
        at, text = self._versions[version]
        return StoredCatalog(version, at, json.loads(text))

    def current(self) -> Any:
        with self._lock:
            return self._read(self._current)

    def get(self, version: int) -> Any:
        with self._lock:
            return self._read(version)

    def latest_version(self) -> int:
        with self._lock:
            return max(self._versions, default=0)

    def put(
        self, document: Mapping[str, Any], *, expected_version: int, at: datetime
    ) -> int | None:
        import json

        from costguard.adapters.catalog_store import CatalogStoreError

        version = int(document["version"])
        if version <= expected_version:
            raise CatalogStoreError(
                f"a new catalog version must be above {expected_version}, got {version}"
            )
        with self._lock:
            self.puts += 1
            if (self._current or 0) != expected_version or version in self._versions:
                return None
            self._versions[version] = (at, json.dumps(document, sort_keys=True))
            self._current = version
            return version


@dataclass
class StaticEndpointMetrics:
    """Endpoint GPU utilization by variant key; records every read, can fail per region."""

    by_key: Mapping[str, Decimal]
    failing: Mapping[str, Exception] | None = None
    #: Invocations by variant key: hour start -> count (absent: unknown).
    served: Mapping[str, Mapping[datetime, Decimal]] | None = None

    def __post_init__(self) -> None:
        self.reads: list[tuple[str, tuple[Any, ...], datetime, datetime]] = []
        self.invocation_reads: list[tuple[str, tuple[Any, ...], datetime, datetime]] = []

    def gpu_utilization(
        self, region: str, variants: Sequence[Any], start: datetime, end: datetime
    ) -> Mapping[str, Decimal]:
        self.reads.append((region, tuple(variants), start, end))
        if self.failing and region in self.failing:
            raise self.failing[region]
        return {v.key: self.by_key[v.key] for v in variants if v.key in self.by_key}

    def invocations(
        self, region: str, variants: Sequence[Any], start: datetime, end: datetime
    ) -> Mapping[str, Mapping[datetime, Decimal]]:
        self.invocation_reads.append((region, tuple(variants), start, end))
        if self.failing and region in self.failing:
            raise self.failing[region]
        served = self.served or {}
        return {v.key: served[v.key] for v in variants if v.key in served}


class Pages:
    """A botocore paginator that answers these pages, whatever it is asked."""

    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self._pages = pages

    def paginate(self, **_: Any) -> Any:
        return iter(self._pages)
