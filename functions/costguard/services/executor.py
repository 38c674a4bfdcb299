"""The one path by which CostGuard changes anything: decide, warn, act, audit, tell.

Every policy hands its decisions to :class:`Executor`. For each decision, in order:

1. look at the resource (as its policy listed it in this run, else through one batched
   ``inspect`` of all of an actuator's resources) and check scope and exemption on its tags;
2. warn first: tag ``costguard:action-after=<UTC time>`` and tell the owner; activity
   (a ``NONE`` decision) or an exemption before that time withdraws the warning;
3. at or after that time: in dry-run, record what would happen and what it would save
   (when that changed since the last run), and stop there; else look at the resource
   again on its own, re-check scope and exemption, and claim the action in the ledger, so
   that overlapping runs act once;
4. call the actuator, then audit what was found and done, and tell the owner.

A pass's reads are shared: calls grow with pages (1,000 instances a ``DescribeInstances``,
100 ledger records a ``BatchGetItem``, a run's audit records in one item), and only an
action pays per resource.

A standing action (a sweep) may leave machinery in AWS between runs (a lifecycle rule).
It belongs to the decision that set it up: on every path where the decision does not
act this run (dry-run included), the actuator is told to stand it down
(:class:`~costguard.ports.StandingActuator`), so that nothing outlives its decision.

A failure on one resource is recorded and the rest proceed; the run's summary
counts failures, and the handler fails the invocation when there are any, so that
retries and the dead-letter queue see them.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from costguard.domain.alerts import Alert
from costguard.domain.calendar import require_utc
from costguard.domain.decisions import (
    ApplyResult,
    Decision,
    Gate,
    NotYet,
    Observed,
    Step,
    Target,
    action_after,
    claim_key,
    deadline_tag,
    gate,
    notice_alert,
    taken_alert,
    warning_alert,
    warning_key,
)
from costguard.domain.money import HOURS_PER_PRICING_MONTH, ZERO
from costguard.domain.tags import TagKeys, Tags, read_tags
from costguard.domain.text import plural
from costguard.domain.windows import before
from costguard.ports import ActionLedger, Actuator, AuditEvent, Notifier, StandingActuator
from costguard.retry import retrying

#: A claimed action whose holder crashed is claimable again after this.
ACTION_LEASE = timedelta(minutes=15)
#: How long two runs can overlap (the actuator Lambda's timeout): they share warn claims.
RUN_OVERLAP = timedelta(minutes=15)


@dataclass(frozen=True, slots=True)
class ExecutorSettings:
    scope: str
    dry_run: bool = True
    tag_keys: TagKeys = field(default_factory=TagKeys)
    #: Tag keys whose presence puts an untagged resource in scope (e.g. costguard:ttl).
    opt_in_tags: tuple[str, ...] = ()
    #: The tag this executor warns with. Two guards that act on one resource (idle,
    #: maximum lifetime) each keep their own warning, its ledger records and claims: one
    #: must never withdraw, or wait on, the other's.
    warning_tag: str = Tags.ACTION_AFTER
    #: The guard whose decisions these are: its warnings carry their answers (keep, act
    #: now, exempt) addressed to it. Empty: warnings without answers.
    guard: str = ""


@dataclass(frozen=True, slots=True)
class Outcome:
    decision: Decision
    step: Step
    detail: str
    deadline: datetime | None = None
    #: Set when something failed: the step itself, or (after acting) telling the owner.
    error: str | None = None
    #: What this outcome saved, where it is not the decision's estimate (a standing
    #: action's run: what it did, nothing when it did nothing).
    saved: Decimal | None = None

    @property
    def usd_per_hour_saved(self) -> Decimal:
        return self.decision.usd_per_hour_saved if self.saved is None else self.saved

    @property
    def usd_per_month_saved(self) -> Decimal:
        return self.usd_per_hour_saved * HOURS_PER_PRICING_MONTH


@dataclass(frozen=True, slots=True)
class ExecutionReport:
    dry_run: bool
    outcomes: tuple[Outcome, ...]

    @property
    def counts(self) -> Mapping[str, int]:
        return dict(Counter(o.step.value for o in self.outcomes))

    @property
    def failures(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.error is not None)

    def saved_usd_per_month(self, *steps: Step) -> Decimal:
        return sum((o.usd_per_month_saved for o in self.outcomes if o.step in steps), ZERO)


class ActionsFailedError(RuntimeError):
    """Some actions failed; the others were applied. Raised so the retry and DLQ see it."""


def failed_message(report: ExecutionReport) -> str:
    """What :class:`ActionsFailedError` says: how many failed, and the first ten."""
    return (
        f"{len(report.failures)} of {plural(len(report.outcomes), 'action')} failed: "
        + "; ".join(f"{o.decision.target.key}: {o.error}" for o in report.failures[:10])
    )


@dataclass
class _Pass:
    """One run's shared reads and pending writes (each decision still has its own steps)."""

    now: datetime
    #: What each resource looked like at the start of the run, by target key: one
    #: batched ``inspect`` per actuator. None: gone; an exception: that look failed.
    observed: dict[str, Observed | Exception | None] = field(default_factory=dict)
    #: Ledger records of the warnings the resources carry, read at once.
    statuses: dict[tuple[str, str], str] = field(default_factory=dict)
    prefetched: set[tuple[str, str]] = field(default_factory=set)
    #: Audit records not yet written (target key, event): written together at the end of
    #: the run, and at once after an action.
    audits: list[tuple[str, AuditEvent]] = field(default_factory=list)
    #: Target keys whose audit record could not be written, and why.
    audit_errors: dict[str, str] = field(default_factory=dict)
    #: What a dry-run reported last time (resource -> report), as read; None: not read yet.
    journal: dict[str, str] | None = None
    journal_version: int = 0
    #: What this run reports.
    reports: dict[str, str] = field(default_factory=dict)


