"""The evaluator the guardrail tests trust, checked against IAM's documented rules.

Each case is a rule from the IAM User Guide ("IAM JSON policy elements: Condition
operators"; "Set operators for multivalued context keys"; "Policy evaluation logic"): if
the evaluator got one wrong, the policy tests would prove the wrong thing.
"""

from __future__ import annotations

import pytest

from tests.support.iam_eval import condition_operator_holds, policy_decision


@pytest.mark.parametrize(
    ("operator", "key", "values", "context", "expected"),
    [
        # A missing key: a positive operator is false, a negated one true, IfExists true.
        ("StringEquals", "aws:RequestTag/p", "a", {}, False),
        ("StringNotEquals", "aws:RequestTag/p", "a", {}, True),
        ("StringNotLike", "aws:RequestTag/p", "?*", {}, True),
        ("StringLikeIfExists", "ec2:InstanceType", "p5.*", {}, True),
        ("ArnNotLike", "aws:PrincipalArn", "arn:aws:iam::*:role/ci", {}, True),
        # Null: "true" means the key is absent.
        ("Null", "aws:RequestTag/p", "true", {}, True),
        ("Null", "aws:RequestTag/p", "true", {"aws:RequestTag/p": ""}, False),
        # Key names are case-insensitive; values are not.
        (
            "StringEquals",
            "aws:RequestTag/Costguard:Project",
            "a",
            {"aws:requesttag/costguard:project": "a"},
            True,
        ),
        ("StringEquals", "aws:RequestTag/p", "A", {"aws:RequestTag/p": "a"}, False),
        ("StringEqualsIgnoreCase", "aws:RequestTag/p", "A", {"aws:RequestTag/p": "a"}, True),
        # Wildcards: * and ? only (no character classes).
        ("StringLike", "ec2:InstanceType", "p5.*", {"ec2:InstanceType": "p5.48xlarge"}, True),
        ("StringLike", "ec2:InstanceType", "p5.*", {"ec2:InstanceType": "p5en.48xlarge"}, False),
        ("StringLike", "ec2:InstanceType", "[p]5.*", {"ec2:InstanceType": "p5.48xlarge"}, False),
        # Several values of one key are ORed; a negated operator needs none to match.
        (
            "StringLike",
            "ec2:InstanceType",
            ["g5.*", "p5.*"],
            {"ec2:InstanceType": "p5.4xlarge"},
            True,
        ),
        ("StringNotEquals", "k", ["a", "b"], {"k": "b"}, False),
        # ForAnyValue: false for a missing or empty set; ForAllValues: true for it.
        ("ForAnyValue:StringEquals", "aws:TagKeys", "p", {}, False),
        ("ForAnyValue:StringEquals", "aws:TagKeys", "p", {"aws:TagKeys": []}, False),
        ("ForAllValues:StringEquals", "aws:TagKeys", "p", {}, True),
        ("ForAllValues:StringNotEquals", "aws:TagKeys", "p", {}, True),
        ("ForAllValues:StringNotEquals", "aws:TagKeys", "p", {"aws:TagKeys": ["x", "p"]}, False),
        ("ForAllValues:StringNotEquals", "aws:TagKeys", "p", {"aws:TagKeys": ["x", "P"]}, True),
        (
            "ForAnyValue:StringLike",
            "sagemaker:InstanceTypes",
            "ml.p*",
            {"sagemaker:InstanceTypes": ["ml.c5.xlarge", "ml.p4d.24xlarge"]},
            True,
        ),
        # ARNs: part by part, with wildcards.
        (
            "ArnNotLike",
            "aws:PrincipalArn",
            "arn:aws:iam::*:role/ci-*",
            {"aws:PrincipalArn": "arn:aws:iam::123456789012:role/ci-deploy"},
            False,
        ),
        (
            "ArnNotLike",
            "aws:PrincipalArn",
            "arn:aws:iam::*:role/ci-*",
            {"aws:PrincipalArn": "arn:aws:iam::123456789012:role/dev"},
            True,
        ),
    ],
)
def test_operator_follows_iam(
    operator: str, key: str, values: object, context: dict[str, object], expected: bool
) -> None:
    """GIVEN an operator, a key and a request context THEN the evaluator answers as IAM does."""
    assert condition_operator_holds(operator, key, values, context) is expected  # type: ignore[arg-type]


def test_explicit_deny_wins_and_no_allow_is_an_implicit_deny() -> None:
    """GIVEN an allow and a matching deny THEN Deny; GIVEN neither THEN ImplicitDeny."""
    allow = {"Statement": [{"Effect": "Allow", "Action": "ec2:*", "Resource": "*"}]}
    deny = {
        "Statement": {
            "Effect": "Deny",
            "Action": "EC2:RunInstances",
            "Resource": "arn:aws:ec2:*:*:instance/*",
        }
    }
    arn = "arn:aws:ec2:us-east-1:1:instance/*"
    assert policy_decision([allow, deny], "ec2:RunInstances", arn, {}) == "Deny"
    assert (
        policy_decision([allow, deny], "ec2:RunInstances", "arn:aws:ec2:us-east-1:1:volume/*", {})
        == "Allow"
    )
    assert policy_decision([deny], "s3:GetObject", "arn:aws:s3:::b/k", {}) == "ImplicitDeny"
