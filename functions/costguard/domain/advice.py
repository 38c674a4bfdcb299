"""Advice a scan adds to what it finds running: money that a different choice would save.

Each piece carries ``code``, ``resource``, ``usd_per_month_saving`` and a one-line ``why``
that says what the figure assumes. Pure: the scan passes what it priced and ``now``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum

from costguard.domain.accelerators import AcceleratorSpec, accelerator_of_type
from costguard.domain.calendar import hours_between, require_utc
from costguard.domain.estimate import (
    DEFAULT_CHECKPOINT_HOURS,
    DEFAULT_RESTART_HOURS,
    IterationPlan,
    break_even,
    spot_saving_usd,
)
from costguard.domain.models import Lifecycle, Resource, ResourceKind
from costguard.domain.money import HOURS_PER_PRICING_MONTH, cents, rate
from costguard.domain.predictions import CostStatus, PredictionCost
from costguard.domain.pricing import PriceCatalog, PricedResource

#: An on-demand accelerator instance younger than this gets no spot advice: a short job
#: is over before a change could pay.
MIN_HOURS_RUNNING = Decimal(24)
#: Below this GPU utilization (per GPU, averaged over :data:`ENDPOINT_GPU_WINDOW`) an
#: H100/A100-class endpoint is oversized.
LOW_GPU_UTILIZATION = Decimal(20)
#: The accelerators oversized-endpoint advice acts on: only their endpoints are read.
OVERSIZED_ACCELERATORS = frozenset({"a100-40gb", "a100-80gb", "h100", "h200", "b200"})
#: Single-device endpoint types to propose instead (L4, A10G, Inferentia2 class); the
#: cheapest that carries the load is proposed, if the catalog offers it in the region.
_SMALLER_ENDPOINTS = ("ml.g6.xlarge", "ml.g5.xlarge", "ml.inf2.xlarge")
#: A proposed endpoint is sized to be at most this busy on the window's average: a day's
#: average hides the busy hours, so the smaller devices keep room for twice the average.
TARGET_MAX_BUSY = Decimal("0.5")
#: The window an endpoint's GPU utilization is averaged over (one CloudWatch period):
#: a whole day, so a quiet night alone never makes an endpoint look oversized.
ENDPOINT_GPU_WINDOW = timedelta(hours=24)
#: A variant's cost per 1,000 predictions over the last 24 whole hours at least this many
#: times its baseline is a jump (:func:`_prediction_jump_advice`).
PREDICTION_COST_JUMP = Decimal(2)
#: The baseline is the median over the window's whole UTC days that end before the last
#: 24 hours began, with a known cost and some traffic; fewer days than this: no baseline.
MIN_BASELINE_DAYS = 3
#: Traffic within this fraction of the baseline's is "the same traffic".
SAME_TRAFFIC = Decimal("0.25")
#: A $/h within this fraction of the baseline's is "a fixed fleet".
SAME_FLEET = Decimal("0.05")


class AdviceCode(StrEnum):
    SPOT_WITH_CHECKPOINTING = "spot-with-checkpointing"
    OVERSIZED_ENDPOINT = "oversized-endpoint"
    PENDING_CAPACITY_COST = "pending-capacity-cost"
    #: The endpoint rightsizing advice on a cost-per-prediction jump (same traffic on a
    #: larger configuration, or falling traffic on a fixed fleet).
    PREDICTION_COST_JUMP = "prediction-cost-jump"


@dataclass(frozen=True, slots=True)
class Advice:
    code: AdviceCode
    resource: str
    usd_per_month_saving: Decimal
    why: str

    def as_dict(self) -> dict[str, object]:
        return {
            "code": self.code.value,
            "resource": self.resource,
            "usd_per_month_saving": float(cents(self.usd_per_month_saving)),
            "why": self.why,
        }


@dataclass(frozen=True, slots=True)
class EndpointVariant:
    """One endpoint variant whose GPU utilization the scan reads (CloudWatch's dimensions)."""

    key: str
    endpoint: str
    variant: str


def endpoint_window(now: datetime) -> tuple[datetime, datetime]:
    """``(start, end)``: the :data:`ENDPOINT_GPU_WINDOW` ending at the last whole hour.

    Aligned, so every scan of one hour reads the same figure (CloudWatch answers aligned
    ranges exactly), and one period covers the window.
    """
    end = require_utc(now).replace(minute=0, second=0, microsecond=0)
    return end - ENDPOINT_GPU_WINDOW, end


def oversizable(r: Resource) -> tuple[AcceleratorSpec, int] | None:
    """The accelerator (and devices per instance) of an endpoint the oversized-endpoint
    advice can act on, or None."""
    if r.kind is not ResourceKind.SAGEMAKER_ENDPOINT or not r.instance_type:
        return None
    carried = accelerator_of_type(r.instance_type)
    if carried is None or carried[0].key not in OVERSIZED_ACCELERATORS:
        return None
    return carried


def endpoint_variants(resources: Iterable[Resource], start: datetime) -> list[EndpointVariant]:
    """The endpoint variants whose GPU utilization to read for a window from ``start``.

    Only those on an accelerator the advice acts on, and only those whose current
    configuration was in place for the whole window: a younger endpoint's average is not
    a day's, and an endpoint moved to another instance type within the window (same
    endpoint, same variant name) reports an average that mixes both types, which says
    nothing about either. A configuration date that is missing is doubt: no read, no
    advice, which beats a guess.
    """
    out = []
    for r in resources:
        endpoint, _, variant = r.id.partition("/")
        if (
            oversizable(r) is None
            or not endpoint
            or not variant
            or r.launched_at is None
            or require_utc(r.launched_at) > start
            or r.config_since is None
            or require_utc(r.config_since) > start
        ):
            continue
        out.append(EndpointVariant(r.key, endpoint, variant))
    return out


def per_gpu_utilization(instance_type: str, reported: Decimal) -> Decimal | None:
    """CloudWatch's endpoint ``GPUUtilization`` (summed over an instance's GPUs, 0-100 x n)
    as the utilization of one GPU (0-100); None when it cannot be one (out of range)."""
    carried = accelerator_of_type(instance_type)
    if carried is None or carried[1] <= 0:
        return None
    devices = carried[1]
    if not reported.is_finite() or reported < 0 or reported > 100 * devices:
        return None
    return reported / devices


def advise(
    priced: Iterable[PricedResource],
    pending: Sequence[tuple[Resource, int]],
    catalog: PriceCatalog,
    now: datetime,
    gpu_utilization: Mapping[str, Decimal] | None = None,
    prediction_costs: Mapping[str, PredictionCost] | None = None,
) -> tuple[Advice, ...]:
    """All advice for one scan, largest saving first.

    ``gpu_utilization`` (resource key -> the endpoint variant's ``GPUUtilization`` as
    CloudWatch reports it, summed over each instance's GPUs and averaged over
    :data:`ENDPOINT_GPU_WINDOW`) feeds the oversized-endpoint advice; an endpoint without
    a figure gets none. ``prediction_costs`` (resource key -> the variant's cost per
    1,000 predictions, now and per day) feeds its cost-per-prediction jump. An endpoint
    variant gets one rightsizing advice: the one that saves more.
    """
    now = require_utc(now)
    found: list[Advice] = []
    for item in priced:
        spot = _spot_advice(item, catalog, now)
        if spot is not None:
            found.append(spot)
        util = (gpu_utilization or {}).get(item.resource.key)
        smaller = _endpoint_advice(item, catalog, util) if util is not None else None
        cost = (prediction_costs or {}).get(item.resource.key)
        jump = _prediction_jump_advice(item, cost) if cost is not None else None
        rightsized = [a for a in (smaller, jump) if a is not None]
        if rightsized:
            found.append(max(rightsized, key=lambda a: a.usd_per_month_saving))
    found.extend(_pending_advice(pending, catalog))
    found.sort(key=lambda a: (-a.usd_per_month_saving, a.resource))
    return tuple(found)


def _spot_advice(item: PricedResource, catalog: PriceCatalog, now: datetime) -> Advice | None:
    r, rate = item.resource, item.usd_per_hour
    if (
        r.kind is not ResourceKind.EC2_INSTANCE
        or r.lifecycle is not Lifecycle.ON_DEMAND
        or r.accelerator is None
        or rate is None
        or rate <= 0
        or r.launched_at is None
        or catalog.spot is None
        or not r.instance_type
        # AWS no longer offers a retired type, on spot or at all: moving it to spot is no move.
        or catalog.retirement(r.instance_type) is not None
    ):
        return None
    ran = hours_between(require_utc(r.launched_at), now)
    if ran < MIN_HOURS_RUNNING:
        return None
    profile = catalog.spot.profile(r.instance_type)
    lam = catalog.spot.hourly_rate(profile.bucket) * r.count
    plan = IterationPlan(
        work_hours=HOURS_PER_PRICING_MONTH,
        usd_per_hour=rate,
        checkpoint_hours=DEFAULT_CHECKPOINT_HOURS,
        spot_saving=profile.saving,
        interruptions_per_hour=lam,
        restart_hours=DEFAULT_RESTART_HOURS,
    )
    be = break_even(plan)
    if be.spot_cheaper_from is None or ran < be.spot_cheaper_from:
        return None
    if be.spot_cheaper_until is not None and ran > be.spot_cheaper_until:
        return None
    saving = spot_saving_usd(plan)
    if saving is None or saving <= 0:
        return None
    return Advice(
        AdviceCode.SPOT_WITH_CHECKPOINTING,
        r.key,
        saving,
        f"on-demand {r.instance_type} has run {ran:.0f} h; spot with checkpointing would save "
        f"about ${cents(saving):,}/month (spot bucket {profile.bucket}, {profile.saving * 100:.0f} % "
        f"saving, per the catalog's spot table of {catalog.spot.as_of}; each interruption "
        "re-pays 30 min and half an hourly checkpoint)",
    )


def _endpoint_advice(
    item: PricedResource, catalog: PriceCatalog, reported: Decimal
) -> Advice | None:
    """A smaller endpoint type sized for the load, when the GPUs are mostly idle.

    The load is the busy GPU time (per-GPU utilization x GPUs x instances), scaled by the
    devices' dense FP16 peaks; the proposal keeps at least the variant's instance count
    (for availability) and runs each device at most :data:`TARGET_MAX_BUSY` busy.
    """
    r, rate = item.resource, item.usd_per_hour
    carried = oversizable(r)
    if carried is None or rate is None or rate <= 0 or not r.instance_type or r.count <= 0:
        return None
    source, devices = carried
    util = per_gpu_utilization(r.instance_type, reported)
    if util is None or util >= LOW_GPU_UTILIZATION:
        return None
    busy = util / 100 * devices * r.count  # in devices of the endpoint's accelerator
    offered = set(catalog.offered_types(r.region, "sagemaker"))
    options: list[tuple[Decimal, str, int, AcceleratorSpec]] = []
    for t in _SMALLER_ENDPOINTS:
        price = catalog.sagemaker_rate(r.region, t) if t in offered else None
        offer = accelerator_of_type(t)
        if price is None or offer is None:
            continue
        spec, per_instance = offer
        capacity = spec.peak_tflops * per_instance / source.peak_tflops * TARGET_MAX_BUSY
        needed = max(r.count, math.ceil(busy / capacity))
        options.append((price * needed, t, needed, spec))
    if not options:
        return None
    cheaper, target, needed, spec = min(options, key=lambda o: (o[0], o[1]))
    saving = (rate - cheaper) * HOURS_PER_PRICING_MONTH
    if saving <= 0:
        return None
    neuron = "; Inferentia2 needs a Neuron-compiled model" if spec.key == "inferentia2" else ""
    return Advice(
        AdviceCode.OVERSIZED_ENDPOINT,
        r.key,
        saving,
        f"{r.count} x {r.instance_type} at {util:.0f} % GPU utilization per GPU over "
        f"{ENDPOINT_GPU_WINDOW.total_seconds() / 3600:.0f} h; {needed} x {target} ({spec.name}) "
        f"would save about ${cents(saving):,}/month, assuming the model fits one "
        f"{spec.memory_gb:.0f} GB device and its load scales with dense FP16 peak (sized to "
        f"stay under {TARGET_MAX_BUSY * 100:.0f} % busy){neuron}",
    )


def _median(values: Sequence[Decimal]) -> Decimal:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def _prediction_jump_advice(item: PricedResource, cost: PredictionCost) -> Advice | None:
    """The endpoint rightsizing advice on a cost-per-prediction jump.

    The baseline is the median, over the whole UTC days of the window that end before the
    last 24 hours began (at least :data:`MIN_BASELINE_DAYS` with a known cost and some
    traffic), of the day's cost per 1,000 predictions, $/h (the day's cost / its hours)
    and invocations an hour. A jump is the last 24 hours' figure at least
    :data:`PREDICTION_COST_JUMP` times the baseline's. Its cause decides the advice:

    - **the same traffic on a larger configuration**: invocations an hour within
      :data:`SAME_TRAFFIC` of the baseline's and the $/h above it by more than that: the
      saving is the difference in $/h over a month (the former configuration served it);
    - **falling traffic on a fixed fleet**: $/h within :data:`SAME_FLEET` of the baseline's:
      the fleet sized to keep the baseline's invocations per instance (at least one) saves
      the instances it no longer needs.

    Anything else (traffic and fleet both moved) is no advice: no cause, no saving.
    """
    r, usd = item.resource, item.usd_per_hour
    if (
        r.kind is not ResourceKind.SAGEMAKER_ENDPOINT
        or usd is None
        or usd <= 0
        or r.count <= 0
        or cost.status is not CostStatus.PRICED
        or cost.usd_per_1000 is None
        or cost.invocations_per_hour is None
        or not cost.days
    ):
        return None
    last = cost.days[-1]
    current_start = (
        datetime.combine(last.day, datetime.min.time(), tzinfo=UTC)
        + timedelta(hours=last.hours)
        - timedelta(hours=24)
    )
    base = [
        d
        for d in cost.days
        if d.hours == 24
        and datetime.combine(d.day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=24)
        <= current_start
        and d.usd_per_1000 is not None
    ]
    if len(base) < MIN_BASELINE_DAYS:
        return None
    base_per_1000 = _median([d.usd_per_1000 for d in base if d.usd_per_1000 is not None])
    base_rate = _median([(d.usd or Decimal(0)) / d.hours for d in base])
    base_traffic = _median([d.invocations / d.hours for d in base])
    if base_per_1000 <= 0 or base_rate <= 0 or base_traffic <= 0:
        return None
    if cost.usd_per_1000 < base_per_1000 * PREDICTION_COST_JUMP:
        return None
    traffic = cost.invocations_per_hour / base_traffic
    fleet = usd / base_rate
    was = f"${rate(base_per_1000)} to ${rate(cost.usd_per_1000)} per 1,000 predictions"
    days = f"{len(base)} days' median"
    if abs(traffic - 1) <= SAME_TRAFFIC and fleet > 1 + SAME_TRAFFIC:
        saving = (usd - base_rate) * HOURS_PER_PRICING_MONTH
        return Advice(
            AdviceCode.PREDICTION_COST_JUMP,
            r.key,
            saving,
            f"cost per prediction rose from {was} (the {days} to the last 24 h): the same "
            f"traffic ({cost.invocations_per_hour:,.0f} invocations/h, {days} "
            f"{base_traffic:,.0f}) now runs on {r.count} x {r.instance_type} at "
            f"${rate(usd)}/h instead of ${rate(base_rate)}/h; the former configuration served "
            f"it and would save about ${cents(saving):,}/month",
        )
    if abs(fleet - 1) <= SAME_FLEET and traffic < 1:
        needed = max(1, math.ceil(r.count * traffic))
        saving = usd / r.count * (r.count - needed) * HOURS_PER_PRICING_MONTH
        if saving <= 0:
            return None
        return Advice(
            AdviceCode.PREDICTION_COST_JUMP,
            r.key,
            saving,
            f"cost per prediction rose from {was} (the {days} to the last 24 h): traffic fell "
            f"to {traffic * 100:.0f} % ({cost.invocations_per_hour:,.0f} invocations/h, "
            f"{days} {base_traffic:,.0f}) on a fixed fleet of {r.count} x {r.instance_type}; "
            f"{needed} would keep the former invocations per instance and save about "
            f"${cents(saving):,}/month (or scale on InvocationsPerInstance)",
        )
    return None


def _pending_advice(pending: Sequence[tuple[Resource, int]], catalog: PriceCatalog) -> list[Advice]:
    out = []
    for nodegroup, count in pending:
        types = [t for t in (nodegroup.instance_type or "").split(",") if t]
        rates = [
            rate for t in types if (rate := catalog.ec2_on_demand(nodegroup.region, t)) is not None
        ]
        if not rates or count <= 0:
            continue
        monthly = min(rates) * count * HOURS_PER_PRICING_MONTH
        out.append(
            Advice(
                AdviceCode.PENDING_CAPACITY_COST,
                nodegroup.key,
                monthly,
                f"node group wants {count} more x {nodegroup.instance_type} than run: about "
                f"${cents(monthly):,}/month wasted once that capacity is granted, unless the "
                "work needs it; lower the desired size",
            )
        )
    return out
