"""What the Organization hub adds to CostGuard's own monthly bill, itemized.

The hub's line items follow from the work it is given each scheduled time (``tick``):
one work item per *active* account-region, a probe per empty one once per probe interval,
a ``regions`` item per account once a day, and a fan-out invocation. Each item is one
FIFO message (sent, received and deleted in batches of ten) and a share of a consumer
invocation. Lambda's SQS event source also long-polls an idle queue, which SQS bills.

The seconds a work item takes are inputs: measure them (benchmarks on moto are slower
than AWS, an upper bound) and pass them in. The defaults below are stated assumptions,
not measurements. Prices are us-east-1 list prices (``guard_bill.PRICES``); SQS's and
Lambda's free tiers are left out, so the figures are upper bounds.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from decimal import Decimal

from benchmarks.guard_bill import PRICES
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
#: scan's three and its ScanCompleted heartbeat.
ALARMS_ADDED = 3 + 3 + 1 + 1 - 4
BATCH = 10


@dataclass(frozen=True)
class HubLoad:
    accounts: int = 200
    regions_per_account: int = 4
    #: Account-regions holding anything to scan (the rest are probed).
    active_fraction: float = 0.10
    scan_minutes: int = rate_minutes(BY_NAME["scan_rate"].default)
    probe_hours: int = BY_NAME["org_probe_hours"].default
    #: Seconds of consumer time per work item (assumed until measured).
    seconds_per_scan: float = 2.0
    seconds_per_probe: float = 0.5
    seconds_per_regions: float = 0.5
    #: The fan-out: plan, send, sweep (assumed until measured).
    fanout_seconds: float = 5.0
    memory_gb: float = BY_NAME["scan_memory_mb"].default / 1024
    #: Log bytes per work item (one structured line, a few hundred bytes, rounded up).
    log_bytes_per_item: int = 1024


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


def hub_month(load: HubLoad | None = None) -> dict[str, object]:
    """The hub's monthly line items in USD, and the load behind them."""
    load = load or HubLoad()
    ticks = SECONDS_PER_MONTH / (load.scan_minutes * 60)
    items = per_tick(load)
    per_tick_items = sum(items.values())
    consumer_seconds = (
        items["scan"] * load.seconds_per_scan
        + items["probe"] * load.seconds_per_probe
        + items["regions"] * load.seconds_per_regions
    )
    # Send, receive and delete each take one request per ten messages; the pollers' empty
    # receives on an idle queue come on top.
    message_requests = 3 * math.ceil(per_tick_items / BATCH) * ticks
    idle_requests = IDLE_POLLERS * SECONDS_PER_MONTH / LONG_POLL_SECONDS
    gb_second = PRICES["lambda_gb_second_arm64"]
    month = {
        "sqs_requests": (message_requests + idle_requests) * SQS_FIFO_REQUEST,
        "consumer_lambda": ticks
        * (
            consumer_seconds * load.memory_gb * gb_second
            + per_tick_items * PRICES["lambda_request"]
        ),
        "fanout_lambda": ticks
        * (load.fanout_seconds * load.memory_gb * gb_second + PRICES["lambda_request"]),
        "kms_for_sqs": (1 + IDLE_POLLERS)
        * SECONDS_PER_MONTH
        / DATA_KEY_REUSE_SECONDS
        * PRICES["kms_request"],
        "alarms": ALARMS_ADDED * PRICES["alarm_month"],
        "logs": ticks
        * per_tick_items
        * load.log_bytes_per_item
        / 1e9
        * (PRICES["logs_ingest_gb"] + PRICES["logs_store_gb_month"] * 3),
    }
    return {
        "load": asdict(load),
        "per_tick": {k: round(v, 2) for k, v in items.items()},
        "sqs_requests_per_month": round(message_requests + idle_requests),
        "consumer_gb_seconds_per_month": round(ticks * consumer_seconds * load.memory_gb),
        "usd_per_month": {k: float(Decimal(v).quantize(Decimal("0.01"))) for k, v in month.items()},
        "usd_per_month_total": round(sum(month.values()), 2),
        "notes": (
            "Upper bounds: free tiers left out, work-item seconds assumed until measured. "
            "Not included: the ledger writes of each slice (measured by guard_bill for a "
            "single account) and the plans' updates, which the Python side's item sizes set."
        ),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(hub_month(), indent=2))
