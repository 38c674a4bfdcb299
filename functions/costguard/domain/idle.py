"""Is a notebook idle? The judgement, pure: metric series in, a verdict with evidence out.

Rules (the README's "Idle notebooks" section states them for users):

- **Idle only if every datapoint in the window is under its threshold.** Each datapoint
  is the *Maximum* of one period (5 minutes by default), so "the period's maximum is
  under the threshold" means every sample in it was: nothing is averaged away.
- **Missing data is never idle.** A series is *covered* when at least
  :data:`MIN_COVERAGE` of the window's periods hold a datapoint (10 of 12 for an hour of
  5-minute periods: a late or dropped datapoint or two is tolerated, an agent that died
  half an hour ago is not). A series that is not covered makes the verdict ``UNKNOWN``,
  and ``UNKNOWN`` never acts. A datapoint above its threshold is ``BUSY`` whatever the
  coverage: activity seen is activity.
- **Several GPUs:** idle only if every GPU is; an instance whose type has N GPUs needs N
  GPU series, each covered.
- **EC2:** GPU (``CWAgent`` ``nvidia_smi_utilization_gpu``, per GPU), CPU
  (``AWS/EC2`` ``CPUUtilization``) and network (``NetworkIn`` + ``NetworkOut`` in the same
  period, in bytes). A GPU instance without GPU metrics is ``UNKNOWN``: its CPU alone says
  nothing (one busy core feeding 8 GPUs is 1 % of a p4d's CPU).
- **SageMaker notebook instances** are judged on CostGuard's heartbeat
  (:class:`costguard.domain.idle.Heartbeat`): idle if every ``JupyterActivity`` datapoint is 0 and
  every ``GPUUtilization`` datapoint is under the GPU threshold. A type with GPUs (the
  accelerator table's count, or EC2's for a type the table does not list) needs its
  ``GPUUtilization`` covered like any series: a heartbeat that sends Jupyter activity but
  no GPU reading (nvidia-smi timed out, printed ``[N/A]``) is ``UNKNOWN``, never judged on
  Jupyter alone; a non-NVIDIA accelerator (Inferentia, Trainium) is never judged idle on
  its heartbeat, since nothing reports its utilization. With no heartbeat at all,
  the maximum-runtime fallback: idle once InService for ``max_runtime`` *and* silent for
  all of that time. A heartbeat seen within ``max_runtime`` that then stopped (the agent
  killed, the instance too busy to publish) is missing data, so ``UNKNOWN``; after
  ``max_runtime`` of silence, the fallback applies as to a notebook that never had one.
- **Studio apps** are judged on their last user activity: idle if none within the window;
  no timestamp is ``UNKNOWN``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Final

from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.tags import Tags, parse_idle_minutes

#: ``costguard:role`` on an EC2 instance the idle guard judges as a notebook.
NOTEBOOK_ROLE = "notebook"
#: The share of a window's periods that must hold a datapoint for a series to count.
MIN_COVERAGE = Decimal("0.8")
#: GetMetricData returns at most 100,800 datapoints a call; with 500 queries a call, a
#: query may ask for at most this many periods (longer windows use longer periods).
MAX_PERIODS_PER_QUERY = 200
BASE_PERIOD = timedelta(minutes=5)
MB = 1_000_000


class Heartbeat:
    """The metrics CostGuard's notebook lifecycle configuration publishes every 5 minutes.

    The contract between the script that runs on a SageMaker notebook instance and the
    idle-notebook guard that reads it. No datapoint means "unknown", never idle.
    """

    NAMESPACE: Final = "CostGuard/Notebook"
    DIMENSION: Final = "NotebookInstanceName"
    #: 1 when a kernel was busy, or a kernel or terminal saw activity, in the last
    #: 5 minutes; 0 otherwise.
    JUPYTER_ACTIVITY: Final = "JupyterActivity"
    #: The busiest GPU's utilization in percent (absent on an instance without a GPU).
    GPU_UTILIZATION: Final = "GPUUtilization"
    PERIOD_SECONDS: Final = 300


class AgentGpu:
    """The CloudWatch agent's NVIDIA GPU metric the idle guard reads on EC2 notebooks.

    The agent adds ``index``, ``name`` and ``host``; ``InstanceId`` only when its
    ``append_dimensions`` asks for it, which the guard needs to find an instance's series.
    """

    NAMESPACE: Final = "CWAgent"
    UTILIZATION: Final = "nvidia_smi_utilization_gpu"
    INSTANCE: Final = "InstanceId"
    INDEX: Final = "index"


@dataclass(frozen=True, slots=True)
class GpuSeries:
    """One GPU of an instance: its index, and every dimension set it reported under."""

    index: str
    dimension_sets: tuple[tuple[tuple[str, str], ...], ...]


@dataclass(frozen=True, slots=True)
class Ec2Notebook:
    """An EC2 instance the idle guard considers (tagged a notebook, or any accelerator one).

    ``gpu_count``: NVIDIA GPUs of its type; 0 for a CPU type; None when the type is unknown.
    ``accelerator``: the accelerator's name when it is not an NVIDIA GPU (Trainium, Gaudi):
    nothing publishes its utilization, so it is never judged idle.
    """

    id: str
    region: str
    instance_type: str
    launched_at: datetime | None
    tags: Mapping[str, str] = field(default_factory=dict, hash=False)
    gpu_count: int | None = 0
    accelerator: str | None = None
    spot: bool = False


@dataclass(frozen=True, slots=True)
class NotebookInstance:
    """An InService SageMaker notebook instance."""

    name: str
    arn: str
    region: str
    instance_type: str | None
    #: When it last went InService (its LastModifiedTime), for the maximum-runtime fallback.
    in_service_since: datetime | None
    tags: Mapping[str, str] = field(default_factory=dict, hash=False)
    #: NVIDIA GPUs of its type, as for :class:`Ec2Notebook`: 0 for a CPU type, None when
    #: the type is unknown (then at least one GPU reading is needed).
    gpu_count: int | None = 0
    #: A non-NVIDIA accelerator's name: nothing reports its utilization.
    accelerator: str | None = None


class Verdict(StrEnum):
    IDLE = "idle"
    BUSY = "busy"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class IdleThresholds:
    """The deployment's thresholds (``config_spec``: ``idleGpuPct`` ...)."""

    window: timedelta = timedelta(minutes=60)
    gpu_pct: Decimal = Decimal(5)
    cpu_pct: Decimal = Decimal(5)
    #: NetworkIn + NetworkOut per 5 minutes, in bytes (scaled for longer periods).
    network_bytes_per_5min: Decimal = Decimal(5 * MB)
    #: SageMaker notebook instances without the heartbeat: stop after this long InService.
    max_runtime: timedelta = timedelta(hours=12)


