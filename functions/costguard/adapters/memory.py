"""The in-memory ledger (a local ``costguard scan`` without a table) and its read-only view.

Not a mock: the ledger contract test runs against this and DynamoDB alike. Test
doubles (static inventories, recording notifiers) live in ``tests/support``: they
never ship in the Lambda asset.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from costguard.domain.lease import DONE, Lease, claim
from costguard.domain.spend import add_days
from costguard.ports import (
    AuditEvent,
    CommitOutcome,
    ProjectMonth,
    ScanCommit,
)

if TYPE_CHECKING:
    from costguard.domain.findings import Finding
    from costguard.domain.spend import Observation
    from costguard.ports import Ledger


class InMemoryLeases:
    """The in-memory twin of every lease (:mod:`costguard.domain.lease`): the ledger's
    claims and the slice book's aggregation claims. Not locked: its owner's lock is held."""

    def __init__(self) -> None:
        self._held: dict[Hashable, Lease] = {}

    def get(self, key: Hashable) -> Lease | None:
        return self._held.get(key)

    def put_once(self, key: Hashable, now: datetime) -> bool:
        """Done at once, if nothing was ever held under ``key``."""
        if key in self._held:
            return False
        self._held[key] = Lease(DONE, now)
        return True

    def claim(
        self, key: Hashable, now: datetime, length: timedelta, *, monotonic: bool = True
    ) -> bool:
        taken = claim(self._held.get(key), now, length, monotonic=monotonic)
        if taken is not None:
            self._held[key] = taken
        return taken is not None

    def confirm(self, key: Hashable, now: datetime, fence: str | None = None) -> None:
        held = self._held.get(key)
        self._held[key] = Lease(DONE, held.at if held else now, fence=fence)

    def release(self, key: Hashable, claimed_at: datetime) -> bool:
        return self._replace(key, lambda lease: lease.released_by(claimed_at))

    def reopen(self, key: Hashable, fence: str, keep: str | None = None) -> bool:
        return self._replace(key, lambda lease: lease.reopened(fence, keep))

    def _replace(self, key: Hashable, change: Callable[[Lease], Lease | None]) -> bool:
        held = self._held.get(key)
        new = None if held is None else change(held)
        if new is not None:
            self._held[key] = new
        return new is not None


class InMemoryLedger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watermarks: dict[str, datetime] = {}
        self._observations: dict[str, dict[str, Observation]] = {}
        self._months: dict[tuple[str, str, str | None], ProjectMonth] = {}
        self._findings: dict[tuple[str, str, str, str], Finding] = {}
        self._leases = InMemoryLeases()
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
                return CommitOutcome.ALREADY_APPLIED
            if current != commit.previous_watermark or (
                current is not None and commit.now < current
            ):
                return CommitOutcome.CONTENDED
            # All or nothing, like the one DynamoDB transaction.
            for (project, month), inc in commit.increments.items():
                key = (commit.scope, month, project)
                self._months[key] = _plus(self._months.get(key), project, month, inc)
            self._observations[commit.scope] = {o.key: o for o in commit.observations}
            self._watermarks[commit.scope] = commit.now
            return CommitOutcome.APPLIED

    def month_totals(self, scope: str, month: str) -> dict[str | None, ProjectMonth]:
        with self._lock:
            return {
                project: row
                for (s, m, project), row in self._months.items()
                if s == scope and m == month
            }

    def record_findings(self, scope: str, now: datetime, findings: Sequence[Finding]) -> None:
        day = now.date().isoformat()
        with self._lock:
            for f in findings:
                self._findings[(scope, day, f.code.value, f.resource)] = f

    def findings(self, scope: str, day: str) -> list[Finding]:
        with self._lock:
            found = [f for (s, d, _, _), f in self._findings.items() if s == scope and d == day]
        return sorted(found, key=lambda f: (f.code.value, f.resource))

    def put_once(self, namespace: str, key: str, now: datetime, attrs: Mapping[str, Any]) -> bool:
        with self._lock:
            return self._leases.put_once((namespace, key), now)

    def claim(
        self,
        namespace: str,
        key: str,
        now: datetime,
        lease: timedelta,
        attrs: Mapping[str, Any],
    ) -> bool:
        with self._lock:
            return self._leases.claim((namespace, key), now, lease)

    def confirm(self, namespace: str, key: str, now: datetime, fence: str | None = None) -> None:
        with self._lock:
            self._leases.confirm((namespace, key), now, fence)

    def reopen(self, namespace: str, key: str, fence: str, *, keep: str | None = None) -> bool:
        with self._lock:
            return self._leases.reopen((namespace, key), fence, keep)

    def release(self, namespace: str, key: str, claimed_at: datetime) -> None:
        with self._lock:
            self._leases.release((namespace, key), claimed_at)

    def status(self, namespace: str, key: str) -> str | None:
        with self._lock:
            lease = self._leases.get((namespace, key))
            return None if lease is None else lease.status

    def statuses(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        with self._lock:
            found = {k: self._leases.get(k) for k in dict.fromkeys(keys)}
            return {k: lease.status for k, lease in found.items() if lease is not None}

    def audit(self, event: AuditEvent) -> bool:
        with self._lock:
            key = (event.scope, f"{event.at.isoformat()}#{event.event_id}")
            if key in self._audit:
                return False
            self._audit[key] = event
            return True

    def audit_many(self, events: Sequence[AuditEvent]) -> None:
        # Like DynamoDB's batch write: the same record written again is overwritten.
        with self._lock:
            for event in events:
                self._audit[(event.scope, f"{event.at.isoformat()}#{event.event_id}")] = event

    def audit_trail(self, scope: str, month: str) -> list[AuditEvent]:
        with self._lock:
            events = [
                e
                for (s, _), e in self._audit.items()
                if s == scope and e.at.strftime("%Y-%m") == month
            ]
        return sorted(events, key=lambda e: (e.at, e.event_id))

    def record_rates(self, scope: str, at: datetime, rates: Mapping[str, Decimal]) -> None:
        with self._lock:
            for project, usd in rates.items():
                self._rates.setdefault(scope, {}).setdefault(project, {})[at] = usd

    def rate_history(
        self, scope: str, since: datetime
    ) -> dict[str, list[tuple[datetime, Decimal]]]:
        with self._lock:
            history = {
                project: sorted((t, r) for t, r in samples.items() if t >= since)
                for project, samples in self._rates.get(scope, {}).items()
            }
        return {project: samples for project, samples in history.items() if samples}

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
                a
                for t, a in sorted(self._alerts.get(scope, []), key=lambda x: x[0])
                if since <= t <= until
            ]


class ReadOnlyLedger:
    """A view of another ledger that never writes: for ``costguard scan --table``.

    Reads go to the real ledger; this scan's accrual is kept in memory and added to
    the month totals it reports, so the numbers are current but nothing changes.
    Every write is a typed no-op, so a new port method cannot slip through to the
    real table: mypy fails until it is added here.
    """

    def __init__(self, inner: Ledger) -> None:
        self._inner = inner
        self._overlay: dict[tuple[str, str, str | None], ProjectMonth] = {}

    # -- reads, delegated ----------------------------------------------------------

    def watermark(self, scope: str) -> datetime | None:
        return self._inner.watermark(scope)

    def observations(self, scope: str) -> dict[str, Observation]:
        return self._inner.observations(scope)

    def findings(self, scope: str, day: str) -> list[Finding]:
        return self._inner.findings(scope, day)

    def audit_trail(self, scope: str, month: str) -> list[AuditEvent]:
        return self._inner.audit_trail(scope, month)

    def rate_history(
        self, scope: str, since: datetime
    ) -> dict[str, list[tuple[datetime, Decimal]]]:
        return self._inner.rate_history(scope, since)

    def get_state(self, scope: str, name: str) -> tuple[dict[str, Any], int]:
        return self._inner.get_state(scope, name)

    def recent_alerts(self, scope: str, since: datetime, until: datetime) -> list[dict[str, Any]]:
        return self._inner.recent_alerts(scope, since, until)

    def month_totals(self, scope: str, month: str) -> dict[str | None, ProjectMonth]:
        totals = dict(self._inner.month_totals(scope, month))
        for (s, m, project), extra in self._overlay.items():
            if s == scope and m == month:
                totals[project] = _plus(totals.get(project), project, month, extra)
        return totals

    # -- writes: kept in memory or dropped -------------------------------------------

    def commit(self, commit: ScanCommit) -> CommitOutcome:
        current = self._inner.watermark(commit.scope)
        if current == commit.now:
            return CommitOutcome.ALREADY_APPLIED
        if current is not None and commit.now < current:
            return CommitOutcome.CONTENDED
        for (project, month), inc in commit.increments.items():
            key = (commit.scope, month, project)
            self._overlay[key] = _plus(self._overlay.get(key), project, month, inc)
        return CommitOutcome.APPLIED

    def record_findings(self, scope: str, now: datetime, findings: Sequence[Finding]) -> None:
        return None

    def put_once(self, namespace: str, key: str, now: datetime, attrs: Mapping[str, Any]) -> bool:
        return False

    def claim(
        self,
        namespace: str,
        key: str,
        now: datetime,
        lease: timedelta,
        attrs: Mapping[str, Any],
    ) -> bool:
        return False

    def confirm(self, namespace: str, key: str, now: datetime, fence: str | None = None) -> None:
        return None

    def reopen(self, namespace: str, key: str, fence: str, *, keep: str | None = None) -> bool:
        return False

    def release(self, namespace: str, key: str, claimed_at: datetime) -> None:
        return None

    def status(self, namespace: str, key: str) -> str | None:
        return self._inner.status(namespace, key)

    def statuses(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        return self._inner.statuses(keys)

    def audit(self, event: AuditEvent) -> bool:
        return False

    def audit_many(self, events: Sequence[AuditEvent]) -> None:
        return None

    def record_rates(self, scope: str, at: datetime, rates: Mapping[str, Decimal]) -> None:
        return None

    def put_state(
        self, scope: str, name: str, value: Mapping[str, Any], expected_version: int
    ) -> bool:
        return False

    def record_alert(self, scope: str, at: datetime, alert: Mapping[str, Any]) -> None:
        return None


def _plus(base: ProjectMonth | None, project: str | None, month: str, add: Any) -> ProjectMonth:
    """``base`` (none: nothing yet) with ``add``'s spend, estimated spend and days added.

    A ``base`` without days (a row an older version wrote) keeps what it held as
    undated spend, and its days start with ``add``'s. Likewise a ``base`` without
    categories keeps what it held outside them (not split), and its categories start
    with ``add``'s; spend ``add`` holds in no category stays in none.
    """
    base = base or ProjectMonth(project, month, Decimal(0), Decimal(0), {}, by_category={})
    usd, est = base.usd + add.usd, base.estimated_usd + add.estimated_usd
    undated = base.undated_usd if base.days is not None else base.usd
    days = add_days(base.days or {}, add.days or {})
    by_category = add_days(base.by_category or {}, add.by_category or {})
    return replace(
        base,
        usd=usd,
        estimated_usd=est,
        days=days,
        undated_usd=undated,
        by_category=by_category,
    )
