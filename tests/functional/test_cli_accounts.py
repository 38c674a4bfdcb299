"""``costguard scan --accounts``: member roles assumed, one broken account reported, the rest done."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from costguard import cli
from costguard.cli import common
from tests.functional.test_org_slices import T0, A, B, C, _deny_assume, _launch


@pytest.fixture
def session(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(common, "session", lambda _args: aws)
    monkeypatch.delenv("COSTGUARD_REGIONS", raising=False)
    monkeypatch.setenv("COSTGUARD_SAGEMAKER_STUDIO", "false")  # moto has no ListApps
    return aws


def test_scans_each_account_and_reports_the_one_it_cannot_enter(
    session: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN GPUs in accounts A and C, and account B without the member role
    _launch(session, A, "us-east-1", "llm", T0)
    _launch(session, C, "us-east-1", "vision", T0)
    _deny_assume(session, B)
    # WHEN the three accounts are scanned from a laptop
    code = cli.main(["scan", "--accounts", f"{A},{B},{C},{A}", "--region", "us-east-1", "--json"])
    out, err = capsys.readouterr()
    # THEN A and C are reported with their own resources, B is named with its error
    assert code == 0
    envelope = json.loads(out)
    assert envelope["kind"] == "scan.accounts"
    doc = envelope["data"]
    assert sorted(doc["accounts"]) == [A, C]
    assert doc["failed_accounts"][B]["code"] == "AccessDenied"
    assert "[3/3]" in err and f"{B}: FAILED AccessDenied" in err
    assert "1 of 3 accounts could not be scanned" in err


def test_exits_3_when_no_account_could_be_scanned(
    session: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _deny_assume(session, B)
    assert cli.main(["scan", "--accounts", B, "--region", "us-east-1", "--quiet"]) == 3


@pytest.mark.parametrize("bad", ["12345", "111111111111,abc", ","])
def test_refuses_a_malformed_account_list(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["scan", "--accounts", bad, "--region", "us-east-1"]) == 2


def test_scans_at_most_the_given_number_of_accounts_at_once(session: Any) -> None:
    # GIVEN six accounts, where entering each takes a moment
    from costguard.cli.org import scan_accounts
    from costguard.settings import Settings
    from costguard.wiring import BundledCatalog

    running, peak, lock = 0, 0, threading.Lock()

    def slow(params: dict[str, Any], **_: Any) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.05)
        with lock:
            running -= 1

    session.events.register("provide-client-params.sts.AssumeRole", slow)
    accounts = [f"{n:012d}" for n in range(100000000001, 100000000007)]
    settings = Settings(regions=("us-east-1",), sagemaker_studio=False)
    # WHEN they are scanned with two workers
    results = scan_accounts(
        session, accounts, settings, BundledCatalog().read()[0], T0, role_name="r", workers=2
    )
    # THEN all complete, in the order given, never more than two at once
    assert [r.account for r in results] == accounts and all(r.report for r in results)
    assert peak == 2
