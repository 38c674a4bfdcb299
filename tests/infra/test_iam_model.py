"""The test-side policy evaluator must be right, or the effect tests prove nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.iam_model import (
    Principal,
    World,
    condition_holds,
    evaluate,
    role_may,
    service_may_use_key,
)

ROLE = "arn:aws:iam::123456789012:role/costguard-r"


def _template(identity: list[dict[str, Any]], key: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "Resources": {
            "K": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": {"Statement": key}}},
            "R": {"Type": "AWS::IAM::Role", "Properties": {}},
            "P": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "Roles": [{"Ref": "R"}],
                    "PolicyDocument": {"Statement": identity},
                },
            },
        }
    }


ROOT_KEY = {
    "Effect": "Allow",
    "Principal": {
        "AWS": {
            "Fn::Join": [
                "",
                ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"],
            ]
        }
    },
    "Action": "kms:*",
    "Resource": "*",
}


def test_a_key_policy_naming_the_root_delegates_to_the_roles_own_policy() -> None:
    allow = {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": {"Fn::GetAtt": ["K", "Arn"]}}
    world = World(_template([allow], [ROOT_KEY]))
    key = world.arn("K")
    assert role_may(world, "R", "kms:Decrypt", key)
    assert not role_may(world, "R", "kms:GenerateDataKey", key)  # not in its identity policy
    without_root = World(_template([allow], []))
    assert not role_may(without_root, "R", "kms:Decrypt", without_root.arn("K"))


def test_an_explicit_deny_wins_and_wildcards_match_actions_case_insensitively() -> None:
    statements = [
        {"Effect": "Allow", "Action": "SNS:Pub*", "Resource": "arn:aws:sns:us-east-1:1:t"},
        {
            "Effect": "Deny",
            "Action": "sns:Publish",
            "Resource": "*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        },
    ]
    tls = {"aws:SecureTransport": "true"}
    assert evaluate(statements, "sns:Publish", "arn:aws:sns:us-east-1:1:t", tls).allowed
    plain = {"aws:SecureTransport": "false"}
    assert evaluate(statements, "sns:Publish", "arn:aws:sns:us-east-1:1:t", plain).denied
    assert not evaluate(statements, "sns:Publish", "arn:aws:sns:us-east-1:1:other", tls).allowed


def test_a_service_principal_matches_only_itself_and_needs_its_conditions() -> None:
    statement = {
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
        "Resource": "*",
        "Condition": {"StringEquals": {"aws:SourceAccount": "123456789012"}},
    }
    world = World(_template([], [statement]))
    key = world.arn("K")
    ours = {"aws:SourceAccount": "123456789012"}
    assert service_may_use_key(world, "cloudwatch.amazonaws.com", "kms:GenerateDataKey", key, ours)
    assert not service_may_use_key(world, "sns.amazonaws.com", "kms:Decrypt", key, ours)
    assert not service_may_use_key(world, "cloudwatch.amazonaws.com", "kms:Decrypt", key, {})
    with pytest.raises(ValueError, match="needs the asking principal"):
        evaluate([statement], "kms:Decrypt", key)
    assert not evaluate([statement], "kms:Decrypt", key, ours, Principal(role_arn=ROLE)).allowed


@pytest.mark.parametrize(
    ("condition", "context", "holds"),
    [
        ({"StringEquals": {"k": "v"}}, {}, False),
        ({"StringEqualsIfExists": {"k": "v"}}, {}, True),
        ({"StringNotEquals": {"k": "v"}}, {"k": "w"}, True),
        (
            {"ArnLike": {"aws:SourceArn": "arn:aws:cloudwatch:*:1:alarm:*"}},
            {"aws:SourceArn": "arn:aws:cloudwatch:us-east-1:1:alarm:x"},
            True,
        ),
        (
            {"ArnLike": {"aws:SourceArn": "arn:aws:cloudwatch:*:1:alarm:*"}},
            {"aws:SourceArn": "arn:aws:events:us-east-1:1:rule/x"},
            False,
        ),
        ({"Null": {"aws:ResourceTag/costguard:project": "false"}}, {}, False),
        (
            {"Null": {"aws:ResourceTag/costguard:project": "false"}},
            {"aws:ResourceTag/costguard:project": "a"},
            True,
        ),
        ({"StringNotEqualsIgnoreCase": {"t": ["true", "yes"]}}, {"t": "YES"}, False),
        ({"ForAllValues:StringEquals": {"aws:TagKeys": ["a"]}}, {"aws:TagKeys": "a,b"}, False),
        ({"ForAllValues:StringEquals": {"aws:TagKeys": ["a"]}}, {"aws:TagKeys": "a"}, True),
    ],
)
def test_conditions_follow_iam_semantics(
    condition: dict[str, Any], context: dict[str, str], holds: bool
) -> None:
    assert condition_holds(condition, context) is holds


def test_an_operator_the_model_does_not_know_fails_loudly() -> None:
    with pytest.raises(NotImplementedError, match="NumericLessThan"):
        condition_holds({"NumericLessThan": {"k": "1"}}, {"k": "0"})


def test_intrinsics_resolve_to_the_concrete_account() -> None:
    world = World(_template([], []))
    assert world.resolve(
        {"Fn::Sub": "arn:${AWS::Partition}:x:${AWS::Region}:${AWS::AccountId}:${K.Arn}"}
    ) == (f"arn:aws:x:us-east-1:123456789012:{world.arn('K')}")
    assert world.resolve({"Fn::Select": [1, {"Fn::Split": ["/", "a/b/c"]}]}) == "b"
    with pytest.raises(KeyError, match="unknown"):
        world.resolve({"Ref": "Nope"})


@pytest.mark.parametrize("name", ["ONLY_THE_WARNING_TAG", "REMOVE_ONLY_THE_WARNING_TAG"])
def test_a_tag_call_that_names_no_key_is_refused_by_the_warning_tag_conditions(name: str) -> None:
    # GIVEN the conditions every CreateTags/DeleteTags/AddTags statement of a guard carries
    from costguard import iam

    condition = getattr(iam, name)
    project = {"aws:ResourceTag/costguard:project": "vision"}
    # THEN naming only the warning key is allowed
    assert condition_holds(condition, {**project, "aws:TagKeys": "costguard:action-after"})
    # AND a call that names no key is refused: EC2's DeleteTags without Tags deletes *every*
    # tag (costguard:exempt included), and ForAllValues holds vacuously over no keys
    assert not condition_holds(condition, project)
