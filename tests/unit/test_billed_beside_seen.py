"""What AWS billed a project beside what the scan saw: hand-computed rows."""

from __future__ import annotations

from decimal import Decimal

import pytest

from costguard.domain.billed import Billed, billed_rows, is_data_transfer, read_billed_month


@pytest.mark.parametrize(
    ("usage_type", "moved"),
    [
        ("USE1-DataTransfer-Out-Bytes", True),
        ("DataTransfer-Regional-Bytes", True),
        ("USE1-USW2-AWS-Out-Bytes", True),
        ("USE1-NatGateway-Bytes", True),
        ("USE1-BoxUsage:p5.48xlarge", False),
        ("USE1-EBS:VolumeUsage.gp3", False),
        ("TimedStorage-ByteHrs", False),
        ("Requests-Tier1", False),
    ],
)
def test_data_transfer_is_told_by_its_usage_type(usage_type: str, moved: bool) -> None:
    assert is_data_transfer(usage_type) is moved


def test_the_bill_above_what_the_scan_saw_splits_into_data_transfer_and_other() -> None:
    # GIVEN $1,000 seen by the scan; $1,250 billed, of it $100 data transfer
    row = Billed("llm", Decimal(1000), Decimal(1250), Decimal(100))
    # THEN $250 more billed: $100 data transfer and $150 other, not seen by the scan
    assert (row.difference, row.data_transfer, row.other, row.not_seen) == (
        Decimal(250),
        Decimal(100),
        Decimal(150),
        Decimal(250),
    )


def test_a_bill_behind_the_scan_is_a_negative_difference_and_nothing_other() -> None:
    # GIVEN Cost Explorer a day behind: $900 billed, $40 of it data transfer, $1,000 seen
    row = Billed("llm", Decimal(1000), Decimal(900), Decimal(40))
    # THEN the difference is -$100; the data transfer is still not seen; nothing "other"
    assert (row.difference, row.other, row.not_seen) == (Decimal(-100), Decimal(0), Decimal(40))


def test_rows_cover_every_project_either_side_knows_untagged_last() -> None:
    rows = billed_rows(
        {"b": (Decimal(5), Decimal(1)), None: (Decimal(2), Decimal(0))},
        {"a": Decimal(3), "b": Decimal(4)},
    )
    assert [(r.project, r.seen, r.billed, r.data_transfer) for r in rows] == [
        ("a", Decimal(3), Decimal(0), Decimal(0)),
        ("b", Decimal(4), Decimal(5), Decimal(1)),
        (None, Decimal(0), Decimal(2), Decimal(0)),
    ]


def test_the_kept_document_reads_back_and_an_older_one_too() -> None:
    month = read_billed_month(
        {
            "at": "2026-11-20T12:00:00+00:00",
            "rows": [
                {"project": "a", "seen_usd": "1", "billed_usd": "2", "data_transfer_usd": "0.5"},
                # written before data transfer was split out
                {"project": None, "ledger_usd": "3", "cost_explorer_usd": "4"},
                {"project": "bad", "seen_usd": "x"},
            ],
        }
    )
    assert month is not None
    assert [(r.project, r.seen, r.billed, r.data_transfer) for r in month.rows] == [
        ("a", Decimal(1), Decimal(2), Decimal("0.5")),
        (None, Decimal(3), Decimal(4), Decimal(0)),
    ]
    assert read_billed_month({}) is None
