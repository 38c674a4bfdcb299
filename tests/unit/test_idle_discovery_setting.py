"""``idleGpuDiscovery``: SEARCH unless the deployment says ``list``, and nothing else."""

from __future__ import annotations

import pytest

from costguard.domain.idle import GpuDiscovery
from costguard.env import Env
from costguard.guards.idle_notebooks import idle_settings
from costguard.settings import Settings, SettingsError

BASE = {Env.REGIONS: "us-east-1"}


def test_the_guard_searches_for_gpu_series_by_default() -> None:
    settings = idle_settings(Settings.from_env(BASE), "123456789012")
    assert settings.gpu_discovery is GpuDiscovery.SEARCH


def test_list_is_chosen_by_its_variable() -> None:
    env = {**BASE, Env.IDLE_GPU_DISCOVERY: "list"}
    assert idle_settings(Settings.from_env(env), "1").gpu_discovery is GpuDiscovery.LIST


@pytest.mark.parametrize("value", ["ListMetrics", "SEARCH", "search "])
def test_anything_else_is_an_error_naming_the_variable(value: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({**BASE, Env.IDLE_GPU_DISCOVERY: value})
    assert "COSTGUARD_IDLE_GPU_DISCOVERY: Input should be 'search' or 'list'" in str(caught.value)


def test_the_context_key_reaches_the_lambda_variable() -> None:
    from costguard_infra.config import ConfigError, CostGuardConfig

    config = CostGuardConfig.from_context({"idleGpuDiscovery": "list"})
    assert config.environment()[Env.IDLE_GPU_DISCOVERY] == "list"
    assert CostGuardConfig.from_context({}).environment()[Env.IDLE_GPU_DISCOVERY] == "search"
    with pytest.raises(ConfigError, match="idleGpuDiscovery"):
        CostGuardConfig.from_context({"idleGpuDiscovery": "both"})
