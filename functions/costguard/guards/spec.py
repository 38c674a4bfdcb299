"""What a guard declares: its policy's builder, the actuators it acts through, the read
permissions its policy needs, and the cadence it runs at.

The stack builds one Lambda per guard from its declaration: a role holding only that
guard's permissions (the idle-notebook guard can never delete an object, the stale-data
guard can never stop a notebook), and a schedule that invokes it with its name. The
executor, the handler and the ledger are shared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from costguard.domain.org_act import Reach
from costguard.iam import EXECUTOR_LEDGER_ACTIONS, FINDINGS_LEDGER_ACTIONS, Permission

if TYPE_CHECKING:
    from costguard.adapters.aws import ClientFactory
    from costguard.services.guard import Guard, GuardContext
    from costguard.settings import Settings


class DeclaresPermissions(Protocol):
    """What makes a guard's calls: what it may do, declared next to the code that does it."""

    permissions: tuple[Permission, ...]


#: Builds a guard from settings, the clients it reads and acts with, and the context it
#: records in; the actuator Lambda's registry holds these.
GuardFactory = Callable[["Settings", "ClientFactory", "GuardContext"], "Guard"]


@dataclass(frozen=True, slots=True)
class GuardSpec:
    #: The name the schedule passes (``{"guard": name}``) and the audit trail records.
    name: str
    #: The CDK construct id of its Lambda (``Guard<construct_id>``).
    construct_id: str
    description: str
    #: Builds the guard (policy and actuators) from settings and typed clients.
    build: GuardFactory
    #: What makes its mutating calls (its actuators, or the store they act through).
    actuators: tuple[DeclaresPermissions, ...]
    #: What the policy reads (CloudWatch metrics, inventories): never mutating.
    reads: tuple[Permission, ...] = ()
    #: How often it runs, in minutes, unless the deployment says otherwise.
    every_minutes: int = 15
    timeout_minutes: int = 15
    memory_mb: int = 512
    #: The deployment setting (a CostGuardConfig field) that overrides ``every_minutes``.
    rate_setting: str | None = None
    #: In an Organization, which of a member account's regions it acts in: where compute
    #: was found, or (data guards) every allowed region.
    reach: Reach = Reach.COMPUTE
    #: Its policy records findings in the ledger (not only in its log).
    records_findings: bool = False

    def ledger_actions(self) -> tuple[str, ...]:
        """What its role may do on the ledger table: the executor's, and the findings'
        when its policy records them."""
        return EXECUTOR_LEDGER_ACTIONS + (FINDINGS_LEDGER_ACTIONS if self.records_findings else ())

    def permissions(self) -> tuple[Permission, ...]:
        """The guard role's permissions: its reads, then each actuator's, once each."""
        seen: list[Permission] = []
        for p in (*self.reads, *(p for a in self.actuators for p in a.permissions)):
            if p not in seen:
                seen.append(p)
        return tuple(seen)
