"""The world the Organization demo plays in: its accounts and roles on the embedded AWS, an
STS that checks roles as AWS does, the hub's queues and environment, and Lambda's SQS event
source, emulated. The story (:mod:`costguard_demo.org`) and its guard chapter
(:mod:`costguard_demo.org_guards`) both stand on it; it imports neither.
"""

from __future__ import annotations

import fnmatch
import json
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from costguard.config_spec import BY_NAME
from costguard.domain.org_roles import OrgRoles
from costguard.env import Env
from costguard.services.fanout import OrgWork, WorkOutcome
from costguard_demo.server import DEMO_ACCOUNT

if TYPE_CHECKING:
    from costguard.domain.directory import Work
    from costguard.iam import Permission

#: The management account runs the hub (moto's default account).
HUB = DEMO_ACCOUNT
HOME = "us-east-1"
REGIONS = ("us-east-1", "us-west-2")
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


def assume(session: Any, role_arn: str, name: str) -> Any:
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
    from costguard_demo.plumbing import create_alert_channels, create_ledger_table

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
    """How many messages the queue holds, visible or in flight, counting each at least once.

    Two reads, the messages in flight first. One read of both counts can miss a message:
    the embedded SQS works each count out at its own instant, the visible ones first, so a
    failed message whose visibility timeout ends between the two is in neither, and the
    queue looked empty while it still held a record on its last receive (under CPU load,
    about one Organization demo run in ten: "work items failed their last receive, but the
    dead-letter queue took 0"). In flight first, a message that becomes visible between
    the reads is counted twice at worst; nothing else receives from the queue meanwhile,
    so none goes the other way."""

    def count(name: str) -> int:
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[name])["Attributes"]
        return int(attrs[name])

    in_flight = count("ApproximateNumberOfMessagesNotVisible")
    return in_flight + count("ApproximateNumberOfMessages")


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
