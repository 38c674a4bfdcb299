"""A guard: one policy, the actuators it needs, and a name the schedule invokes it by.

The idle-notebook and stale-data capabilities are guards. Each one adds a policy (a
pure judgement that returns decisions), an actuator and a schedule; the executor, the
handler and the role are shared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from costguard.domain.decisions import Decision
from costguard.domain.findings import Finding
from costguard.ports import Actuator, Budget

if TYPE_CHECKING:
    from costguard.adapters.aws import ClientFactory
    from costguard.settings import Settings


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
    #: Receives the run's time budget (the Lambda's remaining time), for guards that
    #: work in resumable steps (the stale-object sweep); None for the others.
    bind_budget: Callable[[Budget], None] | None = None
    #: What the policy's last run found wrong (malformed tags, missing metrics...), for the
    #: run's log; empty for a policy that reports none.
    findings: Callable[[], Sequence[Finding]] = lambda: ()


#: Builds a guard from settings and typed clients; the actuator Lambda's registry holds these.
GuardFactory = Callable[["Settings", "ClientFactory"], Guard]
