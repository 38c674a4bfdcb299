"""Sweep one bucket's stale objects: survey, then delete to the hour, in resumable passes.

The executor decides *whether* CostGuard may act on a bucket (scope, exemption, the
warning and its grace period, one run at a time); this service does the work, one page
of at most 1,000 keys at a time, and keeps its place in the ledger so that a bucket of
millions of objects is swept over several runs with no object deleted twice or skipped.

Each bucket moves through phases, kept in one versioned state document:

``survey``   list everything in scope and count what would go; delete nothing. Its
             figures are the warning's (and dry-run's) report.
``ready``    the survey, or the last pass, is complete: the next deletion run starts a pass.
``count``    a pass begins by counting, over every prefix and page, what is in scope and
             what is older than the pass's cutoff (its time less the time to live, fixed
             when it starts); it deletes nothing. Then the breaker judges the whole pass
             against that one count: more than its share of what the count found in
             scope (or more than its byte limit) goes ``tripped``; otherwise ``delete``.
``delete``   delete what the count approved: objects older than the same cutoff, and
             never more than the count's total. A pass whose count ended in this run
             deletes the keys it holds (up to ``HELD_LIMIT``); otherwise it lists the
             pages again.
``tripped``  nothing is deleted, and CostGuard's lifecycle rule is off the bucket, until
             the owner tags ``costguard:confirm-delete`` with the trip's stamp (its UTC
             time to the minute, ``2026-11-05T04:00Z``, as the alert prints it) or a UTC
             date on or after the trip (up to tomorrow); the confirmed pass then deletes
             what the trip counted (the same cutoff, no more). A confirmation is spent by
             the pass it unlocks (kept as ``confirm_used``): a later trip, even the same
             day, needs its own stamp (or a later date), never the tag left from the last.

The backstop lifecycle rule is on the bucket exactly while the sweep is *allowed*: from a
pass the breaker allowed (or the owner confirmed) until a trip, a new configuration, or a
stand-down (:meth:`SweepService.stand_down`, which the executor calls wherever the
decision does not act: dry-run, exempt, no valid ``costguard:ttl``, a new warning, the
grace period). ``backstop_on`` says a rule of CostGuard's may be on the bucket; it is set
before the rule is written and cleared only after it is gone, so that a stand-down with
nothing to withdraw makes no call. ``backstop_pending`` says a live pass is writing its
rule: a stand-down that overlaps it looks (one read) but leaves the record saying "may
be on", and the pass, finding the state changed under it, takes its rule off again.

A change of the bucket's time to live, prefixes or keep prefix (its fingerprint) starts
over with a survey, and the executor warns again.

A page is processed whole or not at all: the position advances only in the state write
that also adds the page's counts, after its deletions. A run that stops (time, crash)
re-lists that page; deleted objects are no longer listed, so nothing is deleted twice,
and nothing is skipped; what a page's batches deleted is saved between them (not the
position), so a run that fails after a batch still has it on record. Each batch's
manifest is audited *before* its ``DeleteObjects`` (``deleting``) and after it
(``deleted``, with per-key errors). What a pass saved is counted once, by the executor's
record of the run (``acted``), from the bytes deleted: those of the run, and those a run
that failed left uncounted (``unsaved``, zeroed by the run that counts them); a batch's
record is its manifest, not a saving.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
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
    backstop_safe_until,
    breaker_reason,
    confirmation_key,
    confirms,
    merge_lifecycle,
    objects,
    trip_stamp,
    usd_per_month,
)
from costguard.domain.tags import Tags, parse_exempt, parse_ttl
from costguard.domain.windows import before
from costguard.ports import (
    AuditEvent,
    AuditLog,
    DeleteResult,
    Notifier,
    ObjectStore,
    StateStore,
    TimeLeft,
)

#: DeleteObjects takes at most 1,000 keys.
DELETE_LIMIT = 1000
#: A batch's manifest (keys as UTF-8, plus sizes and times) stays under this before
#: compression, so that one audit item per batch fits DynamoDB's 400 KB even for
#: incompressible 1,024-byte keys.
MANIFEST_BUDGET_BYTES = 200_000
#: Re-read the bucket's tags (exemption, time to live) every this many pages (or batches).
TAG_RECHECK_PAGES = 10
#: Seconds a page may take (list, Object Lock checks, delete, ledger writes): the run
#: stops when less than this is left.
PAGE_RESERVE_SECONDS = 20.0
#: A dry run re-surveys when its report is older than this.
DRY_RUN_RESURVEY = timedelta(hours=1)
#: Keys a pass holds from its count to its deletes within one run (a few tens of MB at
#: most): a larger pass, or one whose count spanned runs, lists its pages again.
HELD_LIMIT = 100_000
#: The phases of a pass under way: a stand-down abandons them (the next pass counts anew).
PASS_PHASES = frozenset({"count", "delete"})
#: Attempts at a state write that races another run.
STATE_ATTEMPTS = 5


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
    #: What this run counts as saved: what it deleted, and what earlier runs deleted but
    #: could not count (they failed after deleting). Each byte is counted by one run.
    saved: Tally = field(default_factory=Tally)
    #: The latest complete survey or pass: what is in scope, and what would go.
    in_scope: Tally | None = None
    would_delete: Tally | None = None
    complete: bool = False
    errors: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Run:
    """What one run of :meth:`SweepService.survey` or :meth:`SweepService.sweep` works with."""

    bucket: BucketRef
    config: SweepConfig
    now: datetime
    time_left: TimeLeft


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
    (``confirm_used``), so that a tag left on the bucket cannot unlock a later trip; what
    may be on the bucket (``backstop_on``: a fact about the bucket, whatever its
    configuration; unknown for state kept before it was recorded); and, for the same
    configuration only, whether the sweep is allowed (the breaker's last word).
    """
    return {
        "fingerprint": fingerprint,
        "phase": phase,
        "pass_id": int(previous.get("pass_id", 0)) + 1,
        "confirm_used": previous.get("confirm_used"),
        "backstop_on": previous.get("backstop_on") if previous else False,
        "backstop_pending": bool(previous.get("backstop_pending")),
        "backstop_cutoff": previous.get("backstop_cutoff"),
        "allowed": bool(previous.get("allowed")) and previous.get("fingerprint") == fingerprint,
        "prefix_index": 0,
        "start_after": "",
        "seen": [0, 0],
        "candidates": [0, 0],
        "deleted": [0, 0],
        # Deleted, and not yet counted by a run that returned (a run that fails after
        # deleting leaves its bytes here for the next): kept across passes, until counted.
        "unsaved": previous.get("unsaved") or [0, 0],
        "taken": [0, 0],
        "kept_locked": 0,
        "kept_changed": 0,
        "failed": 0,
        "deferred": 0,
        "batch_seq": 0,
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
        self, bucket: BucketRef, config: SweepConfig, now: datetime, time_left: TimeLeft
    ) -> StepResult:
        """Advance the bucket's survey as far as the time left allows; delete nothing."""
        now = require_utc(now)
        doc, version = self.load(bucket.name, config)
        if doc["phase"] == "ready" and self._s.dry_run:
            at = datetime.fromisoformat(str(doc["survey"]["at"]))
            if now - at >= DRY_RUN_RESURVEY:
                doc = {**_fresh(config.fingerprint(), "survey", doc),
                       "survey": doc["survey"]}  # fmt: skip
        if doc["phase"] != "survey":
            return self._result(doc, f"survey complete ({doc['phase']})", complete=True)
        return self._walk(_Run(bucket, config, now, time_left), doc, version, stage="survey")

    # -- deletion -----------------------------------------------------------------

    def sweep(
        self,
        bucket: BucketRef,
        config: SweepConfig,
        now: datetime,
        time_left: TimeLeft,
        tags: Mapping[str, str],
    ) -> StepResult:
        """One run of deletion on a bucket the executor allowed: count, judge, delete.

        Every run also puts the backstop in step with the sweep (on while allowed, off
        while tripped), the one path on which the decision acts.
        """
        now = require_utc(now)
        doc, version = self.load(bucket.name, config)
        if doc.get("backstop_on") is not False and _unsafe(doc.get("backstop_cutoff"), now, config):
            # S3 could soon reach objects the pass that allowed the rule did not judge (a
            # pass spanning more than the margin): off until a newer pass is allowed.
            doc, version = self._settle(bucket.name, config, doc, version, now, cutoff=None)
        phase = doc["phase"]
        if phase == "survey":
            return self._result(doc, "still surveying; nothing deleted")
        if phase == "tripped":
            return self._tripped(_Run(bucket, config, now, time_left), doc, version, tags)
        if phase == "delete" and "approved" not in doc:
            phase = "ready"  # a pass begun before passes were counted first: count it anew
        if phase == "ready":
            doc = {
                **_fresh(config.fingerprint(), "count", doc),
                "survey": doc.get("survey"),
                "cutoff": config.cutoff(now).isoformat(),
            }
            phase = "count"
        stage = "count" if phase == "count" else "delete"
        # The confirmation on the bucket as this run found it: a trip this run records it,
        # so that a value written before the trip (today's date) cannot confirm it.
        seen = tags.get(Tags.CONFIRM_DELETE)
        doc = {**doc, "confirm_seen": confirmation_key(seen) if seen is not None else None}
        return self._walk(_Run(bucket, config, now, time_left), doc, version, stage=stage)

    def _tripped(
        self, r: _Run, doc: dict[str, Any], version: int, tags: Mapping[str, str]
    ) -> StepResult:
        """A trip waits for its confirmation, its rule off; confirmed, its pass goes on."""
        trip = doc["trip"]
        tripped_at = datetime.fromisoformat(str(trip["at"]))
        raw = tags.get(Tags.CONFIRM_DELETE)
        before = trip.get("confirm_before")  # on the bucket already when it tripped
        if (
            raw is None
            or (before is not None and confirmation_key(raw) == before)
            or not confirms(raw, tripped_at, r.now, doc.get("confirm_used"))
        ):
            doc, version = self._settle(r.bucket.name, r.config, doc, version, r.now, cutoff=None)
            if not trip.get("alerted", True):  # the run that tripped failed before telling
                doc, version = self._alert_trip(r.bucket, doc, version)
            return self._result(
                doc,
                f"breaker tripped at {trip['at']}: {trip['reason']}; nothing deleted, "
                f"waiting for {Tags.CONFIRM_DELETE}={trip_stamp(tripped_at)} (this trip's "
                f"UTC time)",
                complete=True,
            )
        doc = {
            **_fresh(r.config.fingerprint(), "delete", doc),
            "survey": doc.get("survey"),
            # What the trip counted, as its alert told the owner: the same cutoff, no more.
            "cutoff": trip.get("cutoff") or r.config.cutoff(tripped_at).isoformat(),
            "approved": trip["would_delete"],
            "counted": {"in_scope": trip.get("in_scope"), "would_delete": trip["would_delete"]},
            "confirmed": True,
            "allowed": True,
            "confirm_used": confirmation_key(raw),  # spent: it unlocks this pass only
        }
        version = self._save(r.bucket.name, doc, version)
        doc, version = self._settle(
            r.bucket.name, r.config, doc, version, r.now, cutoff=doc["cutoff"]
        )
        return self._walk(r, doc, version, stage="delete")

    def _judge(
        self,
        r: _Run,
        doc: dict[str, Any],
        version: int,
        held: list[tuple[int, StoredObject]] | None,
    ) -> StepResult:
        """The whole pass is counted: the breaker decides it before its first delete."""
        would, in_scope = _tally(doc["candidates"]), _tally(doc["seen"])
        why = breaker_reason(would, in_scope, r.config)
        if why is not None:
            return self._trip(r, doc, version, why, would, in_scope)
        doc = {
            **doc,
            "phase": "delete",
            "approved": _raw(would),
            "counted": {"in_scope": _raw(in_scope), "would_delete": _raw(would)},
            "allowed": True,
            "prefix_index": 0,
            "start_after": "",
        }
        version = self._save(r.bucket.name, doc, version)
        doc, version = self._settle(
            r.bucket.name, r.config, doc, version, r.now, cutoff=doc["cutoff"]
        )
        if would.objects == 0:
            return self._finish(r.bucket, r.now, doc, version, Tally(), {})
        if held is not None:
            return self._delete_held(r, doc, version, held)
        return self._walk(r, doc, version, stage="delete")

    def _trip(
        self, r: _Run, doc: dict[str, Any], version: int, why: str, would: Tally, in_scope: Tally
    ) -> StepResult:
        """Nothing of the pass is deleted; CostGuard's rule goes off; the owner is told."""
        tripped = {
            **doc,
            "phase": "tripped",
            "allowed": False,
            "trip": {
                "at": r.now.isoformat(),
                "reason": why,
                "would_delete": _raw(would),
                "in_scope": _raw(in_scope),
                "cutoff": doc["cutoff"],
                "alerted": False,
                "confirm_before": doc.get("confirm_seen"),
            },
        }
        version = self._save(r.bucket.name, tripped, version)
        tripped, version = self._settle(
            r.bucket.name, r.config, tripped, version, r.now, cutoff=None
        )
        tripped, version = self._alert_trip(r.bucket, tripped, version)
        return self._result(
            tripped,
            f"breaker tripped: {why}; nothing deleted in this pass until "
            f"{Tags.CONFIRM_DELETE}={trip_stamp(r.now)}",
            complete=True,
        )

    def _alert_trip(
        self, bucket: BucketRef, doc: dict[str, Any], version: int
    ) -> tuple[dict[str, Any], int]:
        trip = doc["trip"]
        at = datetime.fromisoformat(str(trip["at"]))
        stamp = trip_stamp(at)
        would, in_scope = _tally(trip["would_delete"]), _tally(trip.get("in_scope"))
        usd = usd_per_month(would.bytes, self._s.usd_per_gb_month)
        why = str(trip["reason"])
        # The reason already gives the count (or the bytes) that tripped: say the rest only,
        # never "... 5 of 5 objects in scope, more than 50 %. It would delete 5 of 5 ...".
        counted = f"{would.objects:,} of {in_scope.objects:,} objects in scope"
        size = f"{would.bytes:,} bytes"
        money = f"about ${cents(usd):,} a month"
        extra = ", ".join(part for part in (counted, size) if part not in why) or "in all"
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
                        f"The stale-object sweep stopped before deleting anything in this "
                        f"pass: {why} ({extra}, {money}). Nothing is deleted until you "
                        f"confirm, and CostGuard's lifecycle rule is off the bucket until then."
                    ),
                    at=at,
                    why=why,
                    next_steps=(
                        f"To let this pass go on, tag the bucket {Tags.CONFIRM_DELETE}="
                        f"{stamp} (this trip's UTC time; today's UTC date {at:%Y-%m-%d} "
                        f"works too unless it already confirmed an earlier trip). A "
                        f"confirmation is used up by the pass it lets go on, which deletes "
                        f"what this trip counted and no more.",
                        f"To keep everything, tag {Tags.EXEMPT}=true or remove {Tags.TTL}.",
                    ),
                    owners=bucket.owners,
                    facts={
                        "objects": f"{would.objects:,}",
                        "objects_in_scope": f"{in_scope.objects:,}",
                        "bytes": f"{would.bytes:,}",
                        "usd_per_month": str(cents(usd)),
                    },
                )
            )
        doc = {**doc, "trip": {**trip, "alerted": True}}
        return doc, self._save(bucket.name, doc, version)

    # -- the walk over pages ---------------------------------------------------------

    def _walk(self, r: _Run, doc: dict[str, Any], version: int, *, stage: str) -> StepResult:
        """List a stage's pages from its saved place: a survey and a count only count;
        a delete stage deletes what its count approved. Each page is saved whole."""
        prefixes = r.config.swept_prefixes
        locked = self._store.object_lock(r.bucket.name)
        deleting = stage == "delete"
        cutoff = (
            r.config.cutoff(r.now)
            if stage == "survey"
            else datetime.fromisoformat(str(doc["cutoff"]))
        )
        # A count begun in this run holds its candidates for its deletes (no second listing).
        held: list[tuple[int, StoredObject]] | None = (
            [] if stage == "count" and not doc["start_after"] and not doc["prefix_index"] else None
        )
        run = Tally()
        errors: dict[str, str] = {}
        pages = 0

        def checkpoint() -> None:  # between a page's batches: what went is on record
            nonlocal version
            version = self._save(r.bucket.name, doc, version)

        while True:
            if r.time_left.seconds_left() < PAGE_RESERVE_SECONDS:
                return self._pause(r.bucket, doc, version, run, stage, errors)
            if deleting and pages and pages % TAG_RECHECK_PAGES == 0:
                self._recheck(r.bucket.name, r.config, r.now)
            index = int(doc["prefix_index"])
            objects, more = self._store.list_page(
                r.bucket.name, prefixes[index], str(doc["start_after"])
            )
            pages += 1
            in_scope = [o for o in objects if r.config.in_scope(o.key)]
            expired = [o for o in in_scope if o.last_modified < cutoff]
            candidates, kept_locked = self._unlocked(
                r.bucket.name, expired, r.now, locked, r.time_left
            )
            if candidates is None:  # ran out of time checking locks: redo this page
                return self._pause(r.bucket, doc, version, run, stage, errors)
            if deleting:
                run = self._delete_all(r, doc, candidates, run, errors, checkpoint)
            else:
                doc["seen"] = _raw(
                    _tally(doc["seen"]).plus(len(in_scope), sum(o.size for o in in_scope))
                )
                doc["candidates"] = _raw(
                    _tally(doc["candidates"]).plus(len(candidates), sum(o.size for o in candidates))
                )
                if held is not None:
                    held.extend((index, o) for o in candidates)
                    if len(held) > HELD_LIMIT:
                        held = None
            doc["kept_locked"] = int(doc["kept_locked"]) + kept_locked
            if objects:
                doc["start_after"] = objects[-1].key
            if not more or not objects:
                if index + 1 < len(prefixes):
                    doc["prefix_index"] = index + 1
                    doc["start_after"] = ""
                elif stage == "survey":
                    return self._surveyed(r.now, doc, version, r.bucket)
                elif stage == "count":
                    return self._judge(r, doc, version, held)
                else:
                    return self._finish(r.bucket, r.now, doc, version, run, errors)
            version = self._save(r.bucket.name, doc, version)

    def _delete_held(
        self, r: _Run, doc: dict[str, Any], version: int, held: list[tuple[int, StoredObject]]
    ) -> StepResult:
        """Delete the candidates the count held, batch by batch, each batch saved as the
        place a listing would resume from (its last key), should the run stop."""
        run = Tally()
        errors: dict[str, str] = {}
        done = 0
        for n, batch in enumerate(batches([o for _, o in held])):
            if r.time_left.seconds_left() < PAGE_RESERVE_SECONDS:
                return self._pause(r.bucket, doc, version, run, "delete", errors)
            if n and n % TAG_RECHECK_PAGES == 0:
                self._recheck(r.bucket.name, r.config, r.now)
            run = self._delete_all(r, doc, batch, run, errors, lambda: None)
            done += len(batch)
            index, last = held[done - 1]
            doc["prefix_index"], doc["start_after"] = index, last.key
            version = self._save(r.bucket.name, doc, version)
        return self._finish(r.bucket, r.now, doc, version, run, errors)

    def _delete_all(
        self,
        r: _Run,
        doc: dict[str, Any],
        objects: list[StoredObject],
        run: Tally,
        errors: dict[str, str],
        checkpoint: Callable[[], None],
    ) -> Tally:
        """Delete ``objects`` (within what the count approved) batch by batch; between two
        batches ``checkpoint`` saves the state, so that what a failing run deleted before
        its failure is counted (``unsaved``) and never more than approved is taken."""
        first = True
        for whole in batches(objects):
            if not first:
                checkpoint()  # before this batch is taken from what the count approved
            batch = _within(doc, whole)
            if not batch:
                continue
            first = False
            doc["batch_seq"] = int(doc["batch_seq"]) + 1
            result = self._delete_batch(r.bucket, doc, batch, r.now)
            done = {o.key: o for o in batch}
            for key in result.deleted:
                obj = done.get(key)
                if obj is not None:
                    run = run.plus(1, obj.size)
                    doc["deleted"] = _raw(_tally(doc["deleted"]).plus(1, obj.size))
                    doc["unsaved"] = _raw(_tally(doc.get("unsaved")).plus(1, obj.size))
            for key, code in result.errors.items():
                errors[key] = code
                if code == "PreconditionFailed":
                    doc["kept_changed"] = int(doc["kept_changed"]) + 1
                else:
                    doc["failed"] = int(doc["failed"]) + 1
        return run

    def _pause(
        self,
        bucket: BucketRef,
        doc: dict[str, Any],
        version: int,
        run: Tally,
        stage: str,
        errors: dict[str, str],
    ) -> StepResult:
        """Out of time: the place is saved (as of the last whole page); the next run goes on."""
        summary = self._progress(doc, run, stage, "continues next run")
        saved = self._count(doc, run, stage)
        self._save(bucket.name, doc, version)
        return self._result(
            doc, _with_earlier(summary, saved, run), deleted=run, saved=saved, errors=errors
        )

    @staticmethod
    def _count(doc: dict[str, Any], run: Tally, stage: str) -> Tally:
        """What this run counts as saved (``unsaved``, then zeroed in the state it saves).

        A survey deletes nothing and counts nothing; any deletion run counts what is
        waiting, its own deletions and those of a run that failed before counting them.
        """
        if stage == "survey":
            return Tally()
        saved = _tally(doc.get("unsaved"))
        doc["unsaved"] = [0, 0]
        return saved

    def _surveyed(
        self, now: datetime, doc: dict[str, Any], version: int, bucket: BucketRef
    ) -> StepResult:
        """The survey is complete: its figures are the warning's (and dry-run's) report."""
        summary = self._progress(doc, Tally(), "survey", "survey complete")
        seen, cand = doc["seen"], doc["candidates"]
        nxt = {
            **doc,
            "phase": "ready",
            "survey": {"at": now.isoformat(), "in_scope": seen, "would_delete": cand},
        }
        self._save(bucket.name, nxt, version)
        return StepResult(
            phase="ready",
            detail=summary,
            in_scope=_tally(seen),
            would_delete=_tally(cand),
            complete=True,
        )

    def _finish(
        self,
        bucket: BucketRef,
        now: datetime,
        doc: dict[str, Any],
        version: int,
        run: Tally,
        errors: dict[str, str],
    ) -> StepResult:
        """A pass is complete: the next run starts the next one with a count of its own."""
        summary = self._progress(doc, run, "delete", "pass complete")
        saved = self._count(doc, run, "delete")
        counted = doc.get("counted") or {}
        nxt = {**doc, "phase": "ready", "last_pass": {"at": now.isoformat(), **counted}}
        self._save(bucket.name, nxt, version)
        return StepResult(
            phase="ready",
            detail=_with_earlier(summary, saved, run),
            deleted=run,
            saved=saved,
            in_scope=_tally(counted.get("in_scope")),
            would_delete=_tally(counted.get("would_delete")),
            complete=True,
            errors=errors,
        )

    def _progress(self, doc: Mapping[str, Any], run: Tally, stage: str, tail: str) -> str:
        seen, cand = _tally(doc["seen"]), _tally(doc["candidates"])
        kept = (
            (int(doc["kept_locked"]), "kept under Object Lock"),
            (int(doc.get("kept_changed", 0)), "kept, changed since listed"),
            (int(doc.get("failed", 0)), "could not be deleted"),
            (
                int(doc.get("deferred", 0)),
                "past the TTL but beyond what the count approved, left for the next pass",
            ),
        )
        counts = "".join(f"; {n:,} {what}" for n, what in kept if n)
        if stage == "delete":
            usd = cents(usd_per_month(run.bytes, self._s.usd_per_gb_month))
            approved = _tally(doc.get("approved"))
            head = (
                f"deleted {objects(run.objects)} ({run.bytes:,} bytes, ${usd:,}/month) this "
                f"run, of {approved.objects:,} the pass counted"
            )
        else:
            usd = cents(usd_per_month(cand.bytes, self._s.usd_per_gb_month))
            verb = "would delete" if stage == "survey" else "counting: the pass would delete"
            head = (
                f"{verb} {cand.objects:,} of {seen.objects:,} objects in scope "
                f"({cand.bytes:,} bytes, ${usd:,}/month)"
            )
        notes = "".join(f"; backstop: {n}" for n in doc.get("backstop_notes") or ())
        return f"{head}{counts}{notes}; {tail}"

    def _unlocked(
        self,
        bucket: str,
        expired: list[StoredObject],
        now: datetime,
        locked: bool,
        time_left: TimeLeft,
    ) -> tuple[list[StoredObject] | None, int]:
        """Drop objects under retention or legal hold; one HEAD each, in locked buckets only."""
        if not locked:
            return expired, 0
        free: list[StoredObject] = []
        kept = 0
        for obj in expired:
            if time_left.seconds_left() < PAGE_RESERVE_SECONDS / 2:
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

    def _delete_batch(
        self, bucket: BucketRef, doc: Mapping[str, Any], batch: list[StoredObject], now: datetime
    ) -> DeleteResult:
        batch_id = f"{doc['pass_id']}-{doc['batch_seq']}"
        rows: list[list[Any]] = [[o.key, o.size, o.last_modified.isoformat()] for o in batch]
        base = {
            "account": bucket.account,
            "project": bucket.project,
            "owners": list(bucket.owners),
            "bucket": bucket.name,
            "batch": batch_id,
            "objects": len(batch),
            "bytes": sum(o.size for o in batch),
            "reason": "older than the bucket's costguard:ttl",
            "dry_run": False,
            # No saving here: the pass's run record (``acted``) counts what it deleted.
            "manifest": encode_manifest(rows),
        }

        def audit(outcome: str, details: dict[str, Any]) -> None:
            self._audit.audit(
                AuditEvent(
                    scope=self._s.scope,
                    at=now,
                    event_id=f"{outcome}/s3/{bucket.account or '-'}/{bucket.name}/{batch_id}",
                    action="delete-objects",
                    resource=bucket.resource,
                    outcome=outcome,
                    details=details,
                )
            )

        audit("deleting", base)
        result = self._store.delete(bucket.name, batch)
        gone = set(result.deleted)
        deleted_rows = [r for r in rows if r[0] in gone]
        audit(
            "deleted",
            {
                **base,
                "objects": len(deleted_rows),
                "bytes": sum(int(r[1]) for r in deleted_rows),
                "manifest": encode_manifest(deleted_rows),
                "errors": dict(sorted(result.errors.items())[:100]),
            },
        )
        return result

    # -- the lifecycle backstop -------------------------------------------------------

    def _settle(
        self,
        bucket: str,
        config: SweepConfig,
        doc: dict[str, Any],
        version: int,
        now: datetime,
        *,
        cutoff: str | None,
    ) -> tuple[dict[str, Any], int]:
        """Put CostGuard's rule in step with the sweep: on while it is allowed, else off.

        Allowed means: by the breaker, for the pass of ``cutoff`` (None: no pass allows
        the rule now), and only until S3's rule could reach an object that pass did not
        judge (:func:`backstop_safe_until`); that cutoff is kept (``backstop_cutoff``) and
        checked, with no call, at the start of every run.

        Read-modify-write: every rule CostGuard did not write is kept as it is, and drift
        is reported. Only a live pass (one at a time, under the executor's claim) calls
        this. The intent (``backstop_pending``) is saved before the rule is written and
        cleared after it, each in a state write that fails if another run changed the
        state since; should the second fail (a stand-down came in between), the rule
        comes off again (:meth:`_undo_install`). So "off" is recorded only by a run that
        knows no rule of CostGuard's is on the bucket or on its way.
        """
        wanted = bool(doc.get("allowed")) and doc.get("phase") != "tripped"
        skipped: list[str] = []
        if wanted and _unsafe(cutoff, now, config):
            wanted = False
            skipped.append(
                "off until a newer pass is allowed: S3's rule could soon reach objects that "
                "came due after this pass began"
            )
        plan = backstop(config, self._store.object_lock(bucket)) if wanted else None
        rules = plan.rules if plan is not None else ()
        skipped += list(plan.skipped) if plan is not None else []
        if not rules and doc.get("backstop_on") is False and not doc.get("backstop_pending"):
            return {**doc, "backstop_notes": skipped}, version  # none wanted, none there
        current = self._store.lifecycle(bucket)
        merged = merge_lifecycle(current.rules, rules)
        installing = merged.changed and bool(rules)
        if installing:
            doc = {**doc, "backstop_on": True, "backstop_pending": True}
            version = self._save(bucket, doc, version)
        if merged.changed:
            self._store.put_lifecycle(bucket, replace(current, rules=merged.rules))
        notes = [*merged.drift, *skipped]
        if not wanted and merged.changed:
            notes.append("CostGuard's lifecycle rule withdrawn")
        doc = {
            **doc,
            "backstop_notes": notes,
            "backstop_on": bool(rules),
            "backstop_pending": False,
            "backstop_cutoff": cutoff if rules else None,
        }
        try:
            return doc, self._save(bucket, doc, version)
        except SweepStopped:
            if installing:
                self._undo_install(bucket)
            raise

    def _undo_install(self, bucket: str) -> None:
        """This run wrote CostGuard's rule, then found the state changed by another run (a
        stand-down that did not see the rule yet): unless the state still allows the
        sweep, the rule comes off again, and only then is "off" recorded."""
        for _ in range(STATE_ATTEMPTS):
            doc, version = self._state.get_state(self._s.scope, state_name(bucket))
            if doc.get("allowed") and doc.get("phase") != "tripped":
                return  # still allowed: the rule may stay, and the record says it may be on
            self._withdraw(bucket)
            new = {**doc, "backstop_on": False, "backstop_pending": False}
            if self._state.put_state(self._s.scope, state_name(bucket), new, version):
                return

    def _withdraw(self, bucket: str) -> bool:
        """Take CostGuard's rule off the bucket (the owner's stay); whether one was on."""
        current = self._store.lifecycle(bucket)
        merged = merge_lifecycle(current.rules, ())
        if merged.changed:
            self._store.put_lifecycle(bucket, replace(current, rules=merged.rules))
        return merged.changed

    def stand_down(self, bucket: str) -> str | None:
        """The decision to sweep does not act this run: withdraw what it left running.

        S3 applies a lifecycle rule with no executor, exemption, ``costguard:ttl`` or
        breaker check, so CostGuard's rule must not outlive the decision it belongs to.
        Dry-run included: it removes only CostGuard's own machinery (the owner's rules are
        kept), so it is not an action that dry-run reports. A pass under way is abandoned, since
        the breaker allowed it for a decision that no longer holds: the next deletion run
        counts a new pass, and the rule returns only when the breaker allows one. A trip
        stays (it holds deletions until confirmed). Free when nothing is left: no call.
        """
        for _ in range(STATE_ATTEMPTS):
            doc, version = self._state.get_state(self._s.scope, state_name(bucket))
            under_way = doc.get("phase") in PASS_PHASES
            # A live pass about to write its rule (or that stopped between its intent and
            # its write) may put it on after this look: "off" is not this run's to say.
            pending = bool(doc.get("backstop_pending"))
            if not doc or (
                not doc.get("allowed")
                and doc.get("backstop_on") is False
                and not pending
                and not under_way
            ):
                return None
            removed = (doc.get("backstop_on") is not False or pending) and self._withdraw(bucket)
            new = {**doc, "allowed": False, "backstop_on": pending, "backstop_pending": pending}
            if under_way:
                survey = doc.get("survey")
                new = {
                    **_fresh(str(doc["fingerprint"]), "ready" if survey else "survey", new),
                    "survey": survey,
                }
            if self._state.put_state(self._s.scope, state_name(bucket), new, version):
                return "CostGuard's lifecycle rule withdrawn" if removed else None
        raise SweepStopped(f"bucket {bucket}'s sweep state kept changing under this run")


