"""The guardrail policy does what it says, judged as IAM judges it.

moto evaluates no Condition (FIELD-NOTES), so each call below is turned into the
authorizations AWS makes for it (tests/support/iam_eval.py: one per resource ARN for
RunInstances, the TagSpecifications of the instance in the instance's context, the
CreateTags check of tag-on-create) and judged with the generated policy as an SCP (over
FullAWSAccess) or as a permissions boundary, next to an allow-all identity policy.
"""

from __future__ import annotations

from typing import Any

import pytest

from costguard.domain.guardrails import Guardrails, Target
from tests.guardrails.conftest import CI_ROLE, DEVELOPER
from tests.support.iam_eval import (
    Principal,
    run_instances_checks,
    sagemaker_create_checks,
    tag_change_checks,
)

INSTANCE = "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"
NOTEBOOK = "arn:aws:sagemaker:us-east-1:123456789012:notebook-instance/nb"


def principal(guard: Guardrails, arn: str = DEVELOPER) -> Principal:
    if guard.target is Target.SCP:
        return Principal(arn, scps=(guard.document,))
    return Principal(arn, boundary=guard.document)


def launch(instance_type: str, tags: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "ImageId": "ami-12345678",
        "InstanceType": instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        **extra,
    }
    if tags is not None:
        params["TagSpecifications"] = [
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ]
    return params


def test_untagged_p5_launch_is_denied(guard: Guardrails) -> None:
    """GIVEN the guardrail WHEN a developer runs an untagged p5.48xlarge THEN IAM refuses it."""
    assert not principal(guard).permitted(run_instances_checks(launch("p5.48xlarge")))


def test_tagged_accelerator_launch_passes(guard: Guardrails) -> None:
    """GIVEN the guardrail WHEN the launch tags the instance with a project THEN it passes
    (a g5.xlarge, under the $20/h ceiling)."""
    checks = run_instances_checks(launch("g5.xlarge", {"costguard:project": "vision"}))
    assert principal(guard).permitted(checks)


def test_tagged_launch_above_the_ceiling_is_denied(guard: Guardrails) -> None:
    """GIVEN a $20/h ceiling WHEN a tagged p5.48xlarge ($55.04/h) is launched THEN it is
    refused: the tag does not buy a type above the ceiling."""
    checks = run_instances_checks(launch("p5.48xlarge", {"costguard:project": "vision"}))
    assert not principal(guard).permitted(checks)


def test_tagged_p5_passes_without_a_ceiling() -> None:
    """GIVEN no ceiling WHEN a tagged p5.48xlarge is launched THEN it passes."""
    from tests.guardrails.conftest import guardrails

    for target in Target:
        guard = guardrails(target)
        checks = run_instances_checks(launch("p5.48xlarge", {"costguard:project": "vision"}))
        assert principal(guard).permitted(checks)


def test_untagged_cpu_instance_passes(guard: Guardrails) -> None:
    """GIVEN the guardrail WHEN an untagged t3.micro is launched THEN it passes: only
    accelerators need the tag."""
    assert principal(guard).permitted(run_instances_checks(launch("t3.micro")))


def test_empty_project_value_is_denied(guard: Guardrails) -> None:
    """GIVEN the guardrail WHEN the project tag is present but empty THEN it is refused:
    an empty project is no project."""
    checks = run_instances_checks(launch("g5.xlarge", {"costguard:project": ""}))
    assert not principal(guard).permitted(checks)


def test_project_key_in_another_case_is_denied(guard: Guardrails) -> None:
    """Defect guarded: aws:RequestTag/<key> finds a tag whatever its key's case, so a
    Null check passes ``CostGuard:Project``, a key the scan does not read. The policy
    tests aws:TagKeys (case-sensitive) instead: the launch is refused."""
    checks = run_instances_checks(launch("g5.xlarge", {"CostGuard:Project": "vision"}))
    assert not principal(guard).permitted(checks)


def test_project_tag_on_the_volume_only_is_denied(guard: Guardrails) -> None:
    """GIVEN tags for the volume only WHEN an accelerator is launched THEN it is refused:
    the instance's own TagSpecifications decide."""
    params = launch("g5.xlarge")
    params["TagSpecifications"] = [
        {"ResourceType": "volume", "Tags": [{"Key": "costguard:project", "Value": "vision"}]}
    ]
    assert not principal(guard).permitted(run_instances_checks(params))


def test_other_tags_without_the_project_are_denied(guard: Guardrails) -> None:
    """GIVEN other tags but no project WHEN an accelerator is launched THEN it is refused."""
    checks = run_instances_checks(launch("trn1.32xlarge", {"Name": "x", "team": "ml"}))
    assert not principal(guard).permitted(checks)


def test_exempt_role_passes_untagged(guard: Guardrails) -> None:
    """GIVEN the CI deploy role is exempt WHEN it runs an untagged p5.48xlarge THEN it passes."""
    assert principal(guard, CI_ROLE).permitted(run_instances_checks(launch("p5.48xlarge")))


