"""``costguard estimate train`` and ``costguard estimate iteration``: cost before launch.

Registered from :mod:`costguard.cli` (``register``); the exit codes are the CLI's, plus
``EXIT_OVER_BUDGET`` (4): ``estimate train --project P`` found that the run would take
the project's month forecast over its budget.

``python -m costguard.cli.estimate`` prints docs/estimates.md (formulas, calibration and a
worked example, computed by this code); a test keeps the file equal to it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from costguard.cli import common
from costguard.cli.output import Cell, Column, Table, rate_cell, render
from costguard.domain.accelerators import ACCELERATORS
from costguard.domain.estimate import (
    DEFAULT_BYTES_PER_PARAM,
    DEFAULT_CHECKPOINT_HOURS,
    DEFAULT_RESTART_HOURS,
    INFERENCE_ONLY_REASON,
    MFU_BY_GENERATION,
    MFU_FLOOR,
    MFU_HIGH,
    MFU_LOW,
    UNCALIBRATED_MFU,
    BudgetGate,
    IterationPlan,
    Span,
    TrainingEstimate,
    TrainingOption,
    TrainingRequest,
    break_even,
    budget_gate,
    estimate_training,
    generation_of,
    hours_text,
    mfu_is_calibrated,
    on_demand_cost,
    project_run_rate,
    spot_cost,
    usd,
)
from costguard.domain.spot import BUCKETS, hourly_rate

if TYPE_CHECKING:
    from costguard.domain.spend import Observation


MINUTES = Decimal(60)


# -- argument types ----------------------------------------------------------------------------


def _number(
    what: str, low: Decimal, high: Decimal, *, low_open: bool = True
) -> Callable[[str], Decimal]:
    def parse(value: str) -> Decimal:
        text = value.strip().replace("_", "")
        try:
            number = Decimal(text) if text.isascii() else None
        except InvalidOperation:
            number = None
        ok = (
            number is not None
            and number.is_finite()
            and (number > low if low_open else number >= low)
            and number <= high
        )
        if not ok or number is None:
            bound = f"above {low}" if low_open else f"from {low}"
            # argparse names the option ("argument --params: ..."): the message does not.
            subject = f"{what} must" if what else "must"
            raise argparse.ArgumentTypeError(
                f"{subject} be a number {bound} up to {high:g}, got {value!r}"
            )
        return number

    return parse


#: The suffixes a count may carry, case-insensitive: 7B, 70b, 2T, 1.5T, 300M, 500K.
_SCALE = {"k": Decimal("1e3"), "m": Decimal("1e6"), "b": Decimal("1e9"), "t": Decimal("1e12")}


def _count(high: Decimal) -> Callable[[str], Decimal]:
    """A parameter or token count: a plain number (``7e9``, ``7_000_000_000``) or one with a
    suffix (``7B``, ``70b``, ``2T``, ``1.5T``, ``300M``), above 0 and up to ``high``."""

    def parse(value: str) -> Decimal:
        text = value.strip().replace("_", "")
        scale = _SCALE.get(text[-1:].lower()) if text else None
        number: Decimal | None = None
        if text.isascii():
            try:
                number = Decimal(text[:-1]) * scale if scale else Decimal(text)
            except ArithmeticError:  # InvalidOperation, and Overflow of 1e999999999T
                number = None
        if number is None or not number.is_finite() or not 0 < number <= high:
            raise argparse.ArgumentTypeError(
                f"must be a number above 0 up to {_big(high)} ({high:g}), like 7B, 70b, "
                f"1.5T, 300M or 7e9; got {value!r}"
            )
        return number

    return parse


params_count = _count(Decimal("1e15"))
tokens_count = _count(Decimal("1e17"))
_mfu_number = _number("a fraction", MFU_FLOOR, Decimal(1), low_open=False)


def mfu_arg(value: str) -> Decimal:
    """A fraction of peak from MFU_FLOOR: below 1 % is a typo, not a training plan."""
    try:
        return _mfu_number(value)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(
            f"{exc} (the share of the device's peak reached; published runs reach "
            f"{MFU_LOW} to {MFU_HIGH}, and below {MFU_FLOOR} is a typo, not a plan)"
        ) from None


share = _number("a share", Decimal(0), Decimal(1), low_open=False)
minutes = _number("minutes", Decimal(0), Decimal(100_000), low_open=False)
hours_arg = _number("hours", Decimal(0), Decimal(100_000))
usd_arg = _number("USD", Decimal(0), Decimal(10_000_000), low_open=False)
per_hour = _number("a rate per hour", Decimal(0), Decimal(1), low_open=False)
percent = _number("a percentage", Decimal(0), Decimal(99), low_open=False)
bytes_arg = _number("bytes per parameter", Decimal(0), Decimal(64))
_WHOLE = "must be a whole number from {low} to {high}, got {value!r}"
gpu_count = common.whole_number(1, 1_000_000, _WHOLE)
iterations = common.whole_number(1, 100_000, _WHOLE)


# -- shared output ---------------------------------------------------------------------------


#: Above this a float carries no cents anyway; rounding there only risks the context's
#: 28 digits (quantize raises InvalidOperation when the result needs more).
_ROUNDING_LIMIT = Decimal("1e15")


def _num(value: Decimal, places: str = "0.0001") -> float:
    """``value`` rounded to ``places`` for JSON, whatever its size: a float keeps ~16
    significant digits, so a huge value is passed through, never quantized past the
    context's precision."""
    if not value.is_finite() or abs(value) >= _ROUNDING_LIMIT:
        return float(value)
    return float(value.quantize(Decimal(places)))


def _usd_num(value: Decimal) -> float:
    return _num(value, "0.01")


def _span_json(span: Span, places: str = "0.01") -> dict[str, float]:
    return {
        "low": _num(span.low, places),
        "mid": _num(span.mid, places),
        "high": _num(span.high, places),
    }


def _span_usd(span: Span) -> str:
    return f"{usd(span.low)}–{usd(span.high)}"


def _catalog(path: Path | None) -> Any:
    chosen, _which, _source = common.choose_catalog(path, common.progress(True))
    return chosen.to_domain()


def _known_region(catalog: Any, region: str) -> str:
    """``region`` when the catalog prices EC2 there; else bad input naming the ones it does.

    A region the catalog has no rate for at all is a typo (us-est-1) or a region never
    refreshed: an estimate there would be empty, which reads as "nothing carries this GPU".
    """
    known = sorted(catalog.ec2)
    if region not in known:
        raise common.CommandError(
            f"the price catalog (as of {catalog.as_of}) has no EC2 prices for region "
            f"{region!r}; it knows {', '.join(known) or 'no region'}: check --region, or "
            f"add the region with `costguard prices refresh --region {region}`"
        )
    return region


