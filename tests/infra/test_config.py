"""Context -> stack -> Lambda environment -> Settings: every setting arrives, and unchanged.

The stack is built once with every setting at a value other than its default, so a
setting that the stack drops, or that a reader parses differently, shows up here. Twice:
as one account (the scan Lambda), and as an Organization hub (``orgAccounts``), whose
Lambdas get every variable the scan Lambda would, and the hub's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from aws_cdk.assertions import Capture, Match, Template

from costguard.config_spec import BY_NAME, CONTEXT_SETTINGS, ENV_SETTINGS, LOG_RETENTION_DAYS
from costguard.env import Env
from costguard.settings import ENV_VARS, ORG_ENV_VARS, Settings
from costguard_infra.config import CostGuardConfig

pytestmark = pytest.mark.infra

#: Every context key at a value other than its default, written as `-c` would give it.
NON_DEFAULT: dict[str, Any] = {
    "regions": "eu-west-1,ap-southeast-2",
    "scanRate": "30 minutes",
    "dryRun": "false",
    "warningPct": "85.5",
    "budgetThresholds": "110,90",
    "ttlHours": "24",
    "ebsSnapshotBeforeDelete": "false",
    "ebsSnapshotTtl": "14d",
    "sweepPrefixes": "tmp/,scratch/",
    # Empty is a value here (no keep prefix), not "unset": it must not come back as `keep/`.
    "sweepKeepPrefix": "",
    "sweepPurgeNoncurrent": "true",
    "sweepBreakerPct": "25",
    "sweepBreakerMaxGib": "10",
    "sweepBackstop": "false",
    "anomalyMinRatio": "3.5",
    "anomalyMinUsdPerHour": "20.25",
    "anomalyCooldownMinutes": "45",
    "digestHourUtc": "3",
    "scanFailedAlertAfter": "5",
    "adviceAlerts": "false",
    "adviceMinMonthlyUsd": "250",
    "costExplorer": "true",
    "alertEmails": "ops@example.com",
    "slackWebhookSecretName": "team/slack-webhook",
    # EC2 allows any character in a tag key: a comma must not split one.
    "projectTagKeys": json.dumps(["Cost Center", "team,x"]),
    "projects": json.dumps(
        {"vision": {"budget": "5,000", "owners": ["a@example.com"]}, "ビジョン": {"budget": 1}}
    ),
    "teams": json.dumps({"research": {"budget": "20,000", "owners": ["lead@example.com"]}}),
    "logRetentionDays": "30",
    "scanMemoryMb": "2048",
    "scanTimeoutSeconds": "300",
    "priceRefreshRate": "3 days",
    "priceChangeHoldPct": "25",
    "priceCatalogMaxAgeDays": "14",
    "idleMinutes": "90",
    "idleRate": "2 hours",
    "idleGpuPct": "3",
    "idleCpuPct": "2.5",
    "idleNetworkMb": "1",
    "idleMaxRuntimeHours": "8",
    "idleGraceMinutes": "120",
    "idleAllAccelerators": "true",
    "maxGpuHours": "72",
    "lifetimeGraceMinutes": "120",
    "idleGpuDiscovery": "list",
    "maxUsdPerHour": "40",
    "launchRegions": "eu-west-1",
    # Off here, on in the hub (ORG_NON_DEFAULT): each stack reads what it builds.
    "launchAlerts": "false",
    "onLaunchConcurrency": "7",
    # On here, refused in the hub (ORG_NON_DEFAULT): the answer endpoint is one account's.
    "answers": "true",
    "answerAdmins": "U024BE7LH,ops@example.com",
    "timeZone": "Europe/Paris",
    "slackSigningSecretName": "team/slack-signing",
    "slackBotTokenSecretName": "team/slack-bot-token",
    "answerConcurrency": "9",
}
#: The Organization hub's keys away from their defaults, with every other key of
#: NON_DEFAULT but `costExplorer` (which the hub refuses: no Cost Explorer in members) and
#: `launchAlerts` (left on, so that the hub's on-launch Lambda is built and configured), and
#: the answers' (the hub refuses `answers` for now).
ANSWER_KEYS = (
    "answers",
    "answerAdmins",
    "timeZone",
    "slackSigningSecretName",
    "slackBotTokenSecretName",
    "answerConcurrency",
)
ORG_NON_DEFAULT: dict[str, Any] = {
    **{
        k: v
        for k, v in NON_DEFAULT.items()
        if k not in ("costExplorer", "launchAlerts", *ANSWER_KEYS)
    },
    "sweepKeepPrefix": "pinned/",
    "orgAccounts": "111111111111, 222222222222",
    "orgId": "o-abc1234567",
    "orgMemberRole": "team-reader",
    "orgPerAccountConcurrency": "3",
    "orgMaxConcurrency": "50",
    "orgProbeHours": "12",
    "orgSliceDeadlineMinutes": "5",
    "orgOptOutTag": "team:opt-out",
    "orgRegions": "enabled",
    "orgMaxReceives": "5",
}
POWERTOOLS = {Env.SERVICE_NAME, Env.METRICS_NAMESPACE}
SCAN = "costguard.handlers.scan.handler"
CONSUMER = "costguard.handlers.org.consumer_handler"
FANOUT = "costguard.handlers.org.fanout_handler"
ACT = "costguard.handlers.org_act.handler"


class Recording:
    """The config, remembering which of its attributes the stack read."""

    def __init__(self, config: CostGuardConfig) -> None:
        self._config = config
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(self._config, name)


@dataclass(frozen=True)
class Built:
    config: CostGuardConfig
    read: frozenset[str]
    template: Any
    #: Each Lambda's variables, by handler.
    variables: dict[str, dict[str, Any]]


def _build(context: dict[str, Any], handlers: tuple[str, ...]) -> Built:
    import aws_cdk as cdk

    from costguard_infra.stack import CostGuardStack

    config = CostGuardConfig.from_context(context)
    recording = Recording(config)
    app = cdk.App(context={"aws:cdk:bundling-stacks": []})
    stack = CostGuardStack(app, "CostGuard", config=recording)  # type: ignore[arg-type]
    template = Template.from_stack(stack)
    variables = {}
    for handler in handlers:
        env = Capture()
        template.has_resource_properties(
            "AWS::Lambda::Function", {"Handler": handler, "Environment": {"Variables": env}}
        )
        variables[handler] = env.as_object()
    return Built(config, frozenset(recording.read), template, variables)


@pytest.fixture(scope="module")
def built() -> Built:
    """One account: the scan Lambda gets every variable but the hub's."""
    return _build(NON_DEFAULT, (SCAN,))


