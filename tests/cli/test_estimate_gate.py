"""``costguard estimate``, through the parser: counts like 7B and 2T, inference-only
accelerators, the exit when no option matches, the iteration's spot rate and SageMaker
types, and the offline CI budget gate (flags, budgets file, markdown, exit codes)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from costguard.cli import main
from tests.support.catalog import FIXTURE_CATALOG_PATH

#: The gate's pinned clock: 2026-11-10 00:00 UTC, 504 hours left in November.
NOW = datetime(2026, 11, 10, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _own_home_and_clock(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The packaged catalog (no refreshed one from a real home), no deployment's budgets
    table in the environment, and the command's clock pinned."""
    from costguard.cli import common

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    monkeypatch.delenv("COSTGUARD_PROJECTS_JSON", raising=False)
    monkeypatch.setattr(common, "now", lambda: NOW)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


FIXTURE = ["--catalog", str(FIXTURE_CATALOG_PATH)]

# -- counts ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "tokens", "flops"),
    [
        ("7B", "2T", 8.4e22),  # 6 · 7e9 · 2e12
        ("70b", "2t", 8.4e23),
        ("405B", "15.6T", 6 * 405e9 * 15.6e12),
        ("300M", "1.5T", 6 * 300e6 * 1.5e12),
        ("7e9", "2e12", 8.4e22),  # plain numbers still work
        ("7_000_000_000", "2000000000000", 8.4e22),
        ("500K", "1B", 6 * 500e3 * 1e9),
    ],
)
def test_counts_take_suffixes_like_7b_and_2t(
    params: str, tokens: str, flops: float, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a parameter and token count as people write them, WHEN estimated as JSON,
    THEN the FLOPs are 6 · N · T of the numbers they mean."""
    argv = ["estimate", "train", "--params", params, "--tokens", tokens, "--gpu", "h100"]
    code, out, _ = run([*argv, *FIXTURE, "--json"], capsys)
    assert code == 0
    assert json.loads(out)["data"]["flops"] == pytest.approx(flops, rel=1e-12)


@pytest.mark.parametrize("bad", ["7X", "B", "7BB", "-7B", "0B", "1e999999999T", "seven", "2000T"])
def test_a_count_that_is_not_one_is_one_line_of_bad_input(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a count that is no count (or past 1,000T parameters), WHEN parsed, THEN exit 2,
    one line naming the option and the forms it takes, never a traceback."""
    code, out, err = run(["estimate", "train", f"--params={bad}", "--tokens", "2T"], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "argument --params: must be a number above 0 up to 1,000T" in err
    assert "like 7B, 70b, 1.5T, 300M or 7e9" in err and repr(bad) in err


# -- options -----------------------------------------------------------------------------------


def test_inferentia_is_left_out_of_training_unless_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Defect: ``estimate train --params 7e9 --tokens 2e12`` ranked inf2.24xlarge first.

    GIVEN the bundled catalog, WHEN every accelerator is estimated, THEN no inf2 row and a
    line saying they are left out and how to list them; WITH --include-inference they are
    listed, after every training accelerator."""
    code, out, _ = run(["estimate", "train", "--params", "7B", "--tokens", "2T"], capsys)
    assert code == 0
    rows = [line for line in out.splitlines() if line[:3].strip().isdigit()]
    assert rows and not any("inf2." in r for r in rows)
    assert "Left out: inf2.xlarge" in out and "--include-inference" in out
    argv = ["estimate", "train", "--params", "7B", "--tokens", "2T", "--include-inference"]
    code, out, _ = run([*argv, "--json"], capsys)
    options = json.loads(out)["data"]["options"]
    flags = [o["inference_only"] for o in options]
    assert any(flags) and flags == sorted(flags)


def test_the_table_shows_the_central_figure_and_the_range(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GIVEN 7B on 2T tokens on 64 A100s (Ampere, MFU 0.39), WHEN printed, THEN the row
    shows the central GPU-hours (191,760) and cost ($526,324) beside the range."""
    argv = ["estimate", "train", "--params", "7B", "--tokens", "2T", "--gpu", "a100-40gb"]
    code, out, _ = run([*argv, "--gpus", "64", *FIXTURE], capsys)
    assert code == 0
    row = next(line for line in out.splitlines() if "p4d.24xlarge" in line)
    assert "191,760" in row and "$526,324" in row and "$456,148–$821,066" in row
    assert "MFU 0.39 (Ampere, calibrated; range 0.25–0.45)" in out


def test_an_uncalibrated_generation_is_marked_so(capsys: pytest.CaptureFixture[str]) -> None:
    """GIVEN an L4 (Ada Lovelace: no published run), WHEN estimated, THEN its MFU is the
    lowest calibrated default, marked, and the text says why."""
    argv = ["estimate", "train", "--params", "1B", "--tokens", "20B", "--gpu", "l4", *FIXTURE]
    code, out, _ = run(argv, capsys)
    assert code == 0
    assert "0.35*" in out and "Not calibrated: no published run on that generation" in out
    code, out, _ = run([*argv, "--json"], capsys)
    option = json.loads(out)["data"]["options"][0]
    assert option["generation"] == "Ada Lovelace"
    assert option["mfu"] == {"low": 0.25, "default": 0.35, "high": 0.45, "calibrated": False}


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_no_matching_option_exits_3_and_says_why(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect: ``estimate train --gpu v100`` printed an empty table and exited 0.

    GIVEN V100, which no offered type carries any more (p3 is retired), WHEN estimated,
    THEN the reasons are printed, stderr says there is no option, and the exit is 3."""
    argv = ["estimate", "train", "--params", "7B", "--tokens", "2T", "--gpu", "v100"]
    code, out, err = run([*argv, "--format", fmt], capsys)
    assert code == 3
    assert "retired" in out
    assert err.startswith("costguard: no instance option") and "carries v100" in err
    assert len(err.strip().splitlines()) == 1


# -- estimate iteration --------------------------------------------------------------------------


def test_iteration_takes_the_spot_rate_itself(capsys: pytest.CaptureFixture[str]) -> None:
    """GIVEN $10/h on-demand and $4/h on spot, WHEN an iteration is estimated, THEN the
    saving is 60 % and the figures are those of --spot-saving-pct 60 (hand-computed in
    tests/unit: on-demand $175.00, spot $213.96 with 15 min extra setup)."""
    base = ["estimate", "iteration", "--work-hours", "2", "--usd-per-hour", "10"]
    rest = ["--interruptions-per-hour", "0.1", "--setup-minutes", "30"]
    rest += ["--checkpoint-minutes", "30", "--spot-extra-setup-minutes", "15", "--json"]
    code, out, _ = run([*base, "--spot-usd-per-hour", "4", *rest], capsys)
    assert code == 0
    data = json.loads(out)["data"]
    assert data["inputs"]["spot_saving_pct"] == 60.0 and data["inputs"]["usd_per_hour_spot"] == 4
    assert (data["on_demand"]["total_usd"], data["spot"]["total_usd"]) == (175.0, 213.96)
    assert data["inputs"]["spot_basis"] == "spot rate given"


def test_a_spot_rate_above_on_demand_or_beside_a_saving_is_bad_input(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["estimate", "iteration", "--work-hours", "2", "--usd-per-hour", "3"]
    bucket = ["--interruption-bucket", "<5%"]
    code, out, err = run([*base, "--spot-usd-per-hour", "4", *bucket], capsys)
    assert code == 2 and out == "" and "above the on-demand rate $3.00/h" in err
    both = ["--spot-usd-per-hour", "1", "--spot-saving-pct", "60"]
    code, out, err = run([*base, *both, *bucket], capsys)
    assert code == 2 and "not allowed with argument" in err


def test_iteration_prices_a_sagemaker_type_from_the_sagemaker_rates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GIVEN ml.g5.xlarge, WHEN an iteration is estimated, THEN its rate is the catalog's
    SageMaker rate (not the EC2 g5.xlarge one) and the spot row says it is EC2's, assumed."""
    from costguard.adapters.catalog import load_catalog

    catalog = load_catalog(FIXTURE_CATALOG_PATH)
    sagemaker = catalog.sagemaker_rate("us-east-1", "ml.g5.xlarge")
    ec2 = catalog.ec2_on_demand("us-east-1", "g5.xlarge")
    assert sagemaker is not None and sagemaker != ec2
    argv = ["estimate", "iteration", "--work-hours", "2", "--instance-type", "ml.g5.xlarge"]
    code, out, _ = run([*argv, *FIXTURE, "--json"], capsys)
    assert code == 0
    data = json.loads(out)["data"]
    assert data["inputs"]["usd_per_hour_on_demand"] == float(sagemaker)
    assert "assumed for SageMaker managed spot" in data["inputs"]["spot_basis"]
    code, _, err = run(
        ["estimate", "iteration", "--work-hours", "2", "--instance-type", "ml.zz9.xlarge"],
        capsys,
    )
    assert code == 2 and "no on-demand rate for ml.zz9.xlarge" in err


# -- the budget gate, offline and on a ledger -----------------------------------------------------

#: 1B x 20B tokens on one g5.xlarge (fixture: $1.006/h): 1.2e20 FLOPs / (70e12 · 0.39 · 3600)
#: = 1,221.0 h, $1,228.33 on demand; 504 of its 1,221 hours fall before November ends, so
#: $1.006 · 504 = $507.02 of it lands this month.
SMALL = ["estimate", "train", "--params", "1B", "--tokens", "20B", "--gpu", "a10g", *FIXTURE]
SMALL += ["--instance-type", "g5.xlarge", "--project", "llm"]


def _hand_run() -> tuple[float, float]:
    hours = 6 * 1e9 * 20e9 / (70e12 * 0.39 * 3600)
    cost = hours * 1.006
    return cost, cost * 504 / hours


def test_the_gate_runs_offline_from_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """GIVEN no ledger, a $2,000 budget and $1,400 spent, WHEN gated, THEN the forecast is
    what was spent (nothing running is seen) plus the run's November share: over, exit 4;
    with $1,000 spent, within, exit 0."""
    cost, adds = _hand_run()
    assert round(cost, 2) == 1228.33 and round(adds, 2) == 507.02
    code, out, err = run([*SMALL, "--budget", "2000", "--spent", "1500", "--json"], capsys)
    gate = json.loads(out)["data"]["budget"]
    assert code == 4 and gate["over_budget"] is True and "over its budget" in err
    assert gate["forecast_with_run_usd"] == pytest.approx(1500 + adds, abs=0.01)
    assert (gate["ledger"], gate["budget_source"]) == (False, "flag")
    code, out, _ = run([*SMALL, "--budget", "2000", "--spent", "1000", "--json"], capsys)
    assert code == 0 and json.loads(out)["data"]["budget"]["over_budget"] is False


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("budgets.json", '{"llm": {"budget": 2000, "spent": 1500}, "web": 100}'),
        (
            "budgets.yaml",
            "# USD a month\nllm:\n  budget: $2,000\n  spent: 1500   # so far\nweb: 100\n",
        ),
    ],
)
def test_the_gate_reads_a_budgets_file(
    name: str, text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a budgets file (JSON or the YAML subset) with llm's budget and spend, WHEN the
    gate runs without a ledger, THEN it uses both: over budget, exit 4."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    code, out, _ = run([*SMALL, "--budgets-file", str(path), "--json"], capsys)
    gate = json.loads(out)["data"]["budget"]
    assert code == 4
    assert (gate["budget_usd"], gate["month_to_date_usd"]) == (2000.0, 1500.0)
    assert gate["budget_source"] == "file"


def test_a_bad_budgets_file_is_bad_input_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "budgets.yml"
    path.write_text("llm:\n  - 2000\n", encoding="utf-8")
    code, out, err = run([*SMALL, "--budgets-file", str(path)], capsys)
    assert code == 2 and out == ""
    assert "budgets.yml: line 2" in err and len(err.strip().splitlines()) == 1


def test_the_gate_as_markdown_is_a_pull_request_comment(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GIVEN an over-budget run, WHEN printed as markdown, THEN a heading with the verdict,
    the gate's figures as a table, then the options; exit 4 all the same."""
    code, out, _ = run(
        [*SMALL, "--budget", "2000", "--spent", "1500", "--format", "markdown"], capsys
    )
    assert code == 4
    assert out.startswith("**CostGuard estimate: 1B parameters on 20B tokens, a10g in us-east-1")
    assert "project llm: OVER BUDGET**" in out.splitlines()[0]
    assert "| Budget gate | Project llm |" in out and "| Verdict | OVER BUDGET |" in out
    assert "| Budget from | --budget |" in out
    assert out.index("| Budget gate |") < out.index("| # | Instance |")


def test_with_a_ledger_the_gate_reads_the_budget_the_last_scan_found(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a deployed ledger whose last scan found llm's costguard:budget tag ($1,500),
    $1,000 spent this month and nothing running, WHEN gated with --table and no --budget,
    THEN the tag's budget applies (source: ledger): 1,000 + 507.02 > 1,500, exit 4."""
    from costguard.adapters.memory import InMemoryLedger
    from costguard.cli import common
    from costguard.domain.launch import FIGURES_STATE, ProjectFigures, encode_figures

    class Ledger(InMemoryLedger):
        """November's month-to-date for llm, as a scan's commit leaves it."""

        def month_totals(self, scope: str, month: str) -> dict[str | None, Any]:
            from costguard.ports import ProjectMonth

            assert (scope, month) == ("123456789012", "2026-11")
            return {"llm": ProjectMonth("llm", month, Decimal(1000), Decimal(0))}

    ledger = Ledger()
    figures = {"llm": ProjectFigures(NOW, Decimal(1000), Decimal(0), Decimal(1500))}
    assert ledger.put_state("123456789012", FIGURES_STATE, encode_figures(NOW, figures), 0)
    monkeypatch.setattr(
        common, "deployed_ledger", lambda *a, **k: (ledger, "123456789012", "us-east-1")
    )
    code, out, _ = run([*SMALL, "--table", "costguard-ledger", "--json"], capsys)
    gate = json.loads(out)["data"]["budget"]
    assert code == 4
    assert (gate["budget_usd"], gate["budget_source"], gate["ledger"]) == (1500.0, "ledger", True)
    assert gate["month_to_date_usd"] == 1000.0
    # AND --budget beats the tag; --spent with a ledger is bad input
    code, out, _ = run(
        [*SMALL, "--table", "costguard-ledger", "--budget", "5000", "--json"], capsys
    )
    assert code == 0 and json.loads(out)["data"]["budget"]["budget_source"] == "flag"
    code, _, err = run(
        [*SMALL, "--table", "costguard-ledger", "--budget", "5000", "--spent", "1"], capsys
    )
    assert code == 2 and "--spent is for a gate without a ledger" in err


@pytest.mark.parametrize(
    "given", [["--budget", "5000"], ["--spent", "10"], ["--table", "costguard-ledger"]]
)
def test_a_gate_option_without_a_project_is_bad_input(
    given: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a budget (or spend, or ledger) but no --project, WHEN estimated, THEN exit 2:
    ignored, the gate would pass every run in CI without saying why."""
    argv = ["estimate", "train", "--params", "1B", "--tokens", "20B", "--gpu", "a10g", *FIXTURE]
    code, out, err = run([*argv, *given], capsys)
    assert code == 2 and out == ""
    assert f"{given[0]} gates a project's budget: pass --project too" in err


def test_the_offline_gate_makes_no_aws_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN no AWS at all (any session is a failure), WHEN the gate runs from a budgets
    file, THEN it decides (exit 4 here) without one call: a CI job needs no credentials."""
    from costguard.cli import common

    def no_aws(*args: object, **kwargs: object) -> None:
        raise AssertionError("the offline gate opened an AWS session")

    monkeypatch.setattr(common, "session", no_aws)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "budgets.json"
    path.write_text('{"llm": {"budget": 2000, "spent": 1500}}', encoding="utf-8")
    code, _, err = run([*SMALL, "--budgets-file", str(path)], capsys)
    assert code == 4 and "over its budget" in err
