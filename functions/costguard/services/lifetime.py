"""The maximum-lifetime policy: GPU instances, notebooks and training jobs past their
``costguard:max-hours`` or ``costguard:expires`` (or the deployment's ``maxGpuHours``).

It reads the running resources (one paginated listing per source and region) and judges
each with :func:`costguard.domain.lifetime.judge_lifetime`: no metric, no extra call.
It returns a decision for every resource it judged: a stop from the warning window on
(the lifetime's end less the grace period), ``NONE`` otherwise, so that a warning whose
lifetime was extended, or whose tag was removed, is withdrawn. The executor warns with
its own tag (``costguard:stop-after``), waits for the end and the grace period, claims,
stops and audits, as for every other guard.

What it never stops: an EC2 instance that a group would replace (Auto Scaling, EKS,
Karpenter, a fleet, EMR: a finding when it carries a lifetime tag), and anything whose
start lies after the run's time (the clocks disagree).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TypeVar

from costguard.domain.calendar import require_utc
from costguard.domain.decisions import Action, Decision, Target
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.idle import managed_by
from costguard.domain.lifetime import LifetimeVerdict, judge_lifetime
from costguard.domain.models import ResourceKind, resource_key
from costguard.domain.money import ZERO
from costguard.domain.pricing import PriceCatalog
from costguard.domain.tags import TagKeys, Tags, read_tags
from costguard.ports import NotebookCandidates, SourceError, TrainingJobs

T = TypeVar("T")

#: What withdraws a lifetime warning, in the warning's words.
UNLESS = f"its lifetime is extended ({Tags.MAX_HOURS} or {Tags.EXPIRES}) or it is exempted"
NEXT_STEPS = (
    f"If you still need it, extend its lifetime: raise {Tags.MAX_HOURS} (hours from its "
    f"launch) or move {Tags.EXPIRES} later, before the deadline.",
    f"Or exempt it: tag {Tags.EXEMPT}=true, or {Tags.EXEMPT}=YYYY-MM-DD until a date.",
)
_LIFETIME_TAGS = (Tags.MAX_HOURS, Tags.EXPIRES)


@dataclass(frozen=True, slots=True)
class LifetimeSettings:
    regions: tuple[str, ...]
    account: str = ""
    #: ``maxGpuHours``: the lifetime of an accelerator without a lifetime tag; 0 is off.
    default_hours: int = 0
    #: The least time between the warning and the stop.
    grace: timedelta = timedelta(minutes=60)
    #: How often the guard runs: the warning window opens this much earlier than the grace
    #: period, so that a run on schedule warns in time for the stop to come at the end.
    every: timedelta = timedelta(minutes=15)
    tag_keys: TagKeys = field(default_factory=TagKeys)


@dataclass(frozen=True, slots=True)
class _Seen:
    kind: ResourceKind
    action: Action
    region: str
    rid: str
    name: str | None
    state: str
    tags: Mapping[str, str]
    started_at: datetime | None
    #: An accelerator type (the deployment's default applies only to these).
    accelerator: bool
    usd_per_hour: Decimal | None
    price_note: str


class LifetimePolicy:
    """Decides which resources have outlived their maximum lifetime."""

    def __init__(
        self,
        candidates: NotebookCandidates,
        catalog: PriceCatalog,
        settings: LifetimeSettings,
        *,
        training: TrainingJobs | None = None,
    ) -> None:
        self._candidates = candidates
        self._catalog = catalog
        self._s = settings
        self._training = training
        #: What the last :meth:`decide` found wrong (malformed tags, unknown starts...).
        self.findings: list[Finding] = []

    def decide(self, now: datetime) -> list[Decision]:
        now = require_utc(now)
        self.findings = []
        decisions: list[Decision] = []
        for region in self._s.regions:
            for seen in self._region(region):
                decision = self._judge(seen, now)
                if decision is not None:
                    decisions.append(decision)
        return decisions

    def _readable(self, region: str, what: str, read: Callable[[], list[T]]) -> list[T]:
        """One source of a region, or nothing when it cannot be read: reported, and the
        other sources and regions go on. Nothing unread is acted on."""
        try:
            return read()
        except SourceError as exc:
            self.findings.append(Finding(FindingCode.SCAN_FAILED, f"{region}/{what}", str(exc)))
            return []

    def _region(self, region: str) -> list[_Seen]:
        seen: list[_Seen] = []
        for i in self._readable(
            region, "ec2-instances", lambda: list(self._candidates.ec2_notebooks(region))
        ):
            rate = self._catalog.ec2_on_demand(region, i.instance_type)
            seen.append(
                _Seen(
                    ResourceKind.EC2_INSTANCE,
                    Action.STOP_INSTANCE,
                    region,
                    i.id,
                    i.tags.get("Name"),
                    "running",
                    i.tags,
                    i.launched_at,
                    # An unknown type (None) is not assumed to be an accelerator.
                    bool(i.gpu_count) or i.accelerator is not None,
                    rate,
                    "on-demand list price" + (" (an upper bound for spot)" if i.spot else ""),
                )
            )
        for nb in self._readable(
            region, "notebook-instances", lambda: list(self._candidates.notebook_instances(region))
        ):
            rate = self._catalog.sagemaker_rate(region, nb.instance_type or "")
            seen.append(
                _Seen(
                    ResourceKind.SAGEMAKER_NOTEBOOK,
                    Action.STOP_NOTEBOOK,
                    region,
                    nb.name,
                    nb.name,
                    "InService",
                    nb.tags,
                    nb.in_service_since,
                    bool(nb.gpu_count) or nb.accelerator is not None,
                    rate,
                    "SageMaker list price",
                )
            )
        if (training := self._training) is not None:
            for job in self._readable(
                region, "training-jobs", lambda: list(training.in_progress(region))
            ):
                rate = self._catalog.sagemaker_rate(region, job.instance_type or "")
                seen.append(
                    _Seen(
                        ResourceKind.SAGEMAKER_TRAINING_JOB,
                        Action.STOP_TRAINING_JOB,
                        region,
                        job.name,
                        job.name,
                        "InProgress",
                        job.tags,
                        job.started_at,
                        _accelerated_ml_type(job.instance_type),
                        None if rate is None else rate * max(job.instance_count, 1),
                        f"SageMaker list price x {max(job.instance_count, 1)} instance(s)",
                    )
                )
        return seen

    def _judge(self, s: _Seen, now: datetime) -> Decision | None:
        key = resource_key(self._s.account, s.region, s.kind.value, s.rid)
        tagged = any(k in s.tags for k in _LIFETIME_TAGS)
        default_hours = self._s.default_hours if s.accelerator else 0
        if not tagged and not default_hours and Tags.STOP_AFTER not in s.tags:
            return None  # no lifetime applies, and no warning to withdraw: no decision
        parsed = read_tags(key, s.tags, self._s.tag_keys)
        self.findings.extend(parsed.findings)
        target = Target(
            key=key,
            kind=s.kind.value,
            region=s.region,
            id=s.rid,
            account=self._s.account,
            project=parsed.project,
            owners=parsed.owners,
            name=s.name,
            tags_seen=dict(s.tags),
            state_seen=s.state,
        )
        if s.kind is ResourceKind.EC2_INSTANCE and (group := managed_by(s.tags)) is not None:
            if tagged:
                self.findings.append(
                    Finding(
                        FindingCode.LIFETIME_NOT_ENFORCED,
                        key,
                        f"carries a maximum lifetime but is owned by the {group}: never "
                        "stopped (the group would replace it); scale the group instead",
                        Severity.INFO,
                    )
                )
            return self._decision(
                target,
                s,
                None,
                now,
                f"managed by the {group}: stopping it would only get it replaced",
            )
        if parsed.exemption is not None and parsed.exemption.active(now):
            return self._decision(target, s, None, now, f"exempt: {Tags.EXEMPT}")
        verdict = judge_lifetime(
            s.tags if tagged else {},
            s.started_at,
            now,
            default_hours=default_hours,
            warn_before=self._s.grace + self._s.every,
            resource=key,
        )
        self.findings.extend(verdict.findings)
        return self._decision(target, s, verdict, now, verdict.reason)

    def _decision(
        self,
        target: Target,
        s: _Seen,
        verdict: LifetimeVerdict | None,
        now: datetime,
        reason: str,
    ) -> Decision:
        due = verdict is not None and verdict.due
        evidence = {
            **(verdict.evidence if verdict is not None else {}),
            "verdict": "expired" if due else "within its lifetime" if verdict else "skipped",
            "usd_per_hour_source": s.price_note
            if s.usd_per_hour is not None
            else "not in the price catalog",
        }
        if verdict is not None and verdict.findings:
            evidence["findings"] = "; ".join(f.message for f in verdict.findings)
        return Decision(
            s.action if due else Action.NONE,
            target,
            reason,
            now,
            evidence=evidence,
            usd_per_hour_saved=s.usd_per_hour if s.usd_per_hour is not None else ZERO,
            grace=self._s.grace,
            not_before=verdict.ends_at if verdict is not None and due else None,
            session_start=s.started_at,
            unless=UNLESS,
            next_steps=NEXT_STEPS,
        )


def _accelerated_ml_type(instance_type: str | None) -> bool:
    """A SageMaker training type with an accelerator (ml.p*, ml.g*, ml.trn*, ml.inf*, ml.dl*)."""
    family = (instance_type or "").removeprefix("ml.").split(".")[0]
    return family.startswith(("p", "g", "trn", "inf", "dl"))
