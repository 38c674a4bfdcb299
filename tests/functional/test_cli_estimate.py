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
    data = json.loads(out)
    assert data["kind"] == "training-estimate"
    assert data["mfu"] == {"low": 0.25, "default": 0.35, "high": 0.45}
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
    assert "MFU 0.35 (range 0.25–0.45)" in out
    assert "coarse check" in out and "p4d.24xlarge" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--params", "nan"], "--params must be a number"),
        (["--params", "-1"], "--params must be a number"),
        (["--params", "7e9\u0661"], "--params must be a number"),
        (["--gpu", "k80"], "invalid choice"),
        (["--mfu", "1.5"], "a fraction must be"),
        (["--gpus", "0"], "--gpus must be a whole number"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["estimate", "train", "--params", "7e9", "--tokens", "2e12"]
    code, out, err = run_cli([*base, *args], capsys)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


def test_project_without_a_table_or_budget_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli([*TRAIN, "--project", "llm"], capsys)
    assert code == 2 and "no budget for project 'llm'" in err
    code, _out, err = run_cli([*TRAIN, "--project", "llm", "--budget", "1000"], capsys)
    assert code == 2 and "--table" in err


class _Ledger:
    def __init__(self, mtd: Decimal, rate: Decimal) -> None:
        from costguard.domain.spend import Observation
        from costguard.ports import ProjectMonth

        now = datetime.now(UTC)
        self.totals = {"llm": ProjectMonth("llm", now.strftime("%Y-%m"), mtd, Decimal(0))}
        self.now = now
        self.obs = {
            "k": Observation("k", "llm", rate, now, now),
            "old": Observation("old", "llm", Decimal(1000), datetime(2020, 1, 1, tzinfo=UTC), now),
        }


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> Any:
    import costguard.cli_estimate as mod

    state: dict[str, Any] = {}

    def view(args: Any, now: datetime) -> tuple[Decimal, Decimal]:
        led = state["ledger"]
        # the real reader's filter: only what the last scan saw is running now
        rate = sum(
            (o.usd_per_hour for o in led.obs.values() if o.observed_at >= led.now), Decimal(0)
        )
        return led.totals["llm"].usd, rate

    monkeypatch.setattr(mod, "_ledger_view", view)
    # 2026-11-10 00:00 UTC: 504 hours left in the month
    monkeypatch.setattr(mod, "_now", lambda: datetime(2026, 11, 10, tzinfo=UTC))
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
    # WHEN a 3,339 h run of $586,469 is gated with 504 h left in the month
    code, out, err = run_cli(args, capsys)
    # THEN forecast 1,000 + 10 · 504 = 6,040; the run adds 586,468.81 · 504 / 3,338.68 = 88,532
    assert code == 4
    gate = json.loads(out)["budget"]
    assert gate["over_budget"] is True and gate["month_to_date_usd"] == 1000.0
    assert gate["forecast_month_usd"] == 6040.0
    assert gate["run_adds_this_month_usd"] == pytest.approx(586468.81 * 504 / 3338.675, rel=1e-4)
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
    gate = json.loads(out)["budget"]
    assert gate["over_budget"] is False
    assert 0 < gate["run_usd"] < 100


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
    data = json.loads(out)
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