# -- estimate train ------------------------------------------------------------------------------


def option_json(o: TrainingOption) -> dict[str, Any]:
    spot = o.spot
    return {
        "instance_type": o.instance_type,
        "accelerator": o.accelerator.key,
        "devices_per_instance": o.devices_per_instance,
        "instances": o.instances,
        "devices": o.devices,
        "generation": o.generation.value,
        "inference_only": o.inference_only,
        "mfu": {
            "low": float(o.mfu[0]),
            "default": float(o.mfu[1]),
            "high": float(o.mfu[2]),
            # False: no published run on the generation; the lowest calibrated default.
            "calibrated": o.mfu_calibrated,
        },
        "usd_per_hour": _num(o.usd_per_hour),
        "gpu_hours": _span_json(o.gpu_hours, "1"),
        "wall_clock_hours": _span_json(o.wall_hours, "0.1"),
        "on_demand_usd": _span_json(o.on_demand_usd),
        "spot": (
            {
                "usd": _span_json(spot.usd),
                "expected_interruptions": _num(spot.expected_interruptions, "0.01"),
                "rework_hours": _num(spot.rework_hours, "0.01"),
                "interruption_bucket": spot.profile.bucket,
                "saving_pct": _num(spot.profile.saving * 100, "0.1"),
                "bucket_basis": spot.profile.basis,
                "interruptions_per_hour": _num(spot.interruptions_per_hour, "0.000001"),
            }
            if spot
            else None
        ),
        "memory": {
            "coarse": True,
            "need_gb": _num(o.memory.need_gb, "0.1"),
            "device_gb": _num(o.memory.device_gb, "0.1"),
            "devices": o.memory.devices,
            "fit": o.memory.fit.value,
            "message": o.memory.message,
        },
        "notes": list(o.notes),
    }


def gate_json(g: BudgetGate) -> dict[str, Any]:
    return {
        "project": g.project,
        "budget_usd": _usd_num(g.budget_usd) if g.budget_usd is not None else None,
        "month_to_date_usd": _usd_num(g.month_to_date_usd),
        "forecast_month_usd": _usd_num(g.forecast_usd),
        "run_usd": _usd_num(g.run_usd),
        "run_adds_this_month_usd": _usd_num(g.run_adds_usd),
        "forecast_with_run_usd": _usd_num(g.forecast_with_run_usd),
        "hours_left_in_month": _num(g.hours_left_in_month, "0.1"),
        "over_budget": g.over,
        # flag | file | ledger (the deployment's last scan: tag or table) | env
        "budget_source": g.budget_source,
        # False: no deployed ledger read; month-to-date as given, nothing running seen.
        "ledger": g.ledger,
        # Running resources the forecast leaves out: unpriced, their spend unknown (not $0).
        "unpriced_resources": g.unpriced,
    }


def estimate_json(
    e: TrainingEstimate, gate: BudgetGate | None, catalog_as_of: str
) -> dict[str, Any]:
    r = e.request
    if e.mfu is not None:
        low, mid, high = e.mfu
        mfu: dict[str, Any] = {"low": float(low), "default": float(mid), "high": float(high)}
    else:
        # A default per generation: each option's own is in its "mfu".
        mfu = {
            "low": float(MFU_LOW),
            "default": None,
            "high": float(MFU_HIGH),
            "by_generation": {g.value: float(m) for g, m in MFU_BY_GENERATION.items()},
            "uncalibrated": float(UNCALIBRATED_MFU),
        }
    return {
        "inputs": {
            "params": float(r.params),
            "tokens": float(r.tokens),
            "accelerator": r.accelerator,
            "gpus": r.gpus,
            "region": r.region,
            "bytes_per_param": float(r.bytes_per_param),
            "checkpoint_hours": float(r.checkpoint_hours),
            "restart_hours": float(r.restart_hours),
            "include_inference": r.include_inference,
        },
        "flops": float(e.flops),
        "mfu": mfu,
        "price_catalog_as_of": catalog_as_of,
        "spot_table": (
            {"as_of": e.spot_table.as_of.isoformat(), "source": e.spot_table.source}
            if e.spot_table
            else None
        ),
        "options": [option_json(o) for o in e.options],
        "not_options": [{"instance_type": t, "why": why} for t, why in e.skipped],
        "notes": list(e.notes),
        "budget": gate_json(gate) if gate else None,
    }


def mfu_text(e: TrainingEstimate, *, marker: bool = True) -> str:
    """The MFU the figures use: one, or the default of each generation among the options."""
    if e.mfu is not None:
        low, mid, high = e.mfu
        keys = {o.accelerator.key for o in e.options}
        if not keys and e.request.accelerator:
            keys = {e.request.accelerator}
        generations = {generation_of(k).value for k in keys}
        if e.request.mfu is not None:
            detail = "as given; "
        elif len(generations) == 1:
            calibrated = all(mfu_is_calibrated(k) for k in keys)
            detail = f"{generations.pop()}, {'calibrated' if calibrated else 'not calibrated'}; "
        else:
            detail = ""
        return f"MFU {mid} ({detail}range {low}–{high})"
    defaults = sorted({(o.generation.value, o.mfu[1]) for o in e.options if o.mfu_calibrated})
    parts = [f"{g} {m}" for g, m in defaults]
    if any(not o.mfu_calibrated for o in e.options):
        parts.append(f"{UNCALIBRATED_MFU} elsewhere ({'*: ' if marker else ''}not calibrated)")
    return f"MFU by generation: {', '.join(parts)}; range {MFU_LOW}–{MFU_HIGH}"


