"""`costguard report` as a user runs it, over moto's HTTP server (in this process, as
tests/support/cli.py runs the command)."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from costguard_demo.fleet import backdate_instances
from tests.support.cli import Done, costguard
from tests.support.clock import MIDDAY

pytestmark = pytest.mark.e2e
ENV = {"COSTGUARD_SAGEMAKER_STUDIO": "false"}
BASE = ("report", "--region", "us-east-1", "--quiet")


@pytest.fixture(autouse=True)
def _own_home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A scan reads the catalog `prices refresh` left in the user's data dir: not the real one."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))


def _tags(**tags: str) -> list[dict[str, Any]]:
    return [
        {
            "ResourceType": "instance",
            "Tags": [{"Key": k.replace("__", ":"), "Value": v} for k, v in tags.items()],
        }
    ]


@pytest.fixture
def fleet(moto_server: str) -> dict[str, str]:
    """Two projects of two teams, launched before the scan; one box nobody tagged."""
    import boto3

    ec2 = boto3.Session().client("ec2", region_name="us-east-1")
    run = {"ImageId": "ami-12345678", "MinCount": 1, "MaxCount": 1}
    ids = {}
    for name, itype, tags in (
        (
            "llm",
            "p5.48xlarge",
            _tags(costguard__project="llm", costguard__budget="20000", costguard__team="research"),
        ),
        (
            "cv",
            "g5.xlarge",
            _tags(costguard__project="cv", costguard__budget="$500", costguard__team="vision"),
        ),
        ("untagged", "g5.xlarge", []),
    ):
        extra = {"TagSpecifications": tags} if tags else {}
        ids[name] = ec2.run_instances(InstanceType=itype, **run, **extra)["Instances"][0][
            "InstanceId"
        ]
    backdate_instances("us-east-1", {i: MIDDAY - timedelta(days=3) for i in ids.values()})
    return ids


def report(*args: str) -> Done:
    return costguard(*BASE, *args, at=MIDDAY, env=ENV)


def test_a_local_report_writes_the_page_and_prints_the_envelope(
    fleet: dict[str, str], tmp_path: Path
) -> None:
    # GIVEN a fleet and no deployed ledger
    page = tmp_path / "out.html"
    # WHEN a user asks for the report as JSON and as a page
    done = report("--format", "json", "--html", str(page))
    # THEN it exits 0, prints the one envelope, and writes one self-contained page
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["schema_version"], doc["kind"]) == (2, "report")
    projects = {p["project"]: p for p in doc["data"]["projects"]}
    assert set(projects) == {"llm", "cv"}
    # a local scan back-fills from the month start, by day
    llm = projects["llm"]
    assert llm["days_known"] is True
    assert llm["daily_cumulative_usd"][-1]["usd"] == llm["month_to_date_usd"]
    assert doc["data"]["unattributed"]["month_to_date_usd"] > 0
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and "<script" not in html
    assert html.count('data-role="chart"') == 3


def test_the_report_reads_the_deployed_ledgers_days_and_never_writes(fleet: dict[str, str]) -> None:
    import boto3

    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.domain.spend import Increment
    from costguard.ports import ScanCommit
    from costguard_demo.plumbing import create_ledger_table

    # GIVEN a deployed ledger that kept llm's month by day since the 1st
    session = boto3.Session()
    create_ledger_table(session, "ledger", "us-east-1")
    ledger = DynamoDbLedger(session.client("dynamodb", region_name="us-east-1"), "ledger")
    days = {d: Decimal(100) for d in range(1, MIDDAY.day)}
    commit = ScanCommit(
        "123456789012",
        None,
        MIDDAY - timedelta(hours=12),
        {("llm", "2026-11"): Increment(sum(days.values(), Decimal(0)), Decimal(0), days)},
        [],
    )
    ledger.commit(commit)
    before = ledger.month_totals("123456789012", "2026-11")
    # WHEN the report reads it
    done = report("--table", "ledger", "--scope", "123456789012", "--format", "json")
    # THEN its series starts from the ledger's days, and the ledger is unchanged
    assert done.returncode == 0, done.stderr
    llm = {p["project"]: p for p in json.loads(done.stdout)["data"]["projects"]}["llm"]
    assert llm["daily_cumulative_usd"][1] == {"day": 1.0, "usd": 100.0}
    assert ledger.month_totals("123456789012", "2026-11") == before


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--month", "2999-01"), "has not begun"),
        # Defect: a past month without a ledger scanned, then said nothing was spent.
        (("--month", "2026-10"), "--month 2026-10 is past: a local scan knows this month only"),
        (("--month", "2026-13"), "must be a month like 2026-11"),
        (("--table", "nope", "--scope", "123456789012"), "ledger table 'nope' not found"),
        (("--format", "yaml"), "invalid choice"),
    ],
)
def test_bad_input_is_named_with_exit_2_and_no_traceback(
    fleet: dict[str, str], args: tuple[str, ...], says: str
) -> None:
    done = report(*args)
    assert done.returncode == 2
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_a_page_that_cannot_be_written_is_bad_input(fleet: dict[str, str], tmp_path: Path) -> None:
    # a folder, and a file in a folder that does not exist
    for target in (tmp_path, tmp_path / "missing" / "out.html"):
        done = report("--html", str(target))
        assert done.returncode == 2, done.stderr
        assert "--html" in done.stderr and "Traceback" not in done.stderr


def test_project_and_team_narrow_the_report(fleet: dict[str, str]) -> None:
    by_project = json.loads(report("--project", "cv", "--format", "json").stdout)["data"]
    assert [p["project"] for p in by_project["projects"]] == ["cv"]
    assert by_project["unattributed"] is None
    by_team = json.loads(report("--team", "research", "--format", "json").stdout)["data"]
    assert [p["project"] for p in by_team["projects"]] == ["llm"]
    assert {r["project"] for r in by_team["top_resources"]} == {"llm"}


def test_csv_is_one_row_per_project_under_stable_column_names(fleet: dict[str, str]) -> None:
    rows = list(csv.DictReader(io.StringIO(report("--format", "csv").stdout)))
    assert [r["project"] for r in rows] == ["llm", "cv", "(unattributed)"]
    assert {
        *("spent_usd", "budget_usd", "forecast_usd", "forecast_low_usd", "forecast_high_usd"),
        *("usd_per_hour", "unpriced_resources", "status"),
    } <= set(rows[0])
    # money is a plain number for a spreadsheet, not "$1,234.56"
    assert all(not r["spent_usd"].startswith("$") for r in rows)
    float(rows[0]["forecast_low_usd"])


def test_csv_money_is_a_plain_number_a_spreadsheet_can_add(fleet: dict[str, str]) -> None:
    """Defect: the report's CSV said ``$20,000.00``, ``none`` and ``$722.60 to $722.60``
    (text to a spreadsheet), where every other command's CSV gives plain numbers.

    GIVEN a fleet with and without budgets, WHEN the report is printed as CSV, THEN each
    ``*_usd`` cell is a number to the cent ("none": no budget), the run-rate a number of
    $/h, and the range its two ends, low <= forecast <= high."""
    rows = {r["project"]: r for r in csv.DictReader(io.StringIO(report("--format", "csv").stdout))}
    llm, untagged = rows["llm"], rows["(unattributed)"]
    assert llm["budget_usd"] == "20000.00" and untagged["budget_usd"] == "none"
    for row in (llm, untagged):
        for key in ("spent_usd", "forecast_usd", "forecast_low_usd", "forecast_high_usd"):
            assert Decimal(row[key]) == Decimal(row[key]).quantize(Decimal("0.01")), (key, row)
        assert Decimal(row["forecast_low_usd"]) <= Decimal(row["forecast_usd"])
        assert Decimal(row["forecast_usd"]) <= Decimal(row["forecast_high_usd"])
    # a p5.48xlarge ($55.04/h) and its root volume, to four places
    assert Decimal("55.04") < Decimal(llm["usd_per_hour"]) < Decimal("55.05")
    assert Decimal(llm["usd_per_hour"]).as_tuple().exponent == -4


def test_markdown_has_a_heading_and_an_empty_month_says_so(fleet: dict[str, str]) -> None:
    """Defect: ``--format markdown`` of a month with no spend printed a header row alone (a
    broken table in a PR comment), and no heading line as every other command's has.

    GIVEN a month long before the fleet ran, WHEN printed as markdown and as a table, THEN
    each says in words that nothing was spent; this month's markdown has its heading."""
    import boto3

    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(boto3.Session(), "ledger", "us-east-1")
    past = ("--table", "ledger", "--scope", "123456789012", "--month", "2025-01")
    empty = report(*past, "--format", "markdown")
    assert empty.returncode == 0, empty.stderr
    assert "_No project has spend in 2025-01._" in empty.stdout and "|---" not in empty.stdout
    assert report(*past).stdout == "No project has spend in 2025-01.\n"
    narrowed = report("--project", "nosuch").stdout
    assert narrowed == "No project has spend in 2026-11 (project nosuch).\n"
    now = report("--format", "markdown").stdout
    assert now.startswith("**CostGuard report, ") and "| llm |" in now


