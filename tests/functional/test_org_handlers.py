"""The hub's two Lambda handlers on moto, from their environment (the names the CDK side
sets): the fan-out enqueues a tick from the schedule's time, the consumer runs it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.env import Env
from costguard.handlers import org
from costguard.settings import ORG_ENV_VARS
from costguard.wiring.org import HubSettings, OrgConfigError
from tests.functional.test_org_fanout import _record
from tests.functional.test_org_slices import HUB, A, B, _launch
from tests.functional.test_scan_handler import Context

T0 = datetime.fromisoformat("2026-11-20T12:00:00+00:00")


@pytest.fixture
def hub_env(aws: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str]:
    from costguard import events
    from costguard_demo.plumbing import create_ledger_table

    monkeypatch.setattr(events, "CLOCK", lambda: T0 + timedelta(minutes=1))
    monkeypatch.setattr(org, "_MEMBERS", {})  # no member credentials from another test
    create_ledger_table(aws, "ledger", "us-east-1")
    sqs = aws.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="work.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    for key, value in {
        Env.REGIONS: "us-east-1",
        Env.TABLE_NAME: "ledger",
        Env.SCOPE: HUB,
        Env.SAGEMAKER_STUDIO: "false",
        Env.ORG_ACCOUNTS: f"{A},{B}",
        Env.ORG_ID: "o-abc1234567",
        Env.QUEUE_URL: url,
    }.items():
        monkeypatch.setenv(key, value)
    return aws, url


def _drain(session: Any, url: str) -> list[dict[str, Any]]:
    sqs = session.client("sqs", region_name="us-east-1")
    out = []
    while got := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", []):
        out += got
        for m in got:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return out


def test_the_fan_out_and_the_consumer_run_a_tick_from_their_environment(
    hub_env: tuple[Any, str],
) -> None:
    session, url = hub_env
    _launch(session, A, "us-east-1", "llm", T0 - timedelta(hours=1))
    # WHEN the schedule invokes the fan-out with its time, and the consumer gets the batch
    first = org.fanout_handler({"time": T0.isoformat()}, Context())
    messages = _drain(session, url)
    consumed = org.consumer_handler({"Records": [_record(m) for m in messages]}, Context())
    # THEN the tick read both accounts' regions, each in one message grouped by account
    assert first["regions"] == 2 and first["sent"] == 2 and first["accounts"] == 2
    assert consumed == {"batchItemFailures": []}
    bodies = [json.loads(m["Body"]) for m in messages]
    assert {(b["kind"], b["account"]) for b in bodies} == {("regions", A), ("regions", B)}
    assert {m["Attributes"]["MessageGroupId"].split("#")[0] for m in messages} == {A, B}
    # AND the next tick probes the allow-listed region of each account
    second = org.fanout_handler({"time": (T0 + timedelta(minutes=1)).isoformat()}, Context())
    assert second["probes"] == 2 and second["account_regions"] == 2


def test_the_fan_out_refuses_an_implausible_time_and_enqueues_nothing(
    hub_env: tuple[Any, str],
) -> None:
    session, url = hub_env
    out = org.fanout_handler({"time": "1970-01-01T00:00:00Z"}, Context())
    assert "refused" in out and out["sent"] == 0
    assert _drain(session, url) == []


def test_single_account_mode_has_no_fan_out(hub_env: tuple[Any, str], monkeypatch: Any) -> None:
    monkeypatch.setenv(Env.ORG_ACCOUNTS, "")
    with pytest.raises(OrgConfigError, match=Env.ORG_ACCOUNTS):
        org.fanout_handler({"time": T0.isoformat()}, Context())


REGION = {"COSTGUARD_REGIONS": "us-east-1"}


def test_reads_the_contract_s_variables_with_their_defaults() -> None:
    env = HubSettings.from_env(
        {Env.ORG_ACCOUNTS: " Discover ", Env.ORG_ID: "o-abc1234567", **REGION}
    )
    assert env.discover and env.org_mode and env.accounts is None
    assert env.member_role == "costguard-member-read" and env.per_account_cap == 2
    assert env.probe_interval == timedelta(hours=6) and env.deadline == timedelta(minutes=10)
    assert env.opt_out_tag == "costguard:opt-out"
    assert not HubSettings.from_env(REGION).org_mode
    custom = HubSettings.from_env(
        {
            Env.ORG_ACCOUNTS: f"{A}, {B},{A}",
            Env.ORG_ID: "o-abc1234567",
            Env.PROBE_HOURS: "2",
            Env.PER_ACCOUNT_CONCURRENCY: "3",
            Env.SLICE_DEADLINE_MINUTES: "20",
            Env.MEMBER_ROLE: "custom-read",
            Env.ORG_OPT_OUT_TAG: "finops:skip",
            **REGION,
        }
    )
    assert custom.accounts == (A, B) and custom.probe_interval == timedelta(hours=2)
    assert custom.per_account_cap == 3 and custom.deadline == timedelta(minutes=20)
    assert custom.member_role == "custom-read" and custom.opt_out_tag == "finops:skip"
    assert set(ORG_ENV_VARS) == {
        Env.ORG_ACCOUNTS,
        Env.ORG_ID,
        Env.MEMBER_ROLE,
        Env.PER_ACCOUNT_CONCURRENCY,
        Env.PROBE_HOURS,
        Env.SLICE_DEADLINE_MINUTES,
        Env.ORG_OPT_OUT_TAG,
        Env.QUEUE_URL,
        Env.ACT_QUEUE_URL,
        Env.ORG_REGIONS,
    }


def test_names_every_wrong_variable_at_once() -> None:
    with pytest.raises(OrgConfigError) as caught:
        HubSettings.from_env(
            {
                Env.ORG_ACCOUNTS: "12345",
                Env.ORG_ID: "org-1",
                Env.PROBE_HOURS: "NaN",
                Env.PER_ACCOUNT_CONCURRENCY: "0",
                Env.SLICE_DEADLINE_MINUTES: "-5",
                Env.MEMBER_ROLE: "bad role/name",
                **REGION,
            }
        )
    message = str(caught.value)
    for name in (
        Env.ORG_ACCOUNTS,
        Env.ORG_ID,
        Env.PROBE_HOURS,
        Env.PER_ACCOUNT_CONCURRENCY,
        Env.SLICE_DEADLINE_MINUTES,
        Env.MEMBER_ROLE,
    ):
        assert name in message


def test_regions_are_read_from_a_region_no_account_can_disable(
    hub_env: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a hub deployed in an opt-in region (a member may not have enabled it)
    import os

    import boto3

    from costguard.settings import Settings
    from costguard.wiring.org import build_fanout
    from costguard_demo.plumbing import create_ledger_table

    session, _url = hub_env
    hub = boto3.Session(region_name="af-south-1")
    create_ledger_table(hub, "ledger", "af-south-1")
    fanout = build_fanout(
        Settings.from_env(os.environ),
        HubSettings.from_env(os.environ),
        hub,
        sqs=session.client("sqs", region_name="us-east-1"),
    )
    # WHEN a tick asks for the accounts' regions
    summary = fanout.tick(T0)
    # THEN DescribeRegions is called from us-east-1, enabled in every commercial account
    assert {s.region for s in summary.work.regions} == {"us-east-1"}
