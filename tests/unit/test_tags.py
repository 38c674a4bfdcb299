from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costguard.domain.findings import FindingCode
from costguard.domain.tags import (
    Exemption,
    TagKeys,
    normalise_project,
    parse_budget,
    parse_exempt,
    read_tags,
)


@pytest.mark.parametrize(
    ("raw", "amount"),
    [
        ("5000", Decimal("5000")),
        ("5000.50", Decimal("5000.50")),
        ("5,000", Decimal("5000")),
        ("$5000", Decimal("5000")),
        (" $ 1,250,000.75 ", Decimal("1250000.75")),
    ],
)
def test_accepts_the_documented_budget_spellings(raw: str, amount: Decimal) -> None:
    assert parse_budget(raw) == amount


@pytest.mark.parametrize(
    "raw",
    [
        "abc",
        "-5",
        "1e309",
        "",
        "  ",
        "0",
        "5,00",
        "5.000,00",
        "NaN",
        "Infinity",
        "$",
        "5000 USD",
        "12,3456",
    ],
)
def test_rejects_anything_that_is_not_a_plain_positive_amount(raw: str) -> None:
    assert isinstance(parse_budget(raw), str)


def test_malformed_budget_is_a_finding_naming_resource_and_value() -> None:
    # GIVEN a resource tagged costguard:budget=abc
    tags = {"costguard:project": "vision", "costguard:budget": "abc"}
    # WHEN its tags are read
    parsed = read_tags("us-east-1/ec2-instance/i-1", tags, TagKeys())
    # THEN the project still counts, the budget is ignored, and the finding names both
    assert parsed.project == "vision"
    assert parsed.budget is None
    (finding,) = parsed.findings
    assert finding.code is FindingCode.MALFORMED_BUDGET
    assert finding.resource == "us-east-1/ec2-instance/i-1"
    assert "costguard:budget='abc'" in finding.message


def test_project_falls_back_to_Project_then_project_in_order() -> None:
    keys = TagKeys()
    assert read_tags("r", {"Project": "A", "project": "b"}, keys).project == "A"
    assert read_tags("r", {"project": "b"}, keys).project == "b"
    assert read_tags("r", {"costguard:project": "c", "Project": "A"}, keys).project == "c"


def test_project_names_are_free_text_and_unicode_normalised() -> None:
    composed = "caf\u00e9 team / 計算 #1"
    decomposed = "cafe\u0301 team / 計算 #1"
    assert normalise_project(decomposed) == normalise_project(composed) == composed
    assert normalise_project("x" * 256) == "x" * 256
    assert normalise_project("x" * 257) is None
    assert normalise_project("   ") is None
    assert normalise_project("bad\x00name") is None


def test_exempt_true_is_permanent_and_a_date_runs_through_that_day() -> None:
    assert parse_exempt("true") == Exemption()
    assert parse_exempt("false") is None
    day = parse_exempt("2026-12-31")
    assert isinstance(day, Exemption)
    assert day.active(datetime(2026, 12, 31, 23, 59, tzinfo=UTC))
    assert not day.active(datetime(2027, 1, 1, 0, 0, tzinfo=UTC))
    moment = parse_exempt("2026-12-01T10:00:00+02:00")
    assert isinstance(moment, Exemption)
    assert moment.until == datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def test_malformed_exempt_fails_safe_as_exempt_with_a_finding() -> None:
    parsed = read_tags("r", {"costguard:exempt": "next tuesday"}, TagKeys())
    assert parsed.exemption == Exemption()
    assert parsed.findings[0].code is FindingCode.MALFORMED_EXEMPT


@given(st.text(max_size=40))
def test_budget_parser_never_raises(raw: str) -> None:
    result = parse_budget(raw)
    assert isinstance(result, (Decimal, str))
    if isinstance(result, Decimal):
        assert result > 0
