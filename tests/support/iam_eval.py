"""IAM's evaluation of CostGuard's declared statements for one call (moto checks no
conditions, so tests evaluate the declared ``Permission``s themselves)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from costguard.iam import Permission


def condition_holds(
    conditions: Mapping[str, Mapping[str, Any]],
    tags: Mapping[str, str],
    request_keys: Sequence[str],
) -> bool:
    for operator, clauses in conditions.items():
        for key, expected in clauses.items():
            values = [expected] if isinstance(expected, str) else list(expected)
            tag = (
                key.removeprefix("aws:ResourceTag/") if key.startswith("aws:ResourceTag/") else None
            )
            actual = tags.get(tag) if tag else None
            present = (tag in tags) if tag else bool(request_keys)
            if operator == "Null":
                if (values[0] == "false") != present:
                    return False
            elif operator == "StringNotEqualsIgnoreCase":
                if actual is not None and actual.lower() in {v.lower() for v in values}:
                    return False
            elif operator == "ForAllValues:StringEquals":
                if not set(request_keys) <= set(values):
                    return False
            else:  # pragma: no cover - a new operator needs modelling here
                raise AssertionError(f"unmodelled IAM operator {operator}")
    return True


def allowed(
    permissions: Iterable[Permission],
    action: str,
    arn: str,
    tags: Mapping[str, str],
    request_keys: Sequence[str] = (),
    *,
    account: str = "123456789012",
) -> bool:
    """True if some declared statement allows ``action`` on ``arn`` with these tags."""
    for p in permissions:
        if action not in p.actions:
            continue
        patterns = [r.format(partition="aws", account=account) for r in p.resources]
        if not any(fnmatch.fnmatchcase(arn, pattern) for pattern in patterns):
            continue
        if condition_holds(p.conditions, tags, request_keys):
            return True
    return False