@pytest.fixture(scope="module")
def org_built() -> Built:
    """An Organization hub: its consumers get every variable the scan would, and the hub's."""
    return _build(ORG_NON_DEFAULT, (CONSUMER, FANOUT, ACT))


def test_every_setting_is_away_from_its_default_here(built: Built, org_built: Built) -> None:
    assert set(NON_DEFAULT) | set(ORG_NON_DEFAULT) == {s.context_key for s in CONTEXT_SETTINGS}
    assert not [s for s in CONTEXT_SETTINGS if s.org and s.context_key in NON_DEFAULT]
    same = [
        s.name for s in CONTEXT_SETTINGS if not s.org and getattr(built.config, s.name) == s.default
    ]
    assert same == []
    same_in_org = [
        s.context_key
        for s in CONTEXT_SETTINGS
        if s.context_key in ORG_NON_DEFAULT and getattr(org_built.config, s.name) == s.default
    ]
    assert same_in_org == []


def test_the_stack_sets_every_variable_the_settings_read_and_no_other(
    built: Built, org_built: Built
) -> None:
    # COSTGUARD_GUARD binds a guard's own Lambda to its guard; the scan and the hub's
    # Lambdas have none (the act consumer's messages name the guard); only the hub's get
    # the Organization's, and only the fan-out sends work items and guard runs.
    assert (
        set(built.variables[SCAN]) == (set(ENV_VARS) - {Env.GUARD} - set(ORG_ENV_VARS)) | POWERTOOLS
    )
    for consumer in (CONSUMER, ACT):
        assert (
            set(org_built.variables[consumer])
            == (set(ENV_VARS) - {Env.GUARD, Env.QUEUE_URL, Env.ACT_QUEUE_URL}) | POWERTOOLS
        ), consumer
    assert set(org_built.variables[FANOUT]) == (set(ENV_VARS) - {Env.GUARD}) | POWERTOOLS
    assert {Env.QUEUE_URL, Env.ACT_QUEUE_URL, Env.GUARD} | set(ORG_ENV_VARS) <= set(ENV_VARS)


