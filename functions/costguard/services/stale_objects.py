"""The stale-object guard's policy and actuator, on the object-store and ledger ports.

Only buckets tagged ``costguard:ttl`` are ever read beyond their tags, and the actuator
re-reads the tags before acting and every few pages while it deletes. The warning
deadline is kept in the ledger, not on the bucket: ``PutBucketTagging`` replaces the
whole tag set, so a read-modify-write could race an owner adding ``costguard:exempt``
and erase it; with the deadline in the ledger, the guard's role has no bucket-tagging
permission at all and can never change an owner's tags. The S3 calls (and the
permissions they need) are :class:`costguard.adapters.s3.S3ObjectStore`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from costguard.domain.decisions import Action, ApplyResult, Decision, Observed, Target
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.models import resource_key
from costguard.domain.sweep import SweepConfig, objects, usd_per_hour
from costguard.domain.tags import TagKeys, Tags, parse_ttl, read_tags
from costguard.ports import FindingStore, ObjectStore, StateStore, TimeLeft
from costguard.services.sweep import BucketRef, SweepService

KIND = "s3-bucket"
#: The ledger state that holds a bucket's warning deadline (instead of a bucket tag).
WARNING_STATE = "s3warn#"
#: Buckets with a standing warning, so that one whose ttl tag was removed is withdrawn.
WARNED_INDEX = "s3warn-index"
#: The decision's parameter carrying the $/GB-month its bucket's bytes are priced at.
RATE_PARAM = "usd_per_gb_month"


@dataclass(frozen=True, slots=True)
class SweepOptions:
    """The deployment's sweep settings (config_spec: sweepPrefixes, sweepKeepPrefix…)."""

    prefixes: tuple[str, ...] = ()
    keep_prefix: str = "keep/"
    purge_noncurrent: bool = False
    breaker_pct: int = 50
    breaker_max_bytes: int = 1024**4
    backstop: bool = True

    def config(self, ttl: timedelta) -> SweepConfig:
        return SweepConfig(ttl=ttl, **asdict(self))


class TimeLeftHolder:
    """The run's time_left, bound by the handler (the Lambda's remaining time) after build."""

    def __init__(self, time_left: TimeLeft | None = None) -> None:
        self.time_left = time_left

    def seconds_left(self) -> float:
        return float("inf") if self.time_left is None else self.time_left.seconds_left()


def _bucket_ref(target: Target) -> BucketRef:
    return BucketRef(target.id, target.key, target.account, target.project, target.owners)


