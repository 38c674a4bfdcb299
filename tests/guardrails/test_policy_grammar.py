"""Every action in the guardrail policy exists, and every condition key is one AWS
defines for that action: a typo in either makes a deny that never fires, silently.

Two checks. Action names against botocore's service models (the API operations AWS
ships). Condition keys against the Service Authorization Reference, listed by hand below
for the actions the policy uses, and, when it is installed (``make install``: a dev
extra), against parliament's copy of AWS's action/condition-key data.
"""

from __future__ import annotations

from typing import Any

import botocore.session
import pytest

from costguard.domain.guardrails import Guardrails

#: Service Authorization Reference, "Actions, resources, and condition keys for Amazon
#: EC2" and "... for Amazon SageMaker AI" (read 2026-12): the condition keys each action
#: (on the resource types the policy names) supports, of those the policy uses. Global
#: keys (aws:PrincipalArn) are valid on every action.
CONDITION_KEYS: dict[str, set[str]] = {
    # RunInstances on instance: ec2:InstanceType, aws:RequestTag/${TagKey}, aws:TagKeys.
    "ec2:RunInstances": {"ec2:InstanceType", "aws:RequestTag/*", "aws:TagKeys"},
    # CreateTags/DeleteTags: aws:RequestTag/${TagKey} (CreateTags), aws:TagKeys (both).
    "ec2:CreateTags": {"aws:RequestTag/*", "aws:TagKeys"},
    "ec2:DeleteTags": {"aws:RequestTag/*", "aws:TagKeys"},
    # CreateNotebookInstance, CreateTrainingJob, CreateEndpointConfig: sagemaker:InstanceTypes.
    "sagemaker:CreateNotebookInstance": {
        "sagemaker:InstanceTypes",
        "aws:RequestTag/*",
        "aws:TagKeys",
    },
    "sagemaker:CreateTrainingJob": {"sagemaker:InstanceTypes", "aws:RequestTag/*", "aws:TagKeys"},
    "sagemaker:CreateEndpointConfig": {
        "sagemaker:InstanceTypes",
        "aws:RequestTag/*",
        "aws:TagKeys",
    },
    # CreateEndpoint: tags only, no sagemaker:InstanceTypes (the types are on the config).
    "sagemaker:CreateEndpoint": {"aws:RequestTag/*", "aws:TagKeys"},
    "sagemaker:AddTags": {"aws:RequestTag/*", "aws:TagKeys"},
    "sagemaker:DeleteTags": {"aws:TagKeys"},
}
GLOBAL_KEYS = {"aws:PrincipalArn"}
SERVICES = {"ec2": "ec2", "sagemaker": "sagemaker"}


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _keys(statement: dict[str, Any]) -> set[str]:
    return {key for clauses in statement.get("Condition", {}).values() for key in clauses}


def _known(key: str, allowed: set[str]) -> bool:
    return (
        key in GLOBAL_KEYS
        or key in allowed
        or (key.startswith("aws:RequestTag/") and "aws:RequestTag/*" in allowed)
    )


def test_every_action_is_an_aws_operation(guard: Guardrails) -> None:
    """GIVEN the policy THEN each action (but the boundary's *) names an API operation."""
    session = botocore.session.get_session()
    operations = {
        prefix: set(session.get_service_model(service).operation_names)
        for prefix, service in SERVICES.items()
    }
    for statement in guard.document["Statement"]:
        for action in _listed(statement["Action"]):
            if action == "*":
                continue
            prefix, name = action.split(":")
            assert name in operations[prefix], f"{action} is not an {prefix} operation"


def test_every_condition_key_is_valid_for_its_actions(guard: Guardrails) -> None:
    """GIVEN the policy THEN each condition key is one AWS defines for every action of
    its statement (a key an action lacks is absent from its request: the deny never fires)."""
    for statement in guard.document["Statement"]:
        for action in _listed(statement["Action"]):
            if action == "*":
                continue
            for key in _keys(statement):
                assert _known(key, CONDITION_KEYS[action]), (
                    f"{statement['Sid']}: {key} is not a condition key of {action}"
                )


def test_the_hand_list_catches_the_endpoint_mistake() -> None:
    """GIVEN a statement gating CreateEndpoint on sagemaker:InstanceTypes THEN the check
    refuses it (the key is not in CreateEndpoint's request)."""
    assert not _known("sagemaker:InstanceTypes", CONDITION_KEYS["sagemaker:CreateEndpoint"])


def test_parliament_finds_nothing(guard: Guardrails) -> None:
    """GIVEN the policy WHEN parliament (AWS's IAM data) lints it THEN no finding: no
    unknown action, no condition key an action lacks, no malformed statement."""
    parliament = pytest.importorskip("parliament", reason="a dev extra: run `make install`")
    found = parliament.analyze_policy_string(guard.text).findings
    assert [str(f) for f in found] == []


def test_parliament_would_catch_a_key_the_action_lacks(guard: Guardrails) -> None:
    """GIVEN the endpoint statement gated on sagemaker:InstanceTypes THEN parliament says
    UNKNOWN_CONDITION_FOR_ACTION: the lint is not a rubber stamp."""
    parliament = pytest.importorskip("parliament", reason="a dev extra: run `make install`")
    import copy
    import json

    doc = copy.deepcopy(guard.document)
    for statement in doc["Statement"]:
        if statement.get("Sid") == "DenyUntaggedEndpoints":
            statement["Condition"]["ForAnyValue:StringLike"] = {
                "sagemaker:InstanceTypes": "ml.p5.*"
            }
    found = parliament.analyze_policy_string(json.dumps(doc)).findings
    assert any(f.issue == "UNKNOWN_CONDITION_FOR_ACTION" for f in found)
