"""Proof that an answer comes from where it says: Slack's request signature, and the signed,
single-use links of an e-mail warning. Pure: secrets and the clock are passed in; the
single use is a ledger claim, taken by the service.

**Slack** signs each request: ``v0=`` and the hex HMAC-SHA256, keyed with the app's signing
secret, of ``v0:<X-Slack-Request-Timestamp>:<raw body>``. A request is taken only when the
signature matches (compared in constant time) and its timestamp is within 5 minutes of the
clock; within those 5 minutes, the service refuses the same signature twice (a replay).

**An e-mail link** carries a token: its claims (the resource, the answer, an expiry at most
24 hours ahead, a random nonce) and their HMAC-SHA256, keyed with the deployment's link
secret. A GET of the link never acts: it shows a page whose form carries a CSRF token bound
to that link; only the form's POST, with both, answers, once (the nonce is claimed).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from costguard.domain.answers import Answer, Refusal, parse_answer
from costguard.domain.calendar import require_utc

#: Slack's own bound on a request's age (either way).
SLACK_MAX_SKEW = timedelta(minutes=5)
SLACK_VERSION = "v0"
#: An e-mail link lives at most this long.
LINK_MAX_LIFE = timedelta(hours=24)
#: Larger bodies are refused before any parsing (Slack's payloads are a few KB).
MAX_BODY_BYTES = 64 * 1024
#: Larger tokens are refused before decoding.
MAX_TOKEN_CHARS = 2048


def signing_key(stored: str | bytes) -> bytes:
    """The Slack signing secret as Slack signs with it, from the value its secret holds:
    without the whitespace around it (a value pasted from a file or a terminal often ends
    with a newline; Slack's secret is hex and never does)."""
    raw = stored.encode() if isinstance(stored, str) else bytes(stored)
    return raw.strip(b" \t\r\n")


def _mac(secret: bytes, message: bytes) -> str:
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def slack_signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """The signature Slack sends with a request (what the stand-in signs with too)."""
    return f"{SLACK_VERSION}=" + _mac(secret, f"{SLACK_VERSION}:{timestamp}:".encode() + body)


def verify_slack(
    secret: bytes, timestamp: str | None, signature: str | None, body: bytes, now: datetime
) -> Refusal | None:
    """None when the request is Slack's and fresh; else why not (401, or 413 for a body
    too large to be one)."""
    if len(body) > MAX_BODY_BYTES:
        return Refusal("the body is larger than any Slack request", status=413)
    if not timestamp or not signature:
        return Refusal("no Slack signature", status=401)
    if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
        return Refusal("the Slack timestamp is not a number of seconds", status=401)
    # Compared as seconds: a 12-digit timestamp is past datetime's year 9999 (never a crash).
    skew = abs(require_utc(now).timestamp() - int(timestamp))
    if skew > SLACK_MAX_SKEW.total_seconds():
        return Refusal("the Slack request is more than 5 minutes from the clock", status=401)
    expected = slack_signature(secret, timestamp, body)
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
        return Refusal("the Slack signature does not match", status=401)
    return None


# -- e-mail links ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkClaims:
    resource: str
    answer: Answer
    expires: datetime
    nonce: str
    #: Who the link was sent to (the owner's e-mail address): the answerer.
    to: str
    #: The guard whose warning it answers.
    guard: str = ""
    #: The warning it answers, by its deadline as tagged ("2026-11-21T12:00:00Z"); empty
    #: for a link made before links named it.
    deadline: str = ""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign_link(secret: bytes, claims: LinkClaims, now: datetime) -> str:
    """The token of one answer's link. Its expiry must be within 24 hours of ``now``."""
    if not require_utc(now) < claims.expires <= now + LINK_MAX_LIFE:
        raise ValueError("a link expires within 24 hours")
    body = json.dumps(
        {
            "r": claims.resource,
            "a": claims.answer.value,
            "e": int(claims.expires.timestamp()),
            "n": claims.nonce,
            "t": claims.to,
            "g": claims.guard,
            **({"d": claims.deadline} if claims.deadline else {}),
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    payload = _b64(body)
    return f"{payload}.{_mac(secret, b'link:' + payload.encode())}"


def read_link(secret: bytes, token: object, now: datetime) -> LinkClaims | Refusal:
    """The claims of a genuine, unexpired link token; else why not (400/403/410)."""
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS:
        return Refusal("no link token", status=400)
    payload, dot, mac = token.partition(".")
    if not dot or not payload.isascii() or not mac.isascii():
        return Refusal("the link token is malformed", status=400)
    if not hmac.compare_digest(_mac(secret, b"link:" + payload.encode()).encode(), mac.encode()):
        return Refusal("the link token is not CostGuard's", status=403)
    try:
        raw: Any = json.loads(_unb64(payload))
        answer = parse_answer(raw["a"])
        expires = datetime.fromtimestamp(int(raw["e"]), UTC)
        claims = (str(raw["r"]), answer, expires, str(raw["n"]), str(raw["t"]), str(raw["g"]))
        deadline = str(raw.get("d") or "")
    except (ValueError, KeyError, TypeError, OverflowError):
        return Refusal("the link token is malformed", status=400)
    if isinstance(answer, Refusal):
        return answer
    if expires <= require_utc(now):
        return Refusal("the link has expired: answer from the latest warning", status=410)
    if expires > now + LINK_MAX_LIFE:
        return Refusal("the link token is not CostGuard's", status=403)
    return LinkClaims(claims[0], answer, expires, claims[3], claims[4], claims[5], deadline)


def csrf_token(secret: bytes, link_token: str) -> str:
    """The confirmation form's CSRF token: bound to the one link it confirms, so a form
    posted from anywhere else (without the page) cannot answer."""
    return _mac(secret, b"csrf:" + link_token.encode("utf-8", "replace"))


def verify_csrf(secret: bytes, link_token: str, given: object) -> Refusal | None:
    if not isinstance(given, str) or not hmac.compare_digest(
        csrf_token(secret, link_token).encode(), given.encode("utf-8", "replace")
    ):
        return Refusal("the form's CSRF token does not match its link", status=403)
    return None


# -- Slack buttons --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ButtonClaims:
    """What a warning's button says: which guard's warning, about which resource, and its
    owners when it was sent (so that "not yours" is answered at once, without a read)."""

    guard: str
    resource: str
    owners: tuple[str, ...]
    #: The warning the buttons answer, by its deadline as tagged ("2026-11-21T12:00:00Z"):
    #: "act now" answers that warning, never a newer one. Empty on older buttons.
    deadline: str = ""


def sign_button(secret: bytes, claims: ButtonClaims) -> str:
    """A button's value (Slack keeps at most 2,000 characters): the claims and their MAC,
    so that only a warning CostGuard posted can name a resource and its owners."""
    body = _b64(
        json.dumps(
            {
                "g": claims.guard,
                "r": claims.resource,
                "o": list(claims.owners),
                **({"d": claims.deadline} if claims.deadline else {}),
            },
            separators=(",", ":"),
            sort_keys=True,
        ).encode()
    )
    return f"{body}.{_mac(secret, b'button:' + body.encode())}"


def read_button(secret: bytes, value: object) -> ButtonClaims | Refusal:
    if not isinstance(value, str) or not value or len(value) > MAX_TOKEN_CHARS:
        return Refusal("the button carries no warning", status=400)
    body, dot, mac = value.partition(".")
    if not dot or not body.isascii() or not mac.isascii():
        return Refusal("the button carries no warning", status=400)
    if not hmac.compare_digest(_mac(secret, b"button:" + body.encode()).encode(), mac.encode()):
        return Refusal("the button is not from a CostGuard warning", status=403)
    try:
        raw: Any = json.loads(_unb64(body))
        return ButtonClaims(
            str(raw["g"]),
            str(raw["r"]),
            tuple(str(o) for o in raw["o"]),
            str(raw.get("d") or ""),
        )
    except (ValueError, KeyError, TypeError):
        return Refusal("the button carries no warning", status=400)
