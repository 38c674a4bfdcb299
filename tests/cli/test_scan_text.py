"""``costguard scan``'s text: names and ids whole, columns aligned, colour only when asked.

Defect: the scan's table cut a project name at 27 characters (``…``) and a resource id at
34 with no mark at all, so a long SageMaker endpoint read as another, shorter one; columns
were fixed widths that a longer cell pushed out of line.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from costguard.cli.scan_output import report_table
from costguard.domain.attribution import AttributedResource
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.pricing import PricedResource
from costguard.domain.spend import BudgetStatus
from costguard.ports import CommitOutcome
from costguard.services.scan import ProjectReport, ScanReport

AT = datetime(2026, 11, 18, 14, tzinfo=UTC)
LONG_PROJECT = "computer-vision-foundation-models-pretraining"
LONG_ID = "recommendation-ranker-production-blue/primary-variant-ml-g5"


def _report() -> ScanReport:
    endpoint = Resource(
        LONG_ID, ResourceKind.SAGEMAKER_ENDPOINT, "us-east-1", instance_type="ml.g5.xlarge"
    )
    priced = PricedResource(endpoint, Decimal("1.41"), "sagemaker on-demand")
    resource = AttributedResource(priced, LONG_PROJECT, None, None, "tag")
    project = ProjectReport(
        LONG_PROJECT, Decimal(5000), "tag", Decimal("1.41"), Decimal(700), Decimal(0),
        Decimal(6000), BudgetStatus.OVER, (), (resource,), 0,
    )  # fmt: skip
    short = ProjectReport(
        "nlp", Decimal(100), "tag", Decimal(0), Decimal(1), Decimal(0), Decimal(2),
        BudgetStatus.OK, (), (), 0,
    )  # fmt: skip
    none = ProjectReport(
        None, None, "none", Decimal(0), Decimal(0), Decimal(0), Decimal(0),
        BudgetStatus.NO_BUDGET, (), (), 0,
    )  # fmt: skip
    return ScanReport(
        "123456789012", AT, "2026-11", ("us-east-1",), (project, short), none, (), (),
        CommitOutcome.APPLIED, "2026-11-15", 0.1, {},
    )  # fmt: skip


def test_names_and_ids_are_shown_whole_and_columns_stay_aligned() -> None:
    """GIVEN a project name and an endpoint id longer than the old fixed columns, WHEN the
    scan is printed, THEN both are whole, and every project row's status starts where the
    STATUS heading does."""
    text = report_table(_report(), colour=False)
    assert LONG_PROJECT in text and LONG_ID in text
    assert "…" not in text
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("PROJECT"))
    at = head.index("STATUS")
    rows = [line for line in lines if line.startswith((LONG_PROJECT, "nlp "))]
    assert [r[at:] for r in rows] == ["over", "ok"]


def test_the_status_is_coloured_only_when_asked() -> None:
    """GIVEN the same scan, WHEN printed for a terminal and for a pipe, THEN only the
    terminal's copy carries escape codes, and it differs from the plain one only there."""
    plain = report_table(_report(), colour=False)
    coloured = report_table(_report(), colour=True)
    assert "\033[" not in plain
    assert "\033[31mover\033[0m" in coloured and "\033[32mok\033[0m" in coloured
    assert coloured.replace("\033[31m", "").replace("\033[32m", "").replace("\033[0m", "") == plain


def _fleet_report(project: str, prices: list[Decimal | None]) -> ScanReport:
    """One project whose resources cost ``prices`` an hour (None: unpriced), in that order."""
    resources = tuple(
        AttributedResource(
            PricedResource(
                Resource(f"i-{n:017x}", ResourceKind.EC2_INSTANCE, "us-east-1", instance_type="g5.xlarge"),
                price,
                "ec2 on-demand",
            ),
            project, None, None, "tag",
        )
        for n, price in enumerate(prices)
    )  # fmt: skip
    p = ProjectReport(
        project, Decimal(100), "tag", Decimal(5), Decimal(1), Decimal(0), Decimal(2),
        BudgetStatus.OK, (), resources, sum(price is None for price in prices),
    )  # fmt: skip
    none = ProjectReport(
        None, None, "none", Decimal(0), Decimal(0), Decimal(0), Decimal(0),
        BudgetStatus.NO_BUDGET, (), (), 0,
    )  # fmt: skip
    return ScanReport(
        "123456789012", AT, "2026-11", ("us-east-1",), (p,), none, (), (),
        CommitOutcome.APPLIED, "2026-11-15", 0.1, {},
    )  # fmt: skip


