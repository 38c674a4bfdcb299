"""`costguard estimate`: exit codes, the --json shape, and the budget gate on a ledger."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from tests.support.catalog import FIXTURE_CATALOG_PATH


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from costguard.cli import main

    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


TRAIN = [
    "estimate",
    "train",
    "--params",
    "7e9",
    "--tokens",
    "2e12",
    "--gpu",
    "a100-40gb",
    "--gpus",
    "64",
    "--catalog",
    str(FIXTURE_CATALOG_PATH),
]


def test_train_json_has_ranked_options_with_ranges(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli([*TRAIN, "--json"], capsys)
    assert code == 0
    envelope = json.loads(out)
    assert (envelope["schema_version"], envelope["kind"]) == (2, "estimate.train")
    data = envelope["data"]
    # A100 is Ampere: its calibrated default is 0.39
    assert data["mfu"] == {"low": 0.25, "default": 0.39, "high": 0.45}
    (o,) = data["options"]
    assert o["instance_type"] == "p4d.24xlarge" and o["instances"] == 8
    assert o["gpu_hours"]["low"] < o["gpu_hours"]["mid"] < o["gpu_hours"]["high"]
    assert set(o["spot"]) >= {
        "usd",
        "expected_interruptions",
        "rework_hours",
        "interruption_bucket",
    }
    assert o["memory"]["coarse"] is True and o["memory"]["fit"] == "needs-sharding"
    assert data["spot_table"]["source"].startswith("Test fixture")
    assert data["budget"] is None


def test_train_text_names_the_assumptions(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(TRAIN, capsys)
    assert code == 0
    assert "MFU 0.39 (Ampere, calibrated; range 0.25–0.45)" in out
    assert "coarse check" in out and "p4d.24xlarge" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--params", "nan"], "argument --params: must be a number"),
        (["--params", "-1"], "argument --params: must be a number"),
        (["--params", "7e9\u0661"], "argument --params: must be a number"),
        (["--tokens", "0"], "argument --tokens: must be a number"),
        (["--gpu", "k80"], "invalid choice"),
        (["--mfu", "1.5"], "a fraction must be"),
        (["--gpus", "0"], "argument --gpus: must be a whole number"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["estimate", "train", "--params", "7e9", "--tokens", "2e12"]
    code, out, err = run_cli([*base, *args], capsys)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1
    # Defect: "argument --params: --params must be ...": argparse names the option already.
    flag = args[0]
    assert f"{flag}: {flag}" not in err


def test_project_without_any_budget_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    """GIVEN --project with no budget anywhere, WHEN gated, THEN bad input naming the ways."""
    code, _out, err = run_cli([*TRAIN, "--project", "llm"], capsys)
    assert code == 2 and "no budget for project 'llm'" in err
    assert "--budget" in err and "--budgets-file" in err and "--table" in err


class _Ledger:
    """What the deployed ledger holds: month totals, observations and the last scan's
    watermark (the CLI computes the run-rate from them)."""

    def __init__(
        self, mtd: Decimal, rate: Decimal, *, unpriced: int = 0, budget: Decimal | None = None
    ) -> None:
        from costguard.domain.spend import Observation
        from costguard.ports import ProjectMonth

        #: The budget the deployment's last scan found (a costguard:budget tag).
        self.budget = budget
        now = datetime(2026, 11, 10, tzinfo=UTC)  # the gate's pinned clock
        old = datetime(2020, 1, 1, tzinfo=UTC)
        self.totals = {"llm": ProjectMonth("llm", now.strftime("%Y-%m"), mtd, Decimal(0))}
        self.now = now
        self.obs = {
            "k": Observation("k", "llm", rate, now, now),
            "old": Observation("old", "llm", Decimal(1000), old, now),
            # accrue() observes an unpriced resource at $0/h; an old one is not running now
            "old-unpriced": Observation("old-unpriced", "llm", Decimal(0), old, now),
            "other": Observation("other", "web", Decimal(0), now, now),
        }
        for i in range(unpriced):
            self.obs[f"u{i}"] = Observation(f"u{i}", "llm", Decimal(0), now, now)


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> Any:
    import costguard.cli.estimate as mod
    from costguard.cli import common

    state: dict[str, Any] = {}

    def read(args: Any, now: datetime) -> Any:
        led = state["ledger"]
        return mod.LedgerFigures(led.totals["llm"].usd, led.obs, led.now, led.budget)

    monkeypatch.setattr(mod, "_read_ledger", read)
    # 2026-11-10 00:00 UTC: 504 hours left in the month
    monkeypatch.setattr(common, "now", lambda: datetime(2026, 11, 10, tzinfo=UTC))
    return state


def test_gate_exits_4_when_the_run_takes_the_forecast_over_budget(
    ledger: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN $1,000 spent and $10/h running (the 2020 observation is not running: ignored)
    ledger["ledger"] = _Ledger(Decimal(1000), Decimal(10))
    args = [
        *TRAIN,
        "--project",
        "llm",
        "--table",
        "costguard-ledger",
        "--budget",
        "50000",
        "--json",
    ]
    # WHEN a 2,996 h run of $526,324 (A100 at Ampere's 0.39) is gated with 504 h left
    code, out, err = run_cli(args, capsys)
    # THEN forecast 1,000 + 10 · 504 = 6,040; the run adds 526,324.15 · 504 / 2,996.25 = 88,532
    assert code == 4
    gate = json.loads(out)["data"]["budget"]
    assert gate["over_budget"] is True and gate["month_to_date_usd"] == 1000.0
    assert gate["forecast_month_usd"] == 6040.0
    assert gate["run_adds_this_month_usd"] == pytest.approx(526324.15 * 504 / 2996.2527, rel=1e-5)
    assert gate["budget_source"] == "flag" and gate["ledger"] is True
    assert "over its budget" in err


def test_gate_passes_a_run_that_fits(
    ledger: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    ledger["ledger"] = _Ledger(Decimal(100), Decimal(0))
    small = [
        "estimate",
        "train",
        "--params",
        "1e8",
        "--tokens",
        "1e9",
        "--gpu",
        "a10g",
        "--catalog",
        str(FIXTURE_CATALOG_PATH),
        "--project",
        "llm",
        "--table",
        "costguard-ledger",
        "--budget",
        "1000",
        "--json",
    ]
    code, out, _ = run_cli(small, capsys)
    assert code == 0
    gate = json.loads(out)["data"]["budget"]
    assert gate["over_budget"] is False
    assert 0 < gate["run_usd"] < 100


SMALL_GATED = [
    "estimate",
    "train",
    "--params",
    "1e8",
    "--tokens",
    "1e9",
    "--gpu",
    "a10g",
    "--catalog",
    str(FIXTURE_CATALOG_PATH),
    "--project",
    "llm",
    "--table",
    "costguard-ledger",
    "--budget",
    "1000",
]


def test_gate_says_the_forecast_excludes_running_unpriced_resources(
    ledger: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a project running $1/h of priced resources and two the catalog cannot price
    # (the ledger holds them at $0/h), plus an old unpriced one and another project's
    ledger["ledger"] = _Ledger(Decimal(100), Decimal(1), unpriced=2)
    # WHEN a small run is gated, as JSON and as text
    code, out, err = run_cli([*SMALL_GATED, "--json"], capsys)
    # THEN it fits, but the gate does not pass silently: two resources are left out
    assert code == 0
    gate = json.loads(out)["data"]["budget"]
    assert gate["over_budget"] is False and gate["unpriced_resources"] == 2
    assert "excludes 2 running resources of project llm" in err
    code, out, err = run_cli(SMALL_GATED, capsys)
    assert code == 0
    assert "as far as the priced resources go" in out
    assert "excludes 2 running resources" in out and "not $0" in out


def test_gate_without_unpriced_resources_passes_quietly(
    ledger: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    ledger["ledger"] = _Ledger(Decimal(100), Decimal(1))
    code, out, err = run_cli([*SMALL_GATED, "--json"], capsys)
    assert code == 0 and err == ""
    assert json.loads(out)["data"]["budget"]["unpriced_resources"] == 0


def test_iteration_json_shape_and_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        [
            "estimate",
            "iteration",
            "--work-hours",
            "2",
            "--usd-per-hour",
            "10",
            "--spot-saving-pct",
            "60",
            "--interruptions-per-hour",
            "0.1",
            "--setup-minutes",
            "30",
            "--checkpoint-minutes",
            "30",
            "--spot-extra-setup-minutes",
            "15",
            "--json",
        ],
        capsys,
    )
    assert code == 0
    data = json.loads(out)["data"]
    assert data["on_demand"]["total_usd"] == 175.0
    assert data["spot"]["total_usd"] == 213.96
    assert data["cheaper"] == "on-demand"
    assert data["break_even"]["never"] is True


def test_iteration_from_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        [
            "estimate",
            "iteration",
            "--work-hours",
            "3",
            "--instance-type",
            "g5.xlarge",
            "--catalog",
            str(FIXTURE_CATALOG_PATH),
        ],
        capsys,
    )
    assert code == 0
    assert "bucket 5-10%" in out and "Break-even:" in out


def test_iteration_unpriced_type_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(
        [
            "estimate",
            "iteration",
            "--work-hours",
            "3",
            "--instance-type",
            "p5e.48xlarge",
            "--catalog",
            str(FIXTURE_CATALOG_PATH),
        ],
        capsys,
    )
    assert code == 2 and "Capacity Blocks" in err


# -- regressions: run as `python -m costguard.cli`, regions, retired types, huge numbers ------


def _python_m(*args: str, home: Any) -> Any:
    import os
    import subprocess
    import sys

    env = dict(os.environ, HOME=str(home), XDG_DATA_HOME=str(home / "share"))
    env.pop("COSTGUARD_PROJECTS_JSON", None)
    return subprocess.run(
        [sys.executable, "-m", "costguard.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_estimate_usage_errors_exit_2_under_python_m(tmp_path: Any) -> None:
    # GIVEN the command run as `python -m costguard.cli`, where the package's __main__ runs
    # WHEN an estimate is asked for wrongly (no budget for the gate)
    done = _python_m(*TRAIN, "--project", "llm", home=tmp_path)
    # THEN it is bad input, one line, as under the installed `costguard` command
    assert "Traceback" not in done.stderr, done.stderr[-600:]
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "costguard: no budget for project 'llm': pass --budget USD, or set it in "
        "COSTGUARD_PROJECTS_JSON, or in a --budgets-file, or read a deployed CostGuard's "
        "budgets with --table"
    )


def test_one_command_error_class_whichever_way_the_cli_starts() -> None:
    import costguard.cli.common
    import costguard.cli.estimate

    # failure() recognises the one shared class, which the command modules use, never redefine
    assert (
        costguard.cli.estimate.__dict__["common"].CommandError is costguard.cli.common.CommandError
    )
    assert costguard.cli.common.failure(costguard.cli.common.CommandError("x")) == (2, "x")


@pytest.mark.parametrize("command", ["train", "iteration"])
def test_a_region_the_catalog_does_not_know_is_bad_input_naming_the_known_ones(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a typo for us-east-1
    args = (
        [*TRAIN, "--region", "us-est-1"]
        if command == "train"
        else [
            "estimate",
            "iteration",
            "--work-hours",
            "2",
            "--instance-type",
            "g5.xlarge",
            "--catalog",
            str(FIXTURE_CATALOG_PATH),
            "--region",
            "us-est-1",
        ]
    )
    # WHEN an estimate is asked for there
    code, out, err = run_cli(args, capsys)
    # THEN it is bad input naming the region and the regions the catalog prices
    assert code == 2 and out == ""
    assert "'us-est-1'" in err and "us-east-1" in err and len(err.strip().splitlines()) == 1


def test_an_iteration_on_a_retired_type_warns_and_recommends_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN p3.2xlarge, which the fixture catalog still prices but marks retired
    base = [
        "estimate",
        "iteration",
        "--work-hours",
        "2",
        "--instance-type",
        "p3.2xlarge",
        "--catalog",
        str(FIXTURE_CATALOG_PATH),
    ]
    # WHEN an iteration on it is estimated
    code, out, err = run_cli(base, capsys)
    # THEN it is priced as asked, with a warning, and nothing is "the way to go"
    assert code == 0
    assert "warning: p3.2xlarge is retired" in err
    assert "p3.2xlarge is RETIRED" in out and "Cheaper now" not in out
    code, out, _ = run_cli([*base, "--json"], capsys)
    data = json.loads(out)["data"]
    assert data["instance_type"] == "p3.2xlarge" and "no longer offers p3" in data["retired"]
    # AND a retired type named next to given rates is still said to be retired
    given = ["--usd-per-hour", "3", "--spot-saving-pct", "60", "--interruption-bucket", "<5%"]
    code, out, err = run_cli([*base, *given], capsys)
    assert code == 0 and "retired" in err


def test_an_offered_type_keeps_its_recommendation(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(
        [
            "estimate",
            "iteration",
            "--work-hours",
            "2",
            "--instance-type",
            "g5.xlarge",
            "--catalog",
            str(FIXTURE_CATALOG_PATH),
            "--json",
        ],
        capsys,
    )
    assert code == 0 and err == ""
    assert json.loads(out)["data"]["retired"] is None


def test_an_mfu_below_one_percent_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["estimate", "train", "--params", "1e15", "--tokens", "1e17", "--json"]
    code, out, err = run_cli([*base, "--mfu", "1e-20"], capsys)
    assert code == 2 and out == ""
    assert "from 0.01 up to 1" in err and "published runs reach 0.25 to 0.45" in err


def test_the_largest_run_at_the_lowest_mfu_is_estimated_as_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN the largest run the options accept, at the lowest MFU they accept
    args = ["estimate", "train", "--params", "1e15", "--tokens", "1e17", "--mfu", "0.01"]
    # WHEN it is estimated as JSON
    code, out, _ = run_cli([*args, "--catalog", str(FIXTURE_CATALOG_PATH), "--json"], capsys)
    # THEN every figure is printed, rounded or not, with no error
    assert code == 0
    options = json.loads(out)["data"]["options"]
    assert options and all(o["gpu_hours"]["high"] > 1e16 for o in options)


@pytest.mark.parametrize(
    ("value", "places", "expected"),
    [
        (Decimal("1e40"), "0.01", 1e40),
        (Decimal("-3e30"), "0.0001", -3e30),
        (Decimal("123456789012345.678"), "0.01", 123456789012345.67),
        (Decimal("12.3456"), "0.01", 12.35),
    ],
)
def test_json_rounding_never_overflows_decimal_precision(
    value: Decimal, places: str, expected: float
) -> None:
    from costguard.cli.estimate import _num

    # quantize to 0.01 of 1e40 needs 43 digits, past the default context's 28
    assert _num(value, places) == pytest.approx(expected)