#: Dry-run reports remembered (one short line each, in one ledger document of < 400 KB);
#: beyond this the reports are written every run, batched.
JOURNAL_LIMIT = 10_000


class Executor:
    def __init__(
        self,
        actuators: Sequence[Actuator],
        ledger: ActionLedger,
        notifier: Notifier | None,
        settings: ExecutorSettings,
    ) -> None:
        self._actuators = {a.kind: a for a in actuators}
        self._ledger = ledger
        self._notifier = notifier
        self._s = settings
        self._tag = settings.warning_tag
        #: What this executor's ledger keys start with: nothing for the shared warning tag
        #: (the keys every deployment already holds), the tag's name for another.
        self._ns = (
            "" if self._tag == Tags.ACTION_AFTER else self._tag.removeprefix("costguard:") + "/"
        )
        #: The ledger document of what a dry-run of these actuators last reported.
        self._journal = f"reports/{self._ns}" + "+".join(sorted(self._actuators))

    def run(self, decisions: Sequence[Decision], now: datetime) -> ExecutionReport:
        """Every decision in order, on the reads they share (see the module docstring)."""
        p = _Pass(require_utc(now))
        self._look(decisions, p)
        self._prefetch(decisions, p)
        outcomes: list[Outcome] = []
        for d in decisions:
            try:
                outcome = self._one(d, p)
            except Exception as exc:  # contained: recorded, reported, and failed at the end
                error = f"{type(exc).__name__}: {exc}"
                outcome = Outcome(d, Step.FAILED, error, error=error)
                self._audit(d, p, outcome, found="unknown")
            if outcome is not None:
                outcomes.append(outcome)
                if outcome.step in (Step.ACTED, Step.NOTICE_ONLY):
                    self._flush(p)  # what was done to a resource is on record at once
        self._flush(p)
        journal_error = self._remember(p)
        return ExecutionReport(self._s.dry_run, tuple(self._settle(outcomes, p, journal_error)))

    # -- reads shared by the run ---------------------------------------------------

    def _look(self, decisions: Sequence[Decision], p: _Pass) -> None:
        """What each resource looks like: as its policy listed it in this run (no call),
        else one ``inspect`` per actuator for all of its resources (batched by region)."""
        wanted: dict[str, dict[str, Target]] = {}
        for d in decisions:
            t = d.target
            if t.kind not in self._actuators or not self._needs_look(d):
                continue
            if t.tags_seen is not None and t.state_seen is not None:
                p.observed[t.key] = Observed(t.state_seen, dict(t.tags_seen))
            else:
                wanted.setdefault(t.kind, {})[t.key] = t
        for kind, targets in wanted.items():
            try:
                found = self._actuators[kind].inspect(list(targets.values()))
            except Exception as exc:  # each decision of that actuator fails with it
                for key in targets:
                    p.observed[key] = exc
                continue
            for key in targets:
                p.observed[key] = found.get(key)

    def _needs_look(self, d: Decision) -> bool:
        seen = d.target.tags_seen
        # Busy and never warned (as the policy read it this run): nothing to withdraw.
        return d.acts or seen is None or self._tag in seen

    def _prefetch(self, decisions: Sequence[Decision], p: _Pass) -> None:
        """The ledger records of every warning the resources carry, in one read."""
        keys: list[tuple[str, str]] = []
        for d in decisions:
            seen = p.observed.get(d.target.key)
            if not d.acts or not isinstance(seen, Observed):
                continue
            deadline = action_after(seen.tags, self._tag)
            if isinstance(deadline, datetime):
                keys += [*self._deadline_keys(d, deadline), self._act_now_key(d.target, deadline)]
        if not keys:
            return
        try:
            p.statuses = self._ledger.statuses(keys)
        except Exception:  # each decision then reads its own records (and fails alone)
            return
        p.prefetched = set(keys)

    def _act_now_key(self, target: Target, deadline: datetime) -> tuple[str, str]:
        """The owner's "act now" answer to the warning with this deadline."""
        return act_now_key(self._ns, target, deadline)

    def _deadline_keys(self, d: Decision, deadline: datetime) -> list[tuple[str, str]]:
        return [
            ("warned", self._ns + _warning_key(d, deadline)),
            ("withdrawn", self._ns + warning_key(d.target, deadline)),
        ]

    # -- one decision -------------------------------------------------------------

    def _deadline(
        self, d: Decision, tags: Mapping[str, str], p: _Pass, *, fresh: bool = False
    ) -> datetime | None:
        """The deadline of a warning CostGuard *delivered*; None if there is none.

        The tag alone is not trusted: it may have been copied from another instance
        ("launch more like this", a launch template), set by hand in the past or the
        far future, or left behind by a warning whose message never went out. Only a
        deadline recorded in the ledger after the owner was told counts (read with the
        run's others; a deadline the run's first look did not see is read on its own).
        ``fresh`` (just before acting): whether it was withdrawn since is read again
        (a delivered warning stays delivered; a withdrawal may have landed meanwhile).
        """
        deadline = action_after(tags, self._tag)
        if not isinstance(deadline, datetime):
            return None
        if d.session_start is not None and deadline - d.grace < d.session_start:
            return None  # about an earlier session: stopped and started since
        warned, withdrawn = self._deadline_keys(d, deadline)

        def status(key: tuple[str, str], *, again: bool = False) -> str | None:
            if key in p.prefetched and not again:
                return p.statuses.get(key)
            return self._ledger.status(*key)

        if status(warned) != "sent":
            return None
        if status(withdrawn, again=fresh) is not None:
            return None  # used or exempted since, perhaps while dry-run left the tag in place
        return deadline

    def _one(self, d: Decision, p: _Pass) -> Outcome | None:
        actuator = self._actuators.get(d.target.kind)
        if actuator is None:
            raise LookupError(f"no actuator for {d.target.kind}")
        if not self._needs_look(d) and not isinstance(actuator, StandingActuator):
            # Busy and never warned: nothing to withdraw, no call to make. (A standing
            # action is always looked at: what it left running may need standing down.)
            return None
        if d.target.key in p.observed:
            seen = p.observed[d.target.key]
            if isinstance(seen, Exception):
                raise seen
        else:
            seen = actuator.inspect([d.target]).get(d.target.key)
        return self._decide(actuator, d, p, seen, fresh=False)

    def _decide(
        self, actuator: Actuator, d: Decision, p: _Pass, observed: Observed | None, *, fresh: bool
    ) -> Outcome | None:
        now = p.now
        if observed is None:
            return Outcome(d, Step.SKIPPED, "the resource no longer exists") if d.acts else None
        tagged = self._tag in observed.tags
        if not d.acts:
            if tagged:
                # A policy with its own words for what withdraws a warning says why.
                why = d.reason if d.unless else "it is in use again"
                return self._withdraw(actuator, d, p, observed, why)
            note = _stand_down(actuator, d)
            return Outcome(d, Step.CLEARED, note) if note else None
        # Actions need the primary project key: the IAM condition that guards every
        # mutating call names costguard:project, so a resource attributed through a
        # fallback key (Project, project) is reported but never acted on.
        tags = read_tags(
            d.target.key, observed.tags, replace(self._s.tag_keys, project=(Tags.PROJECT,))
        )
        # An opt-in counts only where the actuator's own IAM conditions allow it too.
        opted_in = any(k in observed.tags for k in self._s.opt_in_tags if k in actuator.opt_in_tags)
        verdict = gate(tags, opted_in, now)
        if verdict is not Gate.ALLOWED:
            why = "it is exempt" if verdict is Gate.EXEMPT else "it is not in scope"
            if tagged:
                return self._withdraw(actuator, d, p, observed, why)
            return Outcome(d, Step.SKIPPED, _with(why, _stand_down(actuator, d)))
        if observed.settled:
            if tagged:
                return self._withdraw(actuator, d, p, observed, f"it is already {observed.state}")
            return Outcome(
                d, Step.SKIPPED, _with(f"already {observed.state}", _stand_down(actuator, d))
            )
        deadline = self._deadline(d, observed.tags, p, fresh=fresh)
        if deadline is None:
            return self._warn(actuator, d, p, observed)
        # Never before the policy's own earliest time either: a deadline tagged for an
        # earlier judgement (a volume's previous unattached spell) cannot bring it forward.
        due = max(deadline, d.not_before) if d.not_before else deadline
        if self._answered_act_now(d.target, deadline, p):
            # The owner answered the warning "act now" (services/answering.py): the grace
            # period ends now. Everything else is judged as usual: still idle, in scope,
            # not exempt, re-read just before acting.
            due = min(due, now)
        if before(now, due):
            # The grace period: nothing of the action may run yet (a sweep's lifecycle
            # rule comes back only with a pass after it).
            detail = _with(f"warned; acting after {deadline_tag(due)}", _stand_down(actuator, d))
            return Outcome(d, Step.WAITING, detail, deadline)
        if not self._s.dry_run and not fresh:
            # Scope, exemption, state and the warning tag are re-read just before acting,
            # not taken from the run's shared look (an owner may have exempted it since).
            again = actuator.inspect([d.target]).get(d.target.key)
            return self._decide(actuator, d, p, again, fresh=True)
        return self._act(actuator, d, p, observed, deadline)

    def _answered_act_now(self, target: Target, deadline: datetime, p: _Pass) -> bool:
        key = self._act_now_key(target, deadline)
        status = p.statuses.get(key) if key in p.prefetched else self._ledger.status(*key)
        return status is not None

    def _warn_keys(self, d: Decision, deadline: datetime) -> list[str]:
        """The claims of one warning: at most one warning a day per resource (and per
        session, when the policy knows the session).

        Computed from the warning itself (the resource and its deadline), not from the
        decision's action or standing, so that whatever ends the warning (withdrawn,
        superseded by a new configuration) finds and reopens them: a new warning can then
        be claimed at once. Overlapping runs' deadlines lie within ``RUN_OVERLAP`` of each
        other, so their key sets always share a day, across midnight too.
        """
        at = deadline.astimezone(UTC)
        days = sorted({f"{at:%Y-%m-%d}", f"{at - RUN_OVERLAP:%Y-%m-%d}"})
        t = d.target
        session = f"/session-{deadline_tag(d.session_start)}" if d.session_start else ""
        return [f"{self._ns}warn/{t.account or '-'}/{t.key}{session}/{day}" for day in days]

    @staticmethod
    def _fence(deadline: datetime, standing: str | None) -> str:
        """What a warning's claims were confirmed for: its deadline (and, for a standing
        warning, what it was about)."""
        return deadline_tag(deadline) + (f"/{standing}" if standing else "")

    def _end_warning(self, d: Decision, deadline: datetime, *, keep: str | None = None) -> None:
        """The warning with this deadline no longer holds: its claims end with it, so a new
        warning can be claimed at once. Fenced by the deadline: a late retry can never
        reopen the claim of a newer warning; ``keep``: never the claims of this fence."""
        for key in self._warn_keys(d, deadline):
            self._ledger.reopen("action", key, deadline_tag(deadline), keep=keep)

    def _warn(self, actuator: Actuator, d: Decision, p: _Pass, observed: Observed) -> Outcome:
        now = p.now
        deadline = d.deadline(now)
        if self._s.dry_run:
            outcome = Outcome(
                d,
                Step.WOULD_WARN,
                _with(
                    f"would tag {self._tag}={deadline_tag(deadline)}, tell the owner, "
                    f"and act after it if still idle",
                    _stand_down(actuator, d),
                ),
                deadline,
            )
            self._report(d, p, outcome, observed.state)
            return outcome
        stale = action_after(observed.tags, self._tag)
        if d.standing and isinstance(stale, datetime):
            # A standing warning about another configuration is superseded: its claims end
            # before the new one is claimed. Never those of this configuration, which may be
            # another run's warning landing right now (its record not read yet).
            self._end_warning(d, stale, keep=self._fence(stale, d.standing))
        keys: list[str] = []
        for key in self._warn_keys(d, deadline):
            if not self._ledger.claim("action", key, now, ACTION_LEASE, {"reason": d.reason}):
                for taken in keys:
                    self._ledger.release("action", taken, now)
                # Whoever holds the claim (perhaps a run killed mid-warning, its lease not
                # yet out) is giving a new warning: what the old one left running goes now,
                # not when that lease ends (idempotent, and free when nothing is left).
                note = _stand_down(actuator, d)
                return Outcome(
                    d, Step.CLAIMED_ELSEWHERE, _with("another run is warning about it", note)
                )
            keys.append(key)
        try:
            # A new warning (first, or about a changed configuration): what the action
            # left running under the previous one goes first.
            _stand_down(actuator, d)
            actuator.mark(d.target, self._tag, deadline_tag(deadline))
            if self._notifier is not None:
                self._notifier.publish(warning_alert(d, deadline, now, self._s.guard))
        except Exception:
            with contextlib.suppress(Exception):  # best effort; an unrecorded tag is ignored
                actuator.unmark(d.target, self._tag)
            for key in keys:
                self._ledger.release("action", key, now)
            raise
        # The owner has been told: only now does the deadline count. A transient ledger
        # error here would cost the owner a second warning, so it is tried again at once
        # (throttling is transient).
        retrying(
            lambda: self._ledger.put_once(
                "warned", self._ns + _warning_key(d, deadline), now, {"reason": d.reason}
            ),
            attempts=3,
            delay=lambda _e, _n: 0.0,
            sleep=lambda _s: None,
        )
        outcome = Outcome(
            d, Step.WARNED, f"warned; acting after {deadline_tag(deadline)}", deadline
        )
        return self._followups(
            outcome,
            *[
                lambda key=key: self._ledger.confirm(
                    "action", key, now, fence=self._fence(deadline, d.standing)
                )
                for key in keys
            ],
            lambda: self._audit(d, p, outcome, observed.state),
        )

    def _act(
        self, actuator: Actuator, d: Decision, p: _Pass, observed: Observed, deadline: datetime
    ) -> Outcome:
        now = p.now
        if self._s.dry_run:
            # Dry-run acts on nothing, and leaves nothing an earlier live run set running.
            detail = _with(f"would {d.action.value}", _stand_down(actuator, d))
            outcome = Outcome(d, Step.WOULD_ACT, detail, deadline)
            self._report(d, p, outcome, observed.state)
            return outcome
        key = self._ns + claim_key(d, deadline)
        if d.standing:
            key = f"{key}/{d.standing}"
        if not self._ledger.claim("action", key, now, ACTION_LEASE, {"reason": d.reason}):
            return Outcome(d, Step.CLAIMED_ELSEWHERE, "another run is acting on it", deadline)
        try:
            result = actuator.apply(d)
        except Exception:
            self._ledger.release("action", key, now)
            raise
        if isinstance(result, NotYet):
            # Under way (a snapshot before a delete): no action is counted and the
            # warning stays. Something started is audited and keeps the claim until its
            # lease runs out; otherwise the claim is released for the next run.
            waiting = Outcome(d, Step.WAITING, result.detail, deadline)
            if result.started:
                return self._followups(waiting, lambda: self._audit(d, p, waiting, observed.state))
            self._ledger.release("action", key, now)
            return waiting
        applied = result if isinstance(result, ApplyResult) else ApplyResult(result)
        detail = applied.detail
        if d.standing:
            # A standing action recurs: the claim was this run's lease (one run at a time),
            # released for the next; the warning stands, so the tag stays. The actuator
            # reports and alerts on its own progress (a sweep's batches, its breaker).
            # A run of it that changed nothing (nothing due, a tripped breaker) is no action.
            # Each run saves what it did (a pass, the bytes it deleted), never the
            # warning's estimate again: runs add up to what was done, each counted once.
            saved = applied.usd_per_hour_saved
            if saved is None:
                saved = d.usd_per_hour_saved if applied.acted else ZERO
            step = Step.ACTED if applied.acted else Step.SKIPPED
            outcome = Outcome(d, step, detail, deadline, saved=saved)
            return self._followups(
                outcome,
                lambda: self._ledger.release("action", key, now),
                lambda: self._audit(d, p, outcome, observed.state),
            )
        # The action stands from here on: every follow-up is attempted, and a failure is
        # reported on the ACTED outcome (the run still fails so that it is seen). An
        # action the resource does not allow is a notice: told, audited, never a saving.
        step = Step.ACTED if applied.acted else Step.NOTICE_ONLY
        alert = (taken_alert if applied.acted else notice_alert)(d, detail, observed.state, now)
        outcome = Outcome(d, step, detail, deadline)
        return self._followups(
            outcome,
            lambda: self._ledger.confirm("action", key, now),
            lambda: self._audit(d, p, outcome, observed.state),
            # The deadline tag has done its job; a restarted resource starts afresh.
            lambda: actuator.unmark(d.target, self._tag),
            lambda: self._notify(alert),
        )

    def _notify(self, alert: Alert) -> None:
        if self._notifier is not None:
            self._notifier.publish(alert)

    @staticmethod
    def _followups(outcome: Outcome, *steps: Callable[[], object]) -> Outcome:
        errors = []
        for step in steps:
            try:
                step()
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
        if not errors:
            return outcome
        error = "; ".join(errors)
        if outcome.error:
            error = f"{outcome.error}; {error}"
        return replace(outcome, error=f"{outcome.step.value}, but a follow-up failed: {error}")

    def _withdraw(
        self, actuator: Actuator, d: Decision, p: _Pass, observed: Observed, why: str
    ) -> Outcome:
        now = p.now
        # The ledger forgets the deadline first (a ledger write, allowed in dry-run too), so
        # that a tag left behind (dry-run, a failed untag) can never start an action later.
        deadline = action_after(observed.tags, self._tag)
        if isinstance(deadline, datetime):
            self._ledger.put_once(
                "withdrawn", self._ns + warning_key(d.target, deadline), now, {"why": why}
            )
            # The claim ends with the warning it guarded: a new warning can be given at once.
            self._end_warning(d, deadline)
        # What the action left running goes with its warning, in dry-run too, and before
        # the warning itself: a failure leaves the warning standing for the next run.
        note = _stand_down(actuator, d)
        if self._s.dry_run:
            return Outcome(d, Step.CLEARED, _with(f"would withdraw the warning: {why}", note))
        actuator.unmark(d.target, self._tag)
        outcome = Outcome(d, Step.CLEARED, _with(f"warning withdrawn: {why}", note))
        return self._followups(outcome, lambda: self._audit(d, p, outcome, observed.state))

    # -- the audit trail ----------------------------------------------------------

    def _event(self, d: Decision, now: datetime, outcome: Outcome, found: str) -> AuditEvent:
        details: dict[str, Any] = {
            "account": d.target.account,
            "project": d.target.project,
            "owners": list(d.target.owners),
            "state_found": found,
            "reason": d.reason,
            "evidence": dict(d.evidence),
            "detail": outcome.detail,
            "dry_run": self._s.dry_run,
            "usd_per_hour_saved": str(outcome.usd_per_hour_saved),
            "usd_per_month_saved": str(outcome.usd_per_month_saved),
            "deadline": deadline_tag(outcome.deadline) if outcome.deadline else None,
            "seen_at": now.isoformat(),
        }
        if d.standing:
            details["standing"] = d.standing
        return AuditEvent(
            scope=self._s.scope,
            at=now,
            # A dry-run warning's deadline moves with every run; its id must not.
            event_id=f"{outcome.step.value}/{self._ns}"
            + claim_key(d, None if outcome.step is Step.WOULD_WARN else outcome.deadline),
            action=d.action.value,
            resource=d.target.key,
            outcome=outcome.step.value,
            details=details,
        )

    def _audit(self, d: Decision, p: _Pass, outcome: Outcome, found: str) -> None:
        """Queued, and written with the run's others (packed: one item for hundreds)."""
        p.audits.append((d.target.key, self._event(d, p.now, outcome, found)))

    def _flush(self, p: _Pass) -> None:
        """Write the queued audit records; a failure is reported on their outcomes."""
        if not p.audits:
            return
        pending, p.audits = p.audits, []
        try:
            self._ledger.audit_many([event for _, event in pending])
        except Exception as exc:
            for key, _ in pending:
                p.audit_errors[key] = f"the audit write failed: {type(exc).__name__}: {exc}"

    def _report(self, d: Decision, p: _Pass, outcome: Outcome, found: str) -> None:
        """A dry-run report: recorded when it changes, not again every run.

        Each run reports the same "would stop" while a notebook stays idle; the ledger
        keeps, in one document, what each resource's last report was, so a report is
        written when it is new (a resource idle again after being busy counts as new), and
        a run that reports what the last one did writes nothing.
        """
        if p.journal is None:
            doc, p.journal_version = self._ledger.get_state(self._s.scope, self._journal)
            p.journal = dict(doc.get("reports", {}))
        event = self._event(d, p.now, outcome, found)
        resource, report = _short(d.target.key, 16), _short(event.event_id, 8)
        p.reports[resource] = report
        if p.journal.get(resource) != report:
            p.audits.append((d.target.key, event))

    def _remember(self, p: _Pass) -> str | None:
        """Keep this run's reports for the next run; the error, if that write failed.

        Written only after its records were (a failed write is simply made again next
        run), only when something changed, and refused quietly when another run wrote
        first (the next run compares with that one's)."""
        if p.journal is None or p.audit_errors or p.reports == p.journal:
            return None
        if len(p.reports) > JOURNAL_LIMIT:
            return None  # too many to remember in one document: reported every run
        try:
            self._ledger.put_state(
                self._s.scope, self._journal, {"reports": p.reports}, p.journal_version
            )
        except Exception as exc:
            return f"the dry-run report journal could not be written: {type(exc).__name__}: {exc}"
        return None

    def _settle(
        self, outcomes: list[Outcome], p: _Pass, journal_error: str | None
    ) -> list[Outcome]:
        """Outcomes whose audit record (or the run's journal) could not be written fail."""
        settled = []
        for o in outcomes:
            error = p.audit_errors.get(o.decision.target.key)
            if error is None and journal_error and o.step in (Step.WOULD_WARN, Step.WOULD_ACT):
                error = journal_error
            if error is None:
                settled.append(o)
            elif o.error:
                settled.append(replace(o, error=f"{o.error}; {error}"))
            else:
                settled.append(replace(o, error=f"{o.step.value}, but a follow-up failed: {error}"))
        return settled


