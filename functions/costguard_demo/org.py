"""``costguard demo --org``: the Organization hub on the embedded AWS, 3 accounts x 2 regions.

What runs is the deployed hub's code, over moto's HTTP server (a real socket; moto keeps one
backend per account, reached through assumed-role credentials):

1. The management account (which also runs the hub, and opts itself out with the tag
   ``costguard:opt-out=true``) creates an Organization and three member accounts. Two get
   the member stack's roles, ``costguard-member-read`` and ``costguard-member-act``
   (each trusting only its hub consumer role, in the Organization); the third, ``sandbox``,
   does not: the StackSet never reached it.
2. Each member account gets a small GPU fleet through ``OrganizationAccountAccessRole``;
   project ``llm`` runs in two accounts, so its roll-up is visible.
3. The hub's resources are created as the stack builds them: the ledger table, the alert
   topic (with an SQS subscriber, and the Slack notifier posting to a Slack stand-in), a
   FIFO work queue whose dead-letter queue takes a message after ``orgMaxReceives``
   receives, and the two Lambda roles.
4. A few scheduled times (15 simulated minutes apart) each run the fan-out's code
   (:func:`costguard.wiring.org.build_fanout` ``.tick``), then the queue is delivered to
   the consumer's code (:func:`costguard.handlers.org.consume`) as Lambda's event source
   does: batches of up to ten records with their receipt handles; the records the consumer
   reports as failed are not deleted, come back after the visibility timeout, and after
   the last receive SQS (moto) moves them to the dead-letter queue.
5. Then the last time is run again, and its messages redelivered: nothing is added.
6. The guards act (:mod:`costguard_demo.org_guards`): the stale-volume and idle-notebook
   guards' schedules, at simulated times on the three days before the scans, through the
   guard fan-out, the FIFO act queue and the act consumer (role ``costguard-hub-act``,
   entering each account through the member stack's ``costguard-member-act``); the
   deployment's ``dryRun`` is off, as ``costguard demo``'s guards act.

moto's STS lets anyone assume any role, even one that does not exist. AWS refuses, and
the demo is about that refusal, so :func:`checked_assume_role` makes the embedded STS
check, as AWS does, that the role exists, that its trust policy admits the caller, and
that the caller's own policies allow it. Both sides are narrow: the read role trusts only
the hub's scan role and the act role only the hub's act role, and each hub role's own
policy names only its member role, so either alone keeps the scan role out of the act
role, and the other way.

Exit 0 when the story ran as designed (the sandbox account failing is part of it), 1 on
anything unexpected.
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from costguard.config_spec import BY_NAME
from costguard.domain.money import ZERO, cents, rate
from costguard.domain.org_roles import OrgRoles
from costguard.domain.tags import Tags
from costguard.env import Env
from costguard.services.fanout import OrgWork, WorkOutcome
from costguard_demo.run import ORG_TICKS
from costguard_demo.server import DEMO_ACCOUNT
from costguard_demo.story import STORY_END

if TYPE_CHECKING:
    from costguard.domain.directory import Directory, Work
    from costguard.domain.org import Slice
    from costguard.iam import Permission
    from costguard.services.fanout import TickSummary
    from costguard.services.org import OrgReport

#: The management account runs the hub (moto's default account).
HUB = DEMO_ACCOUNT
HOME = "us-east-1"
REGIONS = ("us-east-1", "us-west-2")
INTERVAL = timedelta(minutes=15)
DEFAULT_TICKS = 4
#: Regions, probes, scans: the story needs three times; a day of them is plenty.
MIN_TICKS, MAX_TICKS = ORG_TICKS.start, ORG_TICKS.stop - 1
TABLE = "costguard-hub-ledger"
WORK_QUEUE = "costguard-work.fifo"
DEAD_LETTERS = "costguard-work-dead-letters.fifo"
ACT_QUEUE = "costguard-act.fifo"
ACT_DEAD_LETTERS = "costguard-act-dead-letters.fifo"
#: The stack's default ``orgMaxReceives``: a work item is received this often, then parked.
MAX_RECEIVES: int = BY_NAME["org_max_receives"].default
#: The stack sets six times the consumer's timeout (an hour); the demo waits one second
#: for a failed item to come back, or it would take three hours to dead-letter one.
VISIBILITY_SECONDS = 1
#: How long the demo waits for the queue to drain before calling it a failure.
DRAIN_LIMIT_SECONDS = 30.0
#: The consumer runs shortly after the scheduled time.
CONSUMER_DELAY = timedelta(minutes=1)
FANOUT_ROLE = "costguard-hub-fanout"
#: What Organizations creates in every account it creates (trusting the management account).
ADMIN_ROLE = "OrganizationAccountAccessRole"
#: moto's random generator is seeded, so the account ids are the same run after run.
SEED = 20261120

#: The member accounts: (name, whether the member stack reached it).
MEMBERS = (("ml-research", True), ("ml-vision", True), ("sandbox", False))

#: The central project table (``COSTGUARD_PROJECTS_JSON``): llm's budget is set here;
#: vision's is tagged on its notebooks (``costguard:budget``) in the ml-vision account.
PROJECTS = {"llm": {"budget": 25000, "owners": ["alice@example.com"]}}
VISION_BUDGET_TAG = "50"


class OrgDemoError(RuntimeError):
    """The demo did not behave as designed (exit 1)."""


# -- the embedded STS, checking roles as AWS does ------------------------------------------


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _principal_arn(caller_arn: str) -> str:
    """``aws:PrincipalArn``: an assumed-role session is its role's ARN."""
    if ":assumed-role/" in caller_arn:
        head, _, rest = caller_arn.partition(":assumed-role/")
        partition_and_account = head.replace(":sts:", ":iam:")
        return f"{partition_and_account}:role/{rest.split('/')[0]}"
    return caller_arn


def trust_admits(
    document: str | Mapping[str, Any],
    caller_arn: str,
    caller_account: str,
    org_of: Mapping[str, str],
) -> bool:
    """Whether a role's trust policy lets ``caller_arn`` assume it.

    Enough of IAM for the demo's roles: an Allow statement for ``sts:AssumeRole`` whose AWS
    principal is the caller's account (id or ``:root``) or its principal ARN, and whose
    conditions on ``aws:PrincipalArn``, ``aws:PrincipalOrgID`` and ``aws:PrincipalAccount``
    (``StringEquals``/``StringLike``/``ArnEquals``/``ArnLike``) hold. Any other condition
    counts as not met: the stand-in refuses what it cannot judge.
    """
    policy = json.loads(document) if isinstance(document, str) else dict(document)
    principal_arn = _principal_arn(caller_arn)
    context = {
        "aws:principalarn": principal_arn,
        "aws:principalorgid": org_of.get(caller_account, ""),
        "aws:principalaccount": caller_account,
    }
    for st in _as_list(policy.get("Statement")):
        if st.get("Effect") != "Allow":
            continue
        if not {"sts:assumerole", "sts:*", "*"} & {a.lower() for a in _as_list(st.get("Action"))}:
            continue
        principal = st.get("Principal")
        named = _as_list(principal.get("AWS")) if isinstance(principal, dict) else [principal]
        partition = caller_arn.split(":")[1]
        if not {
            "*",
            caller_account,
            f"arn:{partition}:iam::{caller_account}:root",
            principal_arn,
        } & set(named):
            continue
        if all(
            _condition_holds(op, key, values, context)
            for op, block in (st.get("Condition") or {}).items()
            for key, values in block.items()
        ):
            return True
    return False


