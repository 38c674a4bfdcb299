"""Exempt… opens a dialog (Slack's ``views.open``, within its 3 seconds): a reason and an end
date at most 90 days ahead. Its submission is an exemption handed to the guard's Lambda, or
the dialog is sent back with what is wrong; when the dialog cannot open, the person is told
(only them) how to exempt by hand. All over real sockets, through the Slack stand-in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.slack import SlackWebApi
from costguard.domain.answers import Answer
from costguard.domain.signatures import ButtonClaims, sign_button
from costguard.handlers.answer import http_request, response
from costguard.services.answers import AnswerDesk, DeskSettings, HttpAnswer
from costguard_demo.function_url import FunctionUrlServer
from costguard_demo.slack_standin import (
    STANDIN_BOT_TOKEN,
    SlackStandIn,
    SlackUser,
)
from tests.answers.test_answer_desk import KEY, OWNER, SIGNING, Queue, slack_request
from tests.answers.test_answers_taken import KEY as WARNED
from tests.answers.test_slack_interactivity_standin import MARIA, posted_warning
from tests.support.clock import MIDDAY

MALLORY = SlackUser("U0MALLORY1", "mallory")


@dataclass
class Secrets:
    bot_token: bytes = STANDIN_BOT_TOKEN.encode()

    def slack_signing_secret(self) -> bytes:
        return SIGNING

    def slack_bot_token(self) -> bytes:
        return self.bot_token

    def link_secret(self) -> bytes:
        return b"link-secret"


@dataclass
class World:
    slack: SlackStandIn
    queue: Queue
    secrets: Secrets
    #: Every answer the desk gave (what the handler logs: ``refused``, ``accepted``).
    answers: list[HttpAnswer] = field(default_factory=list)

    @property
    def refused(self) -> list[str]:
        return [a.refused for a in self.answers if a.refused]


def world(timeout_s: float = 2.0) -> Iterator[World]:
    queue, secrets = Queue(), Secrets()
    with SlackStandIn() as slack:
        desk = AnswerDesk(
            secrets,
            InMemoryLedger(),
            queue,
            DeskSettings("123456789012", frozenset({"W0ADMIN12"}), "Europe/Paris"),
            SlackWebApi(api_origin=slack.origin, webhook_origin=slack.origin, timeout_s=timeout_s),
        )
        w = World(slack, queue, secrets)

        def endpoint(event: dict[str, Any]) -> dict[str, Any]:
            answer = desk.handle(http_request(event), MIDDAY)
            w.answers.append(answer)
            return response(answer)

        with FunctionUrlServer(endpoint) as url:
            slack.interactivity(url.url + "slack", SIGNING, lambda: MIDDAY)
            yield w


@pytest.fixture
def w() -> Iterator[World]:
    yield from world()


def test_exempt_opens_the_dialog_with_the_presss_trigger_id(w: World) -> None:
    # GIVEN a warning  WHEN its owner presses Exempt…
    pressed = w.slack.press(posted_warning(w.slack), "exempt", MARIA)
    # THEN Slack is asked to open the dialog, with the press's trigger_id, and it opened
    assert pressed.status == 200 and pressed.elapsed_s < 3
    assert w.slack.api_calls == [("views.open", "ok")]
    [view] = w.slack.views
    # a reason (multi-line, bounded) and an end date (a week on; at most 90 days, it says)
    assert view["callback_id"] == "costguard-exempt"
    reason, until = (b for b in view["blocks"] if b["type"] == "input")
    assert reason["element"]["type"] == "plain_text_input" and reason["element"]["multiline"]
    assert reason["element"]["max_length"] == 500
    assert until["element"]["type"] == "datepicker"
    assert until["element"]["initial_date"] == "2026-11-27"
    assert "90 days" in until["hint"]["text"] and "2027-02-18" in until["hint"]["text"]
    # the signed button value and the message's response URL ride in private_metadata
    metadata = json.loads(view["private_metadata"])
    assert metadata["b"] == pressed.payload["actions"][0]["value"]
    assert metadata["u"] == pressed.payload["response_url"]
    # AND nothing is answered yet
    assert w.queue.submitted == [] and w.slack.responses == []


def test_the_submitted_dialog_is_an_exemption_through_the_end_of_its_day(w: World) -> None:
    # GIVEN the dialog opened by Maria's press
    pressed = w.slack.press(posted_warning(w.slack), "exempt", MARIA)
    # WHEN she gives a reason and an end date, and submits
    submitted = w.slack.submit_view({"reason": "training run\nfor the demo", "until": "2026-12-01"})
    # THEN the dialog closes and the exemption goes to the guard's Lambda
    assert submitted.status == 200 and submitted.json() == {"response_action": "clear"}
    assert submitted.payload["type"] == "view_submission"
    [request] = w.queue.submitted
    assert (request.guard, request.resource, request.answer) == (
        "idle-notebooks",
        WARNED,
        Answer.EXEMPT,
    )
    assert request.reason == "training run for the demo"
    assert request.until == datetime(2026, 12, 2, tzinfo=UTC)
    assert (request.answerer.id, request.answerer.name) == (OWNER, "@maria")
    # AND the warning's message will be updated in place, through Slack's response URL
    assert request.response_url == pressed.payload["response_url"]


@pytest.mark.parametrize(
    ("values", "wrong"),
    [
        ({"reason": "demo", "until": "2026-13-01"}, "until"),  # not a date
        ({"reason": "demo", "until": "2027-06-01"}, "until"),  # past 90 days
        ({"reason": "demo", "until": "2026-11-19"}, "until"),  # in the past
        ({"reason": "   ", "until": "2026-12-01"}, "reason"),  # no reason
        ({"reason": None, "until": None}, "reason"),
    ],
)
def test_a_dialog_with_a_bad_date_or_no_reason_is_sent_back_and_nothing_is_queued(
    w: World, values: dict[str, str | None], wrong: str
) -> None:
    w.slack.press(posted_warning(w.slack), "exempt", MARIA)
    # WHEN submitted as a hostile client could (Slack's own client checks some of this)
    sent_back = w.slack.submit_view(values, check=False)
    # THEN Slack shows the error on that input (the stand-in checks it names one), and
    # nothing is answered
    body = sent_back.json()
    assert sent_back.status == 200 and body["response_action"] == "errors"
    assert wrong in body["errors"]
    assert w.queue.submitted == []
    assert any("sent back" in r for r in w.refused)


def test_somebody_else_submitting_the_dialog_is_refused_and_nothing_is_queued(w: World) -> None:
    # GIVEN the dialog opened for Maria's warning
    w.slack.press(posted_warning(w.slack), "exempt", MARIA)
    # WHEN somebody else submits it (a replayed or shared view)
    refused = w.slack.submit_view({"reason": "mine now", "until": "2026-12-01"}, user=MALLORY)
    # THEN refused on the dialog, logged, nothing queued
    assert refused.status == 200 and refused.json()["response_action"] == "errors"
    assert w.queue.submitted == []
    assert any("U0MALLORY1" in r and "not an owner" in r for r in w.refused)


def test_somebody_else_pressing_exempt_gets_no_dialog_and_is_told_only_them(w: World) -> None:
    w.slack.press(posted_warning(w.slack), "exempt", MALLORY)
    assert w.slack.api_calls == [] and w.queue.submitted == []
    # Slack ignores a press's acknowledgement body: the reply goes through the response URL
    [(_, reply)] = w.slack.responses
    assert reply["response_type"] == "ephemeral" and reply["replace_original"] is False
    assert "not yours" in reply["text"]


@pytest.mark.parametrize(
    ("breaks", "why"),
    [
        # the bot-token secret still holds the stack's placeholder
        (lambda w: setattr(w.secrets, "bot_token", b"Qx8v2Kp0placeholder"), "no Slack bot token"),
        # a token Slack does not take
        (
            lambda w: setattr(w.secrets, "bot_token", b"xoxb-1000000000-revoked-token-value"),
            "invalid_auth",
        ),
        # Slack refuses the call (the trigger expired on its side)
        (lambda w: w.slack.api_errors.append("expired_trigger_id"), "expired_trigger_id"),
    ],
)
def test_when_the_dialog_cannot_open_the_person_is_told_how_to_exempt_by_hand(
    w: World, breaks: Any, why: str
) -> None:
    # GIVEN the dialog cannot open
    breaks(w)
    # WHEN the owner presses Exempt…
    pressed = w.slack.press(posted_warning(w.slack), "exempt", MARIA)
    # THEN an ephemeral message, through the response URL, says what to do instead
    assert pressed.status == 200
    [(path, reply)] = w.slack.responses
    assert path.startswith("/actions/") and reply["response_type"] == "ephemeral"
    assert "costguard:exempt=YYYY-MM-DD" in reply["text"]
    # AND the reason is logged, never the token; nothing is queued
    [logged] = w.refused
    assert why in logged and "xoxb" not in logged and "revoked" not in logged
    assert w.queue.submitted == [] and w.slack.views == []


def test_a_views_open_that_does_not_answer_in_time_is_given_up_within_slacks_3_seconds() -> None:
    for w in world(timeout_s=0.3):
        # GIVEN Slack's Web API slower than the desk's one short attempt
        w.slack.api_delay_s = 0.6
        pressed = w.slack.press(posted_warning(w.slack), "exempt", MARIA)
        # THEN the press is still answered in time, and the person told what to do instead
        assert pressed.status == 200 and pressed.elapsed_s < 3
        [(_, reply)] = w.slack.responses
        assert "costguard:exempt" in reply["text"]
        assert any("no answer within 0.3 s" in r for r in w.refused)
        assert w.queue.submitted == []


def exempt_submission(metadata: str) -> dict[str, Any]:
    return {
        "type": "view_submission",
        "user": {"id": OWNER, "username": "maria"},
        "view": {
            "callback_id": "costguard-exempt",
            "private_metadata": metadata,
            "state": {
                "values": {
                    "reason": {"reason": {"type": "plain_text_input", "value": "demo"}},
                    "until": {"until": {"type": "datepicker", "selected_date": "2026-12-01"}},
                }
            },
        },
    }


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("https://hooks.slack.com/actions/T0/1/abc", True),
        ("https://attacker.example/actions/T0/1/abc", False),
        ("https://hooks.slack.com.attacker.example/actions/x", False),
        ("https://hooks.slack.com/services/T0/B0/x", False),
    ],
)
def test_a_submissions_response_url_is_used_only_when_it_is_slacks(url: str, kept: bool) -> None:
    # GIVEN the desk with Slack's own origins
    queue = Queue()
    desk = AnswerDesk(
        Secrets(), InMemoryLedger(), queue, DeskSettings("123456789012"), SlackWebApi()
    )
    value = sign_button(SIGNING, ButtonClaims("idle-notebooks", KEY, (OWNER,)))
    metadata = json.dumps({"b": value, "u": url})
    # WHEN a dialog whose metadata names that URL is submitted
    answer = desk.handle(slack_request(exempt_submission(metadata)), MIDDAY)
    # THEN the exemption is taken; the URL goes on only when it is Slack's response URL
    assert answer.status == 200
    [request] = queue.submitted
    assert request.response_url == (url if kept else None)


def test_a_dialog_carrying_a_button_value_costguard_did_not_sign_is_refused() -> None:
    queue = Queue()
    desk = AnswerDesk(Secrets(), InMemoryLedger(), queue, DeskSettings("1"), SlackWebApi())
    forged = sign_button(b"guessed", ButtonClaims("idle-notebooks", "other", (OWNER,)))
    answer = desk.handle(slack_request(exempt_submission(json.dumps({"b": forged}))), MIDDAY)
    assert answer.status == 403 and queue.submitted == []
    # and a view CostGuard did not open (another callback id) is not an exemption
    other = exempt_submission(sign_button(SIGNING, ButtonClaims("g", KEY, (OWNER,))))
    other["view"]["callback_id"] = "somebody-elses-modal"
    assert desk.handle(slack_request(other), MIDDAY).status == 400 and queue.submitted == []


def test_the_dialogs_end_date_proposal_and_limit_follow_the_day_it_opens() -> None:
    from costguard.rendering import exempt_modal

    view = exempt_modal("g", KEY, "v.x", None, date(2026, 12, 30))
    until = view["blocks"][2]
    assert until["element"]["initial_date"] == (date(2026, 12, 30) + timedelta(7)).isoformat()
    assert "2027-03-30" in until["hint"]["text"]
    assert json.loads(view["private_metadata"]) == {"b": "v.x", "u": None}


# -- the answer Lambda as deployed (moto): the bot token read from Secrets Manager ----------


@pytest.fixture
def deployed(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SlackStandIn, Any]]:
    """The answer handler's own wiring (wiring.answers.answer_desk) on moto: the ledger and the three
    secrets, the bot token's holding the stand-in's; Slack's origins pointed at the stand-in."""
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters import base

    from costguard.env import Env
    from costguard.handlers.answer import process
    from costguard.wiring.answers import answer_desk
    from costguard_demo.plumbing import create_ledger_table

    parameters.clear_caches()
    base.DEFAULT_PROVIDERS.clear()
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    create_ledger_table(aws, "ledger", "us-east-1")
    sm = aws.client("secretsmanager", region_name="us-east-1")
    for name, value in (
        ("costguard/slack-signing-secret", SIGNING.decode()),
        ("costguard/slack-bot-token", STANDIN_BOT_TOKEN),
        ("costguard/link", "link-secret"),
    ):
        sm.create_secret(Name=name, SecretString=value)
    environ = {
        Env.TABLE_NAME: "ledger",
        Env.SCOPE: "123456789012",
        Env.SLACK_SIGNING_SECRET: "costguard/slack-signing-secret",
        Env.SLACK_BOT_TOKEN: "costguard/slack-bot-token",
        Env.LINK_SECRET: "costguard/link",
        Env.GUARD_FUNCTIONS: json.dumps({"idle-notebooks": "costguard-idle"}),
    }
    with SlackStandIn() as slack:
        desk = answer_desk(
            environ, aws, slack_api_origin=slack.origin, slack_webhook_origin=slack.origin
        )
        with FunctionUrlServer(lambda event: process(event, desk, MIDDAY)) as url:
            slack.interactivity(url.url + "slack", SIGNING, lambda: MIDDAY)
            yield slack, sm
    parameters.clear_caches()
    base.DEFAULT_PROVIDERS.clear()


