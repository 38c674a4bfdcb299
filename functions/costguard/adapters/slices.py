"""The plans of an Organization's scheduled scans, on the ledger table (and in memory).

=============================  ==================  =================================================
pk                             sk                  what
=============================  ==================  =================================================
``ORG#<scope>#TICKS``          ``<time>``          expected and done slices, failures, aggregated,
                                                   and each done slice's tagged budgets
=============================  ==================  =================================================

A slice is marked done with **one** conditional ``UpdateItem`` (``ADD`` to a string set
unless it holds it already): a duplicate message, a retry after a crash, or a second
consumer racing the first mark it once, and only the call that added it is told so.
Aggregation is a two-phase claim, like an alert's: a conditional ``SET`` of
``aggregating_at`` with a lease (``aggregation_expires``) claims it; ``aggregated_at`` is
set only once the work is done; a holder that fails gives the claim back (fenced by its
claim time), and one that crashed loses it when the lease runs out, so the deadline
sweep aggregates the time all the same.
An item holds 800 slice keys in about 20 KB, far under DynamoDB's 400 KB.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from costguard.adapters.dynamodb import parse_stamp, stamp
from costguard.domain.org import Slice, SliceFailure, TickPlan

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: Plans are kept this long (DynamoDB TTL): long enough for any late slice to find one.
PLAN_TTL = timedelta(days=3)
#: A failure message kept in the plan is cut to this length.
FAILURE_CHARS = 300
#: The attribute holding one done slice's tagged budgets: ``budgets/<account>/<region>``.
BUDGETS_PREFIX = "budgets/"


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class DynamoDbSliceBook:
    def __init__(self, client: DynamoDBClient, table_name: str, scope: str) -> None:
        self._ddb = client
        self._table = table_name
        self._pk = f"ORG#{scope}#TICKS"

    def _key(self, tick: datetime) -> dict[str, Any]:
        return {"pk": {"S": self._pk}, "sk": {"S": stamp(tick)}}

    def plan(
        self,
        tick: datetime,
        slices: Iterable[Slice],
        deadline: datetime,
        carried: Iterable[Slice] = (),
    ) -> bool:
        keys = sorted({s.key for s in slices})
        if not keys:
            return False
        also = sorted({s.key for s in carried} - set(keys))
        try:
            self._ddb.put_item(
                TableName=self._table,
                Item={
                    **self._key(tick),
                    "expected": {"SS": keys},
                    **({"carried": {"SS": also}} if also else {}),
                    "deadline": {"S": stamp(deadline)},
                    "errors": {"M": {}},
                    "attempts": {"M": {}},
                    "ttl": {"N": str(int((tick + PLAN_TTL).timestamp()))},
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False  # planned already: a retried fan-out changes nothing
            raise
        return True

    def mark_done(
        self, tick: datetime, s: Slice, tag_budgets: Mapping[str, Decimal] | None = None
    ) -> tuple[bool, TickPlan | None]:
        names = {"#done": "done"}
        values: dict[str, Any] = {":slice": {"SS": [s.key]}, ":key": {"S": s.key}}
        update = "ADD #done :slice"
        if tag_budgets:
            # One attribute per slice, written with "done" in the same conditional update
            # (once): no map that a plan written before this attribute existed would lack.
            names["#budgets"] = f"{BUDGETS_PREFIX}{s.key}"
            values[":budgets"] = {
                "M": {p: {"N": format(amount, "f")} for p, amount in sorted(tag_budgets.items())}
            }
            update += " SET #budgets = :budgets"
        try:
            response = self._ddb.update_item(
                TableName=self._table,
                Key=self._key(tick),
                UpdateExpression=update,
                ConditionExpression="attribute_exists(pk) AND NOT contains(#done, :key)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False, self.get(tick)
            raise
        return True, _plan(response["Attributes"])

    def mark_failed(self, tick: datetime, s: Slice, code: str, message: str) -> None:
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=self._key(tick),
                UpdateExpression=(
                    "SET #errors.#slice = :error, "
                    "#attempts.#slice = if_not_exists(#attempts.#slice, :zero) + :one"
                ),
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={
                    "#errors": "errors",
                    "#attempts": "attempts",
                    "#slice": s.key,
                },
                ExpressionAttributeValues={
                    ":error": {
                        "M": {"code": {"S": code}, "message": {"S": message[:FAILURE_CHARS]}}
                    },
                    ":zero": {"N": "0"},
                    ":one": {"N": "1"},
                },
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise  # no plan (expired): nothing to report the failure against

    def get(self, tick: datetime) -> TickPlan | None:
        item = self._ddb.get_item(
            TableName=self._table, Key=self._key(tick), ConsistentRead=True
        ).get("Item")
        return _plan(item) if item else None

    def due(self, since: datetime, now: datetime) -> list[TickPlan]:
        """Plans of times in [since, now] not aggregated yet whose deadline has passed."""
        pages = self._ddb.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :since AND :now",
            ExpressionAttributeValues={
                ":pk": {"S": self._pk},
                ":since": {"S": stamp(since)},
                ":now": {"S": stamp(now)},
            },
            ConsistentRead=True,
        )
        plans = [_plan(item) for page in pages for item in page.get("Items", [])]
        return [p for p in plans if p.aggregated_at is None and p.deadline <= now]

    def claim_aggregation(self, tick: datetime, now: datetime, lease: timedelta) -> bool:
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=self._key(tick),
                UpdateExpression="SET #claimed = :now, #expires = :expires",
                ConditionExpression=(
                    "attribute_exists(pk) AND attribute_not_exists(#agg) "
                    "AND (attribute_not_exists(#expires) OR #expires <= :now)"
                ),
                ExpressionAttributeNames={
                    "#agg": "aggregated_at",
                    "#claimed": "aggregating_at",
                    "#expires": "aggregation_expires",
                },
                ExpressionAttributeValues={
                    ":now": {"S": stamp(now)},
                    ":expires": {"S": stamp(now + lease)},
                },
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def confirm_aggregation(self, tick: datetime, now: datetime) -> None:
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=self._key(tick),
                UpdateExpression="SET #agg = if_not_exists(#agg, :now) REMOVE #expires",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={
                    "#agg": "aggregated_at",
                    "#expires": "aggregation_expires",
                },
                ExpressionAttributeValues={":now": {"S": stamp(now)}},
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise  # the plan expired meanwhile: nothing is left to mark

    def release_aggregation(self, tick: datetime, claimed_at: datetime) -> None:
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=self._key(tick),
                UpdateExpression="REMOVE #claimed, #expires",
                ConditionExpression="attribute_not_exists(#agg) AND #claimed = :claimed",
                ExpressionAttributeNames={
                    "#agg": "aggregated_at",
                    "#claimed": "aggregating_at",
                    "#expires": "aggregation_expires",
                },
                ExpressionAttributeValues={":claimed": {"S": stamp(claimed_at)}},
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise  # not ours any more (the lease ran out and another run took it)


def _plan(item: dict[str, Any]) -> TickPlan:
    attempts = {k: int(v["N"]) for k, v in item.get("attempts", {}).get("M", {}).items()}
    failures = {
        Slice.parse(k): SliceFailure(
            v["M"]["code"]["S"], v["M"]["message"]["S"], attempts.get(k, 1)
        )
        for k, v in item.get("errors", {}).get("M", {}).items()
    }
    aggregated = item.get("aggregated_at", {}).get("S")
    expires = item.get("aggregation_expires", {}).get("S")
    return TickPlan(
        tick=parse_stamp(item["sk"]["S"]),
        expected=frozenset(Slice.parse(k) for k in item["expected"]["SS"]),
        deadline=parse_stamp(item["deadline"]["S"]),
        done=frozenset(Slice.parse(k) for k in item.get("done", {}).get("SS", [])),
        failures=failures,
        aggregated_at=parse_stamp(aggregated) if aggregated else None,
        aggregation_expires=parse_stamp(expires) if expires and not aggregated else None,
        carried=frozenset(Slice.parse(k) for k in item.get("carried", {}).get("SS", [])),
        tag_budgets={
            Slice.parse(k.removeprefix(BUDGETS_PREFIX)): {
                p: Decimal(v["N"]) for p, v in value.get("M", {}).items()
            }
            for k, value in item.items()
            if k.startswith(BUDGETS_PREFIX)
        },
    )


class InMemorySliceBook:
    """The same contract in memory (tests/functional/test_slice_book_contract.py)."""

    def __init__(self) -> None:
        self._plans: dict[datetime, TickPlan] = {}
        #: The claim time of each held aggregation (the fence of its release).
        self._holders: dict[datetime, datetime] = {}
        self._lock = threading.Lock()

    def plan(
        self,
        tick: datetime,
        slices: Iterable[Slice],
        deadline: datetime,
        carried: Iterable[Slice] = (),
    ) -> bool:
        expected = frozenset(slices)
        with self._lock:
            if not expected or tick in self._plans:
                return False
            self._plans[tick] = TickPlan(
                tick, expected, deadline, carried=frozenset(carried) - expected
            )
            return True

    def mark_done(
        self, tick: datetime, s: Slice, tag_budgets: Mapping[str, Decimal] | None = None
    ) -> tuple[bool, TickPlan | None]:
        with self._lock:
            plan = self._plans.get(tick)
            if plan is None or s in plan.done:
                return False, plan
            budgets = dict(plan.tag_budgets)
            if tag_budgets:
                budgets[s] = dict(tag_budgets)
            plan = self._plans[tick] = replace(plan, done=plan.done | {s}, tag_budgets=budgets)
            return True, plan

    def mark_failed(self, tick: datetime, s: Slice, code: str, message: str) -> None:
        with self._lock:
            plan = self._plans.get(tick)
            if plan is None:
                return
            before = plan.failures.get(s)
            failure = SliceFailure(
                code, message[:FAILURE_CHARS], (before.attempts if before else 0) + 1
            )
            self._plans[tick] = replace(plan, failures={**plan.failures, s: failure})

    def get(self, tick: datetime) -> TickPlan | None:
        with self._lock:
            return self._plans.get(tick)

    def due(self, since: datetime, now: datetime) -> list[TickPlan]:
        with self._lock:
            return [
                p
                for t, p in sorted(self._plans.items())
                if since <= t <= now and p.aggregated_at is None and p.deadline <= now
            ]

    def claim_aggregation(self, tick: datetime, now: datetime, lease: timedelta) -> bool:
        with self._lock:
            plan = self._plans.get(tick)
            if plan is None or plan.aggregated_at is not None:
                return False
            if plan.aggregation_expires is not None and now < plan.aggregation_expires:
                return False  # held, and its lease is running
            self._plans[tick] = replace(plan, aggregation_expires=now + lease)
            self._holders[tick] = now
            return True

    def confirm_aggregation(self, tick: datetime, now: datetime) -> None:
        with self._lock:
            plan = self._plans.get(tick)
            if plan is None or plan.aggregated_at is not None:
                return
            self._plans[tick] = replace(plan, aggregated_at=now, aggregation_expires=None)

    def release_aggregation(self, tick: datetime, claimed_at: datetime) -> None:
        with self._lock:
            plan = self._plans.get(tick)
            if plan is None or plan.aggregated_at is not None:
                return
            if self._holders.get(tick) != claimed_at:
                return  # not ours any more (the lease ran out and another run took it)
            del self._holders[tick]
            self._plans[tick] = replace(plan, aggregation_expires=None)
