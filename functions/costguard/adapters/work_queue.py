"""The hub's work queue: SQS FIFO, one message per work item.

- ``MessageGroupId`` is the account (``account#n`` for a per-account cap above 1), for
  every kind of item: FIFO delivers one group's messages one at a time, so at most
  ``cap`` of one account's items (scans, probes, region reads) run at once, however many
  consumers run. That is how one account's API rate limits are respected; the consumer's
  ``MaximumConcurrency`` caps the whole.
- ``MessageDeduplicationId`` is ``time/account/region`` for a scan (``…/probe`` and
  ``time/account/regions`` for the others): a retried fan-out enqueues nothing twice
  within SQS's five minutes, and the ledger and directory refuse anything later.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from costguard.domain.calendar import require_utc
from costguard.domain.directory import Work, WorkKind
from costguard.domain.org import Slice
from costguard.domain.org_act import GuardRun

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

#: SendMessageBatch takes at most 10 entries.
SEND_BATCH = 10
#: What :class:`SqsWorkQueue` calls (the fan-out's only SQS permission).
QUEUE_ACTIONS = ("sqs:SendMessage",)


class WorkItem(BaseModel):
    """One queue message: ``kind`` (default ``scan``) for ``account`` in ``region`` at ``time``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time: datetime
    account: str
    region: str
    kind: Literal["scan", "probe", "regions"] = "scan"

    @field_validator("time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return require_utc(value)

    @property
    def slice(self) -> Slice:
        return Slice(self.account, self.region)

    def dedupe_id(self) -> str:
        base = f"{self.time:%Y%m%dT%H%M%SZ}/{self.account}"
        if self.kind == "regions":
            return f"{base}/regions"
        return f"{base}/{self.region}" + ("" if self.kind == "scan" else f"/{self.kind}")

    def work(self) -> Work:
        return Work(self.time, WorkKind(self.kind), self.slice)

    @classmethod
    def of(cls, work: Work) -> WorkItem:
        return cls(
            time=work.tick,
            account=work.slice.account,
            region=work.slice.region,
            kind=work.kind.value,
        )


def message_group(s: Slice, per_account_cap: int) -> str:
    """The FIFO group of a slice: ``per_account_cap`` groups per account, regions spread
    over them by a stable hash, so one account never has more items in flight."""
    if per_account_cap <= 1:
        return s.account
    return f"{s.account}#{zlib.crc32(s.region.encode()) % per_account_cap}"


class WorkQueueError(RuntimeError):
    """SQS refused some entries of a batch (the fan-out fails, and its retry re-sends)."""


class _FifoQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._sqs = client
        self._url = queue_url

    def _send(self, messages: Sequence[WorkItem | GuardItem], groups: list[str], what: str) -> int:
        """Each message in its FIFO group, ``SEND_BATCH`` a call; a refused entry fails it."""
        for start in range(0, len(messages), SEND_BATCH):
            batch = messages[start : start + SEND_BATCH]
            entries: list[SendMessageBatchRequestEntryTypeDef] = [
                {
                    "Id": str(i),
                    "MessageBody": m.model_dump_json(),
                    "MessageGroupId": groups[start + i],
                    "MessageDeduplicationId": m.dedupe_id(),
                }
                for i, m in enumerate(batch)
            ]
            response = self._sqs.send_message_batch(QueueUrl=self._url, Entries=entries)
            if response.get("Failed"):
                raise WorkQueueError(
                    f"SQS refused {len(response['Failed'])} {what}: {response['Failed'][:3]}"
                )
        return len(messages)


class SqsWorkQueue(_FifoQueue):
    """:class:`costguard.services.fanout.WorkQueue` on an SQS FIFO queue."""

    def __init__(self, client: SQSClient, queue_url: str, per_account_cap: int = 1) -> None:
        super().__init__(client, queue_url)
        self._cap = per_account_cap

    def send(self, items: Sequence[Work]) -> int:
        messages = [WorkItem.of(w) for w in items]
        groups = [message_group(m.slice, self._cap) for m in messages]
        return self._send(messages, groups, "work items")


# -- the guards' queue -----------------------------------------------------------------------


class GuardItem(BaseModel):
    """One act-queue message: ``guard`` in ``account`` over ``regions``, planned at ``time``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time: datetime
    guard: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$")
    account: str
    regions: tuple[str, ...] = Field(min_length=1, max_length=64)

    @field_validator("time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return require_utc(value)

    @field_validator("regions")
    @classmethod
    def _regions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from costguard.config_spec import valid_regions  # noqa: PLC0415 - the spec's check

        return valid_regions(value)

    def run(self) -> GuardRun:
        return GuardRun(self.time, self.guard, self.account, self.regions)

    @classmethod
    def of(cls, run: GuardRun) -> GuardItem:
        return cls(time=run.tick, guard=run.guard, account=run.account, regions=run.regions)

    def dedupe_id(self) -> str:
        return f"{self.time:%Y%m%dT%H%M%SZ}/{self.account}/act/{self.guard}"


class SqsGuardQueue(_FifoQueue):
    """:class:`costguard.services.org_act.GuardQueue` on the act FIFO queue.

    One message group per account and guard: one run of a guard in an account at a time,
    and at most one per guard (three) in an account whatever the consumers' concurrency
    (its API rate limits). Not one group per account: FIFO holds a group's later messages
    while one is retried, so a run failing on one resource would hold the account's other
    guards for hours. The executor's claims make any overlap safe."""

    def send(self, runs: Sequence[GuardRun]) -> int:
        messages = [GuardItem.of(r) for r in runs]
        groups = [f"{m.account}#{m.guard}" for m in messages]
        return self._send(messages, groups, "guard runs")
