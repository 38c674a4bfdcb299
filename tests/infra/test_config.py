"""Context -> stack -> Lambda environment -> Settings: every setting arrives, and unchanged.

The stack is built once with every setting at a value other than its default, so a
setting that the stack drops, or that a reader parses differently, shows up here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from aws_cdk.assertions import Capture, Template

from costguard.config_spec import BY_NAME, CONTEXT_SETTINGS, ENV_SETTINGS, LOG_RETENTION_DAYS
from costguard.names import Env
from costguard.settings import ENV_VARS, Settings
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
    "sweepKeepPrefix": "pinned/",
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
}
POWERTOOLS = {Env.SERVICE_NAME, Env.METRICS_NAMESPACE}


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
    variables: dict[str, Any]


@pytest.fixture(scope="module")
def built() -> Built:
    import aws_cdk as cdk

    from costguard_infra.stack import CostGuardStack

    config = CostGuardConfig.from_context(NON_DEFAULT)
    recording = Recording(config)
    app = cdk.App(context={"aws:cdk:bundling-stacks": []})
    stack = CostGuardStack(app, "CostGuard", config=recording)  # type: ignore[arg-type]
    template = Template.from_stack(stack)
    env = Capture()
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": "costguard.handlers.scan.handler", "Environment": {"Variables": env}},
    )
    return Built(config, frozenset(recording.read), template, env.as_object())


def test_every_setting_is_away_from_its_default_here(built: Built) -> None:
    assert set(NON_DEFAULT) == {s.context_key for s in CONTEXT_SETTINGS}
    same = [s.name for s in CONTEXT_SETTINGS if getattr(built.config, s.name) == s.default]
    assert same == []


def test_the_stack_sets_every_variable_the_settings_read_and_no_other(built: Built) -> None:
    # COSTGUARD_GUARD binds a guard's own Lambda to its guard; the scan has none.
    assert set(built.variables) == (set(ENV_VARS) - {"COSTGUARD_GUARD"}) | POWERTOOLS


def test_the_lambda_reads_back_every_setting_the_context_gave(built: Built) -> None:
    # GIVEN the variables the stack wrote (CloudFormation references stand in as text)
    environ = {k: v if isinstance(v, str) else f"<{k}>" for k, v in built.variables.items()}
    # WHEN the Lambda reads them
    settings = Settings.from_env(environ)
    # THEN every setting with both a context key and a variable has the context's value
    shared = [s.name for s in ENV_SETTINGS if s.context_key]
    assert {n: getattr(settings, n) for n in shared} == {
        n: getattr(built.config, n) for n in shared
    }
    assert settings.project_tag_keys == ("Cost Center", "team,x")
    assert settings.warning_pct == Decimal("85.5")
    assert settings.budget_thresholds == (90, 110)
    assert (settings.sagemaker_tags, settings.sagemaker_studio) == (
        BY_NAME["sagemaker_tags"].default,
        BY_NAME["sagemaker_studio"].default,
    )


def test_every_deploy_only_setting_is_read_by_the_stack(built: Built) -> None:
    # ttlHours was accepted, documented as sweeping stale data, and read by nothing.
    unread = [
        s.context_key
        for s in CONTEXT_SETTINGS
        if s.env_var is None and s.name not in built.read and not s.reserved
    ]
    assert unread == []
    reserved_but_read = [
        s.context_key for s in CONTEXT_SETTINGS if s.reserved and s.name in built.read
    ]
    assert reserved_but_read == [], "it is used now: drop `reserved` and say what it does"


def test_each_deploy_only_setting_takes_effect(built: Built) -> None:
    t = built.template
    t.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": "costguard.handlers.scan.handler", "MemorySize": 2048, "Timeout": 300},
    )
    t.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 30})
    t.has_resource_properties(
        "AWS::Scheduler::Schedule", {"ScheduleExpression": "rate(30 minutes)"}
    )
    t.has_resource_properties("AWS::Scheduler::Schedule", {"ScheduleExpression": "rate(3 days)"})
    t.has_resource_properties("AWS::SecretsManager::Secret", {"Name": "team/slack-webhook"})
    t.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"}
    )
    logs = t.find_resources("AWS::Logs::LogGroup")
    assert {r["Properties"].get("RetentionInDays") for r in logs.values()} == {30}


def test_the_log_retention_choices_are_the_ones_the_stack_can_map() -> None:
    from costguard_infra.stack import _RETENTION_NAMES

    assert set(LOG_RETENTION_DAYS) == set(_RETENTION_NAMES)
