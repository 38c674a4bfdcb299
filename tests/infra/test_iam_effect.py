"""Who may call what, with which key: the effect of the synthesized policies, not their presence.

Every template is resolved into one concrete account (``iam_model.World``) and its
identity, resource and key policies are evaluated together for each request the
deployed system will make: alarms publishing, Lambda and the scheduler writing dead
letters, SNS redriving, the notifier reading its secret. Each check runs on both
templates: one account, and an Organization hub (its work queue, fan-out and consumers).
"""

from __future__ import annotations

from typing import Any

import pytest

from costguard.iam import LEDGER_ACTIONS, scan_permissions
from tests.infra.iam_model import (
    ACCOUNT,
    REGION,
    Principal,
    World,
    as_list,
    evaluate,
    mutating,
    role_may,
    service_may_use_key,
    statements_of_roles,
)

pytestmark = pytest.mark.infra

TLS = {"aws:SecureTransport": "true"}
#: Actions the AWS APIs accept on "*" only, that write telemetry rather than resources.
NO_RESOURCE_LEVEL_WRITES = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
QUEUE_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")


@pytest.fixture(scope="module")
def single_world(body: dict[str, Any]) -> World:
    return World(body)


@pytest.fixture(scope="module", params=["single-account", "organization-hub"])
def world(request: pytest.FixtureRequest, single_world: World) -> World:
    if request.param == "single-account":
        return single_world
    return World(request.getfixturevalue("org_body"))


def _via(service: str) -> dict[str, str]:
    return {"kms:ViaService": f"{service}.{REGION}.amazonaws.com", "kms:CallerAccount": ACCOUNT}


def _own_arns(world: World) -> set[str]:
    """ARNs of what the stack itself creates (its table, topic, queues, logs, key, secret…)."""
    arns = set()
    for logical, values in world.physical.items():
        arns |= {v for k, v in values.items() if k in ("Arn", "TopicArn", "Id") or "arn:" in v}
        if world.resources()[logical]["Type"] == "AWS::Lambda::Function":
            arns.add(f"{world.arn(logical)}:*")  # its versions and aliases
    return {a for a in arns if a.startswith("arn:")}


# -- 2. alarms reach the topic ---------------------------------------------------------------


def test_every_alarm_can_publish_to_its_topic_and_use_the_topics_key(world: World) -> None:
    alarms = world.resources("AWS::CloudWatch::Alarm")
    assert alarms
    for logical, alarm in alarms.items():
        context = {
            **TLS,
            "aws:SourceAccount": ACCOUNT,
            "aws:SourceArn": world.arn(logical),
        }
        actions = world.resolve(
            alarm["Properties"].get("AlarmActions", []) + alarm["Properties"].get("OKActions", [])
        )
        assert actions, f"{logical} notifies nobody"
        for topic_arn in actions:
            topic = world.logical_for(topic_arn)
            assert topic is not None, f"{logical} publishes to a topic outside the stack"
            # GIVEN the alarm fires WHEN CloudWatch publishes THEN the topic policy allows it
            decision = evaluate(
                world.resource_policies(topic_arn),
                "sns:Publish",
                topic_arn,
                context,
                Principal(service="cloudwatch.amazonaws.com"),
            )
            assert decision.allowed, f"{logical}: cloudwatch may not publish to {topic_arn}"
            # AND CloudWatch may use the topic's key to encrypt the message
            key = world.props(topic).get("KmsMasterKeyId")
            if key is not None:
                key_arn = world.key_arn_of(world.resolve(key))
                for action in ("kms:Decrypt", "kms:GenerateDataKey"):
                    assert service_may_use_key(
                        world, "cloudwatch.amazonaws.com", action, key_arn, context
                    ), f"{logical}: cloudwatch may not {action} the topic's key"


