"""The org demo's embedded STS: AssumeRole refused as AWS refuses it (moto admits anything)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from costguard_demo.org_world import checked_assume_role, identity_allows, trust_admits

MEMBER = "222222222222"


def _assume(session: Any, arn: str) -> Any:
    return session.client("sts", region_name="us-east-1").assume_role(
        RoleArn=arn, RoleSessionName="probe"
    )


def test_a_role_that_does_not_exist_or_does_not_trust_the_caller_is_refused(aws: Any) -> None:
    # GIVEN a member role trusting the caller's account, and another trusting someone else
    iam = aws.client("iam", region_name="us-east-1")
    me = aws.client("sts", region_name="us-east-1").get_caller_identity()["Account"]
    for name, trusted in (("trusting", me), ("stranger", "999999999999")):
        iam.create_role(
            RoleName=name,
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"AWS": f"arn:aws:iam::{trusted}:root"},
                            "Action": "sts:AssumeRole",
                        }
                    ]
                }
            ),
        )
    with checked_assume_role({}) as refused:
        # WHEN each is assumed THEN only the trusting role's credentials come back
        assert _assume(aws, f"arn:aws:iam::{me}:role/trusting")["Credentials"]["AccessKeyId"]
        for arn in (f"arn:aws:iam::{me}:role/stranger", f"arn:aws:iam::{MEMBER}:role/none"):
            with pytest.raises(ClientError) as caught:
                _assume(aws, arn)
            assert caught.value.response["Error"]["Code"] == "AccessDenied"
            assert arn in caught.value.response["Error"]["Message"]
    assert refused == [f"arn:aws:iam::{me}:role/stranger", f"arn:aws:iam::{MEMBER}:role/none"]
    # AND outside the demo, moto is as lenient as before
    assert _assume(aws, f"arn:aws:iam::{MEMBER}:role/none")["Credentials"]


def test_a_condition_the_stand_in_cannot_judge_refuses() -> None:
    policy = {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": "arn:aws:iam::111111111111:root"},
                "Action": "sts:AssumeRole",
                "Condition": {"Bool": {"aws:MultiFactorAuthPresent": "true"}},
            }
        ]
    }
    caller = "arn:aws:sts::111111111111:assumed-role/x/s"
    assert not trust_admits(policy, caller, "111111111111", {})
    del policy["Statement"][0]["Condition"]
    assert trust_admits(json.dumps(policy), caller, "111111111111", {})


ROLE = f"arn:aws:iam::{MEMBER}:role/costguard-member-act"
IN_ORG = {"aws:resourceorgid": "o-abc1234567", "aws:resourceaccount": MEMBER}


def _policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


@pytest.mark.parametrize(
    ("statements", "context", "allowed"),
    [
        # the hub act role's own policy, inside the Organization, and outside it
        (
            [
                {
                    "Effect": "Allow",
                    "Action": "sts:AssumeRole",
                    "Resource": "arn:aws:iam::*:role/costguard-member-act",
                    "Condition": {"StringEquals": {"aws:ResourceOrgID": "o-abc1234567"}},
                }
            ],
            IN_ORG,
            True,
        ),
        (
            [
                {
                    "Effect": "Allow",
                    "Action": "sts:AssumeRole",
                    "Resource": "arn:aws:iam::*:role/costguard-member-act",
                    "Condition": {"StringEquals": {"aws:ResourceOrgID": "o-abc1234567"}},
                }
            ],
            {"aws:resourceorgid": "o-zzzzzzzzzz"},
            False,
        ),
        # the scan role's policy names the read role only
        (
            [
                {
                    "Effect": "Allow",
                    "Action": "sts:AssumeRole",
                    "Resource": "arn:aws:iam::*:role/costguard-member-read",
                }
            ],
            IN_ORG,
            False,
        ),
        # wildcards and case, as IAM reads them
        ([{"Effect": "Allow", "Action": "STS:*", "Resource": "*"}], {}, True),
        ([{"Effect": "Allow", "Action": ["s3:*"], "Resource": "*"}], {}, False),
        # an explicit Deny wins over any Allow
        (
            [
                {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"},
                {"Effect": "Deny", "Action": "sts:*", "Resource": ROLE},
            ],
            {},
            False,
        ),
        # what the stand-in cannot judge does not allow
        ([{"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"}], {}, False),
        (
            [
                {
                    "Effect": "Allow",
                    "Action": "sts:AssumeRole",
                    "Resource": "*",
                    "Condition": {"Bool": {"aws:SecureTransport": "true"}},
                }
            ],
            IN_ORG,
            False,
        ),
    ],
)
def test_a_role_may_assume_only_what_its_own_policies_allow(
    statements: list[dict[str, Any]], context: dict[str, str], allowed: bool
) -> None:
    assert identity_allows([_policy(*statements)], ROLE, context) is allowed


def test_a_role_session_is_refused_a_role_its_own_policy_does_not_name(aws: Any) -> None:
    # GIVEN a caller role allowed to assume "target-a" only, and two roles trusting its account
    iam = aws.client("iam", region_name="us-east-1")
    me = aws.client("sts", region_name="us-east-1").get_caller_identity()["Account"]
    trust = json.dumps(
        {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:aws:iam::{me}:root"},
                    "Action": "sts:AssumeRole",
                }
            ]
        }
    )
    for name in ("caller", "target-a", "target-b"):
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust)
    iam.put_role_policy(
        RoleName="caller",
        PolicyName="p",
        PolicyDocument=_policy(
            {
                "Effect": "Allow",
                "Action": "sts:AssumeRole",
                "Resource": f"arn:aws:iam::{me}:role/target-a",
            }
        ),
    )
    with checked_assume_role({}) as refused:
        creds = _assume(aws, f"arn:aws:iam::{me}:role/caller")["Credentials"]
        caller = boto3.Session(
            aws_access_key_id=creds["AccessKeyId"],
            aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds["SessionToken"],
        )
        # WHEN its session assumes each THEN only target-a is admitted
        assert _assume(caller, f"arn:aws:iam::{me}:role/target-a")["Credentials"]
        with pytest.raises(ClientError, match="AccessDenied"):
            _assume(caller, f"arn:aws:iam::{me}:role/target-b")
    assert refused == [f"arn:aws:iam::{me}:role/target-b"]
