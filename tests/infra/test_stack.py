"""The synthesized CostGuard stack, asserted by properties, never by logical IDs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Capture, Match

from costguard.env import Env
from costguard.iam import Permission, scan_permissions
from costguard.settings import ENV_VARS, ORG_ENV_VARS
from costguard.telemetry import Metrics

pytestmark = pytest.mark.infra


def resources(template: Any, kind: str) -> dict[str, Any]:
    found: dict[str, Any] = template.find_resources(kind)
    return found


def test_scan_runs_on_a_schedule_with_the_scheduled_time_as_input(template: Any) -> None:
    # (The max-lifetime guard runs every 15 minutes too: the scan's is the one that names
    # no guard.)
    (scan,) = [
        s["Properties"]
        for s in template.find_resources("AWS::Scheduler::Schedule").values()
        if s["Properties"]["ScheduleExpression"] == "rate(15 minutes)"
        and "guard" not in json.loads(s["Properties"]["Target"].get("Input", "{}"))
    ]
    assert scan["State"] == "ENABLED" and "KmsKeyArn" in scan
    target = scan["Target"]
    assert json.loads(target["Input"]) == {"time": "<aws.scheduler.scheduled-time>"}
    assert "DeadLetterConfig" in target
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 2


def test_scan_lambda_is_arm64_current_python_traced_with_json_logs_and_a_dlq(template: Any) -> None:
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "costguard.handlers.scan.handler",
            "Runtime": "python3.13",
            "Architectures": ["arm64"],
            "TracingConfig": {"Mode": "Active"},
            "LoggingConfig": Match.object_like({"LogFormat": "JSON"}),
            "DeadLetterConfig": {"TargetArn": Match.any_value()},
            "MemorySize": 1024,
            "Timeout": 600,
            "KmsKeyArn": Match.any_value(),
            "Layers": Match.any_value(),
        },
    )
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {"MaximumRetryAttempts": 2})
    template.has_resource_properties(
        "AWS::Logs::LogGroup", {"RetentionInDays": 90, "KmsKeyId": Match.any_value()}
    )


def test_every_variable_the_handler_reads_is_set_by_the_stack(template: Any) -> None:
    env = Capture()
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": "costguard.handlers.scan.handler", "Environment": {"Variables": env}},
    )
    variables = env.as_object()
    missing = [name for name in ENV_VARS if name not in variables]
    # Only a guard's own Lambda is bound to a guard; only the hub's Lambdas get the
    # Organization's variables (tests/infra/test_hub_stack.py).
    assert sorted(missing) == sorted([Env.GUARD, *ORG_ENV_VARS])
    assert variables[Env.DRY_RUN] == "true"
    assert variables[Env.REGIONS] == "us-east-1,us-west-2"
    assert json.loads(variables[Env.PROJECTS_JSON]) == {
        "llm-pretraining": {"budget": 60000, "owners": ["alice@example.com"]}
    }
    assert variables[Env.SERVICE_NAME] == Metrics.SCAN_SERVICE


def test_each_guard_has_its_own_lambda_bound_to_it_with_its_own_role_and_schedule(
    template: Any,
) -> None:
    from costguard.guards import SPECS

    guards = {
        f["Properties"]["Environment"]["Variables"][Env.GUARD]: f
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "costguard.handlers.act.handler"
    }
    # The shipped guards, and the test-only toy guard tests/infra/synth.py adds.
    assert set(guards) == {*SPECS, "toy"}
    roles = {str(f["Properties"]["Role"]["Fn::GetAtt"][0]) for f in guards.values()}
    assert len(roles) == len(guards), "no two guards share a role"
    payloads = [
        json.loads(s["Properties"]["Target"]["Input"])
        for s in resources(template, "AWS::Scheduler::Schedule").values()
        if "guard" in s["Properties"]["Target"].get("Input", "")
    ]
    assert sorted(p["guard"] for p in payloads) == sorted(guards)


def test_ledger_is_encrypted_recoverable_expiring_and_retained(template: Any) -> None:
    template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": Match.object_like(
                {
                    "BillingMode": "PAY_PER_REQUEST",
                    "SSESpecification": {
                        "SSEEnabled": True,
                        "SSEType": "KMS",
                        "KMSMasterKeyId": Match.any_value(),
                    },
                    "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                    "TimeToLiveSpecification": {"AttributeName": "ttl", "Enabled": True},
                    "DeletionProtectionEnabled": True,
                }
            ),
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )


def test_alert_topic_is_kms_encrypted_ssl_only_with_email_subscriptions(template: Any) -> None:
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            }
        },
    )
    emails = sorted(
        s["Properties"]["Endpoint"]
        for s in resources(template, "AWS::SNS::Subscription").values()
        if s["Properties"]["Protocol"] == "email"
    )
    assert emails == ["finops@example.com", "oncall@example.com"]


def test_slack_webhook_lives_in_secrets_manager_never_in_the_template(
    template: Any, synthesized: Any
) -> None:
    template.has_resource_properties(
        "AWS::SecretsManager::Secret",
        {
            "Name": "costguard/slack-webhook",
            "KmsKeyId": Match.any_value(),
            "GenerateSecretString": Match.any_value(),
        },
    )
    body = (synthesized[2] / "CostGuard.template.json").read_text()
    assert "hooks.slack.com" not in body
    for secret in resources(template, "AWS::SecretsManager::Secret").values():
        assert "SecretString" not in secret["Properties"]


def test_alarms_cover_errors_throttles_dead_letters_and_missing_scans(template: Any) -> None:
    alarms = resources(template, "AWS::CloudWatch::Alarm").values()
    names = sorted(a["Properties"].get("MetricName", "") for a in alarms)
    per_function = ["Errors", "Throttles", "ApproximateNumberOfMessagesVisible"]
    # The scan, the Slack notifier, each guard's and the on-launch Lambda, the missed-scan
    # heartbeat, and the launch rules' dead-letter queue (events EventBridge could not deliver).
    functions = len(resources(template, "AWS::Lambda::Function"))
    assert names == sorted(
        [*per_function * functions, Metrics.SCAN_COMPLETED, "ApproximateNumberOfMessagesVisible"]
    )
    for alarm in alarms:
        assert alarm["Properties"]["AlarmActions"], "every alarm publishes to the alert topic"
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": Metrics.SCAN_COMPLETED,
            "Namespace": Metrics.NAMESPACE,
            "Period": 1800,
            "TreatMissingData": "breaching",
            "ComparisonOperator": "LessThanThreshold",
            "Dimensions": [{"Name": Metrics.DIMENSION_SERVICE, "Value": Metrics.SCAN_SERVICE}],
        },
    )


def test_dashboard_reads_every_projects_figures_from_the_scan_logs(template: Any) -> None:
    from costguard.telemetry import Figures

    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    # Every figure the issue asks for, from the log line the scan writes per project.
    for field in (Figures.FORECAST, Figures.MONTH_TO_DATE, Figures.RUN_RATE, Figures.BUDGET):
        assert field in body
    assert Figures.EVENT in body
    assert "llm-pretraining: budget, month-to-date, forecast" in body
    # The widgets query the scan function's own log group.
    (scan_group,) = [
        k for k, v in resources(template, "AWS::Logs::LogGroup").items() if "Scan" in k
    ]
    assert scan_group in body


def test_only_alarm_metrics_are_custom_metrics(template: Any) -> None:
    # $0.30 per metric-month: per-project figures are log lines, metrics are for alarms.
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "SEARCH(" not in body
    for retired in ("ForecastUsd", "MonthToDateUsd", "RunRateUsdPerHour", "BudgetUsd"):
        assert retired not in body


def _policy_statements(template: Any) -> list[dict[str, Any]]:
    statements = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_no_wildcard_actions_and_no_unconditioned_mutation_on_every_resource(template: Any) -> None:
    for statement in _policy_statements(template):
        actions = _as_list(statement["Action"])
        assert "*" not in actions and not any(a.endswith(":*") for a in actions), statement
        if statement.get("Condition"):
            continue
        if "*" in _as_list(statement["Resource"]):
            mutating = [a for a in actions if Permission((a,), "").mutating]
            # X-Ray's trace APIs accept no resource; they write traces, not infrastructure.
            assert set(mutating) <= {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}, statement


def test_roles_grant_the_declared_permissions_and_otherwise_only_costguards_own_resources(
    template: Any,
) -> None:
    from costguard.guards import actuator_permissions
    from costguard.iam import refresh_permissions
    from tests.support.toy import toy_spec

    # The template is synthesized with the test-only toy guard too (tests/infra/synth.py).
    declared = {
        a
        for p in (
            *scan_permissions(),
            *actuator_permissions(),
            *refresh_permissions(),
            *toy_spec().permissions(),
        )
        for a in p.actions
    }
    statements = _policy_statements(template)
    granted = {a for s in statements for a in _as_list(s["Action"])}
    assert declared <= granted
    for statement in statements:
        actions = _as_list(statement["Action"])
        extra = [a for a in actions if a not in declared]
        if not extra or set(extra) <= {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}:
            continue
        # Grants beyond the declarations (ledger, topic, secret, key, queues, logs) must
        # name CostGuard's own resources, never "*".
        assert "*" not in _as_list(statement["Resource"]), statement


def _refers_to_template_resource(value: Any) -> bool:
    if isinstance(value, dict):
        if "Fn::GetAtt" in value:
            return True
        if "Ref" in value:
            return not str(value["Ref"]).startswith("AWS::")  # not a pseudo parameter
        return any(_refers_to_template_resource(v) for v in value.values())
    if isinstance(value, list):
        return any(_refers_to_template_resource(v) for v in value)
    return False


def _is_own_resource(resource: Any) -> bool:
    """A resource of this template (its ARN, or one built from it), not an ARN pattern."""
    return _refers_to_template_resource(resource)


def _function_role(template: Any, handler: str) -> str:
    (function,) = [
        f
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == handler
    ]
    return str(function["Properties"]["Role"]["Fn::GetAtt"][0])


def _guard_roles(template: Any) -> set[str]:
    """The roles of the guards' Lambdas (one per guard, each bound by COSTGUARD_GUARD)."""
    return {
        str(f["Properties"]["Role"]["Fn::GetAtt"][0])
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "costguard.handlers.act.handler"
    }


