"""The answer endpoint (a Lambda Function URL): Slack's button presses and dialogs, and
e-mail links' confirmation pages, checked by :class:`~costguard.services.answers.AnswerDesk`
and handed to the answered guard's own Lambda. It answers within Slack's 3 seconds: the
checks are local, and the hand-off is one asynchronous invoke.

Every refusal is logged with its reason (never a secret, a token or a signature) and
answered with its status; nothing is acted on here.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from costguard import events
from costguard.env import Env

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.services.answers import AnswerDesk, HttpAnswer, HttpRequest

logger = Logger(service="costguard-answers")
#: Secrets are re-read at most this often by a warm container.
SECRET_MAX_AGE_S = 300


def http_request(event: Mapping[str, Any]) -> HttpRequest:
    """A Function URL event (payload format 2.0) as the desk reads it."""
    from costguard.services.answers import HttpRequest

    http = (event.get("requestContext") or {}).get("http") or {}
    body = event.get("body") or ""
    raw = body.encode("utf-8") if isinstance(body, str) else b""
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(raw, validate=True)
        except ValueError:
            raw = b"\xff"  # not base64: the desk refuses it as a malformed body
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    query = {str(k): str(v) for k, v in (event.get("queryStringParameters") or {}).items()}
    return HttpRequest(
        str(http.get("method", "")),
        str(event.get("rawPath") or http.get("path") or "/"),
        headers,
        raw,
        query,
    )


def response(answer: HttpAnswer) -> dict[str, Any]:
    return {
        "statusCode": answer.status,
        "headers": {
            "Content-Type": answer.content_type,
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        },
        "body": answer.body,
    }


def process(
    event: Mapping[str, Any], desk: AnswerDesk, now: datetime | None = None
) -> dict[str, Any]:
    request = http_request(event)
    answer = desk.handle(request, now or events.CLOCK())
    where = {"method": request.method, "path": request.path[:100], "status": answer.status}
    if answer.refused is not None:
        logger.warning("answer refused", extra={**where, "reason": answer.refused[:300]})
    elif answer.accepted is not None:
        a = answer.accepted
        logger.info(
            "answer accepted",
            extra={
                **where,
                "guard": a.guard,
                "resource": a.resource,
                "answer": a.answer.value,
                "by": str(a.answerer),
            },
        )
    return response(answer)


class _Secrets:
    """The Slack signing secret, the Slack bot token and the link secret, read through
    Powertools (cached per container)."""

    def __init__(self, slack: str, links: str, bot: str = "") -> None:
        self._names = (slack, links, bot)

    def _read(self, name: str) -> bytes:
        from costguard.adapters.secrets import secret_bytes

        return secret_bytes(name, SECRET_MAX_AGE_S)

    def slack_signing_secret(self) -> bytes:
        from costguard.domain.signatures import signing_key

        return signing_key(self._read(self._names[0]))

    def link_secret(self) -> bytes:
        return self._read(self._names[1])

    def slack_bot_token(self) -> bytes:
        """Empty when the stack names no bot-token secret (the dialog then says what to do
        instead)."""
        return self._read(self._names[2]) if self._names[2] else b""


def build_desk(
    environ: Mapping[str, str],
    session: Any,
    *,
    slack_api_origin: str | None = None,
    slack_webhook_origin: str | None = None,
) -> AnswerDesk:
    """The desk on the deployed parts: the ledger (replays, used links), the guards' Lambdas,
    Slack's Web API (the Exempt… dialog). The Slack origins are Slack's own; only tests and
    the demo point them at the stand-in."""
    from costguard.adapters.answer_queue import LambdaAnswerQueue
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.adapters.slack import SLACK_API_ORIGIN, SLACK_WEBHOOK_ORIGIN, SlackWebApi
    from costguard.services.answers import AnswerDesk, DeskSettings

    region = session.region_name or environ.get("AWS_REGION", "us-east-1")
    admins = frozenset(
        a.strip() for a in environ.get(Env.ANSWER_ADMINS, "").split(",") if a.strip()
    )
    return AnswerDesk(
        _Secrets(
            environ[Env.SLACK_SIGNING_SECRET],
            environ[Env.LINK_SECRET],
            environ.get(Env.SLACK_BOT_TOKEN, ""),
        ),
        DynamoDbLedger(session.client("dynamodb", region_name=region), environ[Env.TABLE_NAME]),
        LambdaAnswerQueue(
            session.client("lambda", region_name=region),
            json.loads(environ[Env.GUARD_FUNCTIONS]),
            region,
        ),
        DeskSettings(environ.get(Env.SCOPE, ""), admins, environ.get(Env.TIME_ZONE) or "UTC"),
        SlackWebApi(
            api_origin=slack_api_origin or SLACK_API_ORIGIN,
            webhook_origin=slack_webhook_origin or SLACK_WEBHOOK_ORIGIN,
        ),
    )


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    return process(event, build_desk(os.environ, boto3.Session()))
