"""The Organization hub (``orgAccounts``): its work queue, fan-out and consumers, the one way
into member accounts, and a single-account stack that does not change at all.

Asserted on the effect where IAM is concerned (``iam_model``: may this role do this, here,
in this request context), and by properties, never by hashed logical ids, elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from costguard.config_spec import ORG_CONTEXT_SETTINGS
from costguard.domain.org_roles import OrgRoles
from costguard.env import Env
from costguard.iam import LEDGER_ACTIONS
from costguard.settings import ORG_ENV_VARS, Settings, SettingsError
from costguard.telemetry import Metrics
from costguard_infra.app_builder import ACKNOWLEDGEMENTS, acknowledgements_for, build_app
from costguard_infra.config import ConfigError, CostGuardConfig
from costguard_infra.hub import (
    ACT_HANDLER,
    CONSUMER_HANDLER,
    FANOUT_HANDLER,
    VISIBILITY_PER_TIMEOUT,
)
from tests.infra.iam_model import ACCOUNT, REGION, Principal, World, as_list, evaluate, role_may
from tests.infra.synth import CONTEXT, ORG_CONTEXT, ORG_ID, ROOT, nag_findings, synthesize_org

pytestmark = pytest.mark.infra

MEMBER = "222222222222"
TLS = {"aws:SecureTransport": "true"}


def _via(service: str) -> dict[str, str]:
    return {"kms:ViaService": f"{service}.{REGION}.amazonaws.com", "kms:CallerAccount": ACCOUNT}


#: An Organization hub with a configured list and a member role of its own name.
LIST_CONTEXT = {
    **CONTEXT,
    "orgAccounts": f"111111111111,{MEMBER}",
    "orgId": ORG_ID,
    "orgMemberRole": "team-reader",
}


@pytest.fixture(scope="module")
def org(org_body: dict[str, Any]) -> World:
    return World(org_body)


@pytest.fixture(scope="module")
def org_template() -> Any:
    return synthesize_org().template


def _synth_body(context: dict[str, Any]) -> dict[str, Any]:
    """A template as the app builds it (cdk-nag on), without bundling the code."""
    from tests.infra.synth import with_toy_guard

    outdir = tempfile.mkdtemp(prefix="costguard-hub-")
    with with_toy_guard():
        app, _stack = build_app({**context, "aws:cdk:bundling-stacks": []}, outdir=outdir)
        app.synth()
    body: dict[str, Any] = json.loads((Path(outdir) / "CostGuard.template.json").read_text())
    return body


def _without_code(body: dict[str, Any]) -> dict[str, Any]:
    """Resources, with each Lambda's code (an asset hash) and CDK's metadata left out."""
    out = {}
    for logical, resource in body["Resources"].items():
        copy = {k: v for k, v in resource.items() if k != "Metadata"}
        if resource["Type"] == "AWS::Lambda::Function":
            copy["Properties"] = {k: v for k, v in resource["Properties"].items() if k != "Code"}
        out[logical] = copy
    return out


@pytest.fixture(scope="module")
def list_body() -> dict[str, Any]:
    return _synth_body(LIST_CONTEXT)


def _function(world: World, handler: str) -> str:
    (logical,) = [
        k
        for k, f in world.resources("AWS::Lambda::Function").items()
        if f["Properties"]["Handler"] == handler
    ]
    return logical


def _mapping(world: World, handler: str) -> dict[str, Any]:
    """The event source mapping that feeds the function of ``handler``."""
    function = _function(world, handler)
    (mapping,) = [
        m["Properties"]
        for m in world.resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": function}
    ]
    return mapping


def _queues(world: World, handler: str = CONSUMER_HANDLER) -> tuple[str, str]:
    """The queue the function of ``handler`` consumes (by default the scan consumer's work
    queue; ACT_HANDLER: the act queue) and its dead-letter queue."""
    fifo = {
        k: q
        for k, q in world.resources("AWS::SQS::Queue").items()
        if q["Properties"].get("FifoQueue")
    }
    work = world.logical_for(world.resolve(_mapping(world, handler)["EventSourceArn"]))
    assert work is not None and work in fifo
    dead = world.logical_for(
        world.resolve(fifo[work]["Properties"]["RedrivePolicy"])["deadLetterTargetArn"]
    )
    assert dead is not None and dead in fifo
    return work, dead


# -- single-account mode: nothing of the hub, nothing changed -----------------------------------


def test_single_account_template_is_unchanged_by_org_settings_without_accounts(
    body: dict[str, Any],
) -> None:
    # GIVEN every Organization setting away from its default, but no accounts
    others = {
        "orgAccounts": "",
        "orgId": ORG_ID,
        "orgMemberRole": "team-reader",
        "orgPerAccountConcurrency": "3",
        "orgMaxConcurrency": "50",
        "orgProbeHours": "12",
        "orgSliceDeadlineMinutes": "5",
        "orgOptOutTag": "team:opt-out",
        "orgRegions": "enabled",
        "orgMaxReceives": "5",
    }
    assert set(others) == {s.context_key for s in ORG_CONTEXT_SETTINGS}  # every one of them
    # WHEN synthesized THEN the template is the default single-account one, resource by resource
    assert _without_code(_synth_body({**CONTEXT, **others})) == _without_code(body)


def test_single_account_stack_holds_no_hub_resource(body: dict[str, Any]) -> None:
    types = {r["Type"] for r in body["Resources"].values()}
    assert "AWS::Lambda::EventSourceMapping" not in types
    assert not [
        q
        for q in World(body).resources("AWS::SQS::Queue").values()
        if q["Properties"].get("FifoQueue")
    ]
    handlers = {
        f["Properties"]["Handler"] for f in World(body).resources("AWS::Lambda::Function").values()
    }
    assert not {FANOUT_HANDLER, CONSUMER_HANDLER} & handlers
    roles = [
        r["Properties"].get("RoleName") for r in World(body).resources("AWS::IAM::Role").values()
    ]
    assert OrgRoles.HUB_SCAN not in roles
    for fn in World(body).resources("AWS::Lambda::Function").values():
        assert not set(ORG_ENV_VARS) & set(fn["Properties"]["Environment"]["Variables"])


def test_switching_to_org_mode_keeps_every_other_resources_logical_id(
    body: dict[str, Any], org_body: dict[str, Any]
) -> None:
    from costguard.guards import SPECS
    from tests.support.toy import toy_spec

    # The ledger, its key and the alert topic survive a switch either way (no replacement).
    single, hub = set(body["Resources"]), set(org_body["Resources"])
    # Only the scan's and the guards' Lambdas (and their alarms) go; each guard's schedule
    # stays, and is updated in place to invoke the fan-out.
    guards = tuple(f"Guard{spec.construct_id}" for spec in (*SPECS.values(), toy_spec()))
    schedules = tuple(f"{g}Schedule" for g in guards)
    gone = single - hub
    assert {
        k
        for k in gone
        if not k.startswith(
            ("Scan", "MonitoringScan", *guards, *(f"Monitoring{g}" for g in guards))
        )
    } == set()
    assert not [k for k in gone if k.startswith(schedules)]
    assert {k for k in single & hub if k.startswith(schedules)}
    added = hub - single
    # ... and the default bus's policy for the member accounts' launch events.
    assert added and all(
        k.startswith(("OrgHub", "MonitoringOrg", "MonitoringFanout", "OrgLaunchEvents"))
        for k in added
    )


# -- the work queue ------------------------------------------------------------------------


CONSUMERS = pytest.mark.parametrize(
    "consumer", [CONSUMER_HANDLER, ACT_HANDLER], ids=["work-queue", "act-queue"]
)


@CONSUMERS
def test_work_queue_is_fifo_encrypted_without_content_dedup_and_redrives_to_a_fifo_dlq(
    org: World, consumer: str
) -> None:
    work, dead = _queues(org, consumer)
    props, dlq = org.props(work), org.props(dead)
    # The producer's MessageDeduplicationId (time/account/region, or time/account/guard)
    # decides, not the body.
    assert not props.get("ContentBasedDeduplication")
    assert props["RedrivePolicy"]["maxReceiveCount"] == 3
    assert props["FifoQueue"] is True and dlq["FifoQueue"] is True
    (key,) = org.resources("AWS::KMS::Key")
    for queue in (props, dlq):
        assert org.key_arn_of(org.resolve(queue["KmsMasterKeyId"])) == org.arn(key)
    # A day for the work, a fortnight for the dead letters (kept for inspection, redrive).
    assert (props["MessageRetentionPeriod"], dlq["MessageRetentionPeriod"]) == (
        86400,
        14 * 86400,
    )


def test_the_two_queues_and_their_dead_letters_are_four_distinct_queues(org: World) -> None:
    assert len({*_queues(org), *_queues(org, ACT_HANDLER)}) == 4


@CONSUMERS
def test_work_queue_visibility_is_six_times_the_consumer_timeout(org: World, consumer: str) -> None:
    work, _dead = _queues(org, consumer)
    timeout = org.props(_function(org, consumer))["Timeout"]
    assert org.props(work)["VisibilityTimeout"] == VISIBILITY_PER_TIMEOUT * timeout == 6 * 600


@CONSUMERS
@pytest.mark.parametrize("which", [0, 1])
def test_work_queues_refuse_plain_http(org: World, which: int, consumer: str) -> None:
    queue = _queues(org, consumer)[which]
    arn = org.arn(queue)
    fanout = org.function_role(_function(org, FANOUT_HANDLER))
    statements = org.resource_policies(arn)
    plain = {"aws:SecureTransport": "false"}
    who = Principal(role_arn=org.arn(fanout))
    assert evaluate(statements, "sqs:SendMessage", arn, plain, who).denied


# -- the consumer and the fan-out ----------------------------------------------------------


def test_consumer_reads_the_queue_in_batches_reporting_item_failures_under_a_concurrency_cap(
    org_template: Any, org: World
) -> None:
    props = _mapping(org, CONSUMER_HANDLER)
    work, _dead = _queues(org)
    assert org.resolve(props["EventSourceArn"]) == org.arn(work)
    assert props["BatchSize"] == 10
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["ScalingConfig"] == {"MaximumConcurrency": 20}


@pytest.mark.parametrize("handler", [CONSUMER_HANDLER, FANOUT_HANDLER])
def test_hub_lambdas_follow_the_lambda_conventions(org: World, handler: str) -> None:
    fn = org.props(_function(org, handler))
    assert fn["Runtime"] == "python3.13" and fn["Architectures"] == ["arm64"]
    assert fn["TracingConfig"] == {"Mode": "Active"}
    assert fn["LoggingConfig"]["LogFormat"] == "JSON"
    assert fn["KmsKeyArn"] and fn["Layers"] and fn["DeadLetterConfig"]
    assert (fn["MemorySize"], fn["Timeout"]) == (1024, 600)
    group = org.logical_for(org.resolve(fn["LoggingConfig"]["LogGroup"]))
    assert group is not None and org.props(group)["RetentionInDays"] == 90


def test_hub_lambdas_get_the_scan_settings_and_the_organizations(org: World) -> None:
    consumer = org.props(_function(org, CONSUMER_HANDLER))["Environment"]["Variables"]
    fanout = org.props(_function(org, FANOUT_HANDLER))["Environment"]["Variables"]
    expected = {
        Env.ORG_ACCOUNTS: "discover",
        Env.ORG_ID: ORG_ID,
        Env.MEMBER_ROLE: OrgRoles.MEMBER_READ,
        Env.PER_ACCOUNT_CONCURRENCY: "2",
        Env.PROBE_HOURS: "6",
        Env.SLICE_DEADLINE_MINUTES: "10",
        Env.ORG_OPT_OUT_TAG: "costguard:opt-out",
    }
    for variables in (consumer, fanout):
        assert {k: variables[k] for k in expected} == expected
        assert variables[Env.SCOPE] == {"Ref": "AWS::AccountId"}
        assert Env.TABLE_NAME in variables and Env.TOPIC_ARN in variables
    # Only the fan-out sends work, to the work queue, and guard runs, to the act queue.
    assert Env.QUEUE_URL not in consumer and Env.ACT_QUEUE_URL not in consumer
    work, _dead = _queues(org)
    act, _act_dead = _queues(org, ACT_HANDLER)
    assert fanout[Env.QUEUE_URL] == {"Ref": work}
    assert fanout[Env.ACT_QUEUE_URL] == {"Ref": act}
    assert consumer[Env.SERVICE_NAME] == Metrics.ORG_CONSUMER_SERVICE
    assert fanout[Env.SERVICE_NAME] == Metrics.ORG_FANOUT_SERVICE
    # AND the Lambdas read every one back
    for variables in (consumer, fanout):
        environ = {k: v if isinstance(v, str) else f"<{k}>" for k, v in variables.items()}
        settings = Settings.from_env(environ)
        assert (settings.org_accounts, settings.org_id) == (("discover",), ORG_ID)


def test_fanout_runs_on_the_scan_schedule_and_the_single_account_scan_does_not(
    org: World,
) -> None:
    schedules = [
        org.resolve(s["Properties"]) for s in org.resources("AWS::Scheduler::Schedule").values()
    ]
    fanout_arn = org.arn(_function(org, FANOUT_HANDLER))
    (mine,) = [
        s
        for s in schedules
        if s["Target"]["Arn"] == fanout_arn and "guard" not in json.loads(s["Target"]["Input"])
    ]
    assert mine["ScheduleExpression"] == "rate(15 minutes)"
    assert json.loads(mine["Target"]["Input"]) == {"time": "<aws.scheduler.scheduled-time>"}
    assert mine["Target"]["DeadLetterConfig"]["Arn"]
    handlers = {f["Properties"]["Handler"] for f in org.resources("AWS::Lambda::Function").values()}
    assert "costguard.handlers.scan.handler" not in handlers


# -- IAM: the one way into member accounts ----------------------------------------------------


def test_consumer_role_is_named_for_the_member_trust_and_may_assume_member_roles_in_the_org_only(
    org: World,
) -> None:
    role = org.function_role(_function(org, CONSUMER_HANDLER))
    assert org.props(role)["RoleName"] == OrgRoles.HUB_SCAN
    member = f"arn:aws:iam::{MEMBER}:role/{OrgRoles.MEMBER_READ}"
    in_org = {"aws:ResourceOrgID": ORG_ID}
    assert role_may(org, role, "sts:AssumeRole", member, in_org)
    # Not a role of the same name outside the Organization, nor without the key, nor another
    # role inside it (the actuator role is the hub guards', not the scan's).
    assert not role_may(org, role, "sts:AssumeRole", member, {"aws:ResourceOrgID": "o-zzzzzzzzzz"})
    assert not role_may(org, role, "sts:AssumeRole", member, {})
    act = f"arn:aws:iam::{MEMBER}:role/{OrgRoles.MEMBER_ACT}"
    assert not role_may(org, role, "sts:AssumeRole", act, in_org)
    # The partition is the stack's, never a hard-coded one.
    assert "arn:aws-cn:" not in json.dumps(org.role_statements(role))


@pytest.mark.parametrize(
    ("member_role", "handlers"),
    [
        # The scan consumer, and the on-launch Lambda (one launched resource).
        (OrgRoles.MEMBER_READ, (CONSUMER_HANDLER, "costguard.handlers.on_launch.handler")),
        (OrgRoles.MEMBER_ACT, (ACT_HANDLER,)),
    ],
    ids=["read", "act"],
)
def test_only_its_readers_or_its_actor_may_assume_each_member_role(
    org: World, member_role: str, handlers: tuple[str, ...]
) -> None:
    consumers = {org.function_role(_function(org, handler)) for handler in handlers}
    member = f"arn:aws:iam::{MEMBER}:role/{member_role}"
    for consumer in consumers:
        assert role_may(org, consumer, "sts:AssumeRole", member, {"aws:ResourceOrgID": ORG_ID})
    for role in org.resources("AWS::IAM::Role"):
        if role not in consumers:
            assert not role_may(
                org, role, "sts:AssumeRole", member, {"aws:ResourceOrgID": ORG_ID}
            ), role


def test_fanout_sends_to_the_work_queue_only_and_the_consumer_only_receives(org: World) -> None:
    work, dead = _queues(org)
    queue, dlq = org.arn(work), org.arn(dead)
    key = org.key_arn_of(org.resolve(org.props(work)["KmsMasterKeyId"]))
    via = {"kms:ViaService": f"sqs.{REGION}.amazonaws.com", "kms:CallerAccount": ACCOUNT}
    fanout = org.function_role(_function(org, FANOUT_HANDLER))
    consumer = org.function_role(_function(org, CONSUMER_HANDLER))
    assert role_may(org, fanout, "sqs:SendMessage", queue, TLS)
    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        assert role_may(org, fanout, action, key, via)
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:PurgeQueue"):
        assert not role_may(org, fanout, action, queue, TLS), action
    assert not role_may(org, fanout, "sqs:SendMessage", dlq, TLS)
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"):
        assert role_may(org, consumer, action, queue, TLS), action
    assert not role_may(org, consumer, "sqs:SendMessage", queue, TLS)
    assert not role_may(org, consumer, "sqs:PurgeQueue", queue, TLS)


@pytest.mark.parametrize("handler", [CONSUMER_HANDLER, FANOUT_HANDLER])
def test_hub_roles_commit_the_ledger_and_publish_alerts_and_nothing_more(
    org: World, handler: str
) -> None:
    role = org.function_role(_function(org, handler))
    (table,) = org.resources("AWS::DynamoDB::Table")
    (topic,) = org.resources("AWS::SNS::Topic")
    granted = {
        a
        for s in org.role_statements(role)
        for a in as_list(s["Action"])
        if a.startswith("dynamodb:")
    }
    assert granted == set(LEDGER_ACTIONS)
    for action in LEDGER_ACTIONS:
        assert role_may(org, role, action, org.arn(table))
        assert not role_may(org, role, action, org.arn(table).replace("table/", "table/other-"))
    key = org.key_arn_of(org.resolve(org.props(table)["SSESpecification"]["KMSMasterKeyId"]))
    via = {"kms:ViaService": f"dynamodb.{REGION}.amazonaws.com", "kms:CallerAccount": ACCOUNT}
    assert role_may(org, role, "kms:Decrypt", key, via)
    assert role_may(org, role, "sns:Publish", org.physical[topic]["TopicArn"])
    # No read of anyone's resources in the hub account: those go through member roles.
    actions = {a for s in org.role_statements(role) for a in as_list(s["Action"])}
    assert not {
        a for a in actions if a.split(":")[0] in {"ec2", "eks", "sagemaker", "tag", "ce", "s3"}
    }


def test_discovery_may_list_the_orgs_accounts_and_read_their_tags_and_nothing_else(
    org: World,
) -> None:
    fanout = org.function_role(_function(org, FANOUT_HANDLER))
    account = f"arn:aws:organizations::999999999999:account/{ORG_ID}/{MEMBER}"
    assert role_may(org, fanout, "organizations:ListAccounts", "*")
    assert role_may(org, fanout, "organizations:ListTagsForResource", account)
    other_org = account.replace(ORG_ID, "o-zzzzzzzzzz")
    assert not role_may(org, fanout, "organizations:ListTagsForResource", other_org)
    actions = {a for s in org.role_statements(fanout) for a in as_list(s["Action"])}
    assert {a for a in actions if a.startswith("organizations:")} == {
        "organizations:ListAccounts",
        "organizations:ListTagsForResource",
    }
    consumer = org.function_role(_function(org, CONSUMER_HANDLER))
    assert not role_may(org, consumer, "organizations:ListAccounts", "*")


def test_a_configured_account_list_needs_no_organizations_permission_and_uses_its_role_name(
    list_body: dict[str, Any],
) -> None:
    world = World(list_body)
    every = [
        a
        for r in world.resources("AWS::IAM::Role")
        for s in world.role_statements(r)
        for a in as_list(s["Action"])
    ]
    assert not [a for a in every if a.startswith("organizations:")]
    consumer = world.function_role(_function(world, CONSUMER_HANDLER))
    custom = f"arn:aws:iam::{MEMBER}:role/team-reader"
    default = f"arn:aws:iam::{MEMBER}:role/{OrgRoles.MEMBER_READ}"
    assert role_may(world, consumer, "sts:AssumeRole", custom, {"aws:ResourceOrgID": ORG_ID})
    assert not role_may(world, consumer, "sts:AssumeRole", default, {"aws:ResourceOrgID": ORG_ID})
    variables = world.props(_function(world, FANOUT_HANDLER))["Environment"]["Variables"]
    assert variables[Env.ORG_ACCOUNTS] == f"111111111111,{MEMBER}"


# -- the guards: their schedules, the act queue and the act consumer ----------------------------


def _guard_schedules(world: World) -> dict[str, dict[str, Any]]:
    """Each guard's schedule (its resolved properties), by the guard its input names."""
    found: dict[str, dict[str, Any]] = {}
    for schedule in world.resources("AWS::Scheduler::Schedule").values():
        props = world.resolve(schedule["Properties"])
        payload = json.loads(props["Target"]["Input"])
        if "guard" in payload:
            assert payload["guard"] not in found, "one schedule per guard"
            found[payload["guard"]] = props
    return found


