"""The report page as a file: self-contained, escaped, small. (How it looks in a browser:
test_report_in_chromium.py.)"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.cli.report_html import esc, render, user
from costguard.domain.report import Report
from costguard.ports import ProjectMonth, SourceError
from costguard.services.report import ReportRequest, build_report
from tests.support.report_month import (
    DEMO_PROJECTS,
    Project,
    live_month,
    many_projects,
)

#: Project names a scan accepts (1 to 256 visible characters) that a page must not obey.
#: Names with control or bidirectional characters never become projects (the scan reports
#: them as malformed-project findings): their escaping is tested on :func:`esc` below.
HOSTILE = (
    '<script>alert("x")</script>',
    'quote"><img src=x onerror=alert(1)>',
    "計" * 256,
    "&amp;-already-escaped",
)


@pytest.fixture(scope="module")
def hostile_page() -> str:
    projects = [
        Project(name, "1000", f"{name}@example.com", [("g5.xlarge", 1, 0, None)])
        for name in HOSTILE
    ]
    month = live_month([*DEMO_PROJECTS, *projects], every=timedelta(hours=12))
    return render(month.report())  # type: ignore[arg-type]


def test_hostile_project_names_are_text_never_markup(hostile_page: str) -> None:
    """Defect guarded: a project tag is anyone's text; in the page it must stay text."""
    # THEN no tag or attribute from a name survives: only the page's own markup is there
    assert "<script" not in hostile_page
    assert "<img" not in hostile_page
    assert "onerror=alert" not in hostile_page.replace("onerror=alert(1)&gt;", "")
    assert "<bdi>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</bdi>" in hostile_page
    assert "<bdi>&amp;amp;-already-escaped</bdi>" in hostile_page
    assert f"<bdi>{'計' * 256}</bdi>" in hostile_page


def test_the_page_loads_nothing_and_runs_nothing(hostile_page: str) -> None:
    # THEN no script, no external reference, and a policy that forbids every load
    assert "<script" not in hostile_page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", hostile_page, re.I)
    assert "default-src 'none'" in hostile_page


def test_every_project_has_a_chart_with_a_budget_and_a_forecast(hostile_page: str) -> None:
    cards = re.findall(r'<article class="card".*?</article>', hostile_page, re.S)
    assert len(cards) == len(DEMO_PROJECTS) + len(HOSTILE) + 1  # and the unattributed
    for card in cards:
        assert 'data-role="chart"' in card
        assert 'data-role="forecast"' in card
        assert 'data-role="budget"' in card or 'data-role="no-budget"' in card


def test_a_hundred_projects_stay_under_a_megabyte() -> None:
    # GIVEN 100 projects of 100 instances, some hostile or long-named, scanned weekly
    month = live_month(many_projects(100, 100), every=timedelta(days=6))
    page = render(month.report())  # type: ignore[arg-type]
    # THEN one file well under 1 MB
    assert len(page.encode()) < 1_000_000
    assert page.count('data-role="chart"') == 101


def test_an_unreadable_region_and_an_unpriced_type_are_said_not_hidden() -> None:
    # GIVEN a region that fails at the report's scan, and an instance type without a price
    failing = {
        "us-west-2": SourceError("ec2", "us-west-2", "DescribeInstances", "AccessDenied", "")
    }
    month = live_month(DEMO_PROJECTS, every=timedelta(hours=12), failing=failing)
    report: Report = month.report()  # type: ignore[assignment]
    page = render(report)
    section = page[page.index('data-role="blind-spots"') :]
    # THEN both are named where a reader looks first
    assert "us-west-2/ec2" in section.split("</section>")[0]
    assert "p9.96xlarge" in section.split("</section>")[0]
    # and an unpriced resource is "no price", never $0.00 a month
    assert "no price" in page


def test_escaping_replaces_control_characters_and_lone_surrogates() -> None:
    assert esc("a\x00b\ud800c<") == "a\ufffdb\ufffdc&lt;"


def test_a_user_string_is_isolated_so_a_right_to_left_override_stays_inside() -> None:
    # GIVEN a resource name (the Name tag is free text) with a right-to-left override
    # THEN it is wrapped in <bdi>: the override cannot reorder the text after it
    assert user("\u202eevil") == "<bdi>\u202eevil</bdi>"


