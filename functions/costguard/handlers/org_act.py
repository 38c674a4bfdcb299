"""The Organization hub's act consumer: one guard in one member account per message.

Its graph (:func:`costguard.wiring.org.build_guard_work`) keeps claims, audit trail,
sweep state and findings in the hub's ledger under the account's own scope, and sends
warnings to the hub's topic; it acts in the member account through
``costguard-member-act``. ``dryRun`` is the deployment's, as in one account.

The act queue is FIFO with one message group per account: one guard at a time in an
account. Its event source hands one message per invocation, so a run has the Lambda's
whole time (the stale-object sweep stops itself before the timeout and resumes).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)

from costguard import events

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.adapters.assume import MemberClients
    from costguard.ports import TimeLeft
    from costguard.services.org_act import GuardWork

logger = Logger(service="costguard-org-act")


def consume(
    event: dict[str, Any], work: GuardWork, now: datetime, time_left: TimeLeft | None = None
) -> dict[str, Any]:
    """Each record is one guard run; a failed one (the account cannot be entered, an
    action failed) is reported back alone, retried by SQS and dead-lettered after the
    queue's ``maxReceiveCount``. Actions already taken stay taken: the retry's executor
    finds them claimed and done."""
    from costguard.adapters.work_queue import GuardItem
    from costguard.run_log import log_run
    from costguard.services.executor import ActionsFailedError, failed_message

    def record_handler(record: SQSRecord) -> None:
        item = GuardItem.model_validate_json(record.body)
        where = {"account": item.account, "time": item.time.isoformat()}
        try:
            outcome = work.run(item.run(), now, time_left)
        except Exception as exc:
            logger.warning(
                "guard run failed",
                extra={
                    **where,
                    "guard": item.guard,
                    "error": f"{type(exc).__name__}: {exc}"[:500],
                    "receive_count": record.attributes.approximate_receive_count,
                },
            )
            raise
        if outcome.report is None or outcome.guard is None:
            logger.warning("guard run dropped", extra={**where, "why": outcome.dropped})
            return
        log_run(outcome.guard, outcome.report, **where, scope=outcome.scope)
        if outcome.report.failures:
            raise ActionsFailedError(f"account {item.account}: {failed_message(outcome.report)}")

    # A failed run is reported back (and retried by SQS, then dead-lettered, which
    # alarms), not raised: with one run per invocation every failure would otherwise be
    # a failed invocation, and the Errors alarm would fire on each retried throttle.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return dict(process_partial_response(event, record_handler, processor))


#: Member credentials kept by a warm act consumer (see MemberClients).
_MEMBERS: list[MemberClients] = []


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    from costguard.settings import Settings
    from costguard.wiring.org import act_members, build_guard_work

    settings = Settings.from_env(os.environ)
    session = boto3.Session()
    if not _MEMBERS:
        _MEMBERS.append(act_members(session))
    work = build_guard_work(settings, session, members=_MEMBERS[0])
    return consume(event, work, events.CLOCK(), events.LambdaTimeLeft(context))
