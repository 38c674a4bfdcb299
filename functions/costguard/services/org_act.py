"""Guards across an Organization: plan one run per member account, act through its role.

- :class:`GuardFanout` (the hub's fan-out, invoked by a guard's schedule) plans the
  guard's runs from the directory the scan ticks keep (:func:`plan_guard_runs`, no AWS
  call) and sends one message per account to the act queue.
- :class:`GuardWork` (the act consumer) carries one run out: it enters the account
  through the member act role, builds the guard there (its reads and actuators in the
  member account; its claims, audit trail and warnings in the hub), and runs it through
  the one executor, in the account's own ledger scope (:func:`guard_scope`). Dry-run,
  warn-then-act, grace periods, exemptions, claims and the audit trail are the
  single-account ones: nothing here decides or acts on its own.

A run is idempotent (the executor's claims), so a duplicate or redelivered message acts
on nothing twice. An account that cannot be entered is a finding and an alert naming it
(once a day), and the run fails, so that the queue retries it and dead-letters it after
its last attempt; other accounts are not affected.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from costguard.domain.calendar import month_key, require_utc
from costguard.domain.decisions import Action, Decision, Savings, savings_this_month
from costguard.domain.directory import THROTTLED_CODES
from costguard.domain.findings import Finding
from costguard.domain.org_act import (
    GuardRun,
    Reach,
    act_unreachable_alert,
    act_unreachable_finding,
    guard_scope,
    plan_guard_runs,
)
from costguard.ports import AuditLog, FindingStore, StateStore, TimeLeft
from costguard.services.executor import ExecutionReport, ExecutorSettings, acted_savings
from costguard.services.guard import Guard, GuardContext, run_guard

if TYPE_CHECKING:
    from costguard.domain.directory import AccountListing
    from costguard.services.fanout import AlertSink, DirectoryStore


class GuardQueue(Protocol):
    def send(self, runs: Sequence[GuardRun]) -> int:
        """Enqueue each run (deduplicated by time, account and guard); how many were sent."""
        ...


@dataclass(frozen=True, slots=True)
class GuardFanoutSettings:
    #: What each guard guards (its name -> :class:`Reach`): an unknown guard is refused.
    reaches: Mapping[str, Reach]
    #: The configured accounts; None: the listing the scan ticks discovered.
    accounts: tuple[str, ...] | None = None
    #: The deployment's region allow-list (None: every region an account enabled).
    allow: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class GuardFanoutSummary:
    tick: datetime
    guard: str
    accounts: int
    runs: tuple[GuardRun, ...]
    sent: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "tick": self.tick.isoformat(),
            "guard": self.guard,
            "accounts": self.accounts,
            "runs": len(self.runs),
            "account_regions": sum(len(r.regions) for r in self.runs),
            "sent": self.sent,
        }


def guarded_accounts(listing: AccountListing | None) -> tuple[str, ...]:
    """The listed accounts a guard may act in: not those whose tags could not be read at
    the last listing. A scan is read-only, so it guards such an account (missing data is
    not $0); an action is not, and an opt-out tag nobody could read may say "leave us
    alone". They are acted in again once their tags are read."""
    if listing is None:
        return ()
    # Nor those whose opt-out value is not understood (`yes`, `1`, an invisible
    # character): a malformed exemption is honoured as one, so is a malformed opt-out.
    return tuple(
        a for a in listing.accounts if a not in listing.untagged and a not in listing.unclear
    )


class UnknownGuardError(ValueError):
    """A schedule or message names a guard this version does not ship."""


