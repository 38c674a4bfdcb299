"""The `costguard` command line people expect: shared flags, --version, settings from the
options, and a refreshed price catalog that lives in the user's data directory.

The command runs in-process through ``main([...])``; where it reaches AWS, moto does.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest

from costguard.adapters.catalog import (
    CatalogFile,
    bundled_catalog_path,
    read_catalog_file,
    write_catalog_file,
)
from costguard.env import Env


@pytest.fixture(autouse=True)
def _own_home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every test gets its own HOME and XDG_DATA_HOME: nothing reads or writes the real ones."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))


@pytest.fixture
def no_aws_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from costguard.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert "Traceback" not in lines[0]
    return lines[0]


# -- --version -------------------------------------------------------------------------------


def test_version_is_the_installed_packages(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    code, out, err = run_cli(["--version"], capsys)
    assert code == 0
    assert out == f"costguard {version('costguard')}\n"
    assert err == ""


def test_version_falls_back_to_the_source_when_not_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.metadata

    import costguard

    # GIVEN a source checkout with no installed distribution
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    # WHEN the version is asked for, THEN the source's is printed
    code, out, _ = run_cli(["--version"], capsys)
    assert (code, out) == (0, f"costguard {costguard.__version__}\n")


# -- shared flags: spelled, validated and documented once ------------------------------------

AWS_COMMANDS = [["scan"], ["alerts"], ["actions"], ["prices", "refresh"]]


@pytest.mark.parametrize("command", AWS_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("region", ["mars-1", "us-east-1\n", "us-east-١", ""])
def test_every_command_rejects_a_bad_region_the_same_way(
    command: list[str], region: str, capsys: pytest.CaptureFixture[str], no_aws_reachable: None
) -> None:
    code, out, err = run_cli([*command, "--region", region], capsys)
    assert code == 2
    line = one_line(err)
    assert re.fullmatch(
        r"costguard [a-z ]+: error: argument --region: not an AWS region name: .* "
        r"\(expected e\.g\. us-east-1\)",
        line,
    ), line
    assert out == ""


@pytest.mark.parametrize("command", AWS_COMMANDS, ids=lambda c: c[0])
def test_every_command_refuses_a_region_botocore_does_not_know_naming_it(
    command: list[str], capsys: pytest.CaptureFixture[str], no_aws_reachable: None
) -> None:
    """Defect: ``costguard scan --region us-east-9`` (shaped like a region, but none)
    was accepted, and called an endpoint that does not exist (one answering with an HTML
    page ended the scan in a traceback).

    GIVEN a region name no partition of botocore's endpoint data has
    WHEN any command is given it
    THEN it is refused before any call, on one line that names it, exit 2
    """
    code, out, err = run_cli([*command, "--region", "us-east-9"], capsys)
    assert code == 2 and out == ""
    line = one_line(err)
    assert re.fullmatch(
        r"costguard [a-z ]+: error: argument --region: unknown AWS region 'us-east-9': "
        r"no partition botocore [0-9.]+ knows has it \(did you mean .*",
        line,
    ), line


@pytest.mark.parametrize(
    "region",
    ["ap-east-1", "me-central-1", "il-central-1", "af-south-1", "us-gov-west-1", "cn-north-1"],
)
def test_opt_in_and_other_partitions_regions_are_accepted(region: str) -> None:
    # GIVEN a region that needs opting in, or one of another partition, which botocore knows
    from costguard.cli import build_parser

    # WHEN it is given THEN every command takes it
    assert build_parser().parse_args(["scan", "--region", region]).region == [region]
    assert build_parser().parse_args(["alerts", "--table-region", region]).table_region == region


@pytest.mark.parametrize(
    ("variable", "named"),
    [("AWS_DEFAULT_REGION", "the default region"), (Env.REGIONS, Env.REGIONS)],
)
def test_a_scan_refuses_an_unknown_region_from_the_environment_naming_where_it_came_from(
    variable: str,
    named: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_aws_reachable: None,
) -> None:
    # GIVEN no --region, and a region botocore does not know in the environment
    monkeypatch.setenv(variable, "us-east-9")
    # WHEN a user scans
    code, out, err = run_cli(["scan"], capsys)
    # THEN the scan is refused on one line naming the region and where it came from
    assert code == 2 and out == ""
    line = one_line(err)
    assert line.startswith(f"costguard: {named}") and "'us-east-9'" in line, line


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, _ = run_cli([*argv, "--help"], capsys)
    assert code == 0
    return " ".join(out.split())  # the same words, however argparse wraps them


@pytest.mark.parametrize(
    ("flag", "commands"),
    [
        ("--profile NAME", [*AWS_COMMANDS]),
        ("--json", [["scan"], ["alerts"], ["actions"], ["demo"], ["estimate", "train"]]),
        (
            "--format {table,json,csv,markdown}",
            [["scan"], ["alerts"], ["actions"], ["demo"], ["estimate", "iteration"]],
        ),
        ("--quiet", [["scan"], ["prices", "refresh"]]),
        (
            "--table-region REGION",
            [
                ["alerts"],
                ["actions"],
                ["estimate", "train"],
                ["prices", "refresh"],
                ["prices", "show"],
            ],
        ),
        ("--region REGION", [["scan"], ["prices", "refresh"]]),
    ],
)
def test_a_shared_flag_is_documented_once(
    flag: str, commands: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a flag several commands take; WHEN each command's --help is read
    helps = [_help(command, capsys) for command in commands]
    described = [re.search(rf"{re.escape(flag)} (.*?)(?= --[a-z]|$)", h) for h in helps]
    # THEN every command takes it, and says the same about it
    assert all(described), helps
    assert len({d.group(1) for d in described if d}) == 1


def test_scan_and_refresh_repeat_region_while_alerts_take_one() -> None:
    from costguard.cli import build_parser

    regions = ["--region", "us-east-1", "--region", "eu-west-1"]
    assert build_parser().parse_args(["scan", *regions]).region == ["us-east-1", "eu-west-1"]
    assert build_parser().parse_args(["prices", "refresh", *regions]).region == [
        "us-east-1",
        "eu-west-1",
    ]
    # One ledger lives in one region: the last one given is the one read.
    tables = ["--table-region", "us-east-1", "--table-region", "eu-west-1"]
    assert build_parser().parse_args(["alerts", *tables]).table_region == "eu-west-1"
    assert build_parser().parse_args(["actions", *tables]).table_region == "eu-west-1"


# -- settings from the options, not through environment-variable names ------------------------


def _scan_args(*argv: str) -> argparse.Namespace:
    from costguard.cli import build_parser

    return build_parser().parse_args(["scan", *argv])


class _Session:
    """What the settings need of a boto3 session: its default region."""

    def __init__(self, region: str | None) -> None:
        self.region_name = region


def test_an_option_error_names_the_option_not_a_variable() -> None:
    from costguard.cli.scan import settings_for_scan
    from costguard.settings import SettingsError

    # GIVEN a region that got past argparse (a caller building the arguments itself)
    args = argparse.Namespace(region=["mars-1"], table=None, scope=None, sagemaker_tags=None)
    # WHEN settings are built, THEN the error says --region, which is what the user wrote
    with pytest.raises(SettingsError) as caught:
        settings_for_scan(args, _Session(None), environ={})
    assert str(caught.value) == (
        "invalid CostGuard settings: --region: must be AWS region names like us-east-1, "
        "got 'mars-1'"
    )


def test_a_bad_default_region_names_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], no_aws_reachable: None
) -> None:
    # GIVEN no --region and a malformed AWS_DEFAULT_REGION (not COSTGUARD_REGIONS)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "Mars")
    # WHEN a user scans
    code, out, err = run_cli(["scan"], capsys)
    # THEN the message points at the default region, not a variable the user never set
    assert code == 2
    line = one_line(err)
    assert "AWS_DEFAULT_REGION" in line and "Mars" in line
    assert Env.REGIONS not in line
    assert out == ""


def test_options_beat_their_variables_and_the_rest_of_the_environment_applies() -> None:
    from costguard.cli.scan import settings_for_scan

    # GIVEN variables for every option (some invalid) and for settings without an option
    environ = {
        Env.REGIONS: "not a region",
        Env.TABLE_NAME: "env-table",
        Env.SCOPE: "env-scope",
        Env.SAGEMAKER_TAGS: "bogus",
        Env.PROJECT_TAG_KEYS: "team,Team",
        Env.SAGEMAKER_STUDIO: "false",
        Env.WARNING_PCT: "70",
    }
    args = _scan_args(
        *("--region", "eu-west-1", "--region", "us-east-1", "--table", "ledger"),
        *("--scope", "acct", "--sagemaker-tags", "per-resource"),
    )
    # WHEN settings are built
    settings = settings_for_scan(args, _Session("ap-south-1"), environ=environ)
    # THEN each option wins over its variable, and the other variables still configure the scan
    assert settings.regions == ("eu-west-1", "us-east-1")
    assert (settings.table_name, settings.scope) == ("ledger", "acct")
    assert settings.sagemaker_tags == "per-resource"
    assert settings.project_tag_keys == ("team", "Team")
    assert settings.sagemaker_studio is False
    assert str(settings.warning_pct) == "70"


@pytest.mark.parametrize(
    ("environ", "session_region", "regions"),
    [
        ({}, "eu-west-1", ("eu-west-1",)),
        ({Env.WARNING_PCT: "70"}, "eu-west-1", ("eu-west-1",)),  # the stand-in never shows
        ({Env.REGIONS: "us-west-2,eu-west-1"}, "eu-west-1", ("us-west-2", "eu-west-1")),
    ],
)
def test_without_region_options_the_regions_come_from_the_environment(
    environ: dict[str, str], session_region: str, regions: tuple[str, ...]
) -> None:
    from costguard.cli.scan import settings_for_scan

    settings = settings_for_scan(_scan_args(), _Session(session_region), environ=environ)
    assert settings.regions == regions


def test_with_no_options_and_no_variables_the_settings_are_the_defaults() -> None:
    from costguard.cli.scan import settings_for_scan
    from costguard.settings import Settings

    settings = settings_for_scan(_scan_args(), _Session("us-east-1"), environ={})
    assert settings == Settings(regions=("us-east-1",))


def test_a_bad_variable_is_still_named_by_its_variable() -> None:
    from costguard.cli.scan import settings_for_scan
    from costguard.settings import SettingsError

    with pytest.raises(SettingsError, match=f"{Env.PROJECTS_JSON}: must be JSON"):
        settings_for_scan(
            _scan_args("--region", "us-east-1"), _Session(None), environ={Env.PROJECTS_JSON: "{"}
        )


# -- which price catalog a scan uses ---------------------------------------------------------


def _user_catalog() -> Path:
    import os

    return Path(os.environ["XDG_DATA_HOME"]) / "costguard" / "prices.json"


def _write(catalog: CatalogFile, path: Path, **changes: Any) -> CatalogFile:
    path.parent.mkdir(parents=True, exist_ok=True)
    changed = catalog.model_copy(update=changes)
    write_catalog_file(changed, path)
    return changed


@pytest.fixture
def scan(aws: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """Run `costguard scan --region us-east-1 ...` on moto: (exit code, stdout, stderr)."""
    monkeypatch.setenv(Env.SAGEMAKER_STUDIO, "false")

    def run(*extra: str) -> tuple[int, str, str]:
        return run_cli(["scan", "--region", "us-east-1", *extra], capsys)

    return run


def test_scan_prices_with_the_refreshed_catalog_when_it_is_newer(scan: Any) -> None:
    # GIVEN `prices refresh` left a catalog checked later than the packaged one
    packaged = read_catalog_file()
    refreshed = _write(
        packaged,
        _user_catalog(),
        as_of=packaged.as_of.replace(year=2031),
        version=packaged.version + 1,
    )
    # WHEN a user scans without --catalog
    code, out, err = scan()
    # THEN the refreshed prices are used, and stderr says which catalog it was
    assert code == 0
    assert f"prices as of {refreshed.as_of}" in out
    assert (
        f"costguard: prices from {_user_catalog()} "
        f"(version {refreshed.version}, as of {refreshed.as_of}; refreshed)"
    ) in err.splitlines()


def test_a_partial_refresh_on_the_same_day_is_newer_by_its_version(scan: Any) -> None:
    # GIVEN a refresh where a region returned nothing: as_of stays, the version moves on
    packaged = read_catalog_file()
    _write(packaged, _user_catalog(), version=packaged.version + 1)
    code, _, err = scan("--json")
    # THEN it is used (and said so even with --json: stdout stays pure JSON)
    assert code == 0
    assert f"prices from {_user_catalog()} (version {packaged.version + 1}" in err


@pytest.mark.parametrize(
    "changes",
    [
        {"as_of_years": -5, "version": 99},  # older prices, whatever the version says
        {"as_of_years": 0, "version": 0},  # the packaged catalog itself, copied
    ],
)
def test_scan_keeps_the_packaged_catalog_when_the_refreshed_one_is_not_newer(
    scan: Any, changes: dict[str, int]
) -> None:
    # GIVEN a refreshed catalog that is older than (or the same as) the packaged one,
    # e.g. the package was upgraded after the last refresh
    packaged = read_catalog_file()
    older = _write(
        packaged,
        _user_catalog(),
        as_of=packaged.as_of.replace(year=packaged.as_of.year + changes["as_of_years"]),
        version=changes["version"] or packaged.version,
    )
    # WHEN a user scans
    code, out, err = scan()
    # THEN the packaged prices are used, and stderr says why the refreshed ones were not
    assert code == 0
    assert f"prices as of {packaged.as_of}" in out
    line = next(x for x in err.splitlines() if "prices from" in x)
    assert line == (
        f"costguard: prices from the packaged catalog {bundled_catalog_path()} "
        f"(version {packaged.version}, as of {packaged.as_of}); {_user_catalog()} "
        f"(version {older.version}, as of {older.as_of}) is not newer"
    )


def test_catalog_option_beats_a_newer_refreshed_catalog(scan: Any, tmp_path: Path) -> None:
    packaged = read_catalog_file()
    _write(packaged, _user_catalog(), as_of=packaged.as_of.replace(year=2031))
    named = _write(packaged, tmp_path / "named.json", as_of=packaged.as_of.replace(year=2030))
    code, out, err = scan("--catalog", str(tmp_path / "named.json"))
    assert code == 0
    assert f"prices as of {named.as_of}" in out
    assert f"prices from {tmp_path / 'named.json'} (" in err and "--catalog)" in err


@pytest.mark.parametrize("content", ["{", '{"version": 1}', "directory"])
def test_a_broken_refreshed_catalog_is_a_warning_and_the_packaged_one_is_used(
    scan: Any, content: str
) -> None:
    # GIVEN the refreshed catalog is damaged (cut short, hand-edited, a directory)
    path = _user_catalog()
    path.parent.mkdir(parents=True)
    if content == "directory":
        path.mkdir()
    else:
        path.write_text(content, encoding="utf-8")
    # WHEN a user scans, even with --quiet
    code, out, err = scan("--quiet")
    # THEN the scan still runs on the packaged prices, and one warning names the file
    assert code == 0
    assert f"prices as of {read_catalog_file().as_of}" in out
    line = one_line(err)
    assert line.startswith(f"costguard: warning: price catalog {path}")
    assert "prices refresh" in line


def test_quiet_does_not_say_which_catalog(scan: Any) -> None:
    code, _, err = scan("--quiet")
    assert code == 0
    assert err == ""


def test_scan_says_which_catalog_it_used(scan: Any) -> None:
    packaged = read_catalog_file()
    code, _, err = scan()
    assert code == 0
    assert (
        f"costguard: prices from the packaged catalog {bundled_catalog_path()} "
        f"(version {packaged.version}, as of {packaged.as_of})"
    ) in err.splitlines()


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"XDG_DATA_HOME": "/x/data", "HOME": "/home/u"}, "/x/data/costguard/prices.json"),
        # A relative XDG_DATA_HOME is ignored, as the XDG base directory rules say.
        ({"XDG_DATA_HOME": "data", "HOME": "/home/u"}, None),
        ({"XDG_DATA_HOME": "", "HOME": "/home/u"}, None),
    ],
)
def test_the_user_catalog_follows_xdg_data_home(
    environ: dict[str, str], expected: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.cli.common import user_catalog_path

    monkeypatch.setenv("HOME", environ["HOME"])
    found = user_catalog_path(environ)
    assert str(found) == (expected or "/home/u/.local/share/costguard/prices.json")


def test_a_catalog_path_with_a_newline_is_still_one_line(
    scan: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN a data directory whose name holds a newline, and a damaged catalog in it
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data\nforged: line"))
    _user_catalog().parent.mkdir(parents=True)
    _user_catalog().write_text("{", encoding="utf-8")
    # WHEN a user scans, THEN the warning cannot be split into a forged second line
    code, _, err = scan("--quiet")
    assert code == 0
    assert "data\\nforged: line" in one_line(err)
