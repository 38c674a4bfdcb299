"""The scan-failed alert threshold: one setting, the same default everywhere it is spelt."""

from __future__ import annotations

import boto3
import pytest

from costguard.adapters.aws import ClientFactory
from costguard.env import Env
from costguard.services.alerts import AlertSettings
from costguard.settings import Settings, SettingsError
from costguard.wiring import build_alert_service
from costguard_infra.config import ConfigError, CostGuardConfig

TOPIC = "arn:aws:sns:us-east-1:123456789012:costguard-alerts"


def test_the_default_is_three_scans_in_every_place_it_is_written() -> None:
    assert (
        AlertSettings(scope="x").scan_failed_after
        == Settings(regions=("us-east-1",)).scan_failed_alert_after
        == CostGuardConfig().scan_failed_alert_after
        == 3
    )


def test_the_environment_sets_the_alert_service_threshold() -> None:
    settings = Settings.from_env(
        {Env.REGIONS: "us-east-1", Env.TOPIC_ARN: TOPIC, Env.SCAN_FAILED_ALERT_AFTER: "5"}
    )
    service = build_alert_service(
        settings, ClientFactory(boto3.Session(region_name="us-east-1")), ledger=None
    )  # type: ignore[arg-type]
    assert service is not None
    assert service._s.scan_failed_after == 5


@pytest.mark.parametrize("bad", ["0", "-1", "three"])
def test_a_threshold_below_one_scan_is_refused(bad: str) -> None:
    with pytest.raises(SettingsError, match="COSTGUARD_SCAN_FAILED_ALERT_AFTER"):
        Settings.from_env({Env.REGIONS: "us-east-1", Env.SCAN_FAILED_ALERT_AFTER: bad})
    with pytest.raises(ConfigError, match="`scanFailedAlertAfter`"):
        CostGuardConfig.from_context({"scanFailedAlertAfter": bad})


def test_context_given_on_the_command_line_is_accepted_as_a_string() -> None:
    assert CostGuardConfig.from_context({"scanFailedAlertAfter": "6"}).scan_failed_alert_after == 6
