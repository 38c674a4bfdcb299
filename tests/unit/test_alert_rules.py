from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from costguard.domain.alerts import (
    MAX_LISTED_RESOURCES,
    AlertKind,
    AlertResource,
    AlertSeverity,
    AnomalyPolicy,
    ProjectNumbers,
    baseline_rate,
    budget_alerts,
    findings_digest,
    has_recovered,
    is_spike,
    recovery_alert,
    root_cause,
    shrink_steps,
    unattributed_alert,
)
from costguard.domain.findings import Finding, FindingCode, Severity
from tests.support.clock import MIDDAY

POLICY = AnomalyPolicy()


def project(
    mtd: str, forecast: str, budget: str | None = "1000", rate: str = "1"
) -> ProjectNumbers:
    return ProjectNumbers(
        "vision",
        Decimal(budget) if budget else None,
        Decimal(mtd),
        Decimal(forecast),
        Decimal(rate),
    )


def test_crossing_thresholds_claims_all_but_sends_only_the_highest() -> None:
    (alert,) = [
        a
        for a in budget_alerts(project("850", "900"), (50, 80, 100), MIDDAY)
        if a.kind is AlertKind.BUDGET_THRESHOLD
    ]
    assert alert.title == "vision: 80% of the monthly budget spent"
    assert alert.dedupe == (
        "budget/vision/2026-11/1000.00/mtd-50",
        "budget/vision/2026-11/1000.00/mtd-80",
    )
    assert alert.severity is AlertSeverity.WARNING


def test_forecast_over_budget_is_its_own_alert_once_a_month() -> None:
    alerts = budget_alerts(project("100", "1500"), (50, 80, 100), MIDDAY)
    (forecast,) = [a for a in alerts if a.kind is AlertKind.BUDGET_FORECAST]
    assert forecast.dedupe == ("budget/vision/2026-11/1000.00/forecast-100",)
    assert "$500.00 over" in forecast.summary


def test_no_budget_no_budget_alerts() -> None:
    assert budget_alerts(project("5000", "9000", budget=None), (50, 80, 100), MIDDAY) == []


def test_severity_follows_the_money() -> None:
    small = budget_alerts(project("1100", "1200"), (100,), MIDDAY)[0]
    big = budget_alerts(project("60000", "90000", budget="50000"), (100,), MIDDAY)[0]
    assert small.severity is AlertSeverity.CRITICAL  # 100% is always critical
    assert big.severity is AlertSeverity.CRITICAL
    assert budget_alerts(project("510", "600"), (50,), MIDDAY)[0].severity is AlertSeverity.INFO


def history(
    rates: list[str], step: timedelta = timedelta(minutes=15)
) -> list[tuple[datetime, Decimal]]:
    return [(MIDDAY - step * (len(rates) - i), Decimal(r)) for i, r in enumerate(rates)]


def test_a_new_p5_on_a_steady_project_is_a_spike() -> None:
    baseline, n = baseline_rate(history(["12.4"] * 20), MIDDAY, POLICY)  # type: ignore[misc]
    assert (baseline, n) == (Decimal("12.4"), 20)
    assert is_spike(baseline, Decimal("12.4") + Decimal("55.04"), POLICY)


def test_steady_spend_noise_and_small_absolute_changes_are_quiet() -> None:
    assert not is_spike(Decimal("120"), Decimal("135"), POLICY)  # +12%: noise
    assert not is_spike(Decimal("0.50"), Decimal("3.00"), POLICY)  # 6x but only +$2.50/h
    assert not is_spike(Decimal("500"), Decimal("560"), POLICY)  # +$60/h but only 1.12x


def test_baseline_is_robust_to_a_one_off_sample() -> None:
    baseline, _ = baseline_rate(history(["10", "10", "300", "10", "10"]), MIDDAY, POLICY)  # type: ignore[misc]
    assert baseline == Decimal(10)


def test_too_little_history_judges_nothing() -> None:
    assert baseline_rate(history(["10", "10"]), MIDDAY, POLICY) is None


def test_recovery_when_back_near_the_baseline() -> None:
    assert has_recovered(Decimal(10), Decimal(12), POLICY)
    assert not has_recovered(Decimal(10), Decimal(60), POLICY)


