"""The stale-object sweep's judgement: which objects may go, when the breaker trips, and
which lifecycle rule backs the sweep up. Pure: no clock, no I/O.

Deleting the wrong object is unrecoverable, so every test here errs towards keeping:

* an object is a candidate only if it is in a swept prefix, outside the keep prefix, and
  strictly older than the bucket's time to live at the moment of the run;
* prefixes are normalised so that no object is listed (or counted, or deleted) twice;
* the breaker judges a whole pass, counted before its first delete: it stops a pass that
  would delete more than a share of what that same count found in scope, or more than a
  byte total, until the owner confirms with a dated tag written after the trip (each
  confirmation unlocks one trip);
* the lifecycle backstop is installed only where it cannot reach the keep prefix, and
  expires a day later than the sweep would, so that the hourly sweep (and its breaker)
  always judges an object before S3's rule can reach it; it stays on only until S3 could
  reach an object the last allowed pass did not judge (``backstop_safe_until``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from costguard.domain.money import HOURS_PER_PRICING_MONTH
from costguard.domain.windows import held

#: Bytes in the GB of S3's GB-month price.
GIB = 1024**3
#: CostGuard's lifecycle rules are named ``costguard-ttl-<n>`` (``is_ours``); no other is
#: touched.
RULE_ID_PREFIX = "costguard-ttl"
_RULE_ID = re.compile(re.escape(RULE_ID_PREFIX) + r"-[0-9]{1,6}")
#: What a rule of CostGuard's holds (every version has written this shape; S3 returns it
#: as written): a rule with anything else (a transition, a tag filter) is not CostGuard's.
_RULE_SHAPE: Mapping[str, frozenset[str]] = {
    "ID": frozenset(),
    "Status": frozenset(),
    "Filter": frozenset({"Prefix"}),
    "Expiration": frozenset({"Days"}),
    "AbortIncompleteMultipartUpload": frozenset({"DaysAfterInitiation"}),
    "NoncurrentVersionExpiration": frozenset({"NoncurrentDays"}),
}
#: Days the backstop waits beyond the time to live (rounded up to days): S3 expires an
#: object at the first midnight (UTC) after its age reaches the rule's days, and an hourly
#: sweep must have judged it (and its breaker have suspended the rule) before then.
BACKSTOP_MARGIN_DAYS = 1
#: How long before S3 could first reach an object that the last allowed pass did not judge
#: CostGuard's rule comes off (:func:`backstop_safe_until`): a few missed hourly runs, and
#: S3's delay in applying a changed configuration.
BACKSTOP_LEAD = timedelta(hours=6)
DEFAULT_KEEP_PREFIX = "keep/"
DEFAULT_BREAKER_PCT = 50
DEFAULT_BREAKER_MAX_GIB = 1024


@dataclass(frozen=True, slots=True)
class SweepConfig:
    """One bucket's sweep: its time to live (from its tag) and the deployment's rules."""

    ttl: timedelta
    #: Key prefixes the sweep is limited to; empty means the whole bucket.
    prefixes: tuple[str, ...] = ()
    #: Never deleted (from the bucket root); "" disables it.
    keep_prefix: str = DEFAULT_KEEP_PREFIX
    #: Versioned buckets: let the backstop expire noncurrent versions too.
    purge_noncurrent: bool = False
    breaker_pct: int = DEFAULT_BREAKER_PCT
    breaker_max_bytes: int = DEFAULT_BREAKER_MAX_GIB * GIB
    backstop: bool = True

    @property
    def swept_prefixes(self) -> tuple[str, ...]:
        return normalise_prefixes(self.prefixes)

    def fingerprint(self) -> str:
        """What the owner was warned about: a change re-warns (ttl, prefixes, keep, purge).

        The breaker's limits are not in it: tightening or loosening a safety limit does
        not change what is deleted, only when the sweep stops to ask.
        """
        text = json.dumps(
            [
                int(self.ttl.total_seconds()),
                list(self.swept_prefixes),
                self.keep_prefix,
                self.purge_noncurrent,
            ],
            ensure_ascii=False,
        )
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def in_scope(self, key: str) -> bool:
        if self.keep_prefix and key.startswith(self.keep_prefix):
            return False
        prefixes = self.swept_prefixes
        return prefixes == ("",) or any(key.startswith(p) for p in prefixes)

    def cutoff(self, now: datetime) -> datetime:
        """Objects last modified strictly before this are past their time to live."""
        return now - self.ttl

    def describe(self) -> dict[str, str]:
        return {
            "ttl": f"{int(self.ttl.total_seconds() // 3600)}h",
            "prefixes": ",".join(self.swept_prefixes) or "(whole bucket)",
            "keep_prefix": self.keep_prefix or "(none)",
            "noncurrent_versions": "expired by the backstop" if self.purge_noncurrent else "kept",
        }


def objects(count: int) -> str:
    """``count`` objects in words: "1 object", "1,024 objects"."""
    return f"{count:,} object" + ("" if count == 1 else "s")


def normalise_prefixes(prefixes: Iterable[str]) -> tuple[str, ...]:
    """Sorted, without duplicates or prefixes inside another: each key is listed once.

    ``("a/", "a/b/")`` is ``("a/",)``; no prefixes, or an empty one, is the whole bucket.
    """
    unique = sorted(set(prefixes))
    if not unique or "" in unique:
        return ("",)
    kept: list[str] = []
    for p in unique:
        if not any(p.startswith(k) for k in kept):
            kept.append(p)
    return tuple(kept)


@dataclass(frozen=True, slots=True)
class StoredObject:
    """One object (its current version) as a listing shows it."""

    key: str
    size: int
    last_modified: datetime
    etag: str = ""


@dataclass(frozen=True, slots=True)
class Lock:
    """An object's Object Lock state, as a HEAD shows it."""

    retain_until: datetime | None = None
    legal_hold: bool = False

    def protects(self, now: datetime) -> bool:
        return self.legal_hold or held(now, self.retain_until)