def _short(text: str, digits: int) -> str:
    """A short, stable digest (what the journal keeps of a resource key or a report)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:digits]


def _stand_down(actuator: Actuator, d: Decision) -> str | None:
    """Withdraw what a standing action left running for this target (none for others)."""
    if isinstance(actuator, StandingActuator):
        return actuator.stand_down(d.target)
    return None


def _with(detail: str, note: str | None) -> str:
    return f"{detail}; {note}" if note else detail


def acted_savings(
    events: Iterable[AuditEvent],
) -> list[tuple[str | None, datetime, Decimal, str]]:
    """What :func:`~costguard.domain.decisions.savings_this_month` adds up, from an audit
    trail: ``(project, acted at, $/h saved, resource)`` of each action acted.

    A one-shot action repeated on one resource (stopped, restarted, stopped again) names
    the resource each time, so its rate counts once. Each run of a standing action saved
    what that run did (a sweep pass, the bytes it deleted, never the warning's estimate),
    so each is its own entry: the passes add up to what was deleted, each byte once.
    """
    return [
        (
            e.details.get("project"),
            e.at,
            Decimal(str(e.details.get("usd_per_hour_saved", "0"))),
            f"{e.resource}#{e.at.isoformat()}" if e.details.get("standing") else e.resource,
        )
        for e in events
        if e.outcome == Step.ACTED.value
    ]


def act_now_key(namespace: str, target: Target, deadline: datetime) -> tuple[str, str]:
    """The ledger record of an owner's "act now" answer to one delivered warning."""
    return ("answered", f"{namespace}act-now/{warning_key(target, deadline)}")


def _warning_key(d: Decision, deadline: datetime) -> str:
    """The ledger record of a delivered warning; a standing one names what it was about."""
    key = warning_key(d.target, deadline)
    return f"{key}/{d.standing}" if d.standing else key