def estimate_text(e: TrainingEstimate, gate: BudgetGate | None) -> str:
    from costguard.cli.terminal import columns

    r = e.request
    lines = [
        f"Training {_big(r.params)} parameters on {_big(r.tokens)} tokens: "
        f"6·N·T = {float(e.flops):.3g} FLOPs; {mfu_text(e)}.",
        "Each figure is at the central MFU; the on-demand range runs over the MFU range. "
        "Ranked by the central on-demand cost, after the options whose model state fits "
        "(those that cannot hold it at all come last, whatever they cost).",
        "",
    ]
    grid = [
        [
            "#",
            "INSTANCE",
            "DEVICES",
            "MFU",
            "GPU-HOURS",
            "WALL-CLOCK",
            "ON-DEMAND",
            "RANGE",
            "SPOT",
            "INTERRUPTIONS",
            "MEMORY",
        ]
    ]
    for i, o in enumerate(e.options, 1):
        spot = o.spot
        grid.append(
            [
                str(i),
                o.instance_type,
                f"{o.instances} x {o.devices_per_instance} {o.accelerator.key}",
                f"{o.mfu[1]}" + (" " if o.mfu_calibrated else "*"),
                f"{o.gpu_hours.mid:,.0f}",
                hours_text(o.wall_hours.mid),
                usd(o.on_demand_usd.mid),
                _span_usd(o.on_demand_usd),
                usd(spot.usd.mid) if spot else "n/a",
                f"{spot.expected_interruptions:.1f} ({spot.profile.bucket})" if spot else "-",
                o.memory.fit.value,
            ]
        )
    if e.options:
        lines += columns(grid, frozenset({0, 3, 4, 5, 6, 7, 8, 9}))
        lines += ["", f"Memory of the first option, {e.options[0].memory.message}."]
    else:
        lines.append(f"No offered instance in {r.region} carries {_which(r.accelerator)}.")
    if any(not o.mfu_calibrated for o in e.options):
        lines.append(
            f"* Not calibrated: no published run on that generation; its MFU is the lowest "
            f"calibrated default ({UNCALIBRATED_MFU}), so the estimate errs towards cost."
        )
    by_reason: dict[str, list[str]] = {}
    for t, why in e.skipped:
        by_reason.setdefault(why, []).append(t)
    for why, types in by_reason.items():
        if why == INFERENCE_ONLY_REASON:
            lines.append(
                f"Left out: {', '.join(types)}: Inferentia2 is an inference accelerator "
                "(--include-inference lists it, ranked last)."
            )
        else:
            lines.append(f"Not an option: {', '.join(types)}: {why}")
    notes = sorted({n for o in e.options for n in o.notes} | set(e.notes))
    lines += [f"Note: {n}" for n in notes]
    if e.spot_table and e.options:
        lines.append(
            f"Spot: interruption buckets and savings as of {e.spot_table.as_of} "
            f"({e.spot_table.source.split(':')[0]}); each interruption re-pays "
            f"{_fmt_hours(r.restart_hours)} of restart and half a "
            f"{_fmt_hours(r.checkpoint_hours)} checkpoint interval."
        )
    if gate:
        lines += ["", *gate_text(gate)]
    return "\n".join(lines)


def _which(accelerator: str | None) -> str:
    return accelerator if accelerator else "any accelerator"


def _fmt_hours(hours: Decimal) -> str:
    """``0.5 h``, ``1 h``: a duration as given, without a trailing ``.0``."""
    return f"{hours.normalize():f} h"


def gate_text(g: BudgetGate) -> list[str]:
    budget = usd(g.budget_usd) if g.budget_usd is not None else "no budget"
    if g.over:
        verdict = "OVER BUDGET: the run would take the forecast over the budget"
    elif g.unpriced:
        verdict = "within budget, as far as the priced resources go"
    else:
        verdict = "within budget"
    source = BUDGET_SOURCES.get(g.budget_source)
    lines = [
        f"Project {g.project}: budget {budget}"
        + (f" (from {source})" if source else "")
        + f", month-to-date {usd(g.month_to_date_usd)}, forecast {usd(g.forecast_usd)}.",
        f"The run costs {usd(g.run_usd)}; {usd(g.run_adds_usd)} of it lands this month "
        f"({_num(g.hours_left_in_month, '0.1')} h left): forecast with the run "
        f"{usd(g.forecast_with_run_usd)}: {verdict}.",
    ]
    if g.unpriced:
        lines.append(unpriced_text(g))
    if not g.ledger:
        lines.append(
            "No ledger read (--table): month-to-date is as given, and what the project runs "
            "now is not seen, so the forecast counts no run-rate."
        )
    return lines


def unpriced_text(g: BudgetGate) -> str:
    return (
        f"The forecast excludes {g.unpriced} running resource{'s' if g.unpriced != 1 else ''} "
        f"of project {g.project} that the catalog cannot price: their spend is unknown, "
        "not $0 (the scan's unpriced findings name them; `costguard prices refresh` may "
        "price them)."
    )


def _big(value: Decimal) -> str:
    for unit, size in (("T", Decimal("1e12")), ("B", Decimal("1e9")), ("M", Decimal("1e6"))):
        if value >= size:
            scaled = float(value / size)
            # 3 significant digits, never exponent notation ("2e+2B" for 200B).
            return (f"{scaled:,.0f}" if scaled >= 100 else f"{scaled:.3g}") + unit
    return f"{value:,.0f}"


def cmd_estimate_train(args: argparse.Namespace) -> int:
    if not args.project:
        # A gate option without the project it gates would be silently ignored: a CI job
        # would pass every run and never know why.
        given = [
            flag
            for flag, value in (
                ("--budget", args.budget),
                ("--budgets-file", args.budgets_file),
                ("--spent", args.spent),
                ("--table", args.table),
            )
            if value is not None
        ]
        if given:
            raise common.CommandError(
                f"{', '.join(given)} gate{'s' if len(given) == 1 else ''} a project's budget: "
                "pass --project too"
            )
    catalog = _catalog(args.catalog)
    request = TrainingRequest(
        params=args.params,
        tokens=args.tokens,
        accelerator=args.gpu,
        mfu=args.mfu,
        gpus=args.gpus,
        region=_known_region(catalog, args.region or "us-east-1"),
        bytes_per_param=args.bytes_per_param,
        checkpoint_hours=args.checkpoint_minutes / MINUTES,
        restart_hours=args.restart_minutes / MINUTES,
        include_inference=args.include_inference,
    )
    estimate = estimate_training(request, catalog)
    if not estimate.options:
        # Nothing to rank is not an answer: print why (the reasons), and say so in the exit.
        sys.stdout.write(
            render_train(args.format, estimate, None, catalog.as_of.isoformat(), common.now())
        )
        sys.stdout.flush()
        raise common.CommandError(
            f"no instance option: no type the price catalog offers in {request.region} "
            f"carries {_which(request.accelerator)} (the estimate says why); try another "
            "--gpu or --region",
            common.EXIT_NO_DATA,
        )
    gate = None
    if args.project:
        chosen = _chosen_option(estimate, args.instance_type)
        run_usd, wall = _run_cost(chosen, args.market)
        gate = _gate(args, run_usd, wall)
    sys.stdout.write(
        render_train(args.format, estimate, gate, catalog.as_of.isoformat(), common.now())
    )
    sys.stdout.flush()
    if gate is not None and gate.over:
        print(
            f"costguard: the run would take project {gate.project}'s forecast to "
            f"{usd(gate.forecast_with_run_usd)}, over its budget of {usd(gate.budget_usd or Decimal(0))}",
            file=sys.stderr,
        )
        return common.EXIT_OVER_BUDGET
    if gate is not None and gate.unpriced:
        # Passing is not proof when part of the run-rate is unknown: say so where CI looks.
        print(f"costguard: warning: {unpriced_text(gate)}", file=sys.stderr)
    return common.EXIT_OK


