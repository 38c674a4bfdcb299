"""An Organization guard run with only the permissions the two stacks grant, IAM enforced.

The hub's template (``orgAccounts``) and the member stack's template are "deployed" onto
moto's HTTP server: the hub's ledger table, key and topic, the act consumer's role
(``costguard-hub-act``) in the hub account, and the member act role
(``costguard-member-act``, its trust and policy as the member stack synthesizes them) in a
member account. The act consumer's handler then runs one guard in the member account, and
one in an account without the role, with the hub role's credentials while moto enforces IAM
and judges AssumeRole by the member trust policy.

moto checks actions only, so every call is also checked by ``iam_model`` against the
synthesized policy of the role that signed it: the hub's calls (its ledger, its topic,
AssumeRole into the member act role with aws:ResourceOrgID) against the act consumer's role,
the member account's calls (the guard's reads and tag-conditioned actions) against the
member act role. Every grant of the act consumer's role is used, save what the Lambda
service itself does with it.
"""

from __future__ import annotations

import fnmatch
import json
import tempfile
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.domain.org_roles import OrgRoles
from costguard.domain.tags import Tags
from costguard.env import Env
from tests.infra.iam_model import ACCOUNT, REGION, World, as_list, role_may
from tests.infra.synth import ORG_ID
from tests.support.alert_topic import encrypted_topic_with_subscriber
from tests.support.clock import MIDDAY
from tests.support.iam_enforced import (
    INSTANCE_TAGS,
    Call,
    Need,
    Recorder,
    function_environment,
    moto_dialect,
    needs,
    platform_needs,
)

pytestmark = [pytest.mark.e2e, pytest.mark.infra]

#: moto's own account: the hub (its session assumes nothing).
HUB = ACCOUNT
MEMBER = "222222222222"
#: In the Organization, but without the member stack: the act role is missing there.
NO_ROLE = "333333333333"
ACT_HANDLER = "costguard.handlers.org_act.handler"
#: What the Lambda service does with the act consumer's role for its event source.
EVENT_SOURCE_ACTIONS = (
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueUrl",
)


@dataclass
class LambdaContext:
    function_name: str
    invoked_function_arn: str
    memory_limit_in_mb: int = 512
    aws_request_id: str = "req-act"

    def get_remaining_time_in_millis(self) -> int:
        return 600_000


@dataclass
class Hub:
    world: World
    session: Any  # the hub account's admin, for seeding and reading back
    member: Any  # the member account's admin
    member_world: World
    function: str  # the act consumer's logical id
    credentials: dict[str, str]  # the act consumer role's, as Lambda hands them
    subscriber: str  # an SQS queue subscribed to the alert topic


@pytest.fixture(scope="module")
def hub_body() -> dict[str, Any]:
    from tests.infra.synth import synthesize_org

    return synthesize_org().body


@pytest.fixture(scope="module")
def member_body() -> dict[str, Any]:
    from costguard_infra.member import build_member_app

    outdir = tempfile.mkdtemp(prefix="costguard-member-e2e-")
    app, _stack = build_member_app({"hubAccount": HUB, "orgId": ORG_ID}, outdir=outdir)
    app.synth()  # cdk-nag on: an unacknowledged finding raises here
    body: dict[str, Any] = json.loads((Path(outdir) / "CostGuardMember.template.json").read_text())
    return body


def _session(creds: dict[str, Any]) -> Any:
    import boto3

    return boto3.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=REGION,
    )


def _function(world: World, handler: str) -> str:
    (logical,) = [
        f
        for f, fn in world.resources("AWS::Lambda::Function").items()
        if fn["Properties"]["Handler"] == handler
    ]
    return logical


def _deploy_member_role(
    admin: Any, body: dict[str, Any], name: str = OrgRoles.MEMBER_ACT, world: World | None = None
) -> World:
    """A member stack role (the act role by default) in the member account: its name, trust
    and policy as synthesized."""
    world = world or World(body, account=MEMBER)
    (role,) = [r for r in world.resources("AWS::IAM::Role") if world.props(r)["RoleName"] == name]
    iam = admin.client("iam")
    iam.create_role(
        RoleName=name,
        AssumeRolePolicyDocument=json.dumps(
            world.resolve(world.props(role)["AssumeRolePolicyDocument"])
        ),
    )
    iam.put_role_policy(
        RoleName=name,
        PolicyName="synthesized",
        PolicyDocument=json.dumps(moto_dialect(world.policy_document(role))),
    )
    arn = f"arn:aws:iam::{MEMBER}:role/{name}"
    world.physical[role] = {**world.physical[role], "Ref": name, "Arn": arn}
    return world