def test_org_mode_deploys_no_guard_lambda_and_no_function_bound_to_a_guard(org: World) -> None:
    handlers = {f["Properties"]["Handler"] for f in org.resources("AWS::Lambda::Function").values()}
    assert "costguard.handlers.act.handler" not in handlers
    for fn in org.resources("AWS::Lambda::Function").values():
        assert Env.GUARD not in fn["Properties"]["Environment"]["Variables"]
    roles = [org.props(r).get("RoleName") for r in org.resources("AWS::IAM::Role")]
    assert roles.count(OrgRoles.HUB_ACT) == 1 and roles.count(OrgRoles.HUB_SCAN) == 1


def test_each_guard_schedule_invokes_the_fanout_with_its_name_and_the_scheduled_time_at_its_rate(
    body: dict[str, Any], org: World
) -> None:
    from costguard.guards import SPECS

    single, hub = _guard_schedules(World(body)), _guard_schedules(org)
    # Every guard, the shipped ones and the test-only toy (tests/infra/synth.py).
    assert set(hub) == set(single) == {*SPECS, "toy"}
    fanout_arn = org.arn(_function(org, FANOUT_HANDLER))
    fanout_dlq = org.resolve(org.props(_function(org, FANOUT_HANDLER))["DeadLetterConfig"])
    for guard, props in hub.items():
        target = props["Target"]
        assert target["Arn"] == fanout_arn, guard
        assert json.loads(target["Input"]) == {
            "time": "<aws.scheduler.scheduled-time>",
            "guard": guard,
        }
        # ... at the rate the same guard runs at in one account, and with its retries
        assert props["ScheduleExpression"] == single[guard]["ScheduleExpression"], guard
        assert target["RetryPolicy"] == single[guard]["Target"]["RetryPolicy"]
        assert props["State"] == "ENABLED" and props["KmsKeyArn"]
        # ... and what the scheduler cannot deliver goes to the fan-out's dead-letter queue
        assert target["DeadLetterConfig"]["Arn"] == fanout_dlq["TargetArn"]


