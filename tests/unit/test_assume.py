"""Entering a member account: the role ARN in the region's partition, credentials kept."""

from __future__ import annotations

from typing import Any

import pytest

from costguard.adapters.assume import MemberClients, member_clients
from costguard.domain.org import Slice

ACCOUNT = "222222222222"


class RecordingSts:
    def __init__(self, arns: list[str]) -> None:
        self.arns = arns

    def assume_role(self, RoleArn: str, RoleSessionName: str) -> dict[str, Any]:
        self.arns.append(RoleArn)
        return {"Credentials": {"AccessKeyId": "a", "SecretAccessKey": "b", "SessionToken": "c"}}


class Base:
    def __init__(self) -> None:
        self.arns: list[str] = []

    def client(self, name: str, **_: Any) -> RecordingSts:
        return RecordingSts(self.arns)


@pytest.mark.parametrize(
    ("region", "partition"),
    [("us-east-1", "aws"), ("us-gov-west-1", "aws-us-gov"), ("cn-north-1", "aws-cn")],
)
def test_assumes_the_member_role_in_the_region_s_partition(region: str, partition: str) -> None:
    # Defect: a GovCloud account's role was named arn:aws:iam::…, which STS refuses there.
    base = Base()
    member_clients(base, Slice(ACCOUNT, region), "costguard-member-read")
    assert base.arns == [f"arn:{partition}:iam::{ACCOUNT}:role/costguard-member-read"]


def test_keeps_each_account_s_clients_until_they_age_out() -> None:
    # GIVEN a clock the test moves
    base, now = Base(), [0.0]
    members = MemberClients(base, "r", ttl_seconds=100, clock=lambda: now[0])
    # WHEN one account's regions are entered in turn, then again after the TTL
    first = members(Slice(ACCOUNT, "us-east-1"))
    assert members(Slice(ACCOUNT, "eu-west-1")) is first
    members(Slice("333333333333", "us-east-1"))
    now[0] = 101
    assert members(Slice(ACCOUNT, "us-east-1")) is not first
    # THEN STS was called once per account, and once more after the TTL
    assert len(base.arns) == 3