def _with_earlier(summary: str, saved: Tally, run: Tally) -> str:
    """The run's summary, naming what it counts that an earlier, failed run deleted."""
    earlier = Tally(saved.objects - run.objects, saved.bytes - run.bytes)
    if earlier.objects <= 0:
        return summary
    return (
        f"{summary}; also counted: {objects(earlier.objects)} ({earlier.bytes:,} bytes) "
        f"deleted by an earlier run that failed before counting them"
    )


def _unsafe(cutoff: Any, now: datetime, config: SweepConfig) -> bool:
    """Whether S3's rule could now reach objects the pass of ``cutoff`` did not judge."""
    return cutoff is None or not before(now, backstop_safe_until(_at(cutoff), config.ttl))


def _at(text: Any) -> datetime:
    return datetime.fromisoformat(str(text))


def _within(doc: dict[str, Any], candidates: Sequence[StoredObject]) -> list[StoredObject]:
    """The candidates a pass may still delete: never more than its count approved.

    Objects can only leave a listing or grow younger between a count and its deletes, so
    this holds back nothing in practice; it is the bound that makes the breaker's
    judgement of the count a judgement of the deletes (a legal hold lifted in between, for
    example, is left for the next pass's count).
    """
    approved, taken = _tally(doc.get("approved")), _tally(doc.get("taken"))
    out: list[StoredObject] = []
    for o in candidates:
        after = taken.plus(1, o.size)
        if after.objects > approved.objects or after.bytes > approved.bytes:
            doc["deferred"] = int(doc.get("deferred", 0)) + 1
            continue
        taken = after
        out.append(o)
    doc["taken"] = _raw(taken)
    return out
