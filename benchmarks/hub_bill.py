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
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from decimal import Decimal

from benchmarks.guard_bill import (
    ALARMS,
    GUARD_INVOCATIONS,
    GUARD_MEMORY_GB,
    GUARD_SECONDS_UPPER_BOUND,
    PRICES,
)
from costguard.config_spec import BY_NAME, rate_minutes

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


def stack_month(load: HubLoad | None = None, *, alarms: int | None = None) -> dict[str, object]:
    """The whole Organization-mode stack's month: the hub's items plus what every CostGuard
    stack pays (all its alarms, its key, the Slack secret, the guards' own Lambdas as an
    upper bound). Not included: the idle pass's CloudWatch reads (benchmarks/idle_pass.py)
    and the dashboard (free up to three per account). No custom metric: in Organization
    mode the single-account scan, which publishes the two, is not deployed.

    ``alarms``: the alarms of the synthesized template (default: single-account + added).
    """
    hub = hub_month(load)
    lines = dict(hub["usd_per_month"])  # type: ignore[arg-type]
    total_alarms = alarms if alarms is not None else ALARMS + ALARMS_ADDED
    lines.pop("alarms")
    fixed = {
        "alarms": total_alarms * PRICES["alarm_month"],
        "kms_key": PRICES["kms_key_month"],
        "secrets_manager": PRICES["secret_month"],
        "guard_lambdas_upper_bound": GUARD_INVOCATIONS
        * (
            GUARD_SECONDS_UPPER_BOUND * GUARD_MEMORY_GB * PRICES["lambda_gb_second_arm64"]
            + PRICES["lambda_request"]
        ),
    }
    lines |= {k: _cents(v) for k, v in fixed.items()}
    return {
        "usd_per_month": lines,
        "usd_per_month_total": round(sum(lines.values()), 2),
        "alarms": total_alarms,
        "hub": hub,
    }


def _cents(value: float) -> float:
    return float(Decimal(value).quantize(Decimal("0.01")))


if __name__ == "__main__":
    import json

    print(json.dumps(stack_month(), indent=2))
