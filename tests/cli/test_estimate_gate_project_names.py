"""The budget gate finds a project's budget however its name was typed, on the command line
or in the budgets file, as the scan does (NFKC, spaces collapsed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_estimate_gate import FIXTURE, _own_home_and_clock, run

__all__ = ["_own_home_and_clock"]  # the autouse fixture: packaged catalog, pinned clock

BASE = ["estimate", "train", "--params", "1B", "--tokens", "20B", "--gpu", "a10g", *FIXTURE]
BASE += ["--instance-type", "g5.xlarge"]


@pytest.mark.parametrize(
    ("flag", "key"),
    [
        ("ｌｌｍ", "llm"),  # full-width, as a pasted name arrives
        ("llm ", "llm"),  # a trailing space from a CI variable
        ("llm", '"llm "'),  # the file's key carries the space (quoted YAML)
        ("llm", "ｌｌｍ"),
    ],
)
def test_the_gate_finds_the_budget_however_the_project_is_typed(
    flag: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect: ``--project`` and the budgets file's keys were compared as typed, while the
    scan, the tags and the ledger name a project by its normalised name: ``--project ｌｌｍ``
    (or a file key ``"llm "``) found no budget for ``llm``, and the CI gate failed "no budget"
    (exit 2) instead of judging the launch: the user lost the gate they had configured."""
    # GIVEN a budgets file holding llm's budget ($2,000) and spend ($1,500)
    path = tmp_path / "budgets.yaml"
    path.write_text(f"{key}:\n  budget: 2000\n  spent: 1500\n", encoding="utf-8")
    # WHEN the gate runs for the project as typed
    code, out, err = run([*BASE, "--project", flag, "--budgets-file", str(path), "--json"], capsys)
    # THEN it reads llm's figures: over budget, exit 4, and it names the project as the scan
    assert code == 4, err
    gate = json.loads(out)["data"]["budget"]
    assert (gate["budget_usd"], gate["month_to_date_usd"], gate["project"]) == (
        2000.0,
        1500.0,
        "llm",
    )


def test_two_keys_of_one_project_in_the_budgets_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect: ``llm`` and ``ｌｌｍ`` in one budgets file are one project; taking either would
    guess which budget the user meant."""
    path = tmp_path / "budgets.json"
    path.write_text(json.dumps({"llm": 2000, "ｌｌｍ": 9000}), encoding="utf-8")
    code, out, err = run([*BASE, "--project", "llm", "--budgets-file", str(path)], capsys)
    assert code == 2 and out == ""
    assert "'llm'" in err and "twice" in err


def test_a_project_flag_that_is_no_project_name_is_bad_input(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Defect: a Hangul filler (printable, invisible) in ``--project`` was taken as a project
    name no tag can carry (the scan refuses it): the gate judged a project that cannot exist.
    Now it is bad input naming the character."""
    code, out, err = run([*BASE, "--project", "llm\u3164", "--budget", "100"], capsys)
    assert code == 2 and out == ""
    assert "--project" in err and "U+3164" in err