class GuardFanout:
    """One scheduled time of one guard, across the Organization."""

    def __init__(
        self, store: DirectoryStore, queue: GuardQueue, settings: GuardFanoutSettings
    ) -> None:
        self._store = store
        self._queue = queue
        self._s = settings

    def tick(self, guard: str, tick: datetime) -> GuardFanoutSummary:
        tick = require_utc(tick)
        reach = self._s.reaches.get(guard)
        if reach is None:
            known = ", ".join(sorted(self._s.reaches)) or "none"
            raise UnknownGuardError(f"unknown guard {guard!r} (known: {known})")
        directory = self._store.load()
        if self._s.accounts is not None:
            accounts: Sequence[str] = self._s.accounts
        else:
            # The scan ticks list the Organization (at most daily); a guard never does.
            # Before the first listing there is nothing to guard yet.
            accounts = guarded_accounts(directory.listing)
        runs = plan_guard_runs(directory, accounts, tick, guard, reach, self._s.allow)
        sent = self._queue.send(runs)
        return GuardFanoutSummary(tick, guard, len(accounts), tuple(runs), sent)


# -- one run ---------------------------------------------------------------------------------


#: Builds the guard for a run: its settings narrowed to the run's account scope and
#: regions, its reads and actuators on ``clients`` (the member account's), its records in
#: the context (the hub's).
BuildGuard = Callable[[GuardRun, Any, GuardContext], Guard]
#: The member account's clients, through its act role (raises an access error).
EnterAccount = Callable[[GuardRun], Any]


@dataclass(frozen=True, slots=True)
class GuardRunOutcome:
    run: GuardRun
    #: None when the run was dropped (``dropped`` says why).
    report: ExecutionReport | None
    guard: Guard | None = None
    scope: str = ""
    dropped: str = ""


#: A run is worth nothing once a newer one of the same guard has been planned: a
#: message this late (a backlog after an outage, a redrive days later) is dropped, and
#: the next scheduled run judges the account afresh.
MAX_RUN_AGE = timedelta(hours=3)
MAX_RUN_LEAD = timedelta(minutes=5)


class GuardWork:
    """One guard in one member account, through the one executor."""

    def __init__(
        self,
        enter: EnterAccount,
        build: BuildGuard,
        context: GuardContext,
        executor: ExecutorSettings,
        access_errors: tuple[type[Exception], ...],
        *,
        findings: FindingStore | None = None,
        alerts: AlertSink | None = None,
        state: StateStore | None = None,
        known: Collection[str] | None = None,
        guarded: Callable[[str], bool] = lambda _account: True,
    ) -> None:
        #: The guards this version ships (None: whatever ``build`` accepts).
        self._known = known
        #: Whether the deployment guards an account now (listed, not opted out).
        self._guarded = guarded
        self._state = state
        self._enter = enter
        self._build = build
        self._context = context
        self._executor = executor
        self._access_errors = access_errors
        self._findings = findings
        self._alerts = alerts

    def run(
        self, run: GuardRun, now: datetime, time_left: TimeLeft | None = None
    ) -> GuardRunOutcome:
        """Acts in the present (``now``), whatever the run's planned time.

        Raises when the account cannot be entered (after recording and alerting), so the
        queue retries and dead-letters it; a failed action is the caller's to raise
        (the report holds it), after the run's other actions went through.
        """
        now = require_utc(now)
        if self._known is not None and run.guard not in self._known:
            # Refused before the account is entered (no STS call, no CloudTrail entry).
            known = ", ".join(sorted(self._known))
            raise UnknownGuardError(f"unknown guard {run.guard!r} (known: {known})")
        if not (now - MAX_RUN_AGE <= run.tick <= now + MAX_RUN_LEAD):
            return GuardRunOutcome(run, None, dropped="planned more than 3 hours ago")
        if not self._guarded(run.account):
            # Taken off the list, opted out or gone since the message was sent: acting
            # there now would act against the deployment's own scope.
            return GuardRunOutcome(run, None, dropped="the account is not guarded now")
        try:
            clients = self._enter(run)
        except self._access_errors as exc:
            self._report_unreachable(run, exc, now)
            raise
        scope = guard_scope(self._executor.scope, run.account)
        guard = self._build(run, clients, self._context)
        report = run_guard(
            guard,
            self._context,
            replace(self._executor, scope=scope),
            now,
            time_left,
            before=lambda decisions: self._note(run, decisions, now),
        )
        self._report_findings(run, guard, now)
        return GuardRunOutcome(run, report, guard, scope)

    def _note(self, run: GuardRun, decisions: Sequence[Decision], now: datetime) -> None:
        """Index the account for the roll-up's savings *before* anything is done: a note
        written after the action could fail, and the retry then finds the resource stopped
        (skipped, not acted) and would never write it. Only when this run may act (not
        dry-run, some decision other than "leave it"): the index stays the accounts that
        warned or acted this month, not every account guarded."""
        if (
            self._state is None
            or self._executor.dry_run
            or all(d.action is Action.NONE for d in decisions)
        ):
            return
        note_acted(self._state, self._executor.scope, month_key(now), run.account)

    def _report_findings(self, run: GuardRun, guard: Guard, now: datetime) -> None:
        """The guard's findings (a region it could not read, a malformed tag) in the
        hub's scope too, naming the account: the daily digest reads the hub's."""
        found = [
            Finding(
                f.code,
                f"{run.account}/{f.resource}",
                f"account {run.account}, {run.guard}: {f.message}",
                f.severity,
            )
            for f in guard.findings()
        ]
        if found and self._findings is not None:
            self._findings.record_findings(self._executor.scope, now, found)

    def _report_unreachable(self, run: GuardRun, exc: Exception, now: datetime) -> None:
        code = str(getattr(exc, "code", type(exc).__name__))
        detail = str(getattr(exc, "detail", exc))
        if code in THROTTLED_CODES:
            # "Too fast", not "no": the queue's retry will most likely get through, and
            # a run failing every attempt still reaches the dead-letter queue's alarm.
            return
        # Best effort: the run fails and is retried whatever happens here, and a
        # reporting failure must not hide the access error.
        try:
            if self._findings is not None:
                self._findings.record_findings(
                    self._executor.scope, now, [act_unreachable_finding(run, code, detail)]
                )
            if self._alerts is not None:
                self._alerts.attempt_delivery([act_unreachable_alert(run, code, detail, now)])
        except Exception as report_exc:  # the access error is what is raised
            exc.add_note(f"reporting it failed too: {type(report_exc).__name__}: {report_exc}")


