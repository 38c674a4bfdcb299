"""The idle-notebook policy: select candidates, read their metrics in batches, judge.

It returns a :class:`Decision` for every candidate it looked at (``NONE`` for busy,
unknown, exempt or too young, with the tags it saw, so that the executor makes no call
for a busy resource that was never warned); the executor warns, waits and stops.

What one pass reads, cheapest first (GetMetricData is billed per metric requested):

1. **Selection, no metric read:** not owned by a group that would replace it (Auto
   Scaling, EKS, Karpenter, EC2/Spot Fleet, EMR: see ``managed_by``; never stopped, a
   finding if it is tagged a notebook), running longer than its window, not exempt. A
   resource already warned (``costguard:action-after`` in the future, consistent with
   its launch time) is not read again until its deadline: it is then read once from
   the window before the warning to now, however late the run (same price as one
   window: billing is per metric; those warned by the same run share one range, so
   one set of calls), so activity at any time since the warning withdraws it. A
   warning whose deadline passed more than ``MAX_LATE`` ago is withdrawn instead (the
   owner is warned afresh), and one from before the current launch or InService is
   void (``Decision.session_start``: the executor warns about the new session).
2. **Round 1:** the GPU series of GPU instances (by default one ``SEARCH`` per instance,
   which finds and reads them in the same calls; with ``GpuDiscovery.LIST``, ``ListMetrics``
   pages for the region, then one MetricStat per GPU series), CPU and network of CPU-only
   instances, and the ``JupyterActivity`` heartbeat of notebook instances.
3. **Round 2, only where round 1 looked idle:** CPU and network of GPU instances whose
   every GPU was idle; the heartbeat's ``GPUUtilization`` of inactive notebooks whose type
   has GPUs (or is unknown; a missing GPU series is then unknown, never idle); and, for
   a notebook with no heartbeat in its window that the maximum-runtime fallback would
   stop, its ``JupyterActivity`` over the last ``max_runtime`` (one range for all, so
   batched): any datapoint there means the heartbeat went silent, which is unknown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TypeVar

from costguard.domain.calendar import require_utc
from costguard.domain.decisions import Action, Decision, Target, action_after, deadline_tag
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.idle import (
    EMPTY,
    NOTEBOOK_ROLE,
    AgentGpu,
    Ec2Notebook,
    GpuDiscovery,
    GpuSeries,
    Heartbeat,
    IdleThresholds,
    Judgement,
    MetricQuery,
    NotebookInstance,
    Series,
    SeriesSearch,
    Verdict,
    aligned_window,
    judge_ec2,
    judge_gpus,
    judge_heartbeat,
    judge_studio,
    managed_by,
    merge_max,
    window_of,
)
from costguard.domain.models import ResourceKind, resource_key
from costguard.domain.money import ZERO
from costguard.domain.pricing import PriceCatalog
from costguard.domain.studio import StudioApp
from costguard.domain.tags import TagKeys, Tags, read_tags
from costguard.domain.windows import before
from costguard.ports import MetricReader, NotebookCandidates, SourceError, StudioApps

T = TypeVar("T")

EC2_NAMESPACE = "AWS/EC2"
#: A warning whose deadline passed this long ago without a run is withdrawn rather than
#: acted on (the owner is warned afresh): a stop should follow a warning its owner can
#: still connect to it, and the read since the warning stays within CloudWatch's 5-minute
#: retention (63 days) at most 7 days + 2 days + a 7-day window: 16 days, 110-minute periods.
MAX_LATE = timedelta(days=2)
#: The series key of a notebook's heartbeat over the last maximum runtime.
HISTORY = "JupyterActivity#history"
#: Studio apps the guard may delete (the space and its storage stay).
STUDIO_APP_TYPES = frozenset({"JupyterLab", "CodeEditor"})


@dataclass(frozen=True, slots=True)
class IdleSettings:
    regions: tuple[str, ...]
    account: str = ""
    thresholds: IdleThresholds = field(default_factory=IdleThresholds)
    #: How long the owner is warned before the stop.
    grace: timedelta = timedelta(minutes=60)
    tag_keys: TagKeys = field(default_factory=TagKeys)
    #: How GPU series are found: SEARCH in the reads themselves, or ListMetrics first.
    gpu_discovery: GpuDiscovery = GpuDiscovery.SEARCH


@dataclass
class _Candidate:
    kind: ResourceKind
    action: Action
    target: Target
    tags: Mapping[str, str]
    window: timedelta
    usd_per_hour: Decimal
    price_note: str
    ec2: Ec2Notebook | None = None
    notebook: NotebookInstance | None = None
    #: Its GPUs as listed (``GpuDiscovery.LIST``), each read under every dimension set.
    gpus: tuple[GpuSeries, ...] = ()
    #: Its GPUs as searched (``GpuDiscovery.SEARCH``): index -> merged series; None if
    #: not searched.
    found: Mapping[str, Series] | None = None
    series: dict[str, Series] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    #: When its current session began (launch, InService): older warnings are void.
    since: datetime | None = None


class IdlePolicy:
    """Decides which notebooks are idle; the guard's executor acts on the decisions."""

    def __init__(
        self,
        candidates: NotebookCandidates,
        metrics: MetricReader,
        catalog: PriceCatalog,
        settings: IdleSettings,
        *,
        studio: StudioApps | None = None,
    ) -> None:
        self._candidates = candidates
        self._metrics = metrics
        self._catalog = catalog
        self._s = settings
        self._studio = studio
        #: What the last :meth:`decide` found wrong (malformed tags, missing metrics...).
        self.findings: list[Finding] = []

    # -- the pass ----------------------------------------------------------------------

    def decide(self, now: datetime) -> list[Decision]:
        now = require_utc(now)
        self.findings = []
        decisions: list[Decision] = []
        for region in self._s.regions:
            decisions.extend(self._region(region, now))
        return decisions

    def _readable(self, region: str, what: str, read: Callable[[], list[T]]) -> list[T]:
        """One source of a region, or nothing when it cannot be read (a service control
        policy refusing the region, throttling): reported, never judged, and the other
        sources and regions go on. Nothing unread is acted on."""
        try:
            return read()
        except SourceError as exc:
            self.findings.append(Finding(FindingCode.SCAN_FAILED, f"{region}/{what}", str(exc)))
            return []

    def _region(self, region: str, now: datetime) -> list[Decision]:
        decisions: list[Decision] = []
        to_read: list[_Candidate] = []
        ec2_notebooks = self._readable(
            region, "ec2-notebooks", lambda: list(self._candidates.ec2_notebooks(region))
        )
        for ec2 in ec2_notebooks:
            c = self._ec2_candidate(ec2)
            group = managed_by(ec2.tags)
            if group is not None:
                decisions.append(self._managed(c, group, now))
                continue
            decisions.extend(self._select(c, ec2.launched_at, now, to_read))
        for nb in self._readable(
            region, "notebook-instances", lambda: list(self._candidates.notebook_instances(region))
        ):
            c = self._notebook_candidate(nb)
            decisions.extend(self._select(c, nb.in_service_since, now, to_read))
        if (studio := self._studio) is not None:
            self.findings.extend(
                self._readable(region, "studio", lambda: list(studio.idle_shutdown_gaps(region)))
            )
            for app in self._readable(region, "studio-apps", lambda: list(studio.apps(region))):
                if app.app_type in STUDIO_APP_TYPES and app.status == "InService":
                    decisions.append(self._studio_decision(app, now))
        if to_read:
            # Metrics that cannot be read judge nothing: unknown is never idle.
            decisions.extend(
                self._readable(
                    region, "metrics", lambda: self._read_and_judge(region, to_read, now)
                )
            )
        return decisions

    def _managed(self, c: _Candidate, group: str, now: datetime) -> Decision:
        """Never a candidate: the group would replace (terminate) a stopped member.

        A NONE decision, not silence: a warning tagged before this rule withdraws. Tagged
        a notebook all the same, the owner is told why it is never stopped.
        """
        if c.tags.get(Tags.ROLE, "").strip().lower() == NOTEBOOK_ROLE:
            finding = Finding(
                FindingCode.IDLE_MANAGED_INSTANCE,
                c.target.key,
                f"tagged {Tags.ROLE}={NOTEBOOK_ROLE} but owned by the {group}: never "
                "stopped when idle (the group would replace it); scale the group instead",
                Severity.INFO,
            )
            c.findings.append(finding)
            self.findings.append(finding)
        return self._decision(
            c, None, now, f"managed by the {group}: stopping it would only get it replaced", {}
        )

    def _select(
        self,
        c: _Candidate,
        since: datetime | None,
        now: datetime,
        to_read: list[_Candidate],
    ) -> list[Decision]:
        """Decide without reading where that is enough; queue the rest for the batched read."""
        c.since = since
        parsed = read_tags(c.target.key, c.tags, self._s.tag_keys)
        c.findings.extend(parsed.findings)
        window, problems = window_of(c.tags, self._s.thresholds.window, c.target.key)
        c.findings.extend(problems)
        c.window = window
        self.findings.extend(c.findings)
        if parsed.exemption is not None and parsed.exemption.active(now):
            return [self._decision(c, None, now, "exempt: costguard:exempt", {})]
        if (
            since is not None
            and now - since < window
            and c.kind is not ResourceKind.SAGEMAKER_NOTEBOOK
        ):
            return [self._decision(c, None, now, "running for less than its idle window", {})]
        deadline = action_after(c.tags)
        if isinstance(deadline, datetime):
            warned_at = deadline - self._s.grace
            plausible = warned_at <= now and (since is None or since + window <= warned_at)
            if plausible and before(now, deadline):
                # Warned already: it is read again at the deadline, over the whole time
                # since the warning (activity then withdraws it). The executor waits.
                return [
                    self._decision(
                        c,
                        Verdict.IDLE,
                        now,
                        f"warned as idle; judged again at {deadline_tag(deadline)} over the "
                        "whole time since the warning",
                        {"deadline": deadline_tag(deadline)},
                    )
                ]
            if plausible and now - deadline > MAX_LATE:
                return [
                    self._decision(
                        c,
                        None,
                        now,
                        f"its warning (deadline {deadline_tag(deadline)}) was not judged again "
                        f"within {_hours(MAX_LATE)} hours of its deadline: withdrawn, and "
                        "warned afresh if still idle",
                        {"deadline": deadline_tag(deadline)},
                    )
                ]
            if plausible:
                # At (or after) the deadline: from the window before the warning to now,
                # however late this run is, so that any activity since the warning counts.
                c.window = window + (now - warned_at)
        to_read.append(c)
        return []

    # -- reading -----------------------------------------------------------------------

    def _read_and_judge(
        self, region: str, cands: list[_Candidate], now: datetime
    ) -> list[Decision]:
        listing = self._s.gpu_discovery is GpuDiscovery.LIST
        gpu_ids = [
            c.ec2.id
            for c in cands
            if c.ec2 is not None and c.ec2.gpu_count != 0 and c.ec2.accelerator is None
        ]
        gpus = self._metrics.gpu_series(region, gpu_ids) if listing and gpu_ids else {}
        round1: list[MetricQuery] = []
        searches: list[SeriesSearch] = []
        for c in cands:
            if c.ec2 is not None:
                if c.ec2.accelerator is not None:
                    continue  # nothing to read: judged unknown below
                if c.ec2.gpu_count == 0:
                    round1.extend(self._ec2_host_queries(c, now))
                elif listing:
                    c.gpus = tuple(gpus.get(c.ec2.id, ()))
                    round1.extend(self._gpu_queries(c, now))
                else:
                    searches.append(self._gpu_search(c, now))
            elif c.notebook is not None:
                round1.append(self._heartbeat_query(c, Heartbeat.JUPYTER_ACTIVITY, now))
        self._read(region, round1, cands, searches)
        round2: list[MetricQuery] = []
        for c in cands:
            first = self._judge(c, now, final=False)
            if first.verdict is not Verdict.IDLE:
                continue
            if c.ec2 is not None:
                round2.extend(self._ec2_host_queries(c, now))
            elif (
                c.notebook is not None
                and not c.series.get(Heartbeat.JUPYTER_ACTIVITY, EMPTY).values
            ):
                # The maximum-runtime fallback would stop it: first make sure it never
                # had a heartbeat in that time (one shared range: batched like the rest).
                round2.append(self._history_query(c, now))
            elif c.notebook is not None and _reports_gpu(c.notebook):
                # A CPU type publishes no GPU series, and nothing reports a non-NVIDIA
                # accelerator: neither is read (its verdict needs no such read).
                round2.append(self._heartbeat_query(c, Heartbeat.GPU_UTILIZATION, now))
        self._read(region, round2, cands)
        decisions = []
        for c in cands:
            j = self._judge(c, now, final=True)
            c.findings.extend(j.findings)
            self.findings.extend(j.findings)
            decisions.append(self._decision(c, j.verdict, now, j.reason, j.evidence))
        return decisions

    def _read(
        self,
        region: str,
        queries: list[MetricQuery],
        cands: list[_Candidate],
        searches: list[SeriesSearch] | None = None,
    ) -> None:
        if not queries and not searches:
            return
        readings = self._metrics.read(region, queries, searches or ())
        owner = {id(c): c for c in cands}
        for q in queries:
            cid, _, name = q.key.partition("|")
            owner[int(cid)].series[name] = readings.series.get(q.key, Series())
        for s in searches or ():
            cid, _, _ = s.key.partition("|")
            owner[int(cid)].found = dict(readings.found.get(s.key, {}))

    def _query(
        self,
        c: _Candidate,
        name: str,
        ns: str,
        metric: str,
        dims: tuple[tuple[str, str], ...],
        now: datetime,
        window: timedelta | None = None,
    ) -> MetricQuery:
        start, end, period = aligned_window(now, c.window if window is None else window)
        return MetricQuery(f"{id(c)}|{name}", ns, metric, dims, start, end, period)

    def _gpu_queries(self, c: _Candidate, now: datetime) -> list[MetricQuery]:
        return [
            self._query(c, f"gpu{g.index}#{n}", AgentGpu.NAMESPACE, AgentGpu.UTILIZATION, dims, now)
            for g in c.gpus
            for n, dims in enumerate(g.dimension_sets)
        ]

    def _gpu_search(self, c: _Candidate, now: datetime) -> SeriesSearch:
        """Every GPU series of the instance, found by its InstanceId, named by its index."""
        assert c.ec2 is not None
        start, end, period = aligned_window(now, c.window)
        return SeriesSearch(
            f"{id(c)}|gpus",
            AgentGpu.NAMESPACE,
            AgentGpu.UTILIZATION,
            ((AgentGpu.INSTANCE, c.ec2.id),),
            AgentGpu.INDEX,
            start,
            end,
            period,
            # A type EC2 does not know: one series at least; the call's answer tells.
            expected=c.ec2.gpu_count or 1,
        )

    def _ec2_host_queries(self, c: _Candidate, now: datetime) -> list[MetricQuery]:
        assert c.ec2 is not None
        dims = (("InstanceId", c.ec2.id),)
        return [
            self._query(c, name, EC2_NAMESPACE, name, dims, now)
            for name in ("CPUUtilization", "NetworkIn", "NetworkOut")
        ]

    def _heartbeat_query(self, c: _Candidate, metric: str, now: datetime) -> MetricQuery:
        assert c.notebook is not None
        dims = ((Heartbeat.DIMENSION, c.notebook.name),)
        return self._query(c, metric, Heartbeat.NAMESPACE, metric, dims, now)

    def _history_query(self, c: _Candidate, now: datetime) -> MetricQuery:
        """``JupyterActivity`` over the last ``max_runtime``: did it ever have a heartbeat?"""
        assert c.notebook is not None
        dims = ((Heartbeat.DIMENSION, c.notebook.name),)
        metric = Heartbeat.JUPYTER_ACTIVITY
        window = self._s.thresholds.max_runtime
        return self._query(c, HISTORY, Heartbeat.NAMESPACE, metric, dims, now, window)

    # -- judging -----------------------------------------------------------------------

    def _judge(self, c: _Candidate, now: datetime, *, final: bool) -> Judgement:
        """Round one (``final`` False): IDLE means "read the rest"; then the verdict."""
        t = self._s.thresholds
        if c.ec2 is not None:
            if c.ec2.accelerator is not None:
                return Judgement(
                    Verdict.UNKNOWN,
                    f"unknown: nothing publishes the utilization of its {c.ec2.accelerator} "
                    "accelerators; never judged idle",
                    {"accelerator": c.ec2.accelerator},
                )
            reported = self._gpus(c)
            # A type DescribeInstanceTypes does not know: as many GPUs as report, at least one.
            expected = c.ec2.gpu_count if c.ec2.gpu_count is not None else max(1, len(reported))
            gpus = reported if expected else []
            host = [c.series.get(m) for m in ("CPUUtilization", "NetworkIn", "NetworkOut")]
            cpu, net_in, net_out = host
            if cpu is None or net_in is None or net_out is None:
                if not expected:
                    return Judgement(Verdict.UNKNOWN, "unknown: CPU and network not read", {})
                gpu_only = judge_gpus(
                    gpus=gpus,
                    gpu_count=expected,
                    window=c.window,
                    thresholds=t,
                    resource=c.target.key,
                )
                if final and gpu_only.verdict is Verdict.IDLE:  # never without the host
                    return Judgement(Verdict.UNKNOWN, "unknown: CPU and network not read", {})
                return gpu_only
            return judge_ec2(
                gpus=gpus,
                gpu_count=expected,
                cpu=cpu,
                network_in=net_in,
                network_out=net_out,
                window=c.window,
                thresholds=t,
                resource=c.target.key,
            )
        assert c.notebook is not None
        return judge_heartbeat(
            activity=c.series.get(Heartbeat.JUPYTER_ACTIVITY, Series()),
            gpu=c.series.get(Heartbeat.GPU_UTILIZATION, Series()),
            in_service_since=c.notebook.in_service_since,
            now=now,
            window=c.window,
            thresholds=t,
            resource=c.target.key,
            # Round one asks "would the fallback stop it?"; the final verdict needs the read.
            history=c.series.get(HISTORY) if final else Series(),
            # Round one asks "is Jupyter inactive?": its GPU is read only if so.
            gpu_count=c.notebook.gpu_count if final else 0,
            accelerator=c.notebook.accelerator if final else None,
        )

    @staticmethod
    def _gpus(c: _Candidate) -> list[Series]:
        """Each GPU's series, in index order: as searched, or merged over its listed sets."""
        if c.found is not None:
            return [c.found[index] for index in sorted(c.found)]
        return [_merged(c.series, g) for g in c.gpus]

    # -- building decisions ------------------------------------------------------------

    def _target(
        self,
        kind: ResourceKind,
        region: str,
        rid: str,
        tags: Mapping[str, str],
        name: str | None,
        state: str,
    ) -> Target:
        key = resource_key(self._s.account, region, kind.value, rid)
        parsed = read_tags(key, tags, self._s.tag_keys)
        return Target(
            key=key,
            kind=kind.value,
            region=region,
            id=rid,
            account=self._s.account,
            project=parsed.project,
            owners=parsed.owners,
            name=name,
            tags_seen=dict(tags),
            state_seen=state,
        )

    def _ec2_candidate(self, ec2: Ec2Notebook) -> _Candidate:
        rate = self._catalog.ec2_on_demand(ec2.region, ec2.instance_type)
        note = "on-demand list price" + (" (an upper bound for spot)" if ec2.spot else "")
        return _Candidate(
            ResourceKind.EC2_INSTANCE,
            Action.STOP_INSTANCE,
            self._target(
                ResourceKind.EC2_INSTANCE,
                ec2.region,
                ec2.id,
                ec2.tags,
                ec2.tags.get("Name"),
                "running",  # the candidates are the running instances
            ),
            ec2.tags,
            self._s.thresholds.window,
            rate if rate is not None else ZERO,
            note if rate is not None else f"{ec2.instance_type} is not in the price catalog",
            ec2=ec2,
        )

    def _notebook_candidate(self, nb: NotebookInstance) -> _Candidate:
        rate = self._catalog.sagemaker_rate(nb.region, nb.instance_type or "")
        return _Candidate(
            ResourceKind.SAGEMAKER_NOTEBOOK,
            Action.STOP_NOTEBOOK,
            self._target(
                ResourceKind.SAGEMAKER_NOTEBOOK, nb.region, nb.name, nb.tags, nb.name, "InService"
            ),
            nb.tags,
            self._s.thresholds.window,
            rate if rate is not None else ZERO,
            "SageMaker list price"
            if rate is not None
            else f"{nb.instance_type} is not in the price catalog",
            notebook=nb,
        )

    def _decision(
        self,
        c: _Candidate,
        verdict: Verdict | None,
        now: datetime,
        reason: str,
        evidence: Mapping[str, str],
    ) -> Decision:
        acts = verdict is Verdict.IDLE
        details = {
            **evidence,
            "verdict": verdict.value if verdict else "skipped",
            "usd_per_hour_source": c.price_note,
        }
        if c.findings:
            details["findings"] = "; ".join(f.message for f in c.findings)
        if c.ec2 is not None and c.ec2.spot:
            details["spot"] = "true"
        return Decision(
            c.action if acts else Action.NONE,
            c.target,
            reason,
            now,
            evidence=details,
            usd_per_hour_saved=c.usd_per_hour,
            grace=self._s.grace,
            params={"arn": c.notebook.arn} if c.notebook is not None else {},
            session_start=c.since,
        )

    def _studio_decision(self, app: StudioApp, now: datetime) -> Decision:
        rid = f"{app.domain_id}/{app.space_name}/{app.app_type}/{app.app_name}"
        target = self._target(
            ResourceKind.SAGEMAKER_STUDIO_APP, app.region, rid, app.tags, app.app_name, app.status
        )
        window, problems = window_of(app.tags, self._s.thresholds.window, target.key)
        parsed = read_tags(target.key, app.tags, self._s.tag_keys)
        self.findings.extend((*parsed.findings, *problems))
        rate = self._catalog.sagemaker_rate(app.region, app.instance_type or "")
        params = {
            "domain_id": app.domain_id,
            "space_name": app.space_name,
            "app_type": app.app_type,
            "app_name": app.app_name,
            "arn": app.arn,
        }
        if parsed.exemption is not None and parsed.exemption.active(now):
            j = Judgement(Verdict.UNKNOWN, "exempt: costguard:exempt", {})
            verdict: Verdict | None = None
        else:
            j = judge_studio(app.last_user_activity, app.created, now, window)
            verdict = j.verdict
        return Decision(
            Action.DELETE_APP if verdict is Verdict.IDLE else Action.NONE,
            target,
            j.reason + ("; the space and its storage are kept" if verdict is Verdict.IDLE else ""),
            now,
            evidence={
                **j.evidence,
                "verdict": verdict.value if verdict else "skipped",
                "usd_per_hour_source": "SageMaker list price"
                if rate is not None
                else "not in the price catalog",
            },
            usd_per_hour_saved=rate if rate is not None else ZERO,
            grace=self._s.grace,
            params=params,
        )


def _reports_gpu(nb: NotebookInstance) -> bool:
    """Whether the heartbeat of this type publishes ``GPUUtilization`` (or may: unknown type)."""
    return nb.accelerator is None and nb.gpu_count != 0


def _merged(series: Mapping[str, Series], gpu: GpuSeries) -> Series:
    """One listed GPU's datapoints under all its dimension sets: the maximum per timestamp."""
    return merge_max(
        (t, v)
        for n in range(len(gpu.dimension_sets))
        for s in (series.get(f"gpu{gpu.index}#{n}", Series()),)
        for t, v in zip(s.timestamps, s.values, strict=False)
    )


def counts(decisions: Iterable[Decision]) -> dict[str, int]:
    """Verdicts of a pass, for logs and the demo."""
    return dict(Counter(d.evidence.get("verdict", "?") for d in decisions))


def _hours(delta: timedelta) -> str:
    return f"{delta.total_seconds() / 3600:g}"
