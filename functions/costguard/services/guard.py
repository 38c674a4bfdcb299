"""A guard: one policy, the actuators it needs, and a name the schedule invokes it by.

The idle-notebook and stale-data capabilities are guards. Each one adds a policy (a
pure judgement that returns decisions), an actuator and a schedule; the executor, the
handler and the role are shared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from costguard.domain.decisions import Decision
from costguard.domain.findings import Finding
from costguard.domain.tags import Tags
from costguard.ports import Actuator, TimeLeft
from costguard.services.executor import ExecutionReport, Executor, ExecutorSettings

if TYPE_CHECKING:
    from costguard.domain.pricing import PriceCatalog
    from costguard.ports import Ledger, Notifier


class Policy(Protocol):
    """Reads what it needs (inventory, metrics) and judges: pure after its reads."""

    def decide(self, now: datetime) -> Sequence[Decision]: ...


@dataclass(frozen=True, slots=True)
class Guard:
    name: str
    policy: Policy
    actuators: Sequence[Actuator]
    #: Tag keys whose presence puts a resource without a project in scope.
    opt_in_tags: tuple[str, ...] = ()
    #: Receives the run's time left (the Lambda's remaining time), for guards that
    #: work in resumable steps (the stale-object sweep); None for the others.
    bind_time_left: Callable[[TimeLeft], None] | None = None
    #: What the policy's last run found wrong (malformed tags, missing metrics...), for the
    #: run's log; empty for a policy that reports none.
    findings: Callable[[], Sequence[Finding]] = lambda: ()
    #: The tag it warns with: its own when it acts on resources another guard warns
    #: about too (the maximum lifetime and the idle guard, on one notebook).
    warning_tag: str = Tags.ACTION_AFTER
    #: Its warnings carry answers (keep, exempt, act now): an answer is written as the
    #: ``costguard:exempt`` tag where the guard writes its warning tag, so a guard that
    #: tags nothing it warns about (the stale-object sweep warns about a bucket it only
    #: reads the tags of) carries none.
    answerable: bool = True


@dataclass(frozen=True, slots=True)
class GuardContext:
    """What a guard keeps where CostGuard runs, not where it acts.

    In one account both are the same account. In an Organization the guard acts in a
    member account through its clients, while the claims, audit trail and sweep state
    stay in the hub's ledger, warnings go to the hub's topic, and savings are counted at
    the hub's catalog: a factory must never build these from the clients it acts with.
    """

    ledger: Ledger
    notifier: Notifier | None
    #: The prices savings are counted at (the stored catalog when deployed).
    catalog: PriceCatalog


def run_guard(
    guard: Guard,
    context: GuardContext,
    settings: ExecutorSettings,
    now: datetime,
    time_left: TimeLeft | None = None,
    *,
    before: Callable[[Sequence[Decision]], None] | None = None,
) -> ExecutionReport:
    """The guard's decisions through the one executor: warn, act, dry-run, audit, tell.

    ``settings`` names the scope the claims and audit trail are kept under; the guard's
    own opt-in tags and warning tag are added here, so that no caller can forget them."""
    if guard.bind_time_left is not None and time_left is not None:
        guard.bind_time_left(time_left)
    executor = Executor(
        guard.actuators,
        context.ledger,
        context.notifier,
        replace(
            settings,
            opt_in_tags=guard.opt_in_tags,
            warning_tag=guard.warning_tag,
            guard=guard.name if guard.answerable else "",
        ),
    )
    decisions = guard.policy.decide(now)
    if before is not None:
        # What must be true before anything is done (an Organization's savings index);
        # raising here acts on nothing.
        before(decisions)
    return executor.run(decisions, now)