def test_root_cause_ranks_new_and_costlier_resources_by_added_rate() -> None:
    since = MIDDAY - timedelta(hours=6)
    current = [
        AlertResource(
            "us-east-1/ec2-instance/i-old",
            "ec2-instance",
            "us-east-1",
            "g5.xlarge",
            Decimal("1.006"),
        ),
        AlertResource(
            "us-east-1/ec2-instance/i-p5",
            "ec2-instance",
            "us-east-1",
            "p5.48xlarge",
            Decimal("55.04"),
            "dave@example.com",
        ),
        AlertResource(
            "us-east-1/sagemaker-endpoint/ep/a",
            "sagemaker-endpoint",
            "us-east-1",
            "ml.g5.xlarge",
            Decimal("4.224"),
        ),
    ]
    previous = {
        "us-east-1/ec2-instance/i-old": Decimal("1.006"),
        "us-east-1/sagemaker-endpoint/ep/a": Decimal("1.408"),
    }
    seen = {k: MIDDAY - timedelta(days=3) for k in previous}
    causes = root_cause(current, previous, seen, since)
    assert [c.key for c in causes] == [
        "us-east-1/ec2-instance/i-p5",
        "us-east-1/sagemaker-endpoint/ep/a",
    ]
    assert causes[0].change == "new"
    assert causes[1].change == "+$2.82/h"


def test_unattributed_alert_dedupes_each_resource_per_day() -> None:
    r = AlertResource(
        "us-east-1/ec2-instance/i-x", "ec2-instance", "us-east-1", "g5.xlarge", Decimal("1.006")
    )
    alert = unattributed_alert([r], MIDDAY)
    assert alert is not None
    assert alert.dedupe == ("unattributed/us-east-1/ec2-instance/i-x/2026-11-20",)


@settings(max_examples=200, deadline=None)
@given(
    base=st.decimals(min_value=Decimal("0.01"), max_value=Decimal(5000), places=2),
    factor=st.decimals(min_value=Decimal("0.1"), max_value=Decimal(20), places=2),
    scale=st.decimals(min_value=Decimal(1), max_value=Decimal(100), places=2),
)
def test_scaling_every_rate_up_never_silences_a_spike(
    base: Decimal, factor: Decimal, scale: Decimal
) -> None:
    """The relative test is scale-free, the absolute floor only gets easier to clear."""
    current = base * factor
    if is_spike(base, current, POLICY):
        assert is_spike(base * scale, current * scale, POLICY)


@settings(max_examples=200, deadline=None)
@given(
    base=st.decimals(min_value=Decimal(20), max_value=Decimal(5000), places=2),
    factor=st.decimals(min_value=Decimal("0.1"), max_value=Decimal(20), places=2),
    scale=st.decimals(min_value=Decimal("0.1"), max_value=Decimal(100), places=2),
)
def test_above_the_floor_the_relative_verdict_is_scale_invariant(
    base: Decimal, factor: Decimal, scale: Decimal
) -> None:
    current = base * factor
    floor = POLICY.min_delta_usd_per_hour
    if current - base >= floor and current * scale - base * scale >= floor:
        assert is_spike(base, current, POLICY) == is_spike(base * scale, current * scale, POLICY)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.decimals(min_value=Decimal(1), max_value=Decimal(1000), places=2),
        min_size=3,
        max_size=96,
    ),
    st.decimals(min_value=Decimal("0.9"), max_value=Decimal("1.1"), places=3),
)
def test_steady_spend_with_ten_percent_noise_never_fires(
    samples: list[Decimal], jitter: Decimal
) -> None:
    level = samples[0]
    steady = [level * (Decimal(1) + (s % 10 - 5) / 100) for s in samples]
    found = baseline_rate(history([str(x) for x in steady]), MIDDAY, POLICY)
    assert found is not None
    assert not is_spike(found[0], level * jitter, POLICY)


# -- times with an offset are UTC -------------------------------------------------------------

PARIS_WINTER = timezone(timedelta(hours=1), "CET")
TOKYO = timezone(timedelta(hours=9), "JST")


def test_the_digest_hour_is_compared_in_utc_when_now_carries_an_offset() -> None:
    finding = Finding(FindingCode.MALFORMED_BUDGET, "r", "bad", Severity.WARNING)
    # 08:30 in Paris is 07:30 UTC: before an 08:00 UTC digest
    assert findings_digest([finding], datetime(2026, 11, 20, 8, 30, tzinfo=PARIS_WINTER), 8) is None
    # 01:30 in Tokyo on the 21st is 16:30 UTC on the 20th: the 20th's digest
    digest = findings_digest([finding], datetime(2026, 11, 21, 1, 30, tzinfo=TOKYO), 8)
    assert digest is not None
    assert digest.alert_id == "findings-digest/2026-11-20"
    assert digest.at.utcoffset() == timedelta(0)


