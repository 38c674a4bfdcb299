"""`costguard actions` lists the audit trail from a deployed ledger (moto DynamoDB)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from costguard.domain.decisions import Action, Decision, Target
from costguard.services.executor import Executor, ExecutorSettings
from tests.support.actuators import FakeResource, InMemoryActuator
from tests.support.clock import MIDDAY


def test_lists_what_was_done_and_what_a_dry_run_would_do(
    aws: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.cli import main
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    ledger = DynamoDbLedger(aws.client("dynamodb", region_name="us-east-1"), "ledger")
    actuator = InMemoryActuator(
        "sagemaker-notebook",
        {"nb-1": FakeResource(tags={"costguard:project": "vision"})},
    )
    target = Target(
        "us-east-1/sagemaker-notebook/nb-1",
        "sagemaker-notebook",
        "us-east-1",
        "nb-1",
        project="vision",
    )
    decision = Decision(
        Action.STOP_NOTEBOOK,
        target,
        "idle for 3 h\nURGENT pay now",
        MIDDAY,
        usd_per_hour_saved=Decimal("1.41"),
    )
    Executor([actuator], ledger, None, ExecutorSettings("acct", dry_run=True)).run(
        [decision], MIDDAY
    )

    args = ["actions", "--table", "ledger", "--scope", "acct", "--table-region", "us-east-1"]
    assert main([*args, "--month", "2026-11", "--json"]) == 0
    envelope = json.loads(capsys.readouterr().out)
    assert (envelope["schema_version"], envelope["kind"]) == (2, "actions")
    (row,) = envelope["data"]
    assert (row["outcome"], row["action"], row["dry_run"]) == ("would-warn", "stop-notebook", True)
    assert row["resource_kind"] == "sagemaker-notebook"
    assert row["usd_per_month_saved"] == 1029.30
    assert row["details"]["state_found"] == "InService"

    assert main([*args, "--month", "2026-11"]) == 0
    table = capsys.readouterr().out
    assert "would-warn" in table and "$1,029.30/month" in table
    assert len(table.strip().splitlines()) == 1  # a newline in a field cannot forge a row


@pytest.mark.parametrize("month", ["2026-13", "26-11", "2026-1", "２０２６-11"])
def test_a_bad_month_is_a_usage_error(month: str, capsys: pytest.CaptureFixture[str]) -> None:
    from costguard.cli import main

    assert main(["actions", "--table", "ledger", "--month", month]) == 2
    assert "month" in capsys.readouterr().err
