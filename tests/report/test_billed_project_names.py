"""What Cost Explorer bills a project lands on the project the scan saw, however its tag
was typed, and a hostile answer (a blank, malformed or invisible tag value, a page that
never ends) is a clear result, never a crash or a second project."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import boto3
import pytest
from botocore.stub import Stubber

from costguard.adapters.cost_explorer import CostExplorer
from costguard.adapters.memory import InMemoryLedger
from costguard.domain.spend import Increment
from costguard.ports import ScanCommit, SourceError
from costguard.services.cost_explorer import CostExplorerService
from tests.functional.test_cost_explorer import usage
from tests.support.clock import MIDDAY


def test_a_project_tagged_full_width_or_with_a_trailing_space_is_billed_as_one_project() -> None:
    """Defect: Cost Explorer's tag values were taken as typed, while the scan normalises
    project names (NFKC, spaces collapsed): a resource tagged ``ｖｉｓｉｏｎ`` or
    ``vision `` was billed to a second project the scan never saw (billed, seen $0) and the
    real ``vision`` showed billed $0 beside its scan figure: the user read a credit on one
    line and a phantom project on another, and lost the one comparison they asked for."""
    # GIVEN the scan saw $1,000 for vision this month
    ledger = InMemoryLedger()
    ledger.commit(
        ScanCommit(
            "acct", None, MIDDAY, {("vision", "2026-11"): Increment(Decimal(1000), Decimal(0))}, []
        )
    )
    client = boto3.client("ce", region_name="us-east-1")
    service = CostExplorerService(ledger, CostExplorer(client), "acct", "costguard:project")
    # AND Cost Explorer bills it under three spellings of the tag, amounts as strings with
    # many decimals, and a credit
    with Stubber(client) as stub:
        stub.add_response(
            "get_cost_and_usage",
            usage(
                {
                    ("costguard:project$vision", "USE1-BoxUsage:g5.xlarge"): "700.1234567890",
                    ("costguard:project$ｖｉｓｉｏｎ", "USE1-BoxUsage:g5.xlarge"): "300.0000000001",
                    ("costguard:project$vision ", "USE1-DataTransfer-Out-Bytes"): "50.5",
                    ("costguard:project$vision", "USE1-Credit"): "-0.1234567891",
                }
            ),
        )
        # WHEN the month is reconciled
        month = service.reconcile(MIDDAY)
    # THEN there is one vision row, billed the sum of every spelling
    assert month is not None
    (row,) = month.rows
    assert (row.project, row.seen, row.billed, row.data_transfer) == (
        "vision",
        Decimal(1000),
        Decimal("1050.5000000000"),
        Decimal("50.5"),
    )


def test_a_tag_value_that_is_no_project_name_is_billed_as_untagged() -> None:
    """Defect: a tag value the scan refuses as a project name (a right-to-left mark, only
    spaces) was billed to a "project" of that raw value, a row no scan can ever match."""
    client = boto3.client("ce", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_response(
            "get_cost_and_usage",
            usage(
                {
                    ("costguard:project$\u200fvision", "USE1-BoxUsage:g5.xlarge"): "10",
                    ("costguard:project$   ", "USE1-BoxUsage:g5.xlarge"): "5",
                    ("costguard:project$", "USE1-BoxUsage:g5.xlarge"): "1.25",
                }
            ),
        )
        totals = CostExplorer(client).cost_by_tag(
            date(2026, 11, 1), date(2026, 11, 21), "costguard:project"
        )
    assert totals == {None: (Decimal("16.25"), Decimal(0))}


def test_a_page_token_that_comes_back_again_ends_the_read_with_a_clear_error() -> None:
    """Defect: the Cost Explorer page loop followed ``NextPageToken`` for as long as one
    came back: a flaky answer that repeats its token made the scan ask again forever, at
    $0.01 a request, until the Lambda timed out with nothing reconciled and no reason."""
    client = boto3.client("ce", region_name="us-east-1")
    asked: list[str | None] = []
    client.meta.events.register(
        "provide-client-params.ce.GetCostAndUsage",
        lambda params, **_: asked.append(params.get("NextPageToken")),
    )
    page = usage({("costguard:project$llm", "USE1-BoxUsage:g5.xlarge"): "1"}, token="again")
    with Stubber(client) as stub:
        for _ in range(3):
            stub.add_response("get_cost_and_usage", page)
        with pytest.raises(SourceError) as raised:
            CostExplorer(client).cost_by_tag(
                date(2026, 11, 1), date(2026, 11, 21), "costguard:project"
            )
    # THEN it stops at the first repeat, and says why
    assert asked == [None, "again"]
    assert raised.value.operation == "GetCostAndUsage"
    assert "NextPageToken" in str(raised.value) and "again" in str(raised.value)


@pytest.mark.parametrize("amount", ["NaN", "Infinity", "", "12,50", "sNaN"])
def test_an_amount_that_is_no_number_is_a_source_error_and_nothing_is_kept(amount: str) -> None:
    """Defect: Cost Explorer's ``Amount`` string went straight into ``Decimal``: "NaN" was
    kept in the month's billed document, and every report of the month then failed on
    comparing it (``max(0, NaN)``); "" or "12,50" crashed the read with a bare
    ``InvalidOperation`` that named neither Cost Explorer nor the value."""
    ledger = InMemoryLedger()
    client = boto3.client("ce", region_name="us-east-1")
    service = CostExplorerService(ledger, CostExplorer(client), "acct", "costguard:project")
    with Stubber(client) as stub:
        stub.add_response(
            "get_cost_and_usage",
            usage(
                {
                    ("costguard:project$llm", "USE1-BoxUsage:g5.xlarge"): "10.00",
                    ("costguard:project$llm", "USE1-DataTransfer-Out-Bytes"): amount,
                }
            ),
        )
        with pytest.raises(SourceError) as raised:
            service.reconcile(MIDDAY)
    assert raised.value.service == "ce" and raised.value.operation == "GetCostAndUsage"
    assert repr(amount) in str(raised.value)
    # AND no billed document was written for the report to trip on
    assert ledger.get_state("acct", "billed/2026-11")[0] == {}
