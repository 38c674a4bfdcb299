"""Settings that one reader accepts and the other refuses (CDK context vs the Lambdas)."""

from __future__ import annotations

import pytest

from costguard.env import Env
from costguard.settings import Settings, SettingsError
from costguard_infra.config import ConfigError, CostGuardConfig


def lambda_settings(config: CostGuardConfig) -> Settings:
    """What every deployed Lambda does at start: read the variables the stack wrote."""
    return Settings.from_env(
        {**config.environment(), Env.TABLE_NAME: "ledger", Env.SCOPE: "123456789012"}
    )


@pytest.mark.parametrize(
    "projects",
    [
        # the same project typed twice (full-width, as the README's own example)
        '{"vision": {"budget": 5000}, "\uff56\uff49\uff53\uff49\uff4f\uff4e": {"budget": 9000}}',
        # a name the tag contract refuses (a zero-width space inside)
        '{"vi\u200bsion": {"budget": 5000}}',
        # an empty name
        '{"": {"budget": 5000}}',
    ],
)
def test_a_central_table_the_synth_accepts_is_one_every_lambda_can_start_with(
    projects: str,
) -> None:
    # GIVEN a `projects` context value
    # WHEN the synth accepts it
    try:
        config = CostGuardConfig.from_context({"projects": projects})
    except ConfigError:
        return  # refused at synth, with a message: fine
    # THEN the Lambdas accept the environment the stack wrote from it; otherwise every
    # scan (and every guard run) fails at start-up, from the deploy on, with no alert
    try:
        lambda_settings(config)
    except SettingsError as exc:
        pytest.fail(f"deployed, then every invocation fails: {exc}")


def test_a_json_true_budget_is_refused_not_read_as_one_dollar() -> None:
    # GIVEN a central table whose budget is the JSON literal true (a hand-edited cdk.json)
    config_error = None
    try:
        config = CostGuardConfig.from_context({"projects": '{"vision": {"budget": true}}'})
    except ConfigError as exc:
        config_error = exc
    # THEN it is refused like any other malformed budget ("abc", "0", an empty value),
    # rather than becoming a $1 budget that makes every alert of the project critical
    if config_error is None:
        budget = lambda_settings(config).project_table()["vision"].budget
        pytest.fail(f"accepted; the project's budget is ${budget}")