def _condition_holds(op: str, key: str, values: Any, context: Mapping[str, str]) -> bool:
    actual = context.get(key.lower())
    if actual is None or not actual:
        return False
    wanted = [str(v) for v in _as_list(values)]
    if op in ("StringEquals", "ArnEquals"):
        return actual in wanted
    if op in ("StringLike", "ArnLike"):
        return any(fnmatch.fnmatchcase(actual, w) for w in wanted)
    return False


def _matches(patterns: Any, value: str, *, case: bool = True) -> bool:
    if case:
        return any(fnmatch.fnmatchcase(value, str(p)) for p in _as_list(patterns))
    return any(fnmatch.fnmatchcase(value.lower(), str(p).lower()) for p in _as_list(patterns))


def identity_allows(
    documents: Sequence[str | Mapping[str, Any]],
    role_arn: str,
    context: Mapping[str, str],
) -> bool:
    """Whether the caller's own policies (``documents``) allow ``sts:AssumeRole`` on
    ``role_arn``: AWS wants this *and* the role's trust for a role in another account.

    An Allow whose action and resource match (wildcards as IAM reads them) and whose
    conditions hold (:func:`_condition_holds`: ``aws:ResourceOrgID``, ``aws:ResourceAccount``
    and the principal keys), and no Deny that matches. ``NotAction``/``NotResource`` and
    conditions it cannot judge count as not matching an Allow: the stand-in refuses what
    it cannot judge (and a Deny it cannot judge is not applied, as it could not refuse it).
    """
    allowed = False
    for document in documents:
        policy = json.loads(document) if isinstance(document, str) else dict(document)
        for st in _as_list(policy.get("Statement")):
            if not (
                _matches(st.get("Action"), "sts:AssumeRole", case=False)
                and _matches(st.get("Resource"), role_arn)
            ):
                continue
            holds = all(
                _condition_holds(op, key, values, context)
                for op, block in (st.get("Condition") or {}).items()
                for key, values in block.items()
            )
            if not holds:
                continue
            if st.get("Effect") == "Deny":
                return False
            if st.get("Effect") == "Allow":
                allowed = True
    return allowed


def _caller_policies(iam: Any, caller_arn: str) -> list[str] | None:
    """The identity policies of an assumed-role caller's role (inline and managed); None
    for any other caller (the demo's own administrator, who may do anything)."""
    if ":assumed-role/" not in caller_arn:
        return None
    name = caller_arn.split(":assumed-role/", 1)[1].split("/", maxsplit=1)[0]
    role = next((r for r in iam.get_roles() if r.name == name), None)
    if role is None:
        return []
    documents = [str(d) for d in role.policies.values()]
    for managed in role.managed_policies.values():
        version = next((v for v in managed.versions if v.is_default_version), None)
        if version is not None:
            documents.append(str(version.document))
    return documents


@contextmanager
def checked_assume_role(org_of: Mapping[str, str]) -> Iterator[list[str]]:
    """While open, the embedded STS refuses ``AssumeRole`` as AWS would: ``AccessDenied``
    when the role does not exist, when its trust policy does not admit the caller, or when
    the caller is a role whose own policies do not allow ``sts:AssumeRole`` on it (so the
    hub's scan role cannot enter a member's act role: the act role's trust does not name
    it, and its own policy does not name the act role). Yields the refusals (for the
    report)."""
    from moto.iam.models import iam_backends
    from moto.sts.exceptions import STSClientError
    from moto.sts.responses import TokenResponse

    refused: list[str] = []
    original = TokenResponse.assume_role

    def assume_role(self: Any) -> Any:
        role_arn = str(self._get_param("RoleArn") or "")
        _user, caller_arn, caller_account = self.backend.get_caller_identity(
            self.get_access_key(), self.region
        )
        parts = role_arn.split(":")
        account = parts[4] if len(parts) > 5 else ""
        role = None
        if account in iam_backends:
            for candidate in iam_backends[account][parts[1]].get_roles():
                if candidate.arn == role_arn:
                    role = candidate
        partition = caller_arn.split(":")[1] if caller_arn.count(":") >= 5 else "aws"
        own = _caller_policies(iam_backends[caller_account][partition], caller_arn)
        context = {
            "aws:resourceorgid": org_of.get(account, ""),
            "aws:resourceaccount": account,
            "aws:principalarn": _principal_arn(caller_arn),
            "aws:principalorgid": org_of.get(caller_account, ""),
            "aws:principalaccount": caller_account,
        }
        if (
            role is None
            or not trust_admits(
                role.assume_role_policy_document, caller_arn, caller_account, org_of
            )
            or (own is not None and not identity_allows(own, role_arn, context))
        ):
            refused.append(role_arn)
            raise STSClientError(
                "AccessDenied",
                f"User: {caller_arn} is not authorized to perform: sts:AssumeRole on "
                f"resource: {role_arn}",
            )
        return original(self)

    TokenResponse.assume_role = assume_role  # type: ignore[method-assign]
    try:
        with warnings.catch_warnings():
            # moto warns that STS's model has no AccessDenied shape; AWS answers it anyway.
            warnings.filterwarnings("ignore", message=r"Exception\(STSClientError\)")
            yield refused
    finally:
        TokenResponse.assume_role = original  # type: ignore[method-assign]


# -- the Organization and its accounts -----------------------------------------------------


@dataclass(frozen=True)
class Account:
    id: str
    name: str
    member_role: bool


@dataclass(frozen=True)
class Organization:
    id: str
    management: str
    members: tuple[Account, ...]

    def name_of(self, account: str) -> str:
        if account == self.management:
            return "management"
        return next((a.name for a in self.members if a.id == account), "?")


def _credentials_session(creds: Mapping[str, Any], region: str = HOME) -> Any:
    import boto3

    return boto3.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=region,
    )


def _assume(session: Any, role_arn: str, name: str) -> Any:
    creds = session.client("sts", region_name=HOME).assume_role(
        RoleArn=role_arn, RoleSessionName=name
    )["Credentials"]
    return _credentials_session(creds)


def lambda_session(account: str, role_name: str) -> Any:
    """The credentials Lambda hands a function of ``role_name`` (the service assumes the
    role; the function never calls AssumeRole for itself)."""
    from moto.sts.models import sts_backends

    role = sts_backends[account]["aws"].assume_role(
        region_name=HOME,
        role_session_name=f"{role_name}-lambda",
        role_arn=f"arn:aws:iam::{account}:role/{role_name}",
        policy="",
        duration=3600,
        external_id="",
    )
    return _credentials_session(
        {
            "AccessKeyId": role.access_key_id,
            "SecretAccessKey": role.secret_access_key,
            "SessionToken": role.session_token,
        }
    )


