"""Proof of origin (pure): Slack's request signature, and e-mail links' signed tokens."""

from __future__ import annotations

from datetime import timedelta

import pytest

from costguard.domain.answers import Answer, Refusal
from costguard.domain.signatures import (
    LinkClaims,
    csrf_token,
    read_link,
    sign_link,
    slack_signature,
    verify_csrf,
    verify_slack,
)
from tests.support.clock import MIDDAY

SECRET = b"8f742231b10e8888abcd99yyyzzz85a5"
BODY = b"payload=%7B%22type%22%3A%22block_actions%22%7D"
TS = str(int(MIDDAY.timestamp()))
KEY = "123456789012/us-east-1/sagemaker-notebook/research-nb"


def test_a_request_slack_signed_now_is_taken() -> None:
    assert verify_slack(SECRET, TS, slack_signature(SECRET, TS, BODY), BODY, MIDDAY) is None
    # Slack's own worked example (api docs): a known secret, timestamp and body
    example = slack_signature(
        b"8f742231b10e8888abcd99yyyzzz85a5",
        "1531420618",
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c",
    )
    assert example == "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


@pytest.mark.parametrize(
    ("timestamp", "signature", "body", "status"),
    [
        # forged: signed with another secret
        (TS, slack_signature(b"not-the-secret", TS, BODY), BODY, 401),
        # the body altered after signing
        (TS, slack_signature(SECRET, TS, BODY), BODY + b"&x=1", 401),
        # six minutes old, and six minutes ahead (a captured request replayed later)
        (
            str(int((MIDDAY - timedelta(minutes=6)).timestamp())),
            slack_signature(SECRET, str(int((MIDDAY - timedelta(minutes=6)).timestamp())), BODY),
            BODY,
            401,
        ),
        (
            str(int((MIDDAY + timedelta(minutes=6)).timestamp())),
            slack_signature(SECRET, str(int((MIDDAY + timedelta(minutes=6)).timestamp())), BODY),
            BODY,
            401,
        ),
        # no signature, no timestamp, a timestamp that is not a number
        (TS, None, BODY, 401),
        (None, slack_signature(SECRET, TS, BODY), BODY, 401),
        ("1e9", slack_signature(SECRET, "1e9", BODY), BODY, 401),
        ("١٧٩٥", slack_signature(SECRET, "١٧٩٥", BODY), BODY, 401),
        # an oversized body is refused before anything is computed over it
        (TS, "v0=00", b"x" * (64 * 1024 + 1), 413),
    ],
)
def test_a_request_slack_did_not_sign_now_is_refused(
    timestamp: str | None, signature: str | None, body: bytes, status: int
) -> None:
    refused = verify_slack(SECRET, timestamp, signature, body, MIDDAY)
    assert isinstance(refused, Refusal) and refused.status == status


def claims(**changes: object) -> LinkClaims:
    base = {
        "resource": KEY,
        "answer": Answer.KEEP_4H,
        "expires": MIDDAY + timedelta(hours=24),
        "nonce": "n-1",
        "to": "maria@example.com",
    }
    return LinkClaims(**{**base, **changes})  # type: ignore[arg-type]


def test_a_link_reads_back_its_claims_until_it_expires() -> None:
    token = sign_link(SECRET, claims(), MIDDAY)
    assert read_link(SECRET, token, MIDDAY + timedelta(hours=23)) == claims()
    expired = read_link(SECRET, token, MIDDAY + timedelta(hours=24))
    assert isinstance(expired, Refusal) and expired.status == 410


def test_a_link_lives_at_most_24_hours() -> None:
    with pytest.raises(ValueError, match="24 hours"):
        sign_link(SECRET, claims(expires=MIDDAY + timedelta(hours=25)), MIDDAY)


@pytest.mark.parametrize(
    "tamper",
    [
        # another resource's claims under this token's signature
        lambda t: (
            sign_link(SECRET, claims(resource=KEY + "-other"), MIDDAY).split(".")[0]
            + "."
            + t.split(".")[1]
        ),
        # another answer (act now, from a keep link)
        lambda t: (
            sign_link(SECRET, claims(answer=Answer.ACT_NOW), MIDDAY).split(".")[0]
            + "."
            + t.split(".")[1]
        ),
        # signed with another key
        lambda t: sign_link(b"other", claims(), MIDDAY),
        lambda t: t[:-1] + ("0" if t[-1] != "0" else "1"),
    ],
)
def test_a_tampered_or_foreign_link_is_refused(tamper: object) -> None:
    token = sign_link(SECRET, claims(), MIDDAY)
    refused = read_link(SECRET, tamper(token), MIDDAY)  # type: ignore[operator]
    assert isinstance(refused, Refusal) and refused.status == 403


@pytest.mark.parametrize("token", [None, "", "abc", "a.b.c", "é.é", "x" * 5000, 42])
def test_a_malformed_link_is_refused_without_a_crash(token: object) -> None:
    refused = read_link(SECRET, token, MIDDAY)
    assert isinstance(refused, Refusal) and refused.status in (400, 403)


def test_the_confirmation_form_answers_only_with_its_own_links_csrf_token() -> None:
    token = sign_link(SECRET, claims(), MIDDAY)
    other = sign_link(SECRET, claims(nonce="n-2"), MIDDAY)
    assert verify_csrf(SECRET, token, csrf_token(SECRET, token)) is None
    for given in (csrf_token(SECRET, other), "", None, csrf_token(b"other", token)):
        refused = verify_csrf(SECRET, token, given)
        assert isinstance(refused, Refusal) and refused.status == 403