def _chosen_option(e: TrainingEstimate, itype: str | None) -> TrainingOption:
    if itype is None:
        return e.options[0]
    for o in e.options:
        if o.instance_type == itype:
            return o
    offered = ", ".join(o.instance_type for o in e.options)
    raise common.CommandError(f"--instance-type {itype!r} is not one of the options ({offered})")


def _run_cost(o: TrainingOption, market: str) -> tuple[Decimal, Decimal]:
    if market == "spot":
        if o.spot is None:
            raise common.CommandError(
                f"no spot estimate for {o.instance_type}: gate on --market on-demand"
            )
        return o.spot.usd.mid, o.wall_hours.mid + o.spot.rework_hours
    return o.on_demand_usd.mid, o.wall_hours.mid


#: Where a gate's budget came from, in words.
BUDGET_SOURCES = {
    "flag": "--budget",
    "file": "the budgets file",
    "ledger": "the deployment's last scan (a costguard:budget tag or its budgets table)",
    "env": "COSTGUARD_PROJECTS_JSON",
}


@dataclass(frozen=True, slots=True)
class LedgerFigures:
    """What a deployed ledger says of a project: month-to-date, the observations and the
    last scan's watermark (the run-rate is computed from them), and the budget that scan
    found (a ``costguard:budget`` tag, or the deployment's table)."""

    month_to_date: Decimal
    observations: Mapping[str, Observation]
    watermark: datetime | None
    budget: Decimal | None = None


def _gate(args: argparse.Namespace, run_usd: Decimal, wall: Decimal) -> BudgetGate:
    """The gate: offline from --budget/--spent or a budgets file, or on a deployed ledger."""
    from costguard.domain.calendar import hours_left_in_month

    at = common.now()
    entry = None
    if args.budgets_file is not None:
        from costguard.cli.budgets_file import BudgetsFileError, load_budgets

        try:
            entries = load_budgets(args.budgets_file)
        except BudgetsFileError as exc:
            raise common.CommandError(f"--budgets-file {exc}") from None
        entry = entries.get(args.project)
        if entry is None:
            held = ", ".join(sorted(entries)[:10]) or "no project"
            print(
                f"costguard: note: --budgets-file {args.budgets_file} has no project "
                f"{args.project!r} (it holds {held})",
                file=sys.stderr,
            )
    if args.table and args.spent is not None:
        raise common.CommandError(
            "--spent is for a gate without a ledger: with --table, month-to-date is the ledger's"
        )
    figures = _read_ledger(args, at) if args.table else None
    budget, source = _budget_for(args, entry, figures)
    if budget is None:
        raise common.CommandError(
            f"no budget for project {args.project!r}: pass --budget USD, or set it in "
            "COSTGUARD_PROJECTS_JSON"
            + ("" if args.budgets_file else ", or in a --budgets-file")
            + ("" if args.table else ", or read a deployed CostGuard's budgets with --table")
        )
    if figures is not None:
        running = project_run_rate(figures.observations.values(), args.project, figures.watermark)
        spent, rate, unpriced = figures.month_to_date, running.usd_per_hour, running.unpriced
    else:
        spent = args.spent if args.spent is not None else entry.spent if entry else Decimal(0)
        rate, unpriced = Decimal(0), 0
    return budget_gate(
        args.project,
        budget,
        spent,
        rate,
        hours_left_in_month(at),
        run_usd,
        wall,
        unpriced,
        budget_source=source,
        ledger=figures is not None,
    )


def _budget_for(
    args: argparse.Namespace, entry: Any, figures: LedgerFigures | None
) -> tuple[Decimal | None, str]:
    """The budget and where it came from: --budget, the budgets file, the deployment's last
    scan (tags), then COSTGUARD_PROJECTS_JSON. What the pipeline names beats what it finds."""
    if args.budget is not None:
        return args.budget, "flag"
    if entry is not None:
        return entry.budget, "file"
    if figures is not None and figures.budget is not None:
        return figures.budget, "ledger"
    return _budget_from_env(args.project), "env"


def _budget_from_env(project: str) -> Decimal | None:
    from pydantic import TypeAdapter, ValidationError

    from costguard.config_spec import ProjectEntry
    from costguard.env import Env

    raw = os.environ.get(Env.PROJECTS_JSON)
    if not raw:
        return None
    try:
        table = TypeAdapter(dict[str, ProjectEntry]).validate_json(raw)
        entry = table.get(project)
        return entry.to_domain(project).budget if entry else None
    except (ValidationError, ValueError) as exc:
        raise common.CommandError(f"{Env.PROJECTS_JSON}: {str(exc).splitlines()[0]}") from None


def _read_ledger(args: argparse.Namespace, at: datetime) -> LedgerFigures:
    """The project's month-to-date, the ledger's observations, the last scan's watermark
    and the budget it found, read from the deployed ledger (the run-rate is computed from
    them by :func:`project_run_rate`)."""
    from costguard.domain.calendar import month_key
    from costguard.domain.launch import FIGURES_STATE, decode_figures
    from costguard.domain.launch_policy import LaunchPolicy

    ledger, scope, region = common.deployed_ledger(
        args,
        args.table_region,
        no_table="--table names the deployed ledger (the stack's LedgerTable output)",
        no_region="no region for the ledger: pass --table-region (the stack's region)",
    )
    with common.table_errors(args.table, region):
        totals = ledger.month_totals(scope, month_key(at))
        watermark = ledger.watermark(scope)
        observations = ledger.observations(scope)
        # The budget the last scan found (tag or table), left for the on-launch check.
        figures = decode_figures(ledger.get_state(scope, FIGURES_STATE)[0], LaunchPolicy())
    row = totals.get(args.project)
    found = figures.get(args.project)
    return LedgerFigures(
        row.usd if row else Decimal(0),
        observations,
        watermark,
        found.budget if found else None,
    )


# -- estimate iteration ------------------------------------------------------------------------


