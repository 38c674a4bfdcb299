"""Settings errors read as `VARIABLE: what is wrong` lines, with no pydantic links."""

from __future__ import annotations

import pytest

from costguard.env import Env
from costguard.settings import ENV_VARS, Settings, SettingsError

BASE = {Env.REGIONS: "us-east-1"}


def error_for(**env: str) -> str:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({**BASE, **env})
    message = str(caught.value)
    assert "pydantic.dev" not in message and "For further information" not in message
    assert "validation error for" not in message  # pydantic's heading, not ours
    return message


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {Env.WARNING_PCT: "500"},
            "COSTGUARD_WARNING_PCT: Input should be less than or equal to 100 (got '500')",
        ),
        (
            {Env.REGIONS: "us-east-1,mars"},
            "COSTGUARD_REGIONS: must be AWS region names like us-east-1, got 'mars'",
        ),
        (
            {Env.BUDGET_THRESHOLDS: "50,x"},
            "COSTGUARD_BUDGET_THRESHOLDS[1]: Input should be a valid integer, "
            "unable to parse string as an integer (got 'x')",
        ),
        ({Env.PROJECTS_JSON: "[1]"}, "COSTGUARD_PROJECTS_JSON: Input should be a valid dictionary"),
        (
            {Env.PROJECTS_JSON: '{"llm": {"budget": "lots"}}'},
            "COSTGUARD_PROJECTS_JSON: project 'llm': budget 'lots' is not an amount in USD",
        ),
        (
            {Env.SAGEMAKER_TAGS: "both"},
            "COSTGUARD_SAGEMAKER_TAGS: Input should be 'tagging-api' or 'per-resource' (got 'both')",
        ),
    ],
)
def test_names_the_variable_and_the_problem_on_one_line(env: dict[str, str], expected: str) -> None:
    message = error_for(**env)
    assert message.startswith("invalid CostGuard settings: ")
    assert expected in message
    assert "\n" not in message


def test_lists_several_problems_one_per_line() -> None:
    message = error_for(**{Env.WARNING_PCT: "0", Env.DIGEST_HOUR_UTC: "25"})
    assert message.splitlines() == [
        "invalid CostGuard settings:",
        "  COSTGUARD_WARNING_PCT: Input should be greater than 0 (got '0')",
        "  COSTGUARD_DIGEST_HOUR_UTC: Input should be less than or equal to 23 (got '25')",
    ]


def test_control_characters_in_a_value_cannot_break_or_colour_the_line() -> None:
    message = error_for(**{Env.DIGEST_HOUR_UTC: "8\n\x1b[31mred"})
    assert "\n" not in message and "\x1b" not in message
    assert "\\x1b[31mred" in message


def test_every_field_is_named_by_a_variable_the_stack_sets() -> None:
    from costguard.settings import FIELD_ENV

    assert set(FIELD_ENV) == set(Settings.model_fields)
    assert set(FIELD_ENV.values()) <= set(ENV_VARS)


