"""The guards CostGuard ships, and so every actuator and every actuator role, in one list.

Each guard is declared in one module of this package (its policy's builder, what it acts
through, its reads and cadence: :class:`~costguard.guards.spec.GuardSpec`); a new guard
is one new module, listed in :data:`SHIPPED`. The stack builds one Lambda per guard
here, its role only from that guard's declarations (every mutating statement
tag-conditioned); adding a guard here is what lets the deployed guard change that kind
of resource. The scan role never gets any of them. The actuator Lambda finds its guard
here by name.
"""

from __future__ import annotations

from costguard.guards.idle_notebooks import IDLE_NOTEBOOKS
from costguard.guards.max_lifetime import MAX_LIFETIME
from costguard.guards.spec import DeclaresPermissions, GuardFactory, GuardSpec
from costguard.guards.stale_objects import STALE_OBJECTS
from costguard.guards.stale_volumes import STALE_VOLUMES
from costguard.iam import Permission

__all__ = [
    "IDLE_NOTEBOOKS",
    "MAX_LIFETIME",
    "SHIPPED",
    "SPECS",
    "STALE_OBJECTS",
    "STALE_VOLUMES",
    "DeclaresPermissions",
    "GuardFactory",
    "GuardSpec",
    "actuator_permissions",
    "guard_ledger_actions",
]

#: Shipped guards, in the order the stack builds them.
SHIPPED: tuple[GuardSpec, ...] = (IDLE_NOTEBOOKS, STALE_VOLUMES, STALE_OBJECTS, MAX_LIFETIME)

#: By name: what the actuator Lambda runs (tests may register a test-only guard here).
SPECS: dict[str, GuardSpec] = {spec.name: spec for spec in SHIPPED}


def actuator_permissions() -> tuple[Permission, ...]:
    """Every permission any guard role may hold (the stack grants each role its own)."""
    seen: list[Permission] = []
    for spec in SPECS.values():
        seen.extend(p for p in spec.permissions() if p not in seen)
    return tuple(seen)


def guard_ledger_actions() -> tuple[str, ...]:
    """What a role that runs every guard (the Organization hub's act consumer) may do on
    the ledger table."""
    return tuple(dict.fromkeys(a for spec in SPECS.values() for a in spec.ledger_actions()))