def cmd_estimate_iteration(args: argparse.Namespace) -> int:
    rate = args.usd_per_hour
    spot_rate = args.spot_usd_per_hour
    saving = args.spot_saving_pct / 100 if args.spot_saving_pct is not None else None
    bucket = args.interruption_bucket
    basis = "given"
    itype = args.instance_type
    sagemaker = bool(itype and itype.startswith("ml."))
    needs_rate = rate is None
    needs_saving = saving is None and spot_rate is None
    needs_bucket = bucket is None and args.interruptions_per_hour is None
    needs_catalog = needs_rate or needs_saving or needs_bucket
    if needs_catalog and not itype:
        raise common.CommandError(
            "pass --instance-type (an EC2 or SageMaker ml.* type, priced from the catalog), or "
            "--usd-per-hour with --spot-usd-per-hour or --spot-saving-pct, and "
            "--interruption-bucket or --interruptions-per-hour"
        )
    # A named type is always looked up, if only to say that AWS no longer offers it.
    catalog = _catalog(args.catalog) if itype else None
    retired = catalog.retirement(itype) if catalog is not None else None
    if retired is not None:
        print(
            f"costguard: warning: {itype} is retired: {retired}. The estimate "
            "prices it as asked, but it is not a type to launch; "
            "`costguard estimate train --gpu ...` lists the current ones",
            file=sys.stderr,
        )
    table_rate = None
    if needs_catalog:
        assert catalog is not None and itype is not None
        region = args.region or "us-east-1"
        if needs_rate:
            rate = _catalog_rate(catalog, region, itype, sagemaker)
        if needs_saving or needs_bucket:
            if catalog.spot is None:
                raise common.CommandError(
                    "the price catalog has no spot table: pass --spot-usd-per-hour or "
                    "--spot-saving-pct, and --interruption-bucket or --interruptions-per-hour"
                )
            profile = catalog.spot.profile(itype)
            row = "its row" if profile.basis == "table" else "the default row: no row for its type"
            if sagemaker:
                row += " (EC2 spot, assumed for SageMaker managed spot)"
            basis = f"spot table of {catalog.spot.as_of}, {row}"
            if needs_saving:
                saving = profile.saving
            bucket = bucket or profile.bucket
            table_rate = catalog.spot.bucket_monthly_rate
    assert rate is not None  # given, or read from the catalog above
    if spot_rate is not None:
        saving = _saving_of(spot_rate, rate)
        basis = "spot rate given" if basis == "given" else f"spot rate given; {basis}"
    if args.interruptions_per_hour is not None:
        lam = args.interruptions_per_hour
    else:
        assert bucket is not None
        monthly = (table_rate or _DEFAULT_BUCKET_RATES)[bucket]
        lam = hourly_rate(monthly)
    assert saving is not None
    plan = IterationPlan(
        work_hours=args.work_hours,
        usd_per_hour=rate,
        setup_hours=args.setup_minutes / MINUTES,
        iterations_per_setup=args.iterations_per_setup,
        checkpoint_hours=args.checkpoint_minutes / MINUTES,
        spot_saving=saving,
        interruptions_per_hour=lam,
        researcher_usd_per_hour=args.researcher_usd_per_hour,
        latency_share=args.latency_share,
        spot_extra_setup_hours=args.spot_extra_setup_minutes / MINUTES,
    )
    data = iteration_json(plan, bucket, basis, instance_type=itype, retired=retired)
    sys.stdout.write(render_iteration(args.format, data, common.now()))
    sys.stdout.flush()
    return common.EXIT_OK


def _catalog_rate(catalog: Any, region: str, itype: str, sagemaker: bool) -> Decimal:
    """The on-demand $/h of an EC2 type, or of a SageMaker ``ml.*`` type (its own rates)."""
    service = "sagemaker" if sagemaker else "ec2"
    rates = catalog.sagemaker if sagemaker else catalog.ec2
    if region not in rates:
        known = ", ".join(sorted(rates)) or "no region"
        label = "SageMaker" if sagemaker else "EC2"
        raise common.CommandError(
            f"the price catalog (as of {catalog.as_of}) has no {label} prices for region "
            f"{region!r}; it knows "
            f"{known}: check --region, or add the region with "
            f"`costguard prices refresh --region {region}`"
        )
    rate: Decimal | None = (
        catalog.sagemaker_rate(region, itype) if sagemaker else catalog.ec2_on_demand(region, itype)
    )
    if rate is None:
        why = catalog.unpriced_reason(service, region, itype)
        raise common.CommandError(
            f"no on-demand rate for {itype} in {region}: {why}; pass --usd-per-hour"
        )
    return rate


def _saving_of(spot: Decimal, on_demand: Decimal) -> Decimal:
    """The spot saving a spot $/h means against the on-demand one."""
    if on_demand <= 0 or spot > on_demand:
        raise common.CommandError(
            f"--spot-usd-per-hour {spot} is above the on-demand rate {_dollars(float(on_demand))}"
            "/h: spot would save nothing (compare on-demand alone, or check the rates)"
        )
    return 1 - spot / on_demand


#: The bucket rates when the spot options are all given (no catalog read).
_DEFAULT_BUCKET_RATES = {
    "<5%": Decimal("0.025"),
    "5-10%": Decimal("0.075"),
    "10-15%": Decimal("0.125"),
    "15-20%": Decimal("0.175"),
    ">20%": Decimal("0.30"),
}


def _cost_json(cost: Any) -> dict[str, Any] | None:
    if cost is None:
        return None
    return {
        "total_usd": _num(cost.total_usd, "0.01"),
        "instance_usd": _num(cost.instance_usd, "0.01"),
        "setup_tax_usd": _num(cost.setup_tax_usd, "0.01"),
        "latency_usd": _num(cost.latency_usd, "0.01"),
        "wall_clock_hours": _num(cost.wall_hours, "0.001"),
        "expected_interruptions": _num(cost.expected_interruptions, "0.0001"),
        "rework_hours": _num(cost.rework_hours, "0.001"),
    }


def iteration_json(
    plan: IterationPlan,
    bucket: str | None,
    basis: str,
    *,
    instance_type: str | None = None,
    retired: str | None = None,
) -> dict[str, Any]:
    """The estimate as data. ``retired``: why AWS no longer offers ``instance_type``; the
    figures still price it (the user asked), but ``cheaper`` is then only a comparison."""
    od, spot, be = on_demand_cost(plan), spot_cost(plan), break_even(plan)
    return {
        "instance_type": instance_type,
        "retired": retired,
        "inputs": {
            "work_hours": float(plan.work_hours),
            "usd_per_hour_on_demand": float(plan.usd_per_hour),
            "usd_per_hour_spot": _num(plan.usd_per_hour * (1 - plan.spot_saving)),
            "setup_hours": _num(plan.setup_hours),
            "iterations_per_setup": plan.iterations_per_setup,
            "checkpoint_hours": _num(plan.checkpoint_hours),
            "spot_saving_pct": _num(plan.spot_saving * 100, "0.1"),
            "interruption_bucket": bucket,
            "interruptions_per_hour": _num(plan.interruptions_per_hour, "0.000001"),
            "researcher_usd_per_hour": float(plan.researcher_usd_per_hour),
            "latency_share": float(plan.latency_share),
            "spot_extra_setup_hours": _num(plan.spot_extra_setup_hours),
            "spot_basis": basis,
        },
        "on_demand": _cost_json(od),
        "spot": _cost_json(spot),
        "spot_never_finishes": spot is None,
        "cheaper": ("on-demand" if spot is None or spot.total_usd >= od.total_usd else "spot"),
        "break_even": {
            "spot_cheaper_from_hours": (
                _num(be.spot_cheaper_from, "0.001") if be.spot_cheaper_from is not None else None
            ),
            "spot_cheaper_until_hours": (
                _num(be.spot_cheaper_until, "0.001") if be.spot_cheaper_until is not None else None
            ),
            "never": be.never,
            "summary": be.describe(),
        },
    }


