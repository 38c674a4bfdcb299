"""One contract over both slice books: plans, exactly-once "done", one aggregation claim."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.dynamodb import stamp
from costguard.adapters.slices import DynamoDbSliceBook, InMemorySliceBook
from costguard.domain.org import Slice
from tests.support.atomic import AtomicCalls

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
A, B = Slice("222222222222", "us-east-1"), Slice("333333333333", "eu-west-1")


@pytest.fixture(params=["memory", "dynamodb"])
def book(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemorySliceBook()
        return
    import boto3
    from moto import mock_aws

    from costguard_demo.plumbing import create_ledger_table

    with mock_aws():
        session = boto3.Session()
        create_ledger_table(session, "ledger", "us-east-1")
        client = AtomicCalls(session.client("dynamodb", region_name="us-east-1"))
        yield DynamoDbSliceBook(client, "ledger", "111111111111")


def test_a_time_is_planned_once(book: Any) -> None:
    assert book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    assert not book.plan(T0, [A], T0 + timedelta(minutes=5))
    plan = book.get(T0)
    assert plan.expected == {A, B} and plan.deadline == T0 + timedelta(minutes=10)
    assert not book.plan(T0 + timedelta(minutes=1), [], T0)  # nothing to plan


def test_a_slice_is_marked_done_once_even_by_racing_consumers(book: Any) -> None:
    book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    start = threading.Barrier(8)
    wins: list[bool] = []

    def mark() -> None:
        start.wait()
        wins.append(book.mark_done(T0, A)[0])

    threads = [threading.Thread(target=mark) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 7 + [True]
    newly, plan = book.mark_done(T0, B)
    assert newly and plan.complete


def test_a_slice_without_plan_is_not_done(book: Any) -> None:
    assert book.mark_done(T0, A) == (False, None)
    book.mark_failed(T0, A, "AccessDenied", "x")  # no plan: nothing to record, no error
    assert book.remaining(T0) is None and book.get(T0) is None


def test_racing_duplicates_count_each_slice_down_once_and_never_below_zero(book: Any) -> None:
    # GIVEN a plan of 6 slices, each delivered 4 times to consumers released together
    slices = [Slice(f"{444444444440 + i}", "us-east-1") for i in range(6)]
    book.plan(T0, slices, T0 + timedelta(minutes=10))
    start = threading.Barrier(24)
    results: list[tuple[Slice, bool, Any]] = []
    lock = threading.Lock()

    def mark(s: Slice) -> None:
        start.wait()
        newly, plan = book.mark_done(T0, s, {"p": Decimal("1")})
        with lock:
            results.append((s, newly, plan))

    threads = [threading.Thread(target=mark, args=(s,)) for s in slices for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # THEN each slice is newly done exactly once, the counter stops at 0 (not below)
    assert sorted(s.key for s, newly, _ in results if newly) == sorted(s.key for s in slices)
    assert book.remaining(T0) == 0
    # AND at least the call that completed it got the complete plan; no call an incomplete one
    plans = [plan for _, _, plan in results if plan is not None]
    assert plans and all(p.complete and p.done == set(slices) for p in plans)
    # AND a late duplicate changes nothing
    assert book.mark_done(T0, slices[0])[0] is False and book.remaining(T0) == 0


def test_a_slice_that_was_not_planned_never_completes_a_plan_early(book: Any) -> None:
    # GIVEN a plan of A and B, and a stray message for C (not planned at this time)
    book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    c = Slice("444444444444", "us-west-2")
    book.mark_done(T0, c)
    # WHEN A is done: the plan still misses B, whatever a counter says
    assert book.mark_done(T0, A) == (True, None)
    # THEN B completes it
    newly, plan = book.mark_done(T0, B)
    assert newly and plan.complete and plan.missing == ()


def test_failures_count_attempts_and_keep_the_last_error(book: Any) -> None:
    book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    book.mark_failed(T0, B, "Throttling", "slow down")
    book.mark_failed(T0, B, "AccessDenied", "é" * 1000)
    failure = book.get(T0).failures[B]
    assert (failure.code, failure.attempts, len(failure.message)) == ("AccessDenied", 2, 300)


LEASE = timedelta(minutes=15)


def test_aggregation_is_claimed_once_and_due_only_after_the_deadline(book: Any) -> None:
    book.plan(T0, [A], T0 + timedelta(minutes=10))
    assert book.due(T0 - timedelta(hours=1), T0 + timedelta(minutes=9)) == []
    (due,) = book.due(T0 - timedelta(hours=1), T0 + timedelta(minutes=10))
    assert due.tick == T0
    assert book.claim_aggregation(T0, T0 + timedelta(minutes=10), LEASE)
    assert not book.claim_aggregation(T0, T0 + timedelta(minutes=11), LEASE)
    book.confirm_aggregation(T0, T0 + timedelta(minutes=12))
    assert book.get(T0).aggregated_at == T0 + timedelta(minutes=12)
    assert book.due(T0 - timedelta(hours=1), T0 + timedelta(hours=1)) == []
    # a confirmed time is never claimable again, whatever the lease
    assert not book.claim_aggregation(T0, T0 + timedelta(days=1), LEASE)
    assert not book.claim_aggregation(T0 + timedelta(minutes=1), T0, LEASE)  # no plan


def test_a_claimed_but_unconfirmed_aggregation_is_due_and_claimable_after_its_lease(
    book: Any,
) -> None:
    # GIVEN a time claimed at its deadline by a holder that then crashed (never confirmed)
    book.plan(T0, [A], T0 + timedelta(minutes=10))
    held_at = T0 + timedelta(minutes=10)
    assert book.claim_aggregation(T0, held_at, LEASE)
    assert book.get(T0).aggregated_at is None
    # THEN the sweep still lists it, but nobody takes it while the lease runs
    (due,) = book.due(T0 - timedelta(hours=1), held_at + timedelta(minutes=5))
    assert due.tick == T0 and due.aggregation_expires == held_at + LEASE
    assert not book.claim_aggregation(T0, held_at + LEASE - timedelta(seconds=1), LEASE)
    # AND once it has run out, one caller takes it over
    assert book.claim_aggregation(T0, held_at + LEASE, LEASE)
    assert not book.claim_aggregation(T0, held_at + LEASE, LEASE)
    # AND the crashed holder, back late, cannot free the claim of the run that took over
    book.release_aggregation(T0, held_at)
    assert not book.claim_aggregation(T0, held_at + LEASE + timedelta(minutes=1), LEASE)
    # AND the holder's own release makes it claimable at once
    book.release_aggregation(T0, held_at + LEASE)
    assert book.get(T0).aggregation_expires is None
    assert book.claim_aggregation(T0, held_at + LEASE + timedelta(minutes=1), LEASE)


def test_racing_sweeps_claim_an_aggregation_once(book: Any) -> None:
    book.plan(T0, [A], T0 + timedelta(minutes=10))
    start = threading.Barrier(6)
    wins: list[bool] = []

    def claim() -> None:
        start.wait()
        wins.append(book.claim_aggregation(T0, T0 + timedelta(minutes=10), LEASE))

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 5 + [True]


def test_a_plan_carries_the_empty_slices_it_rolls_up_without_awaiting_them(book: Any) -> None:
    # GIVEN a plan of A, carrying B (empty now, with spend earlier this month) and A again
    assert book.plan(T0, [A], T0 + timedelta(minutes=10), [B, A])
    plan = book.get(T0)
    # THEN B is rolled up but not awaited: A alone completes the plan
    assert plan.carried == {B} and plan.rolled_up == {A, B}
    _newly, plan = book.mark_done(T0, A)
    assert plan.complete


def test_a_done_slice_keeps_the_owners_its_scan_found_tagged_once_and_bounded(
    book: Any,
) -> None:
    from costguard.domain.org import MAX_OWNERS

    # GIVEN a plan of A and B
    book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    # WHEN A is done with its projects' owners (odd Unicode, blanks, repeats, too many,
    # one absurdly long), then redelivered with others
    many = [f"p{i}@example.com" for i in range(MAX_OWNERS + 5)]
    owners = {
        "vision": ["ana@example.com", " ", "ana@example.com", "ñandú@例え.jp"],
        "llm": many,
        "empty": ["", "  "],
        "long": ["x" * 1000],
    }
    book.mark_done(T0, A, None, owners)
    book.mark_done(T0, A, None, {"vision": ["mallory@example.com"]})
    _newly, plan = book.mark_done(T0, B)
    # THEN the plan holds A's first owners only, blanks and repeats dropped, bounded
    assert plan.tag_owners == {
        A: {
            "vision": ("ana@example.com", "ñandú@例え.jp"),
            "llm": tuple(many[:MAX_OWNERS]),
            "long": ("x" * 254,),
        }
    }
    assert book.get(T0).tag_owners == plan.tag_owners


def test_a_done_slice_keeps_its_advice_bounded_per_project(book: Any) -> None:
    from costguard.domain.advice import Advice, AdviceCode
    from costguard.domain.org import MAX_ADVICE_PER_PROJECT, MAX_WHY_CHARS, ProjectAdvice

    def piece(project: str | None, n: int, why: str = "spot") -> ProjectAdvice:
        return ProjectAdvice(
            project,
            Advice(AdviceCode.SPOT_WITH_CHECKPOINTING, f"r-{n}", Decimal(n) / 3, why),
        )

    book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    # WHEN A is done with 30 pieces for llm, one unattributed, one with a huge explanation
    pieces = [piece("llm", n) for n in range(1, 31)]
    pieces += [piece(None, 7, "é 漢"), piece("cv", 2, "x" * 5000)]
    book.mark_done(T0, A, None, None, pieces)
    _newly, plan = book.mark_done(T0, B)
    # THEN the plan holds the 25 largest of llm, exactly, and the others, clipped
    kept = plan.advice[A]
    llm = [a for a in kept if a.project == "llm"]
    assert len(llm) == MAX_ADVICE_PER_PROJECT
    assert [a.advice.resource for a in llm][:2] == ["r-30", "r-29"]
    assert llm[0].advice.usd_per_month_saving == Decimal(30) / 3
    assert [a for a in kept if a.project is None] == [piece(None, 7, "é 漢")]
    (cv,) = [a for a in kept if a.project == "cv"]
    assert len(cv.advice.why) == MAX_WHY_CHARS
    assert B not in plan.advice and book.get(T0).advice == plan.advice


def test_a_done_slice_keeps_the_budgets_its_scan_found_tagged_once(book: Any) -> None:
    # GIVEN a plan of A and B
    book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    # WHEN A is done with the budgets tagged on its projects, then redelivered with others,
    # and B is done without any
    budgets = {"vision": Decimal("50"), "llm-é 漢": Decimal("12000.5"), "big": Decimal("1E+6")}
    newly, plan = book.mark_done(T0, A, budgets)
    assert newly and plan is None  # B is still missing: no plan to aggregate
    assert book.get(T0).tag_budgets == {A: budgets}
    assert book.mark_done(T0, A, {"vision": Decimal("1")}) == (False, None)
    _newly, plan = book.mark_done(T0, B, {})
    # THEN the plan holds A's first budgets only (exactly, in any unit), and B's none
    assert book.get(T0).tag_budgets == {A: budgets} == plan.tag_budgets
    # AND a redelivery after completion is told the (complete) plan, not "newly"
    assert book.mark_done(T0, B, {"vision": Decimal("2")}) == (False, plan)


class _BilledWrites:
    """A DynamoDB client that bills each write as DynamoDB does: on the larger of the
    target item before and after (read aside, unbilled), per started KB; and keeps the
    size of each write's response (what the caller parses)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.units: list[int] = []
        self.response_bytes: list[int] = []
        self.metering = True

    def _size(self, table: str, key: dict[str, Any]) -> int:
        from benchmarks.guard_bill import _size

        item = self._client.get_item(TableName=table, Key=key).get("Item")
        return _size(item) if item else 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name not in {"put_item", "update_item"} or not self.metering:
            return attr

        def call(**kwargs: Any) -> Any:
            import json
            import math

            key = kwargs.get("Key") or {k: kwargs["Item"][k] for k in ("pk", "sk")}
            before = self._size(kwargs["TableName"], key)
            try:
                response = attr(**kwargs)
            finally:
                after = self._size(kwargs["TableName"], key)
                self.units.append(max(1, math.ceil(max(before, after) / 1024)))
            self.response_bytes.append(len(json.dumps(response.get("Attributes", {}))))
            return response

        return call