def create_organization(session: Any) -> Organization:
    org = session.client("organizations", region_name=HOME)
    made = org.create_organization(FeatureSet="ALL")["Organization"]
    management = str(made["MasterAccountId"])
    members = []
    for name, has_role in MEMBERS:
        status = org.create_account(AccountName=name, Email=f"{name}@example.com")
        # Organizations leaves OrganizationAccountAccessRole in it (moto does too).
        account = str(status["CreateAccountStatus"]["AccountId"])
        members.append(Account(account, name, has_role))
    # The management account runs the hub; its own GPUs (none) would be the single-account
    # stack's. Opting it out shows the tag at work: 3 accounts guarded, not 4.
    org.tag_resource(ResourceId=management, Tags=[{"Key": "costguard:opt-out", "Value": "true"}])
    return Organization(str(made["Id"]), management, tuple(members))


def member_trust_policy(hub: str, org_id: str, trusts: Sequence[str]) -> dict[str, Any]:
    """A member role's trust policy, as the member stack writes it
    (infra/costguard_infra/member.py): the hub account, narrowed to the hub's roles
    ``trusts`` (``OrgRoles.READ_TRUSTS`` or ``OrgRoles.ACT_TRUSTS``), from inside the
    Organization."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{hub}:root"},
                "Action": "sts:AssumeRole",
                "Condition": {
                    "ArnEquals": {
                        "aws:PrincipalArn": [f"arn:aws:iam::{hub}:role/{name}" for name in trusts]
                    },
                    "StringEquals": {"aws:PrincipalOrgID": org_id},
                },
            }
        ],
    }


def policy_document(permissions: Iterable[Permission], account: str) -> dict[str, Any]:
    """An identity policy from CostGuard's declarations, as the stacks write it
    (``costguard_infra.guard_function.policy_statements``): partition and account filled in."""
    statements = []
    for p in permissions:
        statement: dict[str, Any] = {
            "Effect": "Allow",
            "Action": list(p.actions),
            "Resource": [
                r.replace("{partition}", "aws").replace("{account}", account) for r in p.resources
            ],
        }
        if p.conditions:
            statement["Condition"] = {k: dict(v) for k, v in p.conditions.items()}
        statements.append(statement)
    return {"Version": "2012-10-17", "Statement": statements}


def _put_role(iam: Any, name: str, trust: Mapping[str, Any], description: str) -> None:
    iam.create_role(
        RoleName=name, AssumeRolePolicyDocument=json.dumps(trust), Description=description
    )


def deploy_member_role(admin: Any, hub: str, org_id: str) -> None:
    """The member stack (infra/costguard_infra/member.py): its read role, with the scan's
    read-only permissions, trusting the hub's scan role, and its act role, with the guards'
    tag-conditioned ones, trusting the hub's act role; both only from inside the
    Organization."""
    from costguard.guards import actuator_permissions
    from costguard.iam import member_read_permissions

    iam = admin.client("iam", region_name=HOME)
    account = admin.client("sts", region_name=HOME).get_caller_identity()["Account"]
    for name, description, trusts, permissions in (
        (
            OrgRoles.MEMBER_READ,
            "CostGuard member read role (member stack)",
            OrgRoles.READ_TRUSTS,
            member_read_permissions(sagemaker_studio=False),
        ),
        (
            OrgRoles.MEMBER_ACT,
            "CostGuard member act role (member stack)",
            OrgRoles.ACT_TRUSTS,
            actuator_permissions(),
        ),
    ):
        _put_role(iam, name, member_trust_policy(hub, org_id, trusts), description)
        iam.put_role_policy(
            RoleName=name,
            PolicyName="costguard",
            PolicyDocument=json.dumps(policy_document(permissions, account)),
        )


# -- the fleet ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Launch:
    account: str
    region: str
    instance_type: str
    project: str | None
    name: str
    age: timedelta
    stopped: bool = False
    budget: str | None = None


def fleet_of(org: Organization) -> list[Launch]:
    """A small ML fleet: llm in two accounts, vision notebooks, a stopped box, a p5 nobody
    can see (the sandbox has no member role: unknown to CostGuard, not $0)."""
    research, vision, sandbox = (a.id for a in org.members)
    day = timedelta(days=1)
    return [
        Launch(research, "us-east-1", "p4d.24xlarge", "llm", "llm-pretrain-0", 2 * day),
        Launch(research, "us-east-1", "g5.2xlarge", "llm", "llm-eval", 5 * day),
        # A CPU box: the probe judges types as the scan does, so us-west-2 stays empty.
        Launch(research, "us-west-2", "m5.large", "llm", "bastion", 9 * day),
        Launch(
            vision,
            "us-west-2",
            "g6.xlarge",
            "vision",
            "vision-notebook-1",
            3 * day,
            budget=VISION_BUDGET_TAG,
        ),
        Launch(
            vision,
            "us-west-2",
            "g6.xlarge",
            "vision",
            "vision-notebook-2",
            day,
            budget=VISION_BUDGET_TAG,
        ),
        Launch(vision, "us-west-2", "g5.12xlarge", "llm", "llm-finetune", timedelta(hours=20)),
        Launch(vision, "us-east-1", "g5.xlarge", "vision", "vision-old", 12 * day, stopped=True),
        Launch(sandbox, "us-east-1", "p5.48xlarge", None, "someones-experiment", 2 * day),
    ]


def admin_sessions(session: Any, org: Organization) -> dict[str, Any]:
    """Each member account's ``OrganizationAccountAccessRole`` session (what an operator
    uses to deploy there), and the management account's own."""
    admins = {
        a.id: _assume(session, f"arn:aws:iam::{a.id}:role/{ADMIN_ROLE}", "costguard-demo-seed")
        for a in org.members
    }
    return admins | {org.management: session}


def seed_fleet(
    session: Any, org: Organization, start: datetime, admins: Mapping[str, Any] | None = None
) -> list[Launch]:
    """Launch the fleet through each account's admin role; back-date the launch times."""
    from moto.backends import get_backend

    fleet = fleet_of(org)
    admins = admins or admin_sessions(session, org)
    ec2_backends: Any = get_backend("ec2")
    for launch in fleet:
        ec2 = admins[launch.account].client("ec2", region_name=launch.region)
        tags = [{"Key": "Name", "Value": launch.name}]
        if launch.project:
            tags.append({"Key": Tags.PROJECT, "Value": launch.project})
        if launch.budget:
            tags.append({"Key": Tags.BUDGET, "Value": launch.budget})
        instance = ec2.run_instances(
            ImageId="ami-12345678",
            InstanceType=launch.instance_type,
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )["Instances"][0]
        if launch.stopped:
            ec2.stop_instances(InstanceIds=[instance["InstanceId"]])
        backend = ec2_backends[launch.account][launch.region]
        naive = (start - launch.age).astimezone(UTC).replace(tzinfo=None)
        moto_instance = backend.get_instance(instance["InstanceId"])
        moto_instance.launch_time = naive
        for mapping in moto_instance.block_device_mapping.values():
            backend.get_volume(mapping.volume_id).create_time = naive
    for a in org.members:
        if a.member_role:
            deploy_member_role(admins[a.id], HUB, org.id)
    return fleet


