"""The scan Lambda handler on moto: environment in, JSON summary out, ledger updated."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import timedelta, timezone
from typing import Any

import pytest

from costguard.env import Env
from tests.support.clock import MIDDAY
from tests.support.ec2 import run_instance


@dataclass
class Context:
    function_name: str = "costguard-scan"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:costguard-scan"
    aws_request_id: str = "req-1"


@pytest.fixture
def lambda_env(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from costguard import events
    from costguard_demo.plumbing import create_ledger_table

    # The Lambda's clock: an hour after MIDDAY, so MIDDAY and MIDDAY + 1 h are recent scans.
    monkeypatch.setattr(events, "CLOCK", lambda: MIDDAY + timedelta(hours=1))

    create_ledger_table(aws, "ledger", "us-east-1")
    for key, value in {
        Env.REGIONS: "us-east-1",
        Env.TABLE_NAME: "ledger",
        Env.SCOPE: "123456789012",
        Env.SAGEMAKER_TAGS: "per-resource",
        Env.SAGEMAKER_STUDIO: "false",
    }.items():
        monkeypatch.setenv(key, value)
    return aws


def test_scheduled_scan_uses_the_event_time_and_accrues_exactly_once(lambda_env: Any) -> None:
    from costguard.handlers.scan import handler

    ec2 = lambda_env.client("ec2", region_name="us-east-1")
    run_instance(ec2, {"costguard:project": "cv"})
    first = handler({"time": MIDDAY.isoformat()}, Context())
    later = (MIDDAY + timedelta(hours=1)).isoformat()
    second = handler({"time": later}, Context())
    retried = handler({"time": later}, Context())  # the same scheduled event delivered twice

    assert first["scanned_at"] == MIDDAY.isoformat()
    assert second["ledger"] == "applied"
    assert retried["ledger"] == "already-applied"
    (cv,) = [p for p in retried["projects"] if p["project"] == "cv"]
    assert cv["month_to_date_usd"] == second["projects"][0]["month_to_date_usd"]
    assert cv["run_rate_usd_per_hour"] > 1.006  # the instance plus its root volume
    assert second["api_calls"] > 0


def test_missing_configuration_fails_loudly_for_the_dlq(
    lambda_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.handlers.scan import handler
    from costguard.settings import SettingsError

    monkeypatch.setenv(Env.REGIONS, "us-east-1,not a region")
    with pytest.raises(SettingsError, match="not a region"):
        handler({}, Context())


def test_a_dry_run_deployment_still_alerts_within_the_scan(
    lambda_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:

    from costguard.handlers.scan import handler
    from costguard_demo.plumbing import create_alert_channels, drain

    topic, queue = create_alert_channels(lambda_env, "us-east-1")
    monkeypatch.setenv(Env.TOPIC_ARN, topic)
    monkeypatch.setenv(Env.DRY_RUN, "true")
    ec2 = lambda_env.client("ec2", region_name="us-east-1")
    run_instance(ec2, {"costguard:project": "llm", "costguard:budget": "100"}, "p5.48xlarge")
    result = handler({"time": MIDDAY.isoformat()}, Context())
    kinds = sorted(a["kind"] for a in result["alerts"])
    assert kinds == ["budget-forecast"]  # nothing spent yet, but the month will blow $100
    (message,) = drain(lambda_env, queue, "us-east-1")
    assert (message["project"], message["schema"]) == ("llm", "costguard.alert/v1")


@pytest.mark.parametrize(
    "event_time",
    [
        5,  # a number: pydantic would read it as 1970-01-01T00:00:05
        "1970-01-01T00:00:00Z",  # the console's sample event
        "2026-11-20T08:00:00Z",  # five hours before the clock: older than any retry
        "2026-12-31T00:00:00Z",  # weeks ahead: would accrue the rest of the month at once
        "9999-12-31T23:59:59+00:00",
    ],
)
def test_an_implausible_event_time_is_refused_and_writes_nothing(
    lambda_env: Any, event_time: object
) -> None:
    from costguard.handlers.scan import handler

    ec2 = lambda_env.client("ec2", region_name="us-east-1")
    run_instance(ec2, instance_type="p5.48xlarge")
    result = handler({"time": event_time}, Context())
    assert result["ledger"] == "not-written"
    assert "refused" in result["refused"]
    ddb = lambda_env.client("dynamodb", region_name="us-east-1")
    assert ddb.scan(TableName="ledger")["Items"] == []


def test_a_late_retry_within_the_retry_window_is_still_accepted(lambda_env: Any) -> None:
    from costguard.handlers.scan import handler

    # Two hours late (the schedule's and Lambda's retries together) is a genuine retry.
    result = handler({"time": (MIDDAY - timedelta(hours=1)).isoformat()}, Context())
    assert result["ledger"] == "applied"


def test_an_event_time_with_an_offset_is_converted_to_utc(lambda_env: Any) -> None:
    from costguard.handlers.scan import handler

    local = MIDDAY.astimezone(timezone(timedelta(hours=-5)))  # 07:00-05:00 is 12:00Z
    result = handler({"time": local.isoformat()}, Context())
    assert result["scanned_at"] == MIDDAY.isoformat()


def test_a_failed_alert_step_still_commits_and_emits_metrics_then_fails(
    lambda_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aws_lambda_powertools import Logger

    from costguard.handlers import scan
    from costguard.handlers.scan import AfterScanError, handler

    log = io.StringIO()
    monkeypatch.setattr(scan, "logger", Logger(service="handler-under-test", stream=log))

    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    # GIVEN an alert topic that does not exist (every publish fails)
    monkeypatch.setenv(Env.TOPIC_ARN, "arn:aws:sns:us-east-1:123456789012:gone")
    ec2 = lambda_env.client("ec2", region_name="us-east-1")
    run_instance(ec2, {"costguard:project": "llm", "costguard:budget": "100"}, "p5.48xlarge")
    # WHEN the scan runs and its forecast alert cannot be published
    with pytest.raises(AfterScanError, match="alerts"):
        handler({"time": MIDDAY.isoformat()}, Context())
    # THEN the ledger moved and the per-project metrics were still published
    ddb = lambda_env.client("dynamodb", region_name="us-east-1")
    mark = ddb.get_item(
        TableName="ledger", Key={"pk": {"S": "SCOPE#123456789012"}, "sk": {"S": "WATERMARK"}}
    )
    assert "Item" in mark
    from costguard.telemetry import Figures

    figures = [json.loads(line) for line in log.getvalue().splitlines()]
    assert [f["project"] for f in figures if f.get(Figures.EVENT_KEY) == Figures.EVENT] == ["llm"]


def test_one_failing_alert_does_not_stop_the_other_alerts_of_the_scan(
    lambda_env: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from costguard.adapters.sns import SnsNotifier
    from costguard.handlers.scan import AfterScanError, handler
    from costguard_demo.plumbing import create_alert_channels, drain

    topic, queue = create_alert_channels(lambda_env, "us-east-1")
    monkeypatch.setenv(Env.TOPIC_ARN, topic)
    ec2 = lambda_env.client("ec2", region_name="us-east-1")
    run_instance(ec2, {"costguard:project": "llm", "costguard:budget": "100"}, "p5.48xlarge")
    run_instance(ec2, {}, "g5.xlarge")
    publish = SnsNotifier.publish

    def flaky(self: SnsNotifier, alert: Any) -> str:
        if alert.kind.value == "budget-forecast":
            raise RuntimeError("SNS refused this one")
        return publish(self, alert)

    monkeypatch.setattr(SnsNotifier, "publish", flaky)
    # WHEN one of the scan's alerts cannot be published
    with pytest.raises(AfterScanError, match="budget-forecast"):
        handler({"time": MIDDAY.isoformat()}, Context())
    # THEN the others went out and are logged as published; the invocation still failed
    kinds = sorted(m["kind"] for m in drain(lambda_env, queue, "us-east-1"))
    assert kinds == ["findings-digest", "unattributed-spend"]
    published = [r for r in caplog.records if r.getMessage() == "alert published"]
    assert len(published) == 2


def test_a_deployed_scan_keys_every_resource_with_its_account(lambda_env: Any) -> None:
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.handlers.scan import handler

    ec2 = lambda_env.client("ec2", region_name="us-east-1")
    run_instance(ec2)
    handler({"time": MIDDAY.isoformat()}, Context())
    ledger = DynamoDbLedger(lambda_env.client("dynamodb", region_name="us-east-1"), "ledger")
    keys = list(ledger.observations("123456789012"))
    assert keys and all(k.startswith("123456789012/us-east-1/") for k in keys)