def test_marking_a_slice_done_costs_the_same_in_a_plan_of_2000_slices() -> None:
    # GIVEN a plan of 2,000 account-regions on DynamoDB (moto), each with a tagged budget
    import boto3
    from moto import mock_aws

    from costguard_demo.plumbing import create_ledger_table

    slices = [Slice(f"{100_000_000_000 + i:012d}", "ap-southeast-2") for i in range(2000)]
    with mock_aws():
        session = boto3.Session()
        create_ledger_table(session, "ledger", "us-east-1")
        billed = _BilledWrites(session.client("dynamodb", region_name="us-east-1"))
        book = DynamoDbSliceBook(billed, "ledger", "111111111111")
        assert book.plan(T0, slices, T0 + timedelta(minutes=10))
        # WHEN every slice is marked done (every 40th metered, the last one too)
        per_mark: list[tuple[int, int]] = []
        for i, s in enumerate(slices):
            billed.metering = i % 40 == 0 or i == len(slices) - 1
            billed.units.clear()
            billed.response_bytes.clear()
            newly, plan = book.mark_done(T0, s, {"vision": Decimal("50")})
            assert newly
            if billed.metering:
                per_mark.append((sum(billed.units), max(billed.response_bytes)))
        # THEN each mark cost the same small write units (a 1 KB put and a 1 KB counter
        # update), the first as the last, and none came back with the plan
        assert len(per_mark) == 51 and {units for units, _ in per_mark} == {2}
        assert max(size for _, size in per_mark) < 100
        # AND the last one completed it, with every slice and its budget read back
        assert plan is not None and plan.complete and len(plan.done) == 2000
        assert len(plan.tag_budgets) == 2000 and book.remaining(T0) == 0