# -- the hub --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hub:
    queue_url: str
    dead_letters_url: str
    topic_arn: str
    inbox_url: str
    #: The guards' FIFO act queue and its dead letters (one guard in one account a message).
    act_queue_url: str = ""
    act_dead_letters_url: str = ""


def _fifo_queue(sqs: Any, name: str, dead_letters: str) -> tuple[str, str]:
    """A FIFO queue and its FIFO dead-letter queue, as the hub stack builds both pairs."""
    dead = sqs.create_queue(QueueName=dead_letters, Attributes={"FifoQueue": "true"})["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    url = sqs.create_queue(
        QueueName=name,
        Attributes={
            "FifoQueue": "true",
            # The producer sets MessageDeduplicationId (time/account/region, or guard).
            "ContentBasedDeduplication": "false",
            "VisibilityTimeout": str(VISIBILITY_SECONDS),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dead_arn, "maxReceiveCount": MAX_RECEIVES}
            ),
        },
    )["QueueUrl"]
    return url, dead


def create_hub(session: Any, org_id: str) -> Hub:
    """The hub's table, topic (and a subscriber), work and act queues with their dead
    letters, and the three Lambda roles with what they may assume, as the stack
    (infra/costguard_infra/hub.py) builds them: the scan consumer the member read role
    only, the act consumer the member act role only, both inside the Organization."""
    from costguard.iam import hub_act_permissions, hub_assume_permissions
    from costguard_demo.run import create_alert_channels, create_ledger_table

    create_ledger_table(session, TABLE, HOME)
    topic, inbox = create_alert_channels(session, HOME)
    sqs = session.client("sqs", region_name=HOME)
    url, dead = _fifo_queue(sqs, WORK_QUEUE, DEAD_LETTERS)
    act, act_dead = _fifo_queue(sqs, ACT_QUEUE, ACT_DEAD_LETTERS)
    iam = session.client("iam", region_name=HOME)
    lambda_trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "lambda.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    for role, permissions in (
        (OrgRoles.HUB_SCAN, hub_assume_permissions(OrgRoles.MEMBER_READ, org_id)),
        (OrgRoles.HUB_ACT, hub_act_permissions(org_id)),
        (FANOUT_ROLE, ()),
    ):
        _put_role(iam, role, lambda_trust, f"CostGuard hub: {role}")
        if permissions:
            iam.put_role_policy(
                RoleName=role,
                PolicyName="costguard-assume",
                PolicyDocument=json.dumps(policy_document(permissions, HUB)),
            )
    return Hub(url, dead, topic, inbox, act, act_dead)


def hub_environment(org: Organization, hub: Hub, *, dry_run: bool = False) -> dict[str, str]:
    """What the stack sets on the fan-out and the consumers (org_environment and the rest).

    ``dry_run``: the deployment's ``dryRun``. The demo deploys with it off, as ``costguard
    demo``'s guards act (the scan never acts either way)."""
    return {
        Env.TOPIC_ARN: hub.topic_arn,
        Env.REGIONS: ",".join(REGIONS),
        Env.TABLE_NAME: TABLE,
        Env.SCOPE: HUB,
        Env.DRY_RUN: "true" if dry_run else "false",
        Env.SAGEMAKER_TAGS: "per-resource",
        Env.SAGEMAKER_STUDIO: "false",
        Env.DIGEST_HOUR_UTC: "0",
        Env.PROJECTS_JSON: json.dumps(PROJECTS),
        # The embedded CloudWatch (moto) does not evaluate SEARCH: the idle guard lists the
        # GPU series first (the setting exists for emulators like it).
        Env.IDLE_GPU_DISCOVERY: "list",
        Env.ORG_ACCOUNTS: "discover",
        Env.ORG_ID: org.id,
        Env.MEMBER_ROLE: OrgRoles.MEMBER_READ,
        Env.PER_ACCOUNT_CONCURRENCY: "2",
        Env.QUEUE_URL: hub.queue_url,
        Env.ACT_QUEUE_URL: hub.act_queue_url,
    }


# -- Lambda's SQS event source, emulated ------------------------------------------------------


class RecordingWork(OrgWork):
    """The consumer's router, keeping each outcome (the Lambda only logs them)."""

    def __init__(self, inner: OrgWork) -> None:
        super().__init__(inner.scans)
        self._inner = inner
        self.outcomes: list[WorkOutcome] = []

    def run(self, work: Work, now: datetime) -> WorkOutcome:
        outcome = self._inner.run(work, now)
        self.outcomes.append(outcome)
        return outcome


@dataclass
class Delivery:
    """What the event source did with one tick's messages."""

    batches: int = 0
    received: int = 0
    done: int = 0
    failed_receives: int = 0
    dead_lettered: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "received": self.received,
            "done": self.done,
            "failed_receives": self.failed_receives,
            "dead_lettered": self.dead_lettered,
        }


def _record(m: Mapping[str, Any], queue_arn: str) -> dict[str, Any]:
    attributes = m.get("Attributes", {})
    return {
        "messageId": m["MessageId"],
        "receiptHandle": m["ReceiptHandle"],
        "body": m["Body"],
        "attributes": {
            "ApproximateReceiveCount": attributes.get("ApproximateReceiveCount", "1"),
            "SentTimestamp": attributes.get("SentTimestamp", "0"),
            "SenderId": attributes.get("SenderId", HUB),
            "ApproximateFirstReceiveTimestamp": attributes.get(
                "ApproximateFirstReceiveTimestamp", "0"
            ),
            "MessageGroupId": attributes["MessageGroupId"],
            "MessageDeduplicationId": attributes["MessageDeduplicationId"],
            "SequenceNumber": attributes.get("SequenceNumber", "0"),
        },
        "messageAttributes": {},
        "md5OfBody": m["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": HOME,
    }


def _depth(sqs: Any, url: str) -> int:
    attrs = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(
        attrs["ApproximateNumberOfMessagesNotVisible"]
    )


def deliver(
    session: Any,
    hub: Hub,
    work: OrgWork,
    now: datetime,
    *,
    limit_seconds: float = DRAIN_LIMIT_SECONDS,
) -> Delivery:
    """Hand the work queue to the scan consumer until it is empty (batches of ten)."""
    from costguard.handlers.org import consume

    return drain_queue(
        session,
        hub.queue_url,
        hub.dead_letters_url,
        lambda event: consume(event, work, now),
        batch_size=10,
        limit_seconds=limit_seconds,
    )


def drain_queue(
    session: Any,
    queue_url: str,
    dead_letters_url: str,
    handle: Callable[[dict[str, Any]], Mapping[str, Any]],
    *,
    batch_size: int,
    limit_seconds: float = DRAIN_LIMIT_SECONDS,
    sqs: Any = None,
) -> Delivery:
    """Hand a queue to its consumer until it is empty, as Lambda's event source does.

    Batches of up to ``batch_size`` records; the records the consumer reports in
    ``batchItemFailures`` (all of them when it raises) are left in the queue, visible again
    after the visibility timeout; the rest are deleted. SQS itself moves a record received
    ``maxReceiveCount`` times to the dead-letter queue on the next receive.
    """
    from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

    sqs = sqs or session.client("sqs", region_name=HOME)
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    parked_before = _depth(sqs, dead_letters_url)
    out = Delivery()
    #: Records that failed, by message id: (body, the receive count of their last failure).
    failing: dict[str, tuple[dict[str, Any], int]] = {}
    deadline = time.monotonic() + limit_seconds
    while True:
        got = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=batch_size,
            MessageSystemAttributeNames=["All"],
            WaitTimeSeconds=0,
        ).get("Messages", [])
        if not got:
            if _depth(sqs, queue_url) == 0:
                break
            if time.monotonic() > deadline:
                raise OrgDemoError(f"{queue_url} did not drain in {limit_seconds:.0f} s")
            time.sleep(0.2)  # failed records come back after the visibility timeout
            continue
        out.batches += 1
        out.received += len(got)
        out.bodies += [json.loads(m["Body"]) for m in got]
        try:
            answer = handle({"Records": [_record(m, queue_arn) for m in got]})
            failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
        except BatchProcessingError:
            failed = {m["MessageId"] for m in got}  # the whole batch failed: all come back
        finished = [m for m in got if m["MessageId"] not in failed]
        for m in got:
            if m["MessageId"] in failed:
                count = int(m.get("Attributes", {}).get("ApproximateReceiveCount", 0))
                failing[m["MessageId"]] = (json.loads(m["Body"]), count)
            else:
                failing.pop(m["MessageId"], None)
        out.failed_receives += len(got) - len(finished)
        out.done += len(finished)
        if finished:
            sqs.delete_message_batch(
                QueueUrl=queue_url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                    for n, m in enumerate(finished)
                ],
            )
    # The queue is empty: what failed last and was never deleted, SQS moved (moto does).
    out.dead_lettered = [body | {"receives": count} for body, count in failing.values()]
    parked = _depth(sqs, dead_letters_url) - parked_before
    if parked != len(out.dead_lettered):
        raise OrgDemoError(
            f"{len(out.dead_lettered)} work items failed their last receive, but the "
            f"dead-letter queue took {parked}"
        )
    return out


