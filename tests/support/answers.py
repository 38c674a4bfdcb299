"""Requests to the answer endpoint as they arrive: Slack's interactivity POSTs (signed the way
Slack signs them) and e-mail links' GET and POST, as Lambda Function URL events (payload
format 2.0). Test-only: never shipped."""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from costguard.domain.signatures import slack_signature
from costguard.services.answers import HttpRequest


def function_url_event(request: Any, *, base64_body: bool = True) -> dict[str, Any]:
    """The event a Function URL hands its Lambda for ``request`` (an ``HttpRequest``)."""
    body = request.body
    event: dict[str, Any] = {
        "version": "2.0",
        "rawPath": request.path,
        "requestContext": {"http": {"method": request.method, "path": request.path}},
        "headers": {k.title(): v for k, v in request.headers.items()},
        "body": base64.b64encode(body).decode() if base64_body else body.decode(),
        "isBase64Encoded": base64_body,
    }
    if request.query:
        event["queryStringParameters"] = dict(request.query)
    return event


def block_actions(
    user: str,
    action_id: str,
    value: str,
    *,
    username: str = "maria",
    response_url: str = "https://hooks.slack.com/actions/T0001/1/abc",
) -> dict[str, Any]:
    """Slack's ``block_actions`` payload for a press of the button ``action_id`` whose value
    is ``value`` (the fields CostGuard reads, and the ones around them Slack sends)."""
    return {
        "type": "block_actions",
        "user": {"id": user, "username": username, "name": username, "team_id": "T0001"},
        "api_app_id": "A0COSTGUARD",
        "team": {"id": "T0001", "domain": "example"},
        "container": {"type": "message", "channel_id": "C0ALERTS", "is_ephemeral": False},
        "channel": {"id": "C0ALERTS", "name": "costguard"},
        "trigger_id": "1.2.3",
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "costguard-answers",
                "value": value,
                "action_ts": "1763640000.000100",
            }
        ],
    }


def slack_post(secret: bytes, payload: Mapping[str, Any], at: datetime) -> HttpRequest:
    """The interactivity POST Slack sends at ``at``: a form with the JSON ``payload``,
    signed with the app's signing secret (v0, HMAC-SHA256 over ``v0:timestamp:body``)."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    timestamp = str(int(at.timestamp()))
    return HttpRequest(
        "POST",
        "/slack",
        {
            "content-type": "application/x-www-form-urlencoded",
            "x-slack-request-timestamp": timestamp,
            "x-slack-signature": slack_signature(secret, timestamp, body),
        },
        body,
    )


def link_get(token: str) -> HttpRequest:
    """A mail client (or a link scanner) opening an answer link."""
    return HttpRequest("GET", "/answer", {}, b"", {"t": token})


def confirm_form(page: str) -> dict[str, str]:
    """The hidden fields of a confirmation page's form (the link token, its CSRF token)."""
    fields = re.findall(r'<input type=hidden name=(\w+) value="([^"]*)"', page)
    return {name: html.unescape(value) for name, value in fields}


def link_post(form: Mapping[str, str]) -> HttpRequest:
    """The confirmation page's form, posted."""
    return HttpRequest(
        "POST",
        "/answer",
        {"content-type": "application/x-www-form-urlencoded"},
        urlencode(dict(form)).encode(),
    )
