"""S3 for the stale-object sweep: the object store, the bucket actuator, and the policy.

Only buckets tagged ``costguard:ttl`` are ever read beyond their tags, and the actuator
re-reads the tags before acting and every few pages while it deletes. The warning
deadline is kept in the ledger, not on the bucket: ``PutBucketTagging`` replaces the
whole tag set, so a read-modify-write could race an owner adding ``costguard:exempt``
and erase it; with the deadline in the ledger, the guard's role has no bucket-tagging
permission at all and can never change an owner's tags.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from botocore.exceptions import ClientError

from costguard.adapters.aws import reading, tags_of
from costguard.domain.decisions import Action, ApplyResult, Decision, Observed, Target
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.models import resource_key
from costguard.domain.sweep import (
    Lifecycle,
    Lock,
    StoredObject,
    SweepConfig,
    objects,
    usd_per_hour,
)
from costguard.domain.tags import TagKeys, Tags, parse_ttl, read_tags
from costguard.iam import THIS_ACCOUNT_ONLY, Permission
from costguard.ports import DeleteResult, FindingStore, StateStore, TimeLeft
from costguard.services.sweep import BucketRef, SweepService

if TYPE_CHECKING:
    from costguard.adapters.aws import ClientFactory
    from costguard.services.guard import Guard, GuardContext
    from costguard.settings import Settings

#: The boto3 S3 client. Typed ``Any`` because the mypy_boto3_s3 stubs are not installed
#: here (``boto3-stubs[s3]`` should join the dev extras); every call goes through
#: :class:`S3ObjectStore`, whose signatures are typed.
S3Client = Any
KIND = "s3-bucket"
#: The ledger state that holds a bucket's warning deadline (instead of a bucket tag).
WARNING_STATE = "s3warn#"
#: Buckets with a standing warning, so that one whose ttl tag was removed is withdrawn.
WARNED_INDEX = "s3warn-index"
#: The decision's parameter carrying the $/GB-month its bucket's bytes are priced at.
RATE_PARAM = "usd_per_gb_month"

#: Gone, or not ours to read: the bucket is skipped, never guessed about.
_MISSING = frozenset({"NoSuchBucket", "404", "NotFound"})


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _xml_form(key: str) -> str:
    """A key as an XML parser reads it back (end-of-line normalisation: CR LF, CR -> LF)."""
    return key.replace("\r\n", "\n").replace("\r", "\n")


def _unambiguous(objects: Sequence[StoredObject]) -> list[list[StoredObject]]:
    """Split ``objects`` so that no two in a group read back as the same key."""
    groups: list[tuple[set[str], list[StoredObject]]] = []
    for o in objects:
        form = _xml_form(o.key)
        for forms, group in groups:
            if form not in forms:
                forms.add(form)
                group.append(o)
                break
        else:
            groups.append(({form}, [o]))
    return [group for _, group in groups]


class S3ObjectStore:
    """One client per region; buckets are found in their region."""

    def __init__(self, client_for: Callable[[str], S3Client], region_of: Callable[[str], str]):
        self._client_for = client_for
        self._region_of = region_of
        self._locks: dict[str, bool] = {}

    def _s3(self, bucket: str) -> S3Client:
        return self._client_for(self._region_of(bucket))

    def list_page(
        self, bucket: str, prefix: str, start_after: str
    ) -> tuple[Sequence[StoredObject], bool]:
        kwargs: dict[str, Any] = {"Bucket": bucket, "MaxKeys": 1000}
        if prefix:
            kwargs["Prefix"] = prefix
        if start_after:
            kwargs["StartAfter"] = start_after
        with reading("s3", bucket, "ListObjectsV2"):
            page = self._s3(bucket).list_objects_v2(**kwargs)
        objects = tuple(
            StoredObject(
                key=str(o["Key"]),
                size=int(o.get("Size", 0)),
                last_modified=o["LastModified"],
                etag=str(o.get("ETag", "")),
            )
            for o in page.get("Contents", [])
        )
        return objects, bool(page.get("IsTruncated"))

    def object_lock(self, bucket: str) -> bool:
        if bucket in self._locks:
            return self._locks[bucket]
        with reading("s3", bucket, "GetObjectLockConfiguration"):
            try:
                config = self._s3(bucket).get_object_lock_configuration(Bucket=bucket)
                enabled = bool(
                    config.get("ObjectLockConfiguration", {}).get("ObjectLockEnabled") == "Enabled"
                )
            except ClientError as exc:
                if _code(exc) != "ObjectLockConfigurationNotFoundError":
                    raise
                enabled = False
        self._locks[bucket] = enabled
        return enabled

    def lock_of(self, bucket: str, obj: StoredObject) -> Lock | None:
        with reading("s3", bucket, "HeadObject"):
            try:
                head = self._s3(bucket).head_object(Bucket=bucket, Key=obj.key)
            except ClientError as exc:
                if _code(exc) in _MISSING:
                    return None
                raise
        until = head.get("ObjectLockRetainUntilDate")
        return Lock(
            retain_until=until if isinstance(until, datetime) else None,
            legal_hold=head.get("ObjectLockLegalHoldStatus") == "ON",
        )

    def delete(self, bucket: str, objects: Sequence[StoredObject]) -> DeleteResult:
        """``DeleteObjects``, each key conditional on its ETag; the reply's keys mapped back.

        The reply is XML, whose parser turns a carriage return in a key into a line feed
        (``"a\\r"`` and ``"a\\r\\n"`` both read back as ``"a\\n"``), and DeleteObjects has
        no ``EncodingType=url``. Each reply key is therefore matched by its normalised form,
        which is unique within a call: keys whose forms collide go in separate calls (rare:
        one extra call per collision). A reply key that matches no requested key is never
        counted as deleted.
        """
        if len(objects) > 1000:
            raise ValueError("DeleteObjects takes at most 1,000 keys")
        deleted: list[str] = []
        errors: dict[str, str] = {}
        for group in _unambiguous(objects):
            by_form = {_xml_form(o.key): o.key for o in group}
            ids: list[dict[str, str]] = []
            for o in group:
                ident = {"Key": o.key}
                if o.etag:
                    ident["ETag"] = o.etag  # conditional: an object rewritten since is kept
                ids.append(ident)
            with reading("s3", bucket, "DeleteObjects"):
                result = self._s3(bucket).delete_objects(
                    Bucket=bucket, Delete={"Objects": ids, "Quiet": False}
                )
            for d in result.get("Deleted", []):
                key = by_form.get(_xml_form(str(d.get("Key", ""))))
                if key is not None:
                    deleted.append(key)
            for e in result.get("Errors", []):
                key = by_form.get(_xml_form(str(e.get("Key", ""))))
                if key is not None:
                    errors[key] = str(e.get("Code", "Unknown"))
        return DeleteResult(
            deleted=tuple(k for k in dict.fromkeys(deleted) if k not in errors), errors=errors
        )

    def bucket_tags(self, bucket: str) -> dict[str, str] | None:
        with reading("s3", bucket, "GetBucketTagging"):
            try:
                result = self._s3(bucket).get_bucket_tagging(Bucket=bucket)
            except ClientError as exc:
                if _code(exc) == "NoSuchTagSet":
                    return {}
                if _code(exc) in _MISSING:
                    return None
                raise
        return tags_of(result.get("TagSet"))

    def lifecycle(self, bucket: str) -> Lifecycle:
        with reading("s3", bucket, "GetBucketLifecycleConfiguration"):
            try:
                result = self._s3(bucket).get_bucket_lifecycle_configuration(Bucket=bucket)
            except ClientError as exc:
                if _code(exc) == "NoSuchLifecycleConfiguration" or _code(exc) in _MISSING:
                    return Lifecycle()  # none, or no bucket: nothing of CostGuard's to keep
                raise
        size = result.get("TransitionDefaultMinimumObjectSize")
        return Lifecycle(tuple(result.get("Rules", [])), str(size) if size else None)

    def put_lifecycle(self, bucket: str, lifecycle: Lifecycle) -> None:
        with reading("s3", bucket, "PutBucketLifecycleConfiguration"):
            s3 = self._s3(bucket)
            if lifecycle.rules:
                extra: dict[str, Any] = {}
                if lifecycle.min_object_size is not None:  # the owner's, as read: kept
                    extra["TransitionDefaultMinimumObjectSize"] = lifecycle.min_object_size
                s3.put_bucket_lifecycle_configuration(
                    Bucket=bucket, LifecycleConfiguration={"Rules": list(lifecycle.rules)}, **extra
                )
            else:  # only CostGuard's rules were there, and none is wanted now
                s3.delete_bucket_lifecycle(Bucket=bucket)


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
        return SweepConfig(
            ttl=ttl,
            prefixes=self.prefixes,
            keep_prefix=self.keep_prefix,
            purge_noncurrent=self.purge_noncurrent,
            breaker_pct=self.breaker_pct,
            breaker_max_bytes=self.breaker_max_bytes,
            backstop=self.backstop,
        )


class TimeLeftHolder:
    """The run's time left, bound by the handler (the Lambda's remaining time) after build."""

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
    permissions: ClassVar[tuple[Permission, ...]] = (
        Permission(
            ("s3:ListAllMyBuckets", "s3:GetBucketLocation"),
            "find the buckets and their regions; ListAllMyBuckets has no resource-level "
            "permissions",
        ),
        Permission(
            (
                "s3:GetBucketTagging",
                "s3:GetBucketObjectLockConfiguration",
                "s3:GetLifecycleConfiguration",
                "s3:ListBucket",
            ),
            "read a bucket's tags (opt-in, exemption, confirmation), Object Lock and "
            "lifecycle, and list opted-in buckets; read-only, on this account's buckets",
            resources=("arn:{partition}:s3:::*",),
            conditions=THIS_ACCOUNT_ONLY,
        ),
        Permission(
            ("s3:GetObject", "s3:GetObjectRetention", "s3:GetObjectLegalHold"),
            "HEAD an expired object in a bucket with Object Lock, to keep it when it is under "
            "retention or legal hold (HeadObject needs s3:GetObject to show the lock)",
            resources=("arn:{partition}:s3:::*/*",),
            conditions=THIS_ACCOUNT_ONLY,
        ),
        Permission(
            ("s3:DeleteObject",),
            "delete expired objects of opted-in buckets (DeleteObjects is authorized per key "
            "as s3:DeleteObject). Not tag-conditioned: aws:ResourceTag works on a general "
            "purpose bucket only once its owner enables ABAC (off by default), and "
            "s3:ExistingObjectTag is not supported for deletes; so it is limited to this "
            "account's objects, never a version (no s3:DeleteObjectVersion: a versioned "
            "bucket keeps every deleted object as a noncurrent version behind a delete "
            "marker), and the opt-in is re-checked in code before and during every sweep",
            resources=("arn:{partition}:s3:::*/*",),
            conditions=THIS_ACCOUNT_ONLY,
        ),
        Permission(
            ("s3:PutLifecycleConfiguration",),
            "merge CostGuard's backstop rule into an opted-in bucket's lifecycle, and take "
            "it off again whenever the decision behind it no longer acts (dry-run included) "
            "or the breaker trips (read, keep every owner rule, write; "
            "DeleteBucketLifecycle, used only when CostGuard's rules were all of it, is "
            "authorized as s3:PutLifecycleConfiguration too); not tag-conditioned for the "
            "reason above, and limited to this account's buckets",
            resources=("arn:{partition}:s3:::*",),
            conditions=THIS_ACCOUNT_ONLY,
        ),
    )

    def __init__(
        self,
        store: S3ObjectStore,
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
        """The decision does not act this run: CostGuard's lifecycle rule comes off (the
        owner's stay), and a pass under way is abandoned. Dry-run included; no call when
        nothing can be on the bucket."""
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

    store: S3ObjectStore
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
            f"{'is' if result.would_delete.objects == 1 else 'are'} older than their {Tags.TTL}",
            now,
            evidence=evidence,
            usd_per_hour_saved=usd_per_hour(result.would_delete.bytes, rate),
            grace=self.grace,
            params={RATE_PARAM: str(rate)},
            standing=config.fingerprint(),
        )


def bucket_lister(
    client_for: Callable[[str], S3Client], home: str
) -> Callable[[], list[tuple[str, str]]]:
    """``ListBuckets`` (paginated), each bucket with its region."""

    def listing() -> list[tuple[str, str]]:
        s3 = client_for(home)
        found: list[tuple[str, str]] = []
        with reading("s3", home, "ListBuckets"):
            for page in s3.get_paginator("list_buckets").paginate():
                for b in page.get("Buckets", []):
                    name = str(b["Name"])
                    region = b.get("BucketRegion")
                    if not region:
                        location = s3.get_bucket_location(Bucket=name).get("LocationConstraint")
                        region = location or "us-east-1"
                    found.append((name, str(region)))
        return found

    return listing


def build_stale_objects(settings: Settings, clients: ClientFactory, context: GuardContext) -> Guard:
    """The stale-object guard: its policy (survey, decisions) and its bucket actuator."""
    from costguard.adapters.catalog import load_catalog  # noqa: PLC0415 - at run time only
    from costguard.services.guard import Guard  # noqa: PLC0415
    from costguard.services.sweep import SweepSettings  # noqa: PLC0415

    ledger = context.ledger
    home = settings.regions[0]
    regions: dict[str, str] = {}
    listing = bucket_lister(lambda r: clients("s3", r), home)

    def region_of(bucket: str) -> str:
        if bucket not in regions:
            regions.update(dict(listing()))
        return regions.get(bucket, home)

    rates = load_catalog().s3_standard_gb_month

    def rate(region: str) -> Decimal:
        # Never $0: an unknown region is priced at the dearest known rate (an upper bound).
        return rates.get(region) or max(rates.values(), default=Decimal("0.023"))

    store = S3ObjectStore(lambda r: clients("s3", r), region_of)
    time_left = TimeLeftHolder()
    options = SweepOptions(
        prefixes=settings.s3_sweep_prefixes,
        keep_prefix=settings.s3_keep_prefix,
        purge_noncurrent=settings.s3_purge_noncurrent,
        breaker_pct=settings.s3_breaker_pct,
        breaker_max_bytes=settings.s3_breaker_max_gib * 1024**3,
        backstop=settings.s3_backstop,
    )
    sweeps = SweepService(
        store,
        ledger,
        ledger,
        context.notifier,
        SweepSettings(settings.scope, rate(home), dry_run=settings.dry_run),
    )

    def listed() -> list[tuple[str, str]]:
        found = listing()
        regions.update(dict(found))
        return found

    policy = StaleObjectsPolicy(
        store=store,
        sweeps=sweeps,
        state=ledger,
        findings=ledger,
        scope=settings.scope,
        account=clients.account,
        regions=settings.regions,
        options=options,
        time_left=time_left,
        usd_per_gb_month=rate,
        list_buckets=listed,
        tag_keys=settings.tag_keys,
    )
    actuator = S3BucketActuator(store, sweeps, ledger, settings.scope, options, time_left)
    return Guard(
        "stale-objects",
        policy,
        [actuator],
        opt_in_tags=(Tags.TTL,),
        bind_time_left=lambda b: setattr(time_left, "time_left", b),
        findings=lambda: policy.found,
    )