def test_each_guard_schedule_role_may_invoke_the_fanout_and_no_other_function(
    org: World,
) -> None:
    fanout_arn = org.arn(_function(org, FANOUT_HANDLER))
    others = [
        org.arn(f) for f in org.resources("AWS::Lambda::Function") if org.arn(f) != fanout_arn
    ]
    for guard, props in _guard_schedules(org).items():
        role = org.role_by_arn(props["Target"]["RoleArn"])
        assert role_may(org, role, "lambda:InvokeFunction", fanout_arn), guard
        for other in others:
            assert not role_may(org, role, "lambda:InvokeFunction", other), (guard, other)
        for action in ("sqs:SendMessage", "sqs:ReceiveMessage"):
            for handler in (CONSUMER_HANDLER, ACT_HANDLER):
                work, _dead = _queues(org, handler)
                assert not role_may(org, role, action, org.arn(work), TLS), (guard, action)


def test_guard_schedules_are_not_in_the_scan_ticks_group_and_keep_the_default_trust(
    org: World,
) -> None:
    scan = _scan_tick_schedule(org)
    default = f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule-group/default"
    for guard, props in _guard_schedules(org).items():
        assert props.get("GroupName", "default") == "default" != scan["GroupName"], guard
        role = org.role_by_arn(props["Target"]["RoleArn"])
        (trust,) = org.resolve(org.props(role)["AssumeRolePolicyDocument"]["Statement"])
        assert trust["Condition"]["StringEquals"]["aws:SourceArn"] == default
    # The scan tick's role is assumable by the scheduler for its own group only.
    role = org.role_by_arn(scan["Target"]["RoleArn"])
    (trust,) = org.resolve(org.props(role)["AssumeRolePolicyDocument"]["Statement"])
    (group,) = org.resources("AWS::Scheduler::ScheduleGroup")
    assert trust["Condition"]["StringEquals"]["aws:SourceArn"] == org.arn(group)
    assert org.props(group)["Name"] == scan["GroupName"]


