"""A real HTTP server on loopback that plays Slack's incoming webhook.

It answers the way Slack does, so that tests and the demo exercise the notifier over a
real socket and cannot pass with a message Slack would refuse:

- a path other than its webhook's: 404 ``no_service``;
- a body that is not a JSON object: 400 ``invalid_payload``; neither text nor blocks:
  400 ``no_text``;
- Block Kit past Slack's limits (more than 50 blocks; a header over 150 characters or not
  plain text; a section text over 3,000; more than 10 fields or a field over 2,000; an
  empty text; an unknown block type; a button past its limits): 400 ``invalid_blocks``.

The limits are written here from Slack's documentation, not imported from the renderer,
so a wrong limit in one is caught by the other. Lengths are counted in UTF-16 code units
(the stricter reading for emoji). It can also answer from a script (e.g.
``[429, 500, 200]``) to exercise retries, and ``leaky=True`` echoes the request path in
its error bodies, as a careless proxy might, to test that the webhook URL is never
repeated in an error.

It also plays Slack's **interactivity**, configured with the app's signing secret, the
interactivity request URL (the answer endpoint's) and a clock (no wall clock in tests):

- :meth:`SlackStandIn.press` presses a button of a message it received: it builds the
  ``block_actions`` payload as Slack sends it (user, team, channel, container, message,
  trigger_id, a response_url under its own ``/actions/`` path, the action), form-encodes it
  as ``payload=<json>``, signs it (``X-Slack-Request-Timestamp``, ``X-Slack-Signature`` =
  ``v0=`` HMAC-SHA256 of ``v0:{ts}:{body}``) and POSTs it over a real socket, waiting at most
  Slack's 3 seconds; it returns the endpoint's answer. (Slack ignores the body of a
  ``block_actions`` acknowledgement: only what is posted to the response_url is shown.)
- ``POST /api/views.open`` (the Web API): checks the bearer token, the trigger_id (issued
  by a press, at most 3 seconds old, used once) and the modal against Slack's limits;
  answers ``{"ok": true, "view": ...}`` or ``{"ok": false, "error": ...}`` as Slack does.
- :meth:`SlackStandIn.submit_view` submits an opened modal as Slack does
  (``view_submission`` with ``view.state.values``, ``private_metadata``, the user; signed)
  and returns the endpoint's answer (``response_action`` errors or clear).
- Posts to a response_url (``/actions/…``) are recorded in :attr:`SlackStandIn.responses`.

:class:`costguard_demo.function_url.FunctionUrlServer` puts a Lambda Function URL handler on a real socket, so the
stand-in's request URL can be the answer endpoint as deployed.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import itertools
import json
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit

if TYPE_CHECKING:
    from costguard.adapters.slack import SlackWebhook

#: Shaped like a real webhook path; the "secret" the tests make sure is never leaked.
STANDIN_WEBHOOK_PATH = "/services/T0STANDIN/B0STANDIN/StandInWebhookToken0123456"

_MAX_BLOCKS = 50
_MAX_HEADER = 150
_MAX_SECTION_TEXT = 3000
_MAX_FIELDS = 10
_MAX_FIELD_TEXT = 2000
_MAX_CONTEXT_ELEMENTS = 10
_MAX_TEXT_OBJECT = 3000

_BODIES = {
    200: "ok",
    400: "invalid_payload",
    403: "invalid_token",
    404: "no_service",
    410: "channel_is_archived",
    429: "rate_limited",
}


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _text_object_ok(obj: object, limit: int, *, plain_only: bool = False) -> bool:
    if not isinstance(obj, dict):
        return False
    kinds = {"plain_text"} if plain_only else {"plain_text", "mrkdwn"}
    text = obj.get("text")
    return obj.get("type") in kinds and isinstance(text, str) and 1 <= _units(text) <= limit


def _block_ok(block: object) -> bool:
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    if kind == "header":
        return _text_object_ok(block.get("text"), _MAX_HEADER, plain_only=True)
    if kind == "section":
        text, fields = block.get("text"), block.get("fields")
        if text is None and fields is None:
            return False
        if text is not None and not _text_object_ok(text, _MAX_SECTION_TEXT):
            return False
        if fields is not None:
            if not isinstance(fields, list) or not 1 <= len(fields) <= _MAX_FIELDS:
                return False
            return all(_text_object_ok(f, _MAX_FIELD_TEXT) for f in fields)
        return True
    if kind == "context":
        elements = block.get("elements")
        return (
            isinstance(elements, list)
            and 1 <= len(elements) <= _MAX_CONTEXT_ELEMENTS
            and all(_text_object_ok(e, _MAX_TEXT_OBJECT) for e in elements)
        )
    if kind == "actions":
        elements = block.get("elements")
        return (
            isinstance(elements, list)
            and 1 <= len(elements) <= _MAX_ACTION_ELEMENTS
            and len(str(block.get("block_id", ""))) <= _MAX_ID
            and all(_button_ok(e) for e in elements)
        )
    return kind == "divider"


#: Slack's limits for an actions block and its buttons (Block Kit reference).
_MAX_ACTION_ELEMENTS = 25
_MAX_ID = 255
_MAX_BUTTON_TEXT = 75
_MAX_BUTTON_VALUE = 2000


def _button_ok(element: object) -> bool:
    """A button as Slack takes it: plain-text label, an action id, a value, an optional
    danger/primary style and an optional confirmation dialog."""
    if not isinstance(element, dict) or element.get("type") != "button":
        return False
    action_id, value = element.get("action_id"), element.get("value", "")
    if not isinstance(action_id, str) or not 1 <= len(action_id) <= _MAX_ID:
        return False
    if not isinstance(value, str) or len(value) > _MAX_BUTTON_VALUE:
        return False
    if element.get("style") not in (None, "primary", "danger"):
        return False
    if not _text_object_ok(element.get("text"), _MAX_BUTTON_TEXT, plain_only=True):
        return False
    confirm = element.get("confirm")
    if confirm is None:
        return True
    return (
        isinstance(confirm, dict)
        and _text_object_ok(confirm.get("title"), 100, plain_only=True)
        and _text_object_ok(confirm.get("text"), 300)
        and _text_object_ok(confirm.get("confirm"), 30, plain_only=True)
        and _text_object_ok(confirm.get("deny"), 30, plain_only=True)
        and confirm.get("style") in (None, "primary", "danger")
    )


#: Where Slack's response URLs live (``https://hooks.slack.com/actions/T…/…/…``).
RESPONSE_PATH_PREFIX = "/actions/"


def slack_error(body: bytes) -> str | None:
    """What Slack would answer to this webhook body (``None``: it would post it)."""
    try:
        payload = json.loads(body)
    except ValueError:
        return "invalid_payload"
    if not isinstance(payload, dict):
        return "invalid_payload"
    blocks = payload.get("blocks")
    text = payload.get("text")
    if blocks is None:
        return None if isinstance(text, str) and text.strip() else "no_text"
    if not isinstance(blocks, list) or not 1 <= len(blocks) <= _MAX_BLOCKS:
        return "invalid_blocks"
    if not all(_block_ok(b) for b in blocks):
        return "invalid_blocks"
    return None


# -- interactivity --------------------------------------------------------------------------

#: The stand-in's workspace, app, bot and channel (shaped like Slack's IDs).
STANDIN_TEAM = ("T0STANDIN", "costguard-standin")
STANDIN_APP_ID = "A0STANDIN"
STANDIN_BOT_ID = "B0STANDIN"
STANDIN_CHANNEL = ("C0STANDIN", "costguard-alerts")
#: The bot token the stand-in's Web API takes (what the bot-token secret holds in tests).
STANDIN_BOT_TOKEN = "xoxb-1000000000-2000000000-StandInBotToken0123456789"
#: The deprecated verification token Slack still sends in payloads (CostGuard ignores it).
STANDIN_VERIFICATION_TOKEN = "StandInVerificationToken"
#: Slack waits this long for an interaction's acknowledgement; a trigger_id lives as long.
ACK_TIMEOUT_S = 3.0
TRIGGER_LIFE_S = 3.0
WEB_API_PREFIX = "/api/"

#: Slack's limits for a modal view (Block Kit reference, "Modal views").
_MAX_MODAL_TITLE = 24
_MAX_MODAL_BUTTON = 24
_MAX_MODAL_BLOCKS = 100
_MAX_PRIVATE_METADATA = 3000
_MAX_CALLBACK_ID = 255
#: Input blocks, plain-text inputs and date pickers (Block Kit reference).
_MAX_LABEL = 2000
_MAX_HINT = 2000
_MAX_PLACEHOLDER = 150
_MAX_INPUT_LENGTH = 3000


@dataclass(frozen=True, slots=True)
class SlackUser:
    """Who presses, as Slack names them in a payload's ``user``."""

    id: str
    username: str
    name: str = ""
    team_id: str = STANDIN_TEAM[0]

    def payload(self) -> dict[str, str]:
        return {
            "id": self.id,
            "username": self.username,
            "name": self.name or self.username,
            "team_id": self.team_id,
        }