def test_only_this_accounts_alarms_may_publish_to_the_topic(world: World) -> None:
    (topic,) = world.resources("AWS::SNS::Topic")
    topic_arn = world.physical[topic]["TopicArn"]
    statements = world.resource_policies(topic_arn)
    cloudwatch = Principal(service="cloudwatch.amazonaws.com")
    elsewhere = {**TLS, "aws:SourceAccount": "999999999999"}
    assert not evaluate(statements, "sns:Publish", topic_arn, elsewhere, cloudwatch).allowed
    # ... nor a non-alarm source of this account, nor anyone in plain HTTP
    ours = {"aws:SourceAccount": ACCOUNT}
    other = {**TLS, **ours, "aws:SourceArn": f"arn:aws:events:{REGION}:{ACCOUNT}:rule/x"}
    assert not evaluate(statements, "sns:Publish", topic_arn, other, cloudwatch).allowed
    alarm = {**ours, "aws:SourceArn": f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:x"}
    plain = {**alarm, "aws:SecureTransport": "false"}
    assert evaluate(statements, "sns:Publish", topic_arn, plain, cloudwatch).denied


# -- 3. encrypted queues are writable ------------------------------------------------------


def _redrivers(world: World, queue: str) -> set[str]:
    """Roles whose receives make SQS move messages into ``queue`` (a source queue's
    dead-letter queue): every role that may receive from such a source queue."""
    arn = world.arn(queue)
    roles: set[str] = set()
    for source, props in world.resources("AWS::SQS::Queue").items():
        redrive = world.resolve(props["Properties"].get("RedrivePolicy", {}))
        if redrive.get("deadLetterTargetArn") == arn:
            roles |= {
                role
                for role in world.resources("AWS::IAM::Role")
                if role_may(world, role, "sqs:ReceiveMessage", world.arn(source), TLS)
            }
    return roles


def _writers(world: World, queue: str) -> tuple[set[str], list[tuple[str, dict[str, str]]]]:
    """Roles and service principals that write to the queue, with each service's context
    (EventBridge once per rule whose target dead-letters into it: each rule must be able to)."""
    arn = world.arn(queue)
    roles: set[str] = set()
    services: dict[str, dict[str, str]] = {}
    rules: list[tuple[str, dict[str, str]]] = []
    for logical, rule in world.resources("AWS::Events::Rule").items():
        for target in world.resolve(rule["Properties"].get("Targets", [])):
            if target.get("DeadLetterConfig", {}).get("Arn") == arn:
                context = {"aws:SourceArn": world.arn(logical), "aws:SourceAccount": ACCOUNT}
                rules.append(("events.amazonaws.com", context))
    for logical, fn in world.resources("AWS::Lambda::Function").items():
        if world.resolve(fn["Properties"].get("DeadLetterConfig", {}).get("TargetArn")) == arn:
            roles.add(world.function_role(logical))
    for schedule in world.resources("AWS::Scheduler::Schedule").values():
        target = world.resolve(schedule["Properties"]["Target"])
        if target.get("DeadLetterConfig", {}).get("Arn") == arn:
            roles.add(world.role_by_arn(target["RoleArn"]))
    for subscription in world.resources("AWS::SNS::Subscription").values():
        props = world.resolve(subscription["Properties"])
        if props.get("RedrivePolicy", {}).get("deadLetterTargetArn") == arn:
            services["sns.amazonaws.com"] = {
                "aws:SourceArn": props["TopicArn"],
                "aws:SourceAccount": ACCOUNT,
            }
    # ... and anyone else a policy lets send to it
    for role in world.resources("AWS::IAM::Role"):
        if evaluate(world.role_statements(role), "sqs:SendMessage", arn).allowed:
            roles.add(role)
    for statement in world.resource_policies(arn):
        if statement["Effect"] == "Allow" and isinstance(statement.get("Principal"), dict):
            for service in as_list(statement["Principal"].get("Service")):
                if rules and service == "events.amazonaws.com":
                    continue
                services.setdefault(service, {"aws:SourceAccount": ACCOUNT})
    return roles, [*services.items(), *rules]


def test_every_writer_of_an_encrypted_queue_can_send_and_use_the_queues_key(
    world: World,
) -> None:
    encrypted = {
        q: world.key_arn_of(world.resolve(props["Properties"]["KmsMasterKeyId"]))
        for q, props in world.resources("AWS::SQS::Queue").items()
        if "KmsMasterKeyId" in props["Properties"]
    }
    assert len(encrypted) >= 2
    problems = []
    for queue, key_arn in encrypted.items():
        arn = world.arn(queue)
        roles, services = _writers(world, queue)
        redrivers = _redrivers(world, queue)
        assert roles or services or redrivers, f"{queue}: nobody writes to it"
        # SQS moves dead letters in the receive of the source queue's consumers.
        problems += [
            f"{role} receives from {queue}'s source but may not {action} its key"
            for role in sorted(redrivers)
            for action in QUEUE_KEY_ACTIONS
            if not role_may(world, role, action, key_arn, _via("sqs"))
        ]
        for role in sorted(roles):
            if not role_may(world, role, "sqs:SendMessage", arn, TLS):
                problems.append(f"{role} may not send to {queue}")
            problems += [
                f"{role} may send to {queue} but not {action} its key: dead letters are lost"
                for action in QUEUE_KEY_ACTIONS
                if not role_may(world, role, action, key_arn, _via("sqs"))
            ]
        for service, context in services:
            queue_policy = evaluate(
                world.resource_policies(arn),
                "sqs:SendMessage",
                arn,
                {**TLS, **context},
                Principal(service=service),
            )
            if not queue_policy.allowed:
                problems.append(f"{service} may not send to {queue}")
            problems += [
                f"{service} may send to {queue} but not {action} its key"
                for action in QUEUE_KEY_ACTIONS
                if not service_may_use_key(world, service, action, key_arn, context)
            ]
    assert not problems, "\n".join(problems)


def test_every_lambda_role_covers_what_the_lambda_service_does_with_it(world: World) -> None:
    for logical, fn in world.resources("AWS::Lambda::Function").items():
        role = world.function_role(logical)
        props = world.resolve(fn["Properties"])
        group = world.logical_for(props["LoggingConfig"]["LogGroup"])
        assert group is not None
        for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
            assert role_may(world, role, action, world.arn(group)), f"{logical}: {action}"
        if props.get("TracingConfig", {}).get("Mode") == "Active":
            assert role_may(world, role, "xray:PutTraceSegments", "*"), logical


def test_each_schedule_role_invokes_only_its_own_function_and_reads_the_schedule(
    world: World,
) -> None:
    schedules = [
        world.resolve(s["Properties"]) for s in world.resources("AWS::Scheduler::Schedule").values()
    ]
    targets = {props["Target"]["Arn"] for props in schedules}
    # One account: the scan's and each guard's Lambda, one schedule each. An Organization
    # hub: the fan-out takes the scan ticks and every guard's schedule (no guard Lambda).
    if world.resources("AWS::Lambda::EventSourceMapping"):
        assert len(targets) == 2 < len(schedules), "the fan-out and the price refresh"
    else:
        assert len(targets) == len(schedules) >= 2, "the scan's and each guard's, one each"
    assert len({props["Target"]["RoleArn"] for props in schedules}) == len(schedules)
    for props in schedules:
        role = world.role_by_arn(props["Target"]["RoleArn"])
        assert role_may(world, role, "lambda:InvokeFunction", props["Target"]["Arn"])
        assert role_may(world, role, "kms:Decrypt", props["KmsKeyArn"], _via("scheduler"))
        for other in [
            f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:someone-else",
            *(t for t in targets if t != props["Target"]["Arn"]),
        ]:
            assert not role_may(world, role, "lambda:InvokeFunction", other)
        trust = world.props(role)["AssumeRolePolicyDocument"]["Statement"]
        assert all(world.resolve(s).get("Condition") for s in trust), "confused-deputy guard"


def test_the_notifier_reads_its_secret_and_nothing_else(world: World) -> None:
    (secret,) = world.resources("AWS::SecretsManager::Secret")
    (notifier,) = [
        f
        for f, fn in world.resources("AWS::Lambda::Function").items()
        if fn["Properties"]["Handler"].endswith("slack_notifier.handler")
    ]
    role = world.function_role(notifier)
    secret_arn = world.physical[secret]["Ref"]
    assert role_may(world, role, "secretsmanager:GetSecretValue", secret_arn)
    key = world.key_arn_of(world.resolve(world.props(secret)["KmsKeyId"]))
    assert role_may(world, role, "kms:Decrypt", key, _via("secretsmanager"))
    other = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:other-AbCdEf"
    assert not role_may(world, role, "secretsmanager:GetSecretValue", other)


def test_the_scan_role_may_call_exactly_the_ledger_actions_on_the_table_and_use_its_key(
    single_world: World,
) -> None:
    world = single_world
    (table,) = world.resources("AWS::DynamoDB::Table")
    (scan,) = [
        f
        for f, fn in world.resources("AWS::Lambda::Function").items()
        if fn["Properties"]["Handler"].endswith("scan.handler")
    ]
    role = world.function_role(scan)
    table_arn = world.arn(table)
    granted = {
        a
        for s in world.role_statements(role)
        for a in as_list(s["Action"])
        if a.startswith("dynamodb:")
    }
    assert granted == set(LEDGER_ACTIONS)
    for action in LEDGER_ACTIONS:
        assert role_may(world, role, action, table_arn)
        assert not role_may(world, role, action, table_arn.replace("table/", "table/other-"))
    key = world.key_arn_of(world.resolve(world.props(table)["SSESpecification"]["KMSMasterKeyId"]))
    assert role_may(world, role, "kms:Decrypt", key, _via("dynamodb"))


# -- 1. mutations are scoped ---------------------------------------------------------------


def _tag_condition(statement: dict[str, Any]) -> bool:
    from costguard.iam import tag_conditioned

    return tag_conditioned(statement.get("Condition", {}))


def test_every_mutating_statement_names_costguards_own_resources_or_is_tag_conditioned(
    world: World,
) -> None:
    own = _own_arns(world)
    checked = 0
    for role, statement in statements_of_roles(world):
        if statement["Effect"] != "Allow":
            continue
        writes = [a for a in as_list(statement["Action"]) if mutating(a)]
        if not writes or set(writes) <= NO_RESOURCE_LEVEL_WRITES:
            continue
        checked += 1
        foreign = [r for r in as_list(statement["Resource"]) if r not in own]
        # Put/Update/Delete/Stop/Terminate/Publish on anything CostGuard did not create
        # must be limited by a tag condition (moto cannot check conditions: this does).
        from costguard.iam import account_scoped_s3, org_scoped_assume

        conditions = statement.get("Condition", {})
        assert (
            not foreign
            or _tag_condition(statement)
            or account_scoped_s3(writes, conditions)
            or org_scoped_assume(writes, conditions)
        ), (role, writes, foreign)
    assert checked >= 4  # ledger, topic, logs, queues at least


def test_every_declared_mutating_permission_carries_a_tag_condition() -> None:
    from costguard.adapters.ec2_actuator import Ec2InstanceActuator
    from costguard.guards import actuator_permissions

    declared = (
        *scan_permissions(cost_explorer=True),
        *Ec2InstanceActuator.permissions,
        *actuator_permissions(),
    )
    assert any(p.mutating for p in declared)
    from costguard.adapters.s3 import S3ObjectStore
    from costguard.iam import account_scoped_s3, tag_conditioned

    for permission in declared:
        if permission.mutating:
            # S3 deletes and lifecycle writes cannot be tag-conditioned (see iam.py): they
            # are limited to this account's buckets, and only those actions are.
            assert tag_conditioned(permission.conditions) or account_scoped_s3(
                permission.actions, permission.conditions
            ), permission
    for permission in S3ObjectStore.permissions:
        if permission.mutating:
            assert account_scoped_s3(permission.actions, permission.conditions), permission


def test_service_principals_may_use_the_key_only_for_this_account(world: World) -> None:
    (key,) = world.resources("AWS::KMS::Key")
    key_arn = world.arn(key)
    for statement in world.key_statements(key_arn):
        principal = statement.get("Principal", {})
        if isinstance(principal, dict) and "Service" in principal:
            service = as_list(principal["Service"])[0]
            foreign = {
                "aws:SourceAccount": "999999999999",
                "kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:{REGION}:999999999999:x",
            }
            for action in as_list(statement["Action"]):
                concrete = action.replace("*", "")
                assert not service_may_use_key(world, service, concrete, key_arn, foreign), (
                    service,
                    action,
                )
