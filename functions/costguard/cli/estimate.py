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
    DEFAULT_MFU,
    DEFAULT_RESTART_HOURS,
    MFU_FLOOR,
    MFU_HIGH,
    MFU_LOW,
    BudgetGate,
    IterationPlan,
    Span,
    TrainingEstimate,
    TrainingOption,
    TrainingRequest,
    break_even,
    budget_gate,
    estimate_training,
    hours_text,
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


params_count = _number("", Decimal(0), Decimal("1e15"))
tokens_count = _number("", Decimal(0), Decimal("1e17"))
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
        # Running resources the forecast leaves out: unpriced, their spend unknown (not $0).
        "unpriced_resources": g.unpriced,
    }


def estimate_json(
    e: TrainingEstimate, gate: BudgetGate | None, catalog_as_of: str
) -> dict[str, Any]:
    r = e.request
    low, mid, high = e.mfu
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
        },
        "flops": float(e.flops),
        "mfu": {"low": float(low), "default": float(mid), "high": float(high)},
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


def estimate_text(e: TrainingEstimate, gate: BudgetGate | None) -> str:
    r = e.request
    low, mid, high = e.mfu
    lines = [
        f"Training {_big(r.params)} parameters on {_big(r.tokens)} tokens: "
        f"6·N·T = {float(e.flops):.3g} FLOPs; MFU {mid} (range {low}–{high}).",
        "Costs are ranges over that MFU range; the ranking is by the central on-demand cost.",
        "",
        f"{'#':>2} {'INSTANCE':<18} {'DEVICES':>13} {'GPU-HOURS':>19} {'WALL-CLOCK':>10} "
        f"{'ON-DEMAND':>21} {'SPOT':>21} {'INTERRUPTIONS':>13}  MEMORY",
    ]
    for i, o in enumerate(e.options, 1):
        spot = o.spot
        lines.append(
            f"{i:>2} {o.instance_type:<18} {f'{o.instances} x {o.devices_per_instance} {o.accelerator.key}':>13} "
            f"{f'{o.gpu_hours.low:,.0f}–{o.gpu_hours.high:,.0f}':>19} {hours_text(o.wall_hours.mid):>10} "
            f"{_span_usd(o.on_demand_usd):>21} "
            f"{(_span_usd(spot.usd) if spot else 'n/a'):>21} "
            f"{(f'{spot.expected_interruptions:.1f} ({spot.profile.bucket})' if spot else '-'):>13}  "
            f"{o.memory.fit.value}"
        )
    if not e.options:
        lines.append("   (no offered instance carries it in this region)")
    if e.options:
        lines += ["", f"Memory of the first option, {e.options[0].memory.message}."]
    by_reason: dict[str, list[str]] = {}
    for t, why in e.skipped:
        by_reason.setdefault(why, []).append(t)
    for why, types in by_reason.items():
        lines.append(f"Not an option: {', '.join(types)}: {why}")
    notes = sorted({n for o in e.options for n in o.notes} | set(e.notes))
    lines += [f"Note: {n}" for n in notes]
    if e.spot_table:
        lines.append(
            f"Spot: interruption buckets and savings as of {e.spot_table.as_of} "
            f"({e.spot_table.source.split(':')[0]}); each interruption re-pays "
            f"{r.restart_hours} h of restart and half a {r.checkpoint_hours} h checkpoint interval."
        )
    if gate:
        lines += ["", *gate_text(gate)]
    return "\n".join(lines)


def gate_text(g: BudgetGate) -> list[str]:
    budget = usd(g.budget_usd) if g.budget_usd is not None else "no budget"
    if g.over:
        verdict = "OVER BUDGET: the run would take the forecast over the budget"
    elif g.unpriced:
        verdict = "within budget, as far as the priced resources go"
    else:
        verdict = "within budget"
    lines = [
        f"Project {g.project}: budget {budget}, month-to-date {usd(g.month_to_date_usd)}, "
        f"forecast {usd(g.forecast_usd)}.",
        f"The run costs {usd(g.run_usd)}; {usd(g.run_adds_usd)} of it lands this month "
        f"({_num(g.hours_left_in_month, '0.1')} h left): forecast with the run "
        f"{usd(g.forecast_with_run_usd)}: {verdict}.",
    ]
    if g.unpriced:
        lines.append(unpriced_text(g))
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
    )
    estimate = estimate_training(request, catalog)
    gate = None
    if args.project:
        if not estimate.options:
            raise common.CommandError(
                f"no instance option in {request.region} to gate on: pick another --gpu or --region"
            )
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


