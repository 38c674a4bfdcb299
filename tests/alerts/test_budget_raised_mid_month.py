"""Hostile tests of alerting: budget thresholds when the budget changes mid-month."""

from __future__ import annotations

from datetime import timedelta

from tests.unit.test_alert_service import STEP, T0, Guard, gpu, kinds


def test_raising_the_budget_mid_month_still_alerts_when_the_new_budget_is_spent() -> None:
    # GIVEN a project that spent 100% of its $1,000 budget and was told so
    guard = Guard()
    guard.fleet = [gpu("i-1", "p4d.24xlarge", budget="1000", hours=48)]
    guard.cycle(T0)
    assert "budget-threshold" in kinds(guard.sent)
    # WHEN its owner raises the budget to $5,000 (tag costguard:budget), as the alert
    # told them to, and the instance keeps running until that is spent too
    guard.fleet = [gpu("i-1", "p4d.24xlarge", budget="5000", hours=48)]
    guard.cycle(T0 + STEP)
    before = len(guard.sent)
    late = T0 + timedelta(hours=190)
    report = guard.scan(late)
    (llm,) = report.projects
    assert llm.month_to_date_usd > llm.budget_usd  # over the new budget
    new = list(guard.service().run(report, report.previous, late))
    # THEN the owner is told that the new budget is spent
    assert "budget-threshold" in kinds(new), (
        f"month-to-date ${llm.month_to_date_usd:.2f} is over the new ${llm.budget_usd} budget, "
        f"but no alert was sent (sent so far: {kinds(guard.sent[before:])})"
    )