def test_act_consumer_takes_one_guard_run_per_invocation_reporting_failures_under_the_cap(
    org: World,
) -> None:
    props = _mapping(org, ACT_HANDLER)
    act, _dead = _queues(org, ACT_HANDLER)
    assert org.resolve(props["EventSourceArn"]) == org.arn(act)
    assert props["BatchSize"] == 1
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["ScalingConfig"] == {"MaximumConcurrency": 20}


def test_act_consumer_is_the_named_act_lambda_with_the_hub_environment(org: World) -> None:
    from costguard.guards import SPECS
    from costguard.services.executor import ACTION_LEASE
    from tests.support.toy import toy_spec

    logical = _function(org, ACT_HANDLER)
    fn = org.props(logical)
    assert org.props(org.function_role(logical))["RoleName"] == OrgRoles.HUB_ACT
    # Ten minutes: under the executor's claim lease, so a run never outlives its claims.
    assert fn["Timeout"] == 600 < ACTION_LEASE.total_seconds()
    # Whichever guard a message names runs here: the most memory any guard asks for.
    assert fn["MemorySize"] == max(s.memory_mb for s in (*SPECS.values(), toy_spec()))
    assert fn["Runtime"] == "python3.13" and fn["Architectures"] == ["arm64"]
    assert fn["TracingConfig"] == {"Mode": "Active"}
    assert fn["LoggingConfig"]["LogFormat"] == "JSON"
    assert fn["KmsKeyArn"] and fn["Layers"] and fn["DeadLetterConfig"]
    group = org.logical_for(org.resolve(fn["LoggingConfig"]["LogGroup"]))
    assert group is not None and org.props(group)["RetentionInDays"] == 90
    # The scan consumer's environment (the hub's), under its own service name.
    act = fn["Environment"]["Variables"]
    scan = org.props(_function(org, CONSUMER_HANDLER))["Environment"]["Variables"]
    assert act[Env.SERVICE_NAME] == Metrics.ORG_ACT_SERVICE
    assert {k: v for k, v in act.items() if k != Env.SERVICE_NAME} == {
        k: v for k, v in scan.items() if k != Env.SERVICE_NAME
    }
    assert act[Env.DRY_RUN] == "true"  # the deployment's, as in one account


