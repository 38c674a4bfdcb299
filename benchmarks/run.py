"""Run every benchmark and write ``benchmarks/results.json`` (``make bench``)."""

from __future__ import annotations

import json
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import (
    answer_latency,
    api_calls,
    demo_wall,
    engine,
    guard_bill,
    hub_bill,
    idle_handler,
    idle_pass,
    import_time,
    launch_latency,
    org_guards,
    org_scale,
    report,
)


def main() -> None:
    results: dict[str, Any] = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "engine_100k": engine.measure(100_000),
        "api_calls": [
            api_calls.measure(100),
            api_calls.measure(1000),
            api_calls.measure(100, endpoints=10),
            api_calls.measure(100, endpoints=600),
        ],
        "handler_import": import_time.measure(),
        "guard_bill": [guard_bill.measure(100, 5), guard_bill.measure(1000, 20)],
        "idle_pass": [idle_pass.measure(1000, 0.0), idle_pass.measure(1000, 1.0)],
        "idle_pass_list": [
            idle_pass.measure(1000, 0.0, "list"),
            idle_pass.measure(1000, 1.0, "list"),
        ],
        "idle_bill": idle_pass.steady_state_bill(1000),
        "demos": demo_wall.measure(),
        # The idle guard's whole path through its handler (the judgement's calls above):
        # dry-run and enforce, busy, half idle and all idle, three hourly passes each.
        "idle_handler": [
            idle_handler.measure(1000, share, dry_run=dry_run)
            for dry_run in (True, False)
            for share in (0.0, 0.5, 1.0)
        ],
        # Organization mode: 200 accounts x 4 regions, 10 % holding accelerators.
        "org_scale": org_scale.measure(),
        # The month report (`costguard report --html`): page size and render time.
        "report": report.measure(),
        # The on-launch Lambda: event to SNS publish (p50, p99), calls and self-cost.
        "launch_latency": launch_latency.measure(200),
        # Answering a warning from Slack: the press's round trip, calls and self-cost.
        "answer_latency": answer_latency.measure(100),
    }
    results["idle_handler_bill"] = idle_handler.bill(results["idle_handler"])
    # The guards across that Organization (the act path), on the hub's load measured there.
    load = results["org_scale"]["bill"]["default_200_accounts"]["hub"]["load"]
    results["org_guards"] = org_guards.measure(hub_bill.HubLoad(**load))
    out = Path(__file__).with_name("results.json")
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
