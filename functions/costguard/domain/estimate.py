"""Cost before launch: a training run's GPU-hours and cost per instance option, the true
cost of an ML iteration on spot and on-demand, and where the two cross.

Pure: inputs are numbers and the price catalog; nothing here reads AWS or the clock.
The formulas are written out in :func:`formulas_markdown` (docs/estimates.md is generated
from it, with a worked example computed by this module).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import ROUND_CEILING, Decimal
from enum import StrEnum

from costguard.domain.accelerators import ACCELERATORS, BY_KEY, AcceleratorSpec
from costguard.domain.calendar import require_utc
from costguard.domain.models import AcceleratorKind
from costguard.domain.money import HOURS_PER_PRICING_MONTH, ZERO
from costguard.domain.pricing import PriceCatalog
from costguard.domain.spend import Observation
from costguard.domain.spot import SpotProfile, SpotTable

#: Training compute per parameter per token: forward (2) plus backward (4) passes.
FLOPS_PER_PARAM_TOKEN = Decimal(6)
SECONDS_PER_HOUR = Decimal(3600)
TERA = Decimal(10) ** 12

#: Model FLOPs utilization: the plausible range, where published runs of every generation
#: fall (the default within it is per generation: :data:`MFU_BY_GENERATION`).
MFU_LOW = Decimal("0.25")
MFU_HIGH = Decimal("0.45")
#: Half-width of the range around an MFU the user gives (clipped to (0, 1]).
MFU_SPREAD = Decimal("0.10")
#: The lowest MFU an estimate accepts. Published runs sit at 0.25-0.45; below 1 % of peak
#: the number is a typo (0.0035 for 0.35), not a plan, and its GPU-hours run past what
#: any output can round.
MFU_FLOOR = Decimal("0.01")


class Generation(StrEnum):
    """An accelerator generation: the unit the MFU default is calibrated for."""

    AMPERE = "Ampere"
    HOPPER = "Hopper"
    BLACKWELL = "Blackwell"
    ADA = "Ada Lovelace"
    TURING = "Turing"
    VOLTA = "Volta"
    TRAINIUM = "Trainium"
    TRAINIUM2 = "Trainium2"
    INFERENTIA2 = "Inferentia2"


#: Accelerator key -> its generation (a test checks that every accelerator has one).
GENERATION_OF: dict[str, Generation] = {
    "a100-40gb": Generation.AMPERE,
    "a100-80gb": Generation.AMPERE,
    "a10g": Generation.AMPERE,
    "h100": Generation.HOPPER,
    "h200": Generation.HOPPER,
    "b200": Generation.BLACKWELL,
    "l40s": Generation.ADA,
    "l4": Generation.ADA,
    "t4": Generation.TURING,
    "v100": Generation.VOLTA,
    "trainium1": Generation.TRAINIUM,
    "trainium2": Generation.TRAINIUM2,
    "inferentia2": Generation.INFERENTIA2,
}

#: The calibrated default per generation: the geometric midpoint of the lowest and highest
#: implied MFU of the generation's calibrating runs (it minimises the worst relative error),
#: to two places. Ampere: √(0.350 · 0.435) = 0.390; Hopper: one run, 0.345 → 0.35. A test
#: recomputes both from CALIBRATION_RUNS.
MFU_BY_GENERATION: dict[Generation, Decimal] = {
    Generation.AMPERE: Decimal("0.39"),
    Generation.HOPPER: Decimal("0.35"),
}
#: A generation with no published run takes the lowest calibrated default: an estimate
#: with nothing to calibrate it on errs towards cost, and says that it is not calibrated.
UNCALIBRATED_MFU: Decimal = min(MFU_BY_GENERATION.values())
#: Every calibration run's GPU-hours land within this of the published figure at its
#: generation's default (a test holds each one to it; the docs table shows the error).
CALIBRATION_TOLERANCE = Decimal("0.15")


def generation_of(accelerator: str) -> Generation:
    return GENERATION_OF[accelerator]


def default_mfu(accelerator: str) -> Decimal:
    """The MFU an estimate on ``accelerator`` assumes when none is given."""
    return MFU_BY_GENERATION.get(generation_of(accelerator), UNCALIBRATED_MFU)


def mfu_is_calibrated(accelerator: str) -> bool:
    return generation_of(accelerator) in MFU_BY_GENERATION


#: Weights + gradients in BF16 (2 + 2) and Adam's FP32 master weights, m and v (4 + 4 + 4).
DEFAULT_BYTES_PER_PARAM = Decimal(16)
#: What a restart costs a training run on spot (relaunch, reload the checkpoint).
DEFAULT_RESTART_HOURS = Decimal("0.5")
DEFAULT_CHECKPOINT_HOURS = Decimal(1)


@dataclass(frozen=True, slots=True)
class PublishedRun:
    """A training run whose GPU-hours were published: the MFU calibration."""

    name: str
    params: Decimal
    tokens: Decimal
    accelerator: str
    gpu_hours: Decimal
    source: str
    #: Why the run does not calibrate its generation's default ("": it does).
    excluded_because: str = ""

    @property
    def generation(self) -> Generation:
        return generation_of(self.accelerator)

    def implied_mfu(self) -> Decimal:
        spec = BY_KEY[self.accelerator]
        return training_flops(self.params, self.tokens) / (
            spec.peak_tflops * TERA * SECONDS_PER_HOUR * self.gpu_hours
        )

    def estimated_gpu_hours(self) -> Decimal:
        """The run's GPU-hours as an estimate computes them, at its generation's default."""
        spec = BY_KEY[self.accelerator]
        flops = training_flops(self.params, self.tokens)
        return gpu_hours(flops, spec.peak_tflops, default_mfu(self.accelerator))

    def error(self) -> Decimal:
        """(estimated − published) / published: positive when the estimate is high."""
        return self.estimated_gpu_hours() / self.gpu_hours - 1


_LLAMA2 = (
    "Llama 2 paper (Touvron et al. 2023), table 2: pretraining GPU-hours on A100-80GB, "
    "2.0T tokens (table 1)"
)
_LLAMA31 = (
    "Llama 3.1 model card: training GPU-hours on H100-80GB; tokens from the Llama 3 paper "
    "(15.6T for 405B, 15T+ for the others)"
)

_LLAMA31_70B_OUT = (
    "its published GPU-hours imply MFU 0.253, against 0.345 for Llama 3.1 405B on the same "
    "H100s and the 38-43 % the Llama 3 paper measured for the 405B's pretraining (table 4): "
    "the model card does not split a model's GPU-hours by stage, and these cover more than "
    "6·N·T of pretraining. At Hopper's default it lands 28 % low; calibrated on it, the "
    "405B would land 36 % high"
)
_LLAMA31_8B_OUT = (
    "its published GPU-hours imply MFU 0.139, outside the range of every other run: as for "
    "the 70B, they cover far more than 6·N·T of pretraining"
)

#: Runs with published GPU-hours. Those not excluded calibrate their generation's default
#: (MFU_BY_GENERATION); tests hold each one within CALIBRATION_TOLERANCE of it.
CALIBRATION_RUNS: tuple[PublishedRun, ...] = (
    PublishedRun(
        "Llama 2 7B", Decimal("7e9"), Decimal("2e12"), "a100-80gb", Decimal(184320), _LLAMA2
    ),
    PublishedRun(
        "Llama 2 13B", Decimal("13e9"), Decimal("2e12"), "a100-80gb", Decimal(368640), _LLAMA2
    ),
    PublishedRun(
        "Llama 2 34B", Decimal("34e9"), Decimal("2e12"), "a100-80gb", Decimal(1038336), _LLAMA2
    ),
    PublishedRun(
        "Llama 2 70B", Decimal("70e9"), Decimal("2e12"), "a100-80gb", Decimal(1720320), _LLAMA2
    ),
    PublishedRun(
        "Llama 3.1 405B", Decimal("405e9"), Decimal("15.6e12"), "h100", Decimal("30.84e6"), _LLAMA31
    ),
    PublishedRun(
        "Llama 3.1 70B",
        Decimal("70e9"),
        Decimal("15e12"),
        "h100",
        Decimal("7.0e6"),
        _LLAMA31,
        _LLAMA31_70B_OUT,
    ),
    PublishedRun(
        "Llama 3.1 8B",
        Decimal("8e9"),
        Decimal("15e12"),
        "h100",
        Decimal("1.46e6"),
        _LLAMA31,
        _LLAMA31_8B_OUT,
    ),
)
#: The runs that calibrate a default.
PUBLISHED_RUNS: tuple[PublishedRun, ...] = tuple(
    r for r in CALIBRATION_RUNS if not r.excluded_because
)
#: Published, but excluded from the calibration, each with its reason.
OUTLIER_RUNS: tuple[PublishedRun, ...] = tuple(r for r in CALIBRATION_RUNS if r.excluded_because)


# -- small value types -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Span:
    """An estimate as a range: ``low`` and ``high`` bound it, ``mid`` is the default's."""

    low: Decimal
    mid: Decimal
    high: Decimal

    def scale(self, factor: Decimal) -> Span:
        return Span(self.low * factor, self.mid * factor, self.high * factor)


