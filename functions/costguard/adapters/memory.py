"""In-memory implementations of the ports, with the same semantics as the AWS ones.

They are not mocks: the ledger contract test runs against this and DynamoDB alike.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from costguard.ports import (
    AuditEvent,
    CommitOutcome,
    Inventory,
    ProjectMonth,
    ScanCommit,
)

if TYPE_CHECKING:
    from costguard.domain.findings import Finding
    from costguard.domain.pricing import SpotKey
    from costguard.domain.spend import Observation


class InMemoryLedger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watermarks: dict[str, datetime] = {}
        self._observations: dict[str, dict[str, Observation]] = {}
        self._months: dict[tuple[str, str, str | None], tuple[ProjectMonth, datetime]] = {}
        self._findings: dict[tuple[str, str, str, str], tuple[Finding, datetime]] = {}
        self._once: dict[tuple[str, str], dict[str, Any]] = {}
        self._audit: dict[tuple[str, str], AuditEvent] = {}  # (scope, time#id)
        self._rates: dict[str, dict[str, dict[datetime, Decimal]]] = {}
        self._state: dict[tuple[str, str], tuple[dict[str, Any], int]] = {}
        self._alerts: dict[str, list[tuple[datetime, dict[str, Any]]]] = {}

    def watermark(self, scope: str) -> datetime | None:
        with self._lock:
            return self._watermarks.get(scope)

    def observations(self, scope: str) -> dict[str, Observation]:
        with self._lock:
            return dict(self._observations.get(scope, {}))

    def commit(self, commit: ScanCommit) -> CommitOutcome:
        with self._lock:
            current = self._watermarks.get(commit.scope)
            if current == commit.now:
                outcome = CommitOutcome.ALREADY_APPLIED
            elif current != commit.previous_watermark:
                return CommitOutcome.CONTENDED
            else:
                outcome = CommitOutcome.APPLIED
            self._watermarks[commit.scope] = commit.now
            for (project, month), inc in commit.increments.items():
                key = (commit.scope, month, project)
                existing = self._months.get(key)
                if existing is not None and existing[1] >= commit.now:
                    continue  # this scan already added to this row
                base = (
                    existing[0]
                    if existing
                    else ProjectMonth(project, month, Decimal(0), Decimal(0))
                )
                self._months[key] = (
                    replace(
                        base,
                        usd=base.usd + inc.usd,
                        estimated_usd=base.estimated_usd + inc.estimated_usd,
                    ),
                    commit.now,
                )
            obs = self._observations.setdefault(commit.scope, {})
            for o in commit.observations:
                obs[o.key] = o
            return outcome

    def month_totals(self, scope: str, month: str) -> dict[str | None, ProjectMonth]:
        with self._lock:
            return {
                project: row
                for (s, m, project), (row, _) in self._months.items()
                if s == scope and m == month
            }

    def record_findings(self, scope: str, now: datetime, findings: Sequence[Finding]) -> None:
        day = now.date().isoformat()
        with self._lock:
            for f in findings:
                key = (scope, day, f.code.value, f.resource)
                self._findings[key] = (f, now)

    def findings(self, scope: str, day: str) -> list[Finding]:
        with self._lock:
            found = [
                f for (s, d, _, _), (f, _) in self._findings.items() if s == scope and d == day
            ]
        return sorted(found, key=lambda f: (f.code.value, f.resource))

    def put_once(self, namespace: str, key: str, now: datetime, attrs: Mapping[str, Any]) -> bool:
        with self._lock:
            if (namespace, key) in self._once:
                return False
            self._once[(namespace, key)] = {"at": now, **attrs}
            return True

    def audit(self, event: AuditEvent) -> bool:
        with self._lock:
            key = (event.scope, f"{event.at.isoformat()}#{event.event_id}")
            if key in self._audit:
                return False
            self._audit[key] = event
            return True

    def audit_trail(self, scope: str, month: str) -> list[AuditEvent]:
        with self._lock:
            events = [
                e
                for (s, _), e in self._audit.items()
                if s == scope and e.at.strftime("%Y-%m") == month
            ]
        return sorted(events, key=lambda e: (e.at, e.event_id))

    def release_once(self, namespace: str, key: str) -> None:
        with self._lock:
            self._once.pop((namespace, key), None)

    def record_rates(self, scope: str, at: datetime, rates: Mapping[str, Decimal]) -> None:
        with self._lock:
            for project, usd in rates.items():
                self._rates.setdefault(scope, {}).setdefault(project, {})[at] = usd

    def rate_history(
        self, scope: str, since: datetime
    ) -> dict[str, list[tuple[datetime, Decimal]]]:
        with self._lock:
            return {
                project: sorted((t, r) for t, r in samples.items() if t >= since)
                for project, samples in self._rates.get(scope, {}).items()
            }

    def get_state(self, scope: str, name: str) -> tuple[dict[str, Any], int]:
        with self._lock:
            value, version = self._state.get((scope, name), ({}, 0))
            return copy.deepcopy(value), version

    def put_state(
        self, scope: str, name: str, value: Mapping[str, Any], expected_version: int
    ) -> bool:
        with self._lock:
            _, version = self._state.get((scope, name), ({}, 0))
            if version != expected_version:
                return False
            self._state[(scope, name)] = (copy.deepcopy(dict(value)), version + 1)
            return True

    def record_alert(self, scope: str, at: datetime, alert: Mapping[str, Any]) -> None:
        with self._lock:
            self._alerts.setdefault(scope, []).append((at, dict(alert)))

    def recent_alerts(self, scope: str, since: datetime, until: datetime) -> list[dict[str, Any]]:
        with self._lock:
            return [
                a for t, a in sorted(self._alerts.get(scope, []), key=lambda x: x[0]) if t >= since
            ]


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


class ReadOnlyLedger:
    """A view of another ledger that never writes: for ``costguard scan --table``.

    Reads go to the real ledger; this scan's accrual is kept in memory and added to
    the month totals it reports, so the numbers are current but nothing changes.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._overlay: dict[tuple[str, str, str | None], ProjectMonth] = {}

    def __getattr__(self, name: str) -> Any:
        if name in {
            "watermark",
            "observations",
            "rate_history",
            "get_state",
            "recent_alerts",
            "audit_trail",
        }:
            return getattr(self._inner, name)
        raise AttributeError(name)

    def commit(self, commit: ScanCommit) -> CommitOutcome:
        if self._inner.watermark(commit.scope) == commit.now:
            return CommitOutcome.ALREADY_APPLIED
        for (project, month), inc in commit.increments.items():
            key = (commit.scope, month, project)
            base = self._overlay.get(key, ProjectMonth(project, month, Decimal(0), Decimal(0)))
            self._overlay[key] = replace(
                base, usd=base.usd + inc.usd, estimated_usd=base.estimated_usd + inc.estimated_usd
            )
        return CommitOutcome.APPLIED

    def month_totals(self, scope: str, month: str) -> dict[str | None, ProjectMonth]:
        totals = dict(self._inner.month_totals(scope, month))
        for (s, m, project), extra in self._overlay.items():
            if s == scope and m == month:
                base = totals.get(project, ProjectMonth(project, month, Decimal(0), Decimal(0)))
                totals[project] = replace(
                    base,
                    usd=base.usd + extra.usd,
                    estimated_usd=base.estimated_usd + extra.estimated_usd,
                )
        return totals

    def record_findings(self, scope: str, now: datetime, findings: Sequence[Finding]) -> None:
        return None

    def put_once(self, namespace: str, key: str, now: datetime, attrs: Mapping[str, Any]) -> bool:
        return False

    def release_once(self, namespace: str, key: str) -> None:
        return None

    def audit(self, event: AuditEvent) -> bool:
        return False

    def record_rates(self, scope: str, at: datetime, rates: Mapping[str, Decimal]) -> None:
        return None

    def put_state(
        self, scope: str, name: str, value: Mapping[str, Any], expected_version: int
    ) -> bool:
        return False

    def record_alert(self, scope: str, at: datetime, alert: Mapping[str, Any]) -> None:
        return None