def test_money_on_the_page_is_never_cut() -> None:
    month = live_month(DEMO_PROJECTS, every=timedelta(hours=12))
    page = render(month.report())  # type: ignore[arg-type]
    # every figure sits in one no-wrap span
    assert re.search(r'<span class="n">\$[0-9,]+\.[0-9]{2}</span>', page)
    assert not re.search(r"\$[0-9,.]+</span>[0-9]", page)


def test_a_closed_month_shows_who_spent_in_it_with_the_budgets_tagged_today() -> None:
    """A month written by an older version (no days) and closed: its spenders only, drawn
    as one point each, with today's budgets; the page says both."""
    month = live_month(DEMO_PROJECTS, every=timedelta(hours=12))
    old_row = ProjectMonth("llm-pretraining", "2026-10", Decimal(9000), Decimal(0))

    class OctoberByOlderVersion(InMemoryLedger):
        def month_totals(self, scope: str, month_: str) -> dict[str | None, ProjectMonth]:
            return {"llm-pretraining": old_row} if month_ == "2026-10" else {}

    report = build_report(
        month.scan, OctoberByOlderVersion(), ReportRequest(month="2026-10"), month.at
    )
    page = render(report)
    assert [b.project for b in report.burns] == ["llm-pretraining"]
    assert report.unattributed is None
    assert report.burns[0].budget == 12000
    assert '<circle data-role="spent"' in page
    assert "Month-to-date only" in page and "budgets are those tagged today" in page


def test_the_first_instant_of_a_month_draws_a_point_not_an_invisible_line() -> None:
    """Defect guarded: at 00:00 on the 1st the spend line had one point, which SVG draws
    as nothing: the chart looked as if spend were missing."""
    at = datetime(2026, 12, 1, tzinfo=UTC)
    month = live_month(DEMO_PROJECTS, every=timedelta(days=10))
    report = build_report(month.scan, InMemoryLedger(), ReportRequest(month="2026-12"), at)
    page = render(report)
    assert page.count('<circle data-role="spent"') == len(report.burns) + 1


def test_the_summary_cards_are_the_sums_of_the_projects_shown() -> None:
    """Defect: the demo's card said $55,447.24 to month end while its five projects' shown
    forecasts add up to $55,447.23: the card summed the unrounded figures.

    GIVEN three projects each forecast at $100.005 and each spent $1.005, WHEN the page
    is drawn, THEN the cards say what their rows add up to ($300.03 and $3.03), each row
    showing $100.01 and $1.01."""
    from dataclasses import replace

    month = live_month(DEMO_PROJECTS[:3], every=timedelta(hours=12))
    report: Report = month.report()  # type: ignore[assignment]
    odd = Decimal("100.005")
    burns = tuple(
        replace(
            b, forecast=odd, forecast_low=odd, forecast_high=odd, month_to_date=Decimal("1.005")
        )
        for b in report.burns
    )
    assert len(burns) == 3
    report = replace(report, burns=burns, unattributed=None)
    assert report.forecast == Decimal("300.03") and report.month_to_date == Decimal("3.03")
    page = render(report)
    assert '<b class="n">$300.03</b><span>forecast to month end' in page
    assert '<b class="n">$3.03</b><span>spent this month' in page


def test_the_heading_names_an_account_never_the_placeholder_scope() -> None:
    """Defect: without --table or --scope the page was headed "Account default".

    GIVEN the same month under an account id, a chosen scope and no scope at all, WHEN
    drawn, THEN the heading says "Account <id>", "Scope <name>", or that it is a local
    scan, and never "Account default"."""
    from dataclasses import replace

    report: Report = live_month(DEMO_PROJECTS[:1]).report()  # type: ignore[assignment]
    heading = {
        scope: render(replace(report, scope=scope)).split('<p class="muted">', 1)[1][:60]
        for scope in ("123456789012", "team-a", "default")
    }
    assert heading["123456789012"].startswith("Account ")
    assert heading["team-a"].startswith("Scope ")
    assert heading["default"].startswith("A local scan of this account")


