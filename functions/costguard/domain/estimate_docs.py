"""The generated half of docs/estimates.md: the formulas, the MFU calibration, the
accelerator table and a worked example, every number computed by
:mod:`costguard.domain.estimate`.

``python -m costguard.cli.estimate`` prints it; tests/unit/test_estimate_docs.py keeps the
page's end equal to it, so the documented example can never drift from the code.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from costguard.domain.accelerators import ACCELERATORS
from costguard.domain.estimate import (
    CALIBRATION_RUNS,
    CALIBRATION_TOLERANCE,
    DEFAULT_BYTES_PER_PARAM,
    GENERATION_OF,
    MFU_BY_GENERATION,
    MFU_HIGH,
    MFU_LOW,
    OUTLIER_RUNS,
    PUBLISHED_RUNS,
    UNCALIBRATED_MFU,
    Generation,
    IterationCost,
    IterationPlan,
    break_even,
    calibration_rows,
    on_demand_cost,
    spot_cost,
)
from costguard.domain.spot import hourly_rate

#: The worked example's inputs: a made-up $10/h instance, so a price refresh never moves it.
EXAMPLE = IterationPlan(
    work_hours=Decimal(2),
    usd_per_hour=Decimal(10),
    setup_hours=Decimal("0.5"),
    iterations_per_setup=1,
    checkpoint_hours=Decimal("0.5"),
    spot_saving=Decimal("0.6"),
    interruptions_per_hour=hourly_rate(Decimal("0.30")),
    researcher_usd_per_hour=Decimal(100),
    latency_share=Decimal("0.5"),
)
#: The same experiment where a spot launch waits 15 minutes for capacity and spot is
#: reclaimed about once every 50 hours: a finite break-even.
EXAMPLE_CAPACITY = replace(
    EXAMPLE, interruptions_per_hour=Decimal("0.02"), spot_extra_setup_hours=Decimal("0.25")
)
#: ... and once every ten hours: never.
EXAMPLE_HARSH = replace(EXAMPLE_CAPACITY, interruptions_per_hour=Decimal("0.1"))


def _d(value: Decimal, places: int = 2) -> str:
    return f"{value:,.{places}f}"


def _cost_rows(label: str, cost: IterationCost | None) -> str:
    if cost is None:
        return f"| {label} | never finishes | | | | | |"
    return (
        f"| {label} | ${_d(cost.total_usd)} | ${_d(cost.instance_usd)} | "
        f"${_d(cost.setup_tax_usd)} | ${_d(cost.latency_usd)} | {_d(cost.wall_hours, 4)} | "
        f"{_d(cost.expected_interruptions, 4)} |"
    )


def _example(title: str, p: IterationPlan) -> list[str]:
    od, spot = on_demand_cost(p), spot_cost(p)
    return [
        f"**{title}.** w = {p.work_hours} h of work, r = ${p.usd_per_hour}/h on-demand, "
        f"spot saving d = {p.spot_saving} (r_s = ${p.usd_per_hour * (1 - p.spot_saving)}/h), "
        f"s = {p.setup_hours} h setup, m = {p.iterations_per_setup}, c = {p.checkpoint_hours} h "
        f"checkpoints, e = {p.spot_extra_setup_hours} h extra spot setup, "
        f"λ = {_d(p.interruptions_per_hour, 6)}/h, h = ${p.researcher_usd_per_hour}/h, "
        f"α = {p.latency_share}.",
        "",
        "| market | total | instance | setup tax | latency | wall (h) | interruptions |",
        "|---|---|---|---|---|---|---|",
        _cost_rows("on-demand", od),
        _cost_rows("spot", spot),
        "",
        f"Break-even: {break_even(p).describe()}.",
        "",
    ]


def _generation_rows() -> list[str]:
    rows = []
    for generation in Generation:
        keys = [k for k, g in GENERATION_OF.items() if g is generation]
        runs = [r for r in PUBLISHED_RUNS if r.generation is generation]
        default = MFU_BY_GENERATION.get(generation, UNCALIBRATED_MFU)
        basis = (
            f"{len(runs)} published run{'s' if len(runs) != 1 else ''}: "
            + ", ".join(r.name for r in runs)
            if runs
            else "no published run: the lowest calibrated default (not calibrated)"
        )
        rows.append(
            f"| {generation.value} | {', '.join(f'`{k}`' for k in keys)} | {default} | {basis} |"
        )
    return rows


def estimates_markdown() -> str:
    lines = [
        "## Cost before launch: `costguard estimate`",
        "",
        "<!-- Generated, from this heading to the end of the page, by "
        "`PYTHONPATH=functions python -m costguard.cli.estimate`; "
        "tests/unit/test_estimate_docs.py keeps it equal. Do not edit by hand. -->",
        "",
        "```",
        "costguard estimate train --params 7B --tokens 2T --gpu a100-80gb [--mfu 0.4] "
        "[--gpus 64] [--region us-east-1] [--include-inference] [--json]",
        "                         [--project P [--budget USD [--spent USD] | --budgets-file F] "
        "[--table LEDGER] [--instance-type T] [--market spot]]",
        "costguard estimate iteration --work-hours 2 --instance-type g5.xlarge|ml.g5.xlarge "
        "[--spot-usd-per-hour 0.45] [--setup-minutes 20]",
        "                             [--iterations-per-setup 1] [--checkpoint-minutes 30] "
        "[--researcher-usd-per-hour 100] [--latency-share 0.5] [--json]",
        "```",
        "",
        "Exit codes are the CLI's (0 ok, 1 AWS error, 2 bad input), plus **3**: `estimate "
        "train` found no instance option (no offered type carries the accelerator in the "
        "region, `--gpu v100` say; the reasons are printed), and **4**: `estimate train "
        "--project P` found that the run would take the project's month forecast over its "
        "budget. The estimate is still printed, so a CI step can show it and stop the launch.",
        "",
        "### Training runs",
        "",
        "- Compute: **F = 6 · N · T** FLOPs (N parameters, T tokens; 2 FLOPs per parameter "
        "per token forward, 4 backward).",
        "- Device-hours: **H = F / (peak · MFU · 3600)**, with the device's *dense* BF16/FP16 "
        "peak (datasheets print the 2:4-sparse figure first; training does not run sparse).",
        "- MFU: a default per accelerator generation (below: "
        + ", ".join(f"{g.value} **{m}**" for g, m in MFU_BY_GENERATION.items())
        + f", **{UNCALIBRATED_MFU}** where no run is published), within the plausible range "
        f"**{MFU_LOW}–{MFU_HIGH}**; every cost is shown as its central figure and over that "
        "range (a given `--mfu` gets ±0.10). The run uses whole "
        "instances: k = ⌈GPUs / devices per instance⌉; wall-clock = H / (k · devices); "
        "on-demand cost = wall-clock · k · rate. MFU is assumed to hold at that scale.",
        "- Spot: a synchronous job stops when any of its k instances is reclaimed, so its "
        "interruption rate is k·λ (λ from the type's bucket, below). Each interruption "
        "re-pays the restart R (default 30 min) and loses half a checkpoint interval c "
        "(default 60 min): wall-clock on spot = W / (1 − kλ(R + c/2)), cost = that · k · "
        "rate · (1 − saving). The run never finishes when kλ(R + c/2) ≥ 1.",
        f"- Memory (a coarse first check, labelled so): N · {DEFAULT_BYTES_PER_PARAM} bytes "
        "(BF16 weights and gradients, FP32 Adam master weights and two moments; "
        "`--bytes-per-param`), without activations, against one device and against all of "
        "them: `fits-one-device`, `needs-sharding` (ZeRO-3/FSDP or model parallelism), or "
        "`does-not-fit`.",
        "- Options: every EC2 type carrying the accelerator that the catalog offers in the "
        "region (priced, not retired, family offered there: p3/V100 never is), ranked by the "
        "central on-demand cost; options whose model state cannot fit go after the others. "
        "Inference-only accelerators (Inferentia2) are left out unless named with `--gpu` or "
        "listed with `--include-inference`, and then ranked last: the Neuron SDK trains on "
        "Trainium, and at Trainium's peak an Inferentia2 row would look like the cheapest "
        "way to train.",
        "- Budget gate (`--project`): forecast = month-to-date + run-rate · hours left; the "
        "run adds its central cost times the share of its wall-clock that falls before the "
        "month ends. Exit 4 when forecast + that exceeds the budget. With a deployed ledger "
        "(`--table`), month-to-date and the run-rate are the ledger's; without one (CI), "
        "month-to-date is `--spent` or the budgets file's `spent` and the run-rate is 0 "
        "(nothing running is seen). The budget: `--budget`, else the budgets file, else the "
        "one the deployment's last scan found for the project (its `costguard:budget` tag or "
        "the deployment's budgets table; with `--table`), else the project's row in "
        "`COSTGUARD_PROJECTS_JSON`.",
        "",
        "#### MFU calibration: published runs",
        "",
        "Implied MFU = 6·N·T / (peak · published GPU-hours · 3600), so it charges everything "
        "a real run spends (restarts, evaluation, stragglers) to utilization, which is what "
        "a cost estimate wants. Each generation's default is the geometric midpoint of the "
        "lowest and highest implied MFU of its calibrating runs (it minimises the worst "
        "relative error), to two places. Every "
        f"calibrating run lands within {CALIBRATION_TOLERANCE * 100:.0f} % of its published "
        "GPU-hours at its generation's default (a test holds each one to it).",
        "",
        "| run | device | generation | published GPU-hours | implied MFU | default | "
        "GPU-hours at the default | error | used |",
        "|---|---|---|---|---|---|---|---|---|",
        *calibration_rows(),
        "",
        "Sources: "
        + "; ".join(sorted({r.source for r in CALIBRATION_RUNS}))
        + ". The Llama 3 paper also reports 38-43 % BF16 MFU measured during the 405B's "
        "pretraining (table 4), above the 0.345 its GPU-hours imply: the difference is what "
        "a run spends besides its steps. PaLM's paper reports 46.2 % MFU on TPU v4, the top "
        "of the range.",
        "",
        "Excluded, with the reason:",
        "",
        *[f"- {r.name}: {r.excluded_because}." for r in OUTLIER_RUNS],
        "",
        "Defaults by generation:",
        "",
        "| generation | accelerators | default MFU | basis |",
        "|---|---|---|---|",
        *_generation_rows(),
        "",
        "A generation with no published run ("
        + ", ".join(g.value for g in Generation if g not in MFU_BY_GENERATION)
        + f") takes the lowest calibrated default ({UNCALIBRATED_MFU}): of what is known, the "
        "choice that errs towards cost; the estimate marks its MFU as not calibrated. No "
        "training run on them publishes GPU-hours with its model size and tokens in a form "
        "that could be cited here. The A10G is Ampere, but "
        "its runs are on A100s: a single-node A10G fine-tune may reach a different share of "
        "its (secondary-source) peak.",
        "",
        "#### Accelerators",
        "",
        "| key | device | dense BF16/FP16 TFLOPS | memory GB | EC2 types (devices) | source |",
        "|---|---|---|---|---|---|",
        *[
            f"| `{a.key}` | {a.name} | {a.peak_tflops} | {a.memory_gb} | "
            f"{', '.join(f'{t} ({n})' for t, n in a.instances)} | {a.source}"
            + (f" (caveat: {a.caveat})" if a.caveat else "")
            + " |"
            for a in ACCELERATORS
        ],
        "",
        "### Spot interruption buckets",
        "",
        "The catalog ships a dated table (`spot_advisor` in prices.json) in the shape of the "
        "EC2 Spot Instance Advisor: per family or type, the frequency-of-interruption bucket "
        "(<5 %, 5-10 %, 10-15 %, 15-20 %, >20 % of capacity reclaimed per month) and the "
        "typical saving. **Its values are CostGuard's planning assumptions, not read from "
        "AWS**; the table says so in its `source`. A bucket stands for its midpoint (>20 %: "
        "30 %), and a monthly probability p becomes an hourly Poisson rate "
        "**λ = −ln(1 − p) / 730**. No live spot prices are read by `estimate`.",
        "",
        "### The true cost of an iteration",
        "",
        "Inputs: w work hours per iteration; r on-demand $/h, d the spot saving "
        "(r_s = r·(1 − d)); s setup hours (boot, data, dependencies) paid once per m "
        "iterations; e extra setup per spot launch; c checkpoint interval; λ interruptions "
        "per hour; h the researcher's $/h; α the share of h charged while waiting.",
        "",
        "- On-demand, per iteration: **C_od = [s·(r + h) + m·w·(r + α·h)] / m**: the setup "
        "tax s·h, the instance for setup and work, the latency penalty α·h while waiting.",
        "- Spot: every interruption costs twice: the restart R = s + e is paid again, and "
        "work since the last checkpoint is lost, on average **L = c/2** (w/2 when the "
        "iteration is not checkpointed within, c = 0 or c ≥ w). Interruptions arrive as a "
        "Poisson process over the whole time on spot T, so T = (s + e + m·w) + λ·T·(R + L), "
        "i.e. **T = (s + e + m·w) / (1 − λ(R + L))**, with **N = λ·T** interruptions "
        "expected. Per iteration: **C_spot = [r_s·T + (s + e + N·R)·h + (m·w + N·L)·α·h] / m**. "
        "When λ(R + L) ≥ 1 the experiment never finishes.",
        "- Break-even: the duration w where C_od(w) = C_spot(w). From w = c on, L is "
        "constant and both costs are linear in w, so that crossing is solved exactly; "
        "below c the lost work grows with w, and the crossing is bracketed and bisected. "
        "It is reported as the shortest duration from which spot is cheaper (0: from the "
        "first minute), with an upper limit if spot stops being cheaper, or **never**.",
        "",
        "Because λ from a monthly bucket is small (>20 % a month is 0.0005 per hour), spot "
        "with checkpoints is cheaper from the first minute for most single-instance "
        "experiments; a break-even appears when spot launches cost extra setup (e) or "
        "interruptions are frequent (a multi-node job's k·λ, or a measured rate given with "
        "`--interruptions-per-hour`).",
        "",
        "#### Worked example (computed by the code)",
        "",
        *_example("Example 1: bucket >20 %", EXAMPLE),
        *_example(
            "Example 2: 15 min to get spot capacity, an interruption every 50 hours",
            EXAMPLE_CAPACITY,
        ),
        *_example("Example 3: the same, an interruption every ten hours", EXAMPLE_HARSH),
    ]
    return "\n".join(lines)
