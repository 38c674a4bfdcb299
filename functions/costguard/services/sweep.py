"""Sweep one bucket's stale objects: survey, then delete to the hour, in resumable passes.

The executor decides *whether* CostGuard may act on a bucket (scope, exemption, the
warning and its grace period, one run at a time); this service does the work, one page
of at most 1,000 keys at a time, and keeps its place in the ledger so that a bucket of
millions of objects is swept over several runs with no object deleted twice or skipped.

Each bucket moves through phases, kept in one versioned state document:

``survey``   list everything in scope and count what would go; delete nothing. Its
             figures are the warning's (and dry-run's) report.
``ready``    the survey is complete. At the first deletion run the breaker judges it:
             too much of the bucket goes ``tripped``; otherwise ``delete``.
``delete``   list and delete in passes; a pass may delete at most the breaker's share
             of what the previous pass counted: more trips the breaker before the batch
             that would cross it.
``tripped``  nothing is deleted until the owner tags ``costguard:confirm-delete`` with the
             trip's stamp (its UTC time to the minute, ``2026-11-05T04:00Z``, as the
             alert prints it) or a UTC date on or after the trip (up to tomorrow); the
             confirmed pass then runs unlimited. A confirmation is spent by the pass it
             unlocks (kept as ``confirm_used``): a later trip, even the same day, needs
             its own stamp (or a later date), never the tag left from the last one.

A change of the bucket's time to live, prefixes or keep prefix (its fingerprint) starts
over with a survey, and the executor warns again.

A page is processed whole or not at all: the position advances only in the state write
that also adds the page's counts, after its deletions. A run that stops (time, crash)
re-lists that page; deleted objects are no longer listed, so nothing is deleted twice,
and nothing is skipped. Each batch's manifest is audited *before* its ``DeleteObjects``
(``deleting``) and after it (``deleted``, with per-key errors).
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from costguard.domain.alerts import Alert, AlertKind, AlertSeverity
from costguard.domain.calendar import require_utc
from costguard.domain.money import cents
from costguard.domain.sweep import (
    StoredObject,
    SweepConfig,
    Tally,
    backstop,
    breaker_reason,
    confirmation_key,
    confirms,
    is_candidate,
    merge_lifecycle,
    pass_allowance,
    trip_stamp,
    usd_per_month,
)
from costguard.domain.tags import parse_exempt, parse_ttl
from costguard.names import Tags
from costguard.ports import (
    AuditEvent,
    AuditLog,
    Budget,
    DeleteResult,
    Notifier,
    ObjectStore,
    StateStore,
)

#: DeleteObjects takes at most 1,000 keys.
DELETE_LIMIT = 1000
#: A batch's manifest (keys as UTF-8, plus sizes and times) stays under this before
#: compression, so that one audit item per batch fits DynamoDB's 400 KB even for
#: incompressible 1,024-byte keys.
MANIFEST_BUDGET_BYTES = 200_000
#: Re-read the bucket's tags (exemption, time to live) every this many pages.
TAG_RECHECK_PAGES = 10
#: Seconds a page may take (list, Object Lock checks, delete, ledger writes): the run
#: stops when less than this is left.
PAGE_RESERVE_SECONDS = 20.0
#: A dry run re-surveys when its report is older than this.
DRY_RUN_RESURVEY = timedelta(hours=1)


class SweepStopped(RuntimeError):
    """The bucket's tags changed under the sweep (exempt, or its time to live changed)."""


@dataclass(frozen=True, slots=True)
class BucketRef:
    """The bucket, and what the audit trail and alerts say about it."""

    name: str
    resource: str  # the decision's target key
    account: str = ""
    project: str | None = None
    owners: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SweepSettings:
    scope: str
    usd_per_gb_month: Decimal
    dry_run: bool = True


@dataclass(frozen=True, slots=True)
class StepResult:
    phase: str
    detail: str
    deleted: Tally = field(default_factory=Tally)
    #: The latest complete survey or pass: what is in scope, and what would go.
    in_scope: Tally | None = None
    would_delete: Tally | None = None
    complete: bool = False
    errors: Mapping[str, str] = field(default_factory=dict)


