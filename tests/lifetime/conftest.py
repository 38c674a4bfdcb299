"""The maximum-lifetime tests' account: moto in-process with CostGuard's ledger table."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.idle_fleet import REGION


@pytest.fixture
def account(aws: Any) -> Any:
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", REGION)
    return aws