def _gate(args: argparse.Namespace, run_usd: Decimal, wall: Decimal) -> BudgetGate:
    from costguard.domain.calendar import hours_left_in_month

    at = common.now()
    budget = args.budget if args.budget is not None else _budget_from_env(args.project)
    if budget is None:
        raise common.CommandError(
            f"no budget for project {args.project!r}: pass --budget USD, or set it in "
            "COSTGUARD_PROJECTS_JSON"
        )
    mtd, observations, watermark = _read_ledger(args, at)
    running = project_run_rate(observations.values(), args.project, watermark)
    return budget_gate(
        args.project,
        budget,
        mtd,
        running.usd_per_hour,
        hours_left_in_month(at),
        run_usd,
        wall,
        running.unpriced,
    )


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


def _read_ledger(
    args: argparse.Namespace, at: datetime
) -> tuple[Decimal, Mapping[str, Observation], datetime | None]:
    """The project's month-to-date, the ledger's observations and the last scan's
    watermark, read from the deployed ledger (the run-rate is computed from them by
    :func:`project_run_rate`)."""
    from costguard.domain.calendar import month_key

    ledger, scope, region = common.deployed_ledger(
        args,
        args.table_region,
        no_table="--project reads the project's month-to-date and forecast from a deployed "
        "ledger: pass --table (the stack's LedgerTable output)",
        no_region="no region for the ledger: pass --table-region (the stack's region)",
    )
    with common.table_errors(args.table, region):
        totals = ledger.month_totals(scope, month_key(at))
        watermark = ledger.watermark(scope)
        observations = ledger.observations(scope)
    row = totals.get(args.project)
    return (row.usd if row else Decimal(0)), observations, watermark


# -- estimate iteration ------------------------------------------------------------------------


