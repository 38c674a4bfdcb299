"""Hostile tests of the ledger: claims, leases, large months, and the fake's fidelity."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.spend import Increment, Observation
from costguard.ports import CommitOutcome, Ledger, ScanCommit
from tests.functional.test_ledger_contract import T0, ledger  # noqa: F401 - the fixture
from tests.support.atomic import AtomicCalls

LEASE = timedelta(minutes=15)


def test_a_holder_whose_lease_ran_out_cannot_release_the_next_holders_claim(
    ledger: Ledger,  # noqa: F811
) -> None:
    # GIVEN run A claimed an action, then stalled past its lease, and run B claimed it
    assert ledger.claim("action", "stop/i-1", T0, LEASE, {"run": "A"})
    b_at = T0 + LEASE + timedelta(minutes=1)
    assert ledger.claim("action", "stop/i-1", b_at, LEASE, {"run": "B"})
    # WHEN A wakes up, fails, and releases "its" claim while B is still working
    ledger.release("action", "stop/i-1", b_at + timedelta(minutes=1))
    # THEN B's claim still holds: a third run may not claim the same work
    third = ledger.claim("action", "stop/i-1", b_at + timedelta(minutes=2), LEASE, {"run": "C"})
    assert third is False, "A's stale release freed B's live claim; C now does the work too"


@pytest.fixture
def dynamodb() -> Iterator[Ledger]:
    import boto3
    from moto import mock_aws

    from costguard.adapters.dynamodb import DynamoDbLedger
    from tests.functional.test_ledger_contract import make_table

    with mock_aws():
        session = boto3.Session()
        make_table(session)
        yield DynamoDbLedger(
            AtomicCalls(session.client("dynamodb", region_name="us-east-1")), "ledger"
        )


def many_projects_commit(n: int) -> ScanCommit:
    # 256-character project names (the documented maximum), in CJK: 768 bytes each
    names = [f"{i:04d}" + "計" * 252 for i in range(n)]
    increments = {(p, "2026-11"): Increment(Decimal("1.5"), Decimal(0)) for p in names}
    obs = [
        Observation(f"us-east-1/ec2-instance/i-{i:017x}", p, Decimal("1.5"), T0, T0)
        for i, p in enumerate(names)
    ]
    return ScanCommit("acct", None, T0, increments, obs)


@pytest.mark.parametrize("store", ["memory", "dynamodb"])
def test_a_month_with_many_long_named_projects_still_accrues(
    store: str, request: pytest.FixtureRequest
) -> None:
    # GIVEN one scan that saw 450 projects with valid 256-character names (anyone who
    # may tag an instance can mint a new project every scan)
    store_: Ledger = InMemoryLedger() if store == "memory" else request.getfixturevalue("dynamodb")
    # WHEN it commits
    outcome = store_.commit(many_projects_commit(450))
    # THEN the spend is recorded, on DynamoDB as in the in-memory fake
    assert outcome is CommitOutcome.APPLIED
    assert len(store_.month_totals("acct", "2026-11")) == 450