def usd_per_month(size_bytes: int, usd_per_gb_month: Decimal) -> Decimal:
    return Decimal(size_bytes) / Decimal(GIB) * usd_per_gb_month


def usd_per_hour(size_bytes: int, usd_per_gb_month: Decimal) -> Decimal:
    return usd_per_month(size_bytes, usd_per_gb_month) / HOURS_PER_PRICING_MONTH


# -- the circuit breaker ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tally:
    objects: int = 0
    bytes: int = 0

    def plus(self, objects: int, size: int) -> Tally:
        return Tally(self.objects + objects, self.bytes + size)


def breaker_reason(would_delete: Tally, in_scope: Tally, config: SweepConfig) -> str | None:
    """Why deleting ``would_delete`` out of ``in_scope`` is too much for one pass, if it is.

    Both come from one count of the whole pass (every prefix, every page, one cutoff),
    taken before its first delete: ``would_delete`` is part of ``in_scope``. More than
    ``breaker_pct`` % of the objects in scope, or more than the byte limit. A bucket in
    which everything is old trips it: that is the first run that must not silently wipe
    it. Because the share is of what the pass itself found, a pass always leaves at least
    the rest, and passes one after another cannot empty a bucket without a trip.
    """
    if would_delete.objects > in_scope.objects:
        raise ValueError(
            f"a pass cannot delete {would_delete.objects:,} of {in_scope.objects:,} objects: "
            f"both counts must come from the same listing"
        )
    if would_delete.bytes > config.breaker_max_bytes:
        return (
            f"it would delete {would_delete.bytes:,} bytes, more than the "
            f"{config.breaker_max_bytes:,}-byte limit of one pass"
        )
    if in_scope.objects and would_delete.objects * 100 > config.breaker_pct * in_scope.objects:
        return (
            f"it would delete {would_delete.objects:,} of {in_scope.objects:,} objects in scope, "
            f"more than {config.breaker_pct} %"
        )
    return None


_CONFIRM = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[T ]([0-9]{2}):([0-9]{2})(?::[0-9]{2})?[Zz]?)?"
)


def trip_stamp(tripped_at: datetime) -> str:
    """The value that confirms exactly one trip: its UTC time to the minute.

    The trip alert tells the owner to tag ``costguard:confirm-delete`` with it.
    """
    return f"{tripped_at.astimezone(UTC):%Y-%m-%dT%H:%MZ}"


def parse_confirmation(raw: str) -> date | datetime | str:
    """``costguard:confirm-delete``: a UTC day, or a trip's stamp; or why it is neither.

    ``YYYY-MM-DD`` is the UTC day the owner confirmed; ``YYYY-MM-DDTHH:MMZ`` (seconds and
    the ``Z`` optional) names one trip, as the trip alert prints it.
    """
    match = _CONFIRM.fullmatch(raw.strip())
    if match is None:
        return (
            "is not a date such as 2026-11-05 (the UTC day you confirm) nor a trip's time "
            "such as 2026-11-05T04:00Z"
        )
    year, month, day, hour, minute = match.groups()
    try:
        if hour is None:
            return date(int(year), int(month), int(day))
        return datetime(int(year), int(month), int(day), int(hour), int(minute), tzinfo=UTC)
    except ValueError:
        return "is not a calendar date and time"


