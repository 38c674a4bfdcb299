"""``costguard demo --org``'s roles over moto's HTTP server, as AWS judges them: trust is
narrow on both sides. The member read role trusts only the hub's scan role and the act
role only the hub's act role, and each hub role's own policy names only its member role:
either alone keeps the hub's scan role out of the member act role (and the act role out
of the read role). The demo's STS stand-in (``checked_assume_role``) must refuse exactly
what AWS refuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from costguard.domain.org_roles import OrgRoles

pytestmark = pytest.mark.e2e


@pytest.fixture
def org() -> Iterator[dict[str, Any]]:
    import boto3

    from costguard_demo.org_world import (
        ADMIN_ROLE,
        HOME,
        HUB,
        assume,
        checked_assume_role,
        create_hub,
        create_organization,
        deploy_member_role,
    )
    from costguard_demo.server import embedded_aws

    with embedded_aws():
        management = boto3.Session(region_name=HOME)
        made = create_organization(management)
        for a in made.members:
            if a.member_role:
                admin = assume(management, f"arn:aws:iam::{a.id}:role/{ADMIN_ROLE}", "seed")
                deploy_member_role(admin, HUB, made.id)
        create_hub(management, made.id)
        org_of = {a.id: made.id for a in made.members} | {made.management: made.id}
        with checked_assume_role(org_of) as refused:
            yield {
                "ids": {a.name: a.id for a in made.members},
                "refused": refused,
                "management": management,
            }


def _enter(caller_role: str, account: str, role: str) -> str:
    """``ok`` or the error code, for the hub's ``caller_role`` (as Lambda hands it its
    credentials) assuming ``role`` in ``account``."""
    from costguard_demo.org_world import HUB, lambda_session

    sts = lambda_session(HUB, caller_role).client("sts", region_name="us-east-1")
    try:
        sts.assume_role(RoleArn=f"arn:aws:iam::{account}:role/{role}", RoleSessionName="probe")
    except ClientError as exc:
        return str(exc.response["Error"]["Code"])
    return "ok"


def test_each_hub_role_enters_its_own_member_role_and_no_other(org: dict[str, Any]) -> None:
    research, sandbox = org["ids"]["ml-research"], org["ids"]["sandbox"]
    scan, act, fanout = OrgRoles.HUB_SCAN, OrgRoles.HUB_ACT, "costguard-hub-fanout"
    read, member_act = OrgRoles.MEMBER_READ, OrgRoles.MEMBER_ACT
    # WHEN each hub role tries each member role
    got = {
        (caller, role, name): _enter(caller, org["ids"][name], role)
        for caller in (scan, act, fanout)
        for role in (read, member_act)
        for name in ("ml-research", "sandbox")
    }
    # THEN the scan consumer enters the read role and the act consumer the act role, where
    # the member stack is; the scan role is refused the act role, the act role the read
    # role, the fan-out both; and nothing enters sandbox, which has neither
    admitted = {k for k, v in got.items() if v == "ok"}
    assert admitted == {(scan, read, "ml-research"), (act, member_act, "ml-research")}
    assert {v for k, v in got.items() if k not in admitted} == {"AccessDenied"}
    assert f"arn:aws:iam::{research}:role/{member_act}" in org["refused"]
    assert f"arn:aws:iam::{sandbox}:role/{member_act}" in org["refused"]


def _allow_any_assume_role(org: dict[str, Any], role: str) -> None:
    """The hub role ``role``'s own policy, widened to let it assume any role at all."""
    iam = org["management"].client("iam", region_name="us-east-1")
    iam.put_role_policy(
        RoleName=role,
        PolicyName="anything",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "sts:*", "Resource": "*"}],
            }
        ),
    )


def test_the_member_trust_alone_keeps_each_hub_role_out_of_the_other_member_role(
    org: dict[str, Any],
) -> None:
    """Defect: both member roles trusted both hub roles, so only the hub roles' own
    policies kept the scan consumer out of the act role.

    GIVEN the hub's scan and act roles, each with its own policy widened to allow
    assuming any role (a mistake on the hub's side)
    WHEN each assumes each member role of an account with the member stack
    THEN the member trust still refuses the scan role the act role and the act role the
    read role; each still enters its own
    """
    research = org["ids"]["ml-research"]
    scan, act = OrgRoles.HUB_SCAN, OrgRoles.HUB_ACT
    read, member_act = OrgRoles.MEMBER_READ, OrgRoles.MEMBER_ACT
    for role in (scan, act):
        _allow_any_assume_role(org, role)
    assert _enter(scan, research, member_act) == "AccessDenied"
    assert _enter(act, research, read) == "AccessDenied"
    assert _enter(scan, research, read) == "ok"
    assert _enter(act, research, member_act) == "ok"
    assert org["refused"] == [
        f"arn:aws:iam::{research}:role/{member_act}",
        f"arn:aws:iam::{research}:role/{read}",
    ]


def test_a_hub_role_the_member_trust_does_not_name_is_refused_whatever_its_own_policy(
    org: dict[str, Any],
) -> None:
    # GIVEN another role of the hub account, allowed to assume anything
    iam = org["management"].client("iam", region_name="us-east-1")
    lambda_trust = {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "lambda.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ]
    }
    iam.create_role(RoleName="some-other-role", AssumeRolePolicyDocument=json.dumps(lambda_trust))
    _allow_any_assume_role(org, "some-other-role")
    # THEN the member roles' trust (one hub role each) keeps it out of both
    research = org["ids"]["ml-research"]
    for role in (OrgRoles.MEMBER_READ, OrgRoles.MEMBER_ACT):
        assert _enter("some-other-role", research, role) == "AccessDenied"
