"""Bad input to `costguard` is exit 2 and one line on stderr; AWS failures are exit 1.

The command runs in-process through ``main([...])``; where it reaches AWS, moto does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from costguard.adapters.catalog import bundled_catalog_path
from costguard.env import Env


@pytest.fixture(autouse=True)
def _own_home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A scan reads the catalog `prices refresh` left in the user's data dir: not the real one."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """What a shell sees: the exit code, stdout and stderr (a traceback fails the test)."""
    from costguard.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's way out, as the shell would see it
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    line = lines[0]
    assert line.startswith("costguard"), line
    assert "Traceback" not in line and "pydantic.dev" not in line
    return line


@pytest.fixture
def no_aws_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any call that slips through goes to a closed local port, never to AWS."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_aws_reachable: None) -> None:
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def ledger(aws: Any) -> str:
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    return "ledger"


# -- usage errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "mentions"),
    [
        (["scan", "--region", "mars-1"], "'mars-1'"),
        (["scan", "--region", "us-east-1\n"], "not an AWS region name"),
        (["scan", "--region", "us-east-١"], "not an AWS region name"),
        (["scan", "--bogus"], "--bogus"),
        ([], "command"),
        (["prices", "refresh", "--region", "US-EAST-1"], "US-EAST-1"),
        (["prices", "refresh", "--pricing-region", "nowhere"], "nowhere"),
        (["alerts", "--table", "ledger", "--table-region", "eu_west_1"], "eu_west_1"),
        (["scan", "--region", "us-east-1", "--table", "my table"], "'my table'"),
        (["alerts", "--table", "ab", "--table-region", "us-east-1"], "not a DynamoDB table name"),
        (
            ["alerts", "--table", "ledger\n", "--table-region", "us-east-1"],
            "not a DynamoDB table name",
        ),
        (["demo", "--cycles", "0"], "--cycles"),
        (["demo", "--cycles", "-3"], "--cycles"),
        (["demo", "--org", "--cycles", "2"], "from 3 to 96"),
        (["demo", "--org", "--cycles", "97"], "from 3 to 96"),
    ],
)
def test_rejects_bad_arguments_with_one_line_and_exit_2(
    argv: list[str], mentions: str, capsys: pytest.CaptureFixture[str], no_aws_reachable: None
) -> None:
    code, out, err = run_cli(argv, capsys)
    assert code == 2
    assert mentions in one_line(err)
    assert out == ""


@pytest.mark.parametrize(
    "hours", ["-5", "0", "9601", "100000000000000000000", "nan", "1.5", "1e3", "٥", ""]
)
def test_rejects_alert_hours_outside_the_alert_log_retention(
    hours: str, ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a ledger to read; WHEN --hours is not 1..9600 (alerts live 400 days)
    code, out, err = run_cli(
        [
            "alerts",
            "--table",
            ledger,
            "--scope",
            "acct",
            "--table-region",
            "us-east-1",
            "--hours",
            hours,
        ],
        capsys,
    )
    # THEN it is bad input, said once, and nothing is read
    assert code == 2
    line = one_line(err)
    assert "--hours" in line and "1 to 9600" in line
    assert out == ""


@pytest.mark.parametrize("hours", ["1", "9600", " 24 "])
def test_accepts_alert_hours_within_the_retention(
    hours: str, ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(
        [
            "alerts",
            "--table",
            ledger,
            "--scope",
            "acct",
            "--table-region",
            "us-east-1",
            "--hours",
            hours,
        ],
        capsys,
    )
    assert code == 0
    assert "No alerts in the last" in out


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["--help"], capsys)
    assert code == 0
    assert "exit codes" in out


# -- settings errors -------------------------------------------------------------------------


def test_settings_errors_name_the_variable_without_pydantic_links(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], no_aws_reachable: None
) -> None:
    monkeypatch.setenv(Env.WARNING_PCT, "500")
    code, out, err = run_cli(["scan", "--region", "us-east-1"], capsys)
    assert code == 2
    assert one_line(err) == (
        "costguard: invalid CostGuard settings: "
        "COSTGUARD_WARNING_PCT: Input should be less than or equal to 100 (got '500')"
    )
    assert out == ""


# -- environment: profile, region, credentials -----------------------------------------------


def test_an_unknown_profile_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    code, _, err = run_cli(["scan", "--region", "us-east-1", "--profile", "nope"], capsys)
    assert code == 2
    assert "nope" in one_line(err)


def test_scan_takes_its_region_from_aws_region(
    aws: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN only AWS_REGION (which botocore ignores, but the error message recommends)
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv(Env.SAGEMAKER_STUDIO, "false")
    # WHEN a user scans without --region
    code, out, _ = run_cli(["scan", "--quiet"], capsys)
    # THEN eu-west-1 is scanned
    assert code == 0
    assert "CostGuard scan of eu-west-1" in out


def test_alerts_without_a_region_says_to_pass_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], no_aws_reachable: None
) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    code, _, err = run_cli(["alerts", "--table", "ledger", "--scope", "acct"], capsys)
    assert code == 2
    assert "--table-region" in one_line(err)


@pytest.mark.parametrize(
    "argv",
    [
        ["scan", "--region", "us-east-1", "--quiet"],
        ["alerts", "--table", "ledger", "--scope", "acct", "--table-region", "us-east-1"],
        ["prices", "refresh", "--region", "us-east-1", "--out", "prices.json"],
    ],
)
def test_without_credentials_it_says_so_once_and_exits_1(
    argv: list[str],
    no_credentials: None,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(argv, capsys)
    assert code == 1
    assert "no AWS credentials found" in one_line(err)
    assert out == ""
    assert not (tmp_path / "prices.json").exists()


# -- a ledger table that is not there --------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["scan", "--region", "us-east-1", "--quiet", "--table", "nope", "--scope", "acct"],
        ["alerts", "--table", "nope", "--scope", "acct", "--table-region", "us-east-1"],
    ],
)
def test_a_missing_ledger_table_is_bad_input(
    argv: list[str], aws: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(Env.SAGEMAKER_STUDIO, "false")
    code, out, err = run_cli(argv, capsys)
    assert code == 2
    line = one_line(err)
    assert "'nope' not found in us-east-1" in line and "LedgerTable" in line
    assert out == ""


# -- scan --catalog (where `prices refresh --out` wrote) ------------------------------------


def test_scan_reads_the_catalog_it_is_given(
    aws: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.adapters.catalog import read_catalog_file, write_catalog_file

    monkeypatch.setenv(Env.SAGEMAKER_STUDIO, "false")
    catalog = read_catalog_file()
    path = tmp_path / "prices.json"
    write_catalog_file(catalog.model_copy(update={"as_of": catalog.as_of.replace(year=2031)}), path)
    code, out, _ = run_cli(
        ["scan", "--region", "us-east-1", "--quiet", "--catalog", str(path)], capsys
    )
    assert code == 0
    assert f"prices as of 2031-{catalog.as_of:%m-%d}" in out


@pytest.mark.parametrize("content", [None, "{", '{"version": 1}', "eks without extended"])
def test_scan_with_a_broken_catalog_is_bad_input(
    content: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_aws_reachable: None
) -> None:
    path = tmp_path / "prices.json"
    if content == "eks without extended":
        raw = json.loads(bundled_catalog_path().read_text(encoding="utf-8"))
        del raw["eks_cluster_hour"]["extended"]
        content = json.dumps(raw)
    if content is not None:
        path.write_text(content, encoding="utf-8")
    code, _, err = run_cli(["scan", "--region", "us-east-1", "--catalog", str(path)], capsys)
    assert code == 2
    assert str(path) in one_line(err)
