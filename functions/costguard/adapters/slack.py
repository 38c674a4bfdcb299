"""Post Block Kit messages to a Slack incoming webhook, whose URL is a secret.

The secret is read through a callable (Powertools Parameters in the Lambda, which
caches it) and judged by :func:`parse_webhook_secret` on every use:

- empty, or not URL-like at all (no ``scheme://`` in front and no ``hooks.slack.com``
  in it): **not configured**. The stack creates the secret with a random placeholder,
  and a deployment that uses e-mail or Amazon Q only never replaces it;
- anything else must be exactly one ``https://hooks.slack.com/services/…`` (or
  ``/workflows/…``) URL, or it is a :class:`WebhookSecretError`.

The URL is a credential: anyone holding it can post to the channel. No exception
message or log line from here ever contains it, nor any part of its path. Only the
path is kept from the secret; the request always goes to ``https://hooks.slack.com``
(tests and the demo point ``origin`` at a loopback stand-in), and redirects are never
followed, so the payload cannot be sent anywhere else.

Retries 429 (honouring ``Retry-After``), 5xx and network errors with backoff, a bounded
number of times; anything else, or a persistent failure, raises so that the Lambda's
retries and its dead-letter queue take over.
"""

from __future__ import annotations

import http.client
import json
import math
import re
import time
import unicodedata
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from costguard.ports import SlackCallError
from costguard.retry import retrying

MAX_ATTEMPTS = 5
MAX_RETRY_AFTER_S = 30.0
SLACK_WEBHOOK_ORIGIN = "https://hooks.slack.com"
SLACK_WEBHOOK_HOST = "hooks.slack.com"

#: ``scheme://`` at the start: the value was meant to be a URL.
_URL_LIKE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_WEBHOOK_PATH = re.compile(r"/(?:services|workflows)(?:/[A-Za-z0-9_\-]+)+")
_REDACTED = "<redacted>"


class SlackDeliveryError(SlackCallError):
    """Slack refused the message, or kept failing after the retries."""


class WebhookSecretError(Exception):
    """The webhook secret holds a value, but not a Slack incoming-webhook URL.

    The message says which rule failed, never the value.
    """


class WebhookNotConfiguredError(SlackDeliveryError):
    """Posting was asked for, but the secret still holds no webhook URL."""


@dataclass(frozen=True, slots=True)
class WebhookPath:
    """The secret part of a webhook URL (``/services/T…/B…/…``). Never shown by ``repr``."""

    value: str = field(repr=False)

    def __str__(self) -> str:
        return _REDACTED

    def redact(self, text: str) -> str:
        """``text`` with the path, and every distinctive piece of it, replaced."""
        pieces = [self.value, *sorted(self.value.split("/"), key=len, reverse=True)]
        for piece in pieces:
            if len(piece) >= 4 and piece not in {"services", "workflows"}:
                text = text.replace(piece, _REDACTED)
        return text


def _is_unconfigured(value: str) -> bool:
    return not _URL_LIKE.match(value) and SLACK_WEBHOOK_HOST not in value.lower()


def _why_not_a_webhook(value: str) -> str | None:
    if any(ch.isspace() or unicodedata.category(ch)[0] in "CZ" for ch in value):
        return "it contains whitespace or control characters"
    if not value.lower().startswith("https://"):
        return "it must start with https://"
    if value.count("://") != 1:
        return "it must hold exactly one URL"
    try:
        parts = urlsplit(value)
    except ValueError:
        return "it is not a valid URL"
    if "@" in parts.netloc:
        return "it must not carry user information"
    if parts.netloc.lower() != SLACK_WEBHOOK_HOST:
        return "the host must be exactly hooks.slack.com, with no port"
    if parts.query or parts.fragment or "?" in value or "#" in value:
        return "it must have no query or fragment"
    if not _WEBHOOK_PATH.fullmatch(parts.path):
        return "the path must be /services/… or /workflows/… (letters, digits, _ and -)"
    return None