class S3BucketActuator:
    """Sweeps one bucket's stale objects when the executor allows it (a standing action)."""

    kind = KIND
    opt_in_tags: tuple[str, ...] = (Tags.TTL,)

    def __init__(
        self,
        store: ObjectStore,
        sweeps: SweepService,
        state: StateStore,
        scope: str,
        options: SweepOptions,
        time_left: TimeLeftHolder,
    ) -> None:
        self._store = store
        self._sweeps = sweeps
        self._state = state
        self._scope = scope
        self._options = options
        self._time_left = time_left

    def inspect(self, targets: Sequence[Target]) -> Mapping[str, Observed]:
        # No batched read of these (state and tags) exists: one look per target.
        return {t.key: seen for t in targets if (seen := self._inspect_one(t)) is not None}

    def _inspect_one(self, target: Target) -> Observed | None:
        tags = self._store.bucket_tags(target.id)
        if tags is None:
            return None
        tags.pop(Tags.ACTION_AFTER, None)  # only the ledger's deadline counts
        doc, _ = self._state.get_state(self._scope, WARNING_STATE + target.id)
        if doc.get("deadline"):
            tags[Tags.ACTION_AFTER] = str(doc["deadline"])
        return Observed("opted-in" if Tags.TTL in tags else "not-opted-in", tags)

    def _index(self, change: Callable[[set[str]], set[str]]) -> None:
        for _ in range(5):
            doc, version = self._state.get_state(self._scope, WARNED_INDEX)
            buckets = change(set(doc.get("buckets", [])))
            if self._state.put_state(
                self._scope, WARNED_INDEX, {"buckets": sorted(buckets)}, version
            ):
                return
        raise RuntimeError("the warned-bucket index kept changing under this run")

    def mark(self, target: Target, key: str, value: str) -> None:
        """A new warning (first, or for a changed configuration), kept in the ledger.

        The executor has stood the sweep down first (:meth:`stand_down`): the old rule,
        written for the configuration of the warning this one replaces, is gone, and the
        first pass the breaker allows after the new grace period installs the new one.
        """
        if key != Tags.ACTION_AFTER:
            raise ValueError(f"the S3 actuator keeps only {Tags.ACTION_AFTER}, not {key}")
        self._put_warning(target.id, value)
        self._index(lambda b: b | {target.id})

    def unmark(self, target: Target, key: str) -> None:
        """The warning is withdrawn (exempt, no valid ``costguard:ttl``, out of scope).

        The executor has stood the sweep down first, so that a failure leaves the
        warning (and the bucket in the warned index) for the next run to withdraw again.
        """
        self._put_warning(target.id, None)
        self._index(lambda b: b - {target.id})

    def stand_down(self, target: Target) -> str | None:
        """The decision does not act this run: :meth:`SweepService.stand_down`."""
        return self._sweeps.stand_down(target.id)

    def _put_warning(self, bucket: str, deadline: str | None) -> None:
        for _ in range(5):
            _, version = self._state.get_state(self._scope, WARNING_STATE + bucket)
            if self._state.put_state(
                self._scope, WARNING_STATE + bucket, {"deadline": deadline}, version
            ):
                return
        raise RuntimeError(f"the warning of bucket {bucket} kept changing under this run")

    def apply(self, decision: Decision) -> ApplyResult:
        bucket = decision.target.id
        tags = self._store.bucket_tags(bucket)
        if tags is None:
            return ApplyResult(f"bucket {bucket} is gone; nothing deleted", acted=False)
        ttl = parse_ttl(tags.get(Tags.TTL, ""))
        if isinstance(ttl, str):
            raise RuntimeError(f"{Tags.TTL} is no longer valid on {bucket}; nothing deleted")
        config = self._options.config(ttl)
        if config.fingerprint() != decision.standing:
            raise RuntimeError(
                f"{bucket}'s sweep configuration changed since the warning; nothing deleted"
            )
        result = self._sweeps.sweep(
            _bucket_ref(decision.target), config, decision.decided_at, self._time_left, tags
        )
        # A run that deleted nothing (nothing due yet, or the breaker tripped) is no action
        # and no saving; the sweep has told the owner about a trip itself. A run saves
        # what it deleted (and what an earlier run deleted and failed before counting), at
        # the price the decision was made with, never the survey's estimate again: the
        # runs after one warning add up to what went, once.
        rate = Decimal(decision.params.get(RATE_PARAM, "0"))
        return ApplyResult(
            result.detail,
            acted=result.saved.objects > 0,
            usd_per_hour_saved=usd_per_hour(result.saved.bytes, rate),
        )