def _role_statements(template: Any) -> dict[str, list[dict[str, Any]]]:
    by_role: dict[str, list[dict[str, Any]]] = {}
    for policy in resources(template, "AWS::IAM::Policy").values():
        for role in policy["Properties"].get("Roles", []):
            by_role.setdefault(role["Ref"], []).extend(
                policy["Properties"]["PolicyDocument"]["Statement"]
            )
    return by_role


def test_mutating_actions_on_user_resources_exist_only_on_the_actuator_role_with_tag_conditions(
    template: Any,
) -> None:
    # The rule, not today's list: a statement that changes something CostGuard did not
    # create lives on the actuator role only, conditioned on the resource's tags.
    from costguard.iam import WARNING_TAGS, Permission, remove_only_the_warning_tag

    mutating_found = False
    for role, statements in _role_statements(template).items():
        for statement in statements:
            actions = _as_list(statement["Action"])
            mutating = [a for a in actions if Permission((a,), "").mutating]
            targets = _as_list(statement["Resource"])
            on_user_resources = [r for r in targets if not _is_own_resource(r) and r != "*"]
            if not mutating or not on_user_resources:
                continue
            mutating_found = True
            assert role in _guard_roles(template), (role, statement)
            condition = statement.get("Condition", {})
            on_tags = json.dumps(condition)
            # Either conditioned on the resource's project tag, or removing CostGuard's own
            # warning tag and nothing else (a warning must be withdrawable anywhere).
            only_warning_tag_removed = (
                len(actions) == 1
                and actions[0].endswith(":DeleteTags")
                and any(condition == dict(remove_only_the_warning_tag(t)) for t in WARNING_TAGS)
            )
            # Or creating a resource (tag-on-create) that must carry a project tag.
            created_with_project = (
                condition.get("Null", {}).get("aws:RequestTag/costguard:project") == "false"
            )
            from costguard.iam import account_scoped_s3

            # Or an S3 mutation AWS cannot tag-condition, limited to this account's buckets.
            s3_account_only = account_scoped_s3(mutating, condition)
            assert (
                "aws:ResourceTag/costguard:project" in on_tags
                or only_warning_tag_removed
                or created_with_project
                or s3_account_only
            ), statement
    assert mutating_found, "the actuator role should hold the actuators' declared actions"


