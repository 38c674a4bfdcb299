"""One contract, two ledgers: the in-memory fake and DynamoDB (moto) behave the same."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.findings import Finding, FindingCode
from costguard.domain.spend import Increment, Observation
from costguard.ports import AuditEvent, CommitOutcome, Ledger, ScanCommit
from tests.support.atomic import AtomicCalls

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=15)
T2 = T1 + timedelta(minutes=15)


def make_table(session: object, name: str = "ledger") -> None:
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(session, name, "us-east-1")


@pytest.fixture(params=["memory", "dynamodb"])
def ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    if request.param == "memory":
        yield InMemoryLedger()
        return
    import boto3
    from moto import mock_aws

    from costguard.adapters.dynamodb import DynamoDbLedger

    with mock_aws():
        session = boto3.Session()
        make_table(session)
        client = AtomicCalls(session.client("dynamodb", region_name="us-east-1"))
        yield DynamoDbLedger(client, "ledger")


def commit(
    prev: datetime | None, now: datetime, usd: str, project: str | None = "vision"
) -> ScanCommit:
    obs = Observation("us-east-1/ec2-instance/i-1", project, Decimal(4), now, T0)
    return ScanCommit(
        "acct", prev, now, {(project, "2026-11"): Increment(Decimal(usd), Decimal(0))}, [obs]
    )


def test_commits_accumulate_month_to_date(ledger: Ledger) -> None:
    assert ledger.commit(commit(None, T0, "10")) is CommitOutcome.APPLIED
    assert ledger.commit(commit(T0, T1, "1")) is CommitOutcome.APPLIED
    assert ledger.watermark("acct") == T1
    totals = ledger.month_totals("acct", "2026-11")
    assert totals["vision"].usd == Decimal(11)
    assert ledger.observations("acct")["us-east-1/ec2-instance/i-1"].observed_at == T1


def test_a_retried_scan_adds_nothing_twice(ledger: Ledger) -> None:
    ledger.commit(commit(None, T0, "10"))
    # GIVEN the same scheduled scan is delivered again (Lambda retry)
    again = ledger.commit(commit(None, T0, "10"))
    # THEN it is recognised and the total is unchanged
    assert again is CommitOutcome.ALREADY_APPLIED
    assert ledger.month_totals("acct", "2026-11")["vision"].usd == Decimal(10)


def test_a_scan_that_lost_the_race_is_refused_not_doubled(ledger: Ledger) -> None:
    ledger.commit(commit(None, T0, "10"))
    assert ledger.commit(commit(T0, T2, "2")) is CommitOutcome.APPLIED
    # A slower scan that also started from T0 commits later: refused.
    assert ledger.commit(commit(T0, T1, "1")) is CommitOutcome.CONTENDED
    assert ledger.month_totals("acct", "2026-11")["vision"].usd == Decimal(12)


def test_concurrent_scans_from_the_same_watermark_apply_exactly_once(ledger: Ledger) -> None:
    ledger.commit(commit(None, T0, "10"))
    outcomes: list[CommitOutcome] = []
    barrier = threading.Barrier(6)

    def scan(minutes: int) -> None:
        barrier.wait()
        outcomes.append(ledger.commit(commit(T0, T0 + timedelta(minutes=minutes), "1")))

    threads = [threading.Thread(target=scan, args=(m,)) for m in range(10, 16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count(CommitOutcome.APPLIED) == 1
    assert ledger.month_totals("acct", "2026-11")["vision"].usd == Decimal(11)


def test_unattributed_spend_and_odd_project_names_round_trip(ledger: Ledger) -> None:
    odd = "Ünïcode team #1 / 計算 %UNATTRIBUTED"
    ledger.commit(
        ScanCommit(
            "acct",
            None,
            T0,
            {
                (None, "2026-11"): Increment(Decimal(3), Decimal(3)),
                (odd, "2026-11"): Increment(Decimal(5), Decimal(0)),
            },
            [],
        )
    )
    totals = ledger.month_totals("acct", "2026-11")
    assert totals[None].usd == Decimal(3)
    assert totals[None].estimated_usd == Decimal(3)
    assert totals[odd].usd == Decimal(5)


def test_put_once_admits_only_the_first_writer(ledger: Ledger) -> None:
    results: list[bool] = []
    barrier = threading.Barrier(5)

    def write() -> None:
        barrier.wait()
        results.append(ledger.put_once("budget-alert", "vision#2026-11#80", T0, {"pct": 80}))

    threads = [threading.Thread(target=write) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, False, False, False, True]


def test_audit_trail_is_append_once_and_ordered(ledger: Ledger) -> None:
    e1 = AuditEvent(
        "acct", T1, "stop-1", "stop-notebook", "nb-1", "dry-run", {"state": "InService"}
    )
    e0 = AuditEvent("acct", T0, "warn-1", "warn", "nb-1", "sent", {})
    assert ledger.audit(e1)
    assert ledger.audit(e0)
    assert not ledger.audit(e1)
    trail = ledger.audit_trail("acct", "2026-11")
    assert [e.event_id for e in trail] == ["warn-1", "stop-1"]
    assert trail[1].details == {"state": "InService"}


def test_findings_are_kept_once_per_code_and_resource_per_day(ledger: Ledger) -> None:
    unpriced = Finding(FindingCode.UNPRICED, "us-east-1/ec2-instance/i-1", "no price")
    budget = Finding(FindingCode.MALFORMED_BUDGET, "us-east-1/ec2-instance/i-2", "abc")
    ledger.record_findings("acct", T0, [unpriced, unpriced, budget])
    ledger.record_findings("acct", T1, [unpriced])  # a later scan of the same day
    assert ledger.findings("acct", "2026-11-20") == [budget, unpriced]
    assert ledger.findings("acct", "2026-11-21") == []


def test_many_projects_commit_at_once_and_a_retry_adds_nothing(ledger: Ledger) -> None:
    # 150 projects: more than one DynamoDB transaction could hold as one row each.
    increments = {
        (f"project-{n:03d}", "2026-11"): Increment(Decimal(n), Decimal(0)) for n in range(150)
    }
    assert ledger.commit(ScanCommit("acct", None, T0, increments, [])) is CommitOutcome.APPLIED
    assert (
        ledger.commit(ScanCommit("acct", None, T0, increments, [])) is CommitOutcome.ALREADY_APPLIED
    )
    totals = ledger.month_totals("acct", "2026-11")
    assert len(totals) == 150
    assert sum(t.usd for t in totals.values()) == Decimal(sum(range(150)))


def test_a_late_retry_of_an_older_scan_never_moves_the_watermark_back(ledger: Ledger) -> None:
    # GIVEN scans at T0 and T2 committed
    ledger.commit(commit(None, T0, "10"))
    ledger.commit(commit(T0, T2, "2"))
    # WHEN a retry of a scan scheduled at T1 arrives late; it read the watermark T2 as
    # its starting point, as a real late retry does
    late = ledger.commit(commit(T2, T1, "1"))
    # THEN it is refused, writes nothing, and the watermark stays at T2
    assert late is CommitOutcome.CONTENDED
    assert ledger.watermark("acct") == T2
    assert ledger.month_totals("acct", "2026-11")["vision"].usd == Decimal(12)
    assert ledger.observations("acct")["us-east-1/ec2-instance/i-1"].observed_at == T2


def test_a_commit_replaces_the_observation_snapshot_with_its_own(ledger: Ledger) -> None:
    a = Observation("us-east-1/ec2-instance/i-a", "vision", Decimal(1), T0, T0)
    b = Observation("us-east-1/ec2-instance/i-b", None, Decimal(2), T0, T0)
    ledger.commit(ScanCommit("acct", None, T0, {}, [a, b]))
    b2 = b._replace(observed_at=T1)
    ledger.commit(ScanCommit("acct", T0, T1, {}, [b2]))
    assert ledger.observations("acct") == {b.key: b2}


def test_large_snapshots_and_huge_keys_fit(ledger: Ledger) -> None:
    # 20,000 resources, and a 256-character CJK project (768 bytes, ~2 KiB encoded).
    cjk = "計" * 256
    snapshot = [
        Observation(f"us-east-1/ec2-instance/i-{n:017x}", cjk, Decimal("98.32"), T0, T0)
        for n in range(20_000)
    ]
    outcome = ledger.commit(
        ScanCommit(
            "acct", None, T0, {(cjk, "2026-11"): Increment(Decimal(7), Decimal(7))}, snapshot
        )
    )
    assert outcome is CommitOutcome.APPLIED
    assert len(ledger.observations("acct")) == 20_000
    assert ledger.month_totals("acct", "2026-11")[cjk].usd == Decimal(7)
    finding = Finding(FindingCode.MALFORMED_BUDGET, f"us-east-1/ec2-instance/{cjk}", "x")
    ledger.record_findings("acct", T0, [finding])
    assert ledger.findings("acct", "2026-11-20") == [finding]
    assert ledger.put_once("alert", f"budget/{cjk}/2026-11/mtd-50", T0, {})
    assert ledger.claim("alert", f"anomaly/{cjk}/1", T0, timedelta(minutes=10), {})
    ledger.record_rates("acct", T0, {cjk: Decimal(1)})
    assert ledger.rate_history("acct", T0)[cjk] == [(T0, Decimal(1))]
    assert ledger.audit(AuditEvent("acct", T0, f"stop/{cjk}", "stop", cjk, "done", {}))


LEASE = timedelta(minutes=10)


def test_a_claim_is_taken_once_until_released(ledger: Ledger) -> None:
    assert ledger.claim("alert", "k", T0, LEASE, {"alert_id": "a"})
    assert not ledger.claim("alert", "k", T0, LEASE, {})
    # WHEN the work fails, THEN the key is claimable again at once
    ledger.release("alert", "k", T0)
    assert ledger.claim("alert", "k", T0 + timedelta(seconds=1), LEASE, {})
    # WHEN the work succeeds, THEN it is never claimable again, lease or not
    ledger.confirm("alert", "k", T0)
    ledger.release("alert", "k", T0)  # a late release does not undo a confirmation
    assert not ledger.claim("alert", "k", T0 + timedelta(days=30), LEASE, {})


def test_a_crashed_claim_is_claimable_after_its_lease(ledger: Ledger) -> None:
    # GIVEN a holder that claimed and then crashed before publishing
    assert ledger.claim("alert", "k", T0, LEASE, {})
    # THEN nobody takes it during the lease, and the next scan after it does
    assert not ledger.claim("alert", "k", T0 + LEASE - timedelta(seconds=1), LEASE, {})
    assert ledger.claim("alert", "k", T0 + LEASE, LEASE, {})


def test_put_once_records_are_never_claimable(ledger: Ledger) -> None:
    assert ledger.put_once("alert", "k", T0, {})
    assert not ledger.claim("alert", "k", T0 + timedelta(days=1), LEASE, {})


def test_concurrent_claims_admit_one(ledger: Ledger) -> None:
    results: list[bool] = []
    barrier = threading.Barrier(5)

    def take() -> None:
        barrier.wait()
        results.append(ledger.claim("alert", "k", T0, LEASE, {}))

    threads = [threading.Thread(target=take) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, False, False, False, True]


def test_recent_alerts_are_bounded_on_both_sides(ledger: Ledger) -> None:
    for n, at in enumerate((T0, T1, T2)):
        ledger.record_alert("acct", at, {"alert_id": f"a{n}"})
    assert [a["alert_id"] for a in ledger.recent_alerts("acct", T0, T1)] == ["a0", "a1"]


def test_state_is_written_by_compare_and_set(ledger: Ledger) -> None:
    assert ledger.get_state("acct", "anomalies") == ({}, 0)
    assert ledger.put_state("acct", "anomalies", {"llm": {"active": True}}, 0)
    value, version = ledger.get_state("acct", "anomalies")
    assert (value, version) == ({"llm": {"active": True}}, 1)
    # A writer that read version 0 lost the race: refused, nothing changes.
    assert not ledger.put_state("acct", "anomalies", {"llm": {}}, 0)
    assert ledger.get_state("acct", "anomalies") == ({"llm": {"active": True}}, 1)
    assert ledger.get_state("other", "anomalies") == ({}, 0)


def test_concurrent_state_writers_from_one_version_admit_one(ledger: Ledger) -> None:
    ledger.put_state("acct", "s", {"n": 0}, 0)
    results: list[bool] = []
    barrier = threading.Barrier(5)

    def write(n: int) -> None:
        barrier.wait()
        results.append(ledger.put_state("acct", "s", {"n": n}, 1))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(1, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, False, False, False, True]
    assert ledger.get_state("acct", "s")[1] == 2


def test_rate_history_keeps_samples_since_and_dedupes_a_retried_append(ledger: Ledger) -> None:
    ledger.record_rates("acct", T0, {"llm": Decimal("55.04"), "cv": Decimal(1)})
    ledger.record_rates("acct", T1, {"llm": Decimal("110.08")})
    ledger.record_rates("acct", T1, {"llm": Decimal("110.08")})  # the same scan, retried
    assert ledger.rate_history("acct", T1) == {"llm": [(T1, Decimal("110.08"))]}
    history = ledger.rate_history("acct", T0)
    assert history["llm"] == [(T0, Decimal("55.04")), (T1, Decimal("110.08"))]
    assert history["cv"] == [(T0, Decimal(1))]


def test_the_contract_exercises_every_method_of_every_store() -> None:
    # A store method that no contract test calls is a method the fake may get wrong.
    import inspect

    from costguard.ports import LEDGER_STORES

    source = inspect.getsource(
        inspect.getmodule(test_the_contract_exercises_every_method_of_every_store)
    )  # type: ignore[arg-type]
    missing = [
        f"{store.__name__}.{name}"
        for store in LEDGER_STORES
        for name, _ in inspect.getmembers(store, inspect.isfunction)
        if not name.startswith("_") and f".{name}(" not in source
    ]
    assert missing == []


def test_claim_status_reads_back_each_phase(ledger: Ledger) -> None:
    assert ledger.status("action", "k") is None
    ledger.claim("action", "k", T0, LEASE, {"status": "not a real status"})
    assert ledger.status("action", "k") == "pending"
    ledger.release("action", "k", T0)
    assert ledger.status("action", "k") == "released"
    ledger.claim("action", "k", T1, LEASE, {})
    ledger.confirm("action", "k", T1)
    assert ledger.status("action", "k") == "sent"
    ledger.put_once("action", "once", T0, {})
    assert ledger.status("action", "once") == "sent"


def test_only_the_holder_can_release_its_claim(ledger: Ledger) -> None:
    ledger.claim("action", "k", T0, LEASE, {})
    ledger.release("action", "k", T1)  # not the holder's claim time: refused
    assert ledger.status("action", "k") == "pending"


def test_a_finding_whose_message_changed_keeps_the_latest_words(ledger: Ledger) -> None:
    old = Finding(FindingCode.UNATTRIBUTED, "us-east-1/ec2-instance/i-1", "costs $1.00/h")
    new = old._replace(message="costs $2.00/h")
    ledger.record_findings("acct", T0, [old])
    ledger.record_findings("acct", T1, [new])
    ledger.record_findings("acct", T2, [new])  # unchanged: nothing to rewrite
    assert ledger.findings("acct", "2026-11-20") == [new]


def test_a_confirmed_claim_is_reopened_only_for_the_work_it_was_confirmed_for(
    ledger: Ledger,
) -> None:
    """Defect: a warning's claim outlived the warning: once withdrawn, nothing could end
    the confirmed claim, so a new warning was "claimed-elsewhere" until the next UTC day.

    GIVEN a claim confirmed for the warning with deadline D1
    WHEN a withdrawal names another warning (D0), THEN nothing changes;
    WHEN it names D1, THEN the key is claimable at once, and reopening again is a no-op;
    AND once a new warning (D2) is claimed and confirmed, a late retry of the D1
    withdrawal leaves it confirmed: a newer claim is never freed."""
    assert ledger.claim("action", "warn/k", T0, LEASE, {})
    ledger.confirm("action", "warn/k", T0, fence="D1")
    assert not ledger.reopen("action", "warn/k", "D0")
    assert ledger.status("action", "warn/k") == "sent"
    assert not ledger.claim("action", "warn/k", T1, LEASE, {})
    assert ledger.reopen("action", "warn/k", "D1")
    assert ledger.status("action", "warn/k") == "released"
    assert not ledger.reopen("action", "warn/k", "D1")
    assert ledger.claim("action", "warn/k", T1, LEASE, {})
    ledger.confirm("action", "warn/k", T1, fence="D2")
    assert not ledger.reopen("action", "warn/k", "D1")  # the late retry
    assert ledger.status("action", "warn/k") == "sent"
    assert not ledger.claim("action", "warn/k", T2, LEASE, {})


def test_a_stale_now_after_a_reopen_is_refused_so_one_holder_is_admitted(
    ledger: Ledger,
) -> None:
    """GIVEN a reopened claim WHEN a late retry claims it with a `now` older than the
    key's last claim, THEN it is refused (its lease would have run out before it began,
    letting a second holder in), and a current run is admitted once; a claim confirmed
    without a fence is never reopened."""
    ledger.claim("action", "warn/k", T1, LEASE, {})
    ledger.confirm("action", "warn/k", T1, fence="D1")
    assert ledger.reopen("action", "warn/k", "D1")
    assert not ledger.claim("action", "warn/k", T0, LEASE, {})
    assert ledger.claim("action", "warn/k", T2, LEASE, {})
    assert not ledger.claim("action", "warn/k", T2 + LEASE - timedelta(seconds=1), LEASE, {})
    ledger.confirm("action", "warn/k", T2)
    assert not ledger.reopen("action", "warn/k", "D1")
    assert ledger.status("action", "warn/k") == "sent"


def test_a_stale_now_never_takes_over_a_running_lease(ledger: Ledger) -> None:
    """GIVEN a claim taken at T1 and released, WHEN a late retry claims with T0 and a
    current run with T1 + LEASE, THEN the late one is refused, the current one admitted."""
    ledger.claim("alert", "k", T1, LEASE, {})
    ledger.release("alert", "k", T1)
    assert not ledger.claim("alert", "k", T0, LEASE, {})
    assert ledger.claim("alert", "k", T1 + LEASE, LEASE, {})


def test_a_reopen_names_the_warning_whatever_it_was_about_but_never_the_kept_one(
    ledger: Ledger,
) -> None:
    """GIVEN a claim confirmed for the warning D1 about configuration c1 (fence D1/c1)
    WHEN a withdrawal names D1 alone THEN it is reopened (the warning is over, whatever it
    was about); AND a superseding run that keeps D1/c1 (the configuration it is about to
    warn on) never reopens it, nor one for D10 (a fence that merely starts alike)."""
    ledger.claim("action", "warn/k", T0, LEASE, {})
    ledger.confirm("action", "warn/k", T0, fence="D1/c1")
    assert not ledger.reopen("action", "warn/k", "D1", keep="D1/c1")
    assert not ledger.reopen("action", "warn/k", "D")
    assert ledger.status("action", "warn/k") == "sent"
    assert ledger.reopen("action", "warn/k", "D1", keep="D1/c2")
    ledger.claim("action", "warn/k", T1, LEASE, {})
    ledger.confirm("action", "warn/k", T1, fence="D10")
    assert not ledger.reopen("action", "warn/k", "D1")
    assert ledger.reopen("action", "warn/k", "D10")


def test_a_pending_claim_or_a_put_once_record_is_never_reopened(ledger: Ledger) -> None:
    """A holder still at work keeps its claim; a one-shot record stays done."""
    ledger.claim("action", "warn/k", T0, LEASE, {})
    assert not ledger.reopen("action", "warn/k", "D1")
    assert ledger.status("action", "warn/k") == "pending"
    ledger.put_once("action", "once", T0, {})
    assert not ledger.reopen("action", "once", "D1")
    assert ledger.status("action", "once") == "sent"


def test_concurrent_claims_after_a_reopen_admit_one(ledger: Ledger) -> None:
    """GIVEN a claim confirmed for D1 and reopened by one withdrawal, WHEN four runs
    claim it at once while two more retry the same withdrawal, THEN exactly one run is
    admitted, and the retried withdrawals never free the winner's claim."""
    ledger.claim("action", "warn/k", T0, LEASE, {})
    ledger.confirm("action", "warn/k", T0, fence="D1")
    assert ledger.reopen("action", "warn/k", "D1")
    results: list[bool] = []
    barrier = threading.Barrier(6)

    def take(n: int) -> None:
        barrier.wait()
        if ledger.claim("action", "warn/k", T1, LEASE, {}):
            ledger.confirm("action", "warn/k", T1, fence=f"D2-{n}")
            results.append(True)
        else:
            results.append(False)

    def retry_withdrawal() -> None:
        barrier.wait()
        ledger.reopen("action", "warn/k", "D1")

    threads = [threading.Thread(target=take, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=retry_withdrawal) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, False, False, True]
    assert ledger.status("action", "warn/k") == "sent"
    assert not ledger.claim("action", "warn/k", T2, LEASE, {})