def state_name(bucket: str) -> str:
    return f"s3sweep#{bucket}"


def _tally(raw: Any) -> Tally:
    if not raw:
        return Tally()
    return Tally(int(raw[0]), int(raw[1]))


def _raw(t: Tally) -> list[int]:
    return [t.objects, t.bytes]


def _fresh(fingerprint: str, phase: str, previous: Mapping[str, Any]) -> dict[str, Any]:
    """A new pass (or survey) after ``previous``: its own counts, the next pass id.

    What outlives a pass is carried: the confirmation that last unlocked the breaker
    (``confirm_used``), so that a tag left on the bucket cannot unlock a later trip.
    """
    return {
        "fingerprint": fingerprint,
        "phase": phase,
        "pass_id": int(previous.get("pass_id", 0)) + 1,
        "confirm_used": previous.get("confirm_used"),
        "prefix_index": 0,
        "start_after": "",
        "seen": [0, 0],
        "candidates": [0, 0],
        "deleted": [0, 0],
        "kept_locked": 0,
        "kept_changed": 0,
        "failed": 0,
        "batch_seq": 0,
        "backstop_due": phase == "delete",
    }


def encode_manifest(rows: Sequence[Sequence[Any]]) -> str:
    """A batch's keys, sizes and times as base64 zlib JSON: one audit item per batch."""
    text = json.dumps(list(rows), ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(zlib.compress(text.encode("utf-8", "surrogatepass"), 9)).decode()


def decode_manifest(blob: str) -> list[list[Any]]:
    rows: list[list[Any]] = json.loads(
        zlib.decompress(base64.b64decode(blob)).decode("utf-8", "surrogatepass")
    )
    return rows


def batches(objects: Sequence[StoredObject]) -> list[list[StoredObject]]:
    """At most 1,000 keys, and at most ``MANIFEST_BUDGET_BYTES`` of manifest, per batch."""
    out: list[list[StoredObject]] = []
    current: list[StoredObject] = []
    size = 0
    for obj in objects:
        row = len(obj.key.encode("utf-8", "surrogatepass")) + 64
        if current and (len(current) >= DELETE_LIMIT or size + row > MANIFEST_BUDGET_BYTES):
            out.append(current)
            current, size = [], 0
        current.append(obj)
        size += row
    if current:
        out.append(current)
    return out


class SweepService:
    def __init__(
        self,
        store: ObjectStore,
        state: StateStore,
        audit: AuditLog,
        notifier: Notifier | None,
        settings: SweepSettings,
    ) -> None:
        self._store = store
        self._state = state
        self._audit = audit
        self._notifier = notifier
        self._s = settings

    # -- state --------------------------------------------------------------------

    def load(self, bucket: str, config: SweepConfig) -> tuple[dict[str, Any], int]:
        """The bucket's state, started over (as a survey) if its configuration changed."""
        doc, version = self._state.get_state(self._s.scope, state_name(bucket))
        if doc.get("fingerprint") != config.fingerprint():
            return _fresh(config.fingerprint(), "survey", doc), version
        return doc, version

    def _save(self, bucket: str, doc: Mapping[str, Any], version: int) -> int:
        if not self._state.put_state(self._s.scope, state_name(bucket), doc, version):
            raise SweepStopped("another run changed this bucket's sweep state; stopping")
        return version + 1

    def report(self, bucket: str, config: SweepConfig) -> StepResult:
        """What the last complete survey (or pass) found, without any call to S3."""
        doc, _ = self.load(bucket, config)
        return self._result(doc, "")

    @staticmethod
    def _result(doc: Mapping[str, Any], detail: str, **extra: Any) -> StepResult:
        survey = doc.get("survey") or {}
        return StepResult(
            phase=str(doc.get("phase")),
            detail=detail,
            in_scope=_tally(survey["in_scope"]) if survey else None,
            would_delete=_tally(survey["would_delete"]) if survey else None,
            **extra,
        )

    # -- the survey (read-only: also what dry-run reports) --------------------------

    def survey(
        self, bucket: BucketRef, config: SweepConfig, now: datetime, budget: Budget
    ) -> StepResult:
        """Advance the bucket's survey as far as the budget allows; delete nothing."""
        now = require_utc(now)
        doc, version = self.load(bucket.name, config)
        if doc["phase"] == "ready" and self._s.dry_run:
            at = datetime.fromisoformat(str(doc["survey"]["at"]))
            if now - at >= DRY_RUN_RESURVEY:
                doc = {**_fresh(config.fingerprint(), "survey", doc),
                       "survey": doc["survey"]}  # fmt: skip
        if doc["phase"] != "survey":
            return self._result(doc, f"survey complete ({doc['phase']})", complete=True)
        return self._walk(bucket, config, now, budget, doc, version, deleting=False)

    # -- deletion -----------------------------------------------------------------

    def sweep(
        self,
        bucket: BucketRef,
        config: SweepConfig,
        now: datetime,
        budget: Budget,
        tags: Mapping[str, str],
    ) -> StepResult:
        """One run of deletion on a bucket the executor allowed: breaker, then pages."""
        now = require_utc(now)
        doc, version = self.load(bucket.name, config)
        phase = doc["phase"]
        raw = tags.get(Tags.CONFIRM_DELETE)
        if phase == "survey":
            return self._result(doc, "still surveying; nothing deleted")
        if phase == "ready":
            survey = doc["survey"]
            why = breaker_reason(_tally(survey["would_delete"]), _tally(survey["in_scope"]), config)
            confirmed = why is not None and confirms(
                raw, datetime.fromisoformat(str(survey["at"])), now, doc.get("confirm_used")
            )
            if why is not None and not confirmed:
                return self._trip(bucket, doc, version, now, why, _tally(survey["would_delete"]))
            doc = {
                **_fresh(config.fingerprint(), "delete", doc),
                "survey": survey,
                "last_total": survey["in_scope"],
                "confirmed": confirmed,
            }
            if confirmed and raw is not None:
                doc["confirm_used"] = confirmation_key(raw)  # spent: it unlocks this pass only
        elif phase == "tripped":
            trip = doc["trip"]
            tripped_at = datetime.fromisoformat(str(trip["at"]))
            if raw is None or not confirms(raw, tripped_at, now, doc.get("confirm_used")):
                return self._result(
                    doc,
                    f"breaker tripped at {trip['at']}: {trip['reason']}; waiting for "
                    f"{Tags.CONFIRM_DELETE}={trip_stamp(tripped_at)} (this trip's UTC time)",
                )
            doc = {
                **_fresh(config.fingerprint(), "delete", doc),
                "survey": doc.get("survey"),
                "last_total": doc.get("last_total") or [0, 0],
                "confirmed": True,
                "confirm_used": confirmation_key(raw),  # spent: it unlocks this pass only
            }
        notes: tuple[str, ...] = ()
        if doc.get("backstop_due"):
            notes = self._backstop(bucket.name, config)
            doc = {**doc, "backstop_due": False, "backstop_notes": list(notes)}
        return self._walk(bucket, config, now, budget, doc, version, deleting=True)

    def _trip(
        self,
        bucket: BucketRef,
        doc: Mapping[str, Any],
        version: int,
        now: datetime,
        why: str,
        would: Tally,
    ) -> StepResult:
        stamp = trip_stamp(now)
        tripped = {
            **doc,
            "phase": "tripped",
            "trip": {"at": now.isoformat(), "reason": why, "would_delete": _raw(would)},
        }
        self._save(bucket.name, tripped, version)
        usd = usd_per_month(would.bytes, self._s.usd_per_gb_month)
        if self._notifier is not None:
            self._notifier.publish(
                Alert(
                    alert_id=f"{AlertKind.ACTION_WARNING}/s3-breaker/{bucket.account or '-'}/"
                    f"{bucket.resource}/{stamp}",
                    kind=AlertKind.ACTION_WARNING,
                    project=bucket.project,
                    severity=AlertSeverity.WARNING,
                    title=f"CostGuard stopped before deleting in s3 bucket {bucket.name}",
                    summary=(
                        f"The stale-object sweep stopped: {why}. Nothing more is deleted "
                        f"until you confirm. It would delete {would.objects:,} objects "
                        f"({would.bytes:,} bytes, about ${cents(usd):,} a month)."
                    ),
                    at=now,
                    why=why,
                    next_steps=(
                        f"To let this pass go on, tag the bucket {Tags.CONFIRM_DELETE}="
                        f"{stamp} (this trip's UTC time; today's UTC date {now:%Y-%m-%d} "
                        f"works too unless it already confirmed an earlier trip). A "
                        f"confirmation is used up by the pass it lets go on.",
                        f"To keep everything, tag {Tags.EXEMPT}=true or remove {Tags.TTL}.",
                    ),
                    owners=bucket.owners,
                    facts={
                        "objects": f"{would.objects:,}",
                        "bytes": f"{would.bytes:,}",
                        "usd_per_month": str(cents(usd)),
                    },
                )
            )
        return self._result(
            tripped,
            f"breaker tripped: {why}; nothing more deleted until {Tags.CONFIRM_DELETE}={stamp}",
        )

    # -- the walk over pages ---------------------------------------------------------

    def _walk(
        self,
        bucket: BucketRef,
        config: SweepConfig,
        now: datetime,
        budget: Budget,
        doc: dict[str, Any],
        version: int,
        *,
        deleting: bool,
    ) -> StepResult:
        prefixes = config.swept_prefixes
        locked = self._store.object_lock(bucket.name)
        allowance = pass_allowance(_tally(doc.get("last_total")), config)
        run = Tally()
        errors: dict[str, str] = {}
        pages = 0
        while True:
            if budget.seconds_left() < PAGE_RESERVE_SECONDS:
                self._save(bucket.name, doc, version)
                return self._result(
                    doc, self._progress(doc, run, deleting, "continues next run"), deleted=run,
                    errors=errors,
                )  # fmt: skip
            if deleting and pages and pages % TAG_RECHECK_PAGES == 0:
                self._recheck(bucket.name, config, now)
            prefix = prefixes[int(doc["prefix_index"])]
            objects, more = self._store.list_page(bucket.name, prefix, str(doc["start_after"]))
            pages += 1
            in_scope = [o for o in objects if config.in_scope(o.key)]
            expired = [o for o in in_scope if is_candidate(o, config, now)]
            candidates, kept_locked = self._unlocked(bucket.name, expired, now, locked, budget)
            if candidates is None:  # ran out of time checking locks: redo this page
                self._save(bucket.name, doc, version)
                return self._result(
                    doc, self._progress(doc, run, deleting, "continues next run"), deleted=run,
                    errors=errors,
                )  # fmt: skip
            page = Tally().plus(len(in_scope), sum(o.size for o in in_scope))
            wanted = Tally().plus(len(candidates), sum(o.size for o in candidates))
            if deleting and not doc.get("confirmed"):
                after = _tally(doc["deleted"]).plus(wanted.objects, wanted.bytes)
                if after.objects > allowance.objects or after.bytes > allowance.bytes:
                    last = _tally(doc.get("last_total"))
                    why = breaker_reason(after, last, config) or (
                        f"this pass would delete {after.objects:,} objects, more than "
                        f"{config.breaker_pct} % of the {last.objects:,} the last pass counted"
                    )
                    return self._trip(bucket, doc, version, now, why, after)
            if deleting:
                for batch in batches(candidates):
                    doc["batch_seq"] = int(doc["batch_seq"]) + 1
                    result = self._delete(bucket, doc, batch, now)
                    done = {o.key: o for o in batch}
                    for key in result.deleted:
                        obj = done.get(key)
                        if obj is not None:
                            run = run.plus(1, obj.size)
                            doc["deleted"] = _raw(_tally(doc["deleted"]).plus(1, obj.size))
                    for key, code in result.errors.items():
                        errors[key] = code
                        if code == "PreconditionFailed":
                            doc["kept_changed"] = int(doc["kept_changed"]) + 1
                        else:
                            doc["failed"] = int(doc["failed"]) + 1
            doc["seen"] = _raw(_tally(doc["seen"]).plus(page.objects, page.bytes))
            doc["candidates"] = _raw(_tally(doc["candidates"]).plus(wanted.objects, wanted.bytes))
            doc["kept_locked"] = int(doc["kept_locked"]) + kept_locked
            if objects:
                doc["start_after"] = objects[-1].key
            if not more or not objects:
                if int(doc["prefix_index"]) + 1 < len(prefixes):
                    doc["prefix_index"] = int(doc["prefix_index"]) + 1
                    doc["start_after"] = ""
                else:
                    return self._finish(bucket, config, now, doc, version, run, errors, deleting)
            version = self._save(bucket.name, doc, version)

    def _finish(
        self,
        bucket: BucketRef,
        config: SweepConfig,
        now: datetime,
        doc: dict[str, Any],
        version: int,
        run: Tally,
        errors: dict[str, str],
        deleting: bool,
    ) -> StepResult:
        """A pass is complete: its counts become the next pass's baseline."""
        summary = self._progress(doc, run, deleting, "pass complete")
        seen = doc["seen"]
        survey = {"at": now.isoformat(), "in_scope": seen, "would_delete": doc["candidates"]}
        if deleting:
            nxt = {
                **_fresh(config.fingerprint(), "delete", doc),
                "survey": doc.get("survey"),
                "last_total": seen,
                "confirmed": False,
            }
        else:
            nxt = {**doc, "phase": "ready", "survey": survey}
        self._save(bucket.name, nxt, version)
        return StepResult(
            phase=str(nxt["phase"]),
            detail=summary,
            deleted=run,
            in_scope=_tally(seen),
            would_delete=_tally(doc["candidates"]),
            complete=True,
            errors=errors,
        )

    def _progress(self, doc: Mapping[str, Any], run: Tally, deleting: bool, tail: str) -> str:
        seen, cand = _tally(doc["seen"]), _tally(doc["candidates"])
        usd = cents(usd_per_month(run.bytes if deleting else cand.bytes, self._s.usd_per_gb_month))
        kept = int(doc["kept_locked"])
        locked = f"; {kept:,} kept under Object Lock" if kept else ""
        changed = int(doc.get("kept_changed", 0))
        changed_text = f"; {changed:,} kept, changed since listed" if changed else ""
        failed = int(doc.get("failed", 0))
        failed_text = f"; {failed:,} could not be deleted" if failed else ""
        if deleting:
            head = f"deleted {run.objects:,} objects ({run.bytes:,} bytes, ${usd:,}/month) this run"
        else:
            head = (
                f"would delete {cand.objects:,} of {seen.objects:,} objects in scope "
                f"({cand.bytes:,} bytes, ${usd:,}/month)"
            )
        notes = "".join(f"; backstop: {n}" for n in doc.get("backstop_notes") or ())
        return f"{head}{locked}{changed_text}{failed_text}{notes}; {tail}"

    def _unlocked(
        self,
        bucket: str,
        expired: list[StoredObject],
        now: datetime,
        locked: bool,
        budget: Budget,
    ) -> tuple[list[StoredObject] | None, int]:
        """Drop objects under retention or legal hold; one HEAD each, in locked buckets only."""
        if not locked:
            return expired, 0
        free: list[StoredObject] = []
        kept = 0
        for obj in expired:
            if budget.seconds_left() < PAGE_RESERVE_SECONDS / 2:
                return None, 0
            lock = self._store.lock_of(bucket, obj)
            if lock is None:
                continue  # gone since listed
            if lock.protects(now):
                kept += 1
            else:
                free.append(obj)
        return free, kept

    def _recheck(self, bucket: str, config: SweepConfig, now: datetime) -> None:
        tags = self._store.bucket_tags(bucket)
        if tags is None:
            raise SweepStopped(f"bucket {bucket} is gone")
        exempt = tags.get(Tags.EXEMPT)
        if exempt is not None:
            parsed = parse_exempt(exempt)
            if isinstance(parsed, str) or (parsed is not None and parsed.active(now)):
                raise SweepStopped(f"bucket {bucket} was exempted during the sweep")
        ttl = parse_ttl(tags.get(Tags.TTL, ""))
        if ttl != config.ttl:
            raise SweepStopped(f"bucket {bucket}'s {Tags.TTL} changed during the sweep")

    def _delete(
        self, bucket: BucketRef, doc: Mapping[str, Any], batch: list[StoredObject], now: datetime
    ) -> DeleteResult:
        batch_id = f"{doc['pass_id']}-{doc['batch_seq']}"
        rows: list[list[Any]] = [[o.key, o.size, o.last_modified.isoformat()] for o in batch]
        size = sum(o.size for o in batch)
        base = {
            "account": bucket.account,
            "project": bucket.project,
            "owners": list(bucket.owners),
            "bucket": bucket.name,
            "batch": batch_id,
            "objects": len(batch),
            "bytes": size,
            "reason": "older than the bucket's costguard:ttl",
            "dry_run": False,
            "usd_per_month_saved": str(cents(usd_per_month(size, self._s.usd_per_gb_month))),
            "manifest": encode_manifest(rows),
        }
        self._audit.audit(
            AuditEvent(
                scope=self._s.scope,
                at=now,
                event_id=f"deleting/s3/{bucket.account or '-'}/{bucket.name}/{batch_id}",
                action="delete-objects",
                resource=bucket.resource,
                outcome="deleting",
                details=base,
            )
        )
        result = self._store.delete(bucket.name, batch)
        gone = set(result.deleted)
        deleted_rows = [r for r in rows if r[0] in gone]
        self._audit.audit(
            AuditEvent(
                scope=self._s.scope,
                at=now,
                event_id=f"deleted/s3/{bucket.account or '-'}/{bucket.name}/{batch_id}",
                action="delete-objects",
                resource=bucket.resource,
                outcome="deleted",
                details={
                    **base,
                    "objects": len(deleted_rows),
                    "bytes": sum(int(r[1]) for r in deleted_rows),
                    "manifest": encode_manifest(deleted_rows),
                    "errors": dict(sorted(result.errors.items())[:100]),
                },
            )
        )
        return result

    # -- the lifecycle backstop -------------------------------------------------------

    def _backstop(self, bucket: str, config: SweepConfig) -> tuple[str, ...]:
        """Merge CostGuard's rule into the bucket's lifecycle; report drift and skips."""
        wanted = backstop(config, self._store.object_lock(bucket))
        existing = self._store.lifecycle(bucket)
        merged = merge_lifecycle(existing, wanted.rules)
        if merged.changed:
            self._store.put_lifecycle(bucket, merged.rules)
        return (*merged.drift, *wanted.skipped)

    def backstop_report(self, bucket: str, config: SweepConfig) -> tuple[str, ...]:
        return self._backstop(bucket, config)

    def remove_backstop(self, bucket: str) -> bool:
        """Take CostGuard's own lifecycle rules off the bucket; True if there were any.

        S3 applies a lifecycle rule with no executor, exemption or ``costguard:ttl`` check,
        so the rule must not outlive the warning it belongs to: it goes when the warning
        is withdrawn (exempt, ``costguard:ttl`` removed or malformed) or replaced (a new
        time to live, prefixes or keep prefix), and the next deletion pass after a new
        warning installs the rule for the new configuration. Read-modify-write: every
        rule CostGuard did not write is kept as it is; the whole configuration is deleted
        only when CostGuard's rules were all of it. Never called in dry-run (the executor
        neither warns nor withdraws there).
        """
        merged = merge_lifecycle(self._store.lifecycle(bucket), ())
        if not merged.changed:
            return False
        self._store.put_lifecycle(bucket, merged.rules)
        # A pass under way installed its rule at its start: the next deletion run (after a
        # new warning) installs it again. Best effort: a conflicting write is another run's
        # progress, and the next pass installs the rule in any case.
        doc, version = self._state.get_state(self._s.scope, state_name(bucket))
        if doc and not doc.get("backstop_due"):
            self._state.put_state(
                self._s.scope, state_name(bucket), {**doc, "backstop_due": True}, version
            )
        return True