def test_progress_over_a_deployed_ledger_never_says_it_updates_it(fleet: dict[str, str]) -> None:
    """Defect: `costguard report --table ledger` (and `scan --table`), which read the
    deployed ledger and never write it, said "costguard: updating the ledger" on stderr.

    GIVEN a deployed ledger, WHEN the report runs with its progress shown, THEN no line
    says the ledger is updated, and the ledger holds nothing it did not hold before."""
    import boto3

    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(boto3.Session(), "ledger", "us-east-1")
    done = costguard(
        "report", "--region", "us-east-1", "--table", "ledger", "--scope", "123456789012",
        at=MIDDAY, env=ENV,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "costguard: [" in done.stderr  # progress is shown
    assert "updating" not in done.stderr, done.stderr


def test_json_rates_have_four_places_as_the_scans_do(fleet: dict[str, str]) -> None:
    """Defect: the report's JSON said ``"run_rate_usd_per_hour": 1.0081917808219178``, where
    the scan's JSON rounds a $/h rate to four places.

    GIVEN a fleet, WHEN the report prints JSON, THEN every $/h figure has at most four
    decimal places."""
    data = json.loads(report("--format", "json").stdout)["data"]
    rates = [p["run_rate_usd_per_hour"] for p in data["projects"]]
    rates += [k["usd_per_hour"] for k in data["by_kind"]]
    rates += [t["usd_per_hour"] for t in data["top_resources"] if t["usd_per_hour"] is not None]
    assert rates
    for value in rates:
        assert Decimal(str(value)) == Decimal(str(value)).quantize(Decimal("0.0001")), value


def test_a_report_that_read_nothing_says_so_not_that_nothing_was_spent(
    moto_server: str,
) -> None:
    """GIVEN an endpoint nobody answers (every source fails), WHEN the report runs, THEN it
    exits 3 and its text names what could not be read, not only "No project has spend"."""
    done = costguard(
        *BASE,
        at=MIDDAY,
        env={**ENV, "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_MAX_ATTEMPTS": "1"},
    )
    assert done.returncode == 3, done.stderr
    assert "us-east-1/ec2" in done.stdout and "could not be read" in done.stdout
