"""The guardrail policy on moto with IAM enforced: what moto proves, and what it cannot.

moto 5.2.5 checks every call (after ``set_initial_no_auth_action_count``) against the
caller's identity policies, but (moto/iam/access_control.py, measured here):

- it authorizes EC2 and SageMaker calls against the resource ``*``, never the instance's
  ARN: a statement whose ``Resource`` is ``arn:aws:ec2:*:*:instance/*`` never applies;
- it evaluates no condition but ``StringEquals`` on values it is handed, and it is handed
  none: every other ``Condition`` is ignored, so a Deny with ``Resource: *`` applies
  unconditionally.

So moto proves: the policy is a document IAM accepts (moto's validator), the action names
are the ones the API calls map to (a ``Resource: *`` Deny of that action fires), and the
policy refuses nothing it does not name. It cannot prove the conditions: the tag, the
type, the exempt role. For those, the calls below go through a hook that asks the IAM
evaluator (tests/support/iam_eval.py) before moto sees them, with the request context
built from the call's own parameters, and refuses as EC2 does (``UnauthorizedOperation``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core import set_initial_no_auth_action_count

from costguard.domain.guardrails import Guardrails, Target, accelerator_families, build_guardrails
from tests.support.iam_eval import ALLOW_ALL, Principal, run_instances_checks

REGION = "us-east-1"
#: The unauthenticated calls that set the user up (see ``_user``), before enforcement.
SETUP_CALLS = 6


def _user(guard_document: dict[str, Any]) -> boto3.Session:
    """An IAM user with AdministratorAccess-like allow-all and the guardrail attached (as an
    identity policy: moto has no permissions boundary or SCP evaluation); its session."""
    iam = boto3.client("iam", region_name=REGION)
    iam.create_user(UserName="dev")
    allow = iam.create_policy(PolicyName="allow-all", PolicyDocument=json.dumps(ALLOW_ALL))
    guard = iam.create_policy(PolicyName="guardrails", PolicyDocument=json.dumps(guard_document))
    iam.attach_user_policy(UserName="dev", PolicyArn=allow["Policy"]["Arn"])
    iam.attach_user_policy(UserName="dev", PolicyArn=guard["Policy"]["Arn"])
    key = iam.create_access_key(UserName="dev")["AccessKey"]
    return boto3.Session(
        aws_access_key_id=key["AccessKeyId"],
        aws_secret_access_key=key["SecretAccessKey"],
        region_name=REGION,
    )


def _deny_document() -> dict[str, Any]:
    """The SCP's denies as one account would attach them (no boundary allow)."""
    return build_guardrails(target=Target.SCP, families=accelerator_families()).document


@pytest.fixture
def guard() -> Guardrails:
    return build_guardrails(target=Target.SCP, families=accelerator_families())


@pytest.fixture
def moto() -> Iterator[None]:
    with mock_aws():
        yield


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


@set_initial_no_auth_action_count(SETUP_CALLS)
def test_moto_accepts_the_document_and_refuses_nothing_unnamed(moto: None) -> None:
    """GIVEN the guardrail attached next to allow-all WHEN the user calls actions the
    policy does not name THEN moto allows them: no accidental blanket deny."""
    session = _user(_deny_document())
    session.client("ec2").describe_instances()
    session.client("sagemaker").list_notebook_instances()
    session.client("sts").get_caller_identity()


@set_initial_no_auth_action_count(SETUP_CALLS)
def test_moto_matches_the_action_names_but_ignores_conditions(moto: None) -> None:
    """GIVEN the guardrail WHEN a *tagged* CPU notebook is created THEN moto still refuses
    it: the action name matched (sagemaker:CreateNotebookInstance is what the API call is
    authorized as) and moto ignored the Condition that would let it pass. This pins moto's
    limit: if moto starts evaluating conditions, this test says so."""
    session = _user(_deny_document())
    with pytest.raises(ClientError) as refused:
        session.client("sagemaker").create_notebook_instance(
            NotebookInstanceName="nb",
            InstanceType="ml.t3.medium",
            RoleArn="arn:aws:iam::123456789012:role/sm",
            Tags=[{"Key": "costguard:project", "Value": "vision"}],
        )
    # moto answers this JSON-protocol call with an XML AccessDenied page (code "403").
    assert "not authorized to perform: sagemaker:CreateNotebookInstance" in str(refused.value)


@set_initial_no_auth_action_count(SETUP_CALLS)
def test_moto_cannot_see_instance_scoped_denies(moto: None) -> None:
    """GIVEN the guardrail WHEN the user runs an untagged p5.48xlarge on plain moto THEN
    moto lets it through: it authorizes RunInstances against ``*``, not the instance ARN
    the statement names. moto alone proves nothing about the launch gate."""
    ec2: Any = _user(_deny_document()).client("ec2")
    ec2.run_instances(ImageId="ami-12345678", InstanceType="p5.48xlarge", MinCount=1, MaxCount=1)
    assert len(ec2.describe_instances()["Reservations"]) == 1


def _enforce_conditions(client: Any, principal: Principal) -> list[str]:
    """Refuse, on ``client``, each RunInstances the evaluator refuses, as EC2 does."""
    refused: list[str] = []

    def check(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name != "RunInstances":
            return
        if not principal.permitted(run_instances_checks(params, region=REGION)):
            refused.append(params["InstanceType"])
            raise ClientError(
                {"Error": {"Code": "UnauthorizedOperation", "Message": "explicit deny"}},
                "RunInstances",
            )

    client.meta.events.register("provide-client-params.ec2.RunInstances", check)
    return refused


@set_initial_no_auth_action_count(SETUP_CALLS)
def test_launches_on_moto_with_the_conditions_enforced(moto: None, guard: Guardrails) -> None:
    """GIVEN the guardrail on an IAM-enforced moto, its conditions evaluated for each call
    WHEN the user runs an untagged p5.48xlarge, a tagged one and an untagged t3.micro
    THEN the first is refused and never exists; the other two run."""
    ec2: Any = _user(guard.document).client("ec2")
    refused = _enforce_conditions(
        ec2, Principal("arn:aws:iam::123456789012:user/dev", scps=(guard.document,))
    )

    def run(instance_type: str, tags: dict[str, str] | None = None) -> None:
        specs = (
            [
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                }
            ]
            if tags
            else []
        )
        ec2.run_instances(
            ImageId="ami-12345678",
            InstanceType=instance_type,
            MinCount=1,
            MaxCount=1,
            TagSpecifications=specs,
        )

    with pytest.raises(ClientError) as denied:
        run("p5.48xlarge")
    assert _code(denied) == "UnauthorizedOperation"
    run("p5.48xlarge", {"costguard:project": "vision"})
    run("t3.micro")
    running = [
        i["InstanceType"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
    ]
    assert sorted(running) == ["p5.48xlarge", "t3.micro"]
    assert refused == ["p5.48xlarge"]
