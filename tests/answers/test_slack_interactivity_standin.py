"""The Slack stand-in plays Slack's interactivity exactly: a button pressed on a warning it
received reaches the answer endpoint over a real socket, form-encoded and signed as Slack
signs, and the desk takes what it signs and refuses it under another secret."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs

import pytest

from costguard.domain.answers import Answer
from costguard.domain.signatures import ButtonClaims, sign_button, verify_slack
from costguard.handlers.answer import process
from costguard_demo.function_url import FunctionUrlServer
from costguard_demo.slack_standin import (
    SlackStandIn,
    SlackUser,
    sign_request,
)
from tests.answers.test_answer_buttons import warning
from tests.answers.test_answer_desk import OWNER, SIGNING, Desk
from tests.support.clock import MIDDAY

MARIA = SlackUser(OWNER, "maria", "Maria Garcia")


def posted_warning(slack: SlackStandIn) -> dict[str, Any]:
    """An action warning with its four answer buttons, posted to the stand-in's webhook."""
    from costguard.rendering import slack_blocks

    def sign(guard: str, resource: str, owners: tuple[str, ...], deadline: str = "") -> str:
        return sign_button(SIGNING, ButtonClaims(guard, resource, (OWNER,), deadline))

    slack.webhook().post(slack_blocks(warning(), sign))
    return slack.received[-1]


@pytest.fixture
def wired() -> Iterator[tuple[SlackStandIn, Desk, FunctionUrlServer]]:
    """The stand-in, and the desk behind a Function URL on loopback as its request URL."""
    desk = Desk()
    with (
        FunctionUrlServer(lambda event: process(event, desk.desk, MIDDAY)) as endpoint,
        SlackStandIn() as slack,
    ):
        slack.interactivity(endpoint.url + "slack", SIGNING, lambda: MIDDAY)
        yield slack, desk, endpoint


