"""The CDK context and the Lambda's variables accept the same values, with the same defaults.

Each test here failed before the settings had one spec: the two readers had drifted.
"""

from __future__ import annotations

import json
from decimal import Decimal

import boto3
import pytest

from costguard.adapters.aws import ClientFactory
from costguard.env import Env
from costguard.settings import Settings, SettingsError
from costguard.wiring import build_alert_service
from costguard_infra.config import ConfigError, CostGuardConfig

BASE = {Env.REGIONS: "us-east-1"}
TOPIC = "arn:aws:sns:us-east-1:123456789012:costguard-alerts"


def test_deploys_the_documented_regions_when_the_context_names_none() -> None:
    # cdk.json and the README said us-east-1,us-west-2; the code's own default was us-east-1.
    assert CostGuardConfig.from_context({}).regions == ("us-east-1", "us-west-2")


def test_accepts_a_fractional_warning_percentage_like_the_lambda() -> None:
    # The Lambda read COSTGUARD_WARNING_PCT=85.5; -c warningPct=85.5 was refused.
    config = CostGuardConfig.from_context({"warningPct": "85.5"})
    assert config.warning_pct == Decimal("85.5")
    assert config.environment()[Env.WARNING_PCT] == "85.5"
    assert Settings.from_env({**BASE, **config.environment()}).warning_pct == Decimal("85.5")


@pytest.mark.parametrize("text", ["no", "off", "yes", "on", "t", "f", "maybe", "", "2"])
def test_a_flag_spelt_otherwise_than_true_or_false_is_refused_in_both(text: str) -> None:
    # -c dryRun=no deployed with actions on, while COSTGUARD_DRY_RUN=no was an error.
    with pytest.raises(ConfigError, match=r"`dryRun` must be true or false, got '"):
        CostGuardConfig.from_context({"dryRun": text})
    with pytest.raises(SettingsError, match=r"COSTGUARD_DRY_RUN: must be true or false, got '"):
        Settings.from_env({**BASE, Env.DRY_RUN: text})


@pytest.mark.parametrize(("text", "value"), [("true", True), (" FALSE ", False), ("1", True)])
def test_a_flag_reads_the_same_in_both(text: str, value: bool) -> None:
    assert CostGuardConfig.from_context({"dryRun": text}).dry_run is value
    assert Settings.from_env({**BASE, Env.DRY_RUN: text}).dry_run is value


def test_refuses_a_variable_that_leaves_no_project_tag_key() -> None:
    # COSTGUARD_PROJECT_TAG_KEYS="," was accepted, and the scan handler then failed on
    # project_tag_keys[0]; the context already refused it.
    with pytest.raises(SettingsError, match="COSTGUARD_PROJECT_TAG_KEYS: "):
        Settings.from_env({**BASE, Env.PROJECT_TAG_KEYS: ","})
    with pytest.raises(ConfigError, match="`projectTagKeys` "):
        CostGuardConfig.from_context({"projectTagKeys": ","})


def test_a_bad_flag_or_json_is_reported_with_the_other_problems() -> None:
    # A bad flag or JSON stopped the reading alone, without the heading the others have.
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(
            {**BASE, Env.DRY_RUN: "maybe", Env.PROJECTS_JSON: "{", Env.WARNING_PCT: "500"}
        )
    lines = str(caught.value).splitlines()
    assert lines[0] == "invalid CostGuard settings:"
    assert lines[1] == "  COSTGUARD_DRY_RUN: must be true or false, got 'maybe'"
    assert lines[2].startswith("  COSTGUARD_WARNING_PCT: Input should be less than or equal")
    assert lines[3].startswith("  COSTGUARD_PROJECTS_JSON: must be JSON: Expecting property name")


@pytest.mark.parametrize("rate", ["2 days", "25 hours", "1441 minutes", "4 days"])
def test_refuses_a_scan_rate_longer_than_a_day(rate: str) -> None:
    # `4 days` synthesized, then the missed-scan alarm (two intervals) failed to deploy:
    # CloudWatch evaluates at most 7 days.
    with pytest.raises(ConfigError, match="`scanRate` must be at most `1 day`"):
        CostGuardConfig.from_context({"scanRate": rate})


@pytest.mark.parametrize("rate", ["1 day", "24 hours", "5 minutes", " 1 hour "])
def test_accepts_a_scan_rate_from_five_minutes_to_a_day(rate: str) -> None:
    assert CostGuardConfig.from_context({"scanRate": rate}).scan_rate == rate.strip()


def test_refuses_a_scan_rate_in_other_digits() -> None:
    # "١٥ minutes" (Arabic-Indic digits) was accepted and written as is into the schedule.
    with pytest.raises(ConfigError, match="`scanRate` must be a rate like"):
        CostGuardConfig.from_context({"scanRate": "١٥ minutes"})


def test_refuses_an_email_address_with_a_trailing_newline() -> None:
    with pytest.raises(ConfigError, match="`alertEmails` must be e-mail addresses"):
        CostGuardConfig.from_context({"alertEmails": json.dumps(["oncall@example.com\n"])})


@pytest.mark.parametrize("name", ["", "slack webhook", "x" * 513])
def test_refuses_a_secret_name_secrets_manager_would_refuse(name: str) -> None:
    # It synthesized, and the deployment failed on the secret.
    with pytest.raises(ConfigError, match="`slackWebhookSecretName` must be a Secrets Manager"):
        CostGuardConfig.from_context({"slackWebhookSecretName": name})


def test_refuses_a_cooldown_the_alert_service_cannot_hold() -> None:
    # 99999999999999 minutes was accepted, and every scan with alerts then failed with
    # OverflowError building the alert service.
    huge = "99999999999999"
    with pytest.raises(SettingsError, match="COSTGUARD_ANOMALY_COOLDOWN_MINUTES: "):
        Settings.from_env({**BASE, Env.ANOMALY_COOLDOWN_MINUTES: huge})
    with pytest.raises(ConfigError, match="`anomalyCooldownMinutes` "):
        CostGuardConfig.from_context({"anomalyCooldownMinutes": huge})
    year = Settings.from_env(
        {**BASE, Env.TOPIC_ARN: TOPIC, Env.ANOMALY_COOLDOWN_MINUTES: str(365 * 24 * 60)}
    )
    assert build_alert_service(
        year, ClientFactory(boto3.Session(region_name="us-east-1")), ledger=None
    )  # type: ignore[arg-type]


def test_refuses_a_project_table_too_large_for_the_lambda_environment() -> None:
    # AWS Lambda allows 4 KB of variables: the synth passed and the deployment failed.
    projects = {f"project-{i:03}": {"budget": 1000, "owners": ["a@example.com"]} for i in range(60)}
    with pytest.raises(ConfigError, match="`projects` makes the scan Lambda's environment too"):
        CostGuardConfig.from_context({"projects": projects})
    fits = dict(list(projects.items())[:20])
    assert len(CostGuardConfig.from_context({"projects": fits}).projects) == 20