def test_act_consumer_may_assume_the_member_act_role_in_the_org_only_and_never_the_read_role(
    org: World, list_body: dict[str, Any]
) -> None:
    role = org.function_role(_function(org, ACT_HANDLER))
    act = f"arn:aws:iam::{MEMBER}:role/{OrgRoles.MEMBER_ACT}"
    in_org = {"aws:ResourceOrgID": ORG_ID}
    assert role_may(org, role, "sts:AssumeRole", act, in_org)
    assert not role_may(org, role, "sts:AssumeRole", act, {"aws:ResourceOrgID": "o-zzzzzzzzzz"})
    assert not role_may(org, role, "sts:AssumeRole", act, {})
    for other in (OrgRoles.MEMBER_READ, "team-reader", "costguard-member-act-x", "admin"):
        member = f"arn:aws:iam::{MEMBER}:role/{other}"
        assert not role_may(org, role, "sts:AssumeRole", member, in_org), other
    # ... with a member read role of another name too, and the scan consumer never acts
    world = World(list_body)
    listed = world.function_role(_function(world, ACT_HANDLER))
    scan = world.function_role(_function(world, CONSUMER_HANDLER))
    reader = f"arn:aws:iam::{MEMBER}:role/team-reader"
    assert role_may(world, listed, "sts:AssumeRole", act, in_org)
    assert not role_may(world, listed, "sts:AssumeRole", reader, in_org)
    assert not role_may(world, scan, "sts:AssumeRole", act, in_org)
    assert "arn:aws-cn:" not in json.dumps(org.role_statements(role))


def test_act_consumer_commits_the_guards_records_and_publishes_and_reads_nothing_in_the_hub(
    org: World,
) -> None:
    from costguard.iam import EXECUTOR_LEDGER_ACTIONS, FINDINGS_LEDGER_ACTIONS

    role = org.function_role(_function(org, ACT_HANDLER))
    (table,) = org.resources("AWS::DynamoDB::Table")
    (topic,) = org.resources("AWS::SNS::Topic")
    table_arn = org.arn(table)
    # Claims, warnings and the audit trail (the executor's), and findings (read the day,
    # write what is new), on the ledger table only
    for action in ("GetItem", "PutItem", "UpdateItem", "Query", "BatchWriteItem"):
        assert role_may(org, role, f"dynamodb:{action}", table_arn), action
        assert not role_may(org, role, f"dynamodb:{action}", table_arn + "-other"), action
    for action in ("DeleteItem", "Scan", "DeleteTable"):
        assert not role_may(org, role, f"dynamodb:{action}", table_arn), action
    granted = {
        a
        for s in org.role_statements(role)
        for a in as_list(s["Action"])
        if a.startswith("dynamodb:")
    }
    assert granted == {*EXECUTOR_LEDGER_ACTIONS, *FINDINGS_LEDGER_ACTIONS}
    key = org.key_arn_of(org.resolve(org.props(table)["SSESpecification"]["KMSMasterKeyId"]))
    assert role_may(org, role, "kms:Decrypt", key, _via("dynamodb"))
    topic_arn = org.physical[topic]["TopicArn"]
    assert role_may(org, role, "sns:Publish", topic_arn)
    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        assert role_may(org, role, action, key, _via("sns"))
    # Nothing of anyone's in the hub account itself: that goes through its member act role.
    actions = {a for s in org.role_statements(role) for a in as_list(s["Action"])}
    assert not {
        a
        for a in actions
        if a.split(":")[0]
        in {"ec2", "eks", "sagemaker", "tag", "ce", "s3", "cloudwatch"}
        | {"organizations", "lambda"}
    }


def test_act_consumer_receives_only_guard_runs_and_can_dead_letter_them_with_the_dlq_key(
    org: World,
) -> None:
    role = org.function_role(_function(org, ACT_HANDLER))
    act, act_dead = _queues(org, ACT_HANDLER)
    work, work_dead = _queues(org)
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"):
        assert role_may(org, role, action, org.arn(act), TLS), action
        assert not role_may(org, role, action, org.arn(work), TLS), action
    for queue in (act, act_dead, work, work_dead):
        assert not role_may(org, role, "sqs:SendMessage", org.arn(queue), TLS), queue
        assert not role_may(org, role, "sqs:PurgeQueue", org.arn(queue), TLS), queue
    # SQS moves a run that failed orgMaxReceives times in the consumer's receive: the
    # consumer must be able to use the act dead-letter queue's key for it
    dead_key = org.key_arn_of(org.resolve(org.props(act_dead)["KmsMasterKeyId"]))
    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        assert role_may(org, role, action, dead_key, _via("sqs")), action
    # ... and the scan consumer may not receive guard runs
    scan = org.function_role(_function(org, CONSUMER_HANDLER))
    assert not role_may(org, scan, "sqs:ReceiveMessage", org.arn(act), TLS)