def deploy(hub_body: dict[str, Any], member_body: dict[str, Any]) -> Hub:
    import boto3

    session = boto3.Session()
    probe = World(hub_body)
    (key,) = probe.resources("AWS::KMS::Key")
    (table,) = probe.resources("AWS::DynamoDB::Table")
    (topic,) = probe.resources("AWS::SNS::Topic")
    physical: dict[str, dict[str, str]] = {}
    kms = session.client("kms", region_name=REGION)
    meta = kms.create_key(Description=probe.props(key)["Description"])["KeyMetadata"]
    physical[key] = {"Ref": meta["KeyId"], "KeyId": meta["KeyId"], "Arn": meta["Arn"]}
    partial = World(hub_body, physical=dict(physical))
    props = partial.resolve(partial.props(table))
    ddb = session.client("dynamodb", region_name=REGION)
    created = ddb.create_table(
        TableName="costguard-ledger",
        KeySchema=props["KeySchema"],
        AttributeDefinitions=props["AttributeDefinitions"],
        BillingMode=props["BillingMode"],
        SSESpecification={
            "Enabled": True,
            "SSEType": "KMS",
            "KMSMasterKeyId": props["SSESpecification"]["KMSMasterKeyId"],
        },
    )["TableDescription"]
    physical[table] = {"Ref": "costguard-ledger", "Arn": created["TableArn"]}
    topic_arn, subscriber = encrypted_topic_with_subscriber(session, REGION, meta["Arn"])
    physical[topic] = {"Ref": topic_arn, "TopicArn": topic_arn, "TopicName": "costguard-alerts"}
    # The act consumer's role, under the name the member trust policy names
    function = _function(probe, ACT_HANDLER)
    role = probe.function_role(function)
    name = probe.props(role)["RoleName"]
    assert name == OrgRoles.HUB_ACT
    iam = session.client("iam")
    made = iam.create_role(
        RoleName=name,
        AssumeRolePolicyDocument=json.dumps(
            partial.resolve(probe.props(role)["AssumeRolePolicyDocument"])
        ),
    )["Role"]
    physical[role] = {"Ref": name, "Arn": made["Arn"], "RoleId": made["RoleId"]}
    world = World(hub_body, physical=physical)
    iam.put_role_policy(
        RoleName=name,
        PolicyName="synthesized",
        PolicyDocument=json.dumps(moto_dialect(world.policy_document(role))),
    )
    sts = session.client("sts", region_name=REGION)
    assumed = sts.assume_role(RoleArn=made["Arn"], RoleSessionName="lambda")["Credentials"]
    credentials = {
        "AWS_ACCESS_KEY_ID": assumed["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": assumed["SecretAccessKey"],
        "AWS_SESSION_TOKEN": assumed["SessionToken"],
    }
    # The member account: its administrator (any role: moto lets the setup assume it)
    member = _session(
        sts.assume_role(RoleArn=f"arn:aws:iam::{MEMBER}:role/setup", RoleSessionName="setup")[
            "Credentials"
        ]
    )
    member_world = _deploy_member_role(member, member_body)
    return Hub(world, session, member, member_world, function, credentials, subscriber)


@pytest.fixture
def hub(hub_body: dict[str, Any], member_body: dict[str, Any], moto_server: str) -> Hub:
    """The stacks deployed onto the worker's moto server, reset to an empty AWS."""
    return deploy(hub_body, member_body)


def _event(guard: str, account: str, at: datetime) -> dict[str, Any]:
    from costguard.adapters.work_queue import GuardItem

    item = GuardItem(time=at, guard=guard, account=account, regions=(REGION,))
    body = item.model_dump_json()
    return {
        "Records": [
            {
                "messageId": f"m-{account}-{at:%H%M}",
                "receiptHandle": "r",
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "0",
                    "SenderId": "x",
                    "ApproximateFirstReceiveTimestamp": "0",
                    "MessageGroupId": account,
                    "MessageDeduplicationId": item.dedupe_id(),
                    "SequenceNumber": "1",
                },
                "messageAttributes": {},
                "md5OfBody": "0",
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:{HUB}:act.fifo",
                "awsRegion": REGION,
            }
        ]
    }


