"""Every actuator CostGuard ships, and the actuator role's permissions, from one list.

The actuator Lambda's role is built from these declarations only: adding an actuator
here is what lets the deployed guard change that kind of resource, within the tag
conditions the actuator declares. The scan role never gets any of them.
"""

from __future__ import annotations

from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.iam import Permission

ACTUATORS = (Ec2InstanceActuator,)


def actuator_permissions() -> tuple[Permission, ...]:
    seen: list[Permission] = []
    for actuator in ACTUATORS:
        seen.extend(p for p in actuator.permissions if p not in seen)
    return tuple(seen)
