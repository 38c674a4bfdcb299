"""The Organization hub's Lambdas: the fan-out (one message per account-region per time)
and the queue consumer (one slice per message, partial-batch failures).

The queue is SQS FIFO: ``MessageGroupId`` is the account (``account#n`` for a cap of n), so
at most ``n`` of one account's slices run at once, whatever the consumers' concurrency;
``MessageDeduplicationId`` is ``time/account/region``, so a retried fan-out enqueues
nothing twice within SQS's five minutes, and the ledger refuses anything later.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from pydantic import BaseModel, ConfigDict, field_validator

from costguard.domain.calendar import require_utc
from costguard.domain.org import Slice
from costguard.names import OrgRoles

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.services.org import SliceBook, SliceResult, SliceWork
    from costguard.settings import Settings

logger = Logger(service="costguard-org")

#: The member role the consumers assume (read-only), overridable for a custom name.
MEMBER_ROLE_ENV = "COSTGUARD_MEMBER_ROLE"
#: At most this many of one account's slices at once (its API rate limits are per account).
PER_ACCOUNT_CAP_ENV = "COSTGUARD_PER_ACCOUNT_CONCURRENCY"
SEND_BATCH = 10


class WorkItem(BaseModel):
    """One queue message: scan ``account`` in ``region`` as of ``time``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time: datetime
    account: str
    region: str

    @field_validator("time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return require_utc(value)

    @property
    def slice(self) -> Slice:
        return Slice(self.account, self.region)

    def dedupe_id(self) -> str:
        return f"{self.time:%Y%m%dT%H%M%SZ}/{self.account}/{self.region}"


def message_group(s: Slice, per_account_cap: int) -> str:
    """The FIFO group of a slice: ``per_account_cap`` groups per account, regions spread
    over them by a stable hash, so one account never has more slices in flight."""
    if per_account_cap <= 1:
        return s.account
    return f"{s.account}#{zlib.crc32(s.region.encode()) % per_account_cap}"


def plan_and_enqueue(
    book: SliceBook,
    sqs: Any,
    queue_url: str,
    tick: datetime,
    slices: Sequence[Slice],
    deadline: timedelta,
    per_account_cap: int = 1,
) -> int:
    """The fan-out: plan the time (once), then one message per slice (deduplicated)."""
    book.plan(tick, slices, tick + deadline)
    items = [WorkItem(time=tick, account=s.account, region=s.region) for s in slices]
    sent = 0
    for start in range(0, len(items), SEND_BATCH):
        batch = items[start : start + SEND_BATCH]
        response = sqs.send_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {
                    "Id": str(i),
                    "MessageBody": item.model_dump_json(),
                    "MessageGroupId": message_group(item.slice, per_account_cap),
                    "MessageDeduplicationId": item.dedupe_id(),
                }
                for i, item in enumerate(batch)
            ],
        )
        if response.get("Failed"):
            raise RuntimeError(
                f"SQS refused {len(response['Failed'])} work items: {response['Failed'][:3]}"
            )
        sent += len(batch)
    return sent


def consume(event: dict[str, Any], work: SliceWork, now: datetime) -> dict[str, Any]:
    """Process an SQS batch: each record is one slice; a failed one is reported back alone
    (``batchItemFailures``), retried by SQS and dead-lettered after the queue's
    ``maxReceiveCount``. ``skip_group_on_error``: only the failed account's later
    messages wait, never another account's."""
    results: list[SliceResult] = []

    def record_handler(record: SQSRecord) -> None:
        item = WorkItem.model_validate_json(record.body)
        result = work.run(item.time, item.slice, now)
        results.append(result)
        logger.info(
            "slice done",
            extra={
                "account": item.account,
                "region": item.region,
                "time": item.time.isoformat(),
                "ledger": result.ledger.value,
                "newly_done": result.newly_done,
                "resources": result.resources,
                "aggregated": result.aggregated is not None,
            },
        )

    processor = SqsFifoPartialProcessor(skip_group_on_error=True)
    response: dict[str, Any] = dict(process_partial_response(event, record_handler, processor))
    return response


def build_slice_work(
    settings: Settings, session: Any, *, role_name: str | None = None
) -> SliceWork:
    """The consumer's graph: the hub's ledger and catalog, each slice's clients assumed."""
    from costguard.adapters.assume import AccountAccessError, member_clients
    from costguard.adapters.aws import ClientFactory
    from costguard.adapters.slices import DynamoDbSliceBook, InMemorySliceBook
    from costguard.domain.org import slice_scope
    from costguard.services.org import Aggregation, OrgSettings, SliceWork, alert_after
    from costguard.wiring import (
        BundledCatalog,
        build_alert_service,
        build_ledger,
        build_scan_service,
        catalog_reader,
    )

    hub = ClientFactory(session, account=settings.scope)
    ledger = build_ledger(settings, hub)
    book: SliceBook
    if settings.table_name:
        region = session.region_name or settings.regions[0]
        book = DynamoDbSliceBook(hub.dynamodb(region), settings.table_name, settings.scope)
    else:
        book = InMemorySliceBook()
    catalog, in_use = (catalog_reader(settings, hub) or BundledCatalog()).read()
    role = role_name or os.environ.get(MEMBER_ROLE_ENV) or OrgRoles.MEMBER_READ

    def scan_for(s: Slice) -> Any:
        clients = member_clients(session, s, role)
        slice_settings = settings.model_copy(
            update={"scope": slice_scope(settings.scope, s), "regions": (s.region,)}
        )
        return build_scan_service(
            slice_settings, clients, ledger=ledger, catalog=catalog, catalog_in_use=in_use
        )

    alerts = build_alert_service(settings, hub, ledger)
    aggregation = Aggregation(
        book,
        ledger,
        OrgSettings(
            scope=settings.scope,
            projects=settings.project_table(),
            warning_pct=settings.warning_pct,
        ),
        after=alert_after(alerts) if alerts else None,
    )
    return SliceWork(book, scan_for, aggregation, (AccountAccessError,))


@logger.inject_lambda_context
def consumer_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    import boto3

    from costguard.handlers import events
    from costguard.settings import Settings

    settings = Settings.from_env(os.environ)
    return consume(event, build_slice_work(settings, boto3.Session()), events.CLOCK())


def slices_of(accounts: Iterable[str], regions: Iterable[str]) -> list[Slice]:
    return [Slice(a, r) for a in dict.fromkeys(accounts) for r in dict.fromkeys(regions)]


def parse_accounts(text: str) -> list[str]:
    """``111111111111,222222222222`` (spaces and repeats allowed) -> checked account ids."""
    out = []
    for part in text.replace(" ", ",").split(","):
        if part:
            Slice(part, "us-east-1")  # validates the account id
            out.append(part)
    return list(dict.fromkeys(out))
