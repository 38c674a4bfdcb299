"""Guards across an Organization on moto: the fan-out plans one run per member account, the
act consumer enters each account through its act role and runs the single-account
guard there (warn, grace, act, dry-run, audit), recording in the hub.

moto keeps one backend per account, reached through assumed-role credentials, so a
volume "in account A" is in A's backend only, and the hub's own account is another.
moto starts snapshots at the simulated time the guard runs at (tests/support/clock.py).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.domain.directory import SliceState
from costguard.domain.org import Slice
from costguard.domain.org_roles import OrgRoles
from costguard.domain.tags import Tags
from costguard.env import Env
from costguard.wiring.org import build_guard_work
from tests.functional.test_org_fanout import _record
from tests.functional.test_org_slices import _deny_assume, _member_session
from tests.functional.test_scan_handler import Context
from tests.support.clock import snapshots_start_on_the_clock

HUB = "111111111111"
A, B, C = "222222222222", "333333333333", "444444444444"
REGION = "us-east-1"
#: moto's own account: the hub's session (no role assumed) lands here.
HUB_BACKEND = "123456789012"
T0 = datetime(2026, 11, 13, 9, tzinfo=UTC)
H = timedelta(hours=1)


@pytest.fixture
def hub(aws: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    snapshots_start_on_the_clock(monkeypatch)
    from costguard.adapters.directory import DynamoDbDirectory
    from costguard.domain.directory import AccountRegions
    from costguard.handlers import org_act
    from costguard_demo.plumbing import create_ledger_table

    monkeypatch.setattr(org_act, "_MEMBERS", [])
    create_ledger_table(aws, "ledger", REGION)
    sqs = aws.client("sqs", region_name=REGION)
    act = sqs.create_queue(QueueName="act.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    work = sqs.create_queue(QueueName="work.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sns = aws.client("sns", region_name=REGION)
    topic = sns.create_topic(Name="alerts")["TopicArn"]
    inbox = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn)
    env = {
        Env.REGIONS: f"{REGION},us-west-2",
        Env.TABLE_NAME: "ledger",
        Env.SCOPE: HUB,
        Env.SAGEMAKER_STUDIO: "false",
        Env.ORG_ACCOUNTS: f"{A},{B},{C}",
        Env.ORG_ID: "o-abc1234567",
        Env.ACT_QUEUE_URL: act,
        Env.QUEUE_URL: work,
        Env.TOPIC_ARN: topic,
        Env.DRY_RUN: "false",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # The directory the scan ticks keep: every account's regions read; compute found in
    # A's us-east-1 only (B's and C's regions are empty).
    store = DynamoDbDirectory(aws.client("dynamodb", region_name=REGION), "ledger", HUB)
    for account in (A, B, C):
        store.update_regions(
            account,
            lambda r: replace(r, regions=(REGION, "us-west-2", "eu-west-1"), discovered_at=T0),
        )
    store.update_slice(
        Slice(A, REGION), lambda s: replace(s, state=SliceState.ACTIVE, as_of=T0, checked_at=T0)
    )
    store.update_slice(
        Slice(B, REGION), lambda s: replace(s, state=SliceState.EMPTY, as_of=T0, checked_at=T0)
    )
    assert isinstance(store.load().regions[A], AccountRegions)
    return {"session": aws, "act": act, "inbox": inbox, "env": env}


def _clock(monkeypatch: pytest.MonkeyPatch, at: datetime) -> None:
    from costguard import events

    monkeypatch.setattr(events, "CLOCK", lambda: at)


def _drain(session: Any, url: str) -> list[dict[str, Any]]:
    sqs = session.client("sqs", region_name=REGION)
    out = []
    while got := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", []):
        out += got
        for m in got:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return out


def _alerts(session: Any, inbox: str) -> list[dict[str, Any]]:
    return [json.loads(json.loads(m["Body"])["Message"]) for m in _drain(session, inbox)]


def _volume(session: Any, **tags: str) -> str:
    ec2 = session.client("ec2", region_name=REGION)
    spec = [{"ResourceType": "volume", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    return str(
        ec2.create_volume(
            AvailabilityZone=f"{REGION}a",
            Size=100,
            VolumeType="gp3",
            **({"TagSpecifications": spec} if tags else {}),
        )["VolumeId"]
    )


def _volumes(session: Any) -> dict[str, dict[str, str]]:
    ec2 = session.client("ec2", region_name=REGION)
    return {
        v["VolumeId"]: {t["Key"]: t["Value"] for t in v.get("Tags", [])}
        for v in ec2.describe_volumes()["Volumes"]
    }


def _guard_tick(
    hub: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    guard: str,
    at: datetime,
    *,
    handler: bool = True,
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """The guard's schedule at ``at``: the fan-out, then the act consumer on each message
    (its Lambda handler, or, to watch the test's session, its graph on that session)."""
    import os

    from costguard.handlers import org, org_act
    from costguard.settings import Settings

    _clock(monkeypatch, at)
    fanned = org.fanout_handler({"time": at.isoformat(), "guard": guard}, Context())
    messages = _drain(hub["session"], hub["act"])
    event = {"Records": [_record(m) for m in messages]}
    if handler:
        consumed = org_act.handler(event, Context())
    else:
        work = build_guard_work(Settings.from_env(os.environ), hub["session"])
        consumed = org_act.consume(event, work, at)
    return fanned, consumed, messages


def _member(hub: dict[str, Any], account: str) -> Any:
    return _member_session(hub["session"], account, REGION)


def test_a_guard_schedule_plans_one_run_per_account_where_the_guard_can_act(
    hub: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.handlers import org

    _clock(monkeypatch, T0)
    # WHEN the data guard's and the compute guard's schedules invoke the fan-out
    data = org.fanout_handler({"time": T0.isoformat(), "guard": "stale-volumes"}, Context())
    data_messages = _drain(hub["session"], hub["act"])
    compute = org.fanout_handler({"time": T0.isoformat(), "guard": "idle-notebooks"}, Context())
    compute_messages = _drain(hub["session"], hub["act"])
    # THEN the data guard runs in every account, over the allowed regions only
    # (eu-west-1 is enabled but not in the deployment's regions)
    bodies = sorted((json.loads(m["Body"]) for m in data_messages), key=lambda b: b["account"])
    assert data["runs"] == 3 and data["sent"] == 3
    assert [(b["account"], b["regions"]) for b in bodies] == [
        (a, [REGION, "us-west-2"]) for a in (A, B, C)
    ]
    # AND the compute guard runs only where compute was found (A's us-east-1)
    assert compute["runs"] == 1
    assert [json.loads(m["Body"])["regions"] for m in compute_messages] == [[REGION]]
    # AND each account and guard is its own message group (one run of a guard at a time
    # in an account, and a failing guard never holds another guard's runs)
    assert {m["Attributes"]["MessageGroupId"] for m in data_messages} == {
        f"{a}#stale-volumes" for a in (A, B, C)
    }
    assert {m["Attributes"]["MessageGroupId"] for m in compute_messages} == {f"{A}#idle-notebooks"}


def test_an_unknown_guard_is_refused_before_anything_is_sent(
    hub: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.handlers import org
    from costguard.services.org_act import UnknownGuardError

    _clock(monkeypatch, T0)
    with pytest.raises(UnknownGuardError, match="stale-volumes"):
        org.fanout_handler({"time": T0.isoformat(), "guard": "delete-everything"}, Context())
    assert _drain(hub["session"], hub["act"]) == []


def test_the_stale_volume_guard_warns_then_acts_in_the_member_account_only(
    hub: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.adapters.dynamodb import DynamoDbLedger

    session = hub["session"]
    # GIVEN an unattached project volume in A, the same in the hub's own account, an
    # untagged (out of scope) one in B and an exempt one in B
    stale = _volume(_member(hub, A), **{Tags.PROJECT: "llm"})
    in_hub = _volume(session, **{Tags.PROJECT: "llm"})
    untagged = _volume(_member(hub, B))
    exempt = _volume(_member(hub, B), **{Tags.PROJECT: "llm", Tags.EXEMPT: "true"})
    # WHEN the guard runs when they are first seen, at the warning, and past the TTL
    _, first, _ = _guard_tick(hub, monkeypatch, "stale-volumes", T0)
    _, warned, _ = _guard_tick(hub, monkeypatch, "stale-volumes", T0 + 25 * H)
    after_warning = _volumes(_member(hub, A))
    alerts = _alerts(session, hub["inbox"])
    _, snapshotted, _ = _guard_tick(hub, monkeypatch, "stale-volumes", T0 + 49 * H)
    _, acted, _ = _guard_tick(hub, monkeypatch, "stale-volumes", T0 + 50 * H)
    # THEN every run succeeded (C, with no volume, too)
    assert first == warned == snapshotted == acted == {"batchItemFailures": []}
    # AND A's owner was warned first (the volume carries the deadline), naming the account
    assert Tags.ACTION_AFTER in after_warning[stale]
    warnings = [a for a in alerts if a["kind"] == "action-warning"]
    assert len(warnings) == 1 and A in json.dumps(warnings[0])
    # AND past the TTL A's volume was snapshotted and deleted
    assert stale not in _volumes(_member(hub, A))
    snapshots = _member(hub, A).client("ec2").describe_snapshots(OwnerIds=["self"])["Snapshots"]
    assert [s["VolumeId"] for s in snapshots] == [stale]
    # AND nothing else anywhere: not the hub's own volume, not B's out-of-scope ones
    assert in_hub in _volumes(session)
    assert set(_volumes(_member(hub, B))) == {untagged, exempt}
    # AND the audit trail is in the hub's ledger, under A's own scope (none in the hub's)
    ledger = DynamoDbLedger(session.client("dynamodb", region_name=REGION), "ledger")
    months = sorted({f"{t:%Y-%m}" for t in (T0, T0 + 50 * H)})
    trail = [e for m in months for e in ledger.audit_trail(f"{HUB}/{A}", m)]
    assert any(stale in e.resource and e.outcome == "acted" for e in trail)
    assert [e for m in months for e in ledger.audit_trail(HUB, m)] == []
    # AND the roll-up's savings find A's action through the hub's acted-accounts index
    from costguard.services.org_act import OrgSavings

    saved = OrgSavings(ledger, ledger, HUB)(months[-1], T0 + 51 * H)
    assert saved["llm"].actions == 1 and saved["llm"].usd_per_hour > 0


def test_dry_run_reports_what_it_would_do_in_member_accounts_and_changes_nothing(
    hub: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(Env.DRY_RUN, "true")
    stale = _volume(_member(hub, A), **{Tags.PROJECT: "llm"})
    for at in (T0, T0 + 25 * H, T0 + 49 * H, T0 + 50 * H):
        _, consumed, _ = _guard_tick(hub, monkeypatch, "stale-volumes", at)
        assert consumed == {"batchItemFailures": []}
    # THEN the volume is there, untagged by CostGuard, and no snapshot was taken
    assert _volumes(_member(hub, A))[stale] == {Tags.PROJECT: "llm"}
    assert _member(hub, A).client("ec2").describe_snapshots(OwnerIds=["self"])["Snapshots"] == []


def test_an_account_without_the_act_role_fails_alone_and_is_named_once_a_day(
    hub: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.adapters.dynamodb import DynamoDbLedger

    session = hub["session"]
    _deny_assume(session, C)
    stale = _volume(_member(hub, A), **{Tags.PROJECT: "llm"})
    # WHEN the guard runs twice the same day (C's message fails both times)
    _, first, messages = _guard_tick(hub, monkeypatch, "stale-volumes", T0, handler=False)
    _, second, _ = _guard_tick(hub, monkeypatch, "stale-volumes", T0 + H, handler=False)
    # THEN only C's message is handed back for a retry (then the dead-letter queue)
    by_account = {m["MessageId"]: json.loads(m["Body"])["account"] for m in messages}
    assert [by_account[f["itemIdentifier"]] for f in first["batchItemFailures"]] == [C]
    assert len(second["batchItemFailures"]) == 1
    # AND one alert names the account, once that day, whatever the retries
    alerts = [a for a in _alerts(session, hub["inbox"]) if "cannot act" in a["title"]]
    assert len(alerts) == 1 and C in alerts[0]["title"]
    # AND a finding names it in the hub's ledger
    ledger = DynamoDbLedger(session.client("dynamodb", region_name=REGION), "ledger")
    found = ledger.findings(HUB, f"{T0:%Y-%m-%d}")
    assert any(f.code.value == "act-failed" and C in f.resource for f in found)
    # AND A was guarded all the same
    assert stale in _volumes(_member(hub, A))


def test_the_act_consumer_enters_members_through_the_act_role_only(
    hub: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = hub["session"]
    assumed: list[dict[str, Any]] = []
    session.events.register(
        "provide-client-params.sts.AssumeRole", lambda params, **_: assumed.append(dict(params))
    )
    _guard_tick(hub, monkeypatch, "stale-volumes", T0, handler=False)
    assert {p["RoleArn"] for p in assumed} == {
        f"arn:aws:iam::{a}:role/{OrgRoles.MEMBER_ACT}" for a in (A, B, C)
    }
    assert {p["RoleSessionName"] for p in assumed} == {"costguard-hub-act"}


def test_a_redelivered_run_acts_on_nothing_twice(
    hub: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.handlers import org, org_act

    stale = _volume(_member(hub, A), **{Tags.PROJECT: "llm"})
    _guard_tick(hub, monkeypatch, "stale-volumes", T0)
    _guard_tick(hub, monkeypatch, "stale-volumes", T0 + 25 * H)
    _guard_tick(hub, monkeypatch, "stale-volumes", T0 + 49 * H)
    at = T0 + 50 * H
    _clock(monkeypatch, at)
    org.fanout_handler({"time": at.isoformat(), "guard": "stale-volumes"}, Context())
    records = [_record(m) for m in _drain(hub["session"], hub["act"])]
    # WHEN SQS delivers the same messages twice
    once = org_act.handler({"Records": records}, Context())
    twice = org_act.handler({"Records": records}, Context())
    # THEN one snapshot and one delete: the second delivery finds the work claimed and done
    assert once == twice == {"batchItemFailures": []}
    snapshots = _member(hub, A).client("ec2").describe_snapshots(OwnerIds=["self"])["Snapshots"]
    assert [s["VolumeId"] for s in snapshots] == [stale]
    assert stale not in _volumes(_member(hub, A))


def test_a_run_planned_too_long_ago_is_dropped_without_entering_the_account(
    hub: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from costguard.handlers import org, org_act
    from costguard.settings import Settings

    session = hub["session"]
    assumed: list[str] = []
    session.events.register(
        "provide-client-params.sts.AssumeRole", lambda params, **_: assumed.append("x")
    )
    _clock(monkeypatch, T0)
    org.fanout_handler({"time": T0.isoformat(), "guard": "stale-volumes"}, Context())
    records = [_record(m) for m in _drain(session, hub["act"])]
    # WHEN the messages are redriven from the dead-letter queue a day later
    work = build_guard_work(Settings.from_env(os.environ), session)
    out = org_act.consume({"Records": records}, work, T0 + 24 * H)
    assert out == {"batchItemFailures": []} and assumed == []


def test_with_org_regions_enabled_every_region_an_account_enabled_is_guarded(
    hub: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.handlers import org

    monkeypatch.setenv(Env.ORG_REGIONS, "enabled")
    _clock(monkeypatch, T0)
    org.fanout_handler({"time": T0.isoformat(), "guard": "stale-volumes"}, Context())
    bodies = [json.loads(m["Body"]) for m in _drain(hub["session"], hub["act"])]
    # THEN eu-west-1, enabled in every account but not in `regions`, is guarded too
    assert {tuple(b["regions"]) for b in bodies} == {("eu-west-1", REGION, "us-west-2")}
    # AND the scan ticks' plan takes the same regions (probes of the unprobed ones)
    tick = org.fanout_handler({"time": T0.isoformat()}, Context())
    assert tick["account_regions"] == 9


@pytest.mark.parametrize(
    "regions",
    [["eu-west-1"], ["../../etc"], ["us-east-1\u200b"]],
    ids=["not-allowed", "path", "invisible"],
)
def test_a_message_naming_no_allowed_region_fails_and_acts_nowhere(
    hub: dict[str, Any], monkeypatch: pytest.MonkeyPatch, regions: list[str]
) -> None:
    import os

    from costguard.handlers import org_act
    from costguard.settings import Settings

    # GIVEN a stale project volume in A's eu-west-1 (enabled, but not in `regions`)
    ec2 = _member_session(hub["session"], A, "eu-west-1").client("ec2")
    volume = ec2.create_volume(AvailabilityZone="eu-west-1a", Size=10, VolumeType="gp3")
    ec2.create_tags(Resources=[volume["VolumeId"]], Tags=[{"Key": Tags.PROJECT, "Value": "x"}])
    body = json.dumps(
        {"time": T0.isoformat(), "guard": "stale-volumes", "account": A, "regions": regions}
    )
    record = {
        "messageId": "m1",
        "receiptHandle": "r1",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1", "MessageGroupId": A},
        "messageAttributes": {},
        "md5OfBody": "x",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:act.fifo",
        "awsRegion": REGION,
    }
    work = build_guard_work(Settings.from_env(os.environ), hub["session"])
    # WHEN a message names only a region outside the deployment's, or not a region at all
    out = org_act.consume({"Records": [record]}, work, T0 + timedelta(minutes=1))
    # THEN it is handed back (SQS retries it, then dead-letters it)
    assert out == {"batchItemFailures": [{"itemIdentifier": "m1"}]}
    # AND nothing was tagged or deleted
    (found,) = ec2.describe_volumes()["Volumes"]
    assert {t["Key"] for t in found.get("Tags", [])} == {Tags.PROJECT}
