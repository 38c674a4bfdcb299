"""The member-account stack (a StackSet template): who may assume its roles, and what they may do.

Asserted on the effect (the trust and identity policies evaluated for concrete requests),
not on the presence of a statement.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from costguard.adapters.launched import READS as LAUNCH_READS
from costguard.domain.org_roles import OrgRoles
from costguard.guards import actuator_permissions
from costguard.iam import (
    account_scoped_s3,
    all_actions,
    member_read_permissions,
    tag_conditioned,
)
from costguard_infra.config import ConfigError
from costguard_infra.member import MEMBER_ACKNOWLEDGEMENTS, build_member_app
from tests.infra.iam_model import Principal, World, as_list, evaluate, mutating

pytestmark = pytest.mark.infra

HUB = "111111111111"
MEMBER = "222222222222"
ORG = "o-abc1234567"
CONTEXT = {"hubAccount": HUB, "orgId": ORG}
HUB_SCAN = f"arn:aws:iam::{HUB}:role/{OrgRoles.HUB_SCAN}"
HUB_ACT = f"arn:aws:iam::{HUB}:role/{OrgRoles.HUB_ACT}"


def _synth(acknowledgements: dict[str, str] | None = None) -> tuple[Path, set[str]]:
    outdir = Path(tempfile.mkdtemp(prefix="costguard-member-"))
    app, _stack = build_member_app(
        CONTEXT,
        outdir=str(outdir),
        **({} if acknowledgements is None else {"acknowledgements": acknowledgements}),
    )
    try:
        app.synth()
    except RuntimeError as exc:
        if "ValidationFailed" not in str(exc):
            raise
    report = outdir / "validation-report.json"
    found = set()
    if report.exists():
        found = {
            v["ruleName"].removeprefix("AwsSolutions::")
            for plugin in json.loads(report.read_text())["pluginReports"]
            for v in plugin["violations"]
        }
    return outdir, found


@pytest.fixture(scope="module")
def synthesized() -> tuple[Path, set[str]]:
    return _synth()


@pytest.fixture(scope="module")
def body(synthesized: tuple[Path, set[str]]) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(
        (synthesized[0] / "CostGuardMember.template.json").read_text()
    )
    return parsed


@pytest.fixture(scope="module")
def world(body: dict[str, Any]) -> World:
    return World(body, account=MEMBER)


def _role(world: World, name: str) -> str:
    (logical,) = [
        k
        for k, r in world.resources("AWS::IAM::Role").items()
        if r["Properties"]["RoleName"] == name
    ]
    return logical


def _may_assume(world: World, role: str, caller: str, org: str | None = ORG) -> bool:
    trust = world.resolve(world.props(role)["AssumeRolePolicyDocument"])
    context = {"aws:PrincipalArn": caller}
    if org is not None:
        context["aws:PrincipalOrgID"] = org
    decision = evaluate(
        as_list(trust["Statement"]),
        "sts:AssumeRole",
        world.arn(role),
        context,
        Principal(role_arn=caller),
    )
    return decision.allowed


# -- synth: zero unacknowledged findings, nothing a StackSet cannot deploy --------------------


def test_member_stack_synthesizes_with_zero_unacknowledged_nag_findings(
    synthesized: tuple[Path, set[str]],
) -> None:
    assert synthesized[1] == set()


def test_every_member_acknowledgement_matches_a_finding_of_the_member_stack() -> None:
    # GIVEN the member app synthesized with no acknowledgement at all
    _out, findings = _synth({})
    # THEN each acknowledgement is needed, and every finding is acknowledged
    assert sorted(set(MEMBER_ACKNOWLEDGEMENTS) - findings) == []
    assert sorted(findings - set(MEMBER_ACKNOWLEDGEMENTS)) == []


def test_member_stack_needs_no_asset_no_lambda_and_no_bootstrap(
    synthesized: tuple[Path, set[str]], body: dict[str, Any]
) -> None:
    # A StackSet deploys the template alone, into accounts nobody bootstrapped.
    types = {r["Type"] for r in body["Resources"].values()}
    # (CDK moves statements past a role's inline-policy size limit into a managed policy
    # attached to it: a plain IAM resource too.)
    assert types <= {"AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"}, types
    assert "BootstrapVersion" not in body.get("Parameters", {})
    assert "CheckBootstrapVersion" not in body.get("Rules", {})
    manifest = json.loads((synthesized[0] / "manifest.json").read_text())
    kinds = {a["type"] for a in manifest["artifacts"].values()}
    assert "cdk:asset-manifest" not in kinds
    assert not list(synthesized[0].glob("asset.*"))


# -- trust: each member role, its one hub role, from inside the Organization, nobody else -------

HUB_LAUNCH = f"arn:aws:iam::{HUB}:role/{OrgRoles.HUB_LAUNCH}"
#: The hub roles each member role trusts: the scan consumer reads (scans, probes and
#: region reads) and the on-launch Lambda reads one launched resource; the act consumer
#: acts. No reader enters the act role, and the act consumer does not enter the read role.
TRUSTED = {OrgRoles.MEMBER_READ: (HUB_SCAN, HUB_LAUNCH), OrgRoles.MEMBER_ACT: (HUB_ACT,)}


@pytest.mark.parametrize(("name", "trusted"), sorted(TRUSTED.items()))
def test_each_member_role_trusts_exactly_its_hub_roles_and_the_org(
    body: dict[str, Any], world: World, name: str, trusted: tuple[str, ...]
) -> None:
    """Defect: both member roles trusted both hub roles, so only the hub scan role's own
    policy kept the scan consumer (which parses untrusted tags from every account) out of
    the act role.

    GIVEN the synthesized member stack
    WHEN each role's trust policy is read (found by its name, not its logical id)
    THEN it holds one statement: the hub account, narrowed to exactly its hub roles' ARNs
    and to the Organization
    """
    from aws_cdk.assertions import Capture, Match, Template

    arns = Capture()
    Template.from_json(body).has_resource_properties(
        "AWS::IAM::Role",
        {
            "RoleName": name,
            "AssumeRolePolicyDocument": {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "sts:AssumeRole",
                        "Principal": {"AWS": Match.any_value()},
                        "Condition": Match.exact(
                            {
                                "ArnEquals": {"aws:PrincipalArn": arns},
                                "StringEquals": {"aws:PrincipalOrgID": ORG},
                            }
                        ),
                    }
                ]
            },
        },
    )
    assert sorted(world.resolve(as_list(arns.as_array()))) == sorted(trusted)
    trust = world.resolve(world.props(_role(world, name))["AssumeRolePolicyDocument"])
    assert as_list(trust["Statement"])[0]["Principal"] == {"AWS": f"arn:aws:iam::{HUB}:root"}


@pytest.mark.parametrize(("name", "trusted"), sorted(TRUSTED.items()))
def test_only_its_own_hub_role_may_assume_each_member_role(
    world: World, name: str, trusted: tuple[str, ...]
) -> None:
    # GIVEN each member role WHEN the hub's roles ask to assume it, from inside the
    # Organization THEN IAM (the trust policy evaluated) admits its own hub roles only:
    # the scan and launch roles are refused the act role, the act role the read role
    role = _role(world, name)
    for own in trusted:
        assert _may_assume(world, role, own)
    for other in sorted({HUB_SCAN, HUB_ACT, HUB_LAUNCH} - set(trusted)):
        assert not _may_assume(world, role, other)


@pytest.mark.parametrize("name", [OrgRoles.MEMBER_READ, OrgRoles.MEMBER_ACT])
@pytest.mark.parametrize(
    ("caller", "org"),
    [
        (f"arn:aws:iam::{HUB}:role/some-other-role", ORG),  # another role of the hub account
        (f"arn:aws:iam::{HUB}:role/costguard-hub-fanout", ORG),  # the fan-out assumes nothing
        (f"arn:aws:iam::{HUB}:user/admin", ORG),  # a user of the hub account
        (f"arn:aws:iam::333333333333:role/{OrgRoles.HUB_SCAN}", ORG),  # same name, other account
        (f"arn:aws:iam::333333333333:role/{OrgRoles.HUB_ACT}", ORG),
        (HUB_SCAN, "o-zzzzzzzzzz"),  # the hub's role, but the hub left the Organization
        (HUB_ACT, "o-zzzzzzzzzz"),
        (HUB_SCAN, None),  # no organization at all
        (HUB_ACT, None),
        (f"arn:aws:iam::333333333333:role/{OrgRoles.HUB_LAUNCH}", ORG),
        (HUB_LAUNCH, "o-zzzzzzzzzz"),
        (HUB_LAUNCH, None),
    ],
)
def test_nobody_else_may_assume_member_role(
    world: World, name: str, caller: str, org: str | None
) -> None:
    assert not _may_assume(world, _role(world, name), caller, org)


# -- permissions: the single-account declarations, read role read-only --------------------------


def test_read_role_can_change_nothing(world: World) -> None:
    statements = world.role_statements(_role(world, OrgRoles.MEMBER_READ))
    actions = {a for s in statements for a in as_list(s["Action"])}
    # The scan's reads, and what the hub's on-launch Lambda reads of one launched resource.
    assert actions == all_actions(member_read_permissions()) | all_actions(LAUNCH_READS)
    assert "ec2:DescribeRegions" in actions  # the hub's region discovery
    assert [a for a in actions if mutating(a)] == []


def test_actuator_role_holds_the_guards_declarations_and_every_mutation_is_tag_conditioned(
    world: World,
) -> None:
    statements = world.role_statements(_role(world, OrgRoles.MEMBER_ACT))
    actions = {a for s in statements for a in as_list(s["Action"])}
    assert actions == all_actions(actuator_permissions())
    for s in statements:
        if any(mutating(a) for a in as_list(s["Action"])):
            conditions = s.get("Condition") or {}
            assert tag_conditioned(conditions) or account_scoped_s3(
                as_list(s["Action"]), conditions
            ), s


def test_actuator_role_may_stop_a_project_instance_and_not_an_untagged_or_exempt_one(
    world: World,
) -> None:
    statements = world.role_statements(_role(world, OrgRoles.MEMBER_ACT))
    instance = f"arn:aws:ec2:us-east-1:{MEMBER}:instance/i-0123456789abcdef0"
    tagged = {"aws:ResourceTag/costguard:project": "llm"}
    assert evaluate(statements, "ec2:StopInstances", instance, tagged).allowed
    assert not evaluate(statements, "ec2:StopInstances", instance, {}).allowed
    exempt = {**tagged, "aws:ResourceTag/costguard:exempt": "true"}
    assert not evaluate(statements, "ec2:StopInstances", instance, exempt).allowed
    assert not evaluate(statements, "ec2:TerminateInstances", instance, tagged).allowed


# -- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("context", "named"),
    [
        ({"orgId": ORG}, "`hubAccount` is required"),
        ({"hubAccount": "12345", "orgId": ORG}, "hubAccount"),
        ({"hubAccount": HUB}, "`orgId` is required"),
        ({"hubAccount": HUB, "orgId": "abc"}, "orgId"),
        ({"hubAccount": HUB, "orgId": ORG, "sagemakerStudio": "maybe"}, "sagemakerStudio"),
    ],
)
def test_refuses_member_context_without_a_valid_hub_and_org(
    context: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        build_member_app(context, outdir=tempfile.mkdtemp(prefix="costguard-member-"))


def test_read_role_lets_the_hub_list_the_member_accounts_regions(world: World) -> None:
    # The hub's `regions` work item runs DescribeRegions in the member account (hub: no).
    statements = world.role_statements(_role(world, OrgRoles.MEMBER_READ))
    assert evaluate(statements, "ec2:DescribeRegions", "*").allowed
    act = world.role_statements(_role(world, OrgRoles.MEMBER_ACT))
    assert not evaluate(act, "ec2:DescribeRegions", "*").allowed


def test_read_role_covers_every_call_of_the_hubs_probe_and_regions_items(world: World) -> None:
    from costguard.iam import ORG_MEMBER_EXTRA, PROBE_ACTIONS, PROBE_STUDIO_ACTIONS

    statements = world.role_statements(_role(world, OrgRoles.MEMBER_READ))
    for action in (*PROBE_ACTIONS, *PROBE_STUDIO_ACTIONS, *all_actions(ORG_MEMBER_EXTRA)):
        assert evaluate(statements, action, "*").allowed, action  # none is resource-level


def test_member_app_run_directly_takes_context_as_the_cdk_cli_and_the_main_app_do(
    tmp_path: Path,
) -> None:
    """Defect: ``python infra/member_app.py -c hubAccount=... -c orgId=...`` ignored its
    ``-c`` pairs (``hub_account: Field required``), where ``infra/app.py`` honours them.

    GIVEN the member app's entry point run directly (no CDK CLI: no CDK_OUTDIR), with the
    hub and Organization as -c pairs and an output directory
    WHEN it runs
    THEN it synthesizes the member stack for that hub there (exit 0); without them it
    names the missing key on one line (exit 2)
    """
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDK_")}
    app = str(root / "infra" / "member_app.py")
    done = subprocess.run(
        [
            *(sys.executable, app, "-c", f"hubAccount={HUB}"),
            *("--context", f"orgId={ORG}", "-o", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    body = json.loads((tmp_path / "CostGuardMember.template.json").read_text())
    world = World(body, account=MEMBER)
    assert _may_assume(world, _role(world, OrgRoles.MEMBER_ACT), HUB_ACT)
    refused = subprocess.run(
        [sys.executable, app, "-c", f"orgId={ORG}", "-o", str(tmp_path / "no")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1] == (
        "costguard: invalid member-stack context: `hubAccount` is required (-c key=value)"
    )


@pytest.mark.infra
def test_refuses_a_member_role_name_iam_would_refuse() -> None:
    # GIVEN a member role name with a space and a slash WHEN the member app is built
    # THEN a clear configuration error names the key (no half-built template)
    from costguard_infra.config import ConfigError
    from costguard_infra.member import build_member_app

    with pytest.raises(ConfigError, match="orgMemberRole"):
        build_member_app(
            {"hubAccount": "111111111111", "orgId": "o-abc1234567", "orgMemberRole": "bad role/x"}
        )


@pytest.mark.infra
@pytest.mark.parametrize("name", [OrgRoles.MEMBER_ACT, "CostGuard-Member-ACT"])
def test_refuses_the_act_roles_name_for_the_read_role(name: str) -> None:
    # GIVEN the read role named like the act role (IAM role names are unique whatever their
    # case) WHEN the member app is built THEN a clear error, not two colliding roles
    from costguard_infra.config import ConfigError
    from costguard_infra.member import build_member_app

    with pytest.raises(ConfigError, match=f"orgMemberRole must not be {OrgRoles.MEMBER_ACT}"):
        build_member_app(
            {"hubAccount": "111111111111", "orgId": "o-abc1234567", "orgMemberRole": name}
        )


# -- the demo's embedded STS judges this trust policy as the IAM model does ----------------------


@pytest.mark.parametrize("name", [OrgRoles.MEMBER_READ, OrgRoles.MEMBER_ACT])
@pytest.mark.parametrize(
    ("caller", "org"),
    [
        (HUB_SCAN, ORG),
        (HUB_ACT, ORG),
        (f"arn:aws:iam::{HUB}:role/some-other-role", ORG),
        (f"arn:aws:iam::333333333333:role/{OrgRoles.HUB_SCAN}", ORG),
        (HUB_SCAN, "o-zzzzzzzzzz"),
        (HUB_SCAN, None),
    ],
)
def test_the_org_demo_writes_this_trust_policy_and_judges_it_as_iam_does(
    world: World, name: str, caller: str, org: str | None
) -> None:
    from costguard_demo.org_world import member_trust_policy, trust_admits

    # GIVEN the trust policy `costguard demo --org` puts on each member role
    role = _role(world, name)
    synthesized = world.resolve(world.props(role)["AssumeRolePolicyDocument"])
    trusts = OrgRoles.READ_TRUSTS if name == OrgRoles.MEMBER_READ else OrgRoles.ACT_TRUSTS
    demo = member_trust_policy(HUB, ORG, trusts)

    def canonical(policy: dict[str, Any]) -> list[Any]:
        out = []
        for st in as_list(policy["Statement"]):
            arns = sorted(as_list(st["Condition"]["ArnEquals"]["aws:PrincipalArn"]))
            out.append((st["Effect"], st["Action"], st["Principal"], arns, st["Condition"]))
            st["Condition"]["ArnEquals"]["aws:PrincipalArn"] = arns
        return out

    # THEN it is the member stack's, and its STS stand-in admits exactly whom IAM admits
    assert canonical(demo) == canonical(synthesized)
    account = caller.split(":")[4]
    session = caller.replace(":iam:", ":sts:").replace(":role/", ":assumed-role/") + "/s"
    orgs = {account: org} if org else {}
    assert trust_admits(demo, session, account, orgs) is _may_assume(world, role, caller, org)
