"""The org demo's embedded STS: AssumeRole refused as AWS refuses it (moto admits anything)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from costguard_demo.org import checked_assume_role, trust_admits

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
