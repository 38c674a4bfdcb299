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
from costguard.rendering import ANSWER_BUTTONS
from costguard.services.executor import ExecutorSettings, act_now_key

#: Each answer as its button says it, for the people told ("Keep 4 hours", "Exempt").
ANSWER_WORDS = {Answer(action): label.rstrip("…") for action, label in ANSWER_BUTTONS}
#: An answer whose holder crashed mid-way is taken again by a retry after this.
ANSWER_LEASE = timedelta(minutes=15)


class Taken(StrEnum):
    KEPT = "kept"
    EXEMPTED = "exempted"
    #: Act now: recorded; the guard's run that follows acts (after its re-checks).
    ACT_NOW = "act-now"
    #: Dry-run: what would have been done.
    WOULD = "would"
    #: Nothing to do: already exempt at least as long, already answered, already acted on
    #: (stopped), or gone.
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
    #: Told only to the person who answered, the warning left as it is: a refusal (its
    #: owners keep their buttons).
    private: bool = False
    #: A second delivery of an answer already taken (Lambda delivers an asynchronous event
    #: at least once): nothing more is told, the message already says what was done.
    repeat: bool = False
    #: The resource's state when the guard had already acted before the answer came
    #: ("stopped"): a keep still writes its tag (for when it is started again), and says so.
    already: str = ""


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
        refused = self._refused(request)
        if refused is not None:
            self._audit(request, now, refused)
            return refused
        return self._take(request, now)

    def _refused(self, request: AnswerRequest) -> TakenAnswer | None:
        """An answer this guard can never take, whatever the resource looks like."""
        why = None
        parts = parse_key(request.resource)
        if request.guard != self._guard:
            why = f"not an answer to a {self._guard} warning"
        elif not self._answerable:
            why = f"{self._guard} warnings take no answers"
        elif parts is None or parts.kind not in self._actuators:
            why = f"{self._guard} does not act on {request.resource}"
        return TakenAnswer(Taken.REFUSED, why, private=True) if why else None

    def _take(self, request: AnswerRequest, now: datetime) -> TakenAnswer:
        parts = parse_key(request.resource)
        assert parts is not None
        actuator = self._actuators[parts.kind]
        # A key without its account (written before keys carried it) is this scope's.
        account = parts.account or (self._s.scope if ACCOUNT_ID.fullmatch(self._s.scope) else "")
        target = Target(request.resource, parts.kind, parts.region, parts.id, account)
        key = f"request/{self._guard}/{request.request_id or request.resource}"
        attrs = {"answer": request.answer.value, "by": request.answerer.id}
        if not self._ledger.claim("answered", key, now, ANSWER_LEASE, attrs):
            taken = TakenAnswer(
                Taken.ALREADY, "this answer was already taken", private=True, repeat=True
            )
            self._audit(request, now, taken)
            return taken
        try:
            observed = actuator.inspect([target]).get(target.key)
            taken = self._judge(request, actuator, target, observed, now)
            if taken.outcome is Taken.REFUSED:
                taken = replace(taken, private=True)
            if observed is not None:
                name = observed.tags.get("Name") or target.id
                taken = replace(taken, label=f"{target.kind} {name}")
            # Audited while the claim is held: an audit write that fails (throttled) leaves
            # the answer to the retry, which takes it again (its own tag, already written,
            # is this answer's) and audits what was done, not "already taken".
            self._audit(request, now, taken)
        except Exception:
            # A failure halfway (a refused tag write, a throttled read) gives the claim
            # back: the invocation's retry takes the answer again, never "already taken".
            with contextlib.suppress(Exception):
                self._ledger.release("answered", key, now)
            raise
        # The answer is done and audited: a confirmation that fails (throttled) is not
        # raised, or the retry would meet the claim still held and take the answer as a
        # repeat, telling nobody. Unconfirmed, the claim ends with its lease; a delivery
        # after that takes the answer again, to the same effect (its tag is this answer's).
        with contextlib.suppress(Exception):
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
            # The warning is moot for everyone: settled in the channel, not refused.
            return TakenAnswer(Taken.ALREADY, "it no longer exists: nothing to keep or act on")
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
        settled = observed.state.lower() if observed.settled else ""
        if request.answer is Answer.ACT_NOW:
            if settled:
                # The guard acted before the answer came (the warning is moot).
                return TakenAnswer(Taken.ALREADY, f"it is already {settled}: nothing to act on")
            if verdict is Gate.EXEMPT:
                return TakenAnswer(Taken.REFUSED, "it is exempt: nothing is acted on")
            deadline = action_after(observed.tags, self._s.warning_tag)
            if isinstance(deadline, datetime) and request.deadline not in (
                "",
                deadline_tag(deadline),
            ):
                # The press answered an earlier warning, ended since (the resource was used,
                # or exempted): a newer warning's grace period is its owners' to give up.
                return TakenAnswer(
                    Taken.REFUSED,
                    f"the warning answered (acting after {request.deadline}) has ended; "
                    f"answer the newer one (acting after {deadline_tag(deadline)})",
                )
            if not isinstance(deadline, datetime):
                return TakenAnswer(
                    Taken.REFUSED,
                    "there is no warning on it now (withdrawn since, or never sent): nothing is acted on",
                )
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
        kept = Taken.KEPT if request.answer is not Answer.EXEMPT else Taken.EXEMPTED
        value = deadline_tag(until)
        # This answer's own tag, written before a failure halfway: the retry finishes it.
        ours = observed.tags.get(Tags.EXEMPT) == value and not self._s.dry_run
        if not ours and (forever or (held is not None and held >= until)):
            longer = f"until {held:%Y-%m-%d %H:%M} UTC" if held is not None else "for good"
            return TakenAnswer(Taken.ALREADY, f"it is already exempt {longer}, at least as long")
        if self._s.dry_run:
            return TakenAnswer(
                Taken.WOULD, f"would tag {Tags.EXEMPT}={value} (dry-run: no tag is written)"
            )
        if not ours:
            actuator.mark(target, Tags.EXEMPT, value)
        note = f"; it is already {settled}" if settled else ""
        return TakenAnswer(
            kept, f"{kept.value} until {value} ({Tags.EXEMPT}={value}){note}", already=settled
        )

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
    # The words on the button the person pressed, never CostGuard's action id.
    pressed = f'"{ANSWER_WORDS[request.answer]}"'
    until = local_time(request.until, zone) if request.until else ""
    what = {
        Taken.KEPT: f"kept until {until} by {who}",
        Taken.EXEMPTED: f"exempted until {until} by {who}"
        + (f" ({request.reason})" if request.reason else ""),
        Taken.ACT_NOW: f"{who} answered act now: {taken.detail}",
        Taken.WOULD: f"{who} answered {pressed}: {taken.detail}",  # the detail says dry-run
        Taken.ALREADY: f"{who} answered {pressed}: {taken.detail}",
        Taken.REFUSED: f"{who}'s answer was not taken: {taken.detail}",
    }[taken.outcome]
    if taken.already and taken.outcome in (Taken.KEPT, Taken.EXEMPTED):
        what += f"; it is already {taken.already} (CostGuard acted before the answer came)"
    return f"{taken.label or request.resource}: {what}"
