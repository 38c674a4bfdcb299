"""The report as a person sees it: rendered by headless Chromium at a laptop's width and a
phone's. Every project has a chart with its budget and forecast, nothing overflows, and
the console stays silent (the page loads nothing, so any load would be an error).

Chromium is the Debian package ``chromium``; ``make test`` installs it first (``make
chromium``). Under CI (``CI=true``) a missing browser fails this test; elsewhere it is
skipped with the command that installs it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from costguard.cli.report_html import render
from tests.support.chromium import CHROMIUM, Page, chromium
from tests.support.report_month import DEMO_PROJECTS, Project, live_month

#: A real browser: end to end, as moto's HTTP server is (make test runs it; make check does not).
pytestmark = pytest.mark.e2e

WIDTHS = (1280, 390)

#: What overflows: the page wider than the window, an element outside it, or an element
#: whose text is wider than its box (cut or spilling), and a number broken over two lines.
OVERFLOW = """(() => {
  const bad = [];
  const root = document.documentElement;
  if (root.scrollWidth > innerWidth) bad.push(`the page is ${root.scrollWidth} px wide`);
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('svg')) continue;
    const box = el.getBoundingClientRect();
    const what = `${el.tagName.toLowerCase()} "${(el.textContent || '').trim().slice(0, 40)}"`;
    if (box.width && (box.right > innerWidth + 0.5 || box.left < -0.5)) bad.push(`outside: ${what}`);
    if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1) bad.push(`overflows: ${what}`);
  }
  for (const n of document.querySelectorAll('.n'))
    if (n.getClientRects().length > 1) bad.push(`number broken: ${n.textContent}`);
  return bad;
})()"""

#: Per project card: does it hold a drawn chart with a budget line (or says there is none)
#: and a forecast?
CHARTS = """[...document.querySelectorAll('article.card')].map(card => {
  const svg = card.querySelector('svg[data-role=chart]');
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  const drawn = role => { const e = svg && svg.querySelector(`[data-role=${role}]`);
    return !!e && (e.getBBox ? e.getBBox().width > 0 || e.tagName === 'g' : true); };
  return {
    project: card.dataset.project,
    chart: box.width > 100 && box.height > 50,
    budget: drawn('budget') || !!(svg && svg.querySelector('[data-role=no-budget]')),
    forecast: drawn('forecast'),
    spent: drawn('spent'),
  };
})"""


def _browser_or_skip() -> None:
    if CHROMIUM.exists():
        return
    message = f"{CHROMIUM} is missing: `make chromium` installs it (Debian package chromium)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's projects, a hostile one and a 256-character one, lived through a month."""
    projects = [
        *DEMO_PROJECTS,
        Project(
            '<b>bold</b>"><script>alert(1)</script>',
            "3000",
            "x@example.com",
            [("g5.xlarge", 1, 2, None)],
        ),
        Project("計" * 256, "900", "y@example.com", [("g5.xlarge", 1, 5, None)]),
    ]
    month = live_month(projects, every=timedelta(hours=12))
    out = tmp_path_factory.mktemp("report") / "report.html"
    out.write_text(render(month.report()), encoding="utf-8")  # type: ignore[arg-type]
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Page]:
    _browser_or_skip()
    with chromium() as page:
        yield page


@pytest.mark.parametrize("width", WIDTHS)
def test_every_project_has_a_drawn_chart_with_its_budget_and_forecast(
    browser: Page, page_file: Path, width: int
) -> None:
    # GIVEN the report of a month with the demo's projects and two odd names
    # WHEN Chromium shows it at this width
    browser.open(page_file, width)
    cards = browser.evaluate(CHARTS)
    # THEN each of the 7 projects and the unattributed spend has a chart, drawn, with a
    # budget line (or "no budget set"), the spend and the forecast
    assert len(cards) == len(DEMO_PROJECTS) + 3
    missing = [c for c in cards if not all((c["chart"], c["budget"], c["forecast"], c["spent"]))]
    assert missing == []


@pytest.mark.parametrize("width", WIDTHS)
def test_nothing_overflows_and_no_number_is_cut(
    browser: Page, page_file: Path, width: int, tmp_path: Path
) -> None:
    browser.open(page_file, width)
    problems = browser.evaluate(OVERFLOW)
    browser.screenshot(tmp_path / f"report-{width}.png")
    assert problems == [], f"at {width} px (screenshot: {tmp_path / f'report-{width}.png'})"


def test_the_console_stays_silent(browser: Page, page_file: Path) -> None:
    """Defect guarded: a page that tries to load anything (a CDN, a font, an image) breaks
    offline; the policy blocks it and Chromium logs an error, which this test sees."""
    browser.console_errors.clear()
    for width in WIDTHS:
        browser.open(page_file, width)
    assert browser.console_errors == []


def test_the_page_reads_without_javascript(browser: Page, page_file: Path) -> None:
    # THEN the document carries no script at all: what it shows is in the markup
    browser.open(page_file, 1280)
    assert browser.evaluate("document.scripts.length") == 0
    assert browser.evaluate("document.querySelectorAll('svg [data-role=spent]').length") >= 8


def test_the_driver_sees_a_console_error_and_an_overflow(browser: Page, tmp_path: Path) -> None:
    """The checks above would pass on a blind driver: prove they see what they look for."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!doctype html><meta name=viewport content="width=device-width,initial-scale=1">'
        "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'\">"
        # (The policy blocks inline styles too: a long unbroken line is what overflows.)
        '<img src="https://example.invalid/x.png"><p>' + "1234567890" * 100 + "</p>"
    )
    browser.console_errors.clear()
    browser.open(bad, 390)
    assert browser.evaluate(OVERFLOW)
    assert any("Content Security Policy" in e for e in browser.console_errors)