@dataclass(frozen=True, slots=True)
class Series:
    """One metric's datapoints (each a period's Maximum) in the window, oldest first."""

    values: tuple[float, ...] = ()
    timestamps: tuple[datetime, ...] = ()

    @property
    def peak(self) -> float | None:
        return max(self.values) if self.values else None


EMPTY = Series()


class GpuDiscovery(StrEnum):
    """How the agent's GPU series are found (``idleGpuDiscovery``).

    ``SEARCH``: one CloudWatch ``SEARCH`` expression per instance finds and reads its GPU
    series in the ``GetMetricData`` calls themselves (no ``ListMetrics``); each is billed
    as a metric read. ``LIST``: ``ListMetrics`` pages for the region first, then one
    ``MetricStat`` per series: for CloudWatch back-ends that do not evaluate ``SEARCH``
    (moto), where a search finds nothing and every GPU instance would stay unknown.
    """

    SEARCH = "search"
    LIST = "list"


@dataclass(frozen=True, slots=True)
class SeriesSearch:
    """Every series of one metric whose dimensions include ``match``, found and read at once.

    Each series found is named by its ``label_dimension`` value (a GPU's ``index``); series
    of one name under other dimension sets (a new ``host``) are merged, and a series
    without that dimension is named ``?``. ``expected`` is how many series it should find
    (the instance's GPUs): a call reads at most 500 metrics, so calls are packed by it.
    """

    key: str
    namespace: str
    metric: str
    match: tuple[tuple[str, str], ...]
    label_dimension: str
    start: datetime
    end: datetime
    period: timedelta
    expected: int = 1

    @property
    def periods(self) -> int:
        return max(1, math.ceil((self.end - self.start) / self.period))


