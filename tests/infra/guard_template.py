"""Reading one guard's Lambda, schedule and role out of the synthesized template."""

from __future__ import annotations

from typing import Any

from costguard.env import Env


def guard_function(template: Any, guard: str) -> tuple[str, dict[str, Any]]:
    """The logical id and the resource of the Lambda bound to ``guard``."""
    ((logical, fn),) = [
        (k, f)
        for k, f in template.find_resources("AWS::Lambda::Function").items()
        if f["Properties"].get("Environment", {}).get("Variables", {}).get(Env.GUARD) == guard
    ]
    return logical, fn


def role_statements(template: Any, role: str) -> list[dict[str, Any]]:
    """Every statement of the policies attached to ``role`` (a logical id)."""
    found: list[dict[str, Any]] = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"].get("Roles", []):
            found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return found


def actions(statement: dict[str, Any]) -> list[str]:
    a = statement["Action"]
    return a if isinstance(a, list) else [a]
