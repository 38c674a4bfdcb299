"""The report shows what AWS billed each project beside what the scan saw (Cost Explorer,
with ``costExplorer`` on): the difference, the data transfer and the rest the scan cannot
see, in its JSON, its table and its page; nothing when Cost Explorer was never read."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from costguard.cli.report import report_data, report_table
from costguard.cli.report_html import render
from costguard.domain.billed import BilledMonth, billed_rows
from costguard.services.cost_explorer import BILLED_STATE
from tests.support.report_month import SCOPE, live_month


def month_with_bill(billed: dict[str | None, tuple[Decimal, Decimal]]) -> Any:
    month = live_month()
    seen = {p: row.usd for p, row in month.ledger.month_totals(SCOPE, "2026-11").items()}
    document = BilledMonth("2026-11-18T08:00:00+00:00", billed_rows(billed, seen)).document()
    month.ledger.put_state(SCOPE, BILLED_STATE.format(month="2026-11"), document, 0)
    return month, seen


def test_billed_beside_seen_in_the_json_with_the_difference_and_what_the_scan_missed() -> None:
    # GIVEN Cost Explorer's month: llm-pretraining billed $500 above what the scan saw, $180
    # of it data transfer
    month, seen = month_with_bill({})
    llm = seen["llm-pretraining"]
    month, seen = month_with_bill(
        {"llm-pretraining": (llm + Decimal(500), Decimal(180)), None: (Decimal(12), Decimal(0))}
    )
    # WHEN the report is built
    data = report_data(month.report())
    billed = data["billed_beside_seen"]
    # THEN each project's bill is beside the scan's figure, with what the scan missed
    row = next(r for r in billed["projects"] if r["project"] == "llm-pretraining")
    assert row["billed_usd"] == float(round(llm + 500, 2))
    assert row["seen_by_scan_usd"] == float(round(llm, 2))
    assert row["difference_usd"] == 500.0
    assert (row["data_transfer_usd"], row["other_usd"], row["not_seen_by_scan_usd"]) == (
        180.0,
        320.0,
        500.0,
    )
    # AND a project Cost Explorer has no line for is billed $0 beside its scan figure: the
    # difference is negative (Cost Explorer's lag, or costs not tagged)
    nlp = next(r for r in billed["projects"] if r["project"] == "nlp-team")
    assert nlp["billed_usd"] == 0.0 and nlp["difference_usd"] < 0
    assert billed["as_of"] == "2026-11-18T08:00:00+00:00"
    assert "up to a day behind" in billed["note"]


def test_the_table_and_the_page_show_it_and_say_what_it_is() -> None:
    month, seen = month_with_bill({})
    month, _ = month_with_bill(
        {"llm-pretraining": (seen["llm-pretraining"] + Decimal(500), Decimal(180))}
    )
    report = month.report()
    table = report_table(report)
    assert [c.header for c in table.columns][-2:] == ["Billed (AWS)", "Not seen by scan"]
    llm = next(r for r in table.rows if r["project"] == "llm-pretraining")
    assert llm["not_seen_usd"].text == "$500.00"
    page = render(report)
    assert "Billed by AWS beside what the scan saw" in page
    assert "+$500.00" in page and "$180.00" in page and "$320.00" in page
    assert "data transfer" in page


def test_without_cost_explorer_the_report_says_nothing_of_a_bill() -> None:
    report = live_month().report()
    assert report_data(report)["billed_beside_seen"] is None
    assert "Billed (AWS)" not in [c.header for c in report_table(report).columns]
    assert "Billed by AWS" not in render(report)


def test_a_report_narrowed_to_a_project_shows_only_its_bill() -> None:
    month, seen = month_with_bill({})
    month, _ = month_with_bill(
        {
            "llm-pretraining": (seen["llm-pretraining"], Decimal(0)),
            "nlp-team": (seen["nlp-team"], Decimal(0)),
        }
    )
    data = report_data(month.report(projects=frozenset({"nlp-team"})))
    assert [r["project"] for r in data["billed_beside_seen"]["projects"]] == ["nlp-team"]
