"""The budgets file of the CI budget gate: JSON, or a small safe subset of YAML."""

from __future__ import annotations

from decimal import Decimal as D
from pathlib import Path

import pytest

from costguard.cli.budgets_file import (
    BudgetEntry,
    BudgetsFileError,
    load_budgets,
    parse_yaml_subset,
)

YAML = """\
# USD a month
---
llm-pretraining:
  budget: 50,000
  spent: 12000.50   # so far
vision: $8000
"quoted: name": '700'
"""


def test_the_yaml_subset_reads_budgets_and_spend(tmp_path: Path) -> None:
    """GIVEN projects with a budget and spend, a budget alone, and a quoted name with a colon,
    WHEN loaded, THEN each amount as tags write budgets; no spend is 0."""
    path = tmp_path / "budgets.yaml"
    path.write_text(YAML, encoding="utf-8")
    assert load_budgets(path) == {
        "llm-pretraining": BudgetEntry(D(50000), D("12000.50")),
        "vision": BudgetEntry(D(8000), D(0)),
        "quoted: name": BudgetEntry(D(700), D(0)),
    }


def test_json_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "budgets.json"
    path.write_text('{"llm": {"budget": 50000, "spent": 12000.5}, "web": "5,000"}', "utf-8")
    assert load_budgets(path) == {
        "llm": BudgetEntry(D(50000), D("12000.5")),
        "web": BudgetEntry(D(5000), D(0)),
    }


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("llm:\n  - 5000\n", "line 2"),  # a list
        ("llm: &a 5000\n", "line 1"),  # an anchor
        ("llm: {budget: 5}\n", "line 1"),  # a flow mapping
        ("llm: |\n  5000\n", "line 1"),  # a block scalar
        ("llm:\n\tbudget: 5\n", "a tab"),
        ("llm:\n  budget: 5\n    spent: 1\n", "line 3"),  # deeper than the mapping
        ("  budget: 5\n", "indented under no project"),
        ("llm: 5\nllm: 6\n", "again"),
        ("llm 5000\n", "no 'key: value'"),
        ("llm: '5000\n", "unclosed quote"),
    ],
)
def test_yaml_beyond_the_subset_is_refused_with_its_line(text: str, said: str) -> None:
    with pytest.raises(BudgetsFileError, match=said):
        parse_yaml_subset(text, "b.yaml")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"llm": 0}', "must be greater than zero"),
        ('{"llm": "abc"}', "is not an amount in USD"),
        ('{"llm": true}', "is not an amount in USD"),
        ('{"llm": {"spent": 5}}', "has no 'budget'"),
        ('{"llm": {"budget": 5, "limit": 3}}', "unknown key 'limit'"),
        ('{"llm": {"budget": 5, "spent": -1}}', "spent -1 is not an amount"),
        ('{"llm": {"budget": 5, "spent": "NaN"}}', "spent 'NaN' is not an amount"),
        ('["llm"]', "must map each project"),
        ('{"llm": 5', "not JSON"),
    ],
)
def test_a_wrong_amount_or_shape_is_refused_naming_the_project(
    text: str, said: str, tmp_path: Path
) -> None:
    path = tmp_path / "budgets.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BudgetsFileError, match=said):
        load_budgets(path)


def test_a_missing_file_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(BudgetsFileError, match="cannot be read"):
        load_budgets(tmp_path / "nope.yaml")
