"""Advice digests in Organization mode (the done item, the digest window)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.domain.advice import Advice, AdviceCode
from costguard.domain.org import ProjectAdvice, Slice
from costguard.env import Env

HUB = "111111111111"
A = "222222222222"
T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
WHY = (
    "on-demand p4d.24xlarge has run 412 h; spot with checkpointing would save about "
    "$12,345.67/month (spot bucket 5-10 %, 70 % saving, per the catalog's spot table of "
    "2026-11-15; each interruption re-pays 30 min and half an hourly checkpoint)"
)


def test_a_slice_advising_many_projects_is_still_marked_done(aws: Any) -> None:
    """A shared training account with 60 projects of 25 on-demand GPU nodes each: the
    done item carries 25 pieces per project with no bound on projects, goes over
    DynamoDB's 400 KB, and mark_done raises. The slice was scanned and committed, yet it
    is never done: every retry fails the same way, it is dead-lettered, and the digest
    hour's times report the account as "could not scan" every day, without its advice."""
    from costguard.adapters.slices import DynamoDbSliceBook
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    book = DynamoDbSliceBook(aws.client("dynamodb", region_name="us-east-1"), "ledger", HUB)
    s = Slice(A, "us-east-1")
    book.plan(T0, [s], T0 + timedelta(minutes=10))
    # GIVEN the slice's scan advised 25 instances in each of 60 projects
    advice = [
        ProjectAdvice(
            f"project-{p:02d}",
            Advice(
                AdviceCode.SPOT_WITH_CHECKPOINTING,
                f"{A}/us-east-1/ec2-instance/i-{p:08x}{i:09x}",
                Decimal("12345.678901234567890123456789"),
                WHY,
            ),
        )
        for p in range(60)
        for i in range(25)
    ]
    # WHEN the consumer marks it done with its advice
    newly, plan = book.mark_done(T0, s, advice=advice)
    # THEN it is done (the plan completes), with as much advice as one item holds
    assert newly and plan is not None and plan.complete
    assert plan.advice[s]


@pytest.mark.parametrize("rate", ["2 hours", "1 day"])
def test_an_org_scan_every_few_hours_keeps_advice_on_some_time_of_each_day(
    aws: Any, monkeypatch: pytest.MonkeyPatch, rate: str
) -> None:
    """`scanRate` may be up to `1 day`, and the hub's schedule is a rate expression: its
    times fall at the minute of the deployment (here :37), not on the hour. The slices keep
    their advice only on times within one hour of the digest hour, so with a 2-hour or daily
    scan no time of the day keeps any, and no Organization advice digest is ever sent
    (`in_digest_window` takes the scan period for exactly this; the handler passes 1 h)."""
    from costguard.settings import Settings
    from costguard.wiring.org import build_slice_work
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    for key, value in {
        Env.REGIONS: "us-east-1",
        Env.TABLE_NAME: "ledger",
        Env.SCOPE: HUB,
        Env.ORG_ACCOUNTS: A,
        Env.ORG_ID: "o-abc1234567",
        # (the stack gives every Lambda its scan rate)
        Env.SCAN_RATE: rate,
    }.items():
        monkeypatch.setenv(key, value)
    settings = Settings.from_env(os.environ)
    period = timedelta(hours=2) if rate == "2 hours" else timedelta(days=1)
    # GIVEN the hub's scan times of one day, every `rate` at :37 past 09:00 UTC
    first = T0.replace(hour=9, minute=37)
    ticks = [first + n * period for n in range(int(timedelta(days=1) / period))]
    # WHEN the scan consumer decides which times keep their advice (the default digest hour, 8 UTC)
    work = build_slice_work(settings, aws)
    assert settings.digest_hour_utc == 8 and settings.advice_alerts
    kept = [t for t in ticks if work._keeps_advice(t)]
    # THEN at least one time of the day keeps it, so the day's digest can be sent
    assert kept