@dataclass(frozen=True, slots=True)
class Interaction:
    """What the request URL answered to one interaction (status 0: no answer within 3 s)."""

    status: int
    body: str
    #: The payload Slack sent (decoded), for the test to look at.
    payload: dict[str, Any] = field(repr=False)
    elapsed_s: float = 0.0

    def json(self) -> Any:
        return json.loads(self.body) if self.body.strip() else None


def sign_request(secret: bytes, timestamp: str, body: bytes) -> str:
    """``X-Slack-Signature`` for a request: written here from Slack's documentation, not
    imported from CostGuard, so a mistake in one is caught by the other."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret, base, hashlib.sha256).hexdigest()


def _plain_ok(obj: object, limit: int) -> bool:
    return _text_object_ok(obj, limit, plain_only=True)


def _is_date(value: object) -> bool:
    """``YYYY-MM-DD``, a real date (what a date picker gives and takes)."""
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _input_element_error(element: object) -> str | None:
    if not isinstance(element, dict):
        return "an input block needs an element"
    kind = element.get("type")
    action_id = element.get("action_id")
    if action_id is not None and (not isinstance(action_id, str) or len(action_id) > _MAX_ID):
        return "an element's action_id is past 255 characters"
    placeholder = element.get("placeholder")
    if placeholder is not None and not _plain_ok(placeholder, _MAX_PLACEHOLDER):
        return "a placeholder is not plain text of at most 150 characters"
    if kind == "plain_text_input":
        low, high = element.get("min_length", 0), element.get("max_length", _MAX_INPUT_LENGTH)
        if not isinstance(low, int) or not 0 <= low <= _MAX_INPUT_LENGTH:
            return "min_length must be within 0..3000"
        if not isinstance(high, int) or not 1 <= high <= _MAX_INPUT_LENGTH or low > high:
            return "max_length must be within 1..3000 and at least min_length"
        if not isinstance(element.get("multiline", False), bool):
            return "multiline must be a boolean"
        return None
    if kind == "datepicker":
        initial = element.get("initial_date")
        if initial is not None and not _is_date(initial):
            return "initial_date must be YYYY-MM-DD"
        return None
    return f"an input element CostGuard's stand-in does not know: {kind!r}"


def modal_error(view: object) -> str | None:
    """Why Slack would refuse this modal (``invalid_arguments``), or None."""
    if not isinstance(view, dict) or view.get("type") != "modal":
        return "the view is not a modal"
    if not _plain_ok(view.get("title"), _MAX_MODAL_TITLE):
        return "the title must be plain text of at most 24 characters"
    blocks = view.get("blocks")
    if not isinstance(blocks, list) or not 1 <= len(blocks) <= _MAX_MODAL_BLOCKS:
        return "a modal has 1 to 100 blocks"
    for name in ("close", "submit"):
        if view.get(name) is not None and not _plain_ok(view.get(name), _MAX_MODAL_BUTTON):
            return f"{name} must be plain text of at most 24 characters"
    metadata = view.get("private_metadata", "")
    if not isinstance(metadata, str) or len(metadata) > _MAX_PRIVATE_METADATA:
        return "private_metadata is past 3,000 characters"
    callback = view.get("callback_id", "")
    if not isinstance(callback, str) or len(callback) > _MAX_CALLBACK_ID:
        return "callback_id is past 255 characters"
    block_ids: set[str] = set()
    inputs = 0
    for block in blocks:
        if not isinstance(block, dict):
            return "a block is not an object"
        block_id = block.get("block_id")
        if block_id is not None:
            if not isinstance(block_id, str) or len(block_id) > _MAX_ID or block_id in block_ids:
                return "block_ids must be unique strings of at most 255 characters"
            block_ids.add(block_id)
        if block.get("type") == "input":
            inputs += 1
            if not _plain_ok(block.get("label"), _MAX_LABEL):
                return "an input's label must be plain text of at most 2,000 characters"
            if block.get("hint") is not None and not _plain_ok(block.get("hint"), _MAX_HINT):
                return "an input's hint must be plain text of at most 2,000 characters"
            problem = _input_element_error(block.get("element"))
            if problem is not None:
                return problem
        elif not _block_ok(block):
            return f"a {block.get('type')!r} block is past Slack's limits"
    if inputs and view.get("submit") is None:
        return "a modal with inputs needs a submit button"
    return None


def _find_button(message: Mapping[str, Any], action_id: str) -> tuple[str, dict[str, Any]]:
    for block in message.get("blocks") or []:
        if isinstance(block, dict) and block.get("type") == "actions":
            for element in block.get("elements") or []:
                if isinstance(element, dict) and element.get("action_id") == action_id:
                    return str(block.get("block_id", "")), element
    raise LookupError(f"the message has no button {action_id!r}")


def _post(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> tuple[int, str]:
    """One POST over a real socket (no redirects, no retries): status and body; 0 on timeout."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError("the stand-in posts to a loopback http:// URL")
    connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    try:
        connection.request("POST", parts.path or "/", body, dict(headers))
        reply = connection.getresponse()
        return reply.status, reply.read().decode("utf-8", errors="replace")
    except TimeoutError:
        return 0, "operation_timeout"
    finally:
        connection.close()