def confirms(raw: str | None, tripped_at: datetime, now: datetime, used: str | None = None) -> bool:
    """Does the tag confirm the trip of ``tripped_at``? Once, and only that trip.

    * A date confirms a trip of that UTC day or earlier, and only a date written after
      the trip: a tag left from an earlier trip names an earlier day. A date in the future
      (beyond tomorrow, for time zones) would confirm trips not yet seen, so it confirms
      nothing.
    * A trip's stamp (:func:`trip_stamp`, to the minute) confirms that trip only.
    * A value confirms at most one trip. ``used`` is the value that unlocked the bucket's
      last confirmed pass (kept in its sweep state): the same value confirms nothing more,
      so a second trip the same day waits for a value of its own (its stamp, or
      tomorrow's date), however long the owner leaves the first tag on the bucket.
    """
    if raw is None:
        return False
    when = parse_confirmation(raw)
    if isinstance(when, str) or (used is not None and confirmation_key(raw) == used):
        return False
    if isinstance(when, datetime):
        return when == _minute(tripped_at)
    return (
        tripped_at.astimezone(UTC).date()
        <= when
        <= (now.astimezone(UTC) + timedelta(days=1)).date()
    )


def confirmation_key(raw: str) -> str | None:
    """A confirmation's canonical form, kept as ``used`` once it unlocked a pass.

    ``" 2026-11-05"`` and ``"2026-11-05"`` are one confirmation, as are a stamp with and
    without its seconds or ``Z``.
    """
    when = parse_confirmation(raw)
    if isinstance(when, str):
        return None
    return trip_stamp(when) if isinstance(when, datetime) else when.isoformat()


