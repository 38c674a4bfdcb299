"""``costguard estimate``'s text, read as a newcomer reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from costguard.cli import main


@pytest.fixture(autouse=True)
def _own_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The packaged catalog, not one a refresh left in the real user's data dir."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))


@pytest.mark.parametrize(
    ("tokens", "said"),
    [("2e11", "on 200B tokens"), ("1.5e15", "on 1,500T tokens"), ("2e12", "on 2T tokens")],
)
def test_token_counts_read_as_numbers(
    tokens: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect: ``estimate train --tokens 2e11`` said ``Training 7B parameters on 2e+2B
    tokens``. GIVEN a token count, WHEN the estimate is printed, THEN plain digits."""
    assert main(["estimate", "train", "--params", "7e9", "--tokens", tokens, "--gpu", "h100"]) == 0
    out = capsys.readouterr().out
    assert said in out and "e+" not in out.splitlines()[0].split(":")[0]


def test_the_spot_basis_is_said_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    """Defect: ``spot table of 2026-11-29 (table)``: the internal basis name, in brackets.

    GIVEN an iteration priced from the catalog, WHEN printed, THEN the basis is words."""
    assert main(["estimate", "iteration", "--work-hours", "2", "--instance-type", "g5.xlarge"]) == 0
    out = capsys.readouterr().out
    assert "(table)" not in out and "(default)" not in out
    assert "spot table of" in out


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--usd-per-hour", "3", "--spot-saving-pct", "60", "--interruptions-per-hour", "0.5"],
            "at $3.00/h",
        ),
        (["--instance-type", "g5.xlarge"], "at $1.006/h"),
    ],
)
def test_the_rate_is_said_as_money(
    args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect: ``estimate iteration --usd-per-hour 3`` said ``at $3.0/h``.

    GIVEN a whole-dollar rate and a catalog rate of three places, WHEN printed, THEN each
    reads as money: to the cent at least, the catalog's places kept."""
    assert main(["estimate", "iteration", "--work-hours", "2", *args]) == 0
    assert said in capsys.readouterr().out