def test_fanout_may_send_guard_runs_to_the_act_queue_with_its_key_and_gains_nothing_else(
    org: World, body: dict[str, Any]
) -> None:
    fanout = org.function_role(_function(org, FANOUT_HANDLER))
    act, _act_dead = _queues(org, ACT_HANDLER)
    work, _work_dead = _queues(org)
    key = org.key_arn_of(org.resolve(org.props(act)["KmsMasterKeyId"]))
    assert role_may(org, fanout, "sqs:SendMessage", org.arn(act), TLS)
    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        assert role_may(org, fanout, action, key, _via("sqs"))
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:PurgeQueue"):
        assert not role_may(org, fanout, action, org.arn(act), TLS), action
    # It sends to the two queues and (as Lambda, its failed events) its dead-letter queue
    # only: not to the dead letters, not to any other queue of the stack
    own_dlq = org.logical_for(
        org.resolve(org.props(_function(org, FANOUT_HANDLER))["DeadLetterConfig"]["TargetArn"])
    )
    may_send = {
        q
        for q in org.resources("AWS::SQS::Queue")
        if role_may(org, fanout, "sqs:SendMessage", org.arn(q), TLS)
    }
    assert may_send == {work, act, own_dlq}
    # It invokes no function (the schedules invoke it), and enters no account
    for fn in org.resources("AWS::Lambda::Function"):
        assert not role_may(org, fanout, "lambda:InvokeFunction", org.arn(fn)), fn
    for member_role in (OrgRoles.MEMBER_ACT, OrgRoles.MEMBER_READ):
        member = f"arn:aws:iam::{MEMBER}:role/{member_role}"
        assert not role_may(org, fanout, "sts:AssumeRole", member, {"aws:ResourceOrgID": ORG_ID})


def test_the_act_queue_the_dlq_and_the_act_role_are_outputs(org: World) -> None:
    act, act_dead = _queues(org, ACT_HANDLER)
    role = org.function_role(_function(org, ACT_HANDLER))
    outputs = {k: v["Value"] for k, v in org.template["Outputs"].items()}

    def output(name: str) -> Any:
        (value,) = [v for k, v in outputs.items() if re.fullmatch(f"OrgHub{name}[0-9A-F]{{8}}", k)]
        return value

    assert output("ActQueueUrl") == {"Ref": act}
    assert output("ActDeadLetterQueueUrl") == {"Ref": act_dead}
    assert output("HubActRoleArn") == {"Fn::GetAtt": [role, "Arn"]}


# -- alarms and dashboard ----------------------------------------------------------------------


