"""Credentials for one member account: ``sts:AssumeRole`` into its CostGuard role.

IAM for STS: the hub's roles need ``sts:AssumeRole`` on
``arn:<partition>:iam::*:role/costguard-member-*`` (the member trust policy does the rest).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from costguard.adapters.aws import RETRY_CONFIG, ClientFactory
from costguard.domain.org import Slice
from costguard.iam import Permission

PERMISSIONS = (
    Permission(
        ("sts:AssumeRole",),
        "assume the CostGuard member roles (their trust policy names the hub's roles)",
        resources=("arn:{partition}:iam::*:role/costguard-member-*",),
    ),
)


class AccountAccessError(Exception):
    """The hub cannot enter a member account (no role, AccessDenied, throttled STS)."""

    def __init__(self, account: str, code: str, message: str) -> None:
        super().__init__(f"account {account}: {code}: {message}")
        self.account = account
        self.code = code
        self.detail = message


def member_clients(
    base: Any, s: Slice, role_name: str, *, session_name: str = "costguard-hub"
) -> ClientFactory:
    """Typed clients in ``s.account``, from the member role's temporary credentials.

    The credentials last an hour (the role's maximum), longer than any slice's scan.
    """
    import boto3  # noqa: PLC0415 - a Lambda that never assumes a role never imports it here

    partition = "aws-cn" if s.region.startswith("cn-") else "aws"
    arn = f"arn:{partition}:iam::{s.account}:role/{role_name}"
    try:
        sts = base.client("sts", region_name=s.region, config=RETRY_CONFIG)
        creds = sts.assume_role(RoleArn=arn, RoleSessionName=session_name)["Credentials"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise AccountAccessError(
            s.account, str(error.get("Code", "ClientError")), str(error.get("Message", ""))[:300]
        ) from exc
    except BotoCoreError as exc:
        raise AccountAccessError(s.account, type(exc).__name__, str(exc)[:300]) from exc
    session = boto3.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=s.region,
    )
    return ClientFactory(session, account=s.account)