def cmd_estimate_iteration(args: argparse.Namespace) -> int:
    rate = args.usd_per_hour
    saving = args.spot_saving_pct / 100 if args.spot_saving_pct is not None else None
    bucket = args.interruption_bucket
    basis = "given"
    needs_catalog = (
        rate is None or saving is None or (bucket is None and args.interruptions_per_hour is None)
    )
    if needs_catalog and not args.instance_type:
        raise common.CommandError(
            "pass --instance-type (priced from the catalog), or --usd-per-hour with "
            "--spot-saving-pct and --interruption-bucket or --interruptions-per-hour"
        )
    # A named type is always looked up, if only to say that AWS no longer offers it.
    catalog = _catalog(args.catalog) if args.instance_type else None
    retired = catalog.retirement(args.instance_type) if catalog is not None else None
    if retired is not None:
        print(
            f"costguard: warning: {args.instance_type} is retired: {retired}. The estimate "
            "prices it as asked, but it is not a type to launch; "
            "`costguard estimate train --gpu ...` lists the current ones",
            file=sys.stderr,
        )
    if needs_catalog:
        assert catalog is not None
        region = args.region or "us-east-1"
        if rate is None:
            _known_region(catalog, region)
            rate = catalog.ec2_on_demand(region, args.instance_type)
            if rate is None:
                why = catalog.unpriced_reason("ec2", region, args.instance_type)
                raise common.CommandError(
                    f"no on-demand rate for {args.instance_type} in {region}: {why}; "
                    "pass --usd-per-hour"
                )
        if catalog.spot is None:
            raise common.CommandError("the price catalog has no spot table: pass the spot options")
        profile = catalog.spot.profile(args.instance_type)
        row = "its row" if profile.basis == "table" else "the default row: no row for its type"
        basis = f"spot table of {catalog.spot.as_of}, {row}"
        saving = profile.saving if saving is None else saving
        bucket = bucket or profile.bucket
        table_rate = catalog.spot.bucket_monthly_rate
    else:
        table_rate = None
    if args.interruptions_per_hour is not None:
        lam = args.interruptions_per_hour
    else:
        assert bucket is not None
        monthly = (table_rate or _DEFAULT_BUCKET_RATES)[bucket]
        lam = hourly_rate(monthly)
    assert rate is not None and saving is not None  # given, or read from the catalog above
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
    data = iteration_json(plan, bucket, basis, instance_type=args.instance_type, retired=retired)
    sys.stdout.write(render_iteration(args.format, data, common.now()))
    sys.stdout.flush()
    return common.EXIT_OK


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
        "on-demand "
        f"(spot saves {i['spot_saving_pct']}%, {i['interruptions_per_hour']} interruptions/h"
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
    Column("usd_per_hour", "$/h", "right"),
    Column("gpu_hours_low", "GPU-hours low", "right"),
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
#: What markdown shows of it: the text's columns, ranges as the text writes them.
TRAIN_VIEW = (
    Column("rank", "#", "right"),
    Column("instance_type", "Instance"),
    Column("devices", "Devices", "right"),
    Column("gpu_hours", "GPU-hours", "right"),
    Column("wall_clock", "Wall-clock", "right"),
    Column("on_demand", "On-demand", "right"),
    Column("spot", "Spot", "right"),
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
                "devices": f"{o.instances} x {o.devices_per_instance} {o.accelerator.key}",
                "usd_per_hour": rate_cell(o.usd_per_hour),
                "gpu_hours_low": _plain(o.gpu_hours.low, "1"),
                "gpu_hours_high": _plain(o.gpu_hours.high, "1"),
                "gpu_hours": f"{o.gpu_hours.low:,.0f}–{o.gpu_hours.high:,.0f}",
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
        f"{r.accelerator} in {r.region} (prices as of {catalog_as_of})"
    )
    if gate is not None:
        heading += f"; project {gate.project}: {'OVER BUDGET' if gate.over else 'within budget'}"
    return render(
        fmt,
        kind="estimate.train",
        data=estimate_json(e, gate, catalog_as_of),
        table=Table(TRAIN_COLUMNS, rows),
        views=(Table(TRAIN_VIEW, rows),),
        generated_at=at,
        text=estimate_text(e, gate),
        heading=heading,
        empty="No offered instance carries it in this region.",
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
            "BF16/FP16 peak and an MFU (default 0.35, range 0.25-0.45, calibrated on published "
            "runs). Ranked instance options offered in --region, with on-demand and spot cost "
            "as ranges, a coarse memory check, and with --project a budget gate "
            f"(exit {common.EXIT_OVER_BUDGET} when the run would take the month forecast over budget)."
        ),
    )
    train.add_argument("--params", type=params_count, required=True, help="parameters, e.g. 7e9")
    train.add_argument(
        "--tokens", type=tokens_count, required=True, help="training tokens, e.g. 2e12"
    )
    train.add_argument(
        "--gpu",
        choices=[a.key for a in ACCELERATORS],
        help="accelerator (default: every one)",
    )
    train.add_argument(
        "--mfu",
        type=mfu_arg,
        help=f"model FLOPs utilization, {MFU_FLOOR} to 1 (default {DEFAULT_MFU})",
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
        "--table",
        type=common.table_name,
        metavar="TABLE",
        help="the deployed ledger table (stack output LedgerTable)",
    )
    gate.add_argument("--table-region", **common.TABLE_REGION)
    gate.add_argument("--scope", type=common.SCOPE, help="ledger scope (default: the account id)")
    gate.add_argument(
        "--budget",
        type=usd_arg,
        help="the project's monthly budget (default: COSTGUARD_PROJECTS_JSON)",
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
    it.add_argument("--instance-type", help="EC2 type: rate and spot bucket from the catalog")
    _pricing_flags(it)
    it.add_argument("--usd-per-hour", type=usd_arg, help="on-demand rate (default: the catalog's)")
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
    it.add_argument("--spot-saving-pct", type=percent, help="default: the catalog's for the type")
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