def test_the_scan_role_can_change_nothing_of_the_users(template: Any) -> None:
    from costguard.iam import Permission

    scan_role = _function_role(template, "costguard.handlers.scan.handler")
    for role, statements in _role_statements(template).items():
        if role != scan_role:
            continue
        for statement in statements:
            for action in _as_list(statement["Action"]):
                if Permission((action,), "").mutating:
                    # Only its own ledger, topic, logs, queue, key, and X-Ray traces.
                    assert action.split(":")[0] in {
                        "dynamodb",
                        "sns",
                        "logs",
                        "sqs",
                        "kms",
                        "xray",
                    }, (action, statement)


def test_slack_notifier_is_subscribed_with_a_dlq_and_reads_only_its_secret(template: Any) -> None:
    template.has_resource_properties(
        "AWS::SNS::Subscription",
        {
            "Protocol": "lambda",
            "RedrivePolicy": {"deadLetterTargetArn": Match.any_value()},
            "FilterPolicy": Match.any_value(),
        },
    )
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "costguard.handlers.slack_notifier.handler",
            "Environment": {
                "Variables": Match.object_like({Env.SLACK_SECRET_NAME: Match.any_value()})
            },
            "DeadLetterConfig": Match.any_value(),
        },
    )
    secret_reads = [
        s
        for s in _policy_statements(template)
        if "secretsmanager:GetSecretValue" in _as_list(s["Action"])
    ]
    assert len(secret_reads) == 1
    assert "*" not in _as_list(secret_reads[0]["Resource"])


