"""Cost Explorer, a few times a day: reconcile month-to-date, forward AWS cost anomalies.

Each Cost Explorer request costs $0.01. A window is claimed in the ledger before any
call (``put_once``), so however many scans run, Cost Explorer is asked at most once
per window (default 8 h: three times a day).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol

from costguard.domain.alerts import Alert, cost_anomaly_alert
from costguard.domain.calendar import month_key, month_start
from costguard.ports import Ledger


class CostSource(Protocol):
    def cost_by_tag(self, start: date, end: date, tag_key: str) -> dict[str | None, Decimal]: ...

    def anomalies(self, start: date, end: date) -> list[dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class Reconciliation:
    project: str | None
    ledger_usd: Decimal
    cost_explorer_usd: Decimal

    @property
    def delta_usd(self) -> Decimal:
        return self.cost_explorer_usd - self.ledger_usd


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

    def reconcile(self, now: datetime) -> list[Reconciliation] | None:
        """Ledger vs Cost Explorer month-to-date per project; None when not due yet.

        Cost Explorer lags by up to a day and counts every cost carrying the tag, not
        only accelerators: the delta is information, not a correction.
        """
        if not self._claim("reconcile", now):
            return None
        start = month_start(now).date()
        end = now.date() + timedelta(days=1)
        ce = self._source.cost_by_tag(start, end, self._tag)
        ledger = {
            p: row.usd for p, row in self._ledger.month_totals(self._scope, month_key(now)).items()
        }
        rows = [
            Reconciliation(p, ledger.get(p, Decimal(0)), ce.get(p, Decimal(0)))
            for p in sorted(set(ce) | set(ledger), key=lambda x: (x is None, x or ""))
        ]
        self._ledger.put_state(
            self._scope,
            f"reconciliation/{month_key(now)}",
            {
                "at": now.isoformat(),
                "rows": [
                    {
                        "project": r.project,
                        "ledger_usd": str(r.ledger_usd),
                        "cost_explorer_usd": str(r.cost_explorer_usd),
                    }
                    for r in rows
                ],
            },
            self._ledger.get_state(self._scope, f"reconciliation/{month_key(now)}")[1],
        )
        return rows

    def anomaly_alerts(self, now: datetime, min_impact_usd: Decimal = Decimal(100)) -> list[Alert]:
        """AWS Cost Anomaly Detection's anomalies of the last week, as CostGuard alerts."""
        if not self._claim("anomalies", now):
            return []
        found = self._source.anomalies((now - timedelta(days=7)).date(), now.date())
        return [
            a for a in (cost_anomaly_alert(x, now, min_impact_usd) for x in found) if a is not None
        ]
