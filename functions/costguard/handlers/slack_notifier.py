"""The Slack notifier Lambda, subscribed to the alert topic (protocol ``lambda``).

Each SNS record carries the machine JSON of one alert; it is rendered as Block Kit
(every user string escaped, Slack's limits respected) and posted to the webhook whose
URL is in Secrets Manager (read through Powertools Parameters, cached 5 minutes).

What happens to each record:

- not an SNS record, or not a ``costguard.alert/v1`` document (another publisher, a
  malformed message): logged with one error line for the whole event and skipped. It
  would fail the same way on every retry, so it never fails the invocation;
- no webhook configured (the secret still holds the stack's random placeholder, or is
  empty): nothing is posted, a warning is logged once per container, and the summary
  says ``skipped: no webhook configured``. E-mail-only and Amazon Q deployments need
  no webhook;
- a secret that looks like a URL but is not a Slack webhook: the invocation fails with
  a clear error (and never the value), so the dead-letter queue keeps the alerts until
  the secret is fixed;
- a post that fails: the other records are still posted, then the invocation fails
  with one error listing the alerts that could not be posted.

SNS invokes a Lambda subscriber with exactly one record per event, so a retry re-posts
only the alert that failed. With several records in one event (a hand-made test event),
the retry of a partly failed event would post the successful ones again: records are
independent, nothing here is durable, and a duplicate Slack message beats a lost alert.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from costguard.domain.text import plural
from costguard.env import Env

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.adapters.slack import SlackWebhook
    from costguard.rendering import ButtonSigner, MachineAlert

logger = Logger(service="costguard-slack")
#: Powertools caches the secret this long in a warm container.
SECRET_MAX_AGE_S = 300
NOT_CONFIGURED = "skipped: no webhook configured"
_warned_not_configured = False


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    """A record that is not a CostGuard alert, and why (never its content)."""

    record: int
    message_id: str | None
    reason: str


def build_webhook(
    secret_name: str,
    *,
    secrets: SecretsProvider | None = None,
    origin: str | None = None,
) -> SlackWebhook:
    """The webhook, reading its URL with Powertools Parameters (``max_age=300``).

    Tests pass their own ``SecretsProvider`` (on a moto client) and a loopback ``origin``.
    """
    from costguard.adapters.slack import SLACK_WEBHOOK_ORIGIN, SlackWebhook

    def read() -> str | bytes | None:
        if secrets is not None:
            value = secrets.get(secret_name, max_age=SECRET_MAX_AGE_S)
        else:
            from aws_lambda_powertools.utilities.parameters import get_secret

            value = get_secret(secret_name, max_age=SECRET_MAX_AGE_S)
        return value if isinstance(value, str | bytes) else None

    return SlackWebhook(read, origin=origin or SLACK_WEBHOOK_ORIGIN)


def _validation_summary(exc: Exception) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in exc.errors()[:3]
        )
    return type(exc).__name__


def parse_record(index: int, raw: object) -> MachineAlert | SkippedRecord:
    """One SNS record as a CostGuard alert, or why it is not one."""
    from aws_lambda_powertools.utilities.parser import parse
    from aws_lambda_powertools.utilities.parser.exceptions import InvalidModelTypeError
    from aws_lambda_powertools.utilities.parser.models import SnsRecordModel

    from costguard.rendering import MACHINE_SCHEMA, MachineAlert

    if not isinstance(raw, dict):
        return SkippedRecord(index, None, "not an SNS record")
    try:
        record = parse(event=raw, model=SnsRecordModel)
    except (ValueError, InvalidModelTypeError) as exc:
        return SkippedRecord(index, None, f"not an SNS record ({_validation_summary(exc)})")
    message_id = record.Sns.MessageId
    message = record.Sns.Message
    try:
        document = json.loads(message) if isinstance(message, str) else None
    except ValueError:
        document = None
    if not isinstance(document, dict) or document.get("schema") != MACHINE_SCHEMA:
        schema = document.get("schema") if isinstance(document, dict) else None
        found = f"schema {str(schema)[:40]!r}" if schema is not None else "no schema"
        return SkippedRecord(index, message_id, f"not a {MACHINE_SCHEMA} document ({found})")
    try:
        return MachineAlert.model_validate(document)
    except ValueError as exc:
        return SkippedRecord(
            index, message_id, f"malformed {MACHINE_SCHEMA} ({_validation_summary(exc)})"
        )


def _note_not_configured(alerts: int) -> None:
    global _warned_not_configured  # noqa: PLW0603 - one warning per warm container
    log = logger.info if _warned_not_configured else logger.warning
    log(
        "no Slack webhook is configured (the secret holds no URL); alerts are not posted to Slack",
        extra={"alerts": alerts},
    )
    _warned_not_configured = True


def button_signer(secret_name: str) -> ButtonSigner:
    """Signs action warnings' answer buttons with the Slack app's signing secret (read
    through Powertools Parameters, cached like the webhook's)."""
    from aws_lambda_powertools.utilities.parameters import get_secret

    from costguard.domain.signatures import ButtonClaims, sign_button, signing_key

    def sign(guard: str, resource: str, owners: tuple[str, ...], deadline: str = "") -> str:
        key = signing_key(get_secret(secret_name, max_age=SECRET_MAX_AGE_S))
        return sign_button(key, ButtonClaims(guard, resource, owners, deadline))

    return sign


def process(
    event: object, webhook: SlackWebhook, sign: ButtonSigner | None = None
) -> dict[str, Any]:
    """Post every CostGuard alert in the event; raise at the end if any post failed.
    ``sign``: action warnings carry their answer buttons, signed with it."""
    from costguard.adapters.slack import SlackDeliveryError
    from costguard.rendering import slack_blocks

    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list):
        logger.error("not an SNS event: no Records list; nothing to post")
        return {"status": "skipped: not an SNS event", "posted": [], "skipped": []}
    alerts: list[MachineAlert] = []
    skipped: list[SkippedRecord] = []
    for index, raw in enumerate(records):
        parsed = parse_record(index, raw)
        (skipped if isinstance(parsed, SkippedRecord) else alerts).append(parsed)  # type: ignore[arg-type]
    if skipped:
        logger.error(
            "skipped SNS records that are not CostGuard alerts",
            extra={
                "skipped_count": len(skipped),
                "records": len(records),
                "skipped": [asdict(s) for s in skipped],
            },
        )
    summary: dict[str, Any] = {
        "status": "posted",
        "posted": [],
        "skipped": [asdict(s) for s in skipped],
    }
    if not alerts:
        return summary
    target = webhook.target()
    if target is None:
        _note_not_configured(len(alerts))
        return {**summary, "status": NOT_CONFIGURED}
    failed: list[str] = []
    for alert in alerts:
        try:
            attempts = webhook.post(slack_blocks(alert, sign), target)
        except SlackDeliveryError as exc:
            logger.error(
                "could not post to Slack", extra={"alert_id": alert.alert_id, "error": str(exc)}
            )
            failed.append(f"{alert.alert_id}: {exc}")
            continue
        summary["posted"].append(alert.alert_id)
        logger.info("posted to Slack", extra={"alert_id": alert.alert_id, "attempts": attempts})
    if failed:
        raise SlackDeliveryError(
            f"{len(failed)} of {plural(len(alerts), 'alert')} not posted to Slack: "
            + " | ".join(failed)
        )
    return summary


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    signing = os.environ.get(Env.SLACK_SIGNING_SECRET)
    return process(
        event,
        build_webhook(os.environ[Env.SLACK_SECRET_NAME]),
        button_signer(signing) if signing else None,
    )
