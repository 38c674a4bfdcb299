"""Golden outputs: every ``--format`` of every command that prints results.

``scan`` (one account, and ``--accounts``), ``report``, ``alerts``, ``actions``, ``estimate
train`` and ``estimate iteration`` (``prices show``: tests/pricing), each in table, json, csv and markdown, at a fixed instant
(:data:`MIDDAY`) with fixed ids, against files in ``tests/golden/cli/``. A change to any
output fails its test; ``UPDATE_GOLDEN=1`` rewrites the files, and the diff is then the
review. The project names are hostile on purpose: a comma, quotes, a pipe, a newline, a
formula's ``=``, markup, a right-to-left override and wide characters must not break a CSV
row, a markdown table or a spreadsheet. ``alerts`` and ``actions`` read a ledger on moto
through ``costguard ...`` itself; the scans are rendered by the functions ``costguard
scan`` prints with, from a scan of in-memory sources (durations and call counts fixed).
``demo`` prints the scan's CSV and markdown, and its envelope is checked end to end in
``tests/e2e/test_demo.py``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from costguard.domain.models import Lifecycle, Resource, ResourceKind
from costguard.ports import AuditEvent, Inventory
from tests.support.catalog import FIXTURE_CATALOG_PATH, fixture_catalog
from tests.support.clock import MIDDAY, clock_at
from tests.support.fakes import StaticInventory, StaticSpotPrices

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "cli"
FORMATS = ("table", "json", "csv", "markdown")
SUFFIX = {"table": "txt", "json": "json", "csv": "csv", "markdown": "md"}
ACCOUNT = "123456789012"
#: A project name that breaks naive CSV, markdown and spreadsheets at once.
HOSTILE = 'r&d, "vision" | =1+1\n\u202egnp.exe 計算'
#: What the scan accepts as a project tag (visible characters only), still hostile to CSV
#: (a formula, a comma, quotes), to markdown (a pipe, markup) and to alignment (wide).
SCAN_HOSTILE = '=HYPERLINK("http://x"), r&d | *vision* 計算'


def check(name: str, fmt: str, actual: str) -> None:
    path = GOLDEN / f"{name}.{SUFFIX[fmt]}"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(actual.encode("utf-8"))
    # Bytes: CSV's CRLF row ends are part of the output, not a platform's newline.
    expected = path.read_bytes().decode("utf-8")
    assert actual == expected, f"{path.name} changed; UPDATE_GOLDEN=1 to accept"
    well_formed(fmt, actual)


def well_formed(fmt: str, text: str) -> None:
    """What every output of a format must be, whatever its content."""
    if fmt == "json":
        doc = json.loads(text)
        assert list(doc) == ["schema_version", "kind", "generated_at", "data"]
        assert doc["schema_version"] == 2
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(text, newline="")))
        assert rows and all(len(r) == len(rows[0]) for r in rows), "a row lost or forged a cell"
        assert not any(cell.startswith(("=", "+", "@")) for r in rows[1:] for cell in r)
    elif fmt == "markdown":
        # Each table's rows have its header's cells: no cell ended early or ran over.
        widths: list[int] = []
        for line in [*text.splitlines(), ""]:
            if line.startswith("|"):
                widths.append(len(re.findall(r"(?<!\\)\|", line)))
                assert "\u202e" not in line, line
            elif widths:
                assert len(set(widths)) == 1, text
                widths = []


# -- scan ---------------------------------------------------------------------------------


def _scan(tags: dict[str, str], account: str = ACCOUNT) -> Any:
    from costguard.adapters.memory import InMemoryLedger
    from costguard.services.scan import ScanService, ScanSettings

    resources = [
        Resource(
            id="i-0a1b2c3d4e5f60718",
            kind=ResourceKind.EC2_INSTANCE,
            region="us-east-1",
            account=account,
            instance_type="p4d.24xlarge",
            launched_at=MIDDAY - timedelta(hours=5),
            state="running",
            tags={**tags, "costguard:owner": "alice@example.com", "costguard:budget": "5000"},
        ),
        Resource(
            id="i-0fedcba9876543210",
            kind=ResourceKind.EC2_INSTANCE,
            region="us-east-1",
            account=account,
            instance_type="g5.xlarge",
            lifecycle=Lifecycle.SPOT,
            launched_at=MIDDAY - timedelta(hours=2),
            state="running",
            tags=tags,
        ),
        Resource(
            id="i-00000000000mystery",
            kind=ResourceKind.EC2_INSTANCE,
            region="us-east-1",
            account=account,
            instance_type="x9.mystery",
            launched_at=MIDDAY - timedelta(hours=1),
            state="running",
        ),
    ]
    report = ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory(tuple(resources))})],
        StaticSpotPrices({}),
        fixture_catalog(),
        InMemoryLedger(),
        ScanSettings(scope=account, regions=("us-east-1",)),
    ).run(MIDDAY)
    # What varies from run to run is fixed: the scan's own duration and calls.
    return replace(report, duration_s=0.25, api_calls={"ec2.DescribeInstances": 1})


@pytest.mark.parametrize("fmt", FORMATS)
def test_scan(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    from costguard.cli.scan import print_scan

    # GIVEN a scan with a hostile project name, a spot GPU and an unpriced type
    report = _scan({"costguard:project": SCAN_HOSTILE})
    # WHEN it is printed in each format
    print_scan(fmt, report)
    # THEN the output is the golden file's, to the byte
    check("scan", fmt, capsys.readouterr().out)


@pytest.mark.parametrize("fmt", FORMATS)
def test_scan_of_an_empty_account(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    from costguard.adapters.memory import InMemoryLedger
    from costguard.cli.scan import print_scan
    from costguard.services.scan import ScanService, ScanSettings

    report = ScanService(
        [StaticInventory("ec2", {})],
        StaticSpotPrices({}),
        fixture_catalog(),
        InMemoryLedger(),
        ScanSettings(scope=ACCOUNT, regions=("us-east-1",)),
    ).run(MIDDAY)
    print_scan(fmt, replace(report, duration_s=0.1, api_calls={}))
    check("scan-empty", fmt, capsys.readouterr().out)


@pytest.mark.parametrize("fmt", FORMATS)
def test_scan_of_several_accounts(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    from costguard.adapters.assume import AccountAccessError
    from costguard.cli.org import AccountScan, print_accounts

    # GIVEN two accounts scanned and one that could not be entered
    a, b, c = "111111111111", "222222222222", "333333333333"
    results = [
        AccountScan(a, report=_scan({"costguard:project": "llm"}, a)),
        AccountScan(b, error=AccountAccessError(b, "AccessDenied", "no member role")),
        AccountScan(c, report=_scan({"costguard:project": "vision"}, c)),
    ]
    # WHEN they are printed
    code = print_accounts(results, fmt, MIDDAY)
    out, err = capsys.readouterr()
    # THEN each scanned account is in the output, and the failed one on stderr (and JSON)
    assert code == 0 and b in err
    check("scan-accounts", fmt, out)


# -- report ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_report(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    from costguard.adapters.memory import InMemoryLedger
    from costguard.cli.report import print_report
    from costguard.domain.spend import Increment
    from costguard.ports import ScanCommit
    from costguard.services.report import ReportRequest, build_report

    # GIVEN the hostile project's month kept by day since the 1st (its spend rising; $120.25
    # of its $7,600 storage), the project with no tag, and this scan: a spot GPU, a p4d and
    # an unpriced type
    scan = _scan({"costguard:project": SCAN_HOSTILE})
    ledger = InMemoryLedger()
    days = {d: Decimal(40 * d) for d in range(1, MIDDAY.day)}
    spent = sum(days.values(), Decimal(0))
    split = {"compute": spent - Decimal("120.25"), "storage": Decimal("120.25")}
    ledger.commit(
        ScanCommit(
            ACCOUNT,
            None,
            MIDDAY - timedelta(hours=12),
            {
                (SCAN_HOSTILE, "2026-11"): Increment(spent, Decimal(0), days, split),
                (None, "2026-11"): Increment(
                    Decimal("12.5"), Decimal(0), {19: Decimal("12.5")}, {"compute": Decimal("12.5")}
                ),
            },
            [],
        )
    )
    report = build_report(scan, ledger, ReportRequest("2026-11"), MIDDAY)
    # WHEN it is printed in each format
    print_report(fmt, report, MIDDAY)
    # THEN the output is the golden file's, to the byte
    check("report", fmt, capsys.readouterr().out)


# -- alerts and actions, through the command, from a ledger on moto ---------------------------


def _ledger(aws: Any) -> Any:
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    return DynamoDbLedger(aws.client("dynamodb", region_name="us-east-1"), "ledger")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    from costguard.cli import main

    with clock_at(MIDDAY, frozen=True):
        code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


LEDGER = ["--table", "ledger", "--scope", "acct", "--region", "us-east-1"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_alerts(fmt: str, aws: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN two alerts, one about a hostile project name with markup in its title
    ledger = _ledger(aws)
    for minutes, alert in (
        (
            90,
            {
                "alert_id": "budget-threshold/2026-11/80/llm",
                "kind": "budget-threshold",
                "project": "llm",
                "severity": "warning",
                "title": "llm: 80% of the monthly budget spent",
            },
        ),
        (
            30,
            {
                "alert_id": "burn-rate-anomaly/2026-11-20/hostile",
                "kind": "burn-rate-anomaly",
                "project": HOSTILE,
                "severity": "critical",
                "title": "spend x4 | <b>now</b> *urgent* `rm -rf` [link](http://x)",
            },
        ),
    ):
        at = MIDDAY - timedelta(minutes=minutes)
        ledger.record_alert("acct", at, {**alert, "at": at.isoformat()})
    # WHEN `costguard alerts` prints them
    out = _run(["alerts", *LEDGER, "--format", fmt], capsys)
    # THEN the output is the golden file's
    check("alerts", fmt, out)


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_alerts(fmt: str, aws: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _ledger(aws)
    check("alerts-empty", fmt, _run(["alerts", *LEDGER, "--format", fmt], capsys))


def _audit(ledger: Any) -> None:
    """Three records as the Lambdas wrote them: an executor's, and a sweep batch's (which
    carries no ``detail`` and no saving) as older versions wrote them too."""
    executor_details = {
        "account": "",
        "project": HOSTILE,
        "owners": ["alice@example.com"],
        "state_found": "InService",
        "reason": "idle for 3 h",
        "evidence": {"verdict": "idle"},
        "detail": "warned the owner; stop after 2026-11-21T11:00:00Z",
        "dry_run": False,
        "usd_per_hour_saved": "1.41",
        "usd_per_month_saved": "1029.30",
        "deadline": "2026-11-21T11:00:00Z",
        "seen_at": (MIDDAY - timedelta(hours=1)).isoformat(),
    }
    ledger.audit(
        AuditEvent(
            "acct",
            MIDDAY - timedelta(hours=1),
            "warned/stop-notebook/-/us-east-1/sagemaker-notebook/nb-1/2026-11-21T11:00:00Z",
            "stop-notebook",
            "us-east-1/sagemaker-notebook/nb-1",
            "warned",
            executor_details,
        )
    )
    ledger.audit(
        AuditEvent(
            "acct",
            MIDDAY - timedelta(minutes=20),
            "deleted/s3/-/scratch/batch-1",
            "delete-objects",
            "us-east-1/s3-bucket/scratch",
            "deleted",
            {
                "account": "",
                "project": "vision",
                "owners": [],
                "bucket": "scratch",
                "batch": "batch-1",
                "objects": 2,
                "bytes": 3145728,
                "reason": "older than the bucket's costguard:ttl",
                "dry_run": False,
                "errors": {},
            },
        )
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_actions(fmt: str, aws: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN audit records of two guards, one of them in the sweep's older shape
    _audit(_ledger(aws))
    # WHEN `costguard actions` prints them
    out = _run(["actions", *LEDGER, "--month", "2026-11", "--format", fmt], capsys)
    # THEN the output is the golden file's, every record in the one vocabulary
    check("actions", fmt, out)


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_actions(fmt: str, aws: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _ledger(aws)
    out = _run(["actions", *LEDGER, "--month", "2026-11", "--format", fmt], capsys)
    check("actions-empty", fmt, out)


# -- estimates, through the command ----------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_estimate_train(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "train", "--params", "7e9", "--tokens", "2e12", "--gpu", "a100-40gb"]
    out = _run(
        [*argv, "--gpus", "64", "--catalog", str(FIXTURE_CATALOG_PATH), "--format", fmt], capsys
    )
    check("estimate-train", fmt, out)


@pytest.mark.parametrize("fmt", FORMATS)
def test_estimate_iteration(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "iteration", "--work-hours", "2", "--usd-per-hour", "3.06"]
    given = ["--spot-saving-pct", "62", "--interruption-bucket", "5-10%"]
    check("estimate-iteration", fmt, _run([*argv, *given, "--format", fmt], capsys))


# -- the flag itself ---------------------------------------------------------------------------------


def test_the_last_of_json_and_format_wins(capsys: pytest.CaptureFixture[str]) -> None:
    """``--json`` is ``--format json``: given both, the later one wins, as any repeated
    option does (documented in docs/cli.md), so an alias added to a script still works."""
    argv = ["estimate", "iteration", "--work-hours", "2", "--usd-per-hour", "3.06"]
    argv += ["--spot-saving-pct", "62", "--interruption-bucket", "5-10%"]
    assert _run([*argv, "--json", "--format", "csv"], capsys).startswith("market,")
    assert json.loads(_run([*argv, "--format", "csv", "--json"], capsys))["kind"] == (
        "estimate.iteration"
    )


def test_money_in_csv_is_a_number_and_unpriced_is_a_word() -> None:
    from costguard.cli.output import rate_cell, usd_cell

    assert (usd_cell(Decimal("1234.565")).text, usd_cell(Decimal("1234.565")).value) == (
        "$1,234.57",
        "1234.57",
    )
    assert (rate_cell(None).text, rate_cell(None).value) == ("unpriced", "unpriced")
    assert rate_cell(Decimal("0.526")).value == "0.5260"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_reader_that_goes_away_is_not_a_traceback(fmt: str) -> None:
    """`costguard estimate train --format F | head -c0`: the reader is gone before the
    first byte; the command stops with the shell's code for SIGPIPE, and says nothing."""
    import subprocess

    from tests.support.clock import costguard_at

    proc = subprocess.Popen(
        [
            *costguard_at(MIDDAY),
            *("estimate", "train", "--params", "7e9", "--tokens", "2e12", "--gpu", "a100-40gb"),
            *("--catalog", str(FIXTURE_CATALOG_PATH), "--format", fmt),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err
