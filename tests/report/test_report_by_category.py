"""``costguard report`` shows each project's month-to-date as compute and storage beside
its total (table, JSON, page), and says which month holds spend an older version accrued
before the ledger split months by category: "not split", never counted as compute.

The fleet (tests/support/by_category.py): llm's $1.00/h GPU and $0.10/h gp3 volume,
created an hour before the first of three hourly scans: compute $3.00, storage $0.30.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.cli.output import Cell
from costguard.cli.report import report_data, report_table
from costguard.cli.report_html import render
from costguard.domain.report import Report
from costguard.ports import ProjectMonth
from costguard.services.report import ReportRequest, build_report
from tests.support.by_category import scan
from tests.support.clock import MIDDAY


def month(older_version_usd: Decimal | None = None) -> Report:
    """The report after three hourly scans; first, an older version's row for llm holding
    ``older_version_usd`` (no categories), when given."""
    ledger = InMemoryLedger()
    if older_version_usd is not None:
        row = ProjectMonth("llm", "2026-11", older_version_usd, Decimal(0), {1: older_version_usd})
        ledger._months[("acct", "2026-11", "llm")] = row
    created = MIDDAY - timedelta(hours=1)
    for n in range(3):
        last = scan(ledger, MIDDAY + timedelta(hours=n), created)
    return build_report(last, ledger, ReportRequest("2026-11"), MIDDAY + timedelta(hours=2))


def cells(table: object, column: str) -> list[str]:
    rows = table.rows  # type: ignore[attr-defined]
    return [c.text if isinstance(c := r[column], Cell) else c for r in rows]


def test_the_report_splits_the_month_into_compute_and_storage() -> None:
    """GIVEN llm's month of compute $3.00 and storage $0.30
    THEN the JSON, the table and the page show both beside the $3.30 spent, and no
    "not split" column or note."""
    report = month()
    (llm,) = report_data(report)["projects"]
    assert llm["month_to_date_usd"] == 3.3
    assert llm["month_to_date_by_category"] == {"compute": 3.0, "storage": 0.3, "not_split": 0.0}
    assert report_data(report)["not_seen"]["not_split_by_category"] == []
    table = report_table(report)
    assert [c.key for c in table.columns][:4] == [
        "project",
        "spent_usd",
        "compute_usd",
        "storage_usd",
    ]
    assert "not_split_usd" not in [c.key for c in table.columns]
    assert (cells(table, "compute_usd"), cells(table, "storage_usd")) == (["$3.00"], ["$0.30"])
    page = render(report)
    assert (
        '<span data-role="by-category">compute <span class="n">$3.00</span>, '
        'storage <span class="n">$0.30</span></span>'
    ) in page
    assert "not split" not in page.lower()
    assert (
        '<td data-label="Compute" class=r><span class="n">$3.00</span></td>'
        '<td data-label="Storage" class=r><span class="n">$0.30</span></td>'
    ) in page


def test_a_month_begun_by_an_older_version_says_what_is_not_split() -> None:
    """GIVEN llm's November begun by an older version ($40, no categories), then three
    hourly scans by this one
    THEN the month is $43.30: compute $3.00, storage $0.30 and $40.00 not split; the
    table grows a Not split column, and the page says why and lists llm as not split."""
    report = month(Decimal(40))
    (llm,) = report_data(report)["projects"]
    assert llm["month_to_date_usd"] == 43.3
    assert llm["month_to_date_by_category"] == {
        "compute": 3.0,
        "storage": 0.3,
        "not_split": 40.0,
    }
    assert report_data(report)["not_seen"]["not_split_by_category"] == ["llm"]
    table = report_table(report)
    assert cells(table, "not_split_usd") == ["$40.00"]
    page = render(report)
    assert (
        '<span class="n">$40.00</span> was accrued before the ledger split months by '
        "category: it is shown as not split, neither compute nor storage."
    ) in page
    assert "Not split into compute and storage (accrued before the ledger split months" in page
    # The page's table of projects has the three columns, $40.00 under Not split.
    assert (
        '<td data-label="Compute" class=r><span class="n">$3.00</span></td>'
        '<td data-label="Storage" class=r><span class="n">$0.30</span></td>'
        '<td data-label="Not split" class=r><span class="n">$40.00</span></td>'
    ) in page