class _CrashOnCounter:
    """A client that dies once between a slice's done put and the counter's decrement."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.crash = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name != "update_item":
            return attr

        def call(**kwargs: Any) -> Any:
            if self.crash and kwargs["Key"]["sk"]["S"] == "remaining":
                self.crash = False
                raise TimeoutError("the consumer was killed")
            return attr(**kwargs)

        return call


@pytest.fixture
def ddb() -> Iterator[Any]:
    import boto3
    from moto import mock_aws

    from costguard_demo.plumbing import create_ledger_table

    with mock_aws():
        session = boto3.Session()
        create_ledger_table(session, "ledger", "us-east-1")
        yield session.client("dynamodb", region_name="us-east-1")


def test_a_crash_between_done_and_the_count_is_aggregated_at_the_deadline(ddb: Any) -> None:
    # GIVEN a plan of A and B; A is done, and B's consumer dies after B's done put
    client = _CrashOnCounter(ddb)
    book = DynamoDbSliceBook(client, "ledger", "111111111111")
    book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    book.mark_done(T0, A)
    client.crash = True
    with pytest.raises(TimeoutError):
        book.mark_done(T0, B, {"vision": Decimal("7")})
    # WHEN its message comes back: a duplicate, and the counter never reaches 0
    assert book.mark_done(T0, B) == (False, None)
    assert book.remaining(T0) == 1
    # THEN the deadline sweep lists the time, read in full: B is done, nothing is missing
    (due,) = book.due(T0 - timedelta(hours=1), T0 + timedelta(minutes=10))
    assert due.complete and due.done == {A, B} and due.tag_budgets == {B: {"vision": 7}}
    assert book.get(T0) == due


def test_a_plan_of_the_previous_layout_still_reads_and_completes(ddb: Any) -> None:
    # GIVEN a plan written before the done items: A done in its string set, with budgets
    ddb.put_item(
        TableName="ledger",
        Item={
            "pk": {"S": "ORG#111111111111#TICKS"},
            "sk": {"S": stamp(T0)},
            "expected": {"SS": [A.key, B.key]},
            "deadline": {"S": stamp(T0 + timedelta(minutes=10))},
            "errors": {"M": {}},
            "attempts": {"M": {}},
            "done": {"SS": [A.key]},
            f"budgets/{A.key}": {"M": {"vision": {"N": "50"}}},
        },
    )
    book = DynamoDbSliceBook(ddb, "ledger", "111111111111")
    # WHEN A comes again (with other budgets), then B
    assert book.mark_done(T0, A, {"vision": Decimal("1")}) == (False, None)
    newly, plan = book.mark_done(T0, B, {"llm": Decimal("3")})
    # THEN B completes it, with both slices' budgets
    assert newly and plan.complete and plan.done == {A, B}
    assert plan.tag_budgets == {A: {"vision": 50}, B: {"llm": 3}}


def test_a_done_slice_keeps_its_teams_and_team_budgets_and_a_duplicate_changes_none(
    book: Any,
) -> None:
    # GIVEN a time of two slices
    book.plan(T0, [A, B], T0 + timedelta(minutes=10))
    # WHEN A is done with its projects' teams and a tagged team budget, then A again with
    # other teams (a duplicate), then B with its own
    book.mark_done(
        T0, A, tag_teams={"vision": "research"}, tag_team_budgets={"research": Decimal("900.5")}
    )
    book.mark_done(T0, A, tag_teams={"vision": "platform"})
    _newly, plan = book.mark_done(T0, B, tag_teams={"llm": "research", "ops": "platform"})
    # THEN the complete plan carries each slice's teams as first marked
    assert plan.tag_teams == {A: {"vision": "research"}, B: {"llm": "research", "ops": "platform"}}
    assert plan.tag_team_budgets == {A: {"research": Decimal("900.5")}}