# -- the story --------------------------------------------------------------------------------


def _num(value: Decimal, places: str = "cents") -> float:
    return float(cents(value) if places == "cents" else rate(value))


@dataclass
class SliceFigures:
    month_to_date: Decimal = ZERO
    usd_per_hour: Decimal = ZERO
    projects: dict[str | None, tuple[Decimal, Decimal]] = field(default_factory=dict)


def slice_figures(ledger: Any, s: Slice, month: str) -> SliceFigures:
    """A slice's month-to-date and run-rate per project, read from its ledger scope as the
    aggregation reads it (the run-rate of what its last committed scan saw)."""
    from costguard.domain.org import slice_scope

    scope = slice_scope(HUB, s)
    out = SliceFigures()
    for project, row in ledger.month_totals(scope, month).items():
        out.projects[project] = (row.usd, ZERO)
    mark = ledger.watermark(scope)
    for o in ledger.observations(scope).values():
        if mark is not None and o.observed_at == mark:
            mtd, per_hour = out.projects.get(o.project, (ZERO, ZERO))
            out.projects[o.project] = (mtd, per_hour + o.usd_per_hour)
    out.month_to_date = sum((v[0] for v in out.projects.values()), ZERO)
    out.usd_per_hour = sum((v[1] for v in out.projects.values()), ZERO)
    return out


def _tick_json(
    n: int, summary: TickSummary, delivery: Delivery, outcomes: Sequence[WorkOutcome]
) -> dict[str, Any]:
    items = [
        {"kind": w.kind.value, "account": w.slice.account, "region": w.slice.region}
        for w in summary.work.items()
    ]
    results = []
    for o in outcomes:
        row: dict[str, Any] = {
            "kind": o.work.kind.value,
            "account": o.work.slice.account,
            "region": o.work.slice.region,
        }
        if o.scan is not None:
            row |= {
                "ledger": o.scan.ledger.value,
                "newly_done": o.scan.newly_done,
                "resources": o.scan.resources,
                "aggregated": o.scan.aggregated is not None,
            }
        if o.probe is not None:
            row |= {
                "found": list(o.probe.answer.found),
                "state": o.probe.state.value if o.probe.state else None,
            }
        if o.regions is not None:
            row |= {"regions": len(o.regions.regions)}
        results.append(row)
    return {
        "tick": n,
        "time": summary.tick.isoformat(),
        "accounts": summary.accounts,
        "account_regions": summary.known,
        "work": {
            "regions": len(summary.work.regions),
            "probe": len(summary.work.probes),
            "scan": len(summary.work.scans),
        },
        "items": items,
        "sent": summary.sent,
        "planned": summary.planned,
        "carried": len(summary.work.carried),
        "unreachable": [
            {"account": u.account, "region": u.region, "failure": u.failure}
            for u in summary.unreachable
        ],
        "delivery": delivery.as_dict(),
        "results": results,
        "aggregated": [r.tick.isoformat() for r in summary.aggregated]
        + [o.scan.aggregated.tick.isoformat() for o in outcomes if o.scan and o.scan.aggregated],
        "alerts": list(summary.alerts),
    }


def _project_rows(report: OrgReport) -> list[dict[str, Any]]:
    rows = []
    for p in report.projects:
        rollup = report.rollups.get(p.project)
        rows.append(
            {
                "project": p.project,
                "accounts": sorted(rollup.accounts) if rollup else [],
                "usd_per_hour": _num(p.run_rate_usd_per_hour, "rate"),
                "month_to_date_usd": _num(p.month_to_date_usd),
                "forecast_month_usd": _num(p.forecast_month_usd),
                "budget_usd": _num(p.budget_usd) if p.budget_usd is not None else None,
                "budget_source": p.budget_source,
                "status": p.status.value,
            }
        )
    unattributed = report.rollups.get(None)
    if unattributed is not None:
        rows.append(
            {
                "project": None,
                "accounts": sorted(unattributed.accounts),
                "usd_per_hour": _num(unattributed.run_rate_usd_per_hour, "rate"),
                "month_to_date_usd": _num(unattributed.month_to_date_usd),
                "forecast_month_usd": None,
                "budget_usd": None,
                "budget_source": "none",
                "status": "unattributed",
            }
        )
    return rows


def _slice_rows(
    org: Organization,
    directory: Directory,
    ledger: Any,
    month: str,
    resources: Mapping[Slice, int],
) -> list[dict[str, Any]]:
    from costguard.domain.org import Slice

    rows = []
    for account in org.members:
        entry = directory.regions.get(account.id)
        for region in REGIONS:
            s = Slice(account.id, region)
            status = directory.slices.get(s)
            row: dict[str, Any] = {
                "account": account.id,
                "name": account.name,
                "region": region,
            }
            if entry is None or entry.discovered_at is None:
                # Its regions could never be read: nothing about it is known.
                row |= {
                    "state": "unreachable",
                    "failure": entry.failure if entry else "",
                    "resources": None,
                    "usd_per_hour": None,
                    "month_to_date_usd": None,
                    "projects": {},
                }
                rows.append(row)
                continue
            figures = slice_figures(ledger, s, month)
            row |= {
                "state": status.state.value if status else "unprobed",
                "resources": resources.get(s, 0),
                "usd_per_hour": _num(figures.usd_per_hour, "rate"),
                "month_to_date_usd": _num(figures.month_to_date),
                "projects": {
                    (p or "(unattributed)"): {
                        "month_to_date_usd": _num(mtd),
                        "usd_per_hour": _num(per_hour, "rate"),
                    }
                    for p, (mtd, per_hour) in sorted(
                        figures.projects.items(), key=lambda kv: kv[0] or ""
                    )
                },
            }
            rows.append(row)
    return rows


