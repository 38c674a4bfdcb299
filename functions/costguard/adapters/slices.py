"""The plans of an Organization's scheduled scans, on the ledger table (and in memory).

==============================  ==================  ============================================
pk                              sk                  what
==============================  ==================  ============================================
``ORG#<scope>#TICKS``           ``<time>``          the plan: expected and carried slices,
                                                    deadline, failures, aggregation claim
``ORG#<scope>#TICK#<time>``     ``remaining``       how many expected slices are not done yet
``ORG#<scope>#TICK#<time>``     ``done#<slice>``    one done slice, with its tagged budgets,
                                                    owners, teams, advice and its endpoint
                                                    variants' cost per prediction
==============================  ==================  ============================================

A done item's ``predictions`` (a list, empty when the slice's scan saw no endpoint variant)
is written by every version that carries the cost per prediction; an item without it was
written by an older one, and the roll-up says that slice did not report them.

Marking a slice done costs the same whatever the number of slices: a conditional
``PutItem`` of the slice's own item (``attribute_not_exists``: a duplicate message, a
retry after a crash or a second consumer racing the first is refused, and only the call
that wrote it is told so), then, only when that put went through, ``ADD remaining -1`` on
the small counter item (``remaining > 0``, ``UPDATED_NEW``: the counter alone comes back).
The call that brings it to 0 reads the plan in full (one ``GetItem`` and a paginated
``Query`` of the time's partition) and, if every expected slice is done, returns it so
that it may aggregate. Neither write touches the plan item, whose size grows with the
slices: an ``UpdateItem`` is billed on the larger of the item before and after, so a
mark on it cost units in proportion to the plan (the square of the slices per time) and
made it a hot key; and no item grows with the marks, so no 400 KB limit.

A crash between the put and the decrement leaves the counter above 0 for good: the
deadline sweep (:meth:`DynamoDbSliceBook.due`) aggregates the time all the same, from
the done items it reads. "Complete" is always decided on those items against the plan's
expected slices, never on the counter alone: a slice that was not planned cannot
complete a plan early.

Aggregation is a two-phase claim, like an alert's: a conditional ``SET`` of
``aggregating_at`` with a lease (``aggregation_expires``) claims it; ``aggregated_at`` is
set only once the work is done; a holder that fails gives the claim back (fenced by its
claim time), and one that crashed loses it when the lease runs out, so the deadline
sweep aggregates the time all the same. A failure is kept on the plan item (rare, and
billed on its size): a plan of 2,000 slices is about 50 KB, under DynamoDB's 400 KB.

Plans written before the done items existed (a string set ``done`` and ``budgets/<slice>``
attributes on the plan item, no counter) still read and complete: their marks find no
counter and decide on a full read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from costguard.adapters.ddb import (
    expression,
    from_item,
    items_of,
    pk_sk,
    to_item,
    unless_refused,
    written,
)
from costguard.adapters.dynamodb import parse_stamp, stamp
from costguard.adapters.memory import InMemoryLeases
from costguard.domain.advice import Advice, AdviceCode
from costguard.domain.org import (
    ProjectAdvice,
    Slice,
    SliceFailure,
    TickPlan,
    bounded_advice,
    bounded_owners,
    bounded_predictions,
    bounded_teams,
)
from costguard.domain.predictions import CostStatus, DayCost, PredictionCost
from costguard.domain.windows import between

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

#: Plans are kept this long (DynamoDB TTL): long enough for any late slice to find one.
PLAN_TTL = timedelta(days=3)
#: A failure message kept in the plan is cut to this length.
FAILURE_CHARS = 300
#: The attribute holding one done slice's tagged budgets: ``budgets/<account>/<region>``.
BUDGETS_PREFIX = "budgets/"
#: The sort keys of a time's partition: its counter, and one item per done slice.
REMAINING = "remaining"
DONE_PREFIX = "done#"
#: The plan's aggregation claim: its time, its lease's end, and when the work was done.
_AGGREGATION_NAMES = {
    "#agg": "aggregated_at",
    "#claimed": "aggregating_at",
    "#expires": "aggregation_expires",
}


class DynamoDbSliceBook:
    def __init__(self, client: DynamoDBClient, table_name: str, scope: str) -> None:
        self._ddb = client
        self._table = table_name
        self._pk = f"ORG#{scope}#TICKS"
        self._tick_prefix = f"ORG#{scope}#TICK#"

    def _tick_pk(self, tick: datetime) -> str:
        return f"{self._tick_prefix}{stamp(tick)}"

    @staticmethod
    def _ttl(tick: datetime) -> int:
        return int((tick + PLAN_TTL).timestamp())

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
        plan = {
            "pk": self._pk,
            "sk": stamp(tick),
            "expected": set(keys),
            **({"carried": set(also)} if also else {}),
            "deadline": stamp(deadline),
            "errors": {},
            "attempts": {},
            "ttl": self._ttl(tick),
        }
        counter = {
            "pk": self._tick_pk(tick),
            "sk": REMAINING,
            REMAINING: len(keys),
            "ttl": self._ttl(tick),
        }
        # The plan and its counter in one transaction: a counter without a plan, or a plan
        # whose marks could never count down, is never seen. Planned already: a retried
        # fan-out changes nothing.
        items: list[TransactWriteItemTypeDef] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(plan),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {"Put": {"TableName": self._table, "Item": to_item(counter)}},
        ]
        return written(lambda: self._ddb.transact_write_items(TransactItems=items))

    def mark_done(
        self,
        tick: datetime,
        s: Slice,
        tag_budgets: Mapping[str, Decimal] | None = None,
        tag_owners: Mapping[str, Sequence[str]] | None = None,
        advice: Sequence[ProjectAdvice] = (),
        tag_teams: Mapping[str, str] | None = None,
        tag_team_budgets: Mapping[str, Decimal] | None = None,
        predictions: Sequence[PredictionCost] | None = None,
    ) -> tuple[bool, TickPlan | None]:
        item: dict[str, Any] = {
            "pk": self._tick_pk(tick),
            "sk": f"{DONE_PREFIX}{s.key}",
            "ttl": self._ttl(tick),
        }
        if kept := bounded_advice(advice):
            item["advice"] = [_advice_item(a) for a in kept]
        if tag_budgets:
            item["budgets"] = {p: Decimal(format(v, "f")) for p, v in sorted(tag_budgets.items())}
        if owners := bounded_owners(tag_owners or {}):
            item["owners"] = {p: list(names) for p, names in sorted(owners.items())}
        teams, team_budgets = bounded_teams(tag_teams or {}, tag_team_budgets or {})
        if teams:
            item["teams"] = teams
        if team_budgets:
            item["team_budgets"] = {t: Decimal(format(v, "f")) for t, v in team_budgets.items()}
        if predictions is not None:
            # Always a list when reported (empty: no endpoint variant), so that an item
            # without it reads as "not reported" (an older version), never as none.
            kept_costs, cut = bounded_predictions(predictions)
            item["predictions"] = [_prediction_item(c) for c in kept_costs]
            if cut:
                item["predictions_cut"] = cut
        if not written(
            lambda: self._ddb.put_item(
                TableName=self._table,
                Item=to_item(item),
                ConditionExpression="attribute_not_exists(pk)",
            )
        ):
            return False, self._if_complete(tick)  # done already: a duplicate or a retry
        # An error other than a refusal leaves the done item: a retry is a duplicate, and
        # the deadline sweeps.
        counted = unless_refused(
            lambda: self._ddb.update_item(
                TableName=self._table,
                Key=pk_sk(self._tick_pk(tick), REMAINING),
                UpdateExpression="ADD #left :minus_one",
                ReturnValues="UPDATED_NEW",
                **expression("#left > :zero", {"#left": REMAINING}, {":minus_one": -1, ":zero": 0}),
            )
        )
        if counted is None:
            return self._uncounted(tick, s)
        if int(counted["Attributes"][REMAINING]["N"]) > 0:
            return True, None
        return True, self._complete(self.get(tick))

    def _if_complete(self, tick: datetime) -> TickPlan | None:
        """The plan in full if the counter says it may be complete (or there is none)."""
        left = self.remaining(tick)
        if left is not None and left > 0:
            return None
        return self._complete(self.get(tick))

    def _uncounted(self, tick: datetime, s: Slice) -> tuple[bool, TickPlan | None]:
        """A done item written, but no counter to count it down: no plan, a plan of the
        previous layout, or a counter at 0 already (a slice not planned brought it there)."""
        read = self._read(tick)
        if read is None:
            # Left to its time to live (no DeleteItem in the hub's grants): a plan is made
            # before its messages are sent, so none is made at this time afterwards.
            return False, None
        plan, legacy_done = read
        return s not in legacy_done, self._complete(plan)

    @staticmethod
    def _complete(plan: TickPlan | None) -> TickPlan | None:
        return plan if plan is not None and plan.complete else None

    def _update_plan(
        self,
        tick: datetime,
        update: str,
        condition: str,
        names: Mapping[str, str],
        values: Mapping[str, Any] | None = None,
    ) -> bool:
        """An update of the plan item; False when ``condition`` refused it."""
        return written(
            lambda: self._ddb.update_item(
                TableName=self._table,
                Key=pk_sk(self._pk, stamp(tick)),
                UpdateExpression=update,
                **expression(condition, names, values),
            )
        )

    def mark_failed(self, tick: datetime, s: Slice, code: str, message: str) -> None:
        # Refused: no plan (expired), nothing to report the failure against.
        self._update_plan(
            tick,
            "SET #errors.#slice = :error, "
            "#attempts.#slice = if_not_exists(#attempts.#slice, :zero) + :one",
            "attribute_exists(pk)",
            {"#errors": "errors", "#attempts": "attempts", "#slice": s.key},
            {
                ":error": {"code": code, "message": message[:FAILURE_CHARS]},
                ":zero": 0,
                ":one": 1,
            },
        )

    def get(self, tick: datetime) -> TickPlan | None:
        read = self._read(tick)
        return read[0] if read else None

    def remaining(self, tick: datetime) -> int | None:
        """The counter: expected slices not counted down yet (None: no counter)."""
        counter = self._ddb.get_item(
            TableName=self._table, Key=pk_sk(self._tick_pk(tick), REMAINING), ConsistentRead=True
        ).get("Item")
        return int(counter[REMAINING]["N"]) if counter else None

    def _read(self, tick: datetime) -> tuple[TickPlan, frozenset[Slice]] | None:
        """The plan in full, and the slices done in its own string set (previous layout)."""
        item = self._ddb.get_item(
            TableName=self._table, Key=pk_sk(self._pk, stamp(tick)), ConsistentRead=True
        ).get("Item")
        if not item:
            return None
        plan = _plan(from_item(item))
        return self._with_done_items(plan), plan.done

    def _with_done_items(self, plan: TickPlan) -> TickPlan:
        pages = self._ddb.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :done)",
            ExpressionAttributeValues=to_item(
                {":pk": self._tick_pk(plan.tick), ":done": DONE_PREFIX}
            ),
            ConsistentRead=True,
        )
        legacy_done = plan.done  # done in the previous layout: its first budgets stand
        done = set(legacy_done)
        budgets = dict(plan.tag_budgets)
        owners: dict[Slice, dict[str, tuple[str, ...]]] = {}
        advice: dict[Slice, tuple[ProjectAdvice, ...]] = {}
        teams: dict[Slice, dict[str, str]] = {}
        team_budgets: dict[Slice, dict[str, Decimal]] = {}
        predictions: dict[Slice, tuple[PredictionCost, ...]] = {}
        cut: dict[Slice, int] = {}
        for item in items_of(pages):
            s = Slice.parse(item["sk"].removeprefix(DONE_PREFIX))
            done.add(s)
            if "budgets" in item and s not in legacy_done:
                budgets[s] = dict(item["budgets"])
            if "owners" in item:
                owners[s] = {p: tuple(names) for p, names in item["owners"].items()}
            if "advice" in item:
                advice[s] = tuple(_advice_of(a) for a in item["advice"])
            if "teams" in item:
                teams[s] = {p: str(t) for p, t in item["teams"].items()}
            if "team_budgets" in item:
                team_budgets[s] = {t: Decimal(str(v)) for t, v in item["team_budgets"].items()}
            if isinstance(item.get("predictions"), list):
                read = [_prediction_of(m) for m in item["predictions"]]
                predictions[s] = tuple(c for c in read if c is not None)
                lost = int(item.get("predictions_cut", 0)) + read.count(None)
                if lost:
                    cut[s] = lost
        return replace(
            plan,
            done=frozenset(done),
            tag_budgets=budgets,
            tag_owners=owners,
            advice=advice,
            tag_teams=teams,
            tag_team_budgets=team_budgets,
            predictions=predictions,
            predictions_cut=cut,
        )

    def due(self, since: datetime, now: datetime) -> list[TickPlan]:
        """Plans of times in [since, now] not aggregated yet whose deadline has passed
        (only those are read in full)."""
        pages = self._ddb.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :since AND :now",
            ExpressionAttributeValues=to_item(
                {":pk": self._pk, ":since": stamp(since), ":now": stamp(now)}
            ),
            ConsistentRead=True,
        )
        plans = [_plan(item) for item in items_of(pages)]
        return [
            self._with_done_items(p) for p in plans if p.aggregated_at is None and p.deadline <= now
        ]

    def claim_aggregation(self, tick: datetime, now: datetime, lease: timedelta) -> bool:
        return self._update_plan(
            tick,
            "SET #claimed = :now, #expires = :expires",
            "attribute_exists(pk) AND attribute_not_exists(#agg) "
            "AND (attribute_not_exists(#expires) OR #expires <= :now)",
            _AGGREGATION_NAMES,
            {":now": stamp(now), ":expires": stamp(now + lease)},
        )

    def confirm_aggregation(self, tick: datetime, now: datetime) -> None:
        # Refused: the plan expired meanwhile, nothing is left to mark.
        self._update_plan(
            tick,
            "SET #agg = if_not_exists(#agg, :now) REMOVE #expires",
            "attribute_exists(pk)",
            {"#agg": "aggregated_at", "#expires": "aggregation_expires"},
            {":now": stamp(now)},
        )

    def release_aggregation(self, tick: datetime, claimed_at: datetime) -> None:
        # Refused: not ours any more (the lease ran out and another run took it).
        self._update_plan(
            tick,
            "REMOVE #claimed, #expires",
            "attribute_not_exists(#agg) AND #claimed = :claimed",
            _AGGREGATION_NAMES,
            {":claimed": stamp(claimed_at)},
        )


def _plan(item: Mapping[str, Any]) -> TickPlan:
    attempts = {k: int(v) for k, v in item.get("attempts", {}).items()}
    failures = {
        Slice.parse(k): SliceFailure(v["code"], v["message"], attempts.get(k, 1))
        for k, v in item.get("errors", {}).items()
    }
    aggregated = item.get("aggregated_at")
    expires = item.get("aggregation_expires")
    return TickPlan(
        tick=parse_stamp(item["sk"]),
        expected=frozenset(Slice.parse(k) for k in item["expected"]),
        deadline=parse_stamp(item["deadline"]),
        done=frozenset(Slice.parse(k) for k in item.get("done", ())),
        failures=failures,
        aggregated_at=parse_stamp(aggregated) if aggregated else None,
        aggregation_expires=parse_stamp(expires) if expires and not aggregated else None,
        carried=frozenset(Slice.parse(k) for k in item.get("carried", ())),
        tag_budgets={
            Slice.parse(k.removeprefix(BUDGETS_PREFIX)): dict(value)
            for k, value in item.items()
            if k.startswith(BUDGETS_PREFIX)
        },
    )


class InMemorySliceBook:
    """The same contract in memory (tests/functional/test_slice_book_contract.py)."""

    def __init__(self) -> None:
        self._plans: dict[datetime, TickPlan] = {}
        #: Each time's aggregation claim (the plan mirrors its expiry).
        self._leases = InMemoryLeases()
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
        self,
        tick: datetime,
        s: Slice,
        tag_budgets: Mapping[str, Decimal] | None = None,
        tag_owners: Mapping[str, Sequence[str]] | None = None,
        advice: Sequence[ProjectAdvice] = (),
        tag_teams: Mapping[str, str] | None = None,
        tag_team_budgets: Mapping[str, Decimal] | None = None,
        predictions: Sequence[PredictionCost] | None = None,
    ) -> tuple[bool, TickPlan | None]:
        with self._lock:
            plan = self._plans.get(tick)
            if plan is None:
                return False, None
            newly = s not in plan.done
            if newly:
                budgets = dict(plan.tag_budgets)
                if tag_budgets:
                    budgets[s] = dict(tag_budgets)
                owners = dict(plan.tag_owners)
                if bounded := bounded_owners(tag_owners or {}):
                    owners[s] = bounded
                kept = dict(plan.advice)
                if pieces := bounded_advice(advice):
                    kept[s] = pieces
                teams, team_budgets = dict(plan.tag_teams), dict(plan.tag_team_budgets)
                mine, mine_budgets = bounded_teams(tag_teams or {}, tag_team_budgets or {})
                if mine:
                    teams[s] = mine
                if mine_budgets:
                    team_budgets[s] = mine_budgets
                costs, cut = dict(plan.predictions), dict(plan.predictions_cut)
                if predictions is not None:
                    costs[s], lost = bounded_predictions(predictions)
                    if lost:
                        cut[s] = lost
                plan = self._plans[tick] = replace(
                    plan,
                    done=plan.done | {s},
                    tag_budgets=budgets,
                    tag_owners=owners,
                    advice=kept,
                    tag_teams=teams,
                    tag_team_budgets=team_budgets,
                    predictions=costs,
                    predictions_cut=cut,
                )
            return newly, plan if plan.complete else None

    def remaining(self, tick: datetime) -> int | None:
        with self._lock:
            plan = self._plans.get(tick)
            return len(plan.expected - plan.done) if plan else None

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
                if between(t, since, now) and p.aggregated_at is None and p.deadline <= now
            ]

    def claim_aggregation(self, tick: datetime, now: datetime, lease: timedelta) -> bool:
        with self._lock:
            plan = self._plans.get(tick)
            # Not monotonic: the plan item's condition has no claim-time order.
            if plan is None or plan.aggregated_at is not None:
                return False
            if not self._leases.claim(tick, now, lease, monotonic=False):
                return False  # held, and its lease is running
            self._plans[tick] = replace(plan, aggregation_expires=now + lease)
            return True

    def confirm_aggregation(self, tick: datetime, now: datetime) -> None:
        with self._lock:
            plan = self._plans.get(tick)
            if plan is None or plan.aggregated_at is not None:
                return
            self._leases.confirm(tick, now)
            self._plans[tick] = replace(plan, aggregated_at=now, aggregation_expires=None)

    def release_aggregation(self, tick: datetime, claimed_at: datetime) -> None:
        with self._lock:
            plan = self._plans.get(tick)
            # Not ours any more: the lease ran out and another run took it.
            if plan is None or plan.aggregated_at is not None:
                return
            if self._leases.release(tick, claimed_at):
                self._plans[tick] = replace(plan, aggregation_expires=None)


def _advice_item(a: ProjectAdvice) -> dict[str, Any]:
    out: dict[str, Any] = {
        "code": a.advice.code.value,
        "resource": a.advice.resource,
        "usd": Decimal(format(a.advice.usd_per_month_saving, "f")),
        "why": a.advice.why or "-",
    }
    if a.project is not None:
        out["project"] = a.project
    return out


def _advice_of(m: Mapping[str, Any]) -> ProjectAdvice:
    return ProjectAdvice(
        m.get("project"), Advice(AdviceCode(m["code"]), m["resource"], m["usd"], m["why"])
    )


def _number(value: Decimal | None) -> Decimal | None:
    return None if value is None else Decimal(format(value, "f"))


def _prediction_item(c: PredictionCost) -> dict[str, Any]:
    """One variant's cost per prediction as a done item keeps it: the member's figures
    exactly (None stays NULL: unpriced, unknown or no traffic is never written as 0)."""
    return {
        "key": c.key,
        "endpoint": c.endpoint,
        "variant": c.variant,
        "instance_type": c.instance_type,
        "count": c.count,
        "usd_per_hour": _number(c.usd_per_hour),
        "invocations_per_hour": _number(c.invocations_per_hour),
        "usd_per_1000": _number(c.usd_per_1000),
        "status": c.status.value,
        "reason": c.reason,
        "hours": c.hours,
        # [day, hours, invocations, usd or None]: compact, 8 a variant.
        "days": [
            [d.day.isoformat(), d.hours, _number(d.invocations), _number(d.usd)] for d in c.days
        ],
    }


def _decimal(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def _prediction_of(m: Any) -> PredictionCost | None:
    """A kept variant back; None when the entry is not one this version reads (a status
    it does not know, a damaged item): counted as left out, never read as $0."""
    try:
        return PredictionCost(
            key=str(m["key"]),
            endpoint=str(m["endpoint"]),
            variant=str(m["variant"]),
            instance_type=None if m.get("instance_type") is None else str(m["instance_type"]),
            count=int(m["count"]),
            usd_per_hour=_decimal(m.get("usd_per_hour")),
            invocations_per_hour=_decimal(m.get("invocations_per_hour")),
            usd_per_1000=_decimal(m.get("usd_per_1000")),
            status=CostStatus(m["status"]),
            reason=str(m["reason"]),
            days=tuple(
                DayCost(date.fromisoformat(str(day)), int(hours), Decimal(str(inv)), _decimal(usd))
                for day, hours, inv, usd in m.get("days", [])
            ),
            hours=int(m.get("hours", 0)),
        )
    except (KeyError, TypeError, ValueError, ArithmeticError):
        return None