def test_untagged_accelerator_notebook_is_denied(guard: Guardrails) -> None:
    """GIVEN the guardrail WHEN an untagged ml.g5.xlarge notebook is created THEN refused;
    a tagged one and an untagged ml.t3.medium pass."""
    p = principal(guard)
    assert not p.permitted(
        sagemaker_create_checks("CreateNotebookInstance", "nb", instance_types=["ml.g5.xlarge"])
    )
    assert p.permitted(
        sagemaker_create_checks(
            "CreateNotebookInstance",
            "nb",
            instance_types=["ml.g5.xlarge"],
            tags={"costguard:project": "vision"},
        )
    )
    assert p.permitted(
        sagemaker_create_checks("CreateNotebookInstance", "nb", instance_types=["ml.t3.medium"])
    )


def test_training_job_with_one_accelerator_group_is_denied(guard: Guardrails) -> None:
    """GIVEN a heterogeneous training job (a CPU group and a GPU group) WHEN untagged THEN
    refused: one accelerator type among the request's types is enough."""
    checks = sagemaker_create_checks(
        "CreateTrainingJob", "job", instance_types=["ml.c5.xlarge", "ml.p4d.24xlarge"]
    )
    assert not principal(guard).permitted(checks)


def test_untagged_endpoint_is_denied_whatever_its_type(guard: Guardrails) -> None:
    """GIVEN the guardrail WHEN an untagged endpoint is created THEN refused (CreateEndpoint
    carries no instance type, so every endpoint needs the tag); a tagged one passes."""
    p = principal(guard)
    assert not p.permitted(sagemaker_create_checks("CreateEndpoint", "ep"))
    assert not p.permitted(
        sagemaker_create_checks("CreateEndpoint", "ep", tags={"costguard:project": ""})
    )
    assert p.permitted(
        sagemaker_create_checks("CreateEndpoint", "ep", tags={"costguard:project": "vision"})
    )


def test_endpoint_config_above_the_ceiling_is_denied(guard: Guardrails) -> None:
    """GIVEN a $20/h ceiling WHEN an endpoint config asks for ml.p5.48xlarge THEN refused;
    ml.g5.xlarge passes."""
    p = principal(guard)
    assert not p.permitted(
        sagemaker_create_checks("CreateEndpointConfig", "c", instance_types=["ml.p5.48xlarge"])
    )
    assert p.permitted(
        sagemaker_create_checks("CreateEndpointConfig", "c", instance_types=["ml.g5.xlarge"])
    )


def test_removing_the_project_tag_is_denied(guard: Guardrails) -> None:
    """GIVEN a tagged instance WHEN DeleteTags names costguard:project THEN refused;
    DeleteTags of another key passes."""
    p = principal(guard)
    assert not p.permitted(
        tag_change_checks("ec2:DeleteTags", INSTANCE, keys=["costguard:project"])
    )
    assert not p.permitted(
        tag_change_checks("sagemaker:DeleteTags", NOTEBOOK, keys=["x", "costguard:project"])
    )
    assert p.permitted(tag_change_checks("ec2:DeleteTags", INSTANCE, keys=["Name"]))
    assert p.permitted(tag_change_checks("sagemaker:DeleteTags", NOTEBOOK, keys=["Name"]))


def test_delete_tags_without_keys_is_denied(guard: Guardrails) -> None:
    """Defect guarded: an EC2 DeleteTags without Tags deletes every tag, and its request
    has no aws:TagKeys, so ForAnyValue (and a ForAllValues allow) lets it through. The
    policy refuses a keyless DeleteTags on instances."""
    assert not principal(guard).permitted(tag_change_checks("ec2:DeleteTags", INSTANCE, keys=None))


def test_blanking_the_project_tag_is_denied(guard: Guardrails) -> None:
    """GIVEN a tagged instance WHEN CreateTags (AddTags) overwrites the project with an
    empty value THEN refused; another project value passes."""
    p = principal(guard)
    assert not p.permitted(
        tag_change_checks("ec2:CreateTags", INSTANCE, tags={"costguard:project": ""})
    )
    assert not p.permitted(
        tag_change_checks("sagemaker:AddTags", NOTEBOOK, tags={"costguard:project": ""})
    )
    assert p.permitted(
        tag_change_checks("ec2:CreateTags", INSTANCE, tags={"costguard:project": "nlp"})
    )


def test_exempt_role_may_remove_the_tag(guard: Guardrails) -> None:
    """GIVEN the exempt CI role WHEN it deletes the project tag THEN it passes."""
    checks = tag_change_checks("ec2:DeleteTags", INSTANCE, keys=["costguard:project"])
    assert principal(guard, CI_ROLE).permitted(checks)


def test_boundary_still_allows_what_it_does_not_deny() -> None:
    """Defect guarded: a permissions boundary of denies alone allows nothing (the effective
    permissions are the intersection). The boundary lets everything else through."""
    from tests.guardrails.conftest import guardrails

    p = principal(guardrails(Target.BOUNDARY))
    assert p.permitted(run_instances_checks(launch("m7i.large")))
    assert p.permitted(tag_change_checks("s3:ListBucket", "arn:aws:s3:::b", keys=["k"]))


@pytest.mark.parametrize("family", ["g4ad", "p5en", "dl1", "trn2", "inf2", "p6-b200"])
def test_every_known_family_is_gated(family: str) -> None:
    """GIVEN families from the estimate table and the catalog WHEN an untagged instance of
    each is launched THEN it is refused."""
    from tests.guardrails.conftest import guardrails

    guard = guardrails(Target.SCP)
    assert not principal(guard).permitted(run_instances_checks(launch(f"{family}.48xlarge")))
