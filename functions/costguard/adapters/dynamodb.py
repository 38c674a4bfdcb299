"""The ledger on one DynamoDB table (``pk``/``sk`` strings, TTL attribute ``ttl``).

Every key is built from a bounded form: user text (project names, alert keys,
resource ids) enters a key only as ``key_part(text)``, a 32-character hash, and the
readable text is kept in an attribute. A 256-character CJK project name is 768
bytes of UTF-8 and nearly 2 KiB percent-encoded, over DynamoDB's 1,024-byte sort-key
limit; its hash is 32 bytes.

=============================================  ======================  ==========================
pk                                             sk                      what
=============================================  ======================  ==========================
``SCOPE#<scope>``                              ``WATERMARK``           last committed scan, snapshot size
``SCOPE#<scope>#MONTH#<YYYY-MM>``              ``TOTALS#<nn>``         month-to-date, by day and category, 32 shards
``SCOPE#<scope>#OBS``                          ``CHUNK#<nnnn>``        observation snapshot (zlib JSON)
``SCOPE#<scope>#FINDINGS#<YYYY-MM-DD>``        ``<code>#<hash>``       findings of the day (TTL 35 d)
``ONCE#<namespace>``                           ``<hash>``              claims and exactly-once records
``SCOPE#<scope>#AUDIT#<YYYY-MM>``              ``<time>#<event id>``   audit trail (kept)
``SCOPE#<scope>#AUDIT#<YYYY-MM>``              ``<time>#BATCH#<hash>`` a run's audit records (zlib JSON)
``SCOPE#<scope>#RATES``                        ``<hash>#<day>``        run-rate samples (TTL 3 d)
``SCOPE#<scope>#STATE``                        ``<name>``              small versioned documents
``SCOPE#<scope>#ALERTS#<YYYY-MM>``             ``<time>#<hash>``       alert log (TTL 400 d)
=============================================  ======================  ==========================

Exactly-once accrual: a scan's commit is **one** ``TransactWriteItems``: the
watermark's compare-and-set (from the watermark the scan started from, to a later
time), the month totals and the observation snapshot. Either all of it is written or
none of it, so no failure can leave spend added without the observations that say it
was added (which made the next scan count the interval again), and a late or
concurrent scan is refused instead of double-counted. The snapshot is compressed and
chunked: about 25 bytes per resource, so 100,000 resources fit one transaction.
"""

from __future__ import annotations

import hashlib
import json
import time
import unicodedata
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

from costguard.adapters.aws import chunks
from costguard.adapters.ddb import expression, from_item, items_of, pk_sk, to_item, written
from costguard.domain.calendar import month_start, next_month_start
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.spend import Observation, add_days
from costguard.domain.windows import between
from costguard.ports import AuditEvent, CommitOutcome, ProjectMonth, ScanCommit
from costguard.retry import exponential, retrying

#: The map key of unattributed spend; ``key_part`` yields only hex digits, so no project collides.
UNATTRIBUTED_KEY = "-"
TRANSACT_LIMIT = 100
#: DynamoDB refuses items over 400 KB; stay clear of it.
ITEM_BUDGET_BYTES = 350_000
#: Transactions are capped at 4 MB in all.
TRANSACT_BUDGET_BYTES = 3_800_000
OBSERVATIONS_PER_CHUNK = 4_000
BATCH_WRITE_LIMIT = 25
BATCH_GET_LIMIT = 100
#: Audit records packed into one item by ``audit_many`` (halved when one compresses
#: over the item budget).
AUDIT_EVENTS_PER_ITEM = 2_000
FINDING_TTL = timedelta(days=35)
RATE_TTL = timedelta(days=3)
ALERT_TTL = timedelta(days=400)
CLAIM_TTL = timedelta(days=400)

#: Claim states of the two-phase claim.
PENDING, SENT, RELEASED = "pending", "sent", "released"


class LedgerError(Exception):
    """The ledger table refused a write for a reason other than a lost race."""