def _per_hour_text(value: float) -> str:
    """A small rate in plain digits (``0.000035``, never ``3.5e-05``)."""
    text = f"{value:.6f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _dollars(value: float) -> str:
    """A rate as given, to the cent at least: ``$3.00``, ``$1.006`` (the catalog's three
    places kept). Defect: ``--usd-per-hour 3`` was said ``at $3.0/h``."""
    amount = Decimal(str(value))
    cent = amount.quantize(Decimal("0.01"))
    return f"${cent:,}" if amount == cent else f"${amount.normalize():,f}"


def iteration_text(data: dict[str, Any]) -> str:
    i = data["inputs"]
    rows = [
        f"One iteration of {i['work_hours']} h at {_dollars(i['usd_per_hour_on_demand'])}/h "
        f"on-demand, {_dollars(i['usd_per_hour_spot'])}/h on spot "
        f"(spot saves {i['spot_saving_pct']}%, {_per_hour_text(i['interruptions_per_hour'])} "
        "interruptions/h"
        + (f", bucket {i['interruption_bucket']}" if i["interruption_bucket"] else "")
        + f"; {i['spot_basis']}).",
        "",
        f"{'':<10} {'TOTAL':>10} {'INSTANCE':>10} {'SETUP TAX':>10} {'LATENCY':>10} "
        f"{'WALL (h)':>9} {'INTERRUPTIONS':>13}",
    ]
    for name in ("on_demand", "spot"):
        c = data[name]
        label = name.replace("_", "-")
        if c is None:
            rows.append(f"{label:<10} never finishes: interruptions come faster than work is saved")
            continue
        rows.append(
            f"{label:<10} {usd(Decimal(str(c['total_usd']))):>10} {usd(Decimal(str(c['instance_usd']))):>10} "
            f"{usd(Decimal(str(c['setup_tax_usd']))):>10} {usd(Decimal(str(c['latency_usd']))):>10} "
            f"{c['wall_clock_hours']:>9} {c['expected_interruptions']:>13}"
        )
    rows.append("")
    if data.get("retired"):
        # Priced as asked, never recommended: AWS no longer offers the type.
        rows += [
            f"{data['instance_type']} is RETIRED: {data['retired']}.",
            f"On paper {data['cheaper']} would be cheaper (break-even: "
            f"{data['break_even']['summary']}), but neither is a way to go: launch a current "
            "type (`costguard estimate train --gpu ...` lists them) and estimate that.",
        ]
    else:
        rows.append(f"Cheaper now: {data['cheaper']}. Break-even: {data['break_even']['summary']}.")
    return "\n".join(rows)


# -- --format csv and markdown -------------------------------------------------------------


#: ``estimate train --format csv``: one row per instance option, every range as numbers.
TRAIN_COLUMNS = (
    Column("rank", "#", "right"),
    Column("instance_type", "Instance type"),
    Column("instances", "Instances", "right"),
    Column("devices_per_instance", "Devices each", "right"),
    Column("accelerator", "Accelerator"),
    Column("generation", "Generation"),
    Column("mfu", "MFU", "right"),
    Column("mfu_calibrated", "MFU calibrated"),
    Column("usd_per_hour", "$/h", "right"),
    Column("gpu_hours_low", "GPU-hours low", "right"),
    Column("gpu_hours", "GPU-hours", "right"),
    Column("gpu_hours_high", "GPU-hours high", "right"),
    Column("wall_clock_hours", "Wall-clock (h)", "right"),
    Column("on_demand_usd_low", "On-demand low", "right"),
    Column("on_demand_usd", "On-demand", "right"),
    Column("on_demand_usd_high", "On-demand high", "right"),
    Column("spot_usd_low", "Spot low", "right"),
    Column("spot_usd", "Spot", "right"),
    Column("spot_usd_high", "Spot high", "right"),
    Column("expected_interruptions", "Interruptions", "right"),
    Column("interruption_bucket", "Bucket"),
    Column("memory_fit", "Memory"),
)
#: What markdown shows of it: the text's columns, central figures and the on-demand range
#: as the text writes them.
TRAIN_VIEW = (
    Column("rank", "#", "right"),
    Column("instance_type", "Instance"),
    Column("devices", "Devices", "right"),
    Column("mfu_shown", "MFU", "right"),
    Column("gpu_hours", "GPU-hours", "right"),
    Column("wall_clock", "Wall-clock", "right"),
    Column("on_demand_usd", "On-demand", "right"),
    Column("on_demand", "Range", "right"),
    Column("spot_usd", "Spot", "right"),
    Column("interruptions", "Interruptions", "right"),
    Column("memory_fit", "Memory"),
)


def _money(value: Decimal) -> Cell:
    """As the estimate's text writes money (``$1,234``, ``$12.34``), to the cent for tools."""
    return Cell(usd(value), _plain(value, "0.01"))


def _plain(value: Decimal, places: str) -> str:
    """``value`` to ``places`` as CSV text (``150.00``, not the float's ``150.0``)."""
    if not value.is_finite() or abs(value) >= _ROUNDING_LIMIT:
        return str(float(value))
    return str(value.quantize(Decimal(places)))


