"""`costguard alerts` reads recent alerts back from the ledger (moto DynamoDB)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tests.support.clock import MIDDAY, clock_at


def test_lists_recent_alerts_from_the_ledger(aws: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.cli import main
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    ledger = DynamoDbLedger(aws.client("dynamodb", region_name="us-east-1"), "ledger")
    now = MIDDAY
    alert = {
        "alert_id": "budget-threshold/2026-11/80/llm",
        "kind": "budget-threshold",
        "project": "llm",
        "severity": "warning",
        "title": "llm: 80% of the monthly budget spent",
        "at": now.isoformat(),
    }
    ledger.record_alert("acct", now - timedelta(hours=1), alert)
    ledger.record_alert("acct", now - timedelta(days=3), {**alert, "alert_id": "old"})

    args = ["alerts", "--table", "ledger", "--scope", "acct", "--table-region", "us-east-1"]
    with clock_at(MIDDAY + timedelta(minutes=5)):
        assert main([*args, "--json"]) == 0
        listed = json.loads(capsys.readouterr().out)["data"]
        assert [a["alert_id"] for a in listed] == ["budget-threshold/2026-11/80/llm"]
        assert main(args) == 0
    assert "llm: 80% of the monthly budget spent" in capsys.readouterr().out


def test_without_a_table_it_says_what_to_pass(capsys: pytest.CaptureFixture[str]) -> None:
    from costguard.cli import main

    assert main(["alerts"]) == 2
    assert "--table" in capsys.readouterr().err
