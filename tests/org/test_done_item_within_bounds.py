"""A done item carries a slice's advice, owners, teams and cost per prediction, each
bounded so that the item stays under DynamoDB's 400 KB. Each bound is met here at once,
with names as long as a project (256 characters) and an endpoint (63) may be."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import boto3
import pytest
from moto import mock_aws

from costguard.adapters.slices import DynamoDbSliceBook
from costguard.domain.advice import Advice, AdviceCode
from costguard.domain.org import (
    MAX_ADVICE_PER_PROJECT,
    MAX_ADVICE_PIECES,
    MAX_OWNER_ENTRIES,
    MAX_OWNERS,
    MAX_PREDICTIONS,
    MAX_REASON_CHARS,
    MAX_WHY_CHARS,
    ProjectAdvice,
    Slice,
)
from costguard.domain.predictions import CostStatus, DayCost, PredictionCost
from costguard_demo.plumbing import create_ledger_table

HUB = "999999999999"
SLICE = Slice("111111111111", "us-east-1")
TICK = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
def book() -> Iterator[DynamoDbSliceBook]:
    with mock_aws():
        session = boto3.Session()
        create_ledger_table(session, "ledger", "us-east-1")
        yield DynamoDbSliceBook(session.client("dynamodb", region_name="us-east-1"), "ledger", HUB)


def project(n: int) -> str:
    """A project name of 256 characters, the longest the tag rules allow."""
    return f"p{n:03d}-" + "x" * 251


def variant(n: int) -> PredictionCost:
    """An endpoint variant as a member's scan reports it: 63-character names, a reason of
    MAX_REASON_CHARS, 8 days."""
    endpoint = f"e{n:03d}" + "e" * 59
    name = f"v{n:03d}" + "v" * 59
    return PredictionCost(
        key=f"{SLICE.account}/{SLICE.region}/sagemaker-endpoint/{endpoint}/{name}",
        endpoint=endpoint,
        variant=name,
        instance_type="ml.g5.12xlarge",
        count=2,
        usd_per_hour=Decimal("14.1837"),
        invocations_per_hour=Decimal("1408.333333"),
        usd_per_1000=Decimal("10.071270"),
        status=CostStatus.PRICED,
        reason="r" * MAX_REASON_CHARS,
        days=tuple(
            DayCost(date(2026, 11, 12) + timedelta(days=d), 24, Decimal(33800), Decimal("340.41"))
            for d in range(8)
        ),
        hours=24,
    )


def test_a_done_item_at_every_bound_at_once_stays_under_400_kb(book: DynamoDbSliceBook) -> None:
    """Defect: each part of a done item is bounded on its own (advice 200 pieces "x ~0.5 KB",
    owners ~100 KB, teams 64 KB, cost per prediction ~110 KB), but an advice piece carries
    its project's name (up to 256 characters) and its resource key, ~0.78 KB a piece (155 KB,
    measured): at every bound at once the item was ~420 KB, past DynamoDB's 400 KB, the put
    was refused (ValidationException) and the slice never marked done, whatever the retries. Its account-region's spend,
    alerts and cost per prediction drop out of the Organization roll-up."""
    # GIVEN a slice whose scan advised 8 projects of 256-character names 25 times each
    # (MAX_ADVICE_PIECES in all), each piece on an endpoint key, its reason clipped
    projects = [project(n) for n in range(MAX_ADVICE_PIECES // MAX_ADVICE_PER_PROJECT)]
    advice = [
        ProjectAdvice(
            p,
            Advice(
                AdviceCode.OVERSIZED_ENDPOINT,
                variant(i * 100 + j).key,
                Decimal("1234.56"),
                "w" * MAX_WHY_CHARS,
            ),
        )
        for i, p in enumerate(projects)
        for j in range(MAX_ADVICE_PER_PROJECT)
    ]
    # and MAX_OWNER_ENTRIES owners of 254-character addresses, MAX_OWNERS a project
    owner_projects = [project(100 + n) for n in range(MAX_OWNER_ENTRIES // MAX_OWNERS)]
    owners = {
        p: [f"o{i:02d}{n:03d}" + "a" * 238 + "@example.com" for n in range(MAX_OWNERS)]
        for i, p in enumerate(owner_projects)
    }
    # and the teams of 300 projects (more than the done item's 64 KB of teams keeps)
    teams = {project(200 + n): "t" * 256 for n in range(300)}
    # and MAX_PREDICTIONS endpoint variants
    predictions = [variant(n) for n in range(MAX_PREDICTIONS)]
    book.plan(TICK, [SLICE], TICK + timedelta(minutes=10))
    # WHEN the slice is marked done
    newly, plan = book.mark_done(
        TICK,
        SLICE,
        tag_owners=owners,
        advice=advice,
        tag_teams=teams,
        predictions=predictions,
    )
    # THEN the done item is written, and the plan is complete with it
    assert newly is True
    assert plan is not None and SLICE in plan.done
