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
"""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

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


class SlackStandIn:
    def __init__(
        self,
        script: list[int] | None = None,
        retry_after: str = "0",
        *,
        path: str = STANDIN_WEBHOOK_PATH,
        leaky: bool = False,
    ) -> None:
        self.received: list[dict[str, Any]] = []
        #: (response URL path, body) of every message updated in place through a response URL.
        self.responses: list[tuple[str, dict[str, Any]]] = []
        #: (status, Slack's error) for every request refused.
        self.rejected: list[tuple[int, str]] = []
        self.attempts = 0
        self.gets = 0
        self.path = path
        self._script: deque[int] = deque(script or [])
        self._retry_after = retry_after
        self._leaky = leaky
        self._lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
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
        """Where the stand-in listens: the webhook's ``origin`` in tests and the demo."""
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

    def __enter__(self) -> SlackStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


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
