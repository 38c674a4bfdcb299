"""The weekly price-refresh Lambda: Price List API -> merge -> a new stored catalog version.

Thin: it builds the refresh from settings and clients and runs it. A region that could
not be read (throttling that outlasted the retries, a denied call) leaves that region as
it was; the invocation then fails after storing what was read, so that its retries and
its dead-letter queue and alarm see it.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from costguard import events
from costguard.events import EventTimeError, ScheduledEvent, scheduled_now
from costguard.telemetry import Metrics as M

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.services.price_refresh import PriceRefresh, RefreshOutcome

logger = Logger(service=M.REFRESH_SERVICE)


class RefreshEvent(ScheduledEvent):
    """What the schedule sends: ``{"time": <scheduled time>}``."""


class RefreshIncompleteError(RuntimeError):
    """Some regions could not be read; what was read is stored, the rest is unchanged."""


def run(refresh: PriceRefresh, regions: tuple[str, ...], now: datetime) -> RefreshOutcome:
    outcome = refresh.run(regions, now)
    summary = outcome.summary()
    for line in summary["held_for_review"]:
        logger.warning("price held for review", extra={"detail": line})
    for line in summary["rejected_answers"]:
        logger.warning("price list answer not taken as a price", extra={"detail": line})
    logger.info("price refresh complete", extra=summary)
    failed = summary["failed_regions"]
    if failed:
        raise RefreshIncompleteError(
            "; ".join(f"{region}: {why}" for region, why in sorted(failed.items()))
        )
    return outcome


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    from costguard.settings import Settings
    from costguard.wiring.refresh import build_refresh

    settings = Settings.from_env(os.environ)
    try:
        now = scheduled_now(RefreshEvent, event, events.CLOCK())
    except EventTimeError as exc:
        logger.error("refresh refused: implausible event time", extra={"reason": str(exc)})
        return {"refused": str(exc)}
    refresh = build_refresh(settings, boto3.Session(), progress=logger.info)
    outcome = run(refresh, settings.regions, now)
    return outcome.summary()