#: The name of a searched series that lacks the label dimension.
UNLABELLED = "?"


def merge_max(points: Iterable[tuple[datetime, float]]) -> Series:
    """One series from datapoints of several (one GPU under two hosts): the maximum per
    timestamp, oldest first."""
    best: dict[datetime, float] = {}
    for t, v in points:
        best[t] = max(v, best.get(t, v))
    ordered = sorted(best.items())
    return Series(tuple(v for _, v in ordered), tuple(t for t, _ in ordered))


@dataclass(frozen=True, slots=True)
class MetricQuery:
    """One metric series to read: its Maximum per ``period`` from ``start`` to ``end``."""

    key: str
    namespace: str
    metric: str
    dimensions: tuple[tuple[str, str], ...]
    start: datetime
    end: datetime
    period: timedelta

    @property
    def periods(self) -> int:
        return max(1, math.ceil((self.end - self.start) / self.period))


@dataclass(frozen=True, slots=True)
class Readings:
    """One batched read: each query's series by key, each search's series by key and name."""

    series: Mapping[str, Series] = field(default_factory=dict)
    found: Mapping[str, Mapping[str, Series]] = field(default_factory=dict)


def period_for(window: timedelta) -> timedelta:
    """The period a window is read at: 5 minutes, longer only to stay under the
    datapoint limit of one GetMetricData call (a period's Maximum keeps the rule exact)."""
    periods = window / BASE_PERIOD
    return BASE_PERIOD * max(1, math.ceil(periods / MAX_PERIODS_PER_QUERY))


def aligned_window(now: datetime, window: timedelta) -> tuple[datetime, datetime, timedelta]:
    """(start, end, period): whole periods ending at the last period boundary before ``now``.

    CloudWatch answers fastest (and identically across runs) on aligned times; the
    unfinished current period is left out, the next run sees it.
    """
    period = period_for(window)
    step = int(BASE_PERIOD.total_seconds())
    epoch = int(now.timestamp())
    end = datetime.fromtimestamp(epoch - epoch % step, tz=now.tzinfo)
    periods = max(1, math.ceil(window / period))
    return end - period * periods, end, period


def coverage(series: Series, window: timedelta, period: timedelta) -> Decimal:
    expected = max(1, math.ceil(window / period))
    return Decimal(min(len(set(series.timestamps)), expected)) / Decimal(expected)


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    reason: str
    evidence: Mapping[str, str] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()


def _pct(value: float | None) -> str:
    return "none" if value is None else f"{value:.1f}%"


def _mb(value: float | None) -> str:
    return "none" if value is None else f"{value / MB:.2f} MB"


@dataclass(frozen=True, slots=True)
class _Check:
    name: str
    series: Series
    threshold: Decimal
    shown: str  # how the peak reads in a reason


