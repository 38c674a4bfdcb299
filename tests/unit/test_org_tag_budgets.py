"""Settling an Organization's tagged budgets across slices (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.domain.findings import FindingCode
from costguard.domain.org import Slice, TickPlan, settle_tag_budgets

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def _plan(budgets: dict[Slice, dict[str, Decimal]]) -> TickPlan:
    slices = frozenset(budgets)
    return TickPlan(T0, slices, T0 + timedelta(minutes=10), slices, tag_budgets=budgets)


def test_the_lowest_tagged_budget_applies_and_a_disagreement_names_the_slices() -> None:
    # GIVEN vision tagged 80 in one account, 50 in seven slices of others; llm tagged once
    low = {Slice(f"{n:012d}", "us-east-1"): {"vision": Decimal(50)} for n in range(1, 8)}
    high = {Slice("999999999999", "us-west-2"): {"vision": Decimal(80), "llm": Decimal(9)}}
    # WHEN they are settled
    budgets, findings = settle_tag_budgets(_plan(low | high), configured=())
    # THEN the lowest applies; one finding names the slices (five, then a count)
    assert budgets == {"vision": Decimal(50), "llm": Decimal(9)}
    (conflict,) = findings
    assert conflict.code is FindingCode.BUDGET_CONFLICT and conflict.resource == "project/vision"
    assert "999999999999/us-west-2" in conflict.message and "and 2 more" in conflict.message
    assert "the lowest, 50 USD, applies" in conflict.message


def test_a_project_in_the_central_table_is_left_to_the_table() -> None:
    plan = _plan(
        {
            Slice("111111111111", "us-east-1"): {"vision": Decimal(50)},
            Slice("222222222222", "us-east-1"): {"vision": Decimal(80)},
        }
    )
    assert settle_tag_budgets(plan, configured=("vision",)) == ({}, [])
    assert settle_tag_budgets(_plan({}), configured=()) == ({}, [])