def test_the_stand_in_signs_as_slacks_worked_example_does() -> None:
    # GIVEN Slack's documented secret, timestamp and body  THEN Slack's documented signature
    body = (
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id="
        b"G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebho"
        b"ok-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F"
        b"397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887"
        b"a14d10d2c447fce8b6703c"
    )
    assert (
        sign_request(b"8f742231b10e8888abcd99yyyzzz85a5", "1531420618", body)
        == "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    )


def test_pressing_keep_4_hours_reaches_the_desk_signed_and_is_taken(wired: Any) -> None:
    slack, desk, endpoint = wired
    # GIVEN a warning the stand-in received
    message = posted_warning(slack)
    # WHEN Maria presses "Keep 4 hours"
    answer = slack.press(message, "keep-4h", MARIA)
    # THEN the endpoint acknowledged it at once, and the desk handed the answer on
    assert answer.status == 200 and answer.elapsed_s < 3
    [request] = desk.queue.submitted
    assert request.answer is Answer.KEEP_4H and request.until == MIDDAY + timedelta(hours=4)
    assert (request.answerer.id, request.answerer.name) == (OWNER, "@maria")
    # AND the request was Slack's: form-encoded payload=<json>, signed over the raw body
    [event] = endpoint.events
    headers, body = event["headers"], base64.b64decode(event["body"])
    assert headers["content-type"] == "application/x-www-form-urlencoded"
    assert headers["x-slack-request-timestamp"] == str(int(MIDDAY.timestamp()))
    assert (
        verify_slack(
            SIGNING,
            headers["x-slack-request-timestamp"],
            headers["x-slack-signature"],
            body,
            MIDDAY,
        )
        is None
    )
    [raw] = parse_qs(body.decode())["payload"]
    payload = json.loads(raw)
    assert payload == answer.payload
    # with the fields Slack's block_actions payload carries
    assert payload["type"] == "block_actions" and payload["api_app_id"] and payload["token"]
    assert set(payload["user"]) == {"id", "username", "name", "team_id"}
    assert payload["container"]["type"] == "message" and payload["channel"]["id"]
    assert payload["message"]["blocks"] == message["blocks"] and payload["team"]["id"]
    [action] = payload["actions"]
    assert (action["action_id"], action["block_id"], action["type"]) == (
        "keep-4h",
        "costguard-answers",
        "button",
    )
    assert action["value"] and action["action_ts"] and payload["trigger_id"].count(".") == 2
    # AND its response URL is the stand-in's own /actions/ path (where in-place updates go)
    assert payload["response_url"].startswith(slack.origin + "/actions/")
    assert request.response_url == payload["response_url"]


def test_a_press_signed_with_another_secret_is_refused_and_nothing_is_queued(
    wired: Any,
) -> None:
    slack, desk, endpoint = wired
    # GIVEN a stand-in configured with a signing secret that is not the app's
    slack.interactivity(endpoint.url + "slack", b"not-the-apps-secret", lambda: MIDDAY)
    # WHEN a button is pressed
    answer = slack.press(posted_warning(slack), "act-now", MARIA)
    # THEN refused as forged; nothing handed on
    assert answer.status == 401 and "signature" in answer.body
    assert desk.queue.submitted == []


def test_a_press_stamped_6_minutes_before_the_desks_clock_is_refused(wired: Any) -> None:
    slack, desk, _ = wired
    answer = slack.press(posted_warning(slack), "act-now", MARIA, at=MIDDAY - timedelta(minutes=6))
    assert answer.status == 401 and desk.queue.submitted == []


def test_only_a_button_the_message_carries_can_be_pressed(wired: Any) -> None:
    slack, desk, _ = wired
    message = posted_warning(slack)
    with pytest.raises(LookupError):
        slack.press(message, "delete-everything", MARIA)
    assert desk.queue.submitted == []


def test_views_open_takes_the_bot_token_a_fresh_trigger_once_and_a_modal_within_limits(
    wired: Any,
) -> None:
    from costguard.adapters.slack import SlackApiError, SlackWebApi
    from costguard.rendering import exempt_modal
    from costguard_demo.slack_standin import STANDIN_BOT_TOKEN

    slack, _, _ = wired
    api = SlackWebApi(api_origin=slack.origin, webhook_origin=slack.origin)
    # GIVEN a press, which issues a trigger_id (the desk answered it with a dialog already)
    pressed = slack.press(posted_warning(slack), "keep-4h", MARIA)
    trigger = pressed.payload["trigger_id"]
    modal = exempt_modal("idle-notebooks", "nb", "v.x", None, MIDDAY.date())

    def refused(token: str, trigger_id: str, view: dict[str, Any]) -> str:
        with pytest.raises(SlackApiError) as caught:
            api.open_view(token, trigger_id, view)
        assert "xoxb" not in str(caught.value)  # never the token
        return str(caught.value)

    # THEN Slack's Web API refuses another token, an unknown trigger and a modal past its limits
    assert refused("xoxb-1000000000-another-token", trigger, modal).endswith("invalid_auth")
    assert refused(STANDIN_BOT_TOKEN, "1.2.3", modal).endswith("invalid_trigger_id")
    long_title = {**modal, "title": {"type": "plain_text", "text": "x" * 25}}
    assert refused(STANDIN_BOT_TOKEN, trigger, long_title).endswith("invalid_arguments")
    no_submit = {k: v for k, v in modal.items() if k != "submit"}
    assert refused(STANDIN_BOT_TOKEN, trigger, no_submit).endswith("invalid_arguments")
    # AND opens a valid one, once per trigger_id
    api.open_view(STANDIN_BOT_TOKEN, trigger, modal)
    assert refused(STANDIN_BOT_TOKEN, trigger, modal).endswith("exchanged_trigger_id")
    assert slack.views == [modal]


@pytest.mark.parametrize(
    ("secret", "token"),
    [
        (None, None),
        (b"", None),
        (b"Qx8v2Kp0RandomPlaceholderFromTheStack", None),  # the stack's placeholder
        (b"xoxb-1000000000-2000000000-abcdef\n", "xoxb-1000000000-2000000000-abcdef"),
    ],
)
def test_the_bot_token_secret_is_read_as_slack_issues_it(
    secret: bytes | None, token: str | None
) -> None:
    from costguard.adapters.slack import parse_bot_token

    assert parse_bot_token(secret) == token


def test_a_user_token_in_the_bot_token_secret_is_refused_without_repeating_it() -> None:
    from costguard.adapters.slack import SlackApiError, parse_bot_token

    with pytest.raises(SlackApiError) as caught:
        parse_bot_token(b"xoxp-1000000000-user-token-with-more-powers")
    assert "xoxp-1000000000" not in str(caught.value) and "bot token" in str(caught.value)