def stamp(moment: datetime) -> str:
    """Fixed-width UTC ISO-8601, so that string order is time order in conditions."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def key_part(text: str) -> str:
    """A bounded, collision-resistant key for any text: 32 hex digits of SHA-256 (NFC)."""
    normal = unicodedata.normalize("NFC", text)
    return hashlib.sha256(normal.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def project_key(project: str | None) -> str:
    return UNATTRIBUTED_KEY if project is None else key_part(project)


#: Month totals are spread over this many items (see ``_totals_puts``).
TOTALS_SHARDS = 32


def totals_shard(key: str) -> int:
    return 0 if key == UNATTRIBUTED_KEY else int(key[:4], 16) % TOTALS_SHARDS


def _item_bytes(value: Any) -> int:
    """An upper bound of an item's stored size (binary values count as their length)."""
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, dict):
        return sum(len(str(k).encode()) + _item_bytes(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_item_bytes(v) for v in value)
    return len(str(value).encode("utf-8", "surrogatepass"))


#: A day's spend is kept to the micro-dollar: a month of days is then about 31 x 14 bytes
#: a project, and a totals shard (see ``_totals_puts``) holds hundreds of projects.
DAY_QUANTUM = Decimal("0.000001")


def _days_plus(stored: Mapping[str, Decimal], days: Mapping[int, Decimal]) -> dict[str, Decimal]:
    """A row's day map (keys ``"01"``..``"31"``) with ``days`` added, to the micro-dollar."""
    out = dict(stored)
    for day, usd in days.items():
        key = f"{day:02d}"
        out[key] = (out.get(key, Decimal(0)) + usd).quantize(DAY_QUANTUM)
    return out


def _epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def encode_observations(observations: Sequence[Observation]) -> list[bytes]:
    """The snapshot as compressed JSON chunks, each well under the item size limit."""
    blobs = []
    ordered = sorted(observations, key=lambda o: o.key)
    for part in chunks(ordered, OBSERVATIONS_PER_CHUNK):
        rows = [
            [o.key, o.project, str(o.usd_per_hour), stamp(o.observed_at), stamp(o.first_seen_at)]
            for o in part
        ]
        blob = zlib.compress(
            json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode(
                "utf-8", "surrogatepass"
            ),
            6,
        )
        if len(blob) > ITEM_BUDGET_BYTES:
            raise LedgerError(f"an observation chunk compressed to {len(blob)} bytes")
        blobs.append(blob)
    return blobs


def decode_observations(blob: bytes) -> list[Observation]:
    rows = json.loads(zlib.decompress(blob).decode("utf-8", "surrogatepass"))
    return [
        Observation(key, project, Decimal(rate), parse_stamp(seen), parse_stamp(first))
        for key, project, rate, seen, first in rows
    ]


def _audit_item(event: AuditEvent) -> dict[str, Any]:
    return {
        "pk": f"SCOPE#{event.scope}#AUDIT#{event.at.astimezone(UTC):%Y-%m}",
        "sk": f"{stamp(event.at)}#{key_part(event.event_id)}",
        "event_id": event.event_id,
        "action": event.action,
        "resource": event.resource,
        "outcome": event.outcome,
        "details": json.dumps(dict(event.details), default=str, sort_keys=True),
    }


def _packed_audit_items(pk: str, events: list[AuditEvent]) -> list[dict[str, Any]]:
    """Audit records as compressed items under the item budget (halved until they fit)."""
    rows = [
        [stamp(e.at), e.event_id, e.action, e.resource, e.outcome, dict(e.details)] for e in events
    ]
    blob = zlib.compress(
        json.dumps(rows, default=str, sort_keys=True, ensure_ascii=False).encode("utf-8"), 6
    )
    if len(blob) > ITEM_BUDGET_BYTES and len(events) > 1:
        middle = len(events) // 2
        return _packed_audit_items(pk, events[:middle]) + _packed_audit_items(pk, events[middle:])
    if len(blob) > ITEM_BUDGET_BYTES:
        raise LedgerError(
            f"an audit record of {events[0].resource} compressed to {len(blob)} bytes"
        )
    digest = key_part("\n".join(f"{stamp(e.at)}#{e.event_id}" for e in events))
    sk = f"{stamp(events[0].at)}#BATCH#{digest}"
    return [{"pk": pk, "sk": sk, "count": len(events), "events": blob}]


class _Unprocessed(Exception):
    """DynamoDB left part of a batch unprocessed (throttled partitions)."""


def _until_processed(
    send: Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]],
    request: dict[str, Any],
    what: str,
    attempts: int = 8,
    sleep: Callable[[float], None] = time.sleep,
) -> list[dict[str, Any]]:
    """A batch call and its leftovers, tried again with backoff until DynamoDB has
    processed all of it (``UnprocessedItems``/``UnprocessedKeys``: throttled partitions).
    ``send`` returns (the answer's responses, what is left); the answers are returned."""
    answers: list[dict[str, Any]] = []
    pending = request

    def once() -> list[dict[str, Any]]:
        nonlocal pending
        answer, pending = send(pending)
        answers.append(answer)
        if pending:
            raise _Unprocessed
        return answers

    backoff = exponential(0.05, 2.0)
    try:
        return retrying(
            once,
            attempts=attempts,
            delay=lambda e, n: backoff(n) if isinstance(e, _Unprocessed) else None,
            sleep=sleep,
        )
    except _Unprocessed:
        left = sum(
            len(v) if isinstance(v, list) else len(v.get("Keys", [])) for v in pending.values()
        )
        raise LedgerError(f"DynamoDB left {left} {what} unprocessed") from None


