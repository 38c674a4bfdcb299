"""The guards CostGuard ships, and so every actuator and every actuator role, in one list.

The stack builds one Lambda per guard here, its role only from that guard's
declarations (every mutating statement tag-conditioned); adding a guard here is what
lets the deployed guard change that kind of resource. The scan role never gets any of
them. The actuator Lambda finds its guard here by name.
"""

from __future__ import annotations

from costguard.adapters.s3 import S3BucketActuator, build_stale_objects
from costguard.guards import DeclaresPermissions, GuardSpec
from costguard.iam import Permission

STALE_OBJECTS = GuardSpec(
    name="stale-objects",
    construct_id="StaleObjects",
    description="deletes objects older than their bucket's costguard:ttl, to the hour",
    build=build_stale_objects,
    actuators=(S3BucketActuator,),
    # Hourly: "48h" is kept to the hour. The run stops itself well before its timeout and
    # resumes next hour; the timeout stays under the executor's 15-minute claim lease,
    # so two runs never sweep one bucket at once even when one starts late.
    every_minutes=60,
    timeout_minutes=10,
    memory_mb=512,
)

#: Shipped guards, in the order the stack builds them.
SHIPPED: tuple[GuardSpec, ...] = (STALE_OBJECTS,)

#: By name: what the actuator Lambda runs (tests may register a test-only guard here).
SPECS: dict[str, GuardSpec] = {spec.name: spec for spec in SHIPPED}


def actuators() -> tuple[DeclaresPermissions, ...]:
    found: list[DeclaresPermissions] = []
    for spec in SPECS.values():
        found.extend(a for a in spec.actuators if a not in found)
    return tuple(found)


def actuator_permissions() -> tuple[Permission, ...]:
    """Every permission any guard role may hold (the stack grants each role its own)."""
    seen: list[Permission] = []
    for spec in SPECS.values():
        seen.extend(p for p in spec.permissions() if p not in seen)
    return tuple(seen)
