"""Hostile tests of `costguard estimate`, run as a user runs it: `python -m costguard.cli`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.fixture(autouse=True)
def _own_home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The catalog is the packaged one: no refreshed file in a real home directory."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.delenv("COSTGUARD_PROJECTS_JSON", raising=False)


def costguard(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "costguard.cli", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(
            ("estimate", "iteration", "--work-hours", "2", "--instance-type", "no-such.type"),
            id="iteration-unknown-type",
        ),
        pytest.param(
            ("estimate", "train", "--params", "7e9", "--tokens", "2e12", "--project", "llm"),
            id="train-gate-without-budget",
        ),
    ],
)
def test_estimate_bad_input_is_one_line_and_exit_2(args: tuple[str, ...]) -> None:
    """Defect: cli_estimate raises `costguard.cli.CommandError`, imported inside its functions.
    Run as `python -m costguard.cli`, the running module is `__main__`, so that import loads
    a second copy of costguard.cli whose CommandError is not the class cli.failure() checks:
    every estimate usage error is a traceback and exit 1 (an AWS error) instead of exit 2."""
    # GIVEN an estimate the user asked for wrongly
    # WHEN it runs
    done = costguard(*args)
    # THEN it is bad input: one line on stderr, exit 2
    assert "Traceback" not in done.stderr, done.stderr[-600:]
    assert done.returncode == 2, done.stderr[-600:]
    assert done.stderr.strip().startswith("costguard:")


def test_a_tiny_mfu_is_refused_or_estimated_never_a_traceback() -> None:
    """Defect: --mfu accepts any fraction above 0; at 1e-20 the GPU-hours of a large run
    exceed 28 digits and option_json's Decimal.quantize raises InvalidOperation: --json
    prints a traceback (the text output, which does not quantize, prints the estimate)."""
    # GIVEN an absurdly small MFU on a large run
    # WHEN the estimate is asked for as JSON
    done = costguard(
        *("estimate", "train", "--params", "1e15", "--tokens", "1e17", "--mfu", "1e-20", "--json")
    )
    # THEN it is either refused as bad input or estimated: never a traceback
    assert "Traceback" not in done.stderr, done.stderr[-600:]
    assert done.returncode in (0, 2)


def test_a_region_the_catalog_does_not_know_is_an_error_not_an_empty_estimate() -> None:
    """Defect: --region accepts any name shaped like a region; `estimate train --region
    us-est-1` (a typo the catalog has no rate for at all) prints "(no offered instance carries
    it in this region)" and exits 0, as if the estimate were done, where `estimate iteration`
    with the same typo is an error."""
    # GIVEN a typo for us-east-1
    # WHEN a training run is estimated there
    done = costguard(
        *("estimate", "train", "--params", "7e9", "--tokens", "2e12", "--gpu", "h100"),
        *("--region", "us-est-1"),
    )
    # THEN the command fails and names the region
    assert done.returncode != 0, done.stdout[-400:]
    assert "us-est-1" in done.stderr


def test_an_iteration_on_a_retired_type_says_it_is_retired() -> None:
    """Defect (cosmetic): `estimate iteration --instance-type p3.2xlarge` prices the retired
    type from the catalog and answers "Cheaper now: spot" with no word that AWS no longer
    offers p3 (estimate train lists it as "Not an option: ... retired")."""
    # GIVEN a retired type
    # WHEN an iteration on it is estimated
    done = costguard("estimate", "iteration", "--work-hours", "2", "--instance-type", "p3.2xlarge")
    # THEN the answer says it is retired
    assert "retired" in (done.stdout + done.stderr).lower(), done.stdout
