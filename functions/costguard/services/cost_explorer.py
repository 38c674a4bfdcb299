"""Cost Explorer, a few times a day: what AWS billed each project beside what the scan saw,
and AWS cost anomalies forwarded.

Each Cost Explorer request costs $0.01. A window is claimed in the ledger before any
call (``put_once``), so however many scans run, Cost Explorer is asked at most once
per window (default 8 h: three times a day).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol

from costguard.domain.alerts import Alert, cost_anomaly_alert
from costguard.domain.billed import BilledMonth, billed_rows
from costguard.domain.calendar import month_key, month_start
from costguard.ports import Ledger

#: The state document of a month's billed-beside-seen rows: ``billed/<YYYY-MM>``.
BILLED_STATE = "billed/{month}"


class CostSource(Protocol):
    def cost_by_tag(
        self, start: date, end: date, tag_key: str
    ) -> dict[str | None, tuple[Decimal, Decimal]]: ...

    def anomalies(self, start: date, end: date) -> list[dict[str, Any]]: ...


class CostExplorerService:
    def __init__(
        self,
        ledger: Ledger,
        source: CostSource,
        scope: str,
        tag_key: str,
        every: timedelta = timedelta(hours=8),
    ) -> None:
        self._ledger = ledger
        self._source = source
        self._scope = scope
        self._tag = tag_key
        self._every = every

    def _claim(self, what: str, now: datetime) -> bool:
        window = int(now.timestamp() // self._every.total_seconds())
        return self._ledger.put_once("cost-explorer", f"{self._scope}/{what}/{window}", now, {})

    def reconcile(self, now: datetime) -> BilledMonth | None:
        """What AWS billed each project this month beside what the scan saw, kept in the
        ledger for the report; None when not due yet (see :mod:`costguard.domain.billed`)."""
        if not self._claim("reconcile", now):
            return None
        start = month_start(now).date()
        end = now.date() + timedelta(days=1)
        billed = self._source.cost_by_tag(start, end, self._tag)
        seen = {
            p: row.usd for p, row in self._ledger.month_totals(self._scope, month_key(now)).items()
        }
        month = BilledMonth(now.isoformat(), billed_rows(billed, seen))
        name = BILLED_STATE.format(month=month_key(now))
        self._ledger.put_state(
            self._scope, name, month.document(), self._ledger.get_state(self._scope, name)[1]
        )
        return month

    def anomaly_alerts(self, now: datetime, min_impact_usd: Decimal = Decimal(100)) -> list[Alert]:
        """AWS Cost Anomaly Detection's anomalies of the last week, as CostGuard alerts."""
        if not self._claim("anomalies", now):
            return []
        found = self._source.anomalies((now - timedelta(days=7)).date(), now.date())
        return [
            a for a in (cost_anomaly_alert(x, now, min_impact_usd) for x in found) if a is not None
        ]