@CONSUMERS
def test_a_dead_lettered_work_item_or_guard_run_alarms_the_topic(org: World, consumer: str) -> None:
    _work, dead = _queues(org, consumer)
    alarms = [
        org.resolve(a["Properties"]) for a in org.resources("AWS::CloudWatch::Alarm").values()
    ]
    (topic,) = org.resources("AWS::SNS::Topic")
    topic_arn = org.physical[topic]["TopicArn"]
    dlq_name = org.physical[dead]["QueueName"]
    (on_dlq,) = [
        a
        for a in alarms
        if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"
        and {"Name": "QueueName", "Value": dlq_name} in a.get("Dimensions", [])
    ]
    assert (on_dlq["Threshold"], on_dlq["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert on_dlq["AlarmActions"] == [topic_arn]


def _scan_tick_schedule(world: World) -> dict[str, Any]:
    fanout_arn = world.arn(_function(world, FANOUT_HANDLER))
    (scan,) = [
        props
        for props in (
            world.resolve(s["Properties"])
            for s in world.resources("AWS::Scheduler::Schedule").values()
        )
        if props["Target"]["Arn"] == fanout_arn
        and "guard" not in json.loads(props["Target"]["Input"])
    ]
    return scan


def test_a_missing_scan_tick_alarms_the_topic_whatever_the_guards_schedules_do(
    org: World,
) -> None:
    alarms = [
        org.resolve(a["Properties"]) for a in org.resources("AWS::CloudWatch::Alarm").values()
    ]
    (topic,) = org.resources("AWS::SNS::Topic")
    topic_arn = org.physical[topic]["TopicArn"]
    # The guards' schedules invoke the fan-out too (hourly, half-hourly): its invocations
    # would hide a scan schedule that stopped. The heartbeat is the scan tick's schedule
    # group, which holds that schedule and no other.
    scan = _scan_tick_schedule(org)
    group = scan["GroupName"]
    in_group = [
        s
        for s in org.resources("AWS::Scheduler::Schedule").values()
        if org.resolve(s["Properties"]).get("GroupName") == group
    ]
    assert len(in_group) == 1
    (missing,) = [
        a
        for a in alarms
        if a.get("Namespace") == "AWS/Scheduler"
        and a.get("MetricName") == "InvocationAttemptCount"
        and a.get("Dimensions") == [{"Name": "ScheduleGroup", "Value": group}]
    ]
    assert missing["TreatMissingData"] == "breaching"
    assert missing["ComparisonOperator"] == "LessThanThreshold" and missing["Threshold"] == 1
    assert missing["Period"] == 1800 and missing["AlarmActions"] == [topic_arn]
    # No single-account scan, so no alarm waits for its ScanCompleted.
    assert not [a for a in alarms if a.get("MetricName") == Metrics.SCAN_COMPLETED]


def test_dashboard_reads_the_figures_from_the_hub_lambdas_and_shows_the_queue(org: World) -> None:
    (dashboard,) = org.resources("AWS::CloudWatch::Dashboard").values()
    text = json.dumps(org.resolve(dashboard["Properties"]["DashboardBody"]))
    for handler in (CONSUMER_HANDLER, FANOUT_HANDLER):
        fn = org.props(_function(org, handler))
        group = org.resolve(fn["LoggingConfig"]["LogGroup"])
        assert group in text
    work, dead = _queues(org)
    assert org.physical[work]["QueueName"] in text and org.physical[dead]["QueueName"] in text


def _widgets(world: World) -> list[dict[str, Any]]:
    (dashboard,) = world.resources("AWS::CloudWatch::Dashboard").values()
    body = json.loads(world.resolve(dashboard["Properties"]["DashboardBody"]))
    widgets: list[dict[str, Any]] = body["widgets"]
    return widgets


def test_dashboard_counts_the_guards_savings_from_the_act_consumer_and_shows_the_act_queue(
    org: World,
) -> None:
    from costguard_infra.dashboard import savings_query

    act_group = org.resolve(org.props(_function(org, ACT_HANDLER))["LoggingConfig"]["LogGroup"])
    # The act consumer logs each run's actions (handlers.act.log_run): the savings widget
    # reads them there, the only Lambda that acts in Organization mode.
    (savings,) = [
        w
        for w in _widgets(org)
        if w["type"] == "log" and savings_query() in w["properties"]["query"]
    ]
    assert f"SOURCE '{act_group}'" in savings["properties"]["query"]
    act, act_dead = _queues(org, ACT_HANDLER)
    act_consumer = org.physical[_function(org, ACT_HANDLER)]["Ref"]
    graphs = json.dumps([w for w in _widgets(org) if w["type"] == "metric"])
    for shown in (
        org.physical[act]["QueueName"],
        org.physical[act_dead]["QueueName"],
        act_consumer,
    ):
        assert shown in graphs, shown


# -- cdk-nag: zero unacknowledged findings, no acknowledgement without a finding ---------------


@pytest.mark.parametrize("context", [ORG_CONTEXT, LIST_CONTEXT], ids=["discover", "list"])
def test_every_hub_acknowledgement_matches_a_finding_and_every_finding_is_acknowledged(
    context: dict[str, Any],
) -> None:
    config = CostGuardConfig.from_context({k: v for k, v in context.items() if ":" not in k})
    applied = acknowledgements_for(config)
    findings = nag_findings({}, context)
    assert sorted(set(applied) - findings) == [], "acknowledgements that match no finding"
    assert sorted(findings - set(applied)) == [], "findings nobody acknowledged"
    assert all(len(reason) > 30 for reason in applied.values())


def test_single_account_acknowledgements_are_the_stacks_own() -> None:
    assert acknowledgements_for(CostGuardConfig()) == ACKNOWLEDGEMENTS


def test_org_template_synthesizes_with_nag_and_passes_cfn_lint() -> None:
    synth = synthesize_org()  # raises on any unacknowledged finding
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    done = subprocess.run(
        [str(cfn_lint), "--format", "parseable", str(synth.directory / "CostGuard.template.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert [line for line in done.stdout.splitlines() if ":E" in line] == [], done.stdout
    assert done.returncode in (0, 4), done.stdout + done.stderr


# -- configuration: clear errors, never a traceback ---------------------------------------------


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"orgAccounts": "discover"}, "`orgId` is required when `orgAccounts` is set"),
        (
            {"orgAccounts": "12345", "orgId": ORG_ID},
            "`orgAccounts` must be `discover` alone or 12-digit",
        ),
        ({"orgAccounts": "discover,111111111111", "orgId": ORG_ID}, "`orgAccounts` must be"),
        ({"orgAccounts": "１１１１１１１１１１１１", "orgId": ORG_ID}, "`orgAccounts` must be"),
        (
            {"orgAccounts": "discover", "orgId": "o-ABC1234567"},
            "`orgId` must be an AWS Organization id",
        ),
        ({"orgMemberRole": "reader role"}, "`orgMemberRole` must be an IAM role name"),
        ({"orgMemberRole": "r" * 65}, "`orgMemberRole` must be an IAM role name"),
        # The scan consumers would be granted the guards' role (and IAM role names are
        # unique whatever their case: the member stack could not hold both).
        (
            {"orgAccounts": "discover", "orgId": ORG_ID, "orgMemberRole": OrgRoles.MEMBER_ACT},
            f"`orgMemberRole` must not be `{OrgRoles.MEMBER_ACT}`",
        ),
        ({"orgMemberRole": "Costguard-Member-Act"}, "`orgMemberRole` must not be"),
        ({"orgMaxConcurrency": "1"}, "`orgMaxConcurrency`"),
        ({"orgMaxConcurrency": "1001"}, "`orgMaxConcurrency`"),
        ({"orgPerAccountConcurrency": "0"}, "`orgPerAccountConcurrency`"),
        ({"orgMaxReceives": "0"}, "`orgMaxReceives`"),
        ({"orgProbeHours": "169"}, "`orgProbeHours`"),
        ({"orgSliceDeadlineMinutes": "0"}, "`orgSliceDeadlineMinutes`"),
        ({"orgOptOutTag": ""}, "`orgOptOutTag` must be a tag key"),
        (
            {"orgAccounts": "discover", "orgId": ORG_ID, "costExplorer": "true"},
            "`costExplorer` is not available with `orgAccounts` yet",
        ),
    ],
)
def test_bad_org_context_is_a_clear_error(context: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match="invalid CostGuard context: .*" + re.escape(message)):
        build_app(context, outdir=tempfile.mkdtemp(prefix="costguard-hub-"))


def test_more_accounts_than_a_lambda_environment_holds_say_use_discover() -> None:
    accounts = ",".join(f"{n:012d}" for n in range(1, 301))
    with pytest.raises(
        ConfigError,
        match=r"`orgAccounts` makes the hub consumer Lambda's environment too large .*orgAccounts=discover",
    ):
        CostGuardConfig.from_context({"orgAccounts": accounts, "orgId": ORG_ID})
    # ... while as many as fit are accepted, in order, without repeats (97 with every
    # setting's variable written; each new setting takes a little of the 4 KB: the teams
    # map took two accounts' room)
    fits = ",".join(f"{n:012d}" for n in range(1, 98))
    config = CostGuardConfig.from_context({"orgAccounts": f"{fits},000000000001", "orgId": ORG_ID})
    assert len(config.org_accounts) == 97 and config.org_accounts[0] == "000000000001"


def test_what_the_stack_adds_to_each_hub_lambdas_variables_fits_the_room_kept_for_it(
    org_body: dict[str, Any],
) -> None:
    # The context's settings may take all of Lambda's 4 KB but STACK_VARIABLES_BYTES
    # (CostGuardConfig.environment_problem): what the stack adds, the two queue URLs of
    # the fan-out included, must fit the rest, with physical names as long as
    # CloudFormation makes them in a long region.
    from costguard.config_spec import STACK_VARIABLES_BYTES

    config = CostGuardConfig.from_context({k: v for k, v in ORG_CONTEXT.items() if ":" not in k})
    from_context = {**config.environment(), **config.org_environment()}
    region = "ap-southeast-2"
    long: dict[str, dict[str, str]] = {}
    for logical, resource in org_body["Resources"].items():
        name = f"CostGuard-{logical[:36]}-ABCDEFGHIJKLM"
        if resource["Type"] == "AWS::SQS::Queue":
            url = f"https://sqs.{region}.amazonaws.com/{ACCOUNT}/{name}.fifo"
            long[logical] = {"Ref": url, "QueueUrl": url}
        elif resource["Type"] in ("AWS::DynamoDB::Table", "AWS::Lambda::Function"):
            long[logical] = {"Ref": name}
        elif resource["Type"] == "AWS::SNS::Topic":
            arn = f"arn:aws-us-gov:sns:{region}:{ACCOUNT}:{name}"
            long[logical] = {"Ref": arn, "TopicArn": arn}
    world = World(org_body, region=region, physical=long)
    for handler in (CONSUMER_HANDLER, FANOUT_HANDLER, ACT_HANDLER):
        variables = world.resolve(
            world.props(_function(world, handler))["Environment"]["Variables"]
        )
        added = {k: v for k, v in variables.items() if k not in from_context}
        assert len(json.dumps(added).encode()) <= STACK_VARIABLES_BYTES, (handler, added)


def test_org_accounts_are_read_as_the_lambda_reads_them() -> None:
    config = CostGuardConfig.from_context({"orgAccounts": " Discover ", "orgId": f" {ORG_ID}\n"})
    assert (config.org_accounts, config.org_id, config.org_discover) == (
        ("discover",),
        ORG_ID,
        True,
    )
    as_json = CostGuardConfig.from_context({"orgAccounts": '["111111111111"]', "orgId": ORG_ID})
    assert as_json.org_accounts == ("111111111111",) and not as_json.org_discover
    assert not CostGuardConfig.from_context({"orgAccounts": " , "}).org_mode


def test_a_hub_lambda_without_its_org_id_refuses_to_start() -> None:
    with pytest.raises(SettingsError, match=f"{Env.ORG_ID}: is required when {Env.ORG_ACCOUNTS}"):
        Settings.from_env({Env.REGIONS: "us-east-1", Env.ORG_ACCOUNTS: "discover"})
    with pytest.raises(SettingsError, match=Env.ORG_ACCOUNTS):
        Settings.from_env({Env.REGIONS: "us-east-1", Env.ORG_ACCOUNTS: "1234", Env.ORG_ID: ORG_ID})
    plain = Settings.from_env({Env.REGIONS: "us-east-1"})
    assert (plain.org_accounts, plain.org_id, plain.queue_url) == ((), "", None)


# -- `make synth` / `cdk synth` with Organization context, no AWS account -------------------------


def _run_app(context: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """infra/app.py as the CDK CLI runs it (context and output directory from its variables)."""
    outdir = tempfile.mkdtemp(prefix="costguard-cli-")
    env = {
        **os.environ,
        "CDK_OUTDIR": outdir,
        "CDK_CONTEXT_JSON": json.dumps({**context, "aws:cdk:bundling-stacks": []}),
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "infra" / "app.py")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    done.outdir = outdir  # type: ignore[attr-defined]
    return done


def test_cdk_synth_with_org_context_works_without_an_account() -> None:
    done = _run_app({"orgAccounts": "discover", "orgId": ORG_ID})
    assert done.returncode == 0, done.stderr[-2000:]
    body = json.loads((Path(done.outdir) / "CostGuard.template.json").read_text())  # type: ignore[attr-defined]
    handlers = {
        r["Properties"].get("Handler")
        for r in body["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    }
    assert {FANOUT_HANDLER, CONSUMER_HANDLER} <= handlers


def test_cdk_synth_with_an_incomplete_org_context_exits_2_with_the_reason() -> None:
    done = _run_app({"orgAccounts": "discover"})
    assert done.returncode == 2
    assert "costguard: invalid CostGuard context: `orgId` is required" in done.stderr
    assert "Traceback" not in done.stderr


def test_make_synth_takes_context_as_the_cdk_cli_does() -> None:
    # (both entry points, infra/app.py and infra/member_app.py, parse them here)
    from costguard_infra.entry import SynthArguments, synth_arguments

    argv = ["-c", "orgAccounts=discover", "--context", f"orgId={ORG_ID}", "--context=x=a=b"]
    assert synth_arguments(argv) == SynthArguments(
        {"orgAccounts": "discover", "orgId": ORG_ID, "x": "a=b"}
    )
    assert synth_arguments(["-c", "a=1", "-o", "out"]).output == "out"
    assert synth_arguments(["--output=out"]).output == "out"
    for bad in (["-c", "orgAccounts"], ["--org"], ["-c"], ["-o"]):
        with pytest.raises(ConfigError):
            synth_arguments(bad)


# -- the grants and the calls: one declaration each ----------------------------------------


def test_discovery_grants_exactly_the_actions_the_organizations_adapter_declares() -> None:
    from costguard.iam import ORG_DISCOVERY, all_actions, org_discovery_permissions

    # The adapter declares its calls (ORG_DISCOVERY); the stack grants them, narrowed to
    # the Organization's accounts where IAM allows.
    assert all_actions(org_discovery_permissions(ORG_ID)) == all_actions(ORG_DISCOVERY)


def test_hub_roles_are_granted_every_dynamodb_action_the_org_adapters_call() -> None:
    import importlib

    from tests.infra.test_permissions import ledger_iam_actions

    checked = []
    for name in ("slices", "directory"):  # the plans, and (when present) the directory
        try:
            module = importlib.import_module(f"costguard.adapters.{name}")
        except ModuleNotFoundError:
            continue
        needed = ledger_iam_actions(module)
        assert needed and needed <= set(LEDGER_ACTIONS), (name, needed - set(LEDGER_ACTIONS))
        checked.append(name)
    assert "slices" in checked


def test_the_fanout_is_granted_what_the_work_queue_adapter_declares() -> None:
    import importlib

    from costguard_infra.hub import SEND_ACTIONS

    try:
        work_queue = importlib.import_module("costguard.adapters.work_queue")
    except ModuleNotFoundError:  # the Python side's adapter, once merged
        return
    assert tuple(work_queue.QUEUE_ACTIONS) == SEND_ACTIONS