def test_synthesized_template_passes_cfn_lint_without_errors(synthesized: Any) -> None:
    template_file = Path(synthesized[2]) / "CostGuard.template.json"
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    done = subprocess.run(
        [str(cfn_lint), "--format", "parseable", str(template_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    errors = [line for line in done.stdout.splitlines() if ":E" in line]
    assert errors == [], done.stdout
    assert done.returncode in (0, 4), done.stdout + done.stderr  # 4 = warnings only


def test_bad_context_is_a_clear_error() -> None:
    from costguard_infra.config import ConfigError, CostGuardConfig

    with pytest.raises(
        ConfigError, match="`scanRate` must be a rate like `15 minutes`, got `fast`"
    ):
        CostGuardConfig.from_context({"scanRate": "fast"})
    with pytest.raises(ConfigError, match="`dryRun`"):
        CostGuardConfig.from_context({"dryRun": "perhaps"})
    config = CostGuardConfig.from_context(
        {"dryRun": "false", "regions": "eu-west-1,us-east-1", "alertEmails": "a@example.com"}
    )
    assert (config.dry_run, config.regions, config.alert_emails) == (
        False,
        ("eu-west-1", "us-east-1"),
        ("a@example.com",),
    )


def test_every_cdk_nag_acknowledgement_gives_a_reason() -> None:
    from costguard_infra.app_builder import ACKNOWLEDGEMENTS

    assert all(len(reason) > 30 for reason in ACKNOWLEDGEMENTS.values())


def test_key_policy_lets_alarms_sns_and_logs_use_the_key_in_this_account_only(
    template: Any,
) -> None:
    (key,) = resources(template, "AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
    services = {}
    for statement in key["Properties"]["KeyPolicy"]["Statement"]:
        principal = statement.get("Principal", {}).get("Service")
        if principal:
            services[json.dumps(principal)] = statement
    assert any("cloudwatch.amazonaws.com" in p for p in services)
    assert any("sns.amazonaws.com" in p for p in services)
    assert any("logs." in p for p in services)
    for statement in services.values():
        assert statement.get("Condition"), "service use of the key is scoped to this account"


@pytest.mark.parametrize(
    ("context", "hint"),
    [
        ({"scanrate": "5 minutes"}, "did you mean `scanRate`"),
        ({"dry_run": "false"}, "did you mean `dryRun`"),
        ({"alertEmail": "a@example.com"}, "did you mean `alertEmails`"),
    ],
)
def test_a_mistyped_context_key_is_an_error_not_the_default(
    context: dict[str, str], hint: str
) -> None:
    from costguard_infra.app_builder import check_context_keys
    from costguard_infra.config import ConfigError

    with pytest.raises(ConfigError, match=hint):
        check_context_keys({**context, "@aws-cdk/core:target-partitions": ["aws"]})
    check_context_keys(
        {"scanRate": "5 minutes", "@aws-cdk/aws-lambda:x": True, "cli-telemetry": False}
    )
