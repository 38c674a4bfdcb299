"""The alert use case: decide (pure rules), claim exactly once (ledger), publish (notifier).

It runs right after each scan, so a runaway GPU bill is announced within one scan
interval. A dry-run deployment still alerts: alerts are not actions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from costguard.domain.alerts import (
    Alert,
    AlertResource,
    AnomalyPolicy,
    ProjectNumbers,
    anomaly_alert,
    baseline_rate,
    budget_alerts,
    findings_digest,
    has_recovered,
    is_spike,
    recovery_alert,
    root_cause,
    unattributed_alert,
)
from costguard.domain.attribution import AttributedResource
from costguard.domain.spend import Observation
from costguard.ports import Ledger, Notifier
from costguard.rendering import machine_json
from costguard.services.scan import ProjectReport, ScanReport

ANOMALY_STATE = "burn-rate-anomalies"
#: A claim whose holder crashed before publishing is claimable again after this.
CLAIM_LEASE = timedelta(minutes=10)


@dataclass(frozen=True, slots=True)
class AlertSettings:
    scope: str
    thresholds: tuple[int, ...] = (50, 80, 100)
    anomaly: AnomalyPolicy = field(default_factory=AnomalyPolicy)
    digest_hour_utc: int = 8
    #: Resources that appeared this long before a spike count as its cause.
    cause_lookback: timedelta = timedelta(hours=6)


def alert_resource(a: AttributedResource) -> AlertResource:
    r = a.priced.resource
    return AlertResource(
        r.key, r.kind.value, r.region, r.instance_type, a.priced.usd_per_hour, a.owner
    )


def _billable(p: ProjectReport) -> tuple[AlertResource, ...]:
    return tuple(alert_resource(a) for a in p.resources if a.priced.resource.billable)


class AlertService:
    def __init__(self, ledger: Ledger, notifier: Notifier, settings: AlertSettings) -> None:
        self._ledger = ledger
        self._notifier = notifier
        self._s = settings

    def run(
        self, report: ScanReport, previous: Mapping[str, Observation], now: datetime
    ) -> list[Alert]:
        """Evaluate every rule for this scan and publish what is new; return what was sent."""
        candidates: list[Alert] = []
        for p in report.projects:
            if p.project is None:
                continue
            numbers = ProjectNumbers(
                p.project,
                p.budget_usd,
                p.month_to_date_usd,
                p.forecast_month_usd,
                p.run_rate_usd_per_hour,
                p.owners,
                _billable(p),
            )
            candidates += budget_alerts(numbers, self._s.thresholds, now)
        candidates += self._burn_rate(report, previous, now)
        sent = [a for a in candidates if self._deliver(a, a.dedupe)]
        unattributed = self._unattributed(report, now)
        if unattributed is not None:
            sent.append(unattributed)
        digest = findings_digest(report.findings, now, self._s.digest_hour_utc)
        if digest is not None and self._deliver(digest, digest.dedupe):
            sent.append(digest)
        return sent

    def deliver(self, alerts: Sequence[Alert]) -> list[Alert]:
        """Publish alerts decided elsewhere (e.g. forwarded AWS cost anomalies), once each."""
        return [a for a in alerts if self._deliver(a, a.dedupe)]

    def _deliver(self, alert: Alert, keys: Sequence[str]) -> bool:
        """Claim the alert's keys; publish only if at least one was new to us.

        If publishing fails, the claims are released so that the next scan retries,
        and the error propagates (the Lambda's retries and DLQ take over).
        """
        claimed = [
            k
            for k in keys
            if self._ledger.claim("alert", k, alert.at, CLAIM_LEASE, {"alert_id": alert.alert_id})
        ]
        if not claimed:
            return False
        try:
            message_id = self._notifier.publish(alert)
        except Exception:
            for k in claimed:
                self._ledger.release("alert", k, alert.at)
            raise
        for k in claimed:
            self._ledger.confirm("alert", k, alert.at)
        self._ledger.record_alert(
            self._s.scope, alert.at, {**machine_json(alert), "message_id": message_id}
        )
        return True

    def _unattributed(self, report: ScanReport, now: datetime) -> Alert | None:
        resources = [
            alert_resource(a) for a in report.unattributed.resources if a.priced.resource.billable
        ]
        candidate = unattributed_alert(resources, now)
        if candidate is None:
            return None
        # At most once per resource per day: only the resources not yet reported today go out.
        fresh = [
            r
            for r, key in zip(candidate.resources, candidate.dedupe, strict=True)
            if self._ledger.claim("alert", key, now, CLAIM_LEASE, {"alert_id": candidate.alert_id})
        ]
        if not fresh:
            return None
        alert = unattributed_alert(fresh, now)
        assert alert is not None
        try:
            message_id = self._notifier.publish(alert)
        except Exception:
            for key in alert.dedupe:
                self._ledger.release("alert", key, now)
            raise
        for key in alert.dedupe:
            self._ledger.confirm("alert", key, now)
        self._ledger.record_alert(
            self._s.scope, now, {**machine_json(alert), "message_id": message_id}
        )
        return alert

    def _burn_rate(
        self, report: ScanReport, previous: Mapping[str, Observation], now: datetime
    ) -> list[Alert]:
        policy = self._s.anomaly
        rates = {
            p.project: p.run_rate_usd_per_hour for p in report.projects if p.project is not None
        }
        history = self._ledger.rate_history(self._s.scope, now - policy.window)
        state, version = self._ledger.get_state(self._s.scope, ANOMALY_STATE)
        new_state: dict[str, Any] = dict(state)
        alerts: list[Alert] = []
        previous_rates = {k: o.usd_per_hour for k, o in previous.items()}
        first_seen = {k: o.first_seen_at for k, o in previous.items()}
        for p in report.projects:
            if p.project is None:
                continue
            current = rates[p.project]
            entry = dict(state.get(p.project, {}))
            if entry.get("active"):
                baseline = Decimal(entry["baseline"])
                if has_recovered(baseline, current, policy):
                    since = datetime.fromisoformat(entry["since"])
                    alerts.append(
                        recovery_alert(
                            p.project, baseline, current, since, now, entry["episode"], p.owners
                        )
                    )
                    new_state[p.project] = {"active": False, "last_fired": entry.get("last_fired")}
                continue
            found = baseline_rate(history.get(p.project, []), now, policy)
            if found is None or not is_spike(found[0], current, policy):
                continue
            last = entry.get("last_fired")
            if last and now - datetime.fromisoformat(last) < policy.cooldown:
                continue
            episode = now.strftime("%Y%m%dT%H%M")
            causes = root_cause(
                _billable(p), previous_rates, first_seen, now - self._s.cause_lookback
            )
            alerts.append(
                anomaly_alert(p.project, found[0], current, causes, p.owners, now, episode)
            )
            new_state[p.project] = {
                "active": True,
                "baseline": str(found[0]),
                "since": now.isoformat(),
                "episode": episode,
                "last_fired": now.isoformat(),
            }
        self._ledger.record_rates(self._s.scope, now, rates)
        if new_state != state and not self._ledger.put_state(
            self._s.scope, ANOMALY_STATE, new_state, version
        ):
            return []  # a concurrent scan moved the anomaly state first; it sends these alerts
        return alerts