def run_act(
    hub: Hub, event: dict[str, Any], at: datetime, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The act consumer's handler as Lambda runs it: its environment and role, IAM enforced,
    and STS judging each AssumeRole by the role's trust policy."""
    from moto.core.authorization import enable_iam_authentication
    from moto.iam.access_control import IAMRequest

    from costguard import events
    from costguard.handlers import org_act
    from costguard_demo.org import checked_assume_role

    env = {
        **function_environment(hub.world, hub.function),
        Env.DRY_RUN: "false",  # enforce, for this run
        Env.REGIONS: REGION,
    }
    for key, value in {**env, **hub.credentials}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(events, "CLOCK", lambda: at)
    monkeypatch.setattr(org_act, "_MEMBERS", [])  # a cold Lambda: nothing kept from before
    # moto recomputes some signatures wrongly; authorization is under test, not signing
    monkeypatch.setattr(IAMRequest, "check_signature", lambda self: None)
    context = LambdaContext(hub.function, hub.world.arn(hub.function))
    # (every account is in the Organization: the hub role's own policy is judged too,
    # and it may assume member roles only there, aws:ResourceOrgID)
    in_org = dict.fromkeys((HUB, MEMBER, NO_ROLE), ORG_ID)
    with checked_assume_role(in_org), enable_iam_authentication():
        result: dict[str, Any] = org_act.handler(event, context)
    return result


def _signers() -> dict[str, tuple[str, str]]:
    """Access key -> (account, role name) of every session moto's STS handed out."""
    from moto.sts.models import sts_backends

    out = {}
    for account in (HUB, MEMBER, NO_ROLE):
        for assumed in sts_backends[account]["aws"].assumed_roles:
            out[assumed.access_key_id] = (account, assumed.role_arn.rsplit("/", 1)[1])
    return out


def _member_needs(call: Call, world: World) -> list[Need]:
    """A member account's call: the same needs, in the member account's ARNs."""
    return [
        replace(n, resource=n.resource.replace(f":{ACCOUNT}:", f":{MEMBER}:"))
        for n in needs(call, world)
    ]


def check_calls(hub: Hub, calls: list[Call], *, refused_ok: set[str]) -> tuple[set[str], set[str]]:
    """Every call allowed by the synthesized policy of the role that made it: the hub's by
    the act consumer's role, the member's by the member act role. Returns the actions each
    used (hub, member)."""
    signers = _signers()
    hub_role = hub.world.function_role(hub.function)
    (member_role,) = [
        r
        for r in hub.member_world.resources("AWS::IAM::Role")
        if hub.member_world.props(r)["RoleName"] == OrgRoles.MEMBER_ACT
    ]
    hub_key = hub.credentials["AWS_ACCESS_KEY_ID"]
    denied, refused = [], []
    used: set[str] = set()
    member_used: set[str] = set()
    strangers = set()
    for call in calls:
        signer = signers.get(call.access_key)
        expected = call.operation == "AssumeRole" and call.params["RoleArn"] in refused_ok
        if (call.status in (401, 403) or "Denied" in call.error) and not expected:
            refused.append(f"{call.service}.{call.operation}: {call.status} {call.error}")
        if call.access_key == hub_key:
            if call.operation == "AssumeRole":
                found = [
                    Need(
                        "sts:AssumeRole",
                        call.params["RoleArn"],
                        (("aws:ResourceOrgID", ORG_ID),),
                    )
                ]
            else:
                found = needs(call, hub.world)
            for need in found:
                used.add(need.action)
                if not role_may(
                    hub.world, hub_role, need.action, need.resource, dict(need.context)
                ):
                    denied.append(
                        f"hub {call.service}.{call.operation}: {need.action} {need.resource}"
                    )
        elif signer == (MEMBER, OrgRoles.MEMBER_ACT):
            for need in _member_needs(call, hub.member_world):
                member_used.add(need.action)
                if not role_may(
                    hub.member_world, member_role, need.action, need.resource, dict(need.context)
                ):
                    denied.append(
                        f"member {call.service}.{call.operation}: {need.action} {need.resource}"
                    )
        else:
            strangers.add((call.service, call.operation, signer))
    assert not strangers, f"calls made with neither role: {strangers}"
    assert not refused, "calls moto refused:\n" + "\n".join(sorted(set(refused)))
    assert not denied, "calls the synthesized policies do not allow:\n" + "\n".join(
        sorted(set(denied))
    )
    return used, member_used


def unused_grants(hub: Hub, used: set[str]) -> set[str]:
    world = hub.world
    needed = used | platform_needs(world, hub.function) | set(EVENT_SOURCE_ACTIONS)
    granted = {
        a
        for s in world.role_statements(world.function_role(hub.function))
        if s["Effect"] == "Allow"
        for a in as_list(s["Action"])
    }
    return {g for g in granted if not any(fnmatch.fnmatchcase(a, g) for a in needed)}


def _launch(member: Any, toy: str) -> str:
    from tests.support.toy import TOY

    ec2 = member.client("ec2", region_name=REGION)
    tags = [{"Key": Tags.PROJECT, "Value": "vision"}, {"Key": TOY, "Value": toy}]
    return str(
        ec2.run_instances(
            ImageId="ami-12345678",
            InstanceType="g5.xlarge",
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )["Instances"][0]["InstanceId"]
    )


def test_the_act_consumer_acts_in_a_member_account_with_only_the_two_stacks_grants(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the hub and the member act role deployed from their templates, IAM enforced, two
    # idle-tagged instances in the member account, and a guard (the test-only toy guard)
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.guards import SPECS
    from costguard_demo.plumbing import drain
    from tests.support.toy import TOY, toy_spec

    monkeypatch.setitem(SPECS, "toy", toy_spec())
    # (the hub discovers its accounts: both are in the listing the scan ticks stored)
    from costguard.adapters.directory import DynamoDbDirectory
    from costguard.domain.directory import AccountListing

    DynamoDbDirectory(
        hub.session.client("dynamodb", region_name=REGION), "costguard-ledger", HUB
    ).save_listing(AccountListing((MEMBER, NO_ROLE), MIDDAY - timedelta(days=1), "discovered"))
    idle, busy = _launch(hub.member, "idle"), _launch(hub.member, "idle")
    recorder = Recorder()
    recorder.install(monkeypatch)
    # WHEN the act consumer runs the guard in the member account, warns both, one is used
    # again, and the other is stopped after the grace period
    start = MIDDAY - timedelta(hours=2)
    first = run_act(hub, _event("toy", MEMBER, start), start, monkeypatch)
    assert first == {"batchItemFailures": []}
    ec2 = hub.member.client("ec2", region_name=REGION)
    ec2.create_tags(Resources=[busy], Tags=[{"Key": TOY, "Value": "busy"}])
    second = run_act(hub, _event("toy", MEMBER, MIDDAY), MIDDAY, monkeypatch)
    assert second == {"batchItemFailures": []}
    states = {
        i["InstanceId"]: i["State"]["Name"]
        for r in ec2.describe_instances(InstanceIds=[idle, busy])["Reservations"]
        for i in r["Instances"]
    }
    assert states[idle] in {"stopping", "stopped"} and states[busy] == "running"
    # AND in an account without the act role, the run is handed back (for the queue to
    # retry and dead-letter it), leaving a finding and an alert in the hub that name the
    # account
    refused = run_act(hub, _event("toy", NO_ROLE, MIDDAY), MIDDAY, monkeypatch)
    assert len(refused["batchItemFailures"]) == 1
    ledger = DynamoDbLedger(hub.session.client("dynamodb", region_name=REGION), "costguard-ledger")
    findings = ledger.findings(HUB, MIDDAY.date().isoformat())
    assert [f.resource for f in findings] == [f"account/{NO_ROLE}"]
    alerts = drain(hub.session, hub.subscriber, REGION)
    (unreachable,) = [a for a in alerts if "org-act-unreachable" in a["alert_id"]]
    assert unreachable["facts"]["account"] == NO_ROLE and NO_ROLE in unreachable["title"]
    # (the member run's warnings went out through the hub's topic too)
    assert any(a["alert_id"].startswith("action-warning/") for a in alerts)
    # THEN every call was allowed by the synthesized policy of the role that made it
    # (the member's tag-conditioned actions evaluated on the instances' tags)
    for reservation in ec2.describe_instances(InstanceIds=[idle, busy])["Reservations"]:
        for i in reservation["Instances"]:
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            tags.pop(Tags.ACTION_AFTER, None)
            monkeypatch.setitem(INSTANCE_TAGS, i["InstanceId"], tags)
    no_role = f"arn:aws:iam::{NO_ROLE}:role/{OrgRoles.MEMBER_ACT}"
    used, in_member = check_calls(hub, recorder.calls, refused_ok={no_role})
    assert {"sts:AssumeRole", "dynamodb:Query", "dynamodb:BatchWriteItem", "sns:Publish"} <= used
    assert {"ec2:DescribeInstances", "ec2:StopInstances", "ec2:CreateTags"} <= in_member
    # (the guard read and acted in the member account only, never with the hub's role)
    assert not {a for a in used if a.startswith("ec2:")}
    # AND every grant of the act consumer's role was needed (by the code or by Lambda)
    assert not unused_grants(hub, used), sorted(unused_grants(hub, used))


# -- trust, narrow on the member's side too --------------------------------------------------

SCAN_HANDLER = "costguard.handlers.org.consumer_handler"


def _hub_role_session(hub: Hub, handler: str, *, widened: bool) -> Any:
    """The hub role of the Lambda running ``handler`` (its synthesized name, trust and
    policy), as Lambda hands it credentials; ``widened``: its own policy also allows
    ``sts:AssumeRole`` on any role, a mistake the member trust must still catch."""
    world = hub.world
    role = world.function_role(_function(world, handler))
    name = world.props(role)["RoleName"]
    iam = hub.session.client("iam")
    if name != OrgRoles.HUB_ACT:  # deploy() made the act consumer's role already
        iam.create_role(
            RoleName=name,
            AssumeRolePolicyDocument=json.dumps(
                world.resolve(world.props(role)["AssumeRolePolicyDocument"])
            ),
        )
        iam.put_role_policy(
            RoleName=name,
            PolicyName="synthesized",
            PolicyDocument=json.dumps(moto_dialect(world.policy_document(role))),
        )
    if widened:
        iam.put_role_policy(
            RoleName=name,
            PolicyName="widened",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}],
                }
            ),
        )
    sts = hub.session.client("sts", region_name=REGION)
    arn = f"arn:aws:iam::{HUB}:role/{name}"
    return _session(sts.assume_role(RoleArn=arn, RoleSessionName="lambda")["Credentials"])