def mfu_span(
    mfu: Decimal | None, default: Decimal = UNCALIBRATED_MFU
) -> tuple[Decimal, Decimal, Decimal]:
    """(lowest, central, highest) MFU: the generation's ``default`` within the calibrated
    range, or ±0.10 around the one given. A higher MFU is a *lower* cost, so costs run
    high → low with it."""
    if mfu is None:
        return MFU_LOW, default, MFU_HIGH
    if not (mfu.is_finite() and MFU_FLOOR <= mfu <= 1):
        raise ValueError(f"MFU is a fraction from {MFU_FLOOR} to 1, got {mfu}")
    low = max(mfu - MFU_SPREAD, mfu / 2)
    return low, mfu, min(mfu + MFU_SPREAD, Decimal(1))


def training_flops(params: Decimal, tokens: Decimal) -> Decimal:
    """≈ 6 · N · T: each token costs 2 FLOPs per parameter forward and 4 backward."""
    return FLOPS_PER_PARAM_TOKEN * params * tokens


def gpu_hours(flops: Decimal, peak_tflops: Decimal, mfu: Decimal) -> Decimal:
    """Device-hours to run ``flops`` at ``mfu`` of a device's dense peak."""
    return flops / (peak_tflops * TERA * mfu * SECONDS_PER_HOUR)