def train_rows(e: TrainingEstimate) -> list[dict[str, str | Cell]]:
    rows: list[dict[str, str | Cell]] = []
    for i, o in enumerate(e.options, 1):
        spot = o.spot
        rows.append(
            {
                "rank": str(i),
                "instance_type": o.instance_type,
                "instances": str(o.instances),
                "devices_per_instance": str(o.devices_per_instance),
                "accelerator": o.accelerator.key,
                "generation": o.generation.value,
                "mfu": str(o.mfu[1]),
                "mfu_calibrated": "yes" if o.mfu_calibrated else "no",
                "mfu_shown": f"{o.mfu[1]}" + ("" if o.mfu_calibrated else " (not calibrated)"),
                "devices": f"{o.instances} x {o.devices_per_instance} {o.accelerator.key}",
                "usd_per_hour": rate_cell(o.usd_per_hour),
                "gpu_hours_low": _plain(o.gpu_hours.low, "1"),
                "gpu_hours": Cell(f"{o.gpu_hours.mid:,.0f}", _plain(o.gpu_hours.mid, "1")),
                "gpu_hours_high": _plain(o.gpu_hours.high, "1"),
                "wall_clock_hours": _plain(o.wall_hours.mid, "0.1"),
                "wall_clock": hours_text(o.wall_hours.mid),
                "on_demand_usd_low": _money(o.on_demand_usd.low),
                "on_demand_usd": _money(o.on_demand_usd.mid),
                "on_demand_usd_high": _money(o.on_demand_usd.high),
                "on_demand": _span_usd(o.on_demand_usd),
                "spot_usd_low": _money(spot.usd.low) if spot else "",
                "spot_usd": _money(spot.usd.mid) if spot else "",
                "spot_usd_high": _money(spot.usd.high) if spot else "",
                "spot": _span_usd(spot.usd) if spot else "n/a",
                "expected_interruptions": (
                    _plain(spot.expected_interruptions, "0.01") if spot else ""
                ),
                "interruption_bucket": spot.profile.bucket if spot else "",
                "interruptions": (
                    f"{spot.expected_interruptions:.1f} ({spot.profile.bucket})" if spot else "-"
                ),
                "memory_fit": o.memory.fit.value,
            }
        )
    return rows


def render_train(
    fmt: str, e: TrainingEstimate, gate: BudgetGate | None, catalog_as_of: str, at: datetime
) -> str:
    """``estimate train`` in ``fmt`` (the envelope's kind is ``estimate.train``)."""
    r = e.request
    rows = train_rows(e)
    heading = (
        f"CostGuard estimate: {_big(r.params)} parameters on {_big(r.tokens)} tokens, "
        f"{_which(r.accelerator)} in {r.region} (prices as of {catalog_as_of}); "
        f"{mfu_text(e, marker=False)}"
    )
    if gate is not None:
        heading += f"; project {gate.project}: {'OVER BUDGET' if gate.over else 'within budget'}"
    views = [Table(TRAIN_VIEW, rows)]
    if gate is not None:
        views.insert(0, gate_table(gate))
    return render(
        fmt,
        kind="estimate.train",
        data=estimate_json(e, gate, catalog_as_of),
        table=Table(TRAIN_COLUMNS, rows),
        views=tuple(views),
        generated_at=at,
        text=estimate_text(e, gate),
        heading=heading,
        empty=f"No offered instance in {r.region} carries {_which(r.accelerator)}.",
    )


def gate_table(g: BudgetGate) -> Table:
    """The budget gate as a PR comment shows it, above the options: one row per figure."""
    verdict = (
        "OVER BUDGET"
        if g.over
        else "within budget, as far as the priced resources go"
        if g.unpriced
        else "within budget"
    )
    figures: list[tuple[str, str]] = [
        ("Budget", usd(g.budget_usd) if g.budget_usd is not None else "none"),
        ("Budget from", BUDGET_SOURCES.get(g.budget_source, g.budget_source)),
        ("Spent this month", usd(g.month_to_date_usd)),
        ("Forecast without the run", usd(g.forecast_usd)),
        ("The run", usd(g.run_usd)),
        ("Of it this month", usd(g.run_adds_usd)),
        ("Forecast with the run", usd(g.forecast_with_run_usd)),
        ("Verdict", verdict),
    ]
    if g.unpriced:
        figures.append(("Left out", f"{g.unpriced} running resources the catalog cannot price"))
    if not g.ledger:
        figures.append(("Running now", "not seen: no ledger (--table), run-rate taken as $0/h"))
    rows: list[dict[str, str | Cell]] = [{"what": k, "value": v} for k, v in figures]
    return Table(
        (Column("what", "Budget gate"), Column("value", f"Project {g.project}", "right")),
        rows,
    )


#: ``estimate iteration --format csv|markdown``: one row per market.
ITERATION_COLUMNS = (
    Column("market", "Market"),
    Column("finishes", "Finishes"),
    Column("total_usd", "Total", "right"),
    Column("instance_usd", "Instance", "right"),
    Column("setup_tax_usd", "Setup tax", "right"),
    Column("latency_usd", "Latency", "right"),
    Column("wall_clock_hours", "Wall (h)", "right"),
    Column("expected_interruptions", "Interruptions", "right"),
    Column("cheaper", "Cheaper"),
)


def iteration_rows(data: dict[str, Any]) -> list[dict[str, str | Cell]]:
    rows: list[dict[str, str | Cell]] = []
    for name in ("on_demand", "spot"):
        c = data[name]
        market = name.replace("_", "-")
        row: dict[str, str | Cell] = {
            "market": market,
            "finishes": "yes" if c is not None else "never",
            "cheaper": "yes" if data["cheaper"] == market else "",
        }
        if c is not None:
            for key in ("total_usd", "instance_usd", "setup_tax_usd", "latency_usd"):
                row[key] = _money(Decimal(str(c[key])))  # the JSON's figure, to the cent
            row["wall_clock_hours"] = str(c["wall_clock_hours"])
            row["expected_interruptions"] = str(c["expected_interruptions"])
        rows.append(row)
    return rows


def render_iteration(fmt: str, data: dict[str, Any], at: datetime) -> str:
    """``estimate iteration`` in ``fmt`` (the envelope's kind is ``estimate.iteration``)."""
    i = data["inputs"]
    what = data["instance_type"] or f"${i['usd_per_hour_on_demand']}/h"
    return render(
        fmt,
        kind="estimate.iteration",
        data=data,
        table=Table(ITERATION_COLUMNS, iteration_rows(data)),
        generated_at=at,
        text=iteration_text(data),
        heading=(
            f"CostGuard iteration estimate: {i['work_hours']} h of work on {what}; "
            f"break-even: {data['break_even']['summary']}"
            + (f"; {data['instance_type']} is retired" if data.get("retired") else "")
        ),
    )


# -- registration ----------------------------------------------------------------------------


