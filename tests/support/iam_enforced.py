"""The harness of the IAM-enforced e2e tests: a synthesized stack "deployed" onto moto's HTTP
server, each handler run as Lambda would run it (its environment from the template, its
role's assumed credentials, IAM enforced by moto), every API call recorded, and each call
judged against the synthesized policies by ``tests/infra/iam_model.py``.

moto checks the action only (neither resource nor condition), so every recorded call is
also checked here: action, the exact resource ARN, the condition keys the call implies
(the item's partition for ``dynamodb:LeadingKeys``, the resource's tags, the tag keys
written), and the KMS use the call implies (DynamoDB on an encrypted table, SNS on an
encrypted topic, Secrets Manager on an encrypted secret) against the key policy. A run
must also use every grant it is given, save a short list of reasons: grants nothing uses
are not kept (``unused_grants`` by action, ``unused_statements`` by statement and resource).

Used by ``tests/e2e/test_iam_enforced.py`` (the default stack), ``test_answers_iam_enforced.py``
(answers on) and ``test_org_act_iam_enforced.py`` (the Organization hub).
"""

from __future__ import annotations

import fnmatch
import io
import json
import re
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.env import Env
from tests.infra.iam_model import ACCOUNT, REGION, World, as_list, condition_holds, role_may
from tests.support.alert_topic import encrypted_topic_with_subscriber
from tests.support.clock import MIDDAY

#: What moto cannot run, so the deployed value is replaced for the run (and why).
MOTO_OVERRIDES = {Env.SAGEMAKER_STUDIO: "false"}  # moto has no SageMaker Studio (ListApps)
#: Granted actions the run may leave unused, each with the reason it is still granted.
UNEXERCISED = {
    "sagemaker:ListApps": "Studio apps: moto does not implement ListApps",
    # moto has no Studio apps or spaces (only CreateDomain/DescribeDomain/ListDomains), so
    # the idle guard's Studio path runs with Studio off here; tests/functional/test_studio.py
    # stubs these calls with botocore's Stubber.
    "sagemaker:DescribeApp": "Studio apps: not in moto",
    "sagemaker:DeleteApp": "Studio apps: not in moto",
    "sagemaker:ListSpaces": "Studio spaces: not in moto",
    "sagemaker:ListDomains": "Studio domains: the Studio path is off on moto",
    "sagemaker:DescribeDomain": "Studio domains: the Studio path is off on moto",
    "ec2:DescribeSpotInstanceRequests": "asked only for a spot instance with a request id, "
    "which moto never sets (tests/functional/test_ec2_one_time_spot.py stubs it)",
}
#: How long after a launch event's time EventBridge hands it to the on-launch Lambda.
DELIVERY_LAG = timedelta(seconds=4)


@dataclass
class Context:
    function_name: str
    invoked_function_arn: str
    memory_limit_in_mb: int = 1024
    aws_request_id: str = "req-iam"


@dataclass
class Call:
    service: str  # botocore's name, e.g. "resourcegroupstaggingapi"
    operation: str
    params: dict[str, Any]
    region: str
    access_key: str
    status: int = 0
    error: str = ""


