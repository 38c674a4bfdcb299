"""Credentials for one member account: ``sts:AssumeRole`` into its CostGuard role.

IAM for STS: the hub's roles need ``sts:AssumeRole`` on
``arn:<partition>:iam::*:role/costguard-member-*`` (the member trust policy does the rest).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from costguard.adapters.aws import AWS_ERRORS, RETRY_CONFIG, ClientFactory, translate
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


def partition_of(region: str) -> str:
    """The ARN partition of a region: a GovCloud or China role has its own."""
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    if region.startswith("cn-"):
        return "aws-cn"
    return "aws"


def sts_region(base: Any, s: Slice) -> str:
    """Where the hub calls STS: its own region, or, without one, a region of the member's
    partition that no account can disable."""
    home = getattr(base, "region_name", None)
    if home:
        return str(home)
    if s.region.startswith("us-gov-"):
        return "us-gov-west-1"
    if s.region.startswith("cn-"):
        return "cn-north-1"
    return "us-east-1"


def member_clients(
    base: Any, s: Slice, role_name: str, *, session_name: str = "costguard-hub"
) -> ClientFactory:
    """Typed clients in ``s.account``, from the member role's temporary credentials.

    The credentials last an hour (the role's maximum), longer than any slice's scan.
    """
    import boto3  # noqa: PLC0415 - a Lambda that never assumes a role never imports it here

    arn = f"arn:{partition_of(s.region)}:iam::{s.account}:role/{role_name}"
    try:
        # STS in the hub's own region (enabled for the hub: its Lambdas run there), never
        # the member's: STS refuses the hub's credentials in a region the hub account has
        # not enabled, and members may enable opt-in regions the hub did not.
        sts = base.client("sts", region_name=sts_region(base, s), config=RETRY_CONFIG)
        creds = sts.assume_role(RoleArn=arn, RoleSessionName=session_name)["Credentials"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise AccountAccessError(
            s.account, str(error.get("Code", "ClientError")), str(error.get("Message", ""))[:300]
        ) from exc
    except AWS_ERRORS as exc:  # unreachable STS, or an answer that is no answer (HTML)
        failed = translate("sts", s.region, "AssumeRole", exc)
        raise AccountAccessError(s.account, failed.code, failed.detail) from exc
    session = boto3.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=s.region,
    )
    return ClientFactory(session, account=s.account)


class MemberClients:
    """Each member account's clients, kept while their credentials are fresh.

    One ``sts:AssumeRole`` per account per container and ``ttl``, instead of one per work
    item: a warm consumer that runs an account's scan, probes and regions reuses them
    (the credentials last an hour; they are renewed well before). A failure is not kept:
    the next item of the account tries again.
    """

    def __init__(
        self,
        base: Any,
        role_name: str,
        *,
        ttl_seconds: float = 45 * 60,
        clock: Callable[[], float] = time.monotonic,
        session_name: str = "costguard-hub",
    ) -> None:
        self._base = base
        self._role = role_name
        #: CloudTrail shows it in the member account: who acted (the hub's guards or scans).
        self._session_name = session_name
        self._ttl = ttl_seconds
        self._clock = clock
        self._cache: dict[str, tuple[float, ClientFactory]] = {}
        self._lock = threading.Lock()

    def __call__(self, s: Slice) -> ClientFactory:
        now = self._clock()
        with self._lock:
            hit = self._cache.get(s.account)
            if hit is not None and now - hit[0] < self._ttl:
                return hit[1]
        clients = member_clients(self._base, s, self._role, session_name=self._session_name)
        with self._lock:
            self._cache[s.account] = (now, clients)
        return clients
