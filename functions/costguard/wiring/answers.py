"""The answer endpoint's desk, composed from the deployment's variables: its secrets (Secrets
Manager), the ledger (replayed requests, used links), where accepted answers go (the guards'
own Lambdas) and Slack's Web API (the Exempt… dialog)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from costguard.adapters.answer_queue import LambdaAnswerQueue
from costguard.adapters.dynamodb import DynamoDbLedger
from costguard.adapters.secrets import NamedSecrets
from costguard.adapters.slack import SLACK_API_ORIGIN, SLACK_WEBHOOK_ORIGIN, SlackWebApi
from costguard.env import Env
from costguard.services.answers import AnswerDesk, DeskSettings

if TYPE_CHECKING:
    from costguard.services.answers import AnswerQueue


def answer_desk(
    environ: Mapping[str, str],
    session: Any,
    *,
    queue: AnswerQueue | None = None,
    slack_api_origin: str | None = None,
    slack_webhook_origin: str | None = None,
) -> AnswerDesk:
    """The desk on the deployed parts. ``queue``: where accepted answers go, the guards'
    Lambdas (``COSTGUARD_GUARD_FUNCTIONS``) unless given. The Slack origins are Slack's own;
    only tests and the demo point them at the stand-in."""
    region = session.region_name or environ.get("AWS_REGION", "us-east-1")
    admins = frozenset(
        a.strip() for a in environ.get(Env.ANSWER_ADMINS, "").split(",") if a.strip()
    )
    if queue is None:
        queue = LambdaAnswerQueue(
            session.client("lambda", region_name=region),
            json.loads(environ[Env.GUARD_FUNCTIONS]),
            region,
        )
    return AnswerDesk(
        NamedSecrets(
            environ[Env.SLACK_SIGNING_SECRET],
            environ[Env.LINK_SECRET],
            environ.get(Env.SLACK_BOT_TOKEN, ""),
        ),
        DynamoDbLedger(session.client("dynamodb", region_name=region), environ[Env.TABLE_NAME]),
        queue,
        DeskSettings(environ.get(Env.SCOPE, ""), admins, environ.get(Env.TIME_ZONE) or "UTC"),
        SlackWebApi(
            api_origin=slack_api_origin or SLACK_API_ORIGIN,
            webhook_origin=slack_webhook_origin or SLACK_WEBHOOK_ORIGIN,
        ),
    )