def register(sub: Any, flags: common.Flags) -> None:
    """Add ``estimate train`` and ``estimate iteration`` to the ``costguard`` parser."""
    estimate = sub.add_parser(
        "estimate", help="what a run or an iteration will cost, before launch"
    )
    est_sub = estimate.add_subparsers(dest="estimate_command", required=True)

    train = est_sub.add_parser(
        "train",
        parents=[flags.profile, flags.format],
        help="a training run's GPU-hours and cost on every instance carrying the accelerator",
        description=(
            "Training compute 6·N·T FLOPs, turned into GPU-hours at the accelerator's dense "
            "BF16/FP16 peak and an MFU (a default per accelerator generation, calibrated on "
            "published runs; range 0.25-0.45). Ranked instance options offered in --region, "
            "with central on-demand and spot costs and the on-demand range, a coarse memory "
            "check, and with --project a budget gate that needs no AWS account with --budget "
            f"or --budgets-file (exit {common.EXIT_OVER_BUDGET} when the run would take the "
            f"month forecast over budget; exit {common.EXIT_NO_DATA} when no instance option "
            "matches)."
        ),
    )
    train.add_argument(
        "--params", type=params_count, required=True, help="parameters, e.g. 7B, 300M or 7e9"
    )
    train.add_argument(
        "--tokens", type=tokens_count, required=True, help="training tokens, e.g. 2T or 1.5T"
    )
    train.add_argument(
        "--gpu",
        choices=[a.key for a in ACCELERATORS],
        help="accelerator (default: every one)",
    )
    train.add_argument(
        "--mfu",
        type=mfu_arg,
        help=f"model FLOPs utilization, {MFU_FLOOR} to 1 (default: per accelerator "
        "generation, "
        + ", ".join(f"{g.value} {m}" for g, m in MFU_BY_GENERATION.items())
        + f", {UNCALIBRATED_MFU} elsewhere)",
    )
    train.add_argument(
        "--include-inference",
        action="store_true",
        help="also list inference-only accelerators (Inferentia2), ranked last",
    )
    train.add_argument(
        "--gpus", type=gpu_count, help="devices to run on (default: one instance of each option)"
    )
    _pricing_flags(train)
    train.add_argument(
        "--bytes-per-param",
        type=bytes_arg,
        default=DEFAULT_BYTES_PER_PARAM,
        help="model state per parameter for the memory check (default 16: BF16 weights and "
        "gradients, FP32 Adam states)",
    )
    train.add_argument(
        "--checkpoint-minutes",
        type=minutes,
        default=DEFAULT_CHECKPOINT_HOURS * MINUTES,
        help="checkpoint interval on spot (default 60)",
    )
    train.add_argument(
        "--restart-minutes",
        type=minutes,
        default=DEFAULT_RESTART_HOURS * MINUTES,
        help="what an interruption costs to restart (default 30)",
    )
    gate = train.add_argument_group("budget gate")
    gate.add_argument(
        "--project", type=common.PROJECT, help="gate the launch on this project's budget"
    )
    gate.add_argument(
        "--budgets-file",
        type=common.file_path,
        metavar="PATH",
        help="JSON or simple YAML: project -> monthly budget, or {budget, spent}; no AWS needed",
    )
    gate.add_argument(
        "--spent",
        type=usd_arg,
        metavar="USD",
        help="the project's spend this month so far, without a ledger (default: the budgets "
        "file's, else 0)",
    )
    gate.add_argument(
        "--table",
        type=common.table_name,
        metavar="TABLE",
        help="a deployed ledger table (stack output LedgerTable): month-to-date, run-rate "
        "and tagged budgets from it",
    )
    gate.add_argument("--table-region", **common.TABLE_REGION)
    gate.add_argument("--scope", type=common.SCOPE, help="ledger scope (default: the account id)")
    gate.add_argument(
        "--budget",
        type=usd_arg,
        metavar="USD",
        help="the project's monthly budget (default: the budgets file, the ledger's tagged "
        "budget, COSTGUARD_PROJECTS_JSON)",
    )
    gate.add_argument(
        "--instance-type", help="the option the run uses (default: the top-ranked one)"
    )
    gate.add_argument(
        "--market", choices=["on-demand", "spot"], default="on-demand", help="default on-demand"
    )
    train.set_defaults(func=cmd_estimate_train)

    it = est_sub.add_parser(
        "iteration",
        parents=[flags.format],
        help="the true cost of one ML iteration, on-demand and spot, and the spot break-even",
        description=(
            "Instance cost + setup tax (the researcher's time while the instance boots, data "
            "loads and dependencies install) + latency penalty (a share of the researcher's "
            "rate while waiting), on-demand and on spot with interruptions (each re-pays the "
            "setup and loses half a checkpoint interval), and the experiment duration from "
            "which spot is cheaper ('never' when it never is)."
        ),
    )
    it.add_argument("--work-hours", type=hours_arg, required=True, help="compute per iteration")
    it.add_argument(
        "--instance-type",
        help="EC2 type, or SageMaker ml.* type: rate and spot bucket from the catalog",
    )
    _pricing_flags(it)
    it.add_argument("--usd-per-hour", type=usd_arg, help="on-demand rate (default: the catalog's)")
    spot_price = it.add_mutually_exclusive_group()
    spot_price.add_argument(
        "--spot-usd-per-hour",
        type=usd_arg,
        metavar="USD",
        help="the spot rate itself, e.g. from the console (instead of --spot-saving-pct)",
    )
    it.add_argument("--setup-minutes", type=minutes, default=Decimal(20), help="default 20")
    it.add_argument("--iterations-per-setup", type=iterations, default=1, help="default 1")
    it.add_argument(
        "--checkpoint-minutes", type=minutes, default=Decimal(30), help="default 30; 0: none"
    )
    it.add_argument(
        "--researcher-usd-per-hour", type=usd_arg, default=Decimal(100), help="default 100"
    )
    it.add_argument(
        "--latency-share",
        type=share,
        default=Decimal("0.5"),
        help="share of the researcher's rate charged while waiting (default 0.5)",
    )
    it.add_argument(
        "--spot-extra-setup-minutes",
        type=minutes,
        default=Decimal(0),
        help="extra setup per spot launch, e.g. waiting for capacity (default 0)",
    )
    spot_price.add_argument(
        "--spot-saving-pct", type=percent, help="default: the catalog's for the type"
    )
    it.add_argument("--interruption-bucket", choices=list(BUCKETS), help="default: the type's")
    it.add_argument(
        "--interruptions-per-hour", type=per_hour, help="override the bucket with a rate per hour"
    )
    it.set_defaults(func=cmd_estimate_iteration)


def _pricing_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--region",
        type=common.region_name,
        help="region whose prices and offered types apply (default us-east-1)",
    )
    p.add_argument(
        "--catalog",
        type=common.file_path,
        metavar="PATH",
        help="price catalog file (default: as for `costguard scan`)",
    )


if __name__ == "__main__":  # pragma: no cover - `python -m costguard.cli.estimate`
    from costguard.domain.estimate_docs import estimates_markdown

    print(estimates_markdown(), end="")
