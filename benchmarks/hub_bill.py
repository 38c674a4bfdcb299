"""What the Organization hub adds to CostGuard's own monthly bill, itemized.

The hub's line items follow from the work it is given each scheduled time (``tick``):
one work item per *active* account-region, a probe per empty one once per probe interval,
a ``regions`` item per account once a day, and a fan-out invocation. Each item is one
FIFO message (sent in batches of ten by the fan-out, received and deleted in batches of
up to ten by Lambda's event source) and a share of a consumer invocation. Lambda's SQS
event source also long-polls an idle queue, which SQS bills.

Every per-item figure is an input. The defaults are what ``benchmarks/org_scale.py``
measured on moto in 2026-11 (calls, DynamoDB units, log bytes, our code's seconds) plus its
stated latency per AWS call (seconds); ``make bench`` passes the fresh measurements in. Prices are us-east-1 list
prices (``guard_bill.PRICES``); free tiers are left out, so the figures are upper bounds.

DynamoDB: each scan marks its slice done in an item of its own in the tick's partition
(a conditional put, under 1 KB) and counts it down in a small counter item (``ADD -1``):
constant units per slice (:func:`plan_write_units`), never the plan item, which holds
the expected keys once and is written once a tick. Everything grows linearly.

Guards (:class:`ActLoad`, :func:`act_month`): in Organization mode there are no per-guard
Lambdas. Each guard's schedule invokes the fan-out, which sends one act message per
member account the guard runs in; the act consumer (batch size 1) runs the guard there.
A run's figures are a line in its regions (``base + per_region x regions``) plus what an
account holding things adds, measured by ``benchmarks/org_guards.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from decimal import Decimal

from benchmarks.guard_bill import ALARMS, PRICES, refresh_month
from costguard.config_spec import BY_NAME, rate_minutes
from costguard.domain.org_act import Reach
from costguard.guards import SPECS

#: SQS FIFO requests (each up to 10 messages and 64 KiB) and the month used throughout.
SQS_FIFO_REQUEST = 0.50 / 1_000_000
SECONDS_PER_MONTH = 30.4 * 24 * 3600
#: Lambda's SQS event source keeps this many long polls (20 s each) open on an idle queue.
IDLE_POLLERS = 5
LONG_POLL_SECONDS = 20
#: SQS reuses a KMS data key this long per principal (the queue's default, 300 s).
DATA_KEY_REUSE_SECONDS = 300
#: Alarms the hub adds: errors, throttles and dead letters of the fan-out and the consumer,
#: the work queue's dead letters and the fan-out heartbeat, minus the single-account
#: scan's three and its ScanCompleted heartbeat (23 in the synthesized org template).
ALARMS_ADDED = 3 + 3 + 1 + 1 - 4
#: The act path's alarms: the act consumer's errors, throttles and own dead letters (every
#: CostGuard Lambda has the three) and the act queue's dead letters; and the alarms of the
#: four per-guard Lambdas (three each) that Organization mode no longer deploys.
ACT_ALARMS = 3 + 1
GUARD_LAMBDA_ALARMS = 3 * 4
#: The Organization-mode template's alarms: 26 + 4 + 4 - 12 = 22.
ORG_ALARMS = ALARMS + ALARMS_ADDED + ACT_ALARMS - GUARD_LAMBDA_ALARMS
#: The price refresh (weekly) keeps its own Lambda in both modes, priced as single-account
#: mode prices it (``guard_bill.refresh_month``: an upper bound of 30 s at 512 MB).
BATCH = 10
#: X-Ray traces (the Lambdas trace actively): $5 per million recorded.
XRAY_TRACE = 5.0 / 1_000_000
#: DynamoDB bills a write per started KB, a strongly consistent read per started 4 KB.
WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096


@dataclass(frozen=True)
class HubLoad:
    accounts: int = 200
    regions_per_account: int = 4
    #: Account-regions holding anything to scan (the rest are probed).
    active_fraction: float = 0.10
    scan_minutes: int = rate_minutes(BY_NAME["scan_rate"].default)
    probe_hours: int = BY_NAME["org_probe_hours"].default
    #: Seconds of consumer time per work item: our code's time measured on moto plus a
    #: stated latency per AWS call (org_scale.LATENCY), credentials assumed cold.
    seconds_per_scan: float = 1.8
    seconds_per_probe: float = 1.13
    seconds_per_regions: float = 0.47
    #: Each invocation: building the consumer's graph, and a share of cold starts
    #: (Lambda bills the init phase too).
    seconds_per_invocation: float = 0.38
    #: The fan-out: plan, send, sweep.
    fanout_seconds: float = 0.27
    memory_gb: float = BY_NAME["scan_memory_mb"].default / 1024
    #: Items per consumer invocation (FIFO groups in flight leave batches short: the
    #: schedule model's mean in the steady state).
    items_per_invocation: float = 6.65
    #: One structured log line per work item (measured), Lambda's own lines per
    #: invocation (stated), the fan-out's summary per tick (measured).
    log_bytes_per_item: int = 311
    log_bytes_per_invocation: int = 400
    log_bytes_per_tick: int = 683
    #: DynamoDB units per work item, the plan's mark apart (measured).
    write_units_per_scan: float = 6.0
    read_units_per_scan: float = 9.0
    write_units_per_probe: float = 1.0
    read_units_per_probe: float = 1.0
    write_units_per_regions: float = 1.0
    read_units_per_regions: float = 1.0
    #: The fan-out reads the whole directory every tick (one Query): its bytes per
    #: account-region (measured); any other units of a tick on top.
    directory_bytes_per_account_region: float = 210.0
    write_units_per_tick: float = 0.0
    read_units_per_tick: float = 0.0
    #: The aggregation reads each rolled-up slice's ledger (measured), in the consumer of
    #: the slice that completes the plan.
    read_units_per_rolled_up_slice: float = 8.0
    aggregation_seconds_per_rolled_up_slice: float = 0.014
    #: The plan item: bytes without slices, bytes per slice key in one set (measured).
    plan_base_bytes: int = 129
    plan_bytes_per_slice: float = 23.25
    #: One slice's done item (key, time to live, a tagged budget or two), and the
    #: counter item: each under 1 KB, so a mark is two write units whatever the plan.
    done_item_bytes: int = 128
    write_units_per_mark: float = 2.0
    #: Plans the fan-out's sweep reads each tick (its 6-hour look-back).
    plans_swept: int = 25


def per_tick(load: HubLoad) -> dict[str, float]:
    """Work items of one scheduled time, by kind (fractional: averaged over the month)."""
    slices = load.accounts * load.regions_per_account
    ticks_per_probe = load.probe_hours * 60 / load.scan_minutes
    ticks_per_day = 24 * 60 / load.scan_minutes
    return {
        "scan": slices * load.active_fraction,
        "probe": slices * (1 - load.active_fraction) / ticks_per_probe,
        "regions": load.accounts / ticks_per_day,
    }


def plan_bytes(slices: float, done: float, load: HubLoad) -> float:
    return load.plan_base_bytes + load.plan_bytes_per_slice * (slices + done)


def plan_write_units(slices: int, load: HubLoad) -> int:
    """Write units of marking ``slices`` done: each mark puts the slice's own done item and
    decrements the counter item, both small, so the units are constant per slice (the
    plan item, which grows with the slices, is not written by a mark)."""
    return math.ceil(slices * load.write_units_per_mark)


def dynamodb_units(load: HubLoad) -> dict[str, float]:
    """Write and read units of one tick (the month's average tick)."""
    items = per_tick(load)
    scans = items["scan"]
    slices = load.accounts * load.regions_per_account
    # The fan-out puts the plan (expected keys) and its counter in one transaction (twice
    # the units), each scan marks its slice done (its own item and the counter); the next
    # fan-outs' sweep reads the plan items of its look-back, and the completing consumer
    # and the aggregation each read the time's done items once.
    head = math.ceil(plan_bytes(scans, 0, load) / WRITE_UNIT_BYTES)
    plan_put = 2 * (head + 1) if scans else 0
    plan_marks = plan_write_units(round(scans), load)
    full_plan = plan_bytes(scans, 0, load) + scans * load.done_item_bytes
    sweep = math.ceil(load.plans_swept * plan_bytes(scans, 0, load) / READ_UNIT_BYTES)
    sweep = sweep + 2 * math.ceil(scans * load.done_item_bytes / READ_UNIT_BYTES) if scans else 1
    directory = math.ceil(load.directory_bytes_per_account_region * slices / READ_UNIT_BYTES)
    return {
        "write_units": scans * load.write_units_per_scan
        + plan_put
        + plan_marks
        + items["probe"] * load.write_units_per_probe
        + items["regions"] * load.write_units_per_regions
        + load.write_units_per_tick,
        "read_units": scans * load.read_units_per_scan
        + items["probe"] * load.read_units_per_probe
        + items["regions"] * load.read_units_per_regions
        + directory
        + sweep
        + scans * load.read_units_per_rolled_up_slice
        + load.read_units_per_tick,
        "plan_write_units": plan_put + plan_marks,
        "plan_bytes_when_done": full_plan,
        "directory_read_units": directory,
        "sweep_read_units": sweep,
    }


def invocations(items: float, load: HubLoad) -> float:
    return math.ceil(items / load.items_per_invocation) if items else 0


def hub_month(load: HubLoad | None = None) -> dict[str, object]:
    """The hub's monthly line items in USD, and the load behind them."""
    load = load or HubLoad()
    ticks = SECONDS_PER_MONTH / (load.scan_minutes * 60)
    items = per_tick(load)
    per_tick_items = sum(items.values())
    calls_per_tick = invocations(per_tick_items, load)
    consumer_seconds = (
        items["scan"] * load.seconds_per_scan
        + items["probe"] * load.seconds_per_probe
        + items["regions"] * load.seconds_per_regions
        + calls_per_tick * load.seconds_per_invocation
        + items["scan"] * load.aggregation_seconds_per_rolled_up_slice
    )
    # The fan-out sends one request per ten messages; the event source receives and
    # deletes one per invocation; its pollers' empty receives on an idle queue on top.
    message_requests = (math.ceil(per_tick_items / BATCH) + 2 * calls_per_tick) * ticks
    idle_requests = IDLE_POLLERS * SECONDS_PER_MONTH / LONG_POLL_SECONDS
    units = dynamodb_units(load)
    gb_second = PRICES["lambda_gb_second_arm64"]
    month = {
        "sqs_requests": (message_requests + idle_requests) * SQS_FIFO_REQUEST,
        # A Lambda request is an invocation (a batch of up to ten items), not an item.
        "consumer_lambda": ticks
        * (
            consumer_seconds * load.memory_gb * gb_second
            + calls_per_tick * PRICES["lambda_request"]
        ),
        "fanout_lambda": ticks
        * (load.fanout_seconds * load.memory_gb * gb_second + PRICES["lambda_request"]),
        "dynamodb_writes": ticks * units["write_units"] * PRICES["dynamodb_write_unit"],
        "dynamodb_reads": ticks * units["read_units"] * PRICES["dynamodb_read_unit"],
        # The queue's data keys (sender, receiver) and one env-variable decrypt per
        # consumer container (cold starts: at most one per invocation).
        "kms_requests": (
            (1 + IDLE_POLLERS) * SECONDS_PER_MONTH / DATA_KEY_REUSE_SECONDS
            + ticks * (1 + calls_per_tick)
        )
        * PRICES["kms_request"],
        "alarms": ALARMS_ADDED * PRICES["alarm_month"],
        "logs": ticks
        * (
            per_tick_items * load.log_bytes_per_item
            + (calls_per_tick + 1) * load.log_bytes_per_invocation
            + load.log_bytes_per_tick
        )
        / 1e9
        * (PRICES["logs_ingest_gb"] + PRICES["logs_store_gb_month"] * 3),
        "xray_traces": ticks * (calls_per_tick + 1) * XRAY_TRACE,
    }
    return {
        "load": asdict(load),
        "per_tick": {k: round(v, 2) for k, v in items.items()},
        "consumer_invocations_per_tick": calls_per_tick,
        "dynamodb_units_per_tick": {k: round(v, 1) for k, v in units.items()},
        "sqs_requests_per_month": round(message_requests + idle_requests),
        "consumer_gb_seconds_per_month": round(ticks * consumer_seconds * load.memory_gb),
        "usd_per_month": {k: _cents(v) for k, v in month.items()},
        "usd_per_month_total": round(sum(month.values()), 2),
        "notes": (
            "Upper bounds: free tiers left out; seconds are our code's time on moto plus a "
            "stated latency per AWS call, with cold credentials and cold containers."
        ),
    }


#: A guard run's figures: seconds on AWS (our time, a stated latency per call, one
#: AssumeRole), AWS calls in the member account, to STS and to the hub (DynamoDB, SNS),
#: DynamoDB units, and the log bytes the run writes.
RUN_FIGURES = (
    "seconds",
    "member_calls",
    "sts_calls",
    "hub_calls",
    "write_units",
    "read_units",
    "log_bytes",
)


@dataclass(frozen=True)
class GuardCost:
    """One guard's run in one member account, measured (``benchmarks/org_guards.py``).

    A run over ``r`` regions of an account holding nothing costs ``base + per_region x r``
    of each of :data:`RUN_FIGURES`; an account holding a handful of what the guard guards
    adds ``holding``. ``compute``: the guard runs only in accounts with an active region,
    over those regions; otherwise in every account, over every allowed region.
    """

    name: str
    every_minutes: int
    compute: bool
    base: Mapping[str, float]
    per_region: Mapping[str, float]
    holding: Mapping[str, float]

    def run(self, regions: float, holding_share: float) -> dict[str, float]:
        """A run's figures over ``regions``, in an account holding things with the given
        probability (the holding delta is added in that proportion)."""
        return {
            k: self.base.get(k, 0.0)
            + self.per_region.get(k, 0.0) * regions
            + self.holding.get(k, 0.0) * holding_share
            for k in RUN_FIGURES
        }


def schedule_minutes(name: str) -> int:
    """A shipped guard's default schedule (its rate setting's default, or its own)."""
    spec = SPECS[name]
    if spec.rate_setting:
        return rate_minutes(BY_NAME[spec.rate_setting].default)
    return spec.every_minutes


def guard_cost(
    name: str,
    base: tuple[float, ...],
    per_region: tuple[float, ...],
    holding: tuple[float, ...],
) -> GuardCost:
    """A shipped guard's figures (in :data:`RUN_FIGURES` order), on its default schedule."""
    return GuardCost(
        name,
        schedule_minutes(name),
        SPECS[name].reach is Reach.COMPUTE,
        dict(zip(RUN_FIGURES, base, strict=True)),
        dict(zip(RUN_FIGURES, per_region, strict=True)),
        dict(zip(RUN_FIGURES, holding, strict=True)),
    )


#: The stated latency of one AWS call in seconds: to a member account, to STS, in the
#: hub (org_scale and org_guards model the same).
CALL_LATENCY: Mapping[str, float] = {"member": 0.15, "sts": 0.15, "hub": 0.01}
#: Guards whose policy reads its regions at once (services/stale_volumes.py): a run pays
#: one region's call latency, not one per region. moto answers in-process, so the
#: measured calls are sequential; the model applies what the code does.
READ_AT_ONCE = ("stale-volumes",)


def regions_at_once(c: GuardCost) -> GuardCost:
    """``c`` with its per-region calls' latency paid once (the slowest region's), not once
    per region; our CPU time is unchanged."""
    p = c.per_region
    regional = (
        p.get("member_calls", 0) * CALL_LATENCY["member"]
        + p.get("sts_calls", 0) * CALL_LATENCY["sts"]
        + p.get("hub_calls", 0) * CALL_LATENCY["hub"]
    )
    return GuardCost(
        c.name,
        c.every_minutes,
        c.compute,
        {**c.base, "seconds": c.base["seconds"] + regional},
        {**p, "seconds": p["seconds"] - regional},
        c.holding,
    )


def as_shipped(act: ActLoad) -> ActLoad:
    """The act load with the guards that read their regions at once modelled so."""
    return ActLoad(
        **{
            **asdict_shallow(act),
            "guards": tuple(
                regions_at_once(c) if c.name in READ_AT_ONCE else c for c in act.guards
            ),
        }
    )


def asdict_shallow(obj: object) -> dict[str, object]:
    return {f: getattr(obj, f) for f in obj.__dataclass_fields__}  # type: ignore[attr-defined]


#: Measured on moto (2026-11, ``benchmarks/org_guards.py``), calls one after another;
#: ``make bench`` passes the fresh measurements in. Order: seconds, member, sts and hub
#: calls, write and read units, log bytes.
GUARD_COSTS: tuple[GuardCost, ...] = (
    guard_cost(
        "idle-notebooks",
        (0.357, 0, 1, 0, 0, 0, 290),
        (0.619, 4, 0, 0, 0, 0, 0),
        (1.284, 8, 0, 6, 4, 2, 1088),
    ),
    guard_cost(
        "stale-volumes",
        (0.3, 0, 1, 0, 0, 0, 289),
        (0.482, 3, 0, 1, 0, 1, 0),
        (0.0, 0, 0, 1, 1, 0, 0),
    ),
    guard_cost(
        "stale-objects",
        (0.407, 1, 1, 1, 0, 1, 289),
        (0.0, 0, 0, 0, 0, 0, 0),
        (1.066, 6, 0, 12, 7, 4, 546),
    ),
)


@dataclass(frozen=True)
class ActLoad:
    """The act path's inputs (see :func:`act_month`)."""

    guards: tuple[GuardCost, ...] = tuple(
        regions_at_once(c) if c.name in READ_AT_ONCE else c for c in GUARD_COSTS
    )
    #: The act consumer's memory: the largest guard's (the contract), in GB.
    memory_gb: float = max(spec.memory_mb for spec in SPECS.values()) / 1024
    #: Each invocation builds the consumer's graph (warm container; measured).
    build_seconds: float = 0.061
    #: A new container: the runtime's init, the handler's imports and the first graph
    #: (the price catalog's read). Every guard tick is assumed to start its containers
    #: cold (its schedule is 30 or 60 minutes apart): an upper bound.
    cold_start_seconds: float = 0.83
    #: The event source's cap on consumers (orgMaxConcurrency): a tick's containers.
    max_concurrency: int = BY_NAME["org_max_concurrency"].default
    #: The fan-out's answer to a guard's schedule: seconds (AWS estimate) without the
    #: directory and per account-region of it (its read and the plan), per send of ten.
    fanout_seconds_base: float = 0.09
    fanout_seconds_per_account_region: float = 8.9e-05
    fanout_seconds_per_send: float = 0.011
    fanout_log_bytes: int = 275
    #: Lambda's START, END and REPORT lines per invocation (stated).
    platform_log_bytes: int = 400
    #: Share of the accounts without compute that hold data for the data guards (the
    #: accounts with compute are assumed to hold some).
    data_only_holding_share: float = 0.0
    #: Read units of a new container's first graph: the stored price catalog (one
    #: strongly consistent GetItem; the packaged catalog's size as its stand-in).
    catalog_read_units: int = 7
    #: X-Ray's default rule for Lambda (not configurable): the first request each second
    #: and 5 % of the others. False: every invocation traced (an upper bound).
    xray_sampling: bool = True


#: X-Ray's default sampling rule: a reservoir of one trace a second, then 5 %.
XRAY_RESERVOIR_PER_SECOND = 1
XRAY_FIXED_RATE = 0.05


def traced(invocations: float, seconds: float) -> float:
    """Traces X-Ray records of ``invocations`` spread over ``seconds`` (default rule)."""
    first = min(invocations, max(1.0, math.ceil(seconds)) * XRAY_RESERVOIR_PER_SECOND)
    return first + XRAY_FIXED_RATE * (invocations - first)


def compute_accounts(load: HubLoad) -> float:
    """Accounts with at least one active region: the active account-regions spread one per
    account (the layout of ``org_scale``'s world: the most runs for the active share),
    capped at every account. Independent regions would give fewer:
    ``accounts x (1 - (1 - active_fraction) ** regions_per_account)``."""
    active = load.accounts * load.regions_per_account * load.active_fraction
    return min(float(load.accounts), active)


def guard_runs(load: HubLoad, guard: GuardCost, act: ActLoad) -> dict[str, float]:
    """One scheduled time of ``guard``: its runs (messages, invocations), the regions of
    each run, and the share of runs in accounts holding what it guards."""
    with_compute = compute_accounts(load)
    if guard.compute:
        runs = with_compute
        regions = (
            load.accounts * load.regions_per_account * load.active_fraction / runs if runs else 0
        )
        holding = 1.0
    else:
        runs = float(load.accounts)
        regions = float(load.regions_per_account)
        others = load.accounts - with_compute
        holding = (with_compute + others * act.data_only_holding_share) / runs if runs else 0
    return {"runs": runs, "regions_per_run": regions, "holding_share": holding}


def act_month(load: HubLoad | None = None, act: ActLoad | None = None) -> dict[str, object]:
    """The act path's monthly line items in USD (guards across the Organization), and the
    runs behind them. Upper bounds, as :func:`hub_month`: no free tier, cold credentials
    (an AssumeRole per run), cold containers at every guard tick; X-Ray at its default
    sampling (the act path's invocations come in bursts, one per run)."""
    load = load or HubLoad()
    act = act or ActLoad()
    gb_second = PRICES["lambda_gb_second_arm64"]
    slices = load.accounts * load.regions_per_account
    directory_reads = math.ceil(load.directory_bytes_per_account_region * slices / READ_UNIT_BYTES)
    lines: dict[str, float] = {
        "act_consumer_lambda": 0.0,
        "act_fanout_lambda": 0.0,
        "act_sqs_requests": IDLE_POLLERS * SECONDS_PER_MONTH / LONG_POLL_SECONDS * SQS_FIFO_REQUEST,
        "act_kms_requests": (1 + IDLE_POLLERS)
        * SECONDS_PER_MONTH
        / DATA_KEY_REUSE_SECONDS
        * PRICES["kms_request"],
        "act_dynamodb_writes": 0.0,
        "act_dynamodb_reads": 0.0,
        "act_logs": 0.0,
        "act_xray_traces": 0.0,
    }
    log_price = PRICES["logs_ingest_gb"] + PRICES["logs_store_gb_month"] * 3
    by_guard: dict[str, dict[str, float]] = {}
    for guard in act.guards:
        ticks = SECONDS_PER_MONTH / (guard.every_minutes * 60)
        plan = guard_runs(load, guard, act)
        runs = plan["runs"]
        run = guard.run(plan["regions_per_run"], plan["holding_share"])
        containers = min(runs, act.max_concurrency)
        seconds = runs * (run["seconds"] + act.build_seconds) + containers * act.cold_start_seconds
        # The tick's runs take this long at the concurrency cap (its traces' spread).
        burst = seconds / containers if containers else 0.0
        traces = traced(runs, burst) if act.xray_sampling else runs
        sends = math.ceil(runs / BATCH) if runs else 0
        fanout = (
            act.fanout_seconds_base
            + act.fanout_seconds_per_account_region * slices
            + act.fanout_seconds_per_send * sends
        )
        usd = {
            "act_consumer_lambda": ticks
            * (seconds * act.memory_gb * gb_second + runs * PRICES["lambda_request"]),
            "act_fanout_lambda": ticks
            * (fanout * load.memory_gb * gb_second + PRICES["lambda_request"]),
            # Sent ten at a time; each message received and deleted alone (batch size 1).
            "act_sqs_requests": ticks * (sends + 2 * runs) * SQS_FIFO_REQUEST,
            # Each new container decrypts its environment once.
            "act_kms_requests": ticks * containers * PRICES["kms_request"],
            "act_dynamodb_writes": ticks
            * runs
            * run["write_units"]
            * PRICES["dynamodb_write_unit"],
            "act_dynamodb_reads": ticks
            * (runs * run["read_units"] + directory_reads + containers * act.catalog_read_units)
            * PRICES["dynamodb_read_unit"],
            "act_logs": ticks
            * (
                runs * (run["log_bytes"] + act.platform_log_bytes)
                + act.fanout_log_bytes
                + act.platform_log_bytes
            )
            / 1e9
            * log_price,
            "act_xray_traces": ticks * (traces + 1) * XRAY_TRACE,
        }
        for k, v in usd.items():
            lines[k] += v
        by_guard[guard.name] = {
            "runs_per_tick": round(runs, 2),
            "regions_per_run": round(plan["regions_per_run"], 2),
            "holding_share": round(plan["holding_share"], 3),
            "ticks_per_month": round(ticks, 1),
            "invocations_per_month": round(ticks * runs),
            "seconds_per_run": round(run["seconds"] + act.build_seconds, 3),
            "calls_per_run": round(run["member_calls"] + run["sts_calls"] + run["hub_calls"], 2),
            "calls_per_month": round(
                ticks * runs * (run["member_calls"] + run["sts_calls"] + run["hub_calls"])
            ),
            "gb_seconds_per_month": round(ticks * seconds * act.memory_gb),
            "burst_seconds": round(burst, 1),
            "traces_per_tick": round(traces, 1),
            "usd_per_month": _cents(sum(usd.values())),
        }
    return {
        "guards": by_guard,
        "invocations_per_month": sum(g["invocations_per_month"] for g in by_guard.values()),
        "usd_per_month": {k: _cents(v) for k, v in lines.items()},
        "usd_per_month_total": round(sum(lines.values()), 2),
    }


def stack_month(
    load: HubLoad | None = None, *, alarms: int | None = None, act: ActLoad | None = None
) -> dict[str, object]:
    """The whole Organization-mode stack's month: the hub's items, the guards' act path
    (:func:`act_month`: there are no per-guard Lambdas in Organization mode), plus what
    every CostGuard stack pays (all its alarms, its key, the Slack secret, the weekly price
    refresh). Not included: the idle guard's CloudWatch reads (benchmarks/idle_pass.py),
    which the member accounts pay, and the dashboard (free up to three per account). No
    custom metric: in Organization mode the single-account scan, which publishes the two,
    is not deployed.

    ``alarms``: the alarms of the synthesized template (default: :data:`ORG_ALARMS`).
    """
    hub = hub_month(load)
    guards = act_month(load, act)
    lines = dict(hub["usd_per_month"])  # type: ignore[arg-type]
    lines |= guards["usd_per_month"]  # type: ignore[arg-type]
    total_alarms = alarms if alarms is not None else ORG_ALARMS
    lines.pop("alarms")
    fixed = {
        "alarms": total_alarms * PRICES["alarm_month"],
        "kms_key": PRICES["kms_key_month"],
        "secrets_manager": PRICES["secret_month"],
        "price_refresh_lambda": refresh_month(),
    }
    lines |= {k: _cents(v) for k, v in fixed.items()}
    return {
        "usd_per_month": lines,
        "usd_per_month_total": round(sum(lines.values()), 2),
        "alarms": total_alarms,
        "hub": hub,
        "act": guards,
    }


def _cents(value: float) -> float:
    return float(Decimal(value).quantize(Decimal("0.01")))


if __name__ == "__main__":
    import json

    print(json.dumps(stack_month(), indent=2))