def test_every_variable_the_stack_sets_changes_the_settings() -> None:
    # GIVEN each variable set to a non-default value, WHEN read, THEN it took effect.
    # (COSTGUARD_COST_EXPLORER was listed but never read: costExplorer=true did nothing.)
    from costguard.env import Env
    from costguard.settings import ENV_VARS, Settings

    # An Organization id in the base: COSTGUARD_ORG_ACCOUNTS is refused without one.
    base = {Env.REGIONS: "us-east-1", Env.ORG_ID: "o-abc1234567"}
    non_default = {
        Env.REGIONS: "eu-west-1",
        Env.TABLE_NAME: "ledger",
        Env.SCOPE: "123456789012",
        Env.DRY_RUN: "false",
        Env.WARNING_PCT: "70",
        Env.PROJECT_TAG_KEYS: "team",
        Env.PROJECTS_JSON: '{"llm": {"budget": 5000}}',
        Env.TEAMS_JSON: '{"research": {"budget": 20000}}',
        Env.SAGEMAKER_TAGS: "per-resource",
        Env.SAGEMAKER_STUDIO: "false",
        Env.TOPIC_ARN: "arn:aws:sns:us-east-1:123456789012:t",
        Env.BUDGET_THRESHOLDS: "90",
        Env.ANOMALY_MIN_RATIO: "3",
        Env.ANOMALY_MIN_USD_PER_HOUR: "20",
        Env.ANOMALY_COOLDOWN_MINUTES: "30",
        Env.DIGEST_HOUR_UTC: "3",
        Env.COST_EXPLORER: "true",
        Env.SCAN_FAILED_ALERT_AFTER: "5",
        Env.ADVICE_ALERTS: "false",
        Env.ADVICE_MIN_MONTHLY_USD: "500",
        Env.S3_SWEEP_PREFIXES: "tmp/",
        Env.S3_KEEP_PREFIX: "pinned/",
        Env.S3_PURGE_NONCURRENT: "true",
        Env.S3_BREAKER_PCT: "25",
        Env.S3_BREAKER_MAX_GIB: "10",
        Env.S3_BACKSTOP: "false",
        Env.GUARD: "idle-notebooks",
        Env.PRICE_CHANGE_HOLD_PCT: "25",
        Env.PRICE_CATALOG_MAX_AGE_DAYS: "14",
        Env.IDLE_MINUTES: "90",
        Env.IDLE_GPU_PCT: "3",
        Env.IDLE_CPU_PCT: "2",
        Env.IDLE_NETWORK_MB: "1",
        Env.IDLE_MAX_RUNTIME_HOURS: "8",
        Env.IDLE_GRACE_MINUTES: "120",
        Env.IDLE_ALL_ACCELERATORS: "true",
        Env.MAX_GPU_HOURS: "72",
        Env.MAX_USD_PER_HOUR: "40",
        Env.LAUNCH_REGIONS: "us-east-1",
        Env.LIFETIME_GRACE_MINUTES: "120",
        Env.IDLE_GPU_DISCOVERY: "list",
        Env.TTL_HOURS: "24",
        Env.EBS_SNAPSHOT_BEFORE_DELETE: "false",
        Env.EBS_SNAPSHOT_TTL: "7d",
        Env.ORG_ACCOUNTS: "discover",
        Env.ORG_ID: "o-zzzzzzzzzz",
        Env.MEMBER_ROLE: "team-reader",
        Env.PER_ACCOUNT_CONCURRENCY: "3",
        Env.PROBE_HOURS: "12",
        Env.SLICE_DEADLINE_MINUTES: "5",
        Env.ORG_OPT_OUT_TAG: "team:opt-out",
        Env.QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/work.fifo",
        Env.ACT_QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/act.fifo",
        Env.ORG_REGIONS: "enabled",
        Env.SCAN_RATE: "1 hour",
    }
    default = Settings.from_env(base)
    unread = [
        env
        for env in ENV_VARS
        if env in non_default and Settings.from_env({**base, env: non_default[env]}) == default
    ]
    assert unread == []
    assert set(ENV_VARS) <= set(non_default), "add the new variable to this test"


@pytest.mark.parametrize(
    ("projects", "problem"),
    [
        ('{"llm": {"owners": ["alice@example.com\\r\\nURGENT pay now"]}}', "owner"),
        ('{"llm\\u200b": {"budget": 5}}', "ZERO WIDTH SPACE"),
        ('{"vision": {}, "ｖｉｓｉｏｎ": {}}', "both"),
    ],
)
def test_the_central_table_is_held_to_the_tag_contract(projects: str, problem: str) -> None:
    from costguard.env import Env
    from costguard.settings import Settings, SettingsError

    with pytest.raises(SettingsError, match=problem):
        Settings.from_env({Env.REGIONS: "us-east-1", Env.PROJECTS_JSON: projects})