def gpu_hours_span(flops: Decimal, spec: AcceleratorSpec, mfu: Decimal | None) -> Span:
    low_mfu, mid_mfu, high_mfu = mfu_span(mfu, default_mfu(spec.key))
    return Span(
        gpu_hours(flops, spec.peak_tflops, high_mfu),
        gpu_hours(flops, spec.peak_tflops, mid_mfu),
        gpu_hours(flops, spec.peak_tflops, low_mfu),
    )


# -- memory fit (coarse) -------------------------------------------------------------------


class Fit(StrEnum):
    ONE_DEVICE = "fits-one-device"
    NEEDS_SHARDING = "needs-sharding"
    DOES_NOT_FIT = "does-not-fit"


@dataclass(frozen=True, slots=True)
class MemoryFit:
    """A coarse first check: model state only (no activations, no fragmentation)."""

    need_gb: Decimal
    device_gb: Decimal
    devices: int
    fit: Fit

    @property
    def message(self) -> str:
        need = f"{_fmt(self.need_gb)} GB of weights, gradients and optimizer state"
        if self.fit is Fit.ONE_DEVICE:
            return f"coarse check: {need} fit on one {_fmt(self.device_gb)} GB device"
        total = self.device_gb * self.devices
        if self.fit is Fit.NEEDS_SHARDING:
            return (
                f"coarse check: {need} do not fit on one {_fmt(self.device_gb)} GB device; "
                f"shard them (ZeRO-3/FSDP or model parallelism) across the {self.devices} "
                f"devices ({_fmt(total)} GB)"
            )
        return (
            f"coarse check: {need} do not fit even sharded across {self.devices} devices "
            f"({_fmt(total)} GB): use more devices or fewer bytes per parameter"
        )


def memory_fit(
    params: Decimal, bytes_per_param: Decimal, device_gb: Decimal, devices: int
) -> MemoryFit:
    need = params * bytes_per_param / Decimal(10) ** 9
    if need <= device_gb:
        fit = Fit.ONE_DEVICE
    elif need <= device_gb * devices:
        fit = Fit.NEEDS_SHARDING
    else:
        fit = Fit.DOES_NOT_FIT
    return MemoryFit(need, device_gb, devices, fit)


# -- spot against on-demand: one model for an iteration and for a training run ----------------