def test_the_answer_lambda_opens_the_dialog_with_the_bot_token_from_its_secret(
    deployed: tuple[SlackStandIn, Any],
) -> None:
    slack, _ = deployed
    # WHEN the owner presses Exempt… on a warning
    pressed = slack.press(posted_warning(slack), "exempt", MARIA)
    # THEN the dialog opened, with the token from Secrets Manager
    assert pressed.status == 200
    assert slack.api_calls == [("views.open", "ok")] and len(slack.views) == 1


def test_while_the_bot_token_secret_holds_its_placeholder_exempt_says_what_to_do(
    deployed: tuple[SlackStandIn, Any],
) -> None:
    slack, sm = deployed
    # GIVEN the secret as the stack creates it: a random placeholder
    sm.put_secret_value(SecretId="costguard/slack-bot-token", SecretString="kP2x9Qv7Lw0zR4t8")
    from aws_lambda_powertools.utilities import parameters

    parameters.clear_caches()
    # WHEN Exempt… is pressed  THEN no call to Slack's Web API; the presser is told what to do
    assert slack.press(posted_warning(slack), "exempt", MARIA).status == 200
    assert slack.api_calls == []
    [(_, reply)] = slack.responses
    assert reply["response_type"] == "ephemeral" and "costguard:exempt" in reply["text"]