def _minute(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(second=0, microsecond=0)


# -- the lifecycle backstop ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Backstop:
    """The lifecycle rules CostGuard wants on a bucket, and the prefixes it had to skip."""

    rules: tuple[Mapping[str, Any], ...] = ()
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """A bucket's lifecycle configuration as read, and as written back: whole.

    ``PutBucketLifecycleConfiguration`` replaces the configuration, its
    ``TransitionDefaultMinimumObjectSize`` included (S3 applies its default when a write
    does not name one), so a write names again what was read.
    """

    rules: tuple[Mapping[str, Any], ...] = ()
    #: ``TransitionDefaultMinimumObjectSize`` as read; None when S3 named none.
    min_object_size: str | None = None


def ttl_days(ttl: timedelta) -> int:
    """Lifecycle works in whole days: round up, so the backstop never runs ahead of the TTL."""
    return max(1, math.ceil(ttl / timedelta(days=1)))


def backstop_days(ttl: timedelta) -> int:
    """The backstop rule's ``Expiration.Days``: the TTL in whole days, plus the margin."""
    return ttl_days(ttl) + BACKSTOP_MARGIN_DAYS


def lifecycle_expires_at(last_modified: datetime, days: int) -> datetime:
    """When S3's lifecycle expires an object under a rule of ``days``: its last
    modification plus the days, rounded up to the next midnight UTC (as S3 documents).

    What a test that simulates S3's expiry applies to CostGuard's rules (``is_ours``).
    """
    due = last_modified.astimezone(UTC) + timedelta(days=days)
    midnight = due.replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight if midnight == due else midnight + timedelta(days=1)


def backstop_safe_until(cutoff: datetime, ttl: timedelta) -> datetime:
    """Until when CostGuard's rule may stay on for the pass the breaker allowed with
    ``cutoff``: that pass judged only objects last modified before its cutoff, and S3's
    rule first reaches a later one at ``lifecycle_expires_at(cutoff, backstop_days)``
    (at least the margin after the pass began). The rule is off ``BACKSTOP_LEAD`` before
    then, until a newer pass is allowed: a pass that spans more than about the margin
    (its count and deletes resumed run after run) goes on without it.
    """
    return lifecycle_expires_at(cutoff, backstop_days(ttl)) - BACKSTOP_LEAD


def backstop(config: SweepConfig, object_lock: bool) -> Backstop:
    """CostGuard's rules: one per swept prefix that cannot reach the keep prefix.

    The one place the rules' shape is decided: ID ``costguard-ttl-<i>`` (``RULE_ID_PREFIX``,
    ``i`` the prefix's place in ``swept_prefixes``), filter ``{"Prefix": prefix}``,
    expiration after :func:`backstop_days`, incomplete uploads aborted after a day.

    A lifecycle filter can include a prefix but never exclude one, so a rule on the whole
    bucket (or on a prefix containing ``keep/``) would expire what must be kept: that
    prefix gets no rule, and the reason is reported. A bucket with Object Lock gets none
    either: an expiration leaves a delete marker on locked objects, hiding them.
    """
    if not config.backstop:
        return Backstop(skipped=("the backstop is switched off",))
    if object_lock:
        return Backstop(skipped=("Object Lock: an expiration would hide locked objects",))
    days = backstop_days(config.ttl)
    rules: list[Mapping[str, Any]] = []
    skipped: list[str] = []
    keep = config.keep_prefix
    for i, prefix in enumerate(config.swept_prefixes):
        if keep and (prefix.startswith(keep) or keep.startswith(prefix)):
            where = f"prefix {prefix!r}" if prefix else "the whole bucket"
            skipped.append(f"{where} contains the keep prefix {keep!r}")
            continue
        rule: dict[str, Any] = {
            "ID": f"{RULE_ID_PREFIX}-{i}",
            "Status": "Enabled",
            "Filter": {"Prefix": prefix},
            "Expiration": {"Days": days},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        }
        if config.purge_noncurrent:
            rule["NoncurrentVersionExpiration"] = {"NoncurrentDays": days}
        rules.append(rule)
    return Backstop(tuple(rules), tuple(skipped))


def is_ours(rule: Mapping[str, Any]) -> bool:
    """A rule CostGuard wrote (this version or an earlier one): ID exactly
    ``costguard-ttl-<n>`` and the shape :func:`backstop` writes (an expiration in days on
    a prefix filter, nothing the owner would add). Anything else is the owner's and kept,
    whatever its name: an owner's ``costguard-ttl-archive`` transition rule is never
    deleted. A rule of ours edited within that shape (other days, disabled) is still ours,
    reported as drift and put right.
    """
    if not _RULE_ID.fullmatch(str(rule.get("ID", ""))):
        return False
    if set(rule) - set(_RULE_SHAPE) or not {"Filter", "Expiration"} <= set(rule):
        return False
    for part, keys in _RULE_SHAPE.items():
        value = rule.get(part)
        if keys and value is not None and (not isinstance(value, Mapping) or set(value) - keys):
            return False
    days = rule["Expiration"].get("Days")
    return isinstance(rule["Filter"].get("Prefix", ""), str) and isinstance(days, int)


@dataclass(frozen=True, slots=True)
class LifecycleMerge:
    rules: tuple[Mapping[str, Any], ...]
    changed: bool
    #: CostGuard rules found different from what CostGuard would write (edited by hand).
    drift: tuple[str, ...] = field(default_factory=tuple)


def _canonical(rule: Mapping[str, Any]) -> str:
    return json.dumps(rule, sort_keys=True, default=str)


def merge_lifecycle(
    existing: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, Any]]
) -> LifecycleMerge:
    """Every rule of the owner kept as it is, in its place; CostGuard's own replaced.

    ``PutBucketLifecycleConfiguration`` replaces the whole configuration, so this is the
    only way CostGuard writes it: owner rules first, unchanged, then CostGuard's.
    """
    owners = [r for r in existing if not is_ours(r)]
    ours_now = {str(r.get("ID")): r for r in existing if is_ours(r)}
    # S3 refuses two rules of one ID: an owner's rule holding one of CostGuard's IDs wins,
    # and that part of the backstop is not installed (reported).
    taken = {str(r.get("ID")) for r in owners}
    wanted_by_id = {str(r["ID"]): r for r in wanted if str(r["ID"]) not in taken}
    drift = tuple(
        f"rule {rid} differs from what CostGuard wrote"
        for rid, rule in sorted(ours_now.items())
        if rid in wanted_by_id and _canonical(rule) != _canonical(wanted_by_id[rid])
    ) + tuple(
        f"rule ID {rid} is taken by a rule CostGuard did not write; not installed"
        for rid in sorted({str(r["ID"]) for r in wanted} & taken)
    )
    changed = {rid: _canonical(r) for rid, r in ours_now.items()} != {
        rid: _canonical(r) for rid, r in wanted_by_id.items()
    }
    return LifecycleMerge((*owners, *wanted_by_id.values()), changed, drift)
