"""The hub's two Lambda handlers on moto, from their environment (the names the CDK side
sets): the fan-out enqueues a tick from the schedule's time, the consumer runs it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.handlers import org
from costguard.handlers.org import (
    MEMBER_ROLE_ENV,
    OPT_OUT_TAG_ENV,
    ORG_ACCOUNTS_ENV,
    ORG_ENV_VARS,
    ORG_ID_ENV,
    PER_ACCOUNT_CAP_ENV,
    PROBE_HOURS_ENV,
    QUEUE_URL_ENV,
    SLICE_DEADLINE_ENV,
    OrgConfigError,
    OrgEnvironment,
)
from costguard.names import Env
from tests.functional.test_org_fanout import _record
from tests.functional.test_org_slices import HUB, A, B, _launch
from tests.functional.test_scan_handler import Context

T0 = datetime.fromisoformat("2026-11-20T12:00:00+00:00")


@pytest.fixture
def hub_env(aws: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str]:
    from costguard.handlers import events
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
        ORG_ACCOUNTS_ENV: f"{A},{B}",
        ORG_ID_ENV: "o-abc1234567",
        QUEUE_URL_ENV: url,
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
    monkeypatch.setenv(ORG_ACCOUNTS_ENV, "")
    with pytest.raises(OrgConfigError, match=ORG_ACCOUNTS_ENV):
        org.fanout_handler({"time": T0.isoformat()}, Context())


REGION = {"COSTGUARD_REGIONS": "us-east-1"}


def test_reads_the_contract_s_variables_with_their_defaults() -> None:
    env = OrgEnvironment.from_env(
        {ORG_ACCOUNTS_ENV: " Discover ", ORG_ID_ENV: "o-abc1234567", **REGION}
    )
    assert env.discover and env.org_mode and env.accounts is None
    assert env.member_role == "costguard-member-read" and env.per_account_cap == 2
    assert env.probe_interval == timedelta(hours=6) and env.deadline == timedelta(minutes=10)
    assert env.opt_out_tag == "costguard:opt-out"
    assert not OrgEnvironment.from_env(REGION).org_mode
    custom = OrgEnvironment.from_env(
        {
            ORG_ACCOUNTS_ENV: f"{A}, {B},{A}",
            ORG_ID_ENV: "o-abc1234567",
            PROBE_HOURS_ENV: "2",
            PER_ACCOUNT_CAP_ENV: "3",
            SLICE_DEADLINE_ENV: "20",
            MEMBER_ROLE_ENV: "custom-read",
            OPT_OUT_TAG_ENV: "finops:skip",
            **REGION,
        }
    )
    assert custom.accounts == (A, B) and custom.probe_interval == timedelta(hours=2)
    assert custom.per_account_cap == 3 and custom.deadline == timedelta(minutes=20)
    assert custom.member_role == "custom-read" and custom.opt_out_tag == "finops:skip"
    assert set(ORG_ENV_VARS) == {
        ORG_ACCOUNTS_ENV,
        ORG_ID_ENV,
        MEMBER_ROLE_ENV,
        PER_ACCOUNT_CAP_ENV,
        PROBE_HOURS_ENV,
        SLICE_DEADLINE_ENV,
        OPT_OUT_TAG_ENV,
        QUEUE_URL_ENV,
        Env.ACT_QUEUE_URL,
        Env.ORG_REGIONS,
    }


def test_names_every_wrong_variable_at_once() -> None:
    with pytest.raises(OrgConfigError) as caught:
        OrgEnvironment.from_env(
            {
                ORG_ACCOUNTS_ENV: "12345",
                ORG_ID_ENV: "org-1",
                PROBE_HOURS_ENV: "NaN",
                PER_ACCOUNT_CAP_ENV: "0",
                SLICE_DEADLINE_ENV: "-5",
                MEMBER_ROLE_ENV: "bad role/name",
                **REGION,
            }
        )
    message = str(caught.value)
    for name in (
        ORG_ACCOUNTS_ENV,
        ORG_ID_ENV,
        PROBE_HOURS_ENV,
        PER_ACCOUNT_CAP_ENV,
        SLICE_DEADLINE_ENV,
        MEMBER_ROLE_ENV,
    ):
        assert name in message


def test_regions_are_read_from_a_region_no_account_can_disable(
    hub_env: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a hub deployed in an opt-in region (a member may not have enabled it)
    import os

    import boto3

    from costguard.handlers.org import build_fanout
    from costguard.settings import Settings
    from costguard_demo.plumbing import create_ledger_table

    session, _url = hub_env
    hub = boto3.Session(region_name="af-south-1")
    create_ledger_table(hub, "ledger", "af-south-1")
    fanout = build_fanout(
        Settings.from_env(os.environ),
        OrgEnvironment.from_env(os.environ),
        hub,
        sqs=session.client("sqs", region_name="us-east-1"),
    )
    # WHEN a tick asks for the accounts' regions
    summary = fanout.tick(T0)
    # THEN DescribeRegions is called from us-east-1, enabled in every commercial account
    assert {s.region for s in summary.work.regions} == {"us-east-1"}