def _window(now: datetime, ticks: int) -> datetime:
    """The first simulated time: ``ticks`` times 15 minutes apart within one UTC day."""
    from costguard_demo.run import demo_window

    start, _end = demo_window(now, ticks)
    return start


def run_org_demo(
    *, as_json: bool = False, ticks: int = DEFAULT_TICKS, dry_run: bool = False
) -> int:
    """Run the story; print the table (or ``--json``); 0 when it ran as designed.

    ``dry_run``: the deployment's ``dryRun`` (off, as ``costguard demo``'s guards act; on,
    the guards report what they would do and what it would save, and change nothing)."""
    started = time.monotonic()

    def say(message: str) -> None:
        if not as_json:
            print(message, file=sys.stderr, flush=True)

    ticks = min(max(MIN_TICKS, ticks), MAX_TICKS)
    saved = {k: os.environ.get(k) for k in ("POWERTOOLS_LOG_LEVEL", "POWERTOOLS_METRICS_DISABLED")}
    # The consumer logs each failed item as a warning: the demo reports them itself.
    os.environ["POWERTOOLS_LOG_LEVEL"] = "ERROR"
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
    try:
        document = _run(say, ticks, dry_run)
    except Exception as exc:
        print(f"costguard demo --org: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    document["wall_seconds"] = round(time.monotonic() - started, 1)
    problems = verdict(document)
    if as_json:
        json.dump(document, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(org_table(document))
    for p in problems:
        print(f"costguard demo --org: {p}", file=sys.stderr)
    return 1 if problems else 0


def _run(say: Callable[[str], None], ticks: int, dry_run: bool) -> dict[str, Any]:
    import urllib.request

    import boto3

    from costguard_demo.server import embedded_aws
    from costguard_demo.slack_standin import SlackStandIn, sns_event

    start = _window(STORY_END, ticks)
    with embedded_aws() as url, SlackStandIn() as slack:
        seed = urllib.request.Request(f"{url}/moto-api/seed?a={SEED}", method="POST")  # noqa: S310
        urllib.request.urlopen(seed, timeout=10).close()  # noqa: S310 - loopback http
        say(f"embedded AWS (moto server) on {url}; Slack stand-in on {slack.url}")
        management = boto3.Session(region_name=HOME)
        org = create_organization(management)
        org_of = {a.id: org.id for a in org.members} | {org.management: org.id}
        with checked_assume_role(org_of) as refused:
            # One session per account for the whole run (each loads its service models once).
            admins = admin_sessions(management, org)
            fleet = seed_fleet(management, org, start, admins)
            hub = create_hub(management, org.id)
            say(
                f"Organization {org.id}: management {org.management} (runs the hub; tagged "
                "costguard:opt-out=true)"
            )
            for a in org.members:
                role = "member roles deployed" if a.member_role else "NO member roles"
                n = sum(1 for f in fleet if f.account == a.id)
                say(f"  {a.id} {a.name:<12} {role}; {n} instances seeded")
            return _ticks(
                say, org, hub, fleet, start, ticks, slack, sns_event, url, refused, dry_run, admins
            )


def _ticks(
    say: Callable[[str], None],
    org: Organization,
    hub: Hub,
    fleet: Sequence[Launch],
    start: datetime,
    ticks: int,
    slack: Any,
    sns_event: Callable[..., dict[str, Any]],
    url: str,
    refused: Sequence[str],
    dry_run: bool,
    admins: Mapping[str, Any],
) -> dict[str, Any]:
    from costguard.adapters.directory import DynamoDbDirectory
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.domain.calendar import month_key
    from costguard.handlers.slack_notifier import process as notify_slack
    from costguard.settings import Settings
    from costguard.wiring.org import HubSettings, build_fanout, build_org_work
    from costguard_demo.run import drain

    environ = hub_environment(org, hub, dry_run=dry_run)
    settings = Settings.from_env(environ)
    env = HubSettings.from_settings(settings)
    fanout_session = lambda_session(HUB, FANOUT_ROLE)
    consumer_session = lambda_session(HUB, OrgRoles.HUB_SCAN)
    fanout = build_fanout(settings, env, fanout_session)
    # One consumer graph for the whole run: a warm Lambda keeps its member credentials.
    recording = RecordingWork(build_org_work(settings, consumer_session, role_name=env.member_role))
    webhook = slack.webhook()
    delivered: list[dict[str, Any]] = []
    tick_docs: list[dict[str, Any]] = []
    last_report: OrgReport | None = None
    resources: dict[Slice, int] = {}
    dead_letters: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []

    inbox = consumer_session.client("sqs", region_name=HOME)

    def alerts_out() -> list[dict[str, Any]]:
        new = drain(consumer_session, hub.inbox_url, HOME, inbox)
        for message in new:
            delivered.append(message)
            notify_slack(sns_event(json.dumps(message)), webhook)
        return new

    for n in range(ticks):
        now = start + INTERVAL * n
        summary = fanout.tick(now)
        first = len(recording.outcomes)
        delivery = deliver(consumer_session, hub, recording, now + CONSUMER_DELAY)
        outcomes = recording.outcomes[first:]
        for o in outcomes:
            if o.scan is not None:
                resources[o.work.slice] = o.scan.resources
                if o.scan.aggregated is not None:
                    last_report = o.scan.aggregated
        for r in summary.aggregated:
            last_report = r if last_report is None or r.tick >= last_report.tick else last_report
        dead_letters += [d for d in delivery.dead_lettered if d not in dead_letters]
        if n == ticks - 1:
            kept = [b for b in delivery.bodies if b.get("kind", "scan") == "scan"]
        alerts_out()
        doc = _tick_json(n + 1, summary, delivery, outcomes)
        tick_docs.append(doc)
        w = doc["work"]
        say(
            f"tick {n + 1}/{ticks} at {now:%H:%M} UTC: {summary.accounts} accounts, "
            f"{summary.known} account-regions; enqueued {w['regions']} regions, {w['probe']} "
            f"probes, {w['scan']} scans; consumed {delivery.done} in {delivery.batches} "
            f"batches, {delivery.failed_receives} failed receives, "
            f"{len(delivery.dead_lettered)} dead-lettered"
        )
        for u in summary.unreachable:
            say(f"    unreachable: {u.account} {u.region or '(regions)'}: {u.failure[:90]}")
        if doc["aggregated"]:
            say(f"    aggregated {', '.join(t[11:16] for t in doc['aggregated'])} UTC")

    ledger = DynamoDbLedger(consumer_session.client("dynamodb", region_name=HOME), TABLE)
    directory = DynamoDbDirectory(
        consumer_session.client("dynamodb", region_name=HOME), TABLE, HUB
    ).load()
    last = start + INTERVAL * (ticks - 1)
    month = month_key(last)
    slices_before = _slice_rows(org, directory, ledger, month, resources)

    # -- exactly once: the last time again (a retried fan-out), and its scans redelivered
    replay_summary = fanout.tick(last)
    first = len(recording.outcomes)
    replay_delivery = deliver(consumer_session, hub, recording, last + CONSUMER_DELAY)
    redelivered = _redeliver(
        consumer_session, hub, recording, kept, last + CONSUMER_DELAY, env.per_account_cap
    )
    replay_outcomes = recording.outcomes[first:]
    alerts_out()
    slices_after = _slice_rows(org, directory, ledger, month, resources)
    outcomes_seen: list[str] = sorted({o.scan.ledger.value for o in replay_outcomes if o.scan})
    replay = {
        "tick": ticks,
        "planned": replay_summary.planned,
        "sent": replay_summary.sent,
        "received_from_queue": replay_delivery.received,
        "redelivered": redelivered,
        "ledger": outcomes_seen,
        "newly_done": sum(1 for o in replay_outcomes if o.scan and o.scan.newly_done),
        "spend_changed": slices_after != slices_before,
    }
    say(
        f"re-ran tick {ticks} (a retried fan-out): planned again: {replay['planned']}; "
        f"{replay_summary.sent} sends, {replay_delivery.received} delivered; then "
        f"{redelivered} of its scans redelivered: ledger {', '.join(outcomes_seen) or '-'}, "
        f"spend changed: {replay['spend_changed']}"
    )

    # -- the guards: their schedules at simulated times, through the act queue
    from costguard_demo.org_guards import run_guard_chapter

    guards = run_guard_chapter(say, org, hub, environ, start, alerts_out, admins)

    findings = []
    days = sorted({(start + INTERVAL * n).strftime("%Y-%m-%d") for n in range(ticks)})
    for day in days:
        for f in ledger.findings(HUB, day):
            row = f.as_dict()
            if row not in findings:
                findings.append(row)
    alerts = [
        {k: m.get(k) for k in ("alert_id", "kind", "project", "severity", "title", "summary")}
        for m in delivered
    ]
    guards["findings"] = _guard_findings(ledger, org, guards)
    guards["not_entered"] = _not_entered(org, directory, guards, findings, alerts)
    return {
        "endpoint": url,
        "organization": {
            "id": org.id,
            "management": org.management,
            "hub": HUB,
            "regions": list(REGIONS),
        },
        "accounts": [
            {
                "account": a.id,
                "name": a.name,
                "member_role": a.member_role,
                "guarded": a.id in (directory.listing.accounts if directory.listing else ()),
            }
            for a in org.members
        ]
        + [
            {
                "account": org.management,
                "name": "management",
                "member_role": False,
                "guarded": False,
                "skipped": "opted out (costguard:opt-out=true)",
            }
        ],
        "listing": {
            "accounts": list(directory.listing.accounts) if directory.listing else [],
            "opted_out": list(directory.listing.opted_out) if directory.listing else [],
        },
        "fleet": [
            {
                "account": f.account,
                "region": f.region,
                "instance_type": f.instance_type,
                "project": f.project,
                "name": f.name,
                "state": "stopped" if f.stopped else "running",
                "launched_at": (start - f.age).isoformat(),
            }
            for f in fleet
        ],
        "ticks": tick_docs,
        "slices": slices_after,
        "projects": _project_rows(last_report) if last_report else [],
        "aggregated_at": last_report.tick.isoformat() if last_report else None,
        "findings": findings,
        "alerts": alerts,
        "alerts_delivered": {"sqs": len(delivered), "slack": len(slack.received)},
        "dead_letters": dead_letters,
        "assume_role_refused": sorted(set(refused)),
        "replay": replay,
        "guards": guards,
    }


def _guard_findings(
    ledger: Any, org: Organization, guards: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The findings of the guards' days: the hub's (an account the act consumer could not
    enter) and each member account's own scope (what a guard's policy found wrong)."""
    from costguard.domain.org_act import guard_scope

    days = sorted({t["time"][:10] for t in guards["ticks"]})
    scopes = [HUB, *(guard_scope(HUB, a.id) for a in org.members)]
    out: list[dict[str, Any]] = []
    for scope in scopes:
        for day in days:
            for f in ledger.findings(scope, day):
                row = {"scope": scope, "day": day, **f.as_dict()}
                if row not in out:
                    out.append(row)
    return out


def _short_failure(failure: str) -> str:
    """``AccessDenied on arn:...:role/costguard-member-read`` from STS's long message."""
    code = failure.split(":", 1)[0]
    _, found, resource = failure.partition("on resource: ")
    return f"{code} on {resource.strip()}" if found else failure[:160]


def _not_entered(
    org: Organization,
    directory: Directory,
    guards: Mapping[str, Any],
    findings: Sequence[Mapping[str, Any]],
    alerts: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """The listed accounts no guard could enter, why, and the findings and alerts that
    name them.

    - No run planned: the guards' fan-out plans runs only in an account whose regions were
      read. One without the member stack (the StackSet never reached it) is never sent to
      the act queue, where it would only fail and dead-letter every run; the scan tick that
      could not read its regions names it (``scan-failed``, and an alert once a day).
    - Its act role refused: runs were planned (its regions were read) and the act consumer
      could not enter it; the consumer names it (``act-failed``, and an alert once a day)."""
    listed = directory.listing.accounts if directory.listing else ()
    planned = {p["account"] for t in guards["ticks"] for p in t["planned"]}
    runs = [r for t in guards["ticks"] for r in t["runs"]]
    every = [*findings, *guards.get("findings", [])]
    out = []
    for a in org.members:
        if a.id not in listed:
            continue
        mine = [r for r in runs if r["account"] == a.id]
        refused = [r for r in mine if (r["error"] or "").startswith("AccountAccessError")]
        if a.id not in planned:
            entry = directory.regions.get(a.id)
            why = "no guard run planned: its regions were never read" + (
                f" ({_short_failure(entry.failure)})" if entry and entry.failure else ""
            )
        elif mine and len(refused) == len(mine):
            error = str(refused[0]["error"]).split(": ", 2)[-1]
            why = f"every guard run refused: {_short_failure(error)}"
        else:
            continue
        out.append(
            {
                "account": a.id,
                "name": a.name,
                "why": why,
                "findings": sorted(
                    {f"{f['code']} {f['resource']}" for f in every if a.id in f["resource"]}
                ),
                "alerts": [x["title"] for x in alerts if a.id in (x.get("title") or "")],
            }
        )
    return out


def _redeliver(
    session: Any,
    hub: Hub,
    work: OrgWork,
    bodies: Sequence[Mapping[str, Any]],
    now: datetime,
    per_account_cap: int,
) -> int:
    """SQS delivers at least once: the same scans again, as new messages (another dedupe
    id, as after the five-minute window), to the consumer as before."""
    from costguard.adapters.work_queue import WorkItem, message_group

    if not bodies:
        return 0
    sqs = session.client("sqs", region_name=HOME)
    for n, body in enumerate(bodies):
        item = WorkItem.model_validate(body)
        sqs.send_message(
            QueueUrl=hub.queue_url,
            MessageBody=json.dumps(body),
            MessageGroupId=message_group(item.slice, per_account_cap),
            MessageDeduplicationId=f"{item.dedupe_id()}/again-{n}",
        )
    return deliver(session, hub, work, now).received


def verdict(doc: Mapping[str, Any]) -> list[str]:
    """What must hold for the demo to have behaved as designed (else exit 1): every account
    without its member role named in a finding and an alert, no work item of an account
    with its role dead-lettered, a tick aggregated, a re-run adding nothing, every alert
    in Slack."""
    problems = []
    members = [a for a in doc["accounts"] if a["name"] != "management"]
    if doc["ticks"][0]["accounts"] != len(members):
        problems.append(f"{doc['ticks'][0]['accounts']} accounts listed, not {len(members)}")
    for a in members:
        if a["member_role"]:
            continue
        if not any(a["account"] in f["resource"] for f in doc["findings"]):
            problems.append(f"no finding names {a['account']}, which has no member role")
        if not any(a["account"] in (x.get("title") or "") for x in doc["alerts"]):
            problems.append(f"no alert names {a['account']}, which has no member role")
    entered = {a["account"] for a in members if a["member_role"]}
    unexpected = [d for d in doc["dead_letters"] if d["account"] in entered]
    if unexpected:
        problems.append(f"work items of accounts with their role were dead-lettered: {unexpected}")
    if not doc["projects"]:
        problems.append("no tick was aggregated")
    if doc["replay"]["spend_changed"] or doc["replay"]["newly_done"]:
        problems.append("re-running a tick changed the ledger")
    if doc["alerts_delivered"]["sqs"] != doc["alerts_delivered"]["slack"]:
        problems.append("some alerts did not reach Slack")
    if "guards" in doc:
        from costguard_demo.org_guards import guard_problems

        problems += guard_problems(doc)
    return problems


# -- the table --------------------------------------------------------------------------------


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def org_table(doc: Mapping[str, Any]) -> str:
    org = doc["organization"]
    names = {a["account"]: a["name"] for a in doc["accounts"]}
    lines = [
        f"CostGuard Organization demo: {org['id']}, hub {org['hub']}, regions "
        f"{', '.join(org['regions'])}",
        "",
        "Accounts:",
    ]
    for a in doc["accounts"]:
        what = a.get("skipped") or (
            ("listed" if a["guarded"] else "not listed")
            + ("" if a["member_role"] else "; member role MISSING: cannot be entered")
        )
        lines.append(f"  {a['account']}  {a['name']:<12} {what}")
    lines += ["", "Work items per tick:"]
    lines.append(
        f"  {'tick':<4} {'time':<5}  {'accts':>5} {'regions':>7} {'probe':>5} {'scan':>4}  "
        f"{'done':>4} {'failed':>6} {'DLQ':>3}  aggregated"
    )
    for t in doc["ticks"]:
        w, d = t["work"], t["delivery"]
        lines.append(
            f"  {t['tick']:<4} {t['time'][11:16]:<5}  {t['accounts']:>5} {w['regions']:>7} "
            f"{w['probe']:>5} {w['scan']:>4}  {d['done']:>4} {d['failed_receives']:>6} "
            f"{len(d['dead_lettered']):>3}  {', '.join(x[11:16] for x in t['aggregated']) or '-'}"
        )
    lines += ["", f"Accounts x regions (after tick {len(doc['ticks'])}):"]
    lines.append(
        f"  {'account':<12}  {'name':<12} {'region':<10} {'state':<12} {'res':>3} "
        f"{'$/h':>9} {'month-to-date':>14}"
    )
    for s in doc["slices"]:
        res = "-" if s["resources"] is None else str(s["resources"])
        per_hour = "unknown" if s["usd_per_hour"] is None else f"{s['usd_per_hour']:,.2f}"
        lines.append(
            f"  {s['account']:<12}  {s['name']:<12} {s['region']:<10} {s['state']:<12} "
            f"{res:>3} {per_hour:>9} {_money(s['month_to_date_usd']):>14}"
        )
    lines += ["", f"Projects rolled up across accounts (aggregated {doc['aggregated_at']}):"]
    lines.append(
        f"  {'project':<14} {'accounts':<27} {'$/h':>8} {'month-to-date':>14} "
        f"{'forecast':>12} {'budget':>10}  status"
    )
    for p in doc["projects"]:
        accounts = ", ".join(names.get(a, a) for a in p["accounts"]) or "-"
        source = {"tag": " (tag)", "config": " (table)"}.get(p["budget_source"], "")
        lines.append(
            f"  {p['project'] or '(unattributed)':<14} {accounts:<27} {p['usd_per_hour']:>8,.2f} "
            f"{_money(p['month_to_date_usd']):>14} {_money(p['forecast_month_usd']):>12} "
            f"{_money(p['budget_usd']):>10}  {p['status']}{source}"
        )
        key = p["project"] or "(unattributed)"
        parts = [
            f"{s['name']} {s['region']} {_money(s['projects'][key]['month_to_date_usd'])}"
            for s in doc["slices"]
            if key in (s["projects"] or {})
        ]
        if len(parts) > 1:
            lines.append(f"  {'':<14} = {' + '.join(parts)}")
    lines += ["", f"Findings ({len(doc['findings'])}):"]
    for f in doc["findings"]:
        lines.append(f"  [{f['severity']}] {f['code']} {f['resource']}: {f['message'][:110]}")
    sent = doc["alerts_delivered"]
    lines += [
        "",
        f"Alerts: {sent['sqs']} delivered to the SQS subscriber, {sent['slack']} posted to Slack",
    ]
    for a in doc["alerts"]:
        lines.append(f"  [{a['severity']}] {a['kind']}: {a['title']}")
    lines += ["", f"Dead letters ({len(doc['dead_letters'])}):"]
    for d in doc["dead_letters"]:
        lines.append(
            f"  {d.get('kind', 'scan')} {d['account']} {d['region']} {d['time'][11:16]} "
            f"after {d['receives']} receives"
        )
    r = doc["replay"]
    lines += [
        "",
        f"Exactly once: tick {r['tick']} run again: planned again: {r['planned']}; "
        f"{r['sent']} sends, {r['received_from_queue']} delivered (AWS would drop them as "
        "duplicates for 5 minutes; moto only while the first copy is queued)",
        f"  and {r['redelivered']} of its scans delivered once more: ledger "
        f"{', '.join(r['ledger']) or '-'}, {r['newly_done']} newly done, spend changed: "
        f"{r['spend_changed']}",
    ]
    if "guards" in doc:
        from costguard_demo.org_guards import guard_lines

        lines += guard_lines(doc)
    lines += ["", f"Wall time: {doc.get('wall_seconds', 0)} s"]
    return "\n".join(lines)
