"""The CDK context key check must not refuse context that the CDK CLI itself reads."""

from __future__ import annotations

import pytest

from costguard_infra.app_builder import check_context_keys


@pytest.mark.parametrize(
    "context",
    [
        # The CDK CLI's documented telemetry opt-out (CLI >= 2.1100): `-c cli-telemetry=false`,
        # or "cli-telemetry": false in cdk.json / ~/.cdk.json. The CLI hands its whole merged
        # context to the app (CDK_CONTEXT_JSON), so the app sees this key on every synth.
        {"cli-telemetry": False},
        {"cli-telemetry": "false"},
    ],
)
def test_the_cdk_clis_own_telemetry_opt_out_does_not_stop_the_synth(context: dict) -> None:
    # GIVEN a user who opted out of CDK CLI telemetry the documented way
    # WHEN `cdk deploy` synthesizes CostGuard
    # THEN the context check lets it through (it is CDK's key, not a mistyped CostGuard one)
    check_context_keys(context)