def _judge(
    checks: Sequence[_Check], window: timedelta, period: timedelta, what: str
) -> tuple[Verdict, str, dict[str, str]]:
    """Every check under its threshold and covered -> IDLE; any over -> BUSY; else UNKNOWN."""
    evidence: dict[str, str] = {"window_minutes": str(int(window.total_seconds() // 60))}
    busy: list[str] = []
    uncovered: list[str] = []
    for c in checks:
        peak = c.series.peak
        cov = coverage(c.series, window, period)
        evidence[f"{c.name}_max"] = c.shown if peak is not None else "none"
        evidence[f"{c.name}_datapoints"] = str(len(c.series.values))
        if peak is not None and Decimal(str(peak)) >= c.threshold:
            busy.append(f"{c.name} reached {c.shown}")
        elif cov < MIN_COVERAGE:
            uncovered.append(f"{c.name} ({len(c.series.values)} datapoints)")
    minutes = evidence["window_minutes"]
    if busy:
        return Verdict.BUSY, f"busy: {'; '.join(busy)} in the last {minutes} minutes", evidence
    if uncovered:
        return (
            Verdict.UNKNOWN,
            f"unknown: too few datapoints in the last {minutes} minutes for "
            + ", ".join(uncovered)
            + "; missing data is never idle",
            evidence,
        )
    return Verdict.IDLE, f"idle for {minutes} minutes: {what}", evidence


def judge_gpus(
    *,
    gpus: Sequence[Series],
    gpu_count: int,
    window: timedelta,
    thresholds: IdleThresholds,
    resource: str,
) -> Judgement:
    """The GPUs alone (round one): ``IDLE`` here only means "read the CPU and network too".

    Every one of ``gpu_count`` GPUs must report, each covered and under the threshold.
    """
    period = period_for(window)
    checks = [_Check(f"gpu{i}", s, thresholds.gpu_pct, _pct(s.peak)) for i, s in enumerate(gpus)]
    v, why, ev = _judge(checks, window, period, f"every GPU under {thresholds.gpu_pct}%")
    if v is Verdict.BUSY or len(gpus) >= gpu_count > 0:
        return Judgement(v, why, ev)
    ev["gpus_reporting"] = f"{len(gpus)} of {gpu_count}"
    return Judgement(
        Verdict.UNKNOWN,
        f"unknown: {len(gpus)} of its {gpu_count} GPUs report utilization (the CloudWatch "
        "agent's nvidia_smi metrics); missing data is never idle",
        ev,
        (
            Finding(
                FindingCode.IDLE_METRICS_MISSING,
                resource,
                f"{len(gpus)} of {gpu_count} GPUs publish nvidia_smi_utilization_gpu: install "
                "the CloudWatch agent with its nvidia_gpu metrics (append_dimensions InstanceId) "
                "so that CostGuard can tell whether the instance is idle",
                Severity.INFO,
            ),
        ),
    )


def judge_ec2(
    *,
    gpus: Sequence[Series],
    gpu_count: int,
    cpu: Series,
    network_in: Series,
    network_out: Series,
    window: timedelta,
    thresholds: IdleThresholds,
    resource: str,
) -> Judgement:
    """An EC2 notebook: every GPU, the CPU and the network idle and covered."""
    if gpu_count:
        gpu_judgement = judge_gpus(
            gpus=gpus, gpu_count=gpu_count, window=window, thresholds=thresholds, resource=resource
        )
        if gpu_judgement.verdict is not Verdict.IDLE:
            return gpu_judgement
    period = period_for(window)
    net = combined(network_in, network_out)
    scale = Decimal(str(period / BASE_PERIOD))
    checks = [
        *(_Check(f"gpu{i}", s, thresholds.gpu_pct, _pct(s.peak)) for i, s in enumerate(gpus)),
        _Check("cpu", cpu, thresholds.cpu_pct, _pct(cpu.peak)),
        _Check("network", net, thresholds.network_bytes_per_5min * scale, _mb(net.peak)),
    ]
    what = (f"every GPU under {thresholds.gpu_pct}%, " if gpu_count else "") + (
        f"CPU under {thresholds.cpu_pct}% and network under "
        f"{thresholds.network_bytes_per_5min / MB} MB per 5 minutes"
    )
    return Judgement(*_judge(checks, window, period, what))


def combined(a: Series, b: Series) -> Series:
    """NetworkIn + NetworkOut per period: a period counts only where both reported.

    Each is the period's Maximum, so the sum bounds the combined traffic from above
    (a safe direction: it can only make a resource look busier).
    """
    other = dict(zip(b.timestamps, b.values, strict=False))
    pairs = [(t, v + other[t]) for t, v in zip(a.timestamps, a.values, strict=False) if t in other]
    return Series(tuple(v for _, v in pairs), tuple(t for t, _ in pairs))


def judge_heartbeat(
    *,
    activity: Series,
    gpu: Series,
    in_service_since: datetime | None,
    now: datetime,
    window: timedelta,
    thresholds: IdleThresholds,
    resource: str,
    history: Series | None = None,
    gpu_count: int | None = 0,
    accelerator: str | None = None,
) -> Judgement:
    """A SageMaker notebook instance: its heartbeat, or the maximum-runtime fallback.

    ``history``: ``JupyterActivity`` over the last ``max_runtime``, None if not read. The
    fallback is idle only where it was read and holds nothing: a heartbeat that went
    silent is missing data, never idle. ``gpu_count``: the type's NVIDIA GPUs (None: a
    type nobody knows, so a GPU reading is needed); ``accelerator``: a non-NVIDIA
    accelerator's name, whose use nothing reports.
    """
    period = period_for(window)
    if not activity.values:
        fallback = _max_runtime(in_service_since, now, thresholds, resource)
        if fallback.verdict is not Verdict.IDLE:
            return fallback
        hours = f"{thresholds.max_runtime.total_seconds() / 3600:g}"
        if history is None:
            return Judgement(
                Verdict.UNKNOWN,
                f"unknown: no heartbeat in the window, and the last {hours} hours not read",
                fallback.evidence,
            )
        if history.values:
            minutes = int(window.total_seconds() // 60)
            return Judgement(
                Verdict.UNKNOWN,
                f"unknown: its heartbeat went silent (none in the last {minutes} minutes, "
                f"some in the last {hours} hours); missing data is never idle",
                {**fallback.evidence, "heartbeat": f"silent for {minutes}+ minutes"},
                (
                    Finding(
                        FindingCode.IDLE_METRICS_MISSING,
                        resource,
                        f"its CostGuard heartbeat stopped publishing: it cannot be judged "
                        f"idle until it resumes (or after {hours} hours of silence, when it "
                        "is stopped as a notebook without the heartbeat)",
                        Severity.INFO,
                    ),
                ),
            )
        return fallback
    checks = [_Check("jupyter_activity", activity, Decimal(1), f"{activity.peak:g}")]
    # The heartbeat publishes no GPU series on an instance without a GPU; on one with
    # GPUs (or of a type nobody knows) a missing GPU series is missing data.
    needs_gpu = accelerator is None and (gpu_count is None or gpu_count > 0)
    if gpu.values or needs_gpu:
        checks.append(_Check("gpu", gpu, thresholds.gpu_pct, _pct(gpu.peak)))
    what = "no Jupyter kernel or terminal activity" + (
        f" and the GPU under {thresholds.gpu_pct}%" if len(checks) > 1 else ""
    )
    v, why, ev = _judge(checks, window, period, what)
    if v is Verdict.BUSY:
        return Judgement(v, why, ev)
    if accelerator is not None:
        ev["accelerator"] = accelerator
        return Judgement(
            Verdict.UNKNOWN,
            f"unknown: nothing publishes the utilization of its {accelerator} accelerators; "
            "never judged idle on Jupyter activity alone",
            ev,
        )
    if needs_gpu and not gpu.values:
        gpus = "GPUs" if gpu_count is None else f"{gpu_count} GPU" + ("s" if gpu_count > 1 else "")
        ev["gpus_expected"] = "unknown" if gpu_count is None else str(gpu_count)
        return Judgement(
            Verdict.UNKNOWN,
            f"unknown: its heartbeat sends Jupyter activity but no {Heartbeat.GPU_UTILIZATION} for its "
            f"{gpus}; missing data is never idle",
            ev,
            (
                Finding(
                    FindingCode.IDLE_METRICS_MISSING,
                    resource,
                    f"its CostGuard heartbeat publishes no {Heartbeat.GPU_UTILIZATION} although its type "
                    f"has {gpus} (nvidia-smi failed, timed out or printed [N/A]): it cannot "
                    "be judged idle until the GPU reports",
                    Severity.INFO,
                ),
            ),
        )
    return Judgement(v, why, ev)


def _max_runtime(
    since: datetime | None, now: datetime, thresholds: IdleThresholds, resource: str
) -> Judgement:
    hours = thresholds.max_runtime.total_seconds() / 3600
    finding = Finding(
        FindingCode.NO_HEARTBEAT,
        resource,
        "publishes no CostGuard heartbeat: attach CostGuard's notebook lifecycle configuration "
        f"so that it is stopped when idle rather than after {hours:g} hours InService",
        Severity.INFO,
    )
    evidence = {"heartbeat": "none", "max_runtime_hours": f"{hours:g}"}
    if since is None:
        return Judgement(
            Verdict.UNKNOWN,
            "unknown: no heartbeat and no InService time",
            evidence,
            (finding,),
        )
    ran = now - since
    evidence["in_service_hours"] = f"{ran.total_seconds() / 3600:.1f}"
    if ran >= thresholds.max_runtime:
        return Judgement(
            Verdict.IDLE,
            f"InService for {ran.total_seconds() / 3600:.1f} hours without a heartbeat "
            f"(maximum runtime {hours:g} hours)",
            evidence,
            (finding,),
        )
    return Judgement(
        Verdict.UNKNOWN,
        f"unknown: no heartbeat; InService {ran.total_seconds() / 3600:.1f} of the "
        f"{hours:g} hours allowed without one",
        evidence,
        (finding,),
    )


def judge_studio(
    last_user_activity: datetime | None, created: datetime | None, now: datetime, window: timedelta
) -> Judgement:
    """A Studio app: idle when no user activity within the window (and it is older than it)."""
    minutes = int(window.total_seconds() // 60)
    evidence = {
        "window_minutes": str(minutes),
        "last_user_activity": last_user_activity.isoformat() if last_user_activity else "none",
    }
    if last_user_activity is None:
        return Judgement(Verdict.UNKNOWN, "unknown: Studio reports no last user activity", evidence)
    if now - last_user_activity < window:
        return Judgement(Verdict.BUSY, f"busy: used {_ago(now - last_user_activity)} ago", evidence)
    if created is not None and now - created < window:
        return Judgement(Verdict.BUSY, "busy: created within the window", evidence)
    return Judgement(
        Verdict.IDLE,
        f"idle: no user activity for {_ago(now - last_user_activity)} (window {minutes} minutes)",
        evidence,
    )


def _ago(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes} minutes" if minutes < 120 else f"{minutes / 60:.1f} hours"


#: Tags AWS (or Karpenter) puts on an instance that a group owns and replaces when it is
#: stopped: stopping one "to save money" gets it terminated and replaced, so the idle
#: guard never stops it. The value names the group, for the reason.
_MANAGING_TAGS = (
    (Tags.AUTOSCALING_GROUP, "Auto Scaling group"),
    (Tags.EKS_NODEGROUP, "EKS managed node group"),
    (Tags.EKS_CLUSTER, "EKS cluster"),
    (Tags.AWS_EKS_CLUSTER, "EKS cluster"),
    (Tags.KARPENTER_NODEPOOL, "Karpenter node pool"),
    (Tags.KARPENTER_PROVISIONER, "Karpenter provisioner"),
    (Tags.EC2_FLEET, "EC2 Fleet"),
    (Tags.SPOT_FLEET, "Spot Fleet"),
    (Tags.EMR_CLUSTER, "EMR cluster"),
)


def managed_by(tags: Mapping[str, str]) -> str | None:
    """The group that owns an EC2 instance and would replace it if stopped, or None.

    An Auto Scaling group (EKS managed node groups and AWS Batch use one too), an EKS
    or Karpenter node (``kubernetes.io/cluster/<name>``), an EC2 or Spot Fleet, an EMR
    cluster. Such an instance is never a notebook, whatever its tags say.
    """
    for key, what in _MANAGING_TAGS:
        value = tags.get(key)
        if value is not None:
            return f"{what} {value}".strip()
    for key in tags:
        if key.startswith(Tags.KARPENTER_CLUSTER_PREFIX):
            return f"Kubernetes cluster {key.removeprefix(Tags.KARPENTER_CLUSTER_PREFIX)}"
    return None


def window_of(
    tags: Mapping[str, str], default: timedelta, resource: str
) -> tuple[timedelta, tuple[Finding, ...]]:
    """The resource's window: ``costguard:idle-minutes``, or the default (with a finding
    when the tag is malformed)."""
    raw = tags.get(Tags.IDLE_MINUTES)
    if raw is None:
        return default, ()
    parsed = parse_idle_minutes(raw)
    if isinstance(parsed, int):
        return timedelta(minutes=parsed), ()
    shown = raw if len(raw) <= 40 else raw[:39] + "…"
    return default, (
        Finding(
            FindingCode.MALFORMED_IDLE_MINUTES,
            resource,
            f"tag {Tags.IDLE_MINUTES}={shown!r} {parsed}; the default window of "
            f"{int(default.total_seconds() // 60)} minutes is used",
        ),
    )
