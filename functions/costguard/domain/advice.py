"""Advice a scan adds to what it finds running: money that a different choice would save.

Each piece carries ``code``, ``resource``, ``usd_per_month_saving`` and a one-line ``why``
that says what the figure assumes. Pure: the scan passes what it priced and ``now``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum

from costguard.domain.accelerators import accelerator_of_type
from costguard.domain.calendar import hours_between, require_utc
from costguard.domain.estimate import (
    DEFAULT_CHECKPOINT_HOURS,
    DEFAULT_RESTART_HOURS,
    IterationPlan,
    break_even,
    spot_saving_usd,
)
from costguard.domain.models import Lifecycle, Resource, ResourceKind
from costguard.domain.money import HOURS_PER_PRICING_MONTH, cents
from costguard.domain.pricing import PriceCatalog, PricedResource

#: An on-demand accelerator instance younger than this gets no spot advice: a short job
#: is over before a change could pay.
MIN_HOURS_RUNNING = Decimal(24)
#: Below this GPU utilization an H100/A100-class endpoint is oversized.
LOW_GPU_UTILIZATION = Decimal(20)
_OVERSIZED = frozenset({"a100-40gb", "a100-80gb", "h100", "h200", "b200"})
#: Single-device endpoint types to propose instead, cheapest offered first.
_SMALLER_ENDPOINTS = ("ml.g6.xlarge", "ml.g5.xlarge", "ml.inf2.xlarge")


class AdviceCode(StrEnum):
    SPOT_WITH_CHECKPOINTING = "spot-with-checkpointing"
    OVERSIZED_ENDPOINT = "oversized-endpoint"
    PENDING_CAPACITY_COST = "pending-capacity-cost"


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


def advise(
    priced: Iterable[PricedResource],
    pending: Sequence[tuple[Resource, int]],
    catalog: PriceCatalog,
    now: datetime,
    gpu_utilization: Mapping[str, Decimal] | None = None,
) -> tuple[Advice, ...]:
    """All advice for one scan, largest saving first.

    ``gpu_utilization`` (resource key -> average GPU utilization %, over the window the
    caller read) feeds the oversized-endpoint advice; without it that advice is not given.
    """
    now = require_utc(now)
    found: list[Advice] = []
    for item in priced:
        spot = _spot_advice(item, catalog, now)
        if spot is not None:
            found.append(spot)
        util = (gpu_utilization or {}).get(item.resource.key)
        if util is not None:
            smaller = _endpoint_advice(item, catalog, util)
            if smaller is not None:
                found.append(smaller)
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


def _endpoint_advice(item: PricedResource, catalog: PriceCatalog, util: Decimal) -> Advice | None:
    r, rate = item.resource, item.usd_per_hour
    if r.kind is not ResourceKind.SAGEMAKER_ENDPOINT or rate is None or not r.instance_type:
        return None
    carried = accelerator_of_type(r.instance_type)
    if carried is None or carried[0].key not in _OVERSIZED or util >= LOW_GPU_UTILIZATION:
        return None
    offered = set(catalog.offered_types(r.region, "sagemaker"))
    options = [
        (price * r.count, t)
        for t in _SMALLER_ENDPOINTS
        if t in offered and (price := catalog.sagemaker_rate(r.region, t)) is not None
    ]
    if not options:
        return None
    cheaper, target = min(options)
    saving = (rate - cheaper) * HOURS_PER_PRICING_MONTH
    if saving <= 0:
        return None
    return Advice(
        AdviceCode.OVERSIZED_ENDPOINT,
        r.key,
        saving,
        f"{r.instance_type} endpoint at {util:.0f} % GPU utilization; {r.count} x {target} would "
        f"save about ${cents(saving):,}/month, assuming the model fits one 24-32 GB device "
        "and its traffic fits the smaller device's throughput",
    )


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
