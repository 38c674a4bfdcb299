"""EC2 calls refused as IAM would refuse them, from CostGuard's declared statements: moto
checks actions only, never conditions (FIELD-NOTES)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from costguard.iam import Permission
from tests.support.iam_eval import allowed


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
