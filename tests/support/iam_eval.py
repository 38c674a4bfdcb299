"""IAM's evaluation of CostGuard's declared statements for one call (moto checks no
conditions, so tests evaluate the declared ``Permission``s themselves)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

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


def enforce_ec2_conditions(
    session: Any, permissions: Sequence[Permission], *, region: str, account: str
) -> list[str]:
    """Refuse, on ``session``'s EC2 clients, every call the declared statements refuse, as
    AWS would (``UnauthorizedOperation``); returns the list of refusals, filled as calls
    are made. moto checks no condition (FIELD-NOTES): this evaluates them."""
    import boto3

    observer = boto3.Session().client("ec2", region_name=region)  # no hook on this one
    refused: list[str] = []

    def check(params: dict[str, Any], model: Any, **_: Any) -> None:
        action = f"ec2:{model.name}"
        statements = [p for p in permissions if action in p.actions]
        if not statements:
            raise AssertionError(f"{action} is not declared at all")
        ids = params.get("Resources") or params.get("InstanceIds") or []
        request_keys = [t["Key"] for t in params.get("Tags", [])]
        for iid in ids:
            found = observer.describe_instances(InstanceIds=[iid])["Reservations"][0]
            tags = {t["Key"]: t["Value"] for t in found["Instances"][0].get("Tags", [])}
            arn = f"arn:aws:ec2:{region}:{account}:instance/{iid}"
            if not allowed(statements, action, arn, tags, request_keys, account=account):
                refused.append(f"{action} on {iid} with tags {sorted(tags)}")
                raise ClientError(
                    {
                        "Error": {
                            "Code": "UnauthorizedOperation",
                            "Message": "You are not authorized to perform this operation.",
                        }
                    },
                    model.name,
                )

    session.events.register("before-parameter-build.ec2", check)
    return refused
