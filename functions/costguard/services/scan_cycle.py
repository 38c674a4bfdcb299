"""One scheduled scan: the scan use case, then the steps that follow its ledger commit
(alerts, Cost Explorer), each independent of the others.

The spend is committed by the scan. What follows must not stop one another (metrics
are the dashboard's and the alarms' only signal, and the handler emits them whatever
failed), but the invocation still fails at the end, so that the retry and the DLQ see
it: :class:`ScanOutcome` carries the failed steps, and the handler raises
:class:`AfterScanError` after logging.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from costguard.services.alerts import AlertDeliveryError

if TYPE_CHECKING:
    from costguard.domain.alerts import Alert
    from costguard.domain.billed import Billed
    from costguard.services.alerts import AlertService
    from costguard.services.cost_explorer import CostExplorerService
    from costguard.services.scan import ScanReport, ScanService


class AfterScanError(RuntimeError):
    """Steps after the ledger commit failed; the spend is recorded, a retry adds nothing."""

    def __init__(self, failures: list[tuple[str, BaseException]]) -> None:
        super().__init__(
            "; ".join(f"{name}: {type(exc).__name__}: {exc}" for name, exc in failures)
        )
        self.failures = failures


@dataclass(frozen=True)
class ScanOutcome:
    report: ScanReport
    alerts: list[Alert]
    #: What AWS billed each project this month beside what the scan saw (Cost Explorer,
    #: when switched on and due).
    billed: list[Billed] = field(default_factory=list)
    #: The steps after the commit that failed, by name, each with its error.
    failures: list[tuple[str, BaseException]] = field(default_factory=list)


@dataclass(frozen=True)
class ScanCycle:
    """Everything the scan Lambda runs: one use case, then its independent steps."""

    scan: ScanService
    alerts: AlertService | None = None
    cost_explorer: CostExplorerService | None = None

    def run(self, now: datetime) -> ScanOutcome:
        report = self.scan.run(now)
        alerts: list[Alert] = []
        rows: list[Billed] = []
        failures: list[tuple[str, BaseException]] = []
        if self.alerts is not None:
            try:
                alerts += self.alerts.run(report, report.previous, now)
            except AlertDeliveryError as exc:  # every alert was attempted; keep the ones sent
                alerts += exc.run.sent
                failures.append(("alerts", exc))
            except Exception as exc:  # reported by the handler after the other steps
                failures.append(("alerts", exc))
        if self.cost_explorer is not None:
            try:
                month = self.cost_explorer.reconcile(now)
                rows += month.rows if month is not None else ()
                forwarded = self.cost_explorer.anomaly_alerts(now)
                if self.alerts and forwarded:
                    alerts += self.alerts.deliver(forwarded)
            except Exception as exc:
                failures.append(("cost-explorer", exc))
        return ScanOutcome(report, alerts, rows, failures)