def _read_back(built: Built, handler: str) -> Settings:
    # GIVEN the variables the stack wrote (CloudFormation references stand in as text)
    variables = built.variables[handler]
    environ = {k: v if isinstance(v, str) else f"<{k}>" for k, v in variables.items()}
    # WHEN the Lambda reads them
    settings = Settings.from_env(environ)
    # THEN every setting it was given, with both a context key and a variable, has the
    # context's value
    shared = [s.name for s in ENV_SETTINGS if s.context_key and s.env_var in variables]
    assert {n: getattr(settings, n) for n in shared} == {
        n: getattr(built.config, n) for n in shared
    }
    return settings


def test_the_lambda_reads_back_every_setting_the_context_gave(built: Built) -> None:
    settings = _read_back(built, SCAN)
    assert settings.project_tag_keys == ("Cost Center", "team,x")
    assert settings.warning_pct == Decimal("85.5")
    assert settings.budget_thresholds == (90, 110)
    assert (settings.sagemaker_tags, settings.sagemaker_studio) == (
        BY_NAME["sagemaker_tags"].default,
        BY_NAME["sagemaker_studio"].default,
    )
    assert settings.cost_explorer is True
    assert (settings.org_accounts, settings.org_id) == ((), "")  # one account


def test_an_empty_keep_prefix_reaches_the_sweep_guard_as_no_keep_prefix(built: Built) -> None:
    """GIVEN ``-c sweepKeepPrefix=`` (the README: empty means no keep prefix)
    WHEN the stale-object guard's Lambda reads the variable the stack wrote
    THEN its keep prefix is empty, not the default ``keep/``.

    Defect: the stack wrote an empty variable and ``Settings.from_env`` read empty as unset,
    so ``keep/`` stayed protected whatever the deployment said.
    """
    from tests.infra.guard_template import guard_function

    _, fn = guard_function(built.template, "stale-objects")
    variables = fn["Properties"]["Environment"]["Variables"]
    assert variables[Env.S3_KEEP_PREFIX] == ""
    environ = {k: v if isinstance(v, str) else f"<{k}>" for k, v in variables.items()}
    assert Settings.from_env(environ).s3_keep_prefix == ""


def test_the_hub_lambdas_read_back_every_setting_the_context_gave(org_built: Built) -> None:
    for handler in (CONSUMER, FANOUT, ACT):
        settings = _read_back(org_built, handler)
        assert settings.project_tag_keys == ("Cost Center", "team,x")
        assert settings.org_accounts == ("111111111111", "222222222222")
        assert (settings.org_id, settings.org_member_role) == ("o-abc1234567", "team-reader")
        assert (settings.org_probe_hours, settings.org_slice_deadline_minutes) == (12, 5)
        assert settings.org_opt_out_tag == "team:opt-out"
    fanout = _read_back(org_built, FANOUT)
    assert fanout.queue_url == f"<{Env.QUEUE_URL}>"  # a reference to the work queue
    assert fanout.act_queue_url == f"<{Env.ACT_QUEUE_URL}>"  # ... and to the act queue
    # The guards' settings reach the act consumer, which builds every guard
    act = _read_back(org_built, ACT)
    assert (act.dry_run, act.ttl_hours, act.idle_gpu_pct) == (False, 24, Decimal(3))
    assert act.s3_keep_prefix == "pinned/"
    assert act.act_queue_url is None and act.queue_url is None


