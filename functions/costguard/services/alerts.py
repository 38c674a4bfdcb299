"""The alert use case: decide (pure rules), claim exactly once (ledger), publish (notifier).

It runs right after each scan, so a runaway GPU bill is announced within one scan
interval. A dry-run deployment still alerts: alerts are not actions.

Three promises, each kept by one mechanism:

- **No alert is lost.** Every publish is a two-phase claim: claim the alert's keys
  (with a lease), publish, then confirm; a failed publish releases the keys, so the
  next scan retries, and a crash between claim and confirm is retried once the
  lease runs out.
- **One failure stops nothing else.** Every alert is attempted; failures are
  collected in an :class:`AlertRun`, which the caller raises (:meth:`AlertRun.raise_if_failed`)
  once the scan's metrics are out, so the Lambda's retries and DLQ still see them.
- **State follows delivery.** The burn-rate and scan-failure state only records what
  was delivered: a spike that could not be published is still "not announced", so
  the next scan sends it, and no recovery is announced for a spike nobody heard of.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from costguard.domain.advice import Advice
from costguard.domain.alerts import (
    Alert,
    AlertResource,
    AnomalyPolicy,
    FailureEpisode,
    ProjectNumbers,
    advice_digest,
    anomaly_alert,
    baseline_rate,
    budget_alerts,
    findings_digest,
    has_recovered,
    is_spike,
    recovery_alert,
    root_cause,
    scan_failed_alert,
    scan_failed_key,
    scan_recovered_alert,
    source_failures,
    unattributed_alert,
    unattributed_key,
    utc_stamp,
)
from costguard.domain.attribution import AttributedResource, ProjectConfig
from costguard.domain.calendar import MAX_EVENT_AGE, MAX_EVENT_LEAD, require_utc
from costguard.domain.findings import Finding, FindingCode
from costguard.domain.launch import FIGURES_STATE, ProjectFigures, TeamFigures, encode_figures
from costguard.domain.launch_policy import (
    POLICY_KINDS,
    Breach,
    LaunchPolicy,
    ProjectPolicy,
    breaches,
    policy_alert,
    policy_key,
    project_policy,
    read_policy_tags,
)
from costguard.domain.models import ACCOUNT_ID, ResourceKind, with_account, without_account
from costguard.domain.spend import Observation
from costguard.domain.teams import TeamReport
from costguard.domain.text import plural
from costguard.ports import Ledger, Notifier
from costguard.rendering import machine_json
from costguard.services.scan import ProjectReport, ScanReport

ANOMALY_STATE = "burn-rate-anomalies"
SCAN_FAILURE_STATE = "scan-failures"
DIGEST_STATE = "findings-digest"
ADVICE_STATE = "advice-digest"
#: The advice state remembers at most this many sent digests a day (hashes of their keys);
#: past it, the claims alone keep each digest to one a day, at one write a scan each.
ADVICE_STATE_MAX_KEYS = 2000
#: A claim whose holder crashed before publishing is claimable again after this.
CLAIM_LEASE = timedelta(minutes=10)
#: Compare-and-set attempts on a state document before giving up (a failure is reported).
STATE_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class AlertSettings:
    scope: str
    thresholds: tuple[int, ...] = (50, 80, 100)
    anomaly: AnomalyPolicy = field(default_factory=AnomalyPolicy)
    digest_hour_utc: int = 8
    #: Resources that appeared this long before a spike count as its cause.
    cause_lookback: timedelta = timedelta(hours=6)
    #: A source that fails this many scans in a row is alerted (once per episode).
    scan_failed_after: int = 3
    #: The scan's advice, as one ``info`` digest per project per UTC day (from the digest hour).
    advice_alerts: bool = True
    #: Advice saving less than this a month is left out of the digest (not of the report).
    advice_min_usd_per_month: Decimal = Decimal(50)
    #: The deployment's launch policy (a $/h limit, allowed regions) and the central
    #: project table, whose limits override tags: running resources outside their
    #: project's policy are alerted, once per resource and cause.
    launch_policy: LaunchPolicy = field(default_factory=LaunchPolicy)
    projects: Mapping[str, ProjectConfig] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AlertFailure:
    """One alert (or one rule, when no alert could be built) that did not go through."""

    alert_id: str
    kind: str
    error: Exception
    #: True when the alert reached the channel but the bookkeeping after it failed.
    published: bool = False

    def __str__(self) -> str:
        state = " (published)" if self.published else ""
        return f"{self.alert_id}{state}: {type(self.error).__name__}: {self.error}"


@dataclass(frozen=True, slots=True)
class AlertRun:
    """What one alert run sent, and what failed. Every alert was attempted."""

    sent: tuple[Alert, ...] = ()
    failed: tuple[AlertFailure, ...] = ()

    def __add__(self, other: AlertRun) -> AlertRun:
        return AlertRun(self.sent + other.sent, self.failed + other.failed)

    def raise_if_failed(self) -> None:
        """Raise one :class:`AlertDeliveryError` for all failures (for retries and the DLQ)."""
        if self.failed:
            raise AlertDeliveryError(self) from self.failed[0].error


class AlertDeliveryError(Exception):
    """Some alerts failed; the others were sent. ``run`` says which is which."""

    def __init__(self, run: AlertRun) -> None:
        shown = "; ".join(str(f) for f in run.failed[:10])
        more = f"; and {len(run.failed) - 10} more" if len(run.failed) > 10 else ""
        super().__init__(
            f"{plural(len(run.failed), 'alert')} failed, {len(run.sent)} sent: {shown}{more}"
        )
        self.run = run


class StateConflictError(Exception):
    """A state document kept changing under us (more concurrent scans than attempts)."""


def alert_resource(a: AttributedResource) -> AlertResource:
    r = a.priced.resource
    return AlertResource(
        r.key,
        r.kind.value,
        r.region,
        r.instance_type,
        a.priced.usd_per_hour,
        a.owner,
        launched_at=r.launched_at,
    )


def _digest_of(key: str) -> str:
    """A short, fixed-size stand-in for a claim key in a state document (a project name
    may be 1 KB of UTF-8; thousands of them must fit one item)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _billable(p: ProjectReport) -> tuple[AlertResource, ...]:
    return tuple(alert_resource(a) for a in p.resources if a.priced.resource.billable)