@dataclass
class StaleObjectsPolicy:
    """Every bucket tagged ``costguard:ttl`` gets a standing delete decision, once surveyed.

    A malformed ttl is a finding and the bucket is left alone. A bucket with a standing
    warning whose tag is gone, or whose region is no longer guarded, gets ``NONE``, which
    withdraws the warning and stands the sweep down (its lifecycle rule comes off).
    """

    store: ObjectStore
    sweeps: SweepService
    state: StateStore
    findings: FindingStore | None
    scope: str
    account: str
    regions: tuple[str, ...]
    options: SweepOptions
    time_left: TimeLeftHolder
    usd_per_gb_month: Callable[[str], Decimal]
    list_buckets: Callable[[], list[tuple[str, str]]]
    tag_keys: TagKeys = field(default_factory=TagKeys)
    grace: timedelta = timedelta(hours=24)
    #: What the last ``decide`` found wrong (malformed ttl, buckets that failed).
    found: list[Finding] = field(default_factory=list)

    def decide(self, now: datetime) -> list[Decision]:
        """One decision per opted-in bucket; a bucket that fails is a finding, not a stop.

        A bucket whose calls fail (a bucket policy denying CostGuard, throttling, a ledger
        conflict) gets no decision at all this run: it is neither warned, swept nor
        withdrawn, and the other buckets go on. The failure is a ``scan-failed`` finding
        naming the bucket (severity error), logged by the handler and kept in the ledger.
        """
        decisions: list[Decision] = []
        self.found = []
        warned_doc, _ = self.state.get_state(self.scope, WARNED_INDEX)
        warned = set(warned_doc.get("buckets", []))
        for name, region in self.list_buckets():
            if region not in self.regions and name not in warned:
                continue
            try:
                decision = self._bucket(name, region, name in warned, now)
            except Exception as exc:  # contained: one bucket never stops the others
                self.found.append(
                    Finding(
                        FindingCode.SCAN_FAILED,
                        resource_key(self.account, region, KIND, name),
                        f"bucket {name}: {type(exc).__name__}: {exc}; left alone this run "
                        f"(not warned, swept or withdrawn)",
                        Severity.ERROR,
                    )
                )
                continue
            if decision is not None:
                decisions.append(decision)
        if self.findings is not None and self.found:
            self.findings.record_findings(self.scope, now, self.found)
        return decisions

    def _bucket(self, name: str, region: str, warned: bool, now: datetime) -> Decision | None:
        tags = self.store.bucket_tags(name)
        if tags is None:
            return None
        parsed = read_tags(f"s3://{name}", tags, self.tag_keys)
        target = Target(
            key=resource_key(self.account, region, KIND, name),
            kind=KIND,
            region=region,
            id=name,
            account=self.account,
            project=parsed.project,
            owners=parsed.owners,
            name=name,
        )
        if region not in self.regions:  # warned, and no longer in the deployment's reach
            return Decision(Action.NONE, target, "its region is no longer guarded", now)
        raw = tags.get(Tags.TTL)
        ttl = parse_ttl(raw) if raw is not None else None
        if isinstance(ttl, str):
            self.found.append(
                Finding(
                    FindingCode.MALFORMED_TTL,
                    target.key,
                    f"tag {Tags.TTL}={raw!r} {ttl}; the bucket is left alone",
                )
            )
        if ttl is None or isinstance(ttl, str):
            if warned:
                return Decision(Action.NONE, target, "no valid costguard:ttl any more", now)
            return None
        return self._judge(target, ttl, now)

    def _judge(self, target: Target, ttl: timedelta, now: datetime) -> Decision:
        config = self.options.config(ttl)
        ref = _bucket_ref(target)
        result = self.sweeps.survey(ref, config, now, self.time_left)
        if result.would_delete is None or result.in_scope is None:
            return Decision(
                Action.NONE,
                target,
                f"surveying before the first warning: {result.detail}",
                now,
            )
        rate = self.usd_per_gb_month(target.region)
        evidence = {
            **config.describe(),
            "objects_in_scope": f"{result.in_scope.objects:,}",
            "bytes_in_scope": f"{result.in_scope.bytes:,}",
            "objects_to_delete": f"{result.would_delete.objects:,}",
            "bytes_to_delete": f"{result.would_delete.bytes:,}",
        }
        return Decision(
            Action.DELETE_OBJECTS,
            target,
            f"{objects(result.would_delete.objects)} ({result.would_delete.bytes:,} bytes) "
            f"{'is' if result.would_delete.objects == 1 else 'are'} older than the bucket's {Tags.TTL}",
            now,
            evidence=evidence,
            usd_per_hour_saved=usd_per_hour(result.would_delete.bytes, rate),
            grace=self.grace,
            params={RATE_PARAM: str(rate)},
            standing=config.fingerprint(),
        )