def test_every_deploy_only_setting_is_read_by_the_stack(built: Built, org_built: Built) -> None:
    # ttlHours was accepted, documented as sweeping stale data, and read by nothing.
    read = built.read | org_built.read
    unread = [
        s.context_key
        for s in CONTEXT_SETTINGS
        if s.env_var is None and s.name not in read and not s.reserved
    ]
    assert unread == []
    reserved_but_read = [s.context_key for s in CONTEXT_SETTINGS if s.reserved and s.name in read]
    assert reserved_but_read == [], "it is used now: drop `reserved` and say what it does"


def test_each_deploy_only_setting_takes_effect(built: Built, org_built: Built) -> None:
    for t, handler in ((built.template, SCAN), (org_built.template, CONSUMER)):
        t.has_resource_properties(
            "AWS::Lambda::Function", {"Handler": handler, "MemorySize": 2048, "Timeout": 300}
        )
        t.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 30})
        t.has_resource_properties(
            "AWS::Scheduler::Schedule", {"ScheduleExpression": "rate(30 minutes)"}
        )
        t.has_resource_properties(
            "AWS::Scheduler::Schedule", {"ScheduleExpression": "rate(3 days)"}
        )
        t.has_resource_properties("AWS::SecretsManager::Secret", {"Name": "team/slack-webhook"})
        t.has_resource_properties(
            "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"}
        )
        logs = t.find_resources("AWS::Logs::LogGroup")
        assert {r["Properties"].get("RetentionInDays") for r in logs.values()} == {30}
    org_built.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping", {"ScalingConfig": {"MaximumConcurrency": 50}}
    )
    # Both consumers: the scan's and the act consumer's (one guard run per invocation).
    org_built.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"BatchSize": 1, "ScalingConfig": {"MaximumConcurrency": 50}},
    )
    # idleRate reaches the idle guard's schedule, which invokes the fan-out by its name.
    target = Capture()
    org_built.template.has_resource_properties(
        "AWS::Scheduler::Schedule",
        {"ScheduleExpression": "rate(2 hours)", "Target": target},
    )
    assert json.loads(target.as_object()["Input"])["guard"] == "idle-notebooks"
    assert target.as_object()["Arn"]["Fn::GetAtt"][0].startswith("OrgHubFanout")
    org_built.template.has_resource_properties(
        "AWS::SQS::Queue",
        {"VisibilityTimeout": 6 * 300, "RedrivePolicy": Match.object_like({"maxReceiveCount": 5})},
    )
    # launchAlerts=false deploys no on-launch Lambda and no rule; on, onLaunchConcurrency
    # is its reserved concurrency.
    built.template.resource_count_is("AWS::Events::Rule", 0)
    assert not built.template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "costguard.handlers.on_launch.handler"}}
    )
    org_built.template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": "costguard.handlers.on_launch.handler", "ReservedConcurrentExecutions": 7},
    )
    # The act queue's visibility follows the act consumer's fixed timeout, not scanTimeoutSeconds.
    org_built.template.has_resource_properties(
        "AWS::SQS::Queue",
        {"VisibilityTimeout": 6 * 600, "RedrivePolicy": Match.object_like({"maxReceiveCount": 5})},
    )


def test_the_log_retention_choices_are_the_ones_the_stack_can_map() -> None:
    from costguard_infra.stack import _RETENTION_NAMES

    assert set(LOG_RETENTION_DAYS) == set(_RETENTION_NAMES)
