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