def test_the_recovery_names_the_spike_start_in_utc() -> None:
    since = datetime(2026, 11, 20, 10, 0, tzinfo=TOKYO)  # 01:00 UTC
    alert = recovery_alert(
        "llm",
        Decimal(10),
        Decimal(11),
        since,
        datetime(2026, 11, 20, 12, 0, tzinfo=TOKYO),
        "e1",
        (),
    )
    assert "2026-11-20 01:00 UTC" in alert.summary
    assert alert.at == datetime(2026, 11, 20, 3, 0, tzinfo=UTC)
    assert alert.at.tzinfo is UTC


def test_unattributed_resources_are_claimed_per_utc_day() -> None:
    r = AlertResource(
        "us-east-1/ec2-instance/i-x", "ec2-instance", "us-east-1", "g5.xlarge", Decimal("1.006")
    )
    alert = unattributed_alert([r], datetime(2026, 11, 21, 1, 0, tzinfo=TOKYO))
    assert alert is not None
    assert alert.dedupe == ("unattributed/us-east-1/ec2-instance/i-x/2026-11-20",)


def test_budget_alerts_are_stamped_in_utc() -> None:
    alerts = budget_alerts(project("850", "900"), (80,), datetime(2026, 12, 1, 8, 0, tzinfo=TOKYO))
    assert {a.at.tzinfo for a in alerts} == {UTC}
    assert all("2026-11" in a.alert_id for a in alerts)  # 23:00 UTC on 30 November


# -- size ---------------------------------------------------------------------------------


def resource(n: int, usd: str = "1.006", owner: str | None = None) -> AlertResource:
    return AlertResource(
        f"us-east-1/ec2-instance/i-{n:06d}",
        "ec2-instance",
        "us-east-1",
        "g5.xlarge",
        Decimal(usd),
        owner,
    )


def test_an_unattributed_alert_lists_the_dearest_few_and_counts_the_rest() -> None:
    many = [resource(n) for n in range(5000)] + [resource(9_999_999, "98.32")]
    alert = unattributed_alert(many, MIDDAY)
    assert alert is not None
    assert len(alert.resources) == MAX_LISTED_RESOURCES
    assert alert.resources[0].usd_per_hour == Decimal("98.32")
    assert alert.omitted_resources == 5001 - MAX_LISTED_RESOURCES
    assert alert.details[-1].startswith(f"and {5001 - MAX_LISTED_RESOURCES:,} more")
    assert "costguard scan" in alert.details[-1]
    # every resource is still claimed, listed or not
    assert len(alert.dedupe) == 5001
    assert "5,001 resources" in alert.title


def test_an_unattributed_alert_names_the_owners_of_the_listed_resources_only() -> None:
    many = [resource(n, owner=f"owner-{n}@example.com") for n in range(500)]
    alert = unattributed_alert(many, MIDDAY)
    assert alert is not None
    assert set(alert.owners) == {r.owner for r in alert.resources}


def test_shrinking_is_deterministic_and_ends_small() -> None:
    long = "資" * 5000
    alert = unattributed_alert(
        [resource(n, owner=long) for n in range(300)],
        MIDDAY,
    )
    assert alert is not None
    alert = replace(alert, summary=long, details=tuple(long for _ in range(100)))
    first = list(shrink_steps(alert))
    second = list(shrink_steps(alert))
    assert first == second
    assert first[0] == alert
    sizes = [len(repr(replace(a, dedupe=())).encode()) for a in first]  # dedupe is not sent
    assert sizes == sorted(sizes, reverse=True)
    smallest = first[-1]
    assert smallest.resources == () and len(smallest.summary) <= 500
    assert smallest.omitted_resources == 300
    assert smallest.alert_id == alert.alert_id and smallest.dedupe == alert.dedupe
    assert sizes[-1] < 10_000


def test_digest_lines_are_bounded_however_long_a_finding_is() -> None:
    findings = [
        Finding(FindingCode.MALFORMED_PROJECT, f"r{n}", "x" * 100_000, Severity.WARNING)
        for n in range(1000)
    ]
    digest = findings_digest(findings, MIDDAY)
    assert digest is not None
    assert len(digest.details) <= 26
    assert all(len(d) <= 400 for d in digest.details)
    assert "975 more" in digest.details[-1]


def test_a_project_with_hundreds_of_owners_names_the_first_twenty() -> None:
    owners = tuple(f"user{n}@example.com" for n in range(500))
    p = ProjectNumbers("vision", Decimal(1000), Decimal(900), Decimal(1200), Decimal(1), owners)
    for alert in budget_alerts(p, (80,), MIDDAY):
        assert alert.owners == owners[:20]
