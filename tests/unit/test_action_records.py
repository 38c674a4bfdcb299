"""One action vocabulary: a guard run's result and the audit trail read back say the same."""

from __future__ import annotations

from decimal import Decimal

from costguard.domain.decisions import Action, Decision, Step, Target
from costguard.ports import AuditEvent
from costguard.services.action_records import RECORD_FIELDS, from_audit, from_outcome
from costguard.services.executor import Outcome
from tests.support.clock import MIDDAY

KEY = "123456789012/us-east-1/ebs-volume/vol-1"


def test_a_run_outcome_and_its_audit_record_have_the_same_fields_in_the_same_order() -> None:
    # GIVEN a volume deletion waiting for its snapshot, as the executor reports it
    target = Target(KEY, "ebs-volume", "us-east-1", "vol-1", "123456789012", "vision")
    decision = Decision(
        Action.DELETE_VOLUME, target, "unattached 48 h", MIDDAY, usd_per_hour_saved=Decimal("0.02")
    )
    record = from_outcome(Outcome(decision, Step.WAITING, "snapshot snap-1 started"), False)
    # WHEN the same thing is read back from an audit record of an older Lambda
    old = AuditEvent(
        "acct",
        MIDDAY,
        "waiting/delete-volume/...",
        "delete-volume",
        KEY,
        "waiting",
        {"project": "vision", "detail": "snapshot snap-1 started", "usd_per_month_saved": "14.60"},
    )
    read = from_audit(old)
    # THEN both say what the resource is, what is done to it and what happened, alike
    assert tuple(record) == RECORD_FIELDS and tuple(read)[:-1] == RECORD_FIELDS
    assert "kind" not in record and "kind" not in read
    same = ("resource_kind", "region", "account", "action", "outcome", "detail")
    assert [record[k] for k in same] == [read[k] for k in same] == [
        "ebs-volume", "us-east-1", "123456789012", "delete-volume", "waiting",
        "snapshot snap-1 started",
    ]  # fmt: skip
    assert record["usd_per_month_saved"] == read["usd_per_month_saved"] == 14.6


def test_a_record_whose_resource_is_no_key_is_still_read() -> None:
    """Defect guarded: a hand-written or truncated resource must not break `actions`."""
    event = AuditEvent("acct", MIDDAY, "x", "stop-notebook", "not-a-key", "failed", {})
    record = from_audit(event)
    assert (record["resource_kind"], record["region"], record["usd_per_month_saved"]) == (
        None,
        None,
        0.0,
    )
    assert record["details"] == {} and record["detail"] == ""