def parse_webhook_secret(secret: str | bytes | None) -> WebhookPath | None:
    """The webhook path in the secret; ``None`` if no webhook is configured.

    Surrounding whitespace (a trailing newline from a paste) is ignored. Raises
    :class:`WebhookSecretError` for a value that was meant as a URL but is not a
    single ``https://hooks.slack.com/services/…`` or ``/workflows/…`` URL.
    """
    if secret is None:
        return None
    text = secret.decode("utf-8", errors="replace") if isinstance(secret, bytes) else secret
    value = text.strip(" \t\r\n")
    if not value or _is_unconfigured(value):
        return None
    reason = _why_not_a_webhook(value)
    if reason is not None:
        raise WebhookSecretError(
            "the Slack webhook secret is not a single "
            f"https://hooks.slack.com/services/… URL: {reason}"
        )
    return WebhookPath(urlsplit(value).path)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is an error: the message goes to the webhook's host or nowhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class SlackWebhook:
    def __init__(
        self,
        secret: Callable[[], str | bytes | None],
        *,
        origin: str = SLACK_WEBHOOK_ORIGIN,
        timeout_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        """``origin`` is ``https://hooks.slack.com``; only tests and the demo change it."""
        self._secret = secret
        self._origin = origin.rstrip("/")
        self._timeout = timeout_s
        self._sleep = sleep
        self._max_attempts = max_attempts
        self._opener = urllib.request.build_opener(_NoRedirects)

    def target(self) -> WebhookPath | None:
        """Read and judge the secret: ``None`` when no webhook is configured."""
        return parse_webhook_secret(self._secret())

    def post(self, payload: dict[str, Any], target: WebhookPath | None = None) -> int:
        """POST the payload; return the number of attempts it took."""
        path = target or self.target()
        if path is None:
            raise WebhookNotConfiguredError("no Slack webhook is configured")
        body = json.dumps(payload).encode()
        attempts = 0

        def attempt() -> int:
            nonlocal attempts
            attempts += 1
            request = urllib.request.Request(  # noqa: S310 - the origin is fixed, the path checked
                self._origin + path.value,
                data=body,
                method="POST",
                headers={"Content-Type": "application/json; charset=utf-8"},
            )
            try:
                with self._opener.open(request, timeout=self._timeout) as response:
                    response.read(1024)
                    return attempts
            except urllib.error.HTTPError as exc:
                status = exc.code
                last = f"HTTP {status}: {path.redact(_body(exc))}"
                if status == 429:
                    raise _Transient(
                        last, _retry_after(exc.headers.get("Retry-After"), attempts)
                    ) from None
                if status >= 500:
                    raise _Transient(last, _backoff(attempts)) from None
                raise SlackDeliveryError(f"Slack rejected the message ({last})") from None
            except OSError as exc:  # URLError, timeouts, refused and reset connections
                last = path.redact(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}")
                raise _Transient(last, _backoff(attempts)) from None
            except (http.client.HTTPException, ValueError) as exc:
                detail = path.redact(f"{type(exc).__name__}: {exc}")
                raise SlackDeliveryError(f"could not send to Slack ({detail})") from None

        try:
            return retrying(
                attempt,
                attempts=self._max_attempts,
                delay=lambda e, _n: e.delay if isinstance(e, _Transient) else None,
                sleep=self._sleep,
            )
        except _Transient as exc:
            raise SlackDeliveryError(
                f"Slack kept failing after {self._max_attempts} attempts ({exc})"
            ) from None


class _Transient(Exception):
    """A failed attempt worth another after ``delay`` seconds (429, 5xx, no connection)."""

    def __init__(self, detail: str, delay: float) -> None:
        super().__init__(detail)
        self.delay = delay


def _body(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read(200).decode(errors="replace").strip()
    except (OSError, http.client.HTTPException):
        return ""
    finally:
        exc.close()


def _backoff(attempt: int) -> float:
    return min(0.5 * 2.0 ** (attempt - 1), MAX_RETRY_AFTER_S)


def _retry_after(header: str | None, attempt: int) -> float:
    """Seconds Slack asks for, within [0, 30]; an HTTP date, ``nan`` or junk falls back."""
    try:
        seconds = float(header or "")
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds):
        return min(1.0 * attempt, MAX_RETRY_AFTER_S)
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def is_response_url(url: object, origin: str = SLACK_WEBHOOK_ORIGIN) -> bool:
    """Whether ``url`` is one of Slack's response URLs (``https://hooks.slack.com/actions/…``):
    the only kind CostGuard ever posts an answer's outcome to."""
    prefix = origin.rstrip("/") + "/actions/"
    return (
        isinstance(url, str)
        and url.startswith(prefix)
        and len(url) > len(prefix)
        and not any(c in url for c in "\r\n \t?#@")
    )


def answer_in_place(
    response_url: str, text: str, *, origin: str = SLACK_WEBHOOK_ORIGIN, sleep: Any = None
) -> int:
    """Replace a warning's message with what became of its answer ("kept until 14:00 UTC by
    @maria"), through the ``response_url`` Slack gave with the button press. Only a URL of
    Slack's own ``/actions/`` path is followed (never one a payload could point elsewhere)."""
    if not is_response_url(response_url, origin):
        raise SlackDeliveryError("the response URL is not Slack's")
    kwargs = {"sleep": sleep} if sleep is not None else {}
    hook = SlackWebhook(lambda: None, origin=origin, **kwargs)
    path = WebhookPath(response_url[len(origin.rstrip("/")) :])
    return hook.post({"replace_original": True, "text": text}, path)


# -- the Web API (the Exempt… dialog) ----------------------------------------------------------

SLACK_API_ORIGIN = "https://slack.com"
#: Slack lets a trigger_id live 3 seconds and wants the interaction answered within 3: one
#: attempt, answered or given up within this, leaves the desk time to answer.
VIEWS_OPEN_TIMEOUT_S = 2.0
#: An ephemeral reply through the response URL, after a failed views.open: what time is left.
RESPOND_TIMEOUT_S = 0.8
_SLACK_ERROR = re.compile(r"[a-z0-9_]{1,60}")


class SlackApiError(SlackCallError):
    """A Web API call failed: the message says why (Slack's error code, a status, a timeout),
    never the token."""


def parse_bot_token(secret: str | bytes | None) -> str | None:
    """The bot token in its secret (``xoxb-…``); None while the secret holds the stack's
    random placeholder (or nothing). Raises :class:`SlackApiError` for another kind of
    token (a user token, ``xoxp-``, has powers CostGuard must not hold)."""
    if secret is None:
        return None
    text = secret.decode("utf-8", errors="replace") if isinstance(secret, bytes) else secret
    value = text.strip(" \t\r\n")
    if not value.startswith("xox"):
        return None
    if not value.startswith("xoxb-") or not re.fullmatch(r"xoxb-[A-Za-z0-9-]{8,250}", value):
        raise SlackApiError("the Slack bot-token secret does not hold a bot token (xoxb-…)")
    return value


class SlackWebApi:
    """The two calls the answer desk makes to Slack while a person waits: ``views.open``
    (the Exempt… dialog, with the app's bot token) and an ephemeral reply through a
    response URL. One attempt each, short timeouts, no retries: within Slack's 3 seconds,
    and a trigger_id is good for one use and 3 seconds anyway. Redirects are never followed."""

    def __init__(
        self,
        *,
        api_origin: str = SLACK_API_ORIGIN,
        webhook_origin: str = SLACK_WEBHOOK_ORIGIN,
        timeout_s: float = VIEWS_OPEN_TIMEOUT_S,
        respond_timeout_s: float = RESPOND_TIMEOUT_S,
    ) -> None:
        """The origins are Slack's; only tests and the demo point them at a stand-in."""
        self._api = api_origin.rstrip("/")
        self._hooks = webhook_origin.rstrip("/")
        self._timeout = timeout_s
        self._respond_timeout = respond_timeout_s
        self._opener = urllib.request.build_opener(_NoRedirects)

    def open_view(self, token: str | bytes | None, trigger_id: str, view: dict[str, Any]) -> None:
        """Open ``view`` (a modal) for the person whose interaction gave ``trigger_id``;
        raise :class:`SlackApiError` saying why not."""
        bot = parse_bot_token(token)
        if bot is None:
            raise SlackApiError("no Slack bot token is configured (its secret holds a placeholder)")
        request = urllib.request.Request(  # noqa: S310 - the origin is fixed
            self._api + "/api/views.open",
            data=json.dumps({"trigger_id": trigger_id, "view": view}).encode(),
            method="POST",
            headers={
                "Content-Type": "application/json; charset=utf-8",
                "Authorization": f"Bearer {bot}",
            },
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                raw = response.read(64 * 1024)
        except urllib.error.HTTPError as exc:
            exc.close()
            raise SlackApiError(f"views.open answered HTTP {exc.code}") from None
        except TimeoutError:
            raise SlackApiError(f"views.open gave no answer within {self._timeout:g} s") from None
        except OSError as exc:  # URLError, refused and reset connections
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                raise SlackApiError(
                    f"views.open gave no answer within {self._timeout:g} s"
                ) from None
            raise SlackApiError(f"views.open failed: {type(reason).__name__}") from None
        except http.client.HTTPException as exc:
            raise SlackApiError(f"views.open failed: {type(exc).__name__}") from None
        try:
            answer = json.loads(raw)
        except ValueError:
            raise SlackApiError("views.open answered something that is not JSON") from None
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            error = answer.get("error") if isinstance(answer, dict) else None
            code = error if isinstance(error, str) and _SLACK_ERROR.fullmatch(error) else "?"
            raise SlackApiError(f"Slack refused views.open: {code}")

    def respond(self, response_url: str, message: dict[str, Any]) -> None:
        """Post ``message`` (e.g. an ephemeral one) to an interaction's response URL: one
        attempt. Raises :class:`SlackDeliveryError`."""
        if not self.is_response_url(response_url):
            raise SlackDeliveryError("the response URL is not Slack's")
        hook = SlackWebhook(
            lambda: None,
            origin=self._hooks,
            timeout_s=self._respond_timeout,
            max_attempts=1,
            sleep=lambda _s: None,
        )
        hook.post(message, WebhookPath(response_url[len(self._hooks) :]))

    def is_response_url(self, url: object) -> bool:
        return is_response_url(url, self._hooks)