@dataclass(frozen=True, slots=True)
class IterationPlan:
    """An experiment: its inputs, in hours and $/h.

    ``setup_hours`` is paid once per ``iterations_per_setup`` iterations of
    ``work_hours`` each, in both markets. On spot each interruption pays
    ``restart_hours`` again (the setup, unless given) and loses half a checkpoint interval
    of work (half the iteration when there are no checkpoints within it).
    """

    work_hours: Decimal
    usd_per_hour: Decimal
    setup_hours: Decimal = ZERO
    iterations_per_setup: int = 1
    checkpoint_hours: Decimal = ZERO
    spot_saving: Decimal = ZERO
    interruptions_per_hour: Decimal = ZERO
    researcher_usd_per_hour: Decimal = ZERO
    latency_share: Decimal = ZERO
    #: Extra setup a spot launch needs (waiting for capacity, restoring state).
    spot_extra_setup_hours: Decimal = ZERO
    #: What each interruption re-pays; None: the setup plus the spot extra.
    restart_hours: Decimal | None = None

    def __post_init__(self) -> None:
        for name in (
            "work_hours",
            "usd_per_hour",
            "setup_hours",
            "checkpoint_hours",
            "interruptions_per_hour",
            "researcher_usd_per_hour",
            "spot_extra_setup_hours",
        ):
            value = getattr(self, name)
            if not (value.is_finite() and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if self.iterations_per_setup < 1:
            raise ValueError("iterations_per_setup must be at least 1")
        if not ZERO <= self.spot_saving < 1:
            raise ValueError(f"spot_saving is a fraction in [0, 1), got {self.spot_saving}")
        if not ZERO <= self.latency_share <= 1:
            raise ValueError(f"latency_share is a fraction in [0, 1], got {self.latency_share}")
        if self.restart_hours is not None and not (
            self.restart_hours.is_finite() and self.restart_hours >= 0
        ):
            raise ValueError(
                f"restart_hours must be a finite number >= 0, got {self.restart_hours}"
            )

    @property
    def restart(self) -> Decimal:
        if self.restart_hours is not None:
            return self.restart_hours
        return self.setup_hours + self.spot_extra_setup_hours

    def lost_per_interruption(self) -> Decimal:
        """Expected work lost: half a checkpoint interval, or half the iteration when it
        is not checkpointed within (an interruption falls uniformly in the interval)."""
        c = self.checkpoint_hours
        span = c if ZERO < c < self.work_hours else self.work_hours
        return span / 2


@dataclass(frozen=True, slots=True)
class IterationCost:
    """Expected cost of one iteration (setup amortized), split into its parts."""

    wall_hours: Decimal
    instance_usd: Decimal
    setup_tax_usd: Decimal
    latency_usd: Decimal
    expected_interruptions: Decimal = ZERO
    rework_hours: Decimal = ZERO

    @property
    def total_usd(self) -> Decimal:
        return self.instance_usd + self.setup_tax_usd + self.latency_usd


def on_demand_cost(p: IterationPlan) -> IterationCost:
    """C_od = [s·(r + h) + m·w·(r + α·h)] / m, per iteration."""
    m = Decimal(p.iterations_per_setup)
    s, w, r = p.setup_hours, p.work_hours, p.usd_per_hour
    h, a = p.researcher_usd_per_hour, p.latency_share
    wall = s + m * w
    return IterationCost(
        wall_hours=wall / m,
        instance_usd=r * wall / m,
        setup_tax_usd=s * h / m,
        latency_usd=w * a * h,
    )


def spot_cost(p: IterationPlan) -> IterationCost | None:
    """Expected spot cost per iteration; None when the run never finishes.

    Interruptions are a Poisson process of rate λ over the whole time on spot. Each one
    re-pays the restart R and loses L of work, so the time on spot T satisfies
    T = (s + e + m·w) + λ·T·(R + L), i.e. T = (s + e + m·w) / (1 − λ(R + L)), with
    N = λ·T interruptions expected. When λ(R + L) ≥ 1 an interruption comes, on average,
    before the lost time is made up: the run never finishes.
    """
    m = Decimal(p.iterations_per_setup)
    s, e, w = p.setup_hours, p.spot_extra_setup_hours, p.work_hours
    h, a, lam = p.researcher_usd_per_hour, p.latency_share, p.interruptions_per_hour
    rate = p.usd_per_hour * (1 - p.spot_saving)
    restart, lost = p.restart, p.lost_per_interruption()
    rho = lam * (restart + lost)
    if rho >= 1:
        return None
    productive = s + e + m * w
    wall = productive / (1 - rho)
    n = lam * wall
    return IterationCost(
        wall_hours=wall / m,
        instance_usd=rate * wall / m,
        setup_tax_usd=(s + e + n * restart) * h / m,
        latency_usd=(m * w + n * lost) * a * h / m,
        expected_interruptions=n / m,
        rework_hours=(wall - productive) / m,
    )


def spot_saving_usd(p: IterationPlan) -> Decimal | None:
    """On-demand minus spot, per iteration (positive: spot is cheaper); None: spot never ends."""
    spot = spot_cost(p)
    return None if spot is None else on_demand_cost(p).total_usd - spot.total_usd


@dataclass(frozen=True, slots=True)
class BreakEven:
    """Where spot is cheaper, as a function of the experiment's duration ``w``.

    ``spot_cheaper_from``: the shortest duration from which spot is cheaper (0: from the
    start; None: never). ``spot_cheaper_until``: the duration beyond which it no longer is
    (None: no such limit).
    """

    spot_cheaper_from: Decimal | None
    spot_cheaper_until: Decimal | None = None

    @property
    def never(self) -> bool:
        return self.spot_cheaper_from is None

    def describe(self) -> str:
        if self.spot_cheaper_from is None:
            return "never: on-demand is cheaper for every duration"
        start = (
            "from the first minute"
            if self.spot_cheaper_from == 0
            else f"for experiments longer than {_fmt(self.spot_cheaper_from)} h"
        )
        until = (
            f", up to {_fmt(self.spot_cheaper_until)} h"
            if self.spot_cheaper_until is not None
            else ""
        )
        return f"spot is cheaper {start}{until}"


#: Durations (hours) beyond this are not experiments; the search stops here.
MAX_EXPERIMENT_HOURS = Decimal(100_000)
_GRID = 240
_TOLERANCE = Decimal("0.0001")
#: On-demand and spot costs closer than this (USD per iteration) are a tie: Decimal rounding
#: at 28 digits, not a saving (plans with no spot discount would otherwise find spurious
#: windows where spot is "cheaper" by 1E-28).
TIE_USD = Decimal("1e-9")


def _advantage(p: IterationPlan, w: Decimal) -> Decimal:
    """On-demand minus spot for duration ``w``; -inf-like when spot never finishes."""
    saving = spot_saving_usd(replace(p, work_hours=w))
    return Decimal("-Infinity") if saving is None else saving


def break_even(p: IterationPlan) -> BreakEven:
    """Solve C_od(w) = C_spot(w) for the experiment duration w (p.work_hours is ignored).

    For w at or above the checkpoint interval the lost work per interruption is fixed,
    so both costs are linear in w and the crossing there is solved exactly. Below it
    (or everywhere, without checkpoints) the lost work grows with w; the crossing is
    bracketed on a geometric grid and bisected to 0.0001 h.
    """
    c = p.checkpoint_hours
    linear_from = c if c > 0 else MAX_EXPERIMENT_HOURS
    points = _grid(linear_from)
    crossings: list[tuple[Decimal, bool]] = []  # (w, spot cheaper above w)
    previous_w, previous = points[0], _advantage(p, points[0]) > TIE_USD
    start_cheaper = previous
    for w in points[1:]:
        now = _advantage(p, w) > TIE_USD
        if now != previous:
            crossings.append((_bisect(p, previous_w, w, previous), now))
        previous_w, previous = w, now
    if c > 0:
        # Linear beyond c: D(w) = D(c) + slope·(w − c).
        d_c = _advantage(p, c)
        d_next = _advantage(p, c + 1)
        if d_c.is_finite() and d_next.is_finite():
            slope = d_next - d_c
            if abs(slope) > TIE_USD:
                root = c - d_c / slope
                if c < root <= MAX_EXPERIMENT_HOURS:
                    crossings.append((root, slope > 0))
    return _intervals(start_cheaper, crossings)


def _grid(upper: Decimal) -> list[Decimal]:
    low = Decimal("0.001")
    upper = max(upper, low * 2)
    ratio = (upper / low) ** (Decimal(1) / _GRID)
    points = [low * ratio**i for i in range(_GRID)]
    return [*points, upper]


def _bisect(p: IterationPlan, lo: Decimal, hi: Decimal, lo_cheaper: bool) -> Decimal:
    while hi - lo > _TOLERANCE:
        mid = (lo + hi) / 2
        if (_advantage(p, mid) > TIE_USD) == lo_cheaper:
            lo = mid
        else:
            hi = mid
    return hi


def _intervals(start_cheaper: bool, crossings: list[tuple[Decimal, bool]]) -> BreakEven:
    begin: Decimal | None = ZERO if start_cheaper else None
    for w, cheaper_above in sorted(crossings):
        if cheaper_above and begin is None:
            begin = w
        elif not cheaper_above and begin is not None:
            return BreakEven(begin, w)
    return BreakEven(begin, None)


# -- training runs ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrainingRequest:
    params: Decimal
    tokens: Decimal
    accelerator: str | None = None
    mfu: Decimal | None = None
    gpus: int | None = None
    region: str = "us-east-1"
    bytes_per_param: Decimal = DEFAULT_BYTES_PER_PARAM
    checkpoint_hours: Decimal = DEFAULT_CHECKPOINT_HOURS
    restart_hours: Decimal = DEFAULT_RESTART_HOURS
    #: List inference-only accelerators (Inferentia) too, ranked last. Naming one as the
    #: ``accelerator`` lists it as well.
    include_inference: bool = False

    def __post_init__(self) -> None:
        for name in ("params", "tokens", "bytes_per_param"):
            value = getattr(self, name)
            if not (value.is_finite() and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value}")
        if self.gpus is not None and self.gpus < 1:
            raise ValueError("gpus must be at least 1")
        mfu_span(self.mfu)


@dataclass(frozen=True, slots=True)
class SpotEstimate:
    usd: Span
    expected_interruptions: Decimal
    rework_hours: Decimal
    profile: SpotProfile
    interruptions_per_hour: Decimal


@dataclass(frozen=True, slots=True)
class TrainingOption:
    instance_type: str
    accelerator: AcceleratorSpec
    devices_per_instance: int
    instances: int
    usd_per_hour: Decimal
    gpu_hours: Span
    wall_hours: Span
    on_demand_usd: Span
    #: None: no spot table in the catalog, or the run never finishes on spot.
    spot: SpotEstimate | None
    memory: MemoryFit
    notes: tuple[str, ...] = ()
    #: (lowest, central, highest) MFU the figures use: the generation's default or the given.
    mfu: tuple[Decimal, Decimal, Decimal] = (MFU_LOW, UNCALIBRATED_MFU, MFU_HIGH)
    #: False: the generation has no published run, and its default is the fallback.
    mfu_calibrated: bool = True

    @property
    def generation(self) -> Generation:
        return generation_of(self.accelerator.key)

    @property
    def inference_only(self) -> bool:
        return is_inference_only(self.accelerator)

    @property
    def devices(self) -> int:
        return self.instances * self.devices_per_instance


@dataclass(frozen=True, slots=True)
class TrainingEstimate:
    request: TrainingRequest
    flops: Decimal
    #: The MFU every option uses; None when they differ (a default per generation).
    mfu: tuple[Decimal, Decimal, Decimal] | None
    options: tuple[TrainingOption, ...]
    #: (instance type, why it is not an option): retired, not offered, unpriced.
    skipped: tuple[tuple[str, str], ...] = ()
    spot_table: SpotTable | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


#: Why an inference-only accelerator is not a training option unless asked.
INFERENCE_ONLY_REASON = "an inference accelerator: not a training option unless asked"


def is_inference_only(spec: AcceleratorSpec) -> bool:
    """Inferentia is sold for inference; the Neuron SDK trains on Trainium. Ranked as a
    training option it looks cheapest (its peak is Trainium's), which misleads."""
    return spec.kind is AcceleratorKind.INFERENTIA


def estimate_training(request: TrainingRequest, catalog: PriceCatalog) -> TrainingEstimate:
    """Rank every offered EC2 option carrying the accelerator (or every accelerator).

    An option uses whole instances: ``--gpus`` rounded up to the instance's device count,
    or one instance when no count is given. Cost assumes MFU holds at that scale; the MFU
    is the accelerator generation's calibrated default unless one is given. Inference-only
    accelerators are left out unless named or ``include_inference``, and then ranked last.
    """
    flops = training_flops(request.params, request.tokens)
    specs = [a for a in ACCELERATORS if request.accelerator in (None, a.key)]
    if not specs:
        raise ValueError(f"unknown accelerator {request.accelerator!r}")
    offered = set(catalog.offered_types(request.region))
    options: list[TrainingOption] = []
    skipped: list[tuple[str, str]] = []
    spans: set[tuple[Decimal, Decimal, Decimal]] = set()
    for spec in specs:
        if (
            is_inference_only(spec)
            and request.accelerator is None
            and not request.include_inference
        ):
            skipped.extend((itype, INFERENCE_ONLY_REASON) for itype, _ in spec.instances)
            continue
        span = mfu_span(request.mfu, default_mfu(spec.key))
        hours = gpu_hours_span(flops, spec, request.mfu)
        for itype, per in spec.instances:
            if itype not in offered:
                skipped.append((itype, _why_not_offered(catalog, request.region, itype)))
                continue
            rate = catalog.ec2_on_demand(request.region, itype)
            assert rate is not None  # offered_types only lists priced types
            wanted = request.gpus or per
            instances = int((Decimal(wanted) / per).to_integral_value(rounding=ROUND_CEILING))
            devices = instances * per
            wall = hours.scale(Decimal(1) / devices)
            notes: tuple[str, ...] = (spec.caveat,) if spec.caveat else ()
            if request.gpus is not None and devices != request.gpus:
                notes += (f"{request.gpus} GPUs rounded up to {instances} x {itype} ({devices})",)
            spans.add(span)
            options.append(
                TrainingOption(
                    instance_type=itype,
                    accelerator=spec,
                    devices_per_instance=per,
                    instances=instances,
                    usd_per_hour=rate,
                    gpu_hours=hours,
                    wall_hours=wall,
                    on_demand_usd=wall.scale(rate * instances),
                    spot=_training_spot(request, catalog.spot, itype, rate, instances, wall),
                    memory=memory_fit(
                        request.params, request.bytes_per_param, spec.memory_gb, devices
                    ),
                    notes=notes,
                    mfu=span,
                    mfu_calibrated=request.mfu is not None or mfu_is_calibrated(spec.key),
                )
            )
    # Inference-only accelerators go last, then options whose model state cannot fit at
    # all, whatever they cost.
    options.sort(
        key=lambda o: (
            o.inference_only,
            o.memory.fit is Fit.DOES_NOT_FIT,
            o.on_demand_usd.mid,
            o.wall_hours.mid,
            o.instance_type,
        )
    )
    general: tuple[str, ...] = ()
    if catalog.spot is None:
        general = ("the price catalog has no spot table: spot costs are not estimated",)
    if not spans:
        spans = {mfu_span(request.mfu, default_mfu(s.key)) for s in specs}
    uniform = next(iter(spans)) if len(spans) == 1 else None
    return TrainingEstimate(
        request, flops, uniform, tuple(options), tuple(skipped), catalog.spot, general
    )


def _why_not_offered(catalog: PriceCatalog, region: str, itype: str) -> str:
    retired = catalog.retirement(itype)
    if retired is not None:
        return f"retired: {retired}"
    return catalog.unpriced_reason("ec2", region, itype)


def _training_spot(
    request: TrainingRequest,
    table: SpotTable | None,
    itype: str,
    rate: Decimal,
    instances: int,
    wall: Span,
) -> SpotEstimate | None:
    """Synchronous training stops when any instance is reclaimed: the job's interruption
    rate is the instances' rates summed (k·λ)."""
    if table is None:
        return None
    profile = table.profile(itype)
    lam = table.hourly_rate(profile.bucket) * instances

    def plan(hours: Decimal) -> IterationPlan:
        return IterationPlan(
            work_hours=hours,
            usd_per_hour=rate * instances,
            checkpoint_hours=request.checkpoint_hours,
            spot_saving=profile.saving,
            interruptions_per_hour=lam,
            restart_hours=request.restart_hours,
        )

    costs = [spot_cost(plan(h)) for h in (wall.low, wall.mid, wall.high)]
    low, mid, high = costs
    if low is None or mid is None or high is None:
        return None
    return SpotEstimate(
        Span(low.instance_usd, mid.instance_usd, high.instance_usd),
        mid.expected_interruptions,
        mid.rework_hours,
        profile,
        lam,
    )


# -- the budget gate -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunRate:
    """A project's current $/h, and how many of its running resources it leaves out."""

    usd_per_hour: Decimal
    #: Resources the last scan saw running with no price: their spend is unknown, not $0.
    unpriced: int = 0


def project_run_rate(
    observations: Iterable[Observation], project: str, watermark: datetime | None
) -> RunRate:
    """What ``project`` runs now: the rates of its resources the last scan saw.

    The ledger keeps older observations (62 days); only those at or after the last scan's
    ``watermark`` are running now. ``accrue`` stores an unpriced resource at $0/h, and a
    priced one is never $0 (see :mod:`costguard.domain.pricing`): a $0 rate here is a
    resource whose spend is unknown, counted apart so that no forecast hides it.
    """
    if watermark is None:
        return RunRate(ZERO)
    now = [
        o.usd_per_hour
        for o in observations
        if o.project == project and require_utc(o.observed_at) >= require_utc(watermark)
    ]
    return RunRate(sum(now, ZERO), sum(1 for rate in now if rate == 0))


@dataclass(frozen=True, slots=True)
class BudgetGate:
    project: str
    budget_usd: Decimal | None
    month_to_date_usd: Decimal
    forecast_usd: Decimal
    run_usd: Decimal
    #: The part of the run's cost that falls in this month.
    run_adds_usd: Decimal
    hours_left_in_month: Decimal
    #: Running resources the forecast leaves out: unpriced, so their spend is unknown.
    unpriced: int = 0
    #: Where the budget came from (the CLI names them: flag, file, ledger, env).
    budget_source: str = ""
    #: False: no deployed ledger was read; month-to-date is as given, the run-rate unseen.
    ledger: bool = True

    @property
    def forecast_with_run_usd(self) -> Decimal:
        return self.forecast_usd + self.run_adds_usd

    @property
    def over(self) -> bool:
        return self.budget_usd is not None and self.forecast_with_run_usd > self.budget_usd


def budget_gate(
    project: str,
    budget: Decimal | None,
    month_to_date: Decimal,
    run_rate_usd_per_hour: Decimal,
    hours_left: Decimal,
    run_usd: Decimal,
    run_wall_hours: Decimal,
    unpriced: int = 0,
    *,
    budget_source: str = "",
    ledger: bool = True,
) -> BudgetGate:
    """The month's forecast (spent + current run-rate × hours left) and what the run adds.

    A run starting now spends evenly over its wall-clock: only the share that falls
    before the month ends (hours left / wall-clock, at most all of it) lands on this
    month's forecast. ``unpriced``: running resources the run-rate leaves out, which the
    gate reports rather than counting as $0.
    """
    forecast = month_to_date + run_rate_usd_per_hour * hours_left
    share = Decimal(1) if run_wall_hours <= hours_left else hours_left / run_wall_hours
    return BudgetGate(
        project,
        budget,
        month_to_date,
        forecast,
        run_usd,
        run_usd * share,
        hours_left,
        unpriced,
        budget_source,
        ledger,
    )


# -- presentation helpers shared by the CLI and the docs -----------------------------------------


def _fmt(value: Decimal, places: int = 1) -> str:
    """A readable number: thousands separators, ``places`` decimals below 1,000."""
    if not value.is_finite():
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:,.{places}f}"


