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
from costguard.iam import LEDGER_ACTIONS
from costguard.names import Env, Metrics, OrgRoles
from costguard.settings import ORG_ENV_VARS, Settings, SettingsError
from costguard_infra.app_builder import ACKNOWLEDGEMENTS, acknowledgements_for, build_app
from costguard_infra.config import ConfigError, CostGuardConfig
from costguard_infra.hub import CONSUMER_HANDLER, FANOUT_HANDLER, VISIBILITY_PER_TIMEOUT
from tests.infra.iam_model import ACCOUNT, REGION, Principal, World, as_list, evaluate, role_may
from tests.infra.synth import CONTEXT, ORG_CONTEXT, ORG_ID, ROOT, nag_findings, synthesize_org

pytestmark = pytest.mark.infra

MEMBER = "222222222222"
TLS = {"aws:SecureTransport": "true"}
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


def _queues(world: World) -> tuple[str, str]:
    """The work queue and its dead-letter queue."""
    fifo = {
        k: q
        for k, q in world.resources("AWS::SQS::Queue").items()
        if q["Properties"].get("FifoQueue")
    }
    (work,) = [k for k, q in fifo.items() if "RedrivePolicy" in q["Properties"]]
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
        s.context_key: v
        for s, v in zip(
            ORG_CONTEXT_SETTINGS,
            ["", ORG_ID, "team-reader", "3", "50", "12", "5", "team:opt-out", "5"],
            strict=True,
        )
    }
    assert others["orgAccounts"] == ""
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
    # The ledger, its key and the alert topic survive a switch either way (no replacement).
    single, hub = set(body["Resources"]), set(org_body["Resources"])
    assert {k for k in single - hub if not k.startswith(("Scan", "MonitoringScan"))} == set()
    added = hub - single
    assert added and all(
        k.startswith(("OrgHub", "MonitoringOrg", "MonitoringFanout")) for k in added
    )


# -- the work queue ------------------------------------------------------------------------


def test_work_queue_is_fifo_encrypted_without_content_dedup_and_redrives_to_a_fifo_dlq(
    org: World,
) -> None:
    work, dead = _queues(org)
    props, dlq = org.props(work), org.props(dead)
    # The producer's MessageDeduplicationId (time/account/region) decides, not the body.
    assert not props.get("ContentBasedDeduplication")
    assert props["RedrivePolicy"]["maxReceiveCount"] == 3
    assert dlq["FifoQueue"] is True
    for queue in (props, dlq):
        assert org.key_arn_of(org.resolve(queue["KmsMasterKeyId"]))
    assert dlq["MessageRetentionPeriod"] > props["MessageRetentionPeriod"]  # dead letters outlive


def test_work_queue_visibility_is_six_times_the_consumer_timeout(org: World) -> None:
    work, _dead = _queues(org)
    timeout = org.props(_function(org, CONSUMER_HANDLER))["Timeout"]
    assert org.props(work)["VisibilityTimeout"] >= VISIBILITY_PER_TIMEOUT * timeout == 6 * 600


@pytest.mark.parametrize("which", [0, 1])
def test_work_queues_refuse_plain_http(org: World, which: int) -> None:
    queue = _queues(org)[which]
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
    (mapping,) = org.resources("AWS::Lambda::EventSourceMapping").values()
    props = mapping["Properties"]
    work, _dead = _queues(org)
    assert org.resolve(props["EventSourceArn"]) == org.arn(work)
    assert props["FunctionName"] == {"Ref": _function(org, CONSUMER_HANDLER)}
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
    # Only the fan-out sends work, to the work queue.
    assert Env.QUEUE_URL not in consumer
    work, _dead = _queues(org)
    assert fanout[Env.QUEUE_URL] == {"Ref": work}
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
    (mine,) = [s for s in schedules if s["Target"]["Arn"] == fanout_arn]
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


def test_only_the_consumer_may_assume_any_role(org: World) -> None:
    consumer = org.function_role(_function(org, CONSUMER_HANDLER))
    member = f"arn:aws:iam::{MEMBER}:role/{OrgRoles.MEMBER_READ}"
    for role in org.resources("AWS::IAM::Role"):
        if role != consumer:
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


# -- alarms and dashboard ----------------------------------------------------------------------


def test_a_dead_lettered_work_item_and_a_missing_fanout_alarm_the_topic(org: World) -> None:
    _work, dead = _queues(org)
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
    fanout_name = org.physical[_function(org, FANOUT_HANDLER)]["Ref"]
    (missing,) = [
        a
        for a in alarms
        if a.get("MetricName") == "Invocations"
        and {"Name": "FunctionName", "Value": fanout_name} in a.get("Dimensions", [])
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
    # ... while as many as fit are accepted, in order, without repeats
    fits = ",".join(f"{n:012d}" for n in range(1, 101))
    config = CostGuardConfig.from_context({"orgAccounts": f"{fits},000000000001", "orgId": ORG_ID})
    assert len(config.org_accounts) == 100 and config.org_accounts[0] == "000000000001"


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
    import importlib.util

    spec = importlib.util.spec_from_file_location("costguard_app", ROOT / "infra" / "app.py")
    assert spec is not None and spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    argv = ["-c", "orgAccounts=discover", "--context", f"orgId={ORG_ID}", "--context=x=a=b"]
    assert app.context_arguments(argv) == {
        "orgAccounts": "discover",
        "orgId": ORG_ID,
        "x": "a=b",
    }
    for bad in (["-c", "orgAccounts"], ["--org"], ["-c"]):
        with pytest.raises(ConfigError):
            app.context_arguments(bad)


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