def test_a_project_that_has_spent_past_its_budget_is_over_not_heading_over() -> None:
    """Defect: on the 31st a project that had spent $722.57 of its $500 budget was badged
    "heading over budget", and the page said "1 project is heading over budget".

    GIVEN one project past its budget already and one whose forecast only is, WHEN drawn,
    THEN the first is "over budget", the second "heading over budget", and the sentence
    above the charts tells them apart."""
    from dataclasses import replace

    from costguard.domain.spend import BudgetStatus

    report: Report = live_month(DEMO_PROJECTS[:2]).report()  # type: ignore[assignment]
    spent, heading = report.burns[:2]
    spent = replace(
        spent, budget=Decimal(500), month_to_date=Decimal(722), status=BudgetStatus.OVER
    )
    heading = replace(
        heading, budget=Decimal(500), month_to_date=Decimal(100), forecast=Decimal(900),
        status=BudgetStatus.OVER,
    )  # fmt: skip
    page = render(replace(report, burns=(spent, heading), unattributed=None))
    assert page.count('">over budget</span>') == 1
    assert page.count('">heading over budget</span>') == 1
    assert "1 project is over budget; 1 project is heading over budget." in page


def test_a_part_of_a_source_that_failed_is_named_not_the_whole_source() -> None:
    """Defect: only SageMaker's Studio apps could not be read, yet the page said "Could not
    read us-east-1/sagemaker: their spend is missing", notebooks and endpoints included.

    GIVEN a scan whose only failure is us-east-1's Studio apps, WHEN the page is drawn,
    THEN what it could not see names us-east-1/sagemaker/studio-apps, not the source."""
    from dataclasses import replace

    from costguard.domain.findings import Finding, FindingCode, Severity

    month = live_month(DEMO_PROJECTS[:1])
    failed = Finding(
        FindingCode.SCAN_FAILED,
        "us-east-1/sagemaker/studio-apps",
        "ListApps failed with 500: ...; SageMaker studio apps in us-east-1 are missing",
        Severity.ERROR,
    )
    month.scan = replace(
        month.scan,
        findings=(*month.scan.findings, failed),
        failed_sources=frozenset({("us-east-1", "sagemaker")}),
    )
    report: Report = month.report()  # type: ignore[assignment]
    assert report.blind.unreadable == ("us-east-1/sagemaker/studio-apps",)
    section = render(report).split('data-role="blind-spots"', 1)[1].split("</section>")[0]
    assert "us-east-1/sagemaker/studio-apps" in section


def test_the_headings_dates_never_break_at_their_hyphens() -> None:
    """Defect: at 390 pixels the heading read "prices as of 2026-11-" then "29" on the next
    line. GIVEN a month, WHEN drawn, THEN each date of the heading is in a span that does
    not wrap (class n: white-space nowrap)."""
    report: Report = live_month(DEMO_PROJECTS[:1]).report()  # type: ignore[assignment]
    heading = render(report).split('<p class="muted">', 1)[1].split("</p>", 1)[0]
    assert f"<span class=n>{report.catalog_as_of}</span>" in heading
    assert "<span class=n>2026-" in heading.split("prices as of")[0]


def test_a_page_written_to_a_fifo_goes_through_it_and_leaves_it_a_fifo(tmp_path: Path) -> None:
    """Defect: ``--html`` wrote a temporary file and moved it over the target, whatever the
    target was: run as root, ``--html /dev/full`` replaced the device with a regular file.

    GIVEN a named pipe with a reader, WHEN the page is written to it, THEN the reader gets
    the whole page, the pipe is still a pipe, and no temporary file is left beside it."""
    import os
    import stat
    import threading

    from costguard.cli.report import write_html

    fifo = tmp_path / "page.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    report: Report = live_month(DEMO_PROJECTS[:1]).report()  # type: ignore[assignment]
    size = write_html(report, fifo)
    reader.join(timeout=10)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got and len(got[0]) == size and got[0].startswith(b"<!doctype html>")
    assert [p.name for p in tmp_path.iterdir()] == ["page.fifo"]


def test_a_region_never_breaks_at_its_hyphens() -> None:
    """Defect: at 390 pixels the advice and top-resources tables read "us-east-" then "1".

    GIVEN the demo's month, WHEN drawn, THEN each region under a resource is a span that
    does not wrap, and no region is left bare for the browser to break."""
    page = render(live_month(DEMO_PROJECTS).report())  # type: ignore[arg-type]
    assert "<span class=n>us-east-1</span>" in page
    assert " · us-east-1" not in page and "us-east-1 · " not in page