def usd(value: Decimal) -> str:
    return f"${value:,.2f}" if abs(value) < 1000 else f"${value:,.0f}"


def hours_text(hours: Decimal) -> str:
    """Wall-clock for people: hours under two days, days under 90 days, then months."""
    if hours < 48:
        return f"{_fmt(hours)} h"
    days = hours / 24
    if days < 90:
        return f"{_fmt(days)} d"
    return f"{_fmt(hours / HOURS_PER_PRICING_MONTH)} mo"


def calibration_rows(runs: Iterable[PublishedRun] = CALIBRATION_RUNS) -> list[str]:
    """The calibration table's rows: run, device, generation, published GPU-hours, implied
    MFU, the generation's default, GPU-hours at it, the error and whether it calibrates."""
    return [
        f"| {r.name} | {r.accelerator} | {r.generation.value} | {_fmt(r.gpu_hours)} | "
        f"{r.implied_mfu():.3f} | {default_mfu(r.accelerator)} | "
        f"{_fmt(r.estimated_gpu_hours())} | {r.error() * 100:+.1f} % |"
        + (" excluded (below) |" if r.excluded_because else " calibrates |")
        for r in runs
    ]


def monthly(usd_per_hour: Decimal) -> Decimal:
    return usd_per_hour * HOURS_PER_PRICING_MONTH