def test_statuses_read_many_claims_at_once(ledger: Ledger) -> None:
    """GIVEN 150 records of two namespaces in every phase WHEN read at once (more than
    one batch), with a key asked twice and one never written THEN each reads as
    ``status`` reads it, and the missing one is absent."""
    keys: list[tuple[str, str]] = []
    for n in range(150):
        ledger.put_once("warned", f"w{n}", T0, {})
        keys.append(("warned", f"w{n}"))
    ledger.claim("action", "pending", T0, LEASE, {})
    ledger.claim("action", "released", T0, LEASE, {})
    ledger.release("action", "released", T0)
    asked = [*keys, ("action", "pending"), ("action", "released"), ("warned", "w0")]
    found = ledger.statuses([*asked, ("withdrawn", "never")])
    assert found == {k: ledger.status(*k) for k in asked}
    assert ("withdrawn", "never") not in found
    assert ledger.statuses([]) == {}


def test_audit_many_writes_every_event_once_however_often_written(ledger: Ledger) -> None:
    """GIVEN 60 events (more than two batches of 25), one of them twice in the batch
    WHEN written, and written again (a retried run) THEN the trail holds each once."""
    events = [
        AuditEvent("acct", T0 + timedelta(seconds=n), f"e{n}", "stop", f"r{n}", "would-warn", {})
        for n in range(60)
    ]
    ledger.audit_many([*events, events[0]])
    ledger.audit_many(events)
    trail = ledger.audit_trail("acct", "2026-11")
    assert [e.event_id for e in trail] == [f"e{n}" for n in range(60)]
    ledger.audit_many([])


def test_audit_many_and_single_records_read_back_as_one_trail(ledger: Ledger) -> None:
    """GIVEN records written one by one and in batches, across two months, with large
    details WHEN the trail of each month is read THEN every record is there once, in
    time order, details intact."""
    big = {"evidence": {f"k{n}": "x" * 40 for n in range(40)}}
    single = AuditEvent("acct", T0, "acted/1", "stop", "r1", "acted", {"a": 1})
    assert ledger.audit(single)
    december = datetime(2026, 12, 1, 0, 30, tzinfo=UTC)
    batch = [
        AuditEvent("acct", T1, f"would-warn/{n}", "stop", f"r{n}", "would-warn", big)
        for n in range(1500)
    ]
    batch.append(AuditEvent("acct", december, "would-warn/dec", "stop", "r", "would-warn", {}))
    ledger.audit_many([single, *batch])
    november = ledger.audit_trail("acct", "2026-11")
    assert len(november) == 1501
    assert november[0] == single
    assert november[1].details == big
    assert [e.event_id for e in ledger.audit_trail("acct", "2026-12")] == ["would-warn/dec"]