class SlackStandIn:
    def __init__(
        self,
        script: list[int] | None = None,
        retry_after: str = "0",
        *,
        path: str = STANDIN_WEBHOOK_PATH,
        leaky: bool = False,
        signing_secret: bytes | None = None,
        request_url: str | None = None,
        clock: Callable[[], datetime] | None = None,
        bot_token: str = STANDIN_BOT_TOKEN,
    ) -> None:
        self.received: list[dict[str, Any]] = []
        #: (response URL path, body) of every message updated in place through a response URL.
        self.responses: list[tuple[str, dict[str, Any]]] = []
        #: (status, Slack's error) for every request refused.
        self.rejected: list[tuple[int, str]] = []
        #: Every view opened through ``views.open``.
        self.views: list[dict[str, Any]] = []
        #: (Web API method, Slack's error or "ok") for every Web API call, in order.
        self.api_calls: list[tuple[str, str]] = []
        #: Errors the Web API answers next (``ok: false``), one per call, e.g. ["invalid_auth"].
        self.api_errors: deque[str] = deque()
        #: Seconds the Web API waits before answering (to exercise the caller's timeout).
        self.api_delay_s = 0.0
        self.attempts = 0
        self.gets = 0
        self.path = path
        self.signing_secret = signing_secret
        self.request_url = request_url
        self.bot_token = bot_token
        self._clock = clock
        self._script: deque[int] = deque(script or [])
        self._retry_after = retry_after
        self._leaky = leaky
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        #: trigger_id -> (monotonic time it was issued, the user it was issued to, used?)
        self._triggers: dict[str, tuple[float, SlackUser, bool]] = {}
        #: view id -> (the view as opened, the user it was opened for)
        self._open_views: dict[str, tuple[dict[str, Any], SlackUser]] = {}
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path.startswith(WEB_API_PREFIX):
                    api_status, reply = stand_in._web_api(
                        self.path, self.headers.get("Authorization", ""), body
                    )
                    try:
                        self.send_response(api_status)
                        self.send_header("Content-Type", "application/json; charset=utf-8")
                        self.end_headers()
                        self.wfile.write(json.dumps(reply).encode())
                    except (BrokenPipeError, ConnectionResetError):
                        pass  # the caller gave up waiting (its timeout)
                    return
                with stand_in._lock:
                    stand_in.attempts += 1
                    status = stand_in._script.popleft() if stand_in._script else 200
                    error = _BODIES.get(status, "internal_error") if status != 200 else None
                    # A button's response URL (/actions/...) updates a message in place.
                    response = self.path.startswith(RESPONSE_PATH_PREFIX)
                    if status == 200 and self.path != stand_in.path and not response:
                        status, error = 404, "no_service"
                    if status == 200:
                        error = slack_error(body)
                        if error is not None:
                            status = 400
                    if status == 200 and response:
                        stand_in.responses.append((self.path, json.loads(body)))
                    elif status == 200:
                        stand_in.received.append(json.loads(body))
                    else:
                        stand_in.rejected.append((status, str(error)))
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", stand_in._retry_after)
                if 300 <= status < 400:
                    self.send_header("Location", f"http://{self.headers['Host']}/elsewhere")
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                answer = "ok" if status == 200 else str(error)
                if stand_in._leaky and status != 200:
                    answer += f" (for {self.path})"
                self.wfile.write(answer.encode())

            def do_GET(self) -> None:
                with stand_in._lock:
                    stand_in.gets += 1
                self.send_response(405)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def origin(self) -> str:
        """Where the stand-in listens: the webhook's ``origin`` in tests and the demo, and the
        Web API's (``/api/…``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def url(self) -> str:
        """The loopback URL it answers on (for display)."""
        return self.origin + self.path

    @property
    def secret(self) -> str:
        """What the Secrets Manager secret would hold for this webhook."""
        return "https://hooks.slack.com" + self.path

    def webhook(self, **options: Any) -> SlackWebhook:
        """A webhook whose secret is this stand-in's URL, sent to the stand-in."""
        from costguard.adapters.slack import SlackWebhook

        return SlackWebhook(lambda: self.secret, origin=self.origin, **options)

    # -- interactivity ----------------------------------------------------------------------

    def interactivity(
        self,
        request_url: str,
        signing_secret: bytes,
        clock: Callable[[], datetime],
    ) -> SlackStandIn:
        """Set up interactivity as the app's settings do: where Slack sends interactions
        (the answer endpoint's URL, e.g. ``…/slack``), the app's signing secret, and the clock
        its requests are timestamped with."""
        self.request_url, self.signing_secret, self._clock = request_url, signing_secret, clock
        return self

    def press(
        self,
        message: Mapping[str, Any],
        action_id: str,
        user: SlackUser,
        *,
        at: datetime | None = None,
    ) -> Interaction:
        """Press the button ``action_id`` of a ``message`` the stand-in received, as ``user``:
        the signed ``block_actions`` request Slack sends, and the endpoint's answer.

        Raises ``LookupError`` when the message has no such button (Slack shows none)."""
        block_id, button = _find_button(message, action_id)
        n = next(self._ids)
        trigger_id = f"{1000000 + n}.{STANDIN_TEAM[0][1:]}.{secrets.token_hex(16)}"
        with self._lock:
            self._triggers[trigger_id] = (time.monotonic(), user, False)
            index = next(
                (i for i, m in enumerate(self.received) if m is message), len(self.received)
            )
        now = self._now(at)
        message_ts = f"{1700000000 + index}.{index:06d}"
        action_ts = f"{int(now.timestamp())}.{n:06d}"
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": user.payload(),
            "api_app_id": STANDIN_APP_ID,
            "token": STANDIN_VERIFICATION_TOKEN,
            "container": {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": STANDIN_CHANNEL[0],
                "is_ephemeral": False,
            },
            "trigger_id": trigger_id,
            "team": {"id": STANDIN_TEAM[0], "domain": STANDIN_TEAM[1]},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": STANDIN_CHANNEL[0], "name": STANDIN_CHANNEL[1]},
            "message": {
                "type": "message",
                "subtype": "bot_message",
                "text": str(message.get("text", "")),
                "ts": message_ts,
                "bot_id": STANDIN_BOT_ID,
                "blocks": message.get("blocks", []),
            },
            "state": {"values": {}},
            "response_url": (
                f"{self.origin}{RESPONSE_PATH_PREFIX}{STANDIN_TEAM[0]}/{1000000 + n}/"
                f"{secrets.token_urlsafe(18)}"
            ),
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": block_id,
                    "text": button.get("text"),
                    "value": button.get("value", ""),
                    **({"style": button["style"]} if "style" in button else {}),
                    "type": "button",
                    "action_ts": action_ts,
                }
            ],
        }
        return self.send(payload, at=now)

    def submit_view(
        self,
        values: Mapping[str, str | None],
        user: SlackUser | None = None,
        *,
        view_id: str | None = None,
        at: datetime | None = None,
        check: bool = True,
    ) -> Interaction:
        """Submit an opened modal (the last one by default) with ``values`` by input block id
        (a date picker's as ``YYYY-MM-DD``), as Slack does: a signed ``view_submission``.

        With ``check`` (the default) the stand-in refuses, as Slack's client does, to submit
        a required input left empty or text outside the input's min/max length (``ValueError``);
        ``check=False`` sends whatever is given (a hostile client)."""
        with self._lock:
            if not self._open_views:
                raise LookupError("no modal is open")
            view_id = view_id or list(self._open_views)[-1]
            opened, opened_for = self._open_views[view_id]
        user = user or opened_for
        state: dict[str, dict[str, dict[str, Any]]] = {}
        for block in opened["blocks"]:
            if block.get("type") != "input":
                continue
            element = block["element"]
            block_id, action_id = block.get("block_id", ""), element.get("action_id", "")
            value = values.get(block_id)
            if check:
                _check_input(block, value)
            entry: dict[str, Any] = {"type": element["type"]}
            if element["type"] == "datepicker":
                entry["selected_date"] = value
            else:
                entry["value"] = value
            state[block_id] = {action_id: entry}
        view = {
            **opened,
            "state": {"values": state},
            "hash": f"{int(self._now(at).timestamp())}.{view_id}",
        }
        payload = {
            "type": "view_submission",
            "team": {"id": STANDIN_TEAM[0], "domain": STANDIN_TEAM[1]},
            "user": user.payload(),
            "api_app_id": STANDIN_APP_ID,
            "token": STANDIN_VERIFICATION_TOKEN,
            "trigger_id": f"{2000000 + next(self._ids)}.{STANDIN_TEAM[0][1:]}.{secrets.token_hex(16)}",
            "view": view,
            "response_urls": [],
            "is_enterprise_install": False,
            "enterprise": None,
        }
        answer = self.send(payload, at=at)
        if answer.status == 200:
            reply = answer.json()
            action = reply.get("response_action") if isinstance(reply, dict) else None
            if action == "errors":
                _check_errors(opened, reply.get("errors"))
            elif action in (None, "clear"):
                with self._lock:
                    self._open_views.pop(view_id, None)
        return answer

    def send(self, payload: Mapping[str, Any], *, at: datetime | None = None) -> Interaction:
        """POST one interaction payload to the request URL as Slack does: form-encoded
        ``payload=<json>``, signed, timestamped by the clock; at most 3 s to answer."""
        if self.request_url is None or self.signing_secret is None:
            raise RuntimeError("interactivity is not set up: call interactivity() first")
        body = urlencode({"payload": json.dumps(payload, separators=(",", ":"))}).encode()
        timestamp = str(int(self._now(at).timestamp()))
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": sign_request(self.signing_secret, timestamp, body),
        }
        started = time.monotonic()
        status, text = _post(self.request_url, body, headers, ACK_TIMEOUT_S)
        return Interaction(status, text, dict(payload), time.monotonic() - started)

    def _now(self, at: datetime | None) -> datetime:
        if at is not None:
            return at
        if self._clock is None:
            raise RuntimeError("the stand-in has no clock: give interactivity() one, or at=")
        return self._clock()

    def _web_api(self, path: str, authorization: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """Slack's Web API answers 200 with ``ok: false`` and an error for what it refuses."""
        method = path[len(WEB_API_PREFIX) :].split("?", maxsplit=1)[0]
        if self.api_delay_s:
            time.sleep(self.api_delay_s)
        answer = self._call(method, authorization, body)
        with self._lock:
            self.api_calls.append((method, str(answer.get("error", "ok"))))
        return (404 if answer.get("error") == "unknown_method" else 200), answer

    def _call(self, method: str, authorization: str, body: bytes) -> dict[str, Any]:
        if method != "views.open":
            return {"ok": False, "error": "unknown_method"}
        scheme, _, token = authorization.partition(" ")
        if not token:
            return {"ok": False, "error": "not_authed"}
        if scheme != "Bearer" or not hmac.compare_digest(token.encode(), self.bot_token.encode()):
            return {"ok": False, "error": "invalid_auth"}
        with self._lock:
            if self.api_errors:
                return {"ok": False, "error": self.api_errors.popleft()}
        try:
            args = json.loads(body)
        except ValueError:
            args = dict(parse_qsl(body.decode("utf-8", errors="replace")))
        if not isinstance(args, dict):
            return {"ok": False, "error": "invalid_arguments"}
        view = args.get("view")
        if isinstance(view, str):
            try:
                view = json.loads(view)
            except ValueError:
                return {"ok": False, "error": "invalid_arguments"}
        if len(json.dumps(view)) > 250_000:
            return {"ok": False, "error": "view_too_large"}
        trigger_id = args.get("trigger_id")
        with self._lock:
            issued = self._triggers.get(str(trigger_id))
            if issued is None:
                return {"ok": False, "error": "invalid_trigger_id"}
            since, user, used = issued
            if used:
                return {"ok": False, "error": "exchanged_trigger_id"}
            if time.monotonic() - since > TRIGGER_LIFE_S:
                return {"ok": False, "error": "expired_trigger_id"}
            problem = modal_error(view)
            if problem is not None:
                return {
                    "ok": False,
                    "error": "invalid_arguments",
                    "response_metadata": {"messages": [f"[ERROR] {problem}"]},
                }
            assert isinstance(view, dict)
            self._triggers[str(trigger_id)] = (since, user, True)
            view_id = f"V0STANDIN{next(self._ids):04d}"
            opened = {
                "id": view_id,
                "team_id": STANDIN_TEAM[0],
                "private_metadata": "",
                "callback_id": "",
                "external_id": "",
                "clear_on_close": False,
                "notify_on_close": False,
                **view,
                "state": {"values": {}},
                "root_view_id": view_id,
                "previous_view_id": None,
                "app_id": STANDIN_APP_ID,
                "bot_id": STANDIN_BOT_ID,
                "app_installed_team_id": STANDIN_TEAM[0],
            }
            self.views.append(view)
            self._open_views[view_id] = (opened, user)
        return {"ok": True, "view": opened}

    def __enter__(self) -> SlackStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _check_input(block: Mapping[str, Any], value: str | None) -> None:
    """What Slack's client itself refuses to submit."""
    element = block["element"]
    if value in (None, ""):
        if not block.get("optional", False):
            raise ValueError(f"{block.get('block_id')!r} is required")
        return
    assert value is not None
    if element["type"] == "plain_text_input":
        if not element.get("min_length", 0) <= len(value) <= element.get("max_length", 3000):
            raise ValueError(f"{block.get('block_id')!r} is outside its length")
    elif element["type"] == "datepicker" and not _is_date(value):
        raise ValueError(f"{block.get('block_id')!r} is not a date")


def _check_errors(view: Mapping[str, Any], errors: object) -> None:
    """Slack shows ``response_action: errors`` only against the view's input blocks."""
    inputs = {b.get("block_id") for b in view.get("blocks", []) if b.get("type") == "input"}
    if not isinstance(errors, dict) or not errors or not set(errors) <= inputs:
        raise AssertionError(f"Slack would not show these errors on the modal: {errors!r}")


def sns_event(
    *messages: str, topic_arn: str = "arn:aws:sns:us-east-1:123456789012:costguard-alerts"
) -> dict[str, Any]:
    """The event SNS invokes a Lambda subscriber with, one record per message (SNS sends one)."""
    records = []
    for n, message in enumerate(messages):
        message_id = f"00000000-0000-4000-8000-{n:012d}"
        records.append(
            {
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "EventSubscriptionArn": f"{topic_arn}:11111111-2222-4333-8444-555555555555",
                "Sns": {
                    "Type": "Notification",
                    "MessageId": message_id,
                    "TopicArn": topic_arn,
                    "Subject": None,
                    "Message": message,
                    "Timestamp": "2026-11-20T12:00:00.000Z",
                    "SignatureVersion": "1",
                    "Signature": "EXAMPLE",
                    "SigningCertUrl": "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0000.pem",
                    "UnsubscribeUrl": f"https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={topic_arn}:1",
                    "MessageAttributes": {},
                },
            }
        )
    return {"Records": records}
