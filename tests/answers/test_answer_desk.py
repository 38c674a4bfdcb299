"""The answer desk (service level): what Slack and e-mail answers it takes, and every way a
hostile or confused request is refused, with its status, acting on nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.answers import Answer, AnswerRequest
from costguard.domain.signatures import (
    ButtonClaims,
    LinkClaims,
    csrf_token,
    sign_button,
    sign_link,
    slack_signature,
)
from costguard.services.answers import AnswerDesk, DeskSettings, HttpRequest
from tests.support.clock import MIDDAY

SIGNING = b"slack-signing-secret"
LINKS = b"link-secret"
BOT_TOKEN = b"xoxb-1000000000-2000000000-StandInBotToken0123456789"
KEY = "123456789012/us-east-1/sagemaker-notebook/research-nb"
OWNER = "U024BE7LH"


@dataclass
class Secrets:
    def slack_signing_secret(self) -> bytes:
        return SIGNING

    def slack_bot_token(self) -> bytes:
        return BOT_TOKEN

    def link_secret(self) -> bytes:
        return LINKS


@dataclass
class Queue:
    submitted: list[AnswerRequest] = field(default_factory=list)

    def submit(self, request: AnswerRequest) -> None:
        self.submitted.append(request)


class Desk:
    def __init__(self, zone: str = "Europe/Paris") -> None:
        self.queue = Queue()
        self.ledger = InMemoryLedger()
        self.desk = AnswerDesk(
            Secrets(),
            self.ledger,
            self.queue,
            DeskSettings("123456789012", frozenset({"W0ADMIN12"}), zone),
        )

    def handle(self, request: HttpRequest, now: datetime = MIDDAY) -> Any:
        return self.desk.handle(request, now)


def button_payload(
    user: str = OWNER, answer: str = "keep-4h", value: str | None = None
) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": user, "username": "maria"},
        "response_url": "https://hooks.slack.com/actions/T1/1/abc",
        "actions": [
            {
                "action_id": answer,
                "value": value
                if value is not None
                else sign_button(SIGNING, ButtonClaims("idle-notebooks", KEY, (OWNER,))),
            }
        ],
    }


def slack_request(
    payload: Any, *, at: datetime = MIDDAY, secret: bytes = SIGNING, body: bytes | None = None
) -> HttpRequest:
    raw = body if body is not None else urlencode({"payload": json.dumps(payload)}).encode()
    ts = str(int(at.timestamp()))
    return HttpRequest(
        "POST",
        "/slack",
        {
            "x-slack-request-timestamp": ts,
            "x-slack-signature": slack_signature(secret, ts, raw),
            "content-type": "application/x-www-form-urlencoded",
        },
        raw,
    )


def test_the_owner_keeps_a_notebook_for_4_hours_from_slack() -> None:
    desk = Desk()
    answer = desk.handle(slack_request(button_payload()))
    assert answer.status == 200 and answer.refused is None
    [request] = desk.queue.submitted
    assert (request.guard, request.resource, request.answer) == (
        "idle-notebooks",
        KEY,
        Answer.KEEP_4H,
    )
    assert request.until == MIDDAY + timedelta(hours=4)
    assert request.answerer.id == OWNER and request.answerer.via == "slack"
    assert request.response_url == "https://hooks.slack.com/actions/T1/1/abc"


def test_keep_until_tomorrow_is_9_am_in_the_deployments_zone() -> None:
    desk = Desk("America/Los_Angeles")
    desk.handle(slack_request(button_payload(answer="keep-until-tomorrow")))
    [request] = desk.queue.submitted
    assert request.until == datetime(2026, 11, 21, 17, 0, tzinfo=UTC)


def test_an_admin_may_answer_anybodys_warning() -> None:
    desk = Desk()
    assert desk.handle(slack_request(button_payload(user="W0ADMIN12"))).status == 200
    assert len(desk.queue.submitted) == 1


def test_somebody_else_is_told_not_yours_and_nothing_is_queued() -> None:
    desk = Desk()
    answer = desk.handle(slack_request(button_payload(user="U0MALLORY1")))
    assert answer.status == 200  # Slack shows the ephemeral text only on a 200
    body = json.loads(answer.body)
    assert body["response_type"] == "ephemeral" and "not yours" in body["text"]
    assert answer.refused and "U0MALLORY1" in answer.refused
    assert desk.queue.submitted == []


@pytest.mark.parametrize(
    ("request_", "status"),
    [
        # a forged signature (another secret)
        (lambda: slack_request(button_payload(), secret=b"guessed"), 401),
        # a timestamp 6 minutes old
        (lambda: slack_request(button_payload(), at=MIDDAY - timedelta(minutes=6)), 401),
        # the body altered after signing
        (
            lambda: HttpRequest(
                "POST",
                "/slack",
                dict(slack_request(button_payload()).headers),
                slack_request(button_payload(answer="act-now")).body,
            ),
            401,
        ),
        # a body that is not a form with a JSON payload
        (lambda: slack_request(None, body=b"payload=%7Bnot+json"), 400),
        (lambda: slack_request(None, body=b"\xff\xfe"), 400),
        (lambda: slack_request(["a", "list"]), 400),
        # an oversized body
        (lambda: slack_request(None, body=b"payload=" + b"x" * 70_000), 413),
        # a button value CostGuard did not sign (another resource named by hand)
        (
            lambda: slack_request(
                button_payload(
                    value=sign_button(b"guessed", ButtonClaims("idle-notebooks", "other", (OWNER,)))
                )
            ),
            403,
        ),
        # an answer CostGuard does not know
        (lambda: slack_request(button_payload(answer="delete-everything")), 400),
        # no such route, and a GET of the Slack endpoint
        (lambda: HttpRequest("POST", "/admin"), 404),
        (lambda: HttpRequest("GET", "/slack"), 404),
    ],
)
def test_a_request_that_is_not_a_genuine_answer_is_refused_and_acts_on_nothing(
    request_: Any, status: int
) -> None:
    desk = Desk()
    answer = desk.handle(request_())
    assert answer.status == status and answer.refused
    assert desk.queue.submitted == []


def test_a_replayed_slack_request_is_refused() -> None:
    # GIVEN a genuine request, answered
    desk = Desk()
    request = slack_request(button_payload())
    assert desk.handle(request).status == 200
    # WHEN the same timestamp and body come again (within the 5 minutes)
    again = desk.handle(request, MIDDAY + timedelta(seconds=30))
    # THEN refused: one answer
    assert again.status == 401 and "already" in (again.refused or "")
    assert len(desk.queue.submitted) == 1


def exempt_submission(reason: str, until: str, user: str = OWNER) -> dict[str, Any]:
    return {
        "type": "view_submission",
        "user": {"id": user},
        "view": {
            "callback_id": "costguard-exempt",
            "private_metadata": sign_button(SIGNING, ButtonClaims("idle-notebooks", KEY, (OWNER,))),
            "state": {
                "values": {
                    "reason": {"r": {"type": "plain_text_input", "value": reason}},
                    "until": {"u": {"type": "datepicker", "selected_date": until}},
                }
            },
        },
    }


def test_an_exemption_from_the_dialog_carries_its_reason_and_end() -> None:
    desk = Desk()
    answer = desk.handle(slack_request(exempt_submission("training run", "2026-12-01")))
    assert json.loads(answer.body) == {"response_action": "clear"}
    [request] = desk.queue.submitted
    assert request.answer is Answer.EXEMPT and request.reason == "training run"
    assert request.until == datetime(2026, 12, 2, tzinfo=UTC)


def test_an_exemption_past_90_days_or_without_reason_is_sent_back_to_the_dialog() -> None:
    desk = Desk()
    too_long = json.loads(desk.handle(slack_request(exempt_submission("x", "2027-06-01"))).body)
    no_reason = json.loads(desk.handle(slack_request(exempt_submission(" ", "2026-12-01"))).body)
    assert too_long["response_action"] == "errors" and "90 days" in too_long["errors"]["until"]
    assert no_reason["errors"]["reason"]
    assert desk.queue.submitted == []


# -- e-mail links -----------------------------------------------------------------------------


def link(answer: Answer = Answer.KEEP_4H, nonce: str = "n-1", **changes: Any) -> str:
    claims = LinkClaims(
        KEY, answer, MIDDAY + timedelta(hours=24), nonce, "maria@example.com", "idle-notebooks"
    )
    return sign_link(LINKS, claims, MIDDAY)


def post(token: str, csrf: str | None = None, **fields: str) -> HttpRequest:
    form = {"t": token, "csrf": csrf if csrf is not None else csrf_token(LINKS, token), **fields}
    return HttpRequest("POST", "/answer", {}, urlencode(form).encode())


def test_a_get_of_the_link_shows_a_confirmation_and_never_acts() -> None:
    # GIVEN a mail scanner (or the owner) opening the link
    desk = Desk()
    token = link()
    page = desk.handle(HttpRequest("GET", "/answer", query={"t": token}))
    page_again = desk.handle(HttpRequest("GET", "/answer", query={"t": token}))
    # THEN a page with a form that POSTs, carrying the CSRF token; nothing queued, link unused
    assert page.status == page_again.status == 200 and page.content_type.startswith("text/html")
    assert "method=post" in page.body and csrf_token(LINKS, token) in page.body
    assert "Content-Security-Policy" in page.body
    assert desk.queue.submitted == []
    # WHEN the owner confirms (POST)  THEN answered, once
    assert desk.handle(post(token)).status == 200
    [request] = desk.queue.submitted
    assert request.answerer.id == "maria@example.com" and request.answerer.via == "email"
    reused = desk.handle(post(token))
    assert reused.status == 409 and len(desk.queue.submitted) == 1


@pytest.mark.parametrize(
    ("request_", "status"),
    [
        # expired (the link's 24 hours are over)
        (lambda d: d.handle(post(link()), MIDDAY + timedelta(hours=25)), 410),
        # a POST without the page's CSRF token, or with another link's
        (lambda d: d.handle(post(link(), csrf="")), 403),
        (lambda d: d.handle(post(link(), csrf=csrf_token(LINKS, link(nonce="n-2")))), 403),
        # a token signed with another key, and garbage
        (
            lambda d: d.handle(
                post(
                    sign_link(
                        b"x",
                        LinkClaims(
                            KEY, Answer.ACT_NOW, MIDDAY + timedelta(hours=1), "n", "m@x.io", "g"
                        ),
                        MIDDAY,
                    )
                )
            ),
            403,
        ),
        (
            lambda d: d.handle(
                HttpRequest("GET", "/answer", query={"t": "<script>alert(1)</script>"})
            ),
            400,
        ),
        (lambda d: d.handle(HttpRequest("POST", "/answer", {}, b"\xff")), 400),
    ],
)
def test_a_link_answer_that_is_not_genuine_is_refused(request_: Any, status: int) -> None:
    desk = Desk()
    answer = request_(desk)
    assert answer.status == status and answer.refused
    assert "<script>" not in answer.body
    assert desk.queue.submitted == []


def test_an_exemption_by_link_needs_its_reason_and_end_on_the_form() -> None:
    desk = Desk()
    token = link(Answer.EXEMPT)
    assert desk.handle(post(token)).status == 400
    ok = desk.handle(post(token, reason="conference demo", until="2026-11-30"))
    assert ok.status == 200
    [request] = desk.queue.submitted
    assert request.reason == "conference demo" and request.until == datetime(
        2026, 12, 1, tzinfo=UTC
    )


def test_an_answer_that_cannot_be_handed_on_is_an_error_and_leaves_the_link_usable() -> None:
    # GIVEN the guard's Lambda cannot be invoked for a moment
    desk = Desk()

    def fail(_request: AnswerRequest) -> None:
        raise RuntimeError("throttled")

    desk.queue.submit = fail  # type: ignore[method-assign]
    token = link()
    # WHEN the owner confirms  THEN told to try again, and the link is not used up
    assert desk.handle(post(token)).status == 503
    assert desk.handle(slack_request(button_payload())).status == 503
    desk.queue.submit = Queue.submit.__get__(desk.queue)  # type: ignore[method-assign]
    assert desk.handle(post(token)).status == 200
    assert len(desk.queue.submitted) == 1
