"""The ledger keeps each project's month by day, in the month totals it already kept:
on DynamoDB (moto) and in memory alike, and rows written before still read."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from costguard.adapters.memory import InMemoryLedger, ReadOnlyLedger
from costguard.domain.spend import Increment, Observation
from costguard.ports import CommitOutcome, Ledger, ScanCommit
from tests.functional.test_ledger_contract import T0, T1, T2, make_table
from tests.support.atomic import AtomicCalls

MONTH = "2026-11"


@pytest.fixture
def dynamodb() -> Iterator[tuple[object, Ledger]]:
    import boto3
    from moto import mock_aws

    from costguard.adapters.dynamodb import DynamoDbLedger

    with mock_aws():
        session = boto3.Session()
        make_table(session)
        client = session.client("dynamodb", region_name="us-east-1")
        yield client, DynamoDbLedger(AtomicCalls(client), "ledger")


@pytest.fixture(params=["memory", "dynamodb"])
def ledger(request: pytest.FixtureRequest) -> Ledger:
    if request.param == "memory":
        return InMemoryLedger()
    _, store = request.getfixturevalue("dynamodb")
    return store  # type: ignore[no-any-return]


def commit(
    prev: object, now: object, days: dict[int, str], project: str | None = "llm"
) -> ScanCommit:
    spent = {d: Decimal(v) for d, v in days.items()}
    total = sum(spent.values(), Decimal(0))
    obs = Observation("us-east-1/ec2-instance/i-1", project, Decimal(4), now, T0)  # type: ignore[arg-type]
    return ScanCommit(
        "acct",
        prev,
        now,
        {(project, MONTH): Increment(total, Decimal(0), spent)},
        [obs],  # type: ignore[arg-type]
    )


def test_each_commit_adds_to_its_days(ledger: Ledger) -> None:
    # GIVEN two scans, the second crossing midnight
    assert ledger.commit(commit(None, T0, {20: "2.5"})) is CommitOutcome.APPLIED
    assert ledger.commit(commit(T0, T1, {20: "1", 21: "3"})) is CommitOutcome.APPLIED
    # WHEN the month is read back
    row = ledger.month_totals("acct", MONTH)["llm"]
    # THEN each day holds what its scans added, and the days add up to the month
    assert row.days == {20: Decimal("3.5"), 21: Decimal(3)}
    assert row.usd == Decimal("6.5")
    assert row.undated_usd == 0


def test_unattributed_spend_keeps_its_days_too(ledger: Ledger) -> None:
    ledger.commit(commit(None, T0, {20: "7"}, project=None))
    assert ledger.month_totals("acct", MONTH)[None].days == {20: Decimal(7)}


def test_a_read_only_view_adds_this_scans_days_to_the_stored_ones(ledger: Ledger) -> None:
    # GIVEN a stored month, and a read-only local scan over it
    ledger.commit(commit(None, T0, {20: "2"}))
    view = ReadOnlyLedger(ledger)
    view.commit(commit(T0, T1, {20: "1", 21: "1"}))
    # THEN the view shows both, and the ledger only its own
    assert view.month_totals("acct", MONTH)["llm"].days == {20: Decimal(3), 21: Decimal(1)}
    assert ledger.month_totals("acct", MONTH)["llm"].days == {20: Decimal(2)}


def test_a_row_written_before_days_were_kept_still_reads(dynamodb: tuple[object, Ledger]) -> None:
    """Defect guarded: a totals row from the previous version (``usd``/``est``, no ``days``)
    must read as month-to-date only, and keep what it held when accrual resumes."""
    client, ledger = dynamodb
    from costguard.adapters.ddb import to_item
    from costguard.adapters.dynamodb import key_part, totals_shard

    k = key_part("llm")
    # GIVEN the row an older version wrote: $40 this month, no day map
    client.put_item(  # type: ignore[attr-defined]
        TableName="ledger",
        Item=to_item(
            {
                "pk": f"SCOPE#acct#MONTH#{MONTH}",
                "sk": f"TOTALS#{totals_shard(k):02d}",
                "month": MONTH,
                "projects": {k: {"usd": Decimal(40), "est": Decimal(0), "project": "llm"}},
            }
        ),
    )
    # WHEN it is read
    old = ledger.month_totals("acct", MONTH)["llm"]
    # THEN it is the month-to-date, with no days
    assert (old.usd, old.days) == (40, None)
    # WHEN this version accrues to it
    ledger.commit(commit(None, T2, {20: "5"}))
    row = ledger.month_totals("acct", MONTH)["llm"]
    # THEN the days begin, and the $40 stays, said to be in no day
    assert (row.usd, row.days, row.undated_usd) == (45, {20: Decimal(5)}, 40)


def test_a_month_of_days_for_hundreds_of_long_named_projects_fits(
    dynamodb: tuple[object, Ledger],
) -> None:
    """The shard size check counts the day maps: 31 days x 150 projects with 256-character
    CJK names (the documented maximum) still commit in one transaction."""
    _, ledger = dynamodb
    names = [f"{i:04d}" + "計" * 252 for i in range(150)]
    # A first scan on the 31st back-fills every day of the month, to the micro-dollar.
    day = {d: Decimal("123.456789") for d in range(1, 32)}
    total = sum(day.values(), Decimal(0))
    increments = {(p, "2026-12"): Increment(total, total, day) for p in names}
    obs = [
        Observation(f"us-east-1/ec2-instance/i-{i:017x}", p, Decimal(1), T0, T0)
        for i, p in enumerate(names)
    ]
    assert ledger.commit(ScanCommit("acct", None, T0, increments, obs)) is CommitOutcome.APPLIED
    months = ledger.month_totals("acct", "2026-12")
    assert len(months) == 150
    assert all(len(m.days or {}) == 31 for m in months.values())
