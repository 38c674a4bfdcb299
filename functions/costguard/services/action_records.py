"""One vocabulary for an action, wherever CostGuard shows one (docs/actions.md).

A guard Lambda's result (``actions``), ``costguard actions`` (the audit trail read back
from the ledger) and the demo all show an action as the same record, with the same
fields in the same order: :data:`RECORD_FIELDS`. ``resource_kind`` is what the resource
is (``sagemaker-notebook``, ``ebs-volume``, ``s3-bucket``...), ``action`` what CostGuard
does or would do to it (``stop-notebook``, ``delete-volume``, ``delete-objects``...),
``outcome`` what happened (``warned``, ``acted``, ``would-act``...), ``detail`` how.

The ledger's audit items are not rewritten: records written by any version of the
Lambdas (an ``action``, a ``resource`` key, an ``outcome`` and a free ``details`` map) are
read into this shape here. ``resource_kind`` comes from the resource key
(``[account/]region/kind/id``), which every version wrote; a sweep batch record
(``deleting``/``deleted``) has no ``detail`` and gets one from its counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from costguard.domain.decisions import deadline_tag
from costguard.domain.models import parse_key
from costguard.domain.money import HOURS_PER_PRICING_MONTH, ZERO, cents, rate

if TYPE_CHECKING:
    from costguard.ports import AuditEvent
    from costguard.services.executor import ExecutionReport, Outcome

#: The record's fields, in the order they are shown (JSON keys, CSV columns).
RECORD_FIELDS = (
    "at",
    "resource",
    "resource_kind",
    "region",
    "account",
    "project",
    "action",
    "outcome",
    "detail",
    "reason",
    "dry_run",
    "usd_per_hour_saved",
    "usd_per_month_saved",
    "deadline",
    "error",
)

#: ``details`` keys an audit record carries that are fields of the record itself.
_PROMOTED = frozenset(
    {"account", "project", "detail", "reason", "dry_run", "deadline", "error"}
    | {"usd_per_hour_saved", "usd_per_month_saved"}
)


def action_record(
    *,
    at: datetime,
    resource: str,
    action: str,
    outcome: str,
    detail: str,
    reason: str,
    project: str | None,
    dry_run: bool,
    usd_per_hour_saved: Decimal,
    deadline: str | None = None,
    account: str | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """The record, from its parts: what the resource key says is not repeated by hand."""
    parts = parse_key(resource)
    return {
        "at": at.isoformat(),
        "resource": resource,
        "resource_kind": parts.kind if parts else None,
        "region": parts.region if parts else None,
        "account": account or (parts.account if parts else "") or None,
        "project": project,
        "action": action,
        "outcome": outcome,
        "detail": detail,
        "reason": reason,
        "dry_run": dry_run,
        "usd_per_hour_saved": float(rate(usd_per_hour_saved)),
        "usd_per_month_saved": float(cents(usd_per_hour_saved * HOURS_PER_PRICING_MONTH)),
        "deadline": deadline,
        "error": error,
    }


def from_outcome(outcome: Outcome, dry_run: bool) -> dict[str, Any]:
    """An executor outcome (a guard run's result)."""
    d = outcome.decision
    return action_record(
        at=d.decided_at,
        resource=d.target.key,
        action=d.action.value,
        outcome=outcome.step.value,
        detail=outcome.detail,
        reason=d.reason,
        project=d.target.project,
        dry_run=dry_run,
        usd_per_hour_saved=outcome.usd_per_hour_saved,
        deadline=deadline_tag(outcome.deadline) if outcome.deadline else None,
        account=d.target.account,
        error=outcome.error,
    )


def from_report(report: ExecutionReport) -> list[dict[str, Any]]:
    """Each decision of a guard run that led somewhere, as records."""
    return [from_outcome(o, report.dry_run) for o in report.outcomes]


def _decimal(value: Any) -> Decimal:
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return ZERO
    return number if number.is_finite() else ZERO


def _sweep_detail(details: Mapping[str, Any]) -> str:
    objects, size = details.get("objects"), details.get("bytes")
    where = f" in s3://{details['bucket']}" if details.get("bucket") else ""
    if objects is None:
        return ""
    noun = "object" if objects == 1 else "objects"
    return f"{objects} {noun} ({size} bytes){where}, batch {details.get('batch', '?')}"


def from_audit(event: AuditEvent) -> dict[str, Any]:
    """An audit record read back from a ledger, whichever version wrote it.

    The record's fields come first; what else the record carried (evidence, the state
    found, owners, a sweep batch's counts and manifest) follows under ``details``.
    """
    details = dict(event.details)
    hourly = details.get("usd_per_hour_saved")
    if hourly is None and details.get("usd_per_month_saved") is not None:
        hourly = _decimal(details["usd_per_month_saved"]) / HOURS_PER_PRICING_MONTH
    record = action_record(
        at=event.at,
        resource=event.resource,
        action=event.action,
        outcome=event.outcome,
        detail=str(details.get("detail") or _sweep_detail(details)),
        reason=str(details.get("reason") or ""),
        project=details.get("project"),
        dry_run=bool(details.get("dry_run", False)),
        usd_per_hour_saved=_decimal(hourly) if hourly is not None else ZERO,
        deadline=details.get("deadline"),
        account=details.get("account"),
        error=details.get("error"),
    )
    if details.get("usd_per_month_saved") is not None:
        # What was recorded, to the cent, rather than recomputed from a rounded rate.
        record["usd_per_month_saved"] = float(cents(_decimal(details["usd_per_month_saved"])))
    record["details"] = {k: v for k, v in sorted(details.items()) if k not in _PROMOTED}
    return record
