"""The answer endpoint (a Lambda Function URL): Slack's button presses and dialogs, and
e-mail links' confirmation pages, checked by :class:`~costguard.services.answers.AnswerDesk`
and handed to the answered guard's own Lambda. It answers within Slack's 3 seconds: the
checks are local, and the hand-off is one asynchronous invoke.

Every refusal is logged with its reason (never a secret, a token or a signature) and
answered with its status; nothing is acted on here.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from costguard import events

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.services.answers import AnswerDesk, HttpAnswer, HttpRequest

logger = Logger(service="costguard-answers")


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


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    from costguard.wiring.answers import answer_desk

    return process(event, answer_desk(os.environ, boto3.Session()))