def test_a_project_cut_to_its_top_resources_says_how_many_more_and_shows_the_unpriced() -> None:
    """Defect: a project of six resources listed three and said nothing of the rest; the
    unpriced one (its spend unknown, the first thing to fix) was among those never shown.

    GIVEN a project of five priced resources and an unpriced one listed last, WHEN the scan
    is printed, THEN the unpriced one is listed, and a line says 3 more are not shown."""
    text = report_table(
        _fleet_report("vision", [Decimal(5), Decimal(4), Decimal(3), Decimal(2), Decimal(1), None]),
        colour=False,
    )
    assert "i-00000000000000005" in text and "UNPRICED" in text
    assert "… and 3 more resources" in text


def test_a_project_named_in_wide_characters_keeps_the_columns_aligned() -> None:
    """Defect: a project named ``日本語プロジェクト 🚀`` pushed its budget, run-rate and
    status two terminal columns right per wide character: the width was counted in code
    points.

    GIVEN a project named in CJK and an emoji, WHEN printed, THEN its status starts, in
    terminal columns, where the STATUS heading does."""
    from costguard.cli.terminal import cell_width

    name = "日本語プロジェクト 🚀"
    lines = report_table(_fleet_report(name, [Decimal(1)]), colour=False).splitlines()
    head = next(line for line in lines if line.startswith("PROJECT"))
    row = next(line for line in lines if line.startswith(name))
    at = cell_width(head[: head.index("STATUS")])
    assert cell_width(row[: row.index("ok")]) == at


def test_markdown_shows_an_endpoints_instance_count_beside_its_rate() -> None:
    """Defect: ``scan --format markdown`` listed an endpoint of two ml.g4dn.2xlarge as
    "ml.g4dn.2xlarge ... $1.88/h", which reads as the price of one; the text said "2 x".

    GIVEN an endpoint of two instances, WHEN its rows are built, THEN markdown's cell says
    "2 x ml.g4dn.2xlarge" and the CSV's stays the type, its count in its own column."""
    from costguard.cli.output import csv_text, markdown_text
    from costguard.cli.scan_output import scan_tables

    endpoint = Resource(
        "ranker/primary", ResourceKind.SAGEMAKER_ENDPOINT, "us-east-1",
        instance_type="ml.g4dn.2xlarge", count=2,
    )  # fmt: skip
    from dataclasses import replace

    report = _fleet_report("recsys", [Decimal("1.88")])
    a = AttributedResource(
        PricedResource(endpoint, Decimal("1.88"), "sagemaker"), "recsys", None, None, "tag"
    )
    report = replace(report, projects=(replace(report.projects[0], resources=(a,)),))
    csv_table, views = scan_tables([(None, report)])
    assert "| 2 x ml.g4dn.2xlarge |" in markdown_text(views)
    assert ",ml.g4dn.2xlarge,us-east-1,on-demand,2," in csv_text(csv_table)


def test_a_scan_that_read_nothing_never_looks_like_an_empty_account() -> None:
    """Defect: with every source failing, the text said "No GPU or accelerator resources
    found": an unreadable account read as an empty one.

    GIVEN a scan with no project and two failed sources, WHEN printed, THEN it says the
    sources could not be read, and never that nothing was found."""
    from dataclasses import replace

    report = _fleet_report("p", [])
    report = replace(
        report,
        projects=(),
        failed_sources=frozenset({("us-east-1", "ec2"), ("us-east-1", "eks")}),
    )
    text = report_table(report, colour=False)
    assert "2 sources could not be read" in text
    assert "found" not in text.split("Scan took")[0].lower()
