"""The small interfaces that services are wired from. Adapters implement them on AWS;
``costguard.adapters.memory`` implements them in memory for tests and for local reasoning."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from costguard.domain.advice import EndpointVariant
    from costguard.domain.alerts import Alert
    from costguard.domain.catalog_merge import CatalogInUse
    from costguard.domain.decisions import ApplyResult, Decision, NotYet, Observed, Target
    from costguard.domain.findings import Finding
    from costguard.domain.idle import (
        Ec2Notebook,
        GpuSeries,
        MetricQuery,
        NotebookInstance,
        Readings,
        SeriesSearch,
    )
    from costguard.domain.lifetime import TrainingJob
    from costguard.domain.models import Resource, ResourceKind
    from costguard.domain.pricing import PriceCatalog, SpotKey
    from costguard.domain.spend import AccrualKey, Increment, Observation
    from costguard.domain.stale_volumes import AttachRecord
    from costguard.domain.studio import StudioApp
    from costguard.domain.sweep import Lifecycle, Lock, StoredObject


class SlackCallError(Exception):
    """A call to Slack failed. Its message says why (Slack's error code, a status, a timeout)
    and never holds a token, a signing secret or a webhook URL: it may be logged."""


class SourceError(Exception):
    """A service or region could not be read. The scan reports it and goes on."""

    def __init__(self, service: str, region: str, operation: str, code: str, message: str):
        super().__init__(f"{service} in {region}: {operation} failed with {code}: {message}")
        self.service = service
        self.region = region
        self.operation = operation
        self.code = code
        self.detail = message


class PartialReadError(SourceError):
    """A batched read failed in some of its calls: ``found`` is what the others read in
    full, so one failing call does not cost the answers already read."""

    found: Mapping[str, Any]

    def __init__(self, service: str, region: str, operation: str, code: str, message: str):
        super().__init__(service, region, operation, code, message)
        self.found = {}


class AccessDeniedError(SourceError):
    """The credentials lack a permission (IAM, SCP or an opted-out region)."""


class ThrottledError(SourceError):
    """AWS kept throttling after the adaptive retries gave up."""


@dataclass(frozen=True, slots=True)
class Inventory:
    """What one source found in one region, and what it could not read."""

    resources: tuple[Resource, ...] = ()
    findings: tuple[Finding, ...] = ()


class InventorySource(Protocol):
    """One AWS service's view of a region (EC2, EKS, SageMaker)."""

    name: str

    def collect(self, region: str, now: datetime) -> Inventory: ...


class SpotPriceSource(Protocol):
    def latest(
        self, region: str, instance_types: Sequence[str], now: datetime
    ) -> Mapping[SpotKey, Decimal]:
        """Latest Linux spot price per (region, AZ, type) for the given types."""


@dataclass(frozen=True, slots=True)
class ProjectMonth:
    project: str | None
    month: str
    usd: Decimal
    estimated_usd: Decimal
    #: The month's spend by UTC day of the month (1-31). None: the row was written before
    #: the ledger kept days, so only the month-to-date is known.
    days: Mapping[int, Decimal] | None = None
    #: Spend the row held before it began keeping days (a row written by an older
    #: version, then accrued by this one): part of ``usd``, in no day.
    undated_usd: Decimal = Decimal(0)
    #: The month's spend by category (``compute``, ``storage``). None: the row was written
    #: before the ledger split months by category; what ``usd`` holds beyond the
    #: categories is "not split" (:func:`costguard.domain.spend.month_split`).
    by_category: Mapping[str, Decimal] | None = None


@dataclass(frozen=True, slots=True)
class ScanCommit:
    """Everything one scan writes to the ledger, applied exactly once and atomically.

    ``observations`` is the *complete* set the ledger keeps after this scan (what was
    seen now, plus what earlier scans saw and this one did not): the ledger replaces
    its snapshot with it in the same write that adds the increments and moves the
    watermark, so a failure can never leave spend added without the observations
    that say it was added.
    """

    scope: str
    previous_watermark: datetime | None
    now: datetime
    increments: Mapping[AccrualKey, Increment]
    observations: Sequence[Observation]


class CommitOutcome(StrEnum):
    APPLIED = "applied"
    #: The same scan (same ``now``) was committed before: a retry; nothing added twice.
    ALREADY_APPLIED = "already-applied"
    #: Another scan moved the ledger first, or this scan is older than the last one
    #: committed (a late retry): its accrual is dropped, not doubled, and time never
    #: moves backwards.
    CONTENDED = "contended"


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One thing CostGuard did (or would have done, in dry-run), and what it found."""

    scope: str
    at: datetime
    event_id: str
    action: str
    resource: str
    outcome: str
    details: Mapping[str, Any] = field(default_factory=dict)


class SpendStore(Protocol):
    """Month-to-date per project, the observation snapshot, and the scan watermark."""

    def watermark(self, scope: str) -> datetime | None: ...

    def observations(self, scope: str) -> dict[str, Observation]: ...

    def commit(self, commit: ScanCommit) -> CommitOutcome:
        """Add the increments, replace the observations and move the watermark, all or nothing.

        Refused (``CONTENDED``, nothing written) unless the watermark is still
        ``previous_watermark`` and ``now`` is after it; ``ALREADY_APPLIED`` (nothing
        written) when the watermark is already ``now``.
        """

    def month_totals(self, scope: str, month: str) -> dict[str | None, ProjectMonth]: ...


class FindingStore(Protocol):
    def record_findings(self, scope: str, now: datetime, findings: Sequence[Finding]) -> None:
        """Keep the day's findings, one per (code, resource), however many scans saw them."""

    def findings(self, scope: str, day: str) -> list[Finding]: ...


class ClaimStore(Protocol):
    """Exactly-once work: one-shot records and two-phase claims."""

    def put_once(self, namespace: str, key: str, now: datetime, attrs: Mapping[str, Any]) -> bool:
        """Record ``key`` once; True for the first writer only, even under concurrency."""

    def claim(
        self,
        namespace: str,
        key: str,
        now: datetime,
        lease: timedelta,
        attrs: Mapping[str, Any],
    ) -> bool:
        """Phase one of a two-phase claim: True for the one caller that may do the work.

        A key is claimable when it was never claimed, when its work was released (or
        reopened), or when a pending claim's lease has run out (its holder crashed between
        claim and work), so a crash can delay the work by one lease but never lose it. A
        ``now`` older than the key's last claim (a late retry) is refused: its lease would
        otherwise have run out before it began, and let a second holder in.
        """

    def confirm(self, namespace: str, key: str, now: datetime, fence: str | None = None) -> None:
        """Phase two: the work is done; the key is not claimable again, unless that work
        is undone (:meth:`reopen`, naming the same ``fence``: what the work was, e.g. the
        deadline of a warning)."""

    def reopen(self, namespace: str, key: str, fence: str, *, keep: str | None = None) -> bool:
        """The confirmed work named ``fence`` was undone (a warning withdrawn): the key is
        claimable again at once. True if this call reopened it.

        Fenced: only a claim confirmed with ``fence``, or with a fence that extends it
        (``fence/...``: the same warning, whatever it was about), is reopened, and never
        one confirmed with ``keep`` (the work the caller is about to claim again, which
        may be landing right now). A pending claim (its holder still at work), a
        ``put_once`` record, and a claim confirmed since for other work (a newer warning
        under the same key) are left as they are, so a late retry of an old withdrawal
        can never free a newer claim.
        """

    def release(self, namespace: str, key: str, claimed_at: datetime) -> None:
        """The work failed: the key is claimable again at once (no delete is needed).

        Fenced: only the holder that claimed at ``claimed_at`` can release, so a holder
        whose lease ran out cannot free the claim of the run that took over.
        """

    def status(self, namespace: str, key: str) -> str | None:
        """``pending``, ``sent`` (confirmed, or a put_once record), ``released`` or None."""

    def statuses(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """:meth:`status` of many ``(namespace, key)`` at once, in shared reads (a pass
        reads the records of every warning it holds in calls per 100, not per warning).
        Keys without a record are absent."""


class AuditLog(Protocol):
    def audit(self, event: AuditEvent) -> bool:
        """Append to the audit trail; False if that event id was already recorded."""

    def audit_many(self, events: Sequence[AuditEvent]) -> None:
        """Append many events in shared writes (25 a call on DynamoDB). Idempotent: an
        event written again (same scope, time and id) is the same record, not another."""

    def audit_trail(self, scope: str, month: str) -> list[AuditEvent]: ...


class RateHistory(Protocol):
    def record_rates(self, scope: str, at: datetime, rates: Mapping[str, Decimal]) -> None:
        """Append one run-rate sample per project (the anomaly baseline)."""

    def rate_history(
        self, scope: str, since: datetime
    ) -> dict[str, list[tuple[datetime, Decimal]]]: ...


@dataclass(frozen=True, slots=True)
class BucketReading:
    """One S3 bucket of a region, as the day's read saw it: its tags and, per CloudWatch
    storage type, the bytes of its latest daily ``BucketSizeBytes`` datapoint."""

    name: str
    tags: Mapping[str, str]
    created_at: datetime | None
    stored_bytes: tuple[tuple[str, int], ...]


class BucketSizes(Protocol):
    """Tagged S3 buckets of a region and their size per storage class: a few batched
    reads (pages of buckets, tags and metrics; one ``GetMetricData`` per 500 series),
    never a call per bucket. Meant to be read once a day: the metric is daily."""

    def read(
        self, region: str, project_keys: Sequence[str], now: datetime
    ) -> list[BucketReading]: ...


class StateStore(Protocol):
    def get_state(self, scope: str, name: str) -> tuple[dict[str, Any], int]:
        """A small JSON document and its version (0 when absent)."""

    def put_state(
        self, scope: str, name: str, value: Mapping[str, Any], expected_version: int
    ) -> bool:
        """Optimistic write: False if someone else wrote since ``expected_version``."""


class AlertLog(Protocol):
    def record_alert(self, scope: str, at: datetime, alert: Mapping[str, Any]) -> None: ...

    def recent_alerts(
        self, scope: str, since: datetime, until: datetime
    ) -> list[dict[str, Any]]: ...


class ActionLedger(ClaimStore, AuditLog, StateStore, Protocol):
    """What the executor needs: claims, so overlapping runs act once, the audit trail,
    and a small document of what a dry-run last reported (so it is recorded once)."""


class Ledger(
    SpendStore, FindingStore, ClaimStore, AuditLog, RateHistory, StateStore, AlertLog, Protocol
):
    """CostGuard's memory, as one table: every small store above.

    Services take the smallest store they need; only composition holds the whole.
    """


#: Every small store, for the contract test that checks each method is covered.
LEDGER_STORES = (SpendStore, FindingStore, ClaimStore, AuditLog, RateHistory, StateStore, AlertLog)


class Notifier(Protocol):
    """Publishes an alert to every channel (SNS fans out to e-mail, chat, queues)."""

    def publish(self, alert: Alert) -> str:
        """Returns the message id; raises if the alert could not be published."""


class Actuator(Protocol):
    """Changes one kind of resource; the only code that may stop or delete anything.

    The executor calls it, never a policy or the scan. ``permissions`` declares the
    IAM statements its calls need (tag-conditioned where AWS allows), from which the
    actuator role is built and against which a test replays the calls it makes.
    """

    kind: str
    #: Tag keys whose presence lets this actuator act on a resource with no project: its
    #: IAM conditions must allow exactly that (the EC2 actuator allows none).
    opt_in_tags: tuple[str, ...]

    def inspect(self, targets: Sequence[Target]) -> Mapping[str, Observed]:
        """Each resource's state and tags now, by ``Target.key``; a target absent from the
        answer no longer exists. Read in as few calls as the service allows (one
        ``DescribeInstances`` for up to 1,000 instances), never one per resource where
        a batched read exists."""

    def mark(self, target: Target, key: str, value: str) -> None: ...

    def unmark(self, target: Target, key: str) -> None: ...

    def apply(self, decision: Decision) -> str | ApplyResult | NotYet:
        """Do the action; return what was done, in words. Raise if it failed.

        An :class:`ApplyResult` with ``acted=False`` says the action is impossible for
        this resource and nothing changed (the owner gets ``detail`` as a notice). An
        action that spans runs (snapshot, then delete) returns :class:`NotYet` until it
        is done: no action is counted, and a later run calls ``apply`` again.
        """


class AttachHistory(Protocol):
    """Which volumes were attached since a time: EC2 keeps no attachment history, so this
    is CloudTrail's event history (``AttachVolume``), read a region at a time."""

    def attachments(
        self, region: str, volume_id: str, since: datetime, run: datetime
    ) -> AttachRecord:
        """``volume_id``'s attachments at or after ``since``, as far as the history shows.

        ``run`` is the asking run's time: the answers of one run share their reads (calls
        grow with the region's pages of events, not with the volumes asked about), and a
        later run reads afresh. Raises :class:`SourceError` when the history cannot be read.
        """


@runtime_checkable
class StandingActuator(Actuator, Protocol):
    """An actuator whose standing action leaves machinery in AWS between runs.

    The stale-object sweep installs a lifecycle rule: S3 then expires objects with no
    executor, exemption or breaker in the way. Such machinery belongs to the decision that
    set it up, so the executor calls :meth:`stand_down` on every path where that decision
    does not act this run (dry-run, exempt, out of scope, warned afresh, waiting, no
    longer wanted), dry-run included: withdrawing CostGuard's own machinery changes
    nothing of the owner's, so it is not an action that dry-run only reports. The
    actuator's ``apply`` keeps it in step on the one path that acts.
    """

    def stand_down(self, target: Target) -> str | None:
        """Withdraw what this actuator left running for ``target``; idempotent, and free
        when nothing is left. Returns what was withdrawn, in words, or None."""


@dataclass(frozen=True, slots=True)
class StoredCatalog:
    """One version of the price catalog as stored: the JSON document and its version."""

    version: int
    stored_at: datetime
    document: Mapping[str, Any]


class CatalogStoreError(Exception):
    """The stored catalog cannot be read or written (corrupt item, oversized document).

    ``version``: the version the unreadable ``CURRENT`` item says it holds, when that much
    could be read, so that a refresh can replace it with a conditional write.
    """

    def __init__(self, message: str, *, version: int | None = None) -> None:
        super().__init__(message)
        self.version = version


class CatalogStore(Protocol):
    """The deployed guard's price catalog: a current version and every earlier one."""

    def current(self) -> StoredCatalog | None:
        """The catalog the scan uses; None when no refresh has stored one.

        Raises :class:`CatalogStoreError` when it is stored but cannot be read."""

    def latest_version(self) -> int:
        """The highest version ever stored (0: none), which may be above ``current()``'s
        after an operator rolled ``CURRENT`` back: a new version goes above it."""

    def get(self, version: int) -> StoredCatalog | None:
        """An earlier version (audit, rollback); None if it was never stored."""

    def put(
        self, document: Mapping[str, Any], *, expected_version: int, at: datetime
    ) -> int | None:
        """Store ``document`` as version ``document["version"]`` (above ``expected_version``),
        if the current one is still ``expected_version`` (0: none yet). Returns the new
        version, or None when another writer stored first: nothing is written, and the
        caller merges again."""


class CatalogSource(Protocol):
    """Where a scan gets its prices when it runs (the deployed store, or the package)."""

    def read(self) -> tuple[PriceCatalog, CatalogInUse]: ...


class PriceAnswer(dict[str, Mapping[str, Decimal]]):
    """What a :class:`PriceSource` read for one region (section -> name -> USD), what it
    refused to take as a price: ``rejected`` ("section/region/name: why"), each an answer
    that was malformed or ambiguous, and ``absent`` (section -> name -> why), each name
    asked for that the source has no rate for. A plain mapping is an answer with nothing
    rejected and no reasons."""

    def __init__(
        self,
        prices: Mapping[str, Mapping[str, Decimal]],
        rejected: Sequence[str] = (),
        absent: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        super().__init__(prices)
        self.rejected = tuple(rejected)
        self.absent: Mapping[str, Mapping[str, str]] = absent or {}


class PriceSource(Protocol):
    """List prices of one region: the AWS Price List API, or a fake."""

    def fetch(
        self, region: str, wanted: Mapping[str, frozenset[str]]
    ) -> Mapping[str, Mapping[str, Decimal]]:
        """section -> name -> USD for what the source has of ``wanted`` (section -> names).

        Raises :class:`SourceError` (:class:`ThrottledError` after its retries) when the
        region cannot be read; a region the source does not know returns nothing.
        """


class MetricReader(Protocol):
    """Batched CloudWatch reads: calls grow with the metrics / 500, never one per resource."""

    def read(
        self,
        region: str,
        queries: Sequence[MetricQuery],
        searches: Sequence[SeriesSearch] = (),
    ) -> Readings:
        """Each query's period maxima in its range (empty when none), and each search's
        series found, by name (none found: an empty mapping), in shared calls."""

    def gpu_series(
        self, region: str, instance_ids: Collection[str]
    ) -> Mapping[str, tuple[GpuSeries, ...]]:
        """The agent's GPU series of each instance, listed (absent: none reported); for
        ``GpuDiscovery.LIST``."""


class EndpointMetrics(Protocol):
    """SageMaker endpoint GPU utilization and invocations for the scan's advice and cost
    per prediction: batched passes a region."""

    def gpu_utilization(
        self, region: str, variants: Sequence[EndpointVariant], start: datetime, end: datetime
    ) -> Mapping[str, Decimal]:
        """By ``variant.key``: ``GPUUtilization`` averaged over ``[start, end)`` as CloudWatch
        reports it (summed over each instance's GPUs). A variant without data is absent:
        its utilization is unknown, never 0. Raises :class:`SourceError`."""

    def invocations(
        self, region: str, variants: Sequence[EndpointVariant], start: datetime, end: datetime
    ) -> Mapping[str, Mapping[datetime, Decimal]]:
        """By ``variant.key``: ``Invocations`` summed by the hour (hour start -> count) over
        ``[start, end)``, batched (calls grow with the variants / 500, never one each). A
        variant that served none maps to an empty mapping; one that could not be read in
        full is absent (unknown). Raises :class:`SourceError`."""


class NotebookCandidates(Protocol):
    """What the idle-notebook guard may judge: running EC2 notebooks, InService notebooks."""

    def ec2_notebooks(self, region: str) -> Sequence[Ec2Notebook]: ...

    def notebook_instances(self, region: str) -> Sequence[NotebookInstance]: ...


class TrainingJobs(Protocol):
    """What the maximum-lifetime guard may stop besides instances and notebooks."""

    def in_progress(self, region: str) -> Sequence[TrainingJob]: ...


class StudioApps(Protocol):
    """Running SageMaker Studio apps (JupyterLab, CodeEditor) with their last user activity."""

    def apps(self, region: str) -> Sequence[StudioApp]: ...

    def idle_shutdown_gaps(self, region: str) -> Sequence[Finding]:
        """Domains and spaces without Studio's own idle shutdown (or tag propagation)."""


class ObjectStore(Protocol):
    """One S3 account's buckets, as the stale-object sweep reads and deletes them."""

    def list_page(
        self, bucket: str, prefix: str, start_after: str
    ) -> tuple[Sequence[StoredObject], bool]:
        """Up to 1,000 current objects under ``prefix`` after ``start_after``, in key order,
        and whether more follow."""

    def object_lock(self, bucket: str) -> bool:
        """Whether Object Lock is enabled on the bucket (then each candidate is checked)."""

    def lock_of(self, bucket: str, obj: StoredObject) -> Lock | None:
        """The object's retention and legal hold now; None if it is gone."""

    def delete(self, bucket: str, objects: Sequence[StoredObject]) -> DeleteResult:
        """Delete at most 1,000 keys, each conditional on its ETag, in one ``DeleteObjects``
        call (more only when keys would read back alike); results name the keys as given."""

    def bucket_tags(self, bucket: str) -> dict[str, str] | None:
        """The bucket's tags now; None if the bucket is gone."""

    def lifecycle(self, bucket: str) -> Lifecycle:
        """The bucket's lifecycle configuration (no rules when it has none)."""

    def put_lifecycle(self, bucket: str, lifecycle: Lifecycle) -> None:
        """Replace the configuration with ``lifecycle`` (delete it when it has no rules)."""


@dataclass(frozen=True, slots=True)
class DeleteResult:
    deleted: tuple[str, ...] = ()
    #: Key -> S3 error code (``PreconditionFailed``: changed since listed, so kept).
    errors: Mapping[str, str] = field(default_factory=dict)


class TimeLeft(Protocol):
    """How long the run may go on: the Lambda's remaining time, less a margin."""

    def seconds_left(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Described:
    """What a launch event's resource is now.

    ``resources``: what spends (an instance; an endpoint's instance-backed variants), empty
    when it does not spend on accelerators (``why`` says so). ``parents``: the EKS node group
    and cluster its project may be inherited from."""

    resources: tuple[Resource, ...] = ()
    parents: tuple[Resource, ...] = ()
    findings: tuple[Finding, ...] = ()
    why: str = ""


class LaunchedResourceReader(Protocol):
    """One resource a launch event names, read on its own in one account."""

    @property
    def account(self) -> str: ...

    def describe(self, kind: ResourceKind, region: str, resource_id: str) -> Described | None:
        """The resource as it is now; None when it no longer exists."""
        ...

    def spot_prices(
        self, region: str, instance_types: Sequence[str], now: datetime
    ) -> Mapping[SpotKey, Decimal]: ...

    def launcher(self, resource: Resource, now: datetime) -> str | None:
        """Who launched it, when a cheap lookup knows (else None)."""
        ...