def test_the_hub_scan_role_cannot_assume_the_member_act_role_whatever_its_own_policy(
    hub: Hub, member_body: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: the member act role trusted the hub's scan role too, so only the scan
    role's own policy kept the scan consumer (which parses untrusted tags from every
    account) out of it.

    GIVEN both member roles deployed from the synthesized member template, and the hub's
    scan and act consumer roles from the hub template, each with its own policy widened
    to allow assuming any role
    WHEN each assumes each member role, with moto enforcing IAM and STS judging the
    member role's synthesized trust
    THEN the scan role enters the read role only, and the act role the act role only
    """
    from botocore.exceptions import ClientError
    from moto.core.authorization import enable_iam_authentication
    from moto.iam.access_control import IAMRequest

    from costguard_demo.org_world import checked_assume_role

    _deploy_member_role(hub.member, member_body, OrgRoles.MEMBER_READ, hub.member_world)
    callers = {
        OrgRoles.HUB_SCAN: _hub_role_session(hub, SCAN_HANDLER, widened=True),
        OrgRoles.HUB_ACT: _hub_role_session(hub, ACT_HANDLER, widened=True),
    }
    monkeypatch.setattr(IAMRequest, "check_signature", lambda self: None)
    in_org = dict.fromkeys((HUB, MEMBER, NO_ROLE), ORG_ID)
    got = {}
    with checked_assume_role(in_org) as refused, enable_iam_authentication():
        for caller, session in callers.items():
            sts = session.client("sts", region_name=REGION)
            for role in (OrgRoles.MEMBER_READ, OrgRoles.MEMBER_ACT):
                try:
                    sts.assume_role(
                        RoleArn=f"arn:aws:iam::{MEMBER}:role/{role}", RoleSessionName="probe"
                    )
                    got[(caller, role)] = "ok"
                except ClientError as exc:
                    got[(caller, role)] = str(exc.response["Error"]["Code"])
    assert got == {
        (OrgRoles.HUB_SCAN, OrgRoles.MEMBER_READ): "ok",
        (OrgRoles.HUB_SCAN, OrgRoles.MEMBER_ACT): "AccessDenied",
        (OrgRoles.HUB_ACT, OrgRoles.MEMBER_READ): "AccessDenied",
        (OrgRoles.HUB_ACT, OrgRoles.MEMBER_ACT): "ok",
    }
    # (refused by the member trust: each hub role's own policy allowed it)
    assert sorted(refused) == [
        f"arn:aws:iam::{MEMBER}:role/{OrgRoles.MEMBER_ACT}",
        f"arn:aws:iam::{MEMBER}:role/{OrgRoles.MEMBER_READ}",
    ]