class _Outcome:
    """The mutable tally of one run; frozen into an :class:`AlertRun` at the end."""

    def __init__(self) -> None:
        self.sent: list[Alert] = []
        self.failed: list[AlertFailure] = []

    def fail(self, alert_id: str, kind: str, error: Exception, published: bool = False) -> None:
        self.failed.append(AlertFailure(alert_id, kind, error, published))

    def freeze(self) -> AlertRun:
        return AlertRun(tuple(self.sent), tuple(self.failed))


class AlertService:
    def __init__(self, ledger: Ledger, notifier: Notifier, settings: AlertSettings) -> None:
        self._ledger = ledger
        self._notifier = notifier
        self._s = settings

    # -- entry points ---------------------------------------------------------------------

    def attempt(self, report: ScanReport, now: datetime) -> AlertRun:
        """Evaluate every rule for this scan and publish what is new; never raises for
        one alert: the failures are in the returned run, for the caller to raise."""
        return self._attempt(report, report.previous, now)

    def attempt_delivery(self, alerts: Sequence[Alert]) -> AlertRun:
        """Publish alerts decided elsewhere (e.g. forwarded AWS cost anomalies), once each."""
        out = _Outcome()
        for alert in alerts:
            self._send(alert, out)
        return out.freeze()

    def run(
        self, report: ScanReport, previous: Mapping[str, Observation], now: datetime
    ) -> list[Alert]:
        """:meth:`attempt`, then raise :class:`AlertDeliveryError` if anything failed."""
        result = self._attempt(report, previous, now)
        result.raise_if_failed()
        return list(result.sent)

    def deliver(self, alerts: Sequence[Alert]) -> list[Alert]:
        """:meth:`attempt_delivery`, then raise :class:`AlertDeliveryError` if anything failed."""
        result = self.attempt_delivery(alerts)
        result.raise_if_failed()
        return list(result.sent)

    def _attempt(
        self, report: ScanReport, previous: Mapping[str, Observation], now: datetime
    ) -> AlertRun:
        now = require_utc(now)
        out = _Outcome()
        for p in report.projects:
            if p.project is not None:
                self._guarded(out, f"budget/{p.project}", partial(self._budgets, p, now, out))
        for t in report.teams:
            self._guarded(
                out, f"team-budget/{t.team}", partial(self._team_budgets, t, report, now, out)
            )
        self._guarded(out, "burn-rate", lambda: self._burn_rate(report, previous, now, out))
        self._guarded(out, "unattributed", lambda: self._unattributed(report, now, out))
        self._guarded(out, "scan-failures", lambda: self._scan_failures(report, now, out))
        self._guarded(out, "findings-digest", lambda: self._digest(report, now, out))
        self._guarded(out, "advice-digest", lambda: self._advice(report, now, out))
        policies = self._policies(report)
        self._guarded(out, "launch-policy", lambda: self._policy(report, policies, now, out))
        self._guarded(out, "project-figures", lambda: self._figures(report, policies, now))
        return out.freeze()

    @staticmethod
    def _guarded(out: _Outcome, rule: str, work: Callable[[], None]) -> None:
        """A rule that fails (a ledger read, say) is one failure, not the end of the run."""
        try:
            work()
        except Exception as exc:
            out.fail(f"{rule} (evaluation)", rule.split("/", maxsplit=1)[0], exc)

    # -- the two-phase send ---------------------------------------------------------------

    def _claim(self, alert: Alert, keys: Sequence[str]) -> list[str]:
        """Phase one for each key; on an error, give back what was taken and re-raise."""
        claimed: list[str] = []
        try:
            for k in keys:
                if self._ledger.claim(
                    "alert", k, alert.at, CLAIM_LEASE, {"alert_id": alert.alert_id}
                ):
                    claimed.append(k)
        except Exception:
            self._release(claimed, alert.at)
            raise
        return claimed

    def _release(self, keys: Sequence[str], at: datetime) -> None:
        for k in keys:
            with contextlib.suppress(Exception):  # the lease frees the key anyway
                self._ledger.release("alert", k, at)

    def _send(
        self,
        alert: Alert,
        out: _Outcome,
        *,
        claimed: Sequence[str] | None = None,
        after_publish: Callable[[], None] | None = None,
    ) -> bool:
        """Claim, publish, (record the new state,) confirm. True if this call published.

        False without a failure means another scan has it (sent, or sending now).
        ``after_publish`` runs between publish and confirm: if it fails, the claim is
        left pending, so the alert is sent again after the lease (a duplicate at
        worst) rather than confirmed with a state that does not say so (lost).
        """
        try:
            keys = self._claim(alert, alert.dedupe) if claimed is None else list(claimed)
        except Exception as exc:
            out.fail(alert.alert_id, alert.kind.value, exc)
            return False
        if not keys:
            return False
        try:
            message_id = self._notifier.publish(alert)
        except Exception as exc:
            self._release(keys, alert.at)
            out.fail(alert.alert_id, alert.kind.value, exc)
            return False
        out.sent.append(alert)
        try:
            if after_publish is not None:
                after_publish()
            for k in keys:
                self._ledger.confirm("alert", k, alert.at)
            self._ledger.record_alert(
                self._s.scope, alert.at, {**machine_json(alert), "message_id": message_id}
            )
        except Exception as exc:
            out.fail(alert.alert_id, alert.kind.value, exc, published=True)
        return True

    def _update_state(
        self, name: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any]:
        """Read-modify-write a state document with compare-and-set, re-reading on conflict.

        ``change`` gets a private copy and returns the new document, or None to leave
        it as it is. Returns the document as stored afterwards.
        """
        for _ in range(STATE_ATTEMPTS):
            doc, version = self._ledger.get_state(self._s.scope, name)
            new = change(copy.deepcopy(doc))
            if new is None or new == doc:
                return doc
            if self._ledger.put_state(self._s.scope, name, new, version):
                return new
        raise StateConflictError(f"state {name!r} changed {STATE_ATTEMPTS} times while updating it")

    # -- budgets and unattributed spend ---------------------------------------------------

    def _budgets(self, p: ProjectReport, now: datetime, out: _Outcome) -> None:
        assert p.project is not None
        numbers = ProjectNumbers(
            p.project,
            p.budget_usd,
            p.month_to_date_usd,
            p.forecast_month_usd,
            p.run_rate_usd_per_hour,
            p.owners,
            _billable(p),
        )
        self._send_budget(numbers, now, out)

    def _team_budgets(
        self, t: TeamReport, report: ScanReport, now: datetime, out: _Outcome
    ) -> None:
        """A team's budget through the project rules, with the team as the subject: the
        same thresholds and forecast, claimed once per team, threshold and month."""
        members = set(t.projects)
        numbers = ProjectNumbers(
            t.team,
            t.budget_usd,
            t.month_to_date_usd,
            t.forecast_month_usd,
            t.run_rate_usd_per_hour,
            t.owners,
            tuple(r for p in report.projects if p.project in members for r in _billable(p)),
            members=t.projects,
            team=True,
        )
        self._send_budget(numbers, now, out)

    def _send_budget(self, numbers: ProjectNumbers, now: datetime, out: _Outcome) -> None:
        for alert in budget_alerts(numbers, self._s.thresholds, now):
            self._send(alert, out)

    def _unattributed(self, report: ScanReport, now: datetime, out: _Outcome) -> None:
        billable = [a for a in report.unattributed.resources if a.priced.resource.billable]
        resources = [alert_resource(a) for a in billable]
        candidate = unattributed_alert(resources, now)
        if candidate is None:
            return
        # At most once per resource per day: only the resources not yet reported today go out.
        keys = {r.key: unattributed_key(r.key, now) for r in resources}
        try:
            claimed = self._claim(candidate, [keys[r.key] for r in resources])
        except Exception as exc:
            out.fail(candidate.alert_id, candidate.kind.value, exc)
            return
        fresh_keys = set(claimed)
        # A resource reported today under its key from before keys carried the account
        # (the day of an upgrade) was reported: confirm the new claim, send nothing.
        for r in resources:
            legacy = without_account(r.key)
            if (
                keys[r.key] in fresh_keys
                and legacy != r.key
                and self._ledger.status("alert", unattributed_key(legacy, now)) == "sent"
            ):
                fresh_keys.discard(keys[r.key])
                self._ledger.confirm("alert", keys[r.key], candidate.at)
        # A volume is reported with its instance. An instance reported on its own today (the
        # on-launch check reads the instance alone) was reported with its volumes: the scan
        # after a launch alert must not send its root volume as news.
        instance_claims = {
            (res.account, res.region, res.id): keys[res.key]
            for res in (a.priced.resource for a in billable)
            if res.kind is ResourceKind.EC2_INSTANCE
        }
        for res in (a.priced.resource for a in billable):
            owner = instance_claims.get((res.account, res.region, res.attached_to or ""))
            key = keys[res.key]
            if (
                res.kind is ResourceKind.EBS_VOLUME
                and owner is not None
                and key in fresh_keys
                and owner not in fresh_keys
                and self._ledger.status("alert", owner) == "sent"
            ):
                fresh_keys.discard(key)
                self._ledger.confirm("alert", key, candidate.at)
        claimed = [k for k in claimed if k in fresh_keys]
        fresh = [r for r in resources if keys[r.key] in fresh_keys]
        alert = unattributed_alert(fresh, now)
        if alert is not None:
            self._send(alert, out, claimed=claimed)

    # -- the project's launch policy, and the figures the on-launch check reads -----------

    def _policies(self, report: ScanReport) -> dict[str, ProjectPolicy]:
        """Each project's policy, read from its resources' tags as budgets are."""
        return {
            p.project: project_policy(
                [
                    read_policy_tags(a.priced.resource.key, a.priced.resource.tags)
                    for a in p.resources
                ],
                self._s.projects.get(p.project),
                self._s.launch_policy,
            )
            for p in report.projects
            if p.project is not None
        }

    def _policy(
        self,
        report: ScanReport,
        policies: Mapping[str, ProjectPolicy],
        now: datetime,
        out: _Outcome,
    ) -> None:
        """Running accelerators outside their project's policy, once per resource and cause
        (the claims the on-launch check takes: an alert sent at launch is not sent again)."""
        found: list[tuple[ProjectReport, AttributedResource, list[Breach]]] = []
        for p in report.projects:
            policy = policies.get(p.project or "")
            if p.project is None or policy is None:
                continue
            for a in p.resources:
                res = a.priced.resource
                if not res.billable or res.kind not in POLICY_KINDS:
                    continue
                broken = breaches(res, a.priced.usd_per_hour, policy)
                if broken:
                    found.append((p, a, broken))
        if not found:
            return
        # One batched read of the claims: a breach announced before costs no write, so a
        # fleet that stays outside policy costs reads, not a conditional write a scan each.
        keys = [("alert", policy_key(alert_resource(a), b.cause)) for _, a, bs in found for b in bs]
        done = {k for (_, k), status in self._ledger.statuses(keys).items() if status == "sent"}
        for p, a, broken in found:
            assert p.project is not None
            open_ = [b for b in broken if policy_key(alert_resource(a), b.cause) not in done]
            self._send_policy(alert_resource(a), p.project, open_, now, out, owners=p.owners)

    def attempt_policy(
        self,
        resource: AlertResource,
        project: str,
        found: Sequence[Breach],
        now: datetime,
        *,
        owners: Sequence[str] = (),
        launched_by: str | None = None,
    ) -> AlertRun:
        """One resource's breaches, as the scan sends them: each cause claimed on its own,
        and only the causes not sent before named (the on-launch check's entry)."""
        out = _Outcome()
        self._send_policy(
            resource, project, found, now, out, owners=owners, launched_by=launched_by
        )
        return out.freeze()

    def _send_policy(
        self,
        resource: AlertResource,
        project: str,
        found: Sequence[Breach],
        now: datetime,
        out: _Outcome,
        *,
        owners: Sequence[str] = (),
        launched_by: str | None = None,
    ) -> None:
        candidate = policy_alert(
            resource, project, found, now, owners=owners, launched_by=launched_by
        )
        if candidate is None:
            return
        try:
            claimed = set(self._claim(candidate, candidate.dedupe))
        except Exception as exc:
            out.fail(candidate.alert_id, candidate.kind.value, exc)
            return
        fresh = [b for b in found if policy_key(resource, b.cause) in claimed]
        alert = policy_alert(resource, project, fresh, now, owners=owners, launched_by=launched_by)
        if alert is not None:
            self._send(alert, out, claimed=list(alert.dedupe))

    def _figures(
        self, report: ScanReport, policies: Mapping[str, ProjectPolicy], now: datetime
    ) -> None:
        """Leave each project's month-to-date, run-rate, budget, policy and team (and each
        team's sums, budget and owners) for the on-launch check, which forecasts from them
        without a scan. A late retry of an older scan never replaces a newer scan's figures."""
        figures = {
            p.project: ProjectFigures(
                now,
                p.month_to_date_usd,
                p.run_rate_usd_per_hour,
                p.budget_usd,
                p.owners,
                policies.get(p.project, ProjectPolicy()),
                p.team,
            )
            for p in report.projects
            if p.project is not None
        }
        # And each team's sums, budget and owners: the launch check forecasts a team too.
        teams = {
            t.team: TeamFigures(
                now,
                t.month_to_date_usd,
                t.run_rate_usd_per_hour,
                t.budget_usd,
                t.budget_source if t.budget_usd is not None else "",
                t.owners,
                t.projects,
            )
            for t in report.teams
        }
        doc = encode_figures(now, figures, teams)

        def change(old: dict[str, Any]) -> dict[str, Any] | None:
            try:
                stamped = require_utc(datetime.fromisoformat(str(old["at"])))
            except (KeyError, TypeError, ValueError):
                return doc  # none yet, or unreadable: never "newer" than ours
            # A newer scan's stands; a retry is at most MAX_EVENT_AGE late. A stamp further
            # ahead was left by a wrong clock: kept, it would freeze the figures.
            if now <= stamped <= now + MAX_EVENT_AGE + MAX_EVENT_LEAD:
                return None
            return doc

        self._update_state(FIGURES_STATE, change)

    # -- burn-rate anomalies --------------------------------------------------------------

    def _anomaly_state(self, now: datetime) -> dict[str, Any]:
        """The anomaly document, ``{"epoch": ..., "projects": {name: entry}}``.

        Claim keys are built from the epoch and each project's generation (bumped by
        every delivered spike or recovery), never from ``now``: two overlapping scans
        see the same generation and so claim the same key, whatever their clocks say.
        The epoch is set once (and migrates the older flat layout), so a document that
        is deleted and recreated never reuses a key that was confirmed before.
        """

        def establish(doc: dict[str, Any]) -> dict[str, Any] | None:
            if "epoch" in doc:
                return None
            legacy = {k: v for k, v in doc.items() if isinstance(v, dict)}
            return {"epoch": utc_stamp(now), "projects": legacy}

        return self._update_state(ANOMALY_STATE, establish)

    def _burn_rate(
        self,
        report: ScanReport,
        previous: Mapping[str, Observation],
        now: datetime,
        out: _Outcome,
    ) -> None:
        policy = self._s.anomaly
        # A project that a failed source held at the last scan has an incomplete rate:
        # not a drop (no false recovery) and not a sample (no false $0 baseline).
        judged = [
            p
            for p in report.projects
            if p.project is not None and p.project not in report.incomplete_projects
        ]
        rates = {p.project: p.run_rate_usd_per_hour for p in judged if p.project is not None}
        history = self._ledger.rate_history(self._s.scope, now - policy.window)
        try:
            self._ledger.record_rates(self._s.scope, now, rates)
        except Exception as exc:
            out.fail("burn-rate (rate samples)", "burn-rate", exc)
        doc = self._anomaly_state(now)
        epoch, projects = str(doc["epoch"]), dict(doc.get("projects", {}))
        previous_rates = {k: o.usd_per_hour for k, o in previous.items()}
        first_seen = {k: o.first_seen_at for k, o in previous.items()}
        for p in judged:
            project = p.project
            assert project is not None
            current = rates[project]
            entry = dict(projects.get(project) or {})
            generation = int(entry.get("gen", 0))
            if entry.get("active"):
                baseline = Decimal(entry["baseline"])
                if not has_recovered(baseline, current, policy):
                    continue
                alert = recovery_alert(
                    project,
                    baseline,
                    current,
                    datetime.fromisoformat(entry["since"]),
                    now,
                    str(entry["episode"]),
                    p.owners,
                )
                after: dict[str, Any] = {"gen": generation + 1, "active": False}
                if entry.get("last_fired"):
                    after["last_fired"] = entry["last_fired"]
            else:
                found = baseline_rate(history.get(project, []), now, policy)
                if found is None or not is_spike(found[0], current, policy):
                    continue
                last = entry.get("last_fired")
                if last and now - datetime.fromisoformat(last) < policy.cooldown:
                    continue
                episode = f"{epoch}.{generation}"
                causes = root_cause(
                    _billable(p), previous_rates, first_seen, now - self._s.cause_lookback
                )
                alert = anomaly_alert(
                    project, found[0], current, causes, p.owners, now, episode, policy
                )
                after = {
                    "gen": generation + 1,
                    "active": True,
                    "baseline": str(found[0]),
                    "since": now.isoformat(),
                    "episode": episode,
                    "last_fired": now.isoformat(),
                }
            self._send(alert, out, after_publish=partial(self._advance, project, generation, after))

    def _advance(self, project: str, generation: int, after: dict[str, Any]) -> None:
        """Record a delivered transition, unless another scan already moved past it."""

        def change(doc: dict[str, Any]) -> dict[str, Any] | None:
            projects = doc.setdefault("projects", {})
            if int((projects.get(project) or {}).get("gen", 0)) != generation:
                return None
            projects[project] = after
            return doc

        self._update_state(ANOMALY_STATE, change)

    # -- sources the scan cannot read -----------------------------------------------------

    def _scan_failures(self, report: ScanReport, now: datetime, out: _Outcome) -> None:
        """Count consecutive failed scans per source; alert once an episode reaches the
        threshold, and once more when the source is read again (only if alerted)."""
        failing = source_failures(report.findings, report.failed_sources)
        stamp = now.isoformat()
        regions = set(report.regions)

        def count(doc: dict[str, Any]) -> dict[str, Any]:
            before: dict[str, Any] = doc.get("sources", {})
            sources: dict[str, Any] = {}
            for key, f in failing.items():
                entry = dict(before.get(key) or {"count": 0, "since": stamp})
                last = entry.get("last")
                if last is None or datetime.fromisoformat(last) < now:  # a retry counts once
                    entry["count"] = int(entry["count"]) + 1
                    entry["last"] = stamp
                entry.update(operation=f.operation, code=f.code)
                sources[key] = entry
            for key, entry in before.items():
                # An announced episode stays until its recovery is delivered.
                if key not in failing and entry.get("alerted") and key.split("/")[0] in regions:
                    sources[key] = entry
            return {"sources": sources}

        doc = self._update_state(SCAN_FAILURE_STATE, count)
        due: list[FailureEpisode] = []
        recovered: list[tuple[str, datetime]] = []
        for key, entry in sorted(doc.get("sources", {}).items()):
            since = datetime.fromisoformat(entry["since"])
            if key not in failing:
                recovered.append((key, since))
            elif not entry.get("alerted") and int(entry["count"]) >= self._s.scan_failed_after:
                due.append(FailureEpisode(failing[key], since, int(entry["count"])))
        candidate = scan_failed_alert(due, now)
        if candidate is not None:
            try:
                claimed = set(self._claim(candidate, candidate.dedupe))
            except Exception as exc:
                out.fail(candidate.alert_id, candidate.kind.value, exc)
            else:
                fresh = [e for e in due if scan_failed_key(e.failure.key, e.since) in claimed]
                alert = scan_failed_alert(fresh, now)
                if alert is not None and self._send(alert, out, claimed=list(alert.dedupe)):
                    keys = [e.failure.key for e in fresh]
                    self._best_effort(out, alert, partial(self._mark_sources, keys, forget=False))
        recovery = scan_recovered_alert(recovered, now)
        if recovery is not None:
            before = len(out.failed)
            self._send(recovery, out)
            if len(out.failed) == before:  # sent now, or by another scan already
                keys = [k for k, _ in recovered]
                self._best_effort(out, recovery, partial(self._mark_sources, keys, forget=True))

    def _best_effort(self, out: _Outcome, alert: Alert, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as exc:
            out.fail(alert.alert_id, alert.kind.value, exc, published=True)

    def _mark_sources(self, keys: Sequence[str], *, forget: bool) -> None:
        """Mark episodes alerted, or (``forget``) drop the alerted ones that recovered."""

        def change(doc: dict[str, Any]) -> dict[str, Any] | None:
            sources = doc.get("sources", {})
            todo = [k for k in keys if k in sources and bool(sources[k].get("alerted")) == forget]
            for k in todo:
                if forget:
                    del sources[k]
                else:
                    sources[k]["alerted"] = True
            return doc if todo else None

        self._update_state(SCAN_FAILURE_STATE, change)

    # -- the daily digest -----------------------------------------------------------------

    def _digest(self, report: ScanReport, now: datetime, out: _Outcome) -> None:
        """Once a day from the digest hour: the findings of yesterday and today (UTC),
        from the ledger, not just this scan's: an outage that ended before the digest
        hour is still in it."""
        if now.astimezone(UTC).hour < self._s.digest_hour_utc:
            return
        today = now.astimezone(UTC).date()
        state, _ = self._ledger.get_state(self._s.scope, DIGEST_STATE)
        if state.get("sent") == today.isoformat():
            return  # skip two ledger reads per scan for the rest of the day
        found: dict[tuple[FindingCode, str], Finding] = {}
        # Resource keys written before they carried the account are read as this
        # account's, so the day of an upgrade does not list one finding twice.
        account = self._s.scope if ACCOUNT_ID.fullmatch(self._s.scope) else ""
        for day in (today - timedelta(days=1), today):
            for held in self._ledger.findings(self._s.scope, day.isoformat()):
                f = held._replace(resource=with_account(held.resource, account))
                found[(f.code, f.resource)] = f
        for f in report.findings:
            found[(f.code, f.resource)] = f
        digest = findings_digest(list(found.values()), now, self._s.digest_hour_utc)
        if digest is not None and self._send(digest, out):
            self._best_effort(out, digest, partial(self._mark_digest, today.isoformat()))

    # -- the daily advice ----------------------------------------------------------------

    def _advice(self, report: ScanReport, now: datetime, out: _Outcome) -> None:
        """Once a day per project, from the digest hour: the scan's advice that saves at
        least the configured minimum, in one ``info`` alert per project.

        The claim on ``advice/<day>/<project>`` is what sends each digest once, whatever
        the retries and concurrent scans; the state document only spares the scans after
        it one claim per project each.
        """
        if not self._s.advice_alerts or not report.advice:
            return
        if now.astimezone(UTC).hour < self._s.digest_hour_utc:
            return
        day = now.astimezone(UTC).date().isoformat()
        owner_of: dict[str, str | None] = {}
        owners: dict[str | None, tuple[str, ...]] = {None: ()}
        for p in (*report.projects, report.unattributed):
            owners[p.project] = p.owners
            for a in p.resources:
                owner_of[a.priced.resource.key] = p.project
        for resource, project in report.advice_projects.items():
            owner_of.setdefault(resource, project)
        grouped: dict[str | None, list[Advice]] = {}
        for advice in report.advice:
            grouped.setdefault(owner_of.get(advice.resource), []).append(advice)
        candidates: list[Alert] = []
        minimum = self._s.advice_min_usd_per_month
        for project, found in sorted(grouped.items(), key=lambda kv: (kv[0] is None, kv[0] or "")):
            alert = advice_digest(
                project, found, now, min_usd_per_month=minimum, owners=owners.get(project, ())
            )
            if alert is not None:
                candidates.append(alert)
        if not candidates:
            return
        state, _ = self._ledger.get_state(self._s.scope, ADVICE_STATE)
        done = set(state.get("keys", ())) if state.get("day") == day else set()
        settled: list[str] = []
        for alert in candidates:
            key = _digest_of(alert.dedupe[0])
            if key in done:
                continue
            before = len(out.failed)
            published = self._send(alert, out)
            if len(out.failed) > before:
                continue  # retried by the next scan (or after the lease)
            # Not published and no failure: another scan holds the claim. Only a digest
            # it *sent* is settled; one it is still sending may yet be released.
            if published or self._ledger.status("alert", alert.dedupe[0]) == "sent":
                settled.append(key)
        if settled:
            self._best_effort(out, candidates[0], partial(self._mark_advice, day, settled))

    def _mark_advice(self, day: str, keys: Sequence[str]) -> None:
        def change(doc: dict[str, Any]) -> dict[str, Any] | None:
            if str(doc.get("day", "")) > day:
                return None  # a late retry of yesterday's scan: today's record stays
            known = list(doc.get("keys", ())) if doc.get("day") == day else []
            new = [k for k in dict.fromkeys(keys) if k not in set(known)]
            room = max(ADVICE_STATE_MAX_KEYS - len(known), 0)
            if not new[:room] and doc.get("day") == day:
                return None
            return {"day": day, "keys": known + new[:room]}

        self._update_state(ADVICE_STATE, change)

    def _mark_digest(self, day: str) -> None:
        self._update_state(
            DIGEST_STATE, lambda doc: None if doc.get("sent") == day else {"sent": day}
        )
