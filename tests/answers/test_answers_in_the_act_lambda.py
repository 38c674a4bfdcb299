"""An answer reaches the guard's own Lambda (moto): keep holds the stop off, act now stops at
once, the audit names who answered, and the warning's Slack message is updated in place."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.domain.answers import Answer, Answerer, AnswerRequest, answer_event
from costguard.domain.tags import Tags
from costguard.env import Env
from costguard.services.guard import Guard
from costguard_demo.slack_standin import SlackStandIn
from tests.support.clock import MIDDAY
from tests.support.ec2 import run_instance
from tests.support.toy import TOY, ToyPolicy


@pytest.fixture
def account(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from costguard import events
    from costguard_demo.plumbing import create_ledger_table

    monkeypatch.setattr(events, "CLOCK", lambda: MIDDAY)
    create_ledger_table(aws, "ledger", "us-east-1")
    return aws


def settings(**env: str) -> Any:
    from costguard.settings import Settings

    return Settings.from_env(
        {
            Env.REGIONS: "us-east-1",
            Env.TABLE_NAME: "ledger",
            Env.SCOPE: "123456789012",
            Env.DRY_RUN: "false",
            **env,
        }
    )


def toy(session: Any) -> dict[str, Any]:
    return {
        "toy": lambda _settings, clients, _context: Guard(
            "toy", ToyPolicy(session), [Ec2InstanceActuator(clients)]
        )
    }


def answer(
    instance: str,
    what: Answer,
    at: Any,
    *,
    url: str | None = None,
    who: str = "alice@example.com",
    **kw: Any,
) -> dict[str, Any]:
    return answer_event(
        AnswerRequest(
            "toy",
            f"us-east-1/ec2-instance/{instance}",
            what,
            Answerer(who, "slack", "@alice"),
            at,
            response_url=url,
            request_id=f"{instance}-{what.value}-{at.isoformat()}",
            **kw,
        )
    )


def test_keep_and_act_now_through_the_guards_lambda(account: Any) -> None:
    from costguard.handlers.act import process, take_answer

    ec2 = account.client("ec2", region_name="us-east-1")
    owned = {Tags.PROJECT: "vision", TOY: "idle", Tags.OWNER: "alice@example.com"}
    kept, stopped = run_instance(ec2, owned), run_instance(ec2, owned)
    # GIVEN both idle instances warned by the toy guard (stop after 1 hour)
    report = process(
        {"time": MIDDAY.isoformat(), "guard": "toy"}, settings(), account, guards=toy(account)
    )
    assert report.counts == {"warned": 2}
    with SlackStandIn() as slack:
        url = slack.origin + "/actions/T1/1/abc"
        at = MIDDAY + timedelta(minutes=10)
        # WHEN alice keeps one for 4 hours and answers "act now" for the other
        keep = take_answer(
            answer(kept, Answer.KEEP_4H, at, url=url, until=at + timedelta(hours=4)),
            settings(),
            account,
            at,
            guards=toy(account),
            slack_origin=slack.origin,
        )
        act = take_answer(
            answer(stopped, Answer.ACT_NOW, at, url=url),
            settings(),
            account,
            at,
            guards=toy(account),
            slack_origin=slack.origin,
        )
        # THEN the warnings' messages say so, in place
        texts = [body["text"] for _, body in slack.responses]
    assert keep["answer"] == "kept" and act["answer"] == "act-now"
    state = {
        i["InstanceId"]: (i["State"]["Name"], {t["Key"]: t["Value"] for t in i.get("Tags", [])})
        for r in ec2.describe_instances()["Reservations"]
        for i in r["Instances"]
    }
    # the one answered "act now" is stopped at once, 50 minutes before its deadline
    assert state[stopped][0] == "stopped"
    # the one kept carries costguard:exempt for 4 hours, and the guard does not stop it
    assert state[kept][1][Tags.EXEMPT] == "2026-11-20T16:10:00Z"
    later = process(
        {"time": (MIDDAY + timedelta(hours=1, minutes=5)).isoformat(), "guard": "toy"},
        settings(),
        account,
        MIDDAY + timedelta(hours=1, minutes=5),
        guards=toy(account),
    )
    assert later.counts.get("acted", 0) == 0
    assert texts == [
        f"ec2-instance {kept}: kept until 16:10 UTC on Fri 20 Nov by @alice",
        f"ec2-instance {stopped}: @alice answered act now: stopped now",
    ]
    # and the audit names who answered, each time
    from costguard.adapters.dynamodb import DynamoDbLedger

    trail = DynamoDbLedger(
        account.client("dynamodb", region_name="us-east-1"), "ledger"
    ).audit_trail("123456789012", "2026-11")
    answered = {(e.action, e.details["by"]) for e in trail if e.action.startswith("answer-")}
    assert answered == {
        ("answer-keep-4h", "alice@example.com"),
        ("answer-act-now", "alice@example.com"),
    }


def test_a_malformed_answer_event_acts_on_nothing(account: Any) -> None:
    from costguard.handlers.act import take_answer

    result = take_answer(
        {"answer": {"guard": "toy"}}, settings(), account, MIDDAY, guards=toy(account)
    )
    assert "malformed" in result["refused"]


def test_an_answer_response_url_off_slack_is_never_followed(account: Any) -> None:
    from costguard.adapters.slack import SlackDeliveryError, answer_in_place

    for url in (
        "https://evil.example/actions/x",
        "https://hooks.slack.com/services/T/B/x",
        "https://hooks.slack.com/actions/a\r\nHost: x",
    ):
        with pytest.raises(SlackDeliveryError):
            answer_in_place(url, "kept")


@pytest.mark.parametrize("answerable", [True, False])
def test_only_a_guard_that_can_write_the_answer_offers_it(account: Any, answerable: bool) -> None:
    """Defect: the stale-object sweep warns about buckets whose tags its role may not
    write, yet its warnings carried keep/exempt buttons that could only fail."""
    from costguard.adapters.aws import ClientFactory
    from costguard.adapters.memory import InMemoryLedger
    from costguard.handlers.act import take_answer
    from costguard.services.guard import GuardContext, run_guard
    from costguard.wiring.guards import executor_settings
    from tests.support.catalog import fixture_catalog
    from tests.support.fakes import RecordingNotifier

    ec2 = account.client("ec2", region_name="us-east-1")
    owned = {Tags.PROJECT: "vision", TOY: "idle", Tags.OWNER: "alice@example.com"}
    instance = run_instance(ec2, owned)

    def build(_s: Any, clients: Any, _c: Any) -> Guard:
        return Guard(
            "toy", ToyPolicy(account), [Ec2InstanceActuator(clients)], answerable=answerable
        )

    # GIVEN a guard that can (or cannot) write the exempt tag warns
    notifier = RecordingNotifier([])
    guard = build(None, ClientFactory(account), None)
    context = GuardContext(InMemoryLedger(), notifier, fixture_catalog())
    run_guard(guard, context, executor_settings(settings()), MIDDAY)
    # THEN its warning carries answers only when it can
    [warning] = notifier.published
    assert (warning.answer_to is not None) is answerable
    # WHEN an answer reaches it anyway
    at = MIDDAY + timedelta(minutes=10)
    result = take_answer(
        answer(instance, Answer.KEEP_4H, at, until=at + timedelta(hours=4)),
        settings(),
        account,
        at,
        guards={"toy": build},
    )
    tags = {
        t["Key"]
        for r in ec2.describe_instances()["Reservations"]
        for i in r["Instances"]
        for t in i.get("Tags", [])
    }
    # THEN the one that cannot refuses it and tags nothing
    if answerable:
        assert result["answer"] == "kept" and Tags.EXEMPT in tags
    else:
        assert result["refused"] == "toy warnings take no answers"
        assert Tags.EXEMPT not in tags


def test_the_stale_object_sweep_offers_no_answers() -> None:
    import boto3

    from costguard.adapters.aws import ClientFactory
    from costguard.adapters.memory import InMemoryLedger
    from costguard.guards import stale_objects
    from costguard.services.guard import GuardContext
    from tests.support.catalog import fixture_catalog
    from tests.support.sweep import sweep_settings

    guard = stale_objects.build(
        sweep_settings(),
        ClientFactory(boto3.Session(region_name="us-east-1")),
        GuardContext(InMemoryLedger(), None, fixture_catalog()),
    )
    assert guard.answerable is False