@dataclass
class Recorder:
    """Every API call of every boto3 session created while installed."""

    calls: list[Call] = field(default_factory=list)

    def _params(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["costguard_api_params"] = dict(params)

    def _call(self, model: Any, context: dict[str, Any], request_signer: Any, **_: Any) -> None:
        credentials = request_signer._credentials  # which role signed it
        call = Call(
            model.service_model.service_name,
            model.name,
            context.get("costguard_api_params", {}),
            context.get("client_region") or REGION,
            credentials.access_key if credentials else "",
        )
        context["costguard_call"] = call
        self.calls.append(call)

    def _answered(self, http_response: Any, parsed: Any, context: dict[str, Any], **_: Any) -> None:
        call = context.get("costguard_call")
        if call is not None:
            call.status = http_response.status_code
            call.error = str((parsed or {}).get("Error", {}).get("Code", ""))

    def calls_of(self, deployed: Deployment, function: str) -> list[Call]:
        """The calls signed with the function's role (each Lambda has its own)."""
        role = deployed.world.function_role(deployed.functions[function])
        key = deployed.credentials[role]["AWS_ACCESS_KEY_ID"]
        return [c for c in self.calls if c.access_key == key]

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import botocore.session

        original = botocore.session.get_session

        def get_session(env_vars: Any = None) -> Any:
            session = original(env_vars)
            session.register("before-parameter-build", self._params)
            session.register("before-call", self._call)
            session.register("after-call", self._answered)
            return session

        monkeypatch.setattr(botocore.session, "get_session", get_session)


# -- deploying the template onto moto ----------------------------------------------------------


@dataclass
class Deployment:
    world: World
    session: Any  # admin, for seeding and reading back
    subscriber: str  # an SQS queue subscribed to the alert topic
    credentials: dict[str, dict[str, str]]  # role logical id -> assumed-role env
    functions: dict[str, str]  # "scan" / "slack" / "launch" -> function logical id
    slack_origin: str  # where the Slack stand-in listens


def find_function(world: World, suffix: str, guard: str | None = None) -> str:
    """The logical id of the one Lambda whose handler ends with ``suffix`` (and, for a
    guard's, whose ``COSTGUARD_GUARD`` is ``guard``)."""
    (logical,) = [
        f
        for f, fn in world.resources("AWS::Lambda::Function").items()
        if fn["Properties"]["Handler"].endswith(suffix)
        and (guard is None or fn["Properties"]["Environment"]["Variables"].get(Env.GUARD) == guard)
    ]
    return logical


#: The functions every deployment runs, by the name a test gives them.
DEFAULT_FUNCTIONS: dict[str, tuple[str, str | None]] = {
    "scan": ("scan.handler", None),
    "slack": ("slack_notifier.handler", None),
    "act": ("act.handler", "toy"),
    "idle": ("act.handler", "idle-notebooks"),
    "volumes": ("act.handler", "stale-volumes"),
    "launch": ("on_launch.handler", None),
}


def moto_dialect(document: dict[str, Any]) -> dict[str, Any]:
    """The policy as moto can evaluate it, with IAM's meaning kept.

    moto compares a statement's Resource against ``*`` (so a statement naming an ARN
    never matches) and names actions by signing name (``tagging:`` for ``tag:``) and
    by API (``dynamodb:TransactWriteItems``, which IAM authorizes per item as
    ``UpdateItem``…; ``lambda:Invoke`` for IAM's ``lambda:InvokeFunction``). Resources
    become ``*`` here because the exact ARNs are checked by ``iam_model`` for every
    recorded call; actions are only renamed, never added.
    """
    statements = []
    for s in as_list(document["Statement"]):
        if s["Effect"] != "Allow":
            statements.append(s)
            continue
        actions = as_list(s["Action"])
        aliases = [a.replace("tag:", "tagging:", 1) for a in actions if a.startswith("tag:")]
        # CloudWatch signs as "monitoring", which is what moto names its actions by
        aliases += [
            a.replace("cloudwatch:", "monitoring:", 1)
            for a in actions
            if a.startswith("cloudwatch:")
        ]
        if "dynamodb:UpdateItem" in actions:
            aliases.append("dynamodb:TransactWriteItems")
        if "lambda:InvokeFunction" in actions:
            aliases.append("lambda:Invoke")  # moto names the action by its API, Invoke
        statements.append({**s, "Action": actions + aliases, "Resource": "*"})
    return {"Version": "2012-10-17", "Statement": statements}


def _stub_code() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("stub.py", "")
    return buffer.getvalue()


def deploy(
    body: dict[str, Any],
    slack: Any,
    *,
    functions: Mapping[str, tuple[str, str | None]] = DEFAULT_FUNCTIONS,
    secrets: Mapping[str, str] | None = None,
    lambdas: Iterable[str] = (),
) -> Deployment:
    """The template's key, table, topic, queues, secrets and the roles of ``functions``
    (name -> handler suffix, guard), created on moto; each role assumed.

    ``secrets``: what each secret holds, by a part of its logical id (the Slack webhook's
    holds the stand-in's URL unless told otherwise; any other, a value of its own, as long
    as a generated key).
    ``lambdas``: logical ids of functions that must exist in moto's Lambda, as targets of
    an ``Invoke`` (moto's Lambda runs no code here: an invocation is recorded and answered,
    and the test hands its payload to the handler under the target's own role).
    """
    import boto3

    session = boto3.Session()
    probe = World(body)
    (key,) = probe.resources("AWS::KMS::Key")
    (table,) = probe.resources("AWS::DynamoDB::Table")
    (topic,) = probe.resources("AWS::SNS::Topic")
    physical: dict[str, dict[str, str]] = {}

    kms = session.client("kms", region_name=REGION)
    key_meta = kms.create_key(Description=probe.props(key)["Description"])["KeyMetadata"]
    physical[key] = {"Ref": key_meta["KeyId"], "KeyId": key_meta["KeyId"], "Arn": key_meta["Arn"]}
    partial = World(body, physical=dict(physical))

    ddb = session.client("dynamodb", region_name=REGION)
    props = partial.resolve(partial.props(table))
    name = "costguard-ledger"
    created = ddb.create_table(
        TableName=name,
        KeySchema=props["KeySchema"],
        AttributeDefinitions=props["AttributeDefinitions"],
        BillingMode=props["BillingMode"],
        SSESpecification={
            "Enabled": True,
            "SSEType": "KMS",
            "KMSMasterKeyId": props["SSESpecification"]["KMSMasterKeyId"],
        },
    )["TableDescription"]
    physical[table] = {"Ref": name, "Arn": created["TableArn"]}

    topic_arn, subscriber = encrypted_topic_with_subscriber(session, REGION, key_meta["Arn"])
    physical[topic] = {"Ref": topic_arn, "TopicArn": topic_arn, "TopicName": "costguard-alerts"}
    sqs = session.client("sqs", region_name=REGION)
    for queue, resource in probe.resources("AWS::SQS::Queue").items():
        url = sqs.create_queue(QueueName=queue, Attributes={"KmsMasterKeyId": key_meta["Arn"]})[
            "QueueUrl"
        ]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        physical[queue] = {"Ref": url, "QueueUrl": url, "Arn": arn, "QueueName": queue}
        assert "KmsMasterKeyId" in resource["Properties"]

    values = {"SlackWebhook": slack.secret, **(secrets or {})}
    manager = session.client("secretsmanager", region_name=REGION)
    for secret in probe.resources("AWS::SecretsManager::Secret"):
        # a generated secret has no name of its own: CloudFormation names it after its id
        secret_name = probe.props(secret).get("Name") or f"{secret}-AbCdEfGhIjKl"
        value = next(
            (v for part, v in values.items() if part in secret), f"{secret}-value-" + "k" * 32
        )
        secret_arn = manager.create_secret(
            Name=secret_name, SecretString=value, KmsKeyId=key_meta["Arn"]
        )["ARN"]
        physical[secret] = {"Ref": secret_arn, "Id": secret_arn, "Name": secret_name}

    iam = session.client("iam")
    logical = {n: find_function(probe, suffix, guard) for n, (suffix, guard) in functions.items()}
    roles = {probe.function_role(f) for f in logical.values()}
    for role in roles:
        trust = World(body, physical=dict(physical)).resolve(
            probe.props(role)["AssumeRolePolicyDocument"]
        )
        created_role = iam.create_role(
            RoleName=f"costguard-{role}"[:64], AssumeRolePolicyDocument=json.dumps(trust)
        )["Role"]
        physical[role] = {
            "Ref": created_role["RoleName"],
            "Arn": created_role["Arn"],
            "RoleId": created_role["RoleId"],
        }
    targets = list(lambdas)
    if targets:
        # moto's Lambda with Docker off answers an invocation without running anything
        _moto_api("config", {"lambda": {"use_docker": False}})
        stub = iam.create_role(
            RoleName="costguard-lambda-stub",
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
        )["Role"]["Arn"]
        lam = session.client("lambda", region_name=REGION)
        for target in targets:
            # the name the template gives it (the answer Lambda's map names the guards so)
            named = partial.resolve(probe.props(target).get("FunctionName"))
            fn = lam.create_function(
                FunctionName=str(named or f"costguard-{target.lower()}")[:64],
                Runtime=str(probe.props(target)["Runtime"]),
                Role=stub,
                Handler=str(probe.props(target)["Handler"]),
                Code={"ZipFile": _stub_code()},
            )
            physical[target] = {"Ref": fn["FunctionName"], "Arn": fn["FunctionArn"]}
    world = World(body, physical=physical)
    sts = session.client("sts", region_name=REGION)
    credentials = {}
    for role in roles:
        iam.put_role_policy(
            RoleName=physical[role]["Ref"],
            PolicyName="synthesized",
            PolicyDocument=json.dumps(moto_dialect(world.policy_document(role))),
        )
        assumed = sts.assume_role(RoleArn=world.arn(role), RoleSessionName=f"iam-{role}"[:64])[
            "Credentials"
        ]
        credentials[role] = {
            "AWS_ACCESS_KEY_ID": assumed["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": assumed["SecretAccessKey"],
            "AWS_SESSION_TOKEN": assumed["SessionToken"],
        }
    return Deployment(world, session, subscriber, credentials, logical, slack.origin)


def _moto_api(path: str, document: Mapping[str, Any]) -> None:
    """POST to moto's own API on the server boto3 is pointed at (``AWS_ENDPOINT_URL``)."""
    import os
    import urllib.request

    request = urllib.request.Request(  # noqa: S310 - the loopback moto server
        f"{os.environ['AWS_ENDPOINT_URL']}/moto-api/{path}",
        data=json.dumps(document).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).close()  # noqa: S310


def moto_lambda_runs_docker() -> None:
    """moto's Lambda back to its default (what ``deploy(lambdas=...)`` switched off)."""
    _moto_api("config", {"lambda": {"use_docker": True}})


def function_environment(world: World, function: str) -> dict[str, str]:
    variables = world.resolve(world.props(function)["Environment"]["Variables"])
    return {k: str(v) for k, v in variables.items()}


def run_as(
    deployed: Deployment,
    function: str,
    event: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    recorder: Recorder,
    *,
    at: datetime | None = None,
) -> Any:
    """Invoke the function's handler as Lambda would: its environment, its role, IAM on.

    ``at``: the clock of the invocation (a scheduled event's is its ``time``, a launch
    event's a few seconds after it, the scan's MIDDAY); an answer needs it."""
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters.constants import DEFAULT_PROVIDERS
    from moto.core.authorization import enable_iam_authentication

    import costguard.adapters.slack as slack_adapter
    from costguard import events

    logical = deployed.functions[function]
    world = deployed.world
    env = {**function_environment(world, logical), **MOTO_OVERRIDES}
    for key, value in {**env, **deployed.credentials[world.function_role(logical)]}.items():
        monkeypatch.setenv(key, value)
    context = Context(logical, world.arn(logical))
    handler_name = str(world.props(logical)["Handler"])
    when = at
    if handler_name.endswith("scan.handler"):
        from costguard.handlers import scan

        when = when or MIDDAY  # the schedule's time is recent
        handler = scan.handler
    elif handler_name.endswith("act.handler"):
        from costguard.handlers import act

        when = when or datetime.fromisoformat(event["time"])
        handler = act.handler
    elif handler_name.endswith("on_launch.handler"):
        from costguard.handlers import on_launch

        # EventBridge delivers a launch event seconds after its time
        when = when or datetime.fromisoformat(event["time"]) + DELIVERY_LAG
        handler = on_launch.handler
    elif handler_name.endswith("answer.handler"):
        from costguard.handlers import answer

        assert when is not None, "an answer is taken at the instant of its request"
        handler = answer.handler
    else:
        import costguard.handlers.slack_notifier as notifier

        handler = notifier.handler
    if when is not None:
        monkeypatch.setattr(events, "CLOCK", lambda: when)
    # Powertools keeps one secrets client per process: make the handler build its own,
    # under the role's credentials, and drop it afterwards.
    monkeypatch.setitem(DEFAULT_PROVIDERS, "secrets", None)
    del DEFAULT_PROVIDERS["secrets"]
    # Slack's webhooks and Web API (views.open, for the Exempt… dialog) are the stand-in's,
    # wherever a module took the origins from (the answer desk's wiring imports them)
    import costguard.wiring.answers as answer_wiring

    for module in (slack_adapter, answer_wiring):
        for origin in ("SLACK_WEBHOOK_ORIGIN", "SLACK_API_ORIGIN"):
            if hasattr(module, origin):
                monkeypatch.setattr(module, origin, deployed.slack_origin)
    parameters.clear_caches()  # a warm container's secrets are not another role's
    # moto recomputes the signature of EKS's GET requests wrongly (SignatureDoesNotMatch
    # for a valid request); authorization, not signing, is under test here.
    from moto.iam.access_control import IAMRequest

    monkeypatch.setattr(IAMRequest, "check_signature", lambda self: None)
    with enable_iam_authentication():
        return handler(event, context)


# -- the pure check: each recorded call against the synthesized policies --------------------


_IAM_PREFIX = {"resourcegroupstaggingapi": "tag"}
_TRANSACT_ITEM_ACTION = {
    "Update": "UpdateItem",
    "Put": "PutItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


@dataclass(frozen=True)
class Need:
    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()


#: Instance id -> its tags, for the condition keys of EC2's tag-conditioned actions (the
#: actuator's test fills it; moto does not evaluate conditions, the evaluator here does).
INSTANCE_TAGS: dict[str, dict[str, str]] = {}


def needs(call: Call, world: World) -> list[Need]:
    """What IAM must allow for one call: its action(s), on which ARN, and implied KMS use."""
    prefix = _IAM_PREFIX.get(call.service, call.service)
    region, p = call.region, call.params
    arn = f"arn:aws:{call.service}:{region}:{ACCOUNT}"
    found: list[Need] = []
    if call.service == "ec2" and call.operation in ("StopInstances", "CreateTags", "DeleteTags"):
        ids = p.get("InstanceIds") or p.get("Resources") or []
        tag_keys = ",".join(t["Key"] for t in p.get("Tags", []))
        for instance in ids:
            context = tuple(
                (f"aws:ResourceTag/{k}", v) for k, v in INSTANCE_TAGS.get(instance, {}).items()
            ) + ((("aws:TagKeys", tag_keys),) if tag_keys else ())
            found.append(Need(f"ec2:{call.operation}", f"{arn}:instance/{instance}", context))
        return found
    if call.service == "dynamodb":
        for operation, table, partitions in _items(call, world):
            table_arn = f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{table}"
            # IAM's dynamodb:LeadingKeys: the partition key of every item the call touches
            leading = (("dynamodb:LeadingKeys", ",".join(partitions)),) if partitions else ()
            found.append(Need(f"dynamodb:{operation}", table_arn, leading))
            found += _key_use(world, table_arn, "dynamodb", ("kms:Decrypt",))
        return found
    if call.service == "lambda" and call.operation == "Invoke":
        function = str(p["FunctionName"])
        if not function.startswith("arn:"):
            function = f"arn:aws:lambda:{region}:{ACCOUNT}:function:{function}"
        return [Need("lambda:InvokeFunction", function)]
    if call.service == "sns" and call.operation == "Publish":
        found.append(Need("sns:Publish", p["TopicArn"]))
        return found + _key_use(world, p["TopicArn"], "sns", ("kms:GenerateDataKey", "kms:Decrypt"))
    if call.service == "secretsmanager":
        secret = p["SecretId"]
        if not secret.startswith("arn:"):
            logical = world.logical_for(secret)
            assert logical is not None, f"secret {secret} is not the stack's"
            secret = world.physical[logical]["Ref"]
        found.append(Need(f"secretsmanager:{call.operation}", secret))
        return found + _key_use(world, secret, "secretsmanager", ("kms:Decrypt",))
    if call.service == "eks" and call.operation != "ListClusters":
        cluster = p.get("name") or p["clusterName"]
        if call.operation == "DescribeNodegroup":
            ng = p["nodegroupName"]
            resource = f"{arn}:nodegroup/{cluster}/{ng}/00000000-0000-0000-0000-000000000000"
        else:
            resource = f"{arn}:cluster/{cluster}"
        return [Need(f"eks:{call.operation}", resource)]
    if call.service == "sagemaker":
        kinds = {
            "DescribeEndpoint": ("endpoint", "EndpointName"),
            "DescribeEndpointConfig": ("endpoint-config", "EndpointConfigName"),
            "DescribeTrainingJob": ("training-job", "TrainingJobName"),
        }
        if call.operation in kinds:
            kind, param = kinds[call.operation]
            return [Need(f"sagemaker:{call.operation}", f"{arn}:{kind}/{p[param].lower()}")]
        if call.operation == "ListTags":
            return [Need("sagemaker:ListTags", p["ResourceArn"])]
        notebook = p.get("NotebookInstanceName")
        resource = p.get("ResourceArn") or (
            f"{arn}:notebook-instance/{notebook.lower()}" if notebook else None
        )
        if resource is not None and call.operation in (
            "DescribeNotebookInstance",
            "StopNotebookInstance",
            "AddTags",
            "DeleteTags",
        ):
            keys = [t["Key"] for t in p.get("Tags", [])] + list(p.get("TagKeys", []))
            context = tuple(
                (f"aws:ResourceTag/{k}", v) for k, v in INSTANCE_TAGS.get(resource, {}).items()
            ) + ((("aws:TagKeys", ",".join(keys)),) if keys else ())
            return [Need(f"sagemaker:{call.operation}", resource, context)]
    if (call.service, call.operation) in _ACTION_OF:
        return [Need(_ACTION_OF[(call.service, call.operation)], "*")]
    return [Need(f"{prefix}:{call.operation}", "*")]


#: Operations whose IAM action is not named after them (the Service Authorization Reference).
_ACTION_OF = {("s3", "ListBuckets"): "s3:ListAllMyBuckets"}


def _hash_key(world: World, table: str) -> str | None:
    for logical, resource in world.resources("AWS::DynamoDB::Table").items():
        if world.physical[logical]["Ref"] == table:
            schema = resource["Properties"]["KeySchema"]
            return str(next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH"))
    return None


def _items(call: Call, world: World) -> list[tuple[str, str, list[str]]]:
    """(IAM action, table, the partitions it touches) for each table a DynamoDB call names."""
    p = call.params
    found: list[tuple[str, str, list[dict[str, Any]]]] = []
    if call.operation == "TransactWriteItems":
        for item in p["TransactItems"]:
            for kind, request in item.items():
                key = request.get("Key") or request.get("Item") or {}
                found.append((_TRANSACT_ITEM_ACTION[kind], request["TableName"], [key]))
    elif call.operation == "BatchWriteItem":
        for table, requests in p["RequestItems"].items():
            keys = [
                r.get("PutRequest", {}).get("Item") or r.get("DeleteRequest", {}).get("Key") or {}
                for r in requests
            ]
            found.append((call.operation, table, keys))
    elif call.operation == "BatchGetItem":
        for table, request in p["RequestItems"].items():
            found.append((call.operation, table, list(request.get("Keys", []))))
    elif "Key" in p or "Item" in p:
        found.append((call.operation, p["TableName"], [p.get("Key") or p.get("Item") or {}]))
    elif call.operation == "Query":
        # "pk = :pk" (or "#pk = :pk"): the partition it reads
        names = p.get("ExpressionAttributeNames", {})
        values = p.get("ExpressionAttributeValues", {})
        equal = re.findall(r"(#?\w+)\s*=\s*(:\w+)", p.get("KeyConditionExpression", ""))
        hash_key = _hash_key(world, p["TableName"])
        keys = [
            {hash_key: values[value]}
            for name, value in equal
            if names.get(name, name) == hash_key and value in values
        ]
        found.append((call.operation, p["TableName"], keys))
    else:
        found.append((call.operation, p["TableName"], []))
    out = []
    for operation, table, keys in found:
        hash_key = _hash_key(world, table)
        partitions = sorted(
            {str(k[hash_key].get("S", "")) for k in keys if hash_key in k} if hash_key else set()
        )
        out.append((operation, table, partitions))
    return out


def _key_use(world: World, resource_arn: str, service: str, actions: tuple[str, ...]) -> list[Need]:
    logical = world.logical_for(resource_arn)
    if logical is None:
        return []
    props = world.props(logical)
    key = props.get("KmsMasterKeyId") or props.get("KmsKeyId")
    key = key or props.get("SSESpecification", {}).get("KMSMasterKeyId")
    if key is None:
        return []
    key_arn = world.key_arn_of(world.resolve(key))
    context = (
        ("kms:ViaService", f"{service}.{REGION}.amazonaws.com"),
        ("kms:CallerAccount", ACCOUNT),
    )
    return [Need(a, key_arn, context) for a in actions]


def role_calls(deployed: Deployment, function: str, calls: list[Call]) -> list[Call]:
    """The calls signed with the function's role; a call signed by anyone else fails."""
    role = deployed.world.function_role(deployed.functions[function])
    own_key = deployed.credentials[role]["AWS_ACCESS_KEY_ID"]
    mine = [c for c in calls if c.access_key == own_key]
    strangers = {(c.service, c.operation) for c in calls if c.access_key != own_key}
    assert not strangers, f"calls not made with the function's role: {strangers}"
    return mine


def refused_by_moto(calls: Iterable[Call]) -> list[str]:
    """The calls moto's IAM enforcement refused (the adapters turn a refused read into a
    finding and go on: refusals are found in the recorded answers)."""
    return sorted(
        {
            f"{c.service}.{c.operation}: {c.status} {c.error}"
            for c in calls
            if c.status in (401, 403) or "Denied" in c.error or "Unrecognized" in c.error
        }
    )


def denied_by_policy(world: World, role: str, calls: Iterable[Call]) -> list[str]:
    """What the synthesized policy does not allow of the calls (action, ARN, conditions,
    the key they imply), one line per refused need."""
    denied = [
        f"{call.service}.{call.operation}: {need.action} on {need.resource}"
        for call in calls
        for need in needs(call, world)
        if not role_may(world, role, need.action, need.resource, dict(need.context))
    ]
    return sorted(set(denied))


def check_calls(deployed: Deployment, function: str, calls: list[Call]) -> set[str]:
    """Assert every call of the function's role is allowed; return the actions it used."""
    world = deployed.world
    role = world.function_role(deployed.functions[function])
    mine = role_calls(deployed, function, calls)
    assert mine, "the run made no AWS call"
    refused = refused_by_moto(mine)
    assert not refused, "calls moto refused:\n" + "\n".join(refused)
    denied = denied_by_policy(world, role, mine)
    assert not denied, "calls the synthesized policy does not allow:\n" + "\n".join(denied)
    return {need.action for call in mine for need in needs(call, world)}


def platform_needs(world: World, function: str) -> set[str]:
    """What the Lambda service itself does with the function's role: logs, traces, and
    dead letters into the encrypted queue (which needs the queue's key)."""
    props = world.props(function)
    needs = {"logs:CreateLogStream", "logs:PutLogEvents"}
    if props.get("TracingConfig", {}).get("Mode") == "Active":
        needs |= {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
    dead_letters = world.logical_for(world.resolve(props["DeadLetterConfig"]["TargetArn"]))
    assert dead_letters is not None
    needs.add("sqs:SendMessage")
    if "KmsMasterKeyId" in world.props(dead_letters):
        needs |= {"kms:GenerateDataKey", "kms:Decrypt"}
    return needs


def unused_grants(deployed: Deployment, function: str, used: set[str]) -> set[str]:
    """Actions the role is granted that neither the code nor the Lambda service used."""
    world = deployed.world
    logical = deployed.functions[function]
    needed = used | platform_needs(world, logical)
    granted = {
        a
        for s in world.role_statements(world.function_role(logical))
        if s["Effect"] == "Allow"
        for a in as_list(s["Action"])
    }
    return {
        g
        for g in granted - set(UNEXERCISED)
        if not any(fnmatch.fnmatchcase(action, g) for action in needed)
    }


@dataclass(frozen=True, order=True)
class Grant:
    """One action on one resource that an Allow statement of a role grants (and, for a
    ``ForAllValues`` list such as ``dynamodb:LeadingKeys``, one of its values)."""

    action: str
    resource: str
    when: str = ""  # "<key>=<value>"

    def __str__(self) -> str:
        return f"{self.action} on {self.resource}" + (f" [{self.when}]" if self.when else "")


def _each_value(statement: Mapping[str, Any]) -> list[tuple[str, str]]:
    """("key", "value") for each value of a ``ForAllValues:StringEquals`` list: each one is a
    grant of its own (a partition of the ledger, say), to be used by some call."""
    tests = statement.get("Condition", {}).get("ForAllValues:StringEquals", {})
    return [(k, str(v)) for k, values in tests.items() for v in as_list(values)]


def unused_statements(
    deployed: Deployment,
    function: str,
    calls: Iterable[Call],
    *,
    waived: Mapping[str, str] | None = None,
    only: Any = None,
) -> set[Grant]:
    """Each (action, resource, listed condition value) the role's Allow statements grant
    that no call of the run needed (its action, resource and the statement's conditions
    all met) and the Lambda service does not use (by action): finer than ``unused_grants``,
    so a second secret, a second function or a second ledger partition granted and never
    used shows.

    ``waived``: ``fnmatch`` patterns over ``str(Grant)``, each with the reason it stays
    granted. ``only``: a predicate on statements, to judge some of them."""
    world = deployed.world
    logical = deployed.functions[function]
    role = world.function_role(logical)
    wanted = [n for c in role_calls(deployed, function, list(calls)) for n in needs(c, world)]
    platform = platform_needs(world, logical)
    unused: set[Grant] = set()
    for statement in world.role_statements(role):
        if statement["Effect"] != "Allow" or (only is not None and not only(statement)):
            continue
        condition = statement.get("Condition")
        for action in as_list(statement["Action"]):
            if any(fnmatch.fnmatchcase(p, action) for p in platform):
                continue
            for resource in as_list(statement.get("Resource", "*")):
                for key, value in _each_value(statement) or [("", "")]:
                    grant = Grant(action, resource, f"{key}={value}" if key else "")
                    if any(fnmatch.fnmatchcase(str(grant), w) for w in waived or {}):
                        continue
                    if not any(
                        fnmatch.fnmatchcase(n.action.lower(), action.lower())
                        and fnmatch.fnmatchcase(n.resource, resource)
                        and condition_holds(condition, dict(n.context))
                        and (not key or value in dict(n.context).get(key, "").split(","))
                        for n in wanted
                    ):
                        unused.add(grant)
    return unused


def drain_alerts(deployed: Deployment) -> list[dict[str, Any]]:
    """What the alert topic's SQS subscriber received since the last drain."""
    from costguard_demo.plumbing import drain

    return drain(deployed.session, deployed.subscriber, REGION)
