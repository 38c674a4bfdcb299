"""An owner's answer, taken on the act path: through the executor's rules, for one resource.

The answer desk (:mod:`costguard.services.answers`) only checks where an answer comes from
and queues it. Here, with the guard's own actuators (the act role), each answer is:

1. claimed once (a retried delivery, a double click: one answer);
2. judged on the resource as it is now: it must still exist, be in scope (tagged with a
   project), not be exempt for good, and the answerer must still be one of its owners
   (``costguard:owner``) or an admin;
3. in dry-run, reported and nothing more;
4. carried out:

   - **keep** and **exempt** write ``costguard:exempt=<until>`` (never shortening a longer
     exemption). The guard's next run meets the exemption and withdraws its warning, as
     it does for any exemption; after ``until`` it judges the resource afresh, and warns
     again if it is still idle. Nothing else changes;
   - **act now** records the answer against the warning the owner was sent (its
     deadline): the guard's run that follows (run at once by the caller) treats that
     deadline as reached, and acts only after its usual re-checks (still idle, in scope,
     not exempt, re-read just before acting);

5. audited, naming who answered, how, and why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, tzinfo
from enum import StrEnum

from costguard.domain.answers import Answer, AnswerRequest, may_answer
from costguard.domain.calendar import require_utc
from costguard.domain.decisions import (
    Gate,
    Observed,
    Target,
    action_after,
    deadline_tag,
    gate,
)
from costguard.domain.models import ACCOUNT_ID, parse_key
from costguard.domain.tags import TagKeys, Tags, read_tags
from costguard.ports import ActionLedger, Actuator, AuditEvent
from costguard.services.executor import ExecutorSettings, act_now_key

#: An answer whose holder crashed mid-way is taken again by a retry after this.
ANSWER_LEASE = timedelta(minutes=15)


class Taken(StrEnum):
    KEPT = "kept"
    EXEMPTED = "exempted"
    #: Act now: recorded; the guard's run that follows acts (after its re-checks).
    ACT_NOW = "act-now"
    #: Dry-run: what would have been done.
    WOULD = "would"
    #: Nothing to do: already exempt at least as long, or already answered.
    ALREADY = "already"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class TakenAnswer:
    outcome: Taken
    detail: str
    #: True when the guard should run now (an act-now answer was recorded).
    run_guard: bool = False
    #: The resource as its warning named it ("ec2-instance my-notebook"); empty when it
    #: was not found.
    label: str = ""


def _namespace(warning_tag: str) -> str:
    """The executor's ledger namespace for a guard's warning tag (see Executor.__init__)."""
    return "" if warning_tag == Tags.ACTION_AFTER else warning_tag.removeprefix("costguard:") + "/"


class AnswerTaker:
    """One guard's answers, with its actuators and the executor's settings."""

    def __init__(
        self,
        guard: str,
        actuators: Sequence[Actuator],
        ledger: ActionLedger,
        settings: ExecutorSettings,
        admins: Collection[str] = (),
        *,
        answerable: bool = True,
    ) -> None:
        self._guard = guard
        self._answerable = answerable
        self._actuators: Mapping[str, Actuator] = {a.kind: a for a in actuators}
        self._ledger = ledger
        self._s = settings
        self._admins = frozenset(admins)

    def take(self, request: AnswerRequest, now: datetime) -> TakenAnswer:
        now = require_utc(now)
        taken = self._take(request, now)
        self._audit(request, now, taken)
        return taken

    def _take(self, request: AnswerRequest, now: datetime) -> TakenAnswer:
        if request.guard != self._guard:
            return TakenAnswer(Taken.REFUSED, f"not an answer to a {self._guard} warning")
        if not self._answerable:
            return TakenAnswer(Taken.REFUSED, f"{self._guard} warnings take no answers")
        parts = parse_key(request.resource)
        actuator = self._actuators.get(parts.kind) if parts else None
        if parts is None or actuator is None:
            return TakenAnswer(Taken.REFUSED, f"{self._guard} does not act on {request.resource}")
        # A key without its account (written before keys carried it) is this scope's.
        account = parts.account or (self._s.scope if ACCOUNT_ID.fullmatch(self._s.scope) else "")
        target = Target(request.resource, parts.kind, parts.region, parts.id, account)
        key = f"request/{self._guard}/{request.request_id or request.resource}"
        attrs = {"answer": request.answer.value, "by": request.answerer.id}
        if not self._ledger.claim("answered", key, now, ANSWER_LEASE, attrs):
            return TakenAnswer(Taken.ALREADY, "this answer was already taken")
        try:
            observed = actuator.inspect([target]).get(target.key)
            taken = self._judge(request, actuator, target, observed, now)
            if observed is not None:
                name = observed.tags.get("Name") or target.id
                taken = replace(taken, label=f"{target.kind} {name}")
        except Exception:
            # A failure halfway (a refused tag write, a throttled read) gives the claim
            # back: the invocation's retry takes the answer again, never "already taken".
            with contextlib.suppress(Exception):
                self._ledger.release("answered", key, now)
            raise
        self._ledger.confirm("answered", key, now)
        return taken

    def _judge(
        self,
        request: AnswerRequest,
        actuator: Actuator,
        target: Target,
        observed: Observed | None,
        now: datetime,
    ) -> TakenAnswer:
        if observed is None:
            return TakenAnswer(Taken.REFUSED, "the resource no longer exists")
        # The primary project key, as for any action (the IAM condition names it).
        tags = read_tags(target.key, observed.tags, TagKeys(project=(Tags.PROJECT,)))
        verdict = gate(tags, False, now)
        if verdict is Gate.OUT_OF_SCOPE:
            return TakenAnswer(Taken.REFUSED, "it is not in scope (no costguard:project tag)")
        if not may_answer(request.answerer, tags.owners, self._admins):
            return TakenAnswer(
                Taken.REFUSED, f"{request.answerer} is not one of its owners now (costguard:owner)"
            )
        held = tags.exemption.until if tags.exemption is not None else None
        forever = tags.exemption is not None and held is None
        if request.answer is Answer.ACT_NOW:
            if verdict is Gate.EXEMPT:
                return TakenAnswer(Taken.REFUSED, "it is exempt: nothing is acted on")
            deadline = action_after(observed.tags, self._s.warning_tag)
            if not isinstance(deadline, datetime):
                return TakenAnswer(Taken.REFUSED, "it carries no warning to answer")
            if self._s.dry_run:
                return TakenAnswer(Taken.WOULD, "would act now (dry-run: nothing is acted on)")
            ns = _namespace(self._s.warning_tag)
            namespace, key = act_now_key(ns, target, deadline)
            self._ledger.put_once(namespace, key, now, {"by": request.answerer.id})
            return TakenAnswer(
                Taken.ACT_NOW,
                f"the warning of {deadline_tag(deadline)} is answered: act now",
                run_guard=True,
            )
        until = request.until
        if until is None or until <= now:
            return TakenAnswer(Taken.REFUSED, "the answer holds nothing off")
        if forever or (held is not None and held >= until):
            return TakenAnswer(Taken.ALREADY, "it is already exempt at least as long")
        kept = Taken.KEPT if request.answer is not Answer.EXEMPT else Taken.EXEMPTED
        value = deadline_tag(until)
        if self._s.dry_run:
            return TakenAnswer(
                Taken.WOULD, f"would tag {Tags.EXEMPT}={value} (dry-run: no tag is written)"
            )
        actuator.mark(target, Tags.EXEMPT, value)
        return TakenAnswer(kept, f"{kept.value} until {value} ({Tags.EXEMPT}={value})")

    def _audit(self, request: AnswerRequest, now: datetime, taken: TakenAnswer) -> None:
        details = {
            "guard": self._guard,
            "answer": request.answer.value,
            "by": request.answerer.id,
            "via": request.answerer.via,
            "name": request.answerer.name,
            "detail": taken.detail,
            "dry_run": self._s.dry_run,
        }
        if request.until is not None:
            details["until"] = deadline_tag(request.until)
        if request.reason:
            details["reason"] = request.reason
        self._ledger.audit(
            AuditEvent(
                self._s.scope,
                now,
                f"answer/{request.request_id or request.resource}",
                f"answer-{request.answer.value}",
                request.resource,
                taken.outcome.value,
                details,
            )
        )


def local_time(at: datetime, zone: tzinfo | None = None) -> str:
    """A time as the people answering read it: on their wall clock when the deployment has
    a time zone, with UTC beside it ("14:00 Europe/Paris (13:00 UTC) on Fri 20 Nov")."""
    at = require_utc(at)
    if zone is None or str(zone) in ("UTC", "Etc/UTC"):
        return f"{at:%H:%M} UTC on {at:%a %d %b}"
    local = at.astimezone(zone)
    return f"{local:%H:%M} {zone} ({at:%H:%M} UTC) on {local:%a %d %b}"


def told(request: AnswerRequest, taken: TakenAnswer, zone: tzinfo | None = None) -> str:
    """What the warning's message becomes once the answer is taken (in place, in Slack):
    the resource as the warning named it, what was done, until when, and by whom."""
    who = request.answerer.name or request.answerer.id
    until = local_time(request.until, zone) if request.until else ""
    what = {
        Taken.KEPT: f"kept until {until} by {who}",
        Taken.EXEMPTED: f"exempted until {until} by {who}"
        + (f" ({request.reason})" if request.reason else ""),
        Taken.ACT_NOW: f"{who} answered act now: {taken.detail}",
        Taken.WOULD: f"{who} answered {request.answer.value} (dry-run: {taken.detail})",
        Taken.ALREADY: f"{who} answered {request.answer.value}: {taken.detail}",
        Taken.REFUSED: f"{who}'s answer was not taken: {taken.detail}",
    }[taken.outcome]
    return f"{taken.label or request.resource}: {what}"
