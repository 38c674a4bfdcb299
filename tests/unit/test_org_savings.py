"""What the guards saved in member accounts, rolled up per project by the aggregation."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.slices import InMemorySliceBook
from costguard.domain.attribution import ProjectConfig
from costguard.domain.org import Slice
from costguard.domain.org_act import guard_scope
from costguard.ports import AuditEvent
from costguard.services.org import Aggregation, OrgSettings
from costguard.services.org_act import ACTED_ACCOUNTS, OrgSavings, note_acted

HUB = "999999999999"
A, B, C = "111111111111", "222222222222", "333333333333"
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
MONTH = "2026-11"


def _acted(
    ledger: InMemoryLedger,
    account: str,
    resource: str,
    project: str,
    at: datetime,
    usd_per_hour: str,
    outcome: str = "acted",
) -> None:
    ledger.audit(
        AuditEvent(
            guard_scope(HUB, account),
            at,
            f"{resource}/{at.isoformat()}/{outcome}",
            "stop-notebook",
            f"{account}/us-east-1/sagemaker-notebook/{resource}",
            outcome,
            {"project": project, "usd_per_hour_saved": usd_per_hour},
        )
    )


def test_savings_are_summed_per_project_across_the_accounts_that_acted() -> None:
    # GIVEN A and B acted on llm notebooks this month; C acted too but is not indexed
    # (its run crashed before the note: it is counted once its retry notes it)
    ledger = InMemoryLedger()
    _acted(ledger, A, "nb-1", "llm", T0, "2.0")
    _acted(ledger, B, "nb-1", "llm", T0 + timedelta(hours=1), "3.0")
    _acted(ledger, B, "nb-2", "cv", T0, "1.0", outcome="would-act")  # dry-run: not saved
    _acted(ledger, C, "nb-9", "llm", T0, "50.0")
    note_acted(ledger, HUB, MONTH, A)
    note_acted(ledger, HUB, MONTH, B)
    note_acted(ledger, HUB, MONTH, A)  # twice: once in the index
    # WHEN the savings are read 10 hours after T0
    saved = OrgSavings(ledger, ledger, HUB)(MONTH, T0 + timedelta(hours=10))
    # THEN llm saved 2 $/h for 10 h in A and 3 $/h for 9 h in B: the same notebook id in
    # two accounts is two notebooks; a dry-run is not a saving
    assert saved["llm"].actions == 2
    assert saved["llm"].usd_per_hour == Decimal("5.0")
    assert saved["llm"].month_to_date_usd_estimated == Decimal("47")
    assert "cv" not in saved
    assert ledger.get_state(HUB, f"{ACTED_ACCOUNTS}/{MONTH}")[0] == {"accounts": [A, B]}


def test_each_sweep_pass_in_a_member_account_counts_what_it_deleted_once() -> None:
    """Defect: the roll-up counted a resource's first action only, at the rate the
    executor logged, which for a sweep was the warning survey's on every pass: a bucket
    swept hour after hour saved the survey's estimate once, whatever the passes deleted."""
    ledger = InMemoryLedger()
    bucket = f"{A}/us-east-1/s3-bucket/scratch"
    # GIVEN two passes over one bucket in A, each recording what it deleted
    for at, usd_per_hour in ((T0, "0.25"), (T0 + timedelta(hours=1), "0.5")):
        ledger.audit(
            AuditEvent(
                guard_scope(HUB, A),
                at,
                f"acted/delete-objects/{bucket}",  # one warning: the same id on every pass
                "delete-objects",
                bucket,
                "acted",
                {"project": "vision", "usd_per_hour_saved": usd_per_hour, "standing": "fp1"},
            )
        )
    note_acted(ledger, HUB, MONTH, A)
    # WHEN the savings are read two hours after the first pass
    saved = OrgSavings(ledger, ledger, HUB)(MONTH, T0 + timedelta(hours=2))
    # THEN both passes count, each from when it deleted: 0.25 $/h for 2 h, 0.5 for 1 h
    assert saved["vision"].actions == 2
    assert saved["vision"].usd_per_hour == Decimal("0.75")
    assert saved["vision"].month_to_date_usd_estimated == Decimal("1.0")


def test_concurrent_notes_lose_no_account() -> None:
    ledger = InMemoryLedger()
    accounts = [f"{i:012d}" for i in range(1, 17)]
    gate = threading.Barrier(len(accounts))

    def note(account: str) -> None:
        gate.wait()
        note_acted(ledger, HUB, MONTH, account)

    threads = [threading.Thread(target=note, args=(a,)) for a in accounts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ledger.get_state(HUB, f"{ACTED_ACCOUNTS}/{MONTH}")[0]["accounts"] == accounts


def test_the_roll_up_reports_each_project_s_savings() -> None:
    # GIVEN a guard stopped an llm notebook in A two hours before the scheduled time
    ledger, book = InMemoryLedger(), InMemorySliceBook()
    _acted(ledger, A, "nb-1", "llm", T0 - timedelta(hours=2), "2.0")
    note_acted(ledger, HUB, MONTH, A)
    book.plan(T0, [Slice(A, "us-east-1")], T0 + timedelta(minutes=10))
    book.mark_done(T0, Slice(A, "us-east-1"))
    aggregation = Aggregation(
        book,
        ledger,
        OrgSettings(scope=HUB, projects={"llm": ProjectConfig(budget=Decimal(100))}),
        savings=OrgSavings(ledger, ledger, HUB),
    )
    # WHEN the time is aggregated
    report = aggregation.run(T0, T0)
    # THEN the rolled-up project carries what the guard saved: 2 $/h for 2 hours
    assert report is not None
    (llm,) = [p for p in report.projects if p.project == "llm"]
    assert (llm.savings.actions, llm.savings.usd_per_hour) == (1, Decimal("2.0"))
    assert llm.savings.month_to_date_usd_estimated == Decimal("4")


@pytest.mark.parametrize("month", ["2026-10", "2026-12"])
def test_another_month_s_index_is_not_this_month_s(month: str) -> None:
    ledger = InMemoryLedger()
    _acted(ledger, A, "nb-1", "llm", T0, "2.0")
    note_acted(ledger, HUB, month, A)
    assert OrgSavings(ledger, ledger, HUB)(MONTH, T0 + timedelta(hours=1)) == {}