class DynamoDbLedger:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._ddb = client
        self._table = table_name

    # -- reads -------------------------------------------------------------------

    def _query(self, pk: str) -> Iterator[dict[str, Any]]:
        return items_of(
            self._ddb.get_paginator("query").paginate(
                TableName=self._table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues=to_item({":pk": pk}),
                ConsistentRead=True,
            )
        )

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        item = self._ddb.get_item(TableName=self._table, Key=pk_sk(pk, sk), ConsistentRead=True)
        return from_item(item["Item"]) if "Item" in item else None

    def _watermark_item(self, scope: str) -> dict[str, Any] | None:
        return self._get(f"SCOPE#{scope}", "WATERMARK")

    def watermark(self, scope: str) -> datetime | None:
        item = self._watermark_item(scope)
        return parse_stamp(item["observed_at"]) if item and "observed_at" in item else None

    def observations(self, scope: str) -> dict[str, Observation]:
        """The snapshot of the last committed scan; re-read if a commit lands meanwhile."""
        for _ in range(5):
            mark = self._watermark_item(scope)
            if not mark or "obs_chunks" not in mark:
                return {}
            wanted, scan = int(mark["obs_chunks"]), mark["observed_at"]
            found: dict[int, list[Observation]] = {}
            for item in self._query(f"SCOPE#{scope}#OBS"):
                index = int(item["sk"].removeprefix("CHUNK#"))
                if index < wanted and item.get("scan") == scan:
                    found[index] = decode_observations(item["data"])
            if len(found) == wanted:
                return {o.key: o for i in sorted(found) for o in found[i]}
        raise LedgerError(f"the observation snapshot of {scope} kept changing while read")

    def _totals_shards(self, scope: str, month: str) -> dict[int, dict[str, Any]]:
        """The month's totals, shard by shard: ``{shard: {project key: row}}``."""
        shards: dict[int, dict[str, Any]] = {}
        for item in self._query(f"SCOPE#{scope}#MONTH#{month}"):
            if item["sk"].startswith("TOTALS#"):
                shards[int(item["sk"].removeprefix("TOTALS#"))] = dict(item["projects"])
        return shards

    def month_totals(self, scope: str, month: str) -> dict[str | None, ProjectMonth]:
        totals: dict[str | None, ProjectMonth] = {}
        for rows in self._totals_shards(scope, month).values():
            for k, row in rows.items():
                project = None if k == UNATTRIBUTED_KEY else row["project"]
                days = row.get("days")
                cat = row.get("cat")
                totals[project] = ProjectMonth(
                    project,
                    month,
                    row["usd"],
                    row["est"],
                    None if days is None else {int(d): usd for d, usd in days.items()},
                    row.get("undated", Decimal(0)),
                    None if cat is None else dict(cat),
                )
        return totals

    # -- the scan commit -----------------------------------------------------------

    def commit(self, commit: ScanCommit) -> CommitOutcome:
        current = self.watermark(commit.scope)
        if current == commit.now:
            return CommitOutcome.ALREADY_APPLIED
        if current != commit.previous_watermark or (current is not None and commit.now < current):
            return CommitOutcome.CONTENDED
        items = [{"Update": self._watermark_update(commit, current)}]
        for month in sorted({m for _, m in commit.increments}):
            items += [{"Put": put} for put in self._totals_puts(commit, month)]
        for index, blob in enumerate(encode_observations(commit.observations)):
            item = {
                "pk": f"SCOPE#{commit.scope}#OBS",
                "sk": f"CHUNK#{index:04d}",
                "scan": stamp(commit.now),
                "data": blob,
            }
            items.append({"Put": {"TableName": self._table, "Item": to_item(item)}})
        if len(items) > TRANSACT_LIMIT:
            raise LedgerError(f"a scan commit needs {len(items)} items; the limit is 100")
        size = sum(_item_bytes(entry) for entry in items)
        if size > TRANSACT_BUDGET_BYTES:
            raise LedgerError(f"a scan commit needs {size} bytes; a transaction holds 4 MB")
        # The cast only names the type the stubs expect; the contract test on moto checks
        # the items' shape.
        transact = cast("list[TransactWriteItemTypeDef]", items)
        if not written(lambda: self._ddb.transact_write_items(TransactItems=transact)):
            # Someone moved the watermark between our read and our write: maybe our own
            # earlier attempt (a retry), maybe another scan. Nothing was written.
            if self.watermark(commit.scope) == commit.now:
                return CommitOutcome.ALREADY_APPLIED
            return CommitOutcome.CONTENDED
        return CommitOutcome.APPLIED

    def _watermark_update(self, commit: ScanCommit, current: datetime | None) -> dict[str, Any]:
        chunks_needed = -(-len(commit.observations) // OBSERVATIONS_PER_CHUNK)
        values: dict[str, Any] = {":now": stamp(commit.now), ":chunks": chunks_needed}
        if current is None:
            condition = "attribute_not_exists(#observed)"
        else:
            condition = "#observed = :prev AND #observed < :now"
            values[":prev"] = stamp(current)
        return {
            "TableName": self._table,
            "Key": pk_sk(f"SCOPE#{commit.scope}", "WATERMARK"),
            "UpdateExpression": "SET #observed = :now, #chunks = :chunks",
            **expression(condition, {"#observed": "observed_at", "#chunks": "obs_chunks"}, values),
        }

    def _totals_puts(self, commit: ScanCommit, month: str) -> list[dict[str, Any]]:
        """The month's totals shards that this scan's increments touch, with them added.

        Totals are spread over ``TOTALS_SHARDS`` items by project hash, so hundreds of
        long project names (a hostile retagger can add one a scan) cannot grow one item
        past DynamoDB's 400 KB and stop accrual for the whole account. Read-modify-write
        is safe: the watermark's compare-and-set in the same transaction fails if any
        other commit landed since we read.
        """
        shards = self._totals_shards(commit.scope, month)
        touched: set[int] = set()
        for (project, m), inc in commit.increments.items():
            if m != month:
                continue
            k = project_key(project)
            shard = totals_shard(k)
            rows = shards.setdefault(shard, {})
            touched.add(shard)
            old = rows.get(k, {})
            row: dict[str, Any] = {
                "usd": old.get("usd", Decimal(0)) + inc.usd,
                "est": old.get("est", Decimal(0)) + inc.estimated_usd,
                "days": _days_plus(old.get("days", {}), inc.days),
            }
            if old and "days" not in old:
                # A row an older version wrote: what it held is in no day.
                row["undated"] = old.get("usd", Decimal(0))
            elif "undated" in old:
                row["undated"] = old["undated"]
            # By category, in the same row (a few bytes a category): a row an older version
            # wrote has none, so what it held stays outside them, read as "not split".
            # Full precision, as the month-to-date is, so the categories add up to it.
            row["cat"] = add_days(old.get("cat", {}), inc.by_category)
            if project is not None:
                row["project"] = project
            rows[k] = row
        puts = []
        for shard in sorted(touched):
            item = to_item(
                {
                    "pk": f"SCOPE#{commit.scope}#MONTH#{month}",
                    "sk": f"TOTALS#{shard:02d}",
                    "month": month,
                    "projects": shards[shard],
                    "applied_at": stamp(commit.now),
                }
            )
            size = _item_bytes(item)
            if size > ITEM_BUDGET_BYTES:
                raise LedgerError(
                    f"month totals shard {shard} of {month} grew to {size} bytes "
                    f"({len(shards[shard])} projects)"
                )
            puts.append({"TableName": self._table, "Item": item})
        return puts

    def _batch_write(self, items: Sequence[Mapping[str, Any]]) -> None:
        for batch in chunks(
            [{"PutRequest": {"Item": to_item(i)}} for i in items], BATCH_WRITE_LIMIT
        ):

            def write(pending: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
                response = self._ddb.batch_write_item(RequestItems=pending)
                return {}, dict(response.get("UnprocessedItems") or {})

            _until_processed(write, {self._table: batch}, "writes")

    def _batch_get(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Items by key, 100 a call (strongly consistent), unprocessed keys tried again."""
        found: list[dict[str, Any]] = []
        for batch in chunks(keys, BATCH_GET_LIMIT):

            def read(pending: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
                response = self._ddb.batch_get_item(RequestItems=pending)
                return dict(response.get("Responses") or {}), dict(
                    response.get("UnprocessedKeys") or {}
                )

            for items in _until_processed(
                read, {self._table: {"Keys": batch, "ConsistentRead": True}}, "reads"
            ):
                found.extend(from_item(i) for i in items.get(self._table, []))
        return found

    # -- findings, exactly-once records, audit -----------------------------------------

    def record_findings(self, scope: str, now: datetime, findings: Sequence[Finding]) -> None:
        """Write only what the day does not already hold, word for word.

        The same findings repeat every scan; one read of the day (a few read units) is far
        cheaper than rewriting each of them (a write unit each).
        """
        day = now.astimezone(UTC).date().isoformat()
        held = {
            item["sk"]: (item["message"], item["severity"])
            for item in self._query(f"SCOPE#{scope}#FINDINGS#{day}")
        }
        unique = {
            (f.code.value, f.resource): f
            for f in findings
            if held.get(f"{f.code.value}#{key_part(f.resource)}") != (f.message, f.severity.value)
        }
        self._batch_write(
            [
                {
                    "pk": f"SCOPE#{scope}#FINDINGS#{day}",
                    "sk": f"{code}#{key_part(resource)}",
                    "code": code,
                    "resource": resource,
                    "message": f.message,
                    "severity": f.severity.value,
                    "seen_at": stamp(now),
                    "ttl": _epoch(now + FINDING_TTL),
                }
                for (code, resource), f in sorted(unique.items())
            ]
        )

    def findings(self, scope: str, day: str) -> list[Finding]:
        found = [
            Finding(
                FindingCode(item["code"]),
                item["resource"],
                item["message"],
                Severity(item["severity"]),
            )
            for item in self._query(f"SCOPE#{scope}#FINDINGS#{day}")
        ]
        return sorted(found, key=lambda f: (f.code.value, f.resource))

    def _put_if_absent(self, item: Mapping[str, Any]) -> bool:
        """The exactly-once primitive: a conditional put that only the first writer wins."""
        return written(
            lambda: self._ddb.put_item(
                TableName=self._table,
                Item=to_item(item),
                ConditionExpression="attribute_not_exists(pk)",
            )
        )

    def put_once(self, namespace: str, key: str, now: datetime, attrs: Mapping[str, Any]) -> bool:
        return self._put_if_absent(
            {
                "pk": f"ONCE#{namespace}",
                "sk": key_part(key),
                "key": key,
                "status": SENT,
                "at": stamp(now),
                "attrs": json.dumps(attrs, default=str, sort_keys=True),
                "ttl": _epoch(now + CLAIM_TTL),
            }
        )

    def _update_claim(
        self,
        namespace: str,
        claim: str,
        update: str,
        condition: str | None,
        names: Mapping[str, str],
        values: Mapping[str, Any],
    ) -> bool:
        """An update of a claim's record; False when ``condition`` refused it."""
        return written(
            lambda: self._ddb.update_item(
                TableName=self._table,
                Key=pk_sk(f"ONCE#{namespace}", key_part(claim)),
                UpdateExpression=update,
                **expression(condition, names, values),
            )
        )

    def claim(
        self,
        namespace: str,
        key: str,
        now: datetime,
        lease: timedelta,
        attrs: Mapping[str, Any],
    ) -> bool:
        # A record without a status was written by put_once (or an older version): done.
        return self._update_claim(
            namespace,
            key,
            # A new claim is for new work: the fence of the work it replaces goes.
            "SET #status = :pending, #key = :key, #at = :now, #expires = :expires, "
            "#attrs = :attrs, #ttl = :ttl REMOVE #fence",
            # Time never moves backwards: a claim older than the key's last (a late
            # retry with a stale now) is refused, so its lease cannot end before its
            # time and let a second holder in.
            "attribute_not_exists(pk) OR (#at <= :now AND (#status = :released "
            "OR (#status = :pending AND #expires <= :now)))",
            {
                "#status": "status",
                "#key": "key",
                "#at": "at",
                "#expires": "lease_expires",
                "#attrs": "attrs",
                "#ttl": "ttl",
                "#fence": "fence",
            },
            {
                ":pending": PENDING,
                ":released": RELEASED,
                ":key": key,
                ":now": stamp(now),
                ":expires": stamp(now + lease),
                ":attrs": json.dumps(dict(attrs), default=str, sort_keys=True),
                ":ttl": _epoch(now + CLAIM_TTL),
            },
        )

    def confirm(self, namespace: str, key: str, now: datetime, fence: str | None = None) -> None:
        values: dict[str, Any] = {":sent": SENT, ":now": stamp(now)}
        if fence is None:
            update = "SET #status = :sent, #done = :now REMOVE #fence"
        else:
            update = "SET #status = :sent, #done = :now, #fence = :fence"
            values[":fence"] = fence
        names = {"#status": "status", "#done": "done_at", "#fence": "fence"}
        self._update_claim(namespace, key, update, None, names, values)

    def reopen(self, namespace: str, key: str, fence: str, *, keep: str | None = None) -> bool:
        # Only confirmed work, and only the work named: a put_once record has no fence,
        # a pending claim's holder is still at work, a newer claim carries its own fence.
        condition = "#status = :sent AND (#fence = :fence OR begins_with(#fence, :under))"
        values = {":released": RELEASED, ":sent": SENT, ":fence": fence, ":under": f"{fence}/"}
        if keep is not None:
            condition += " AND #fence <> :keep"
            values[":keep"] = keep
        names = {"#status": "status", "#fence": "fence"}
        return self._update_claim(
            namespace, key, "SET #status = :released", condition, names, values
        )

    def release(self, namespace: str, key: str, claimed_at: datetime) -> None:
        # Only a pending claim, and only by its holder: a confirmed one stays done, and a
        # holder whose lease ran out cannot free the claim of the run that took over.
        self._update_claim(
            namespace,
            key,
            "SET #status = :released",
            "#status = :pending AND #at = :claimed",
            {"#status": "status", "#at": "at"},
            {":released": RELEASED, ":pending": PENDING, ":claimed": stamp(claimed_at)},
        )

    def status(self, namespace: str, key: str) -> str | None:
        item = self._get(f"ONCE#{namespace}", key_part(key))
        return None if item is None else str(item.get("status", SENT))

    def statuses(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        wanted = {
            (f"ONCE#{namespace}", key_part(k)): (namespace, k)
            for namespace, k in dict.fromkeys(keys)
        }
        items = self._batch_get([pk_sk(pk, sk) for pk, sk in wanted])
        return {wanted[(i["pk"], i["sk"])]: str(i.get("status", SENT)) for i in items}

    def audit(self, event: AuditEvent) -> bool:
        return self._put_if_absent(_audit_item(event))

    def audit_many(self, events: Sequence[AuditEvent]) -> None:
        """A run's records packed into as few items as fit (compressed, like the
        observation snapshot: about 1,000 reports an item), written in one batch.

        An item's key is the digest of what it holds, so the same records written again
        are the same item; ``audit_trail`` unpacks them, one record per (time, id).
        """
        unique = {(e.scope, stamp(e.at), e.event_id): e for e in events}
        groups: dict[str, list[AuditEvent]] = {}
        for (scope, _, _), e in sorted(unique.items()):
            groups.setdefault(f"SCOPE#{scope}#AUDIT#{e.at.astimezone(UTC):%Y-%m}", []).append(e)
        self._batch_write(
            [
                item
                for pk, group in groups.items()
                for part in chunks(group, AUDIT_EVENTS_PER_ITEM)
                for item in _packed_audit_items(pk, part)
            ]
        )

    def record_rates(self, scope: str, at: datetime, rates: Mapping[str, Decimal]) -> None:
        """One item per project and day; samples are appended as ``stamp=rate`` strings."""
        day = at.astimezone(UTC).date().isoformat()
        for project, usd in sorted(rates.items()):
            self._ddb.update_item(
                TableName=self._table,
                Key=pk_sk(f"SCOPE#{scope}#RATES", f"{project_key(project)}#{day}"),
                UpdateExpression="SET #s = list_append(if_not_exists(#s, :empty), :new), #p = :p, #ttl = :ttl",
                **expression(
                    None,
                    {"#s": "samples", "#p": "project", "#ttl": "ttl"},
                    {
                        ":empty": [],
                        ":new": [f"{stamp(at)}={usd}"],
                        ":p": project,
                        ":ttl": _epoch(at + RATE_TTL),
                    },
                ),
            )

    def rate_history(
        self, scope: str, since: datetime
    ) -> dict[str, list[tuple[datetime, Decimal]]]:
        history: dict[str, dict[datetime, Decimal]] = {}
        for item in self._query(f"SCOPE#{scope}#RATES"):
            for sample in item.get("samples", []):
                when, _, usd = sample.partition("=")
                at = parse_stamp(when)
                if at >= since:  # a retried append dedupes here
                    history.setdefault(item["project"], {})[at] = Decimal(usd)
        return {p: sorted(samples.items()) for p, samples in history.items()}

    def get_state(self, scope: str, name: str) -> tuple[dict[str, Any], int]:
        item = self._get(f"SCOPE#{scope}#STATE", name)
        if not item:
            return {}, 0
        return json.loads(item["value"]), int(item["version"])

    def put_state(
        self, scope: str, name: str, value: Mapping[str, Any], expected_version: int
    ) -> bool:
        condition = "attribute_not_exists(pk)" if expected_version == 0 else "#v = :expected"
        values: dict[str, Any] = {
            ":value": json.dumps(dict(value), sort_keys=True, default=str),
            ":next": expected_version + 1,
        }
        if expected_version:
            values[":expected"] = expected_version
        names = {"#value": "value", "#v": "version"}
        return written(
            lambda: self._ddb.update_item(
                TableName=self._table,
                Key=pk_sk(f"SCOPE#{scope}#STATE", name),
                UpdateExpression="SET #value = :value, #v = :next",
                **expression(condition, names, values),
            )
        )

    def record_alert(self, scope: str, at: datetime, alert: Mapping[str, Any]) -> None:
        item = {
            "pk": f"SCOPE#{scope}#ALERTS#{at.astimezone(UTC):%Y-%m}",
            "sk": f"{stamp(at)}#{key_part(str(alert.get('alert_id', '')))}",
            "alert": json.dumps(dict(alert), sort_keys=True, default=str),
            "ttl": _epoch(at + ALERT_TTL),
        }
        self._ddb.put_item(TableName=self._table, Item=to_item(item))

    def recent_alerts(self, scope: str, since: datetime, until: datetime) -> list[dict[str, Any]]:
        months, cursor = [], month_start(since)
        while cursor <= until:
            months.append(f"{cursor:%Y-%m}")
            cursor = next_month_start(cursor)
        found = []
        for month in months:
            for item in self._query(f"SCOPE#{scope}#ALERTS#{month}"):
                if between(parse_stamp(item["sk"].split("#", 1)[0]), since, until):
                    found.append(json.loads(item["alert"]))
        return found

    def audit_trail(self, scope: str, month: str) -> list[AuditEvent]:
        events: dict[tuple[datetime, str], AuditEvent] = {}
        for item in self._query(f"SCOPE#{scope}#AUDIT#{month}"):
            if "events" in item:  # a packed item (audit_many)
                rows = json.loads(zlib.decompress(item["events"]).decode("utf-8"))
                for at, event_id, action, resource, outcome, details in rows:
                    when = parse_stamp(at)
                    events.setdefault(
                        (when, event_id),
                        AuditEvent(scope, when, event_id, action, resource, outcome, details),
                    )
                continue
            when = parse_stamp(item["sk"].split("#", 1)[0])
            events[(when, item["event_id"])] = AuditEvent(
                scope=scope,
                at=when,
                event_id=item["event_id"],
                action=item["action"],
                resource=item["resource"],
                outcome=item["outcome"],
                details=json.loads(item["details"]),
            )
        return [events[k] for k in sorted(events)]