# -- what the guards saved, across accounts -------------------------------------------------

#: The hub's index of the member accounts whose guards acted in a month (state name).
ACTED_ACCOUNTS = "org-acted-accounts"
#: Optimistic writes of the index before giving up (each retry re-reads it).
NOTE_ATTEMPTS = 8


class IndexContendedError(RuntimeError):
    """The acted-accounts index kept changing under the writer (raised before the run
    acts, so the retry writes it first and then acts)."""


def note_acted(state: StateStore, scope: str, month: str, account: str) -> None:
    """Add ``account`` to the month's acted-accounts index (idempotent, safe under
    concurrent writers: compare-and-set on the item's version)."""
    name = f"{ACTED_ACCOUNTS}/{month}"
    for _ in range(NOTE_ATTEMPTS):
        value, version = state.get_state(scope, name)
        accounts = [str(a) for a in value.get("accounts", [])]
        if account in accounts:
            return
        if state.put_state(scope, name, {"accounts": sorted({*accounts, account})}, version):
            return
    raise IndexContendedError(f"{name}: {NOTE_ATTEMPTS} concurrent writes in a row")


class OrgSavings:
    """Per project, what the guards saved this month in every member account that acted:
    the single-account figure (:func:`savings_this_month`, from the audit trail), read
    from each such account's scope. One read for the index, one query per account that
    acted this month (not per account guarded)."""

    def __init__(self, state: StateStore, audit: AuditLog, scope: str) -> None:
        self._state = state
        self._audit = audit
        self._scope = scope

    def __call__(self, month: str, now: datetime) -> dict[str | None, Savings]:
        value, _version = self._state.get_state(self._scope, f"{ACTED_ACCOUNTS}/{month}")
        acted = [
            row
            for account in value.get("accounts", [])
            for row in acted_savings(
                self._audit.audit_trail(guard_scope(self._scope, str(account)), month)
            )
        ]
        return savings_this_month(acted, now)
