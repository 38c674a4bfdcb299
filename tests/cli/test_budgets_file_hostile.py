"""A hostile ``--budgets-file``: the JSON form refuses what the YAML form refuses (a project
twice), and a number too long to read is bad input naming the file, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_estimate_gate import FIXTURE, _own_home_and_clock, run

__all__ = ["_own_home_and_clock"]  # the autouse fixture: packaged catalog, pinned clock

GATE = ["estimate", "train", "--params", "1B", "--tokens", "20B", "--gpu", "a10g", *FIXTURE]
GATE += ["--instance-type", "g5.xlarge", "--project", "llm"]


def test_a_project_twice_in_a_json_budgets_file_is_refused_as_in_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect: JSON keeps the last of two equal keys, so ``{"llm": 500000, "llm": 5000}``
    gated the launch on $5,000 without a word, while the same file in YAML is refused
    ("project 'llm' again"): a merge that duplicated a key silently chose the budget."""
    path = tmp_path / "budgets.json"
    path.write_text('{"llm": 500000, "llm": 5000}', encoding="utf-8")
    code, out, err = run([*GATE, "--budgets-file", str(path)], capsys)
    assert code == 2 and out == ""
    assert "budgets.json" in err and "'llm'" in err and "twice" in err


def test_a_number_too_long_to_read_is_bad_input_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect: a JSON number of more than 4,300 digits made ``json.loads`` raise a
    ``ValueError`` the loader did not expect: the command died on it instead of naming
    the file as bad input (exit 2)."""
    path = tmp_path / "budgets.json"
    path.write_text('{"llm": 1' + "0" * 5000 + "}", encoding="utf-8")
    code, out, err = run([*GATE, "--budgets-file", str(path)], capsys)
    assert code == 2 and out == ""
    assert "budgets.json" in err and "Traceback" not in err
