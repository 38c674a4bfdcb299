"""Cold import time of each handler module (`python -X importtime`), boto3 excluded.

The handlers import boto3 lazily, so the figure is what a cold start pays before
the first AWS call; boto3/botocore are reported separately for reference.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

HANDLERS = [
    "costguard.handlers.scan",
    "costguard.handlers.slack_notifier",
    "costguard.handlers.refresh",
    "costguard.handlers.on_launch",
    "costguard.handlers.answer",
    "costguard.handlers.act",
]
EXCLUDED_ROOTS = ("boto3", "botocore", "s3transfer", "jmespath", "urllib3", "dateutil")


def import_time_us(module: str) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
    )
    self_us: dict[str, int] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_part, _cumulative, name = line.split("|")
        self_us[name.strip()] = int(self_part.split(":")[-1].strip())
    total = sum(self_us.values())
    excluded = sum(us for name, us in self_us.items() if name.split(".")[0] in EXCLUDED_ROOTS)
    return {"total_us": total, "boto_stack_us": excluded, "without_boto_us": total - excluded}


def measure(runs: int = 5) -> dict[str, Any]:
    results = {}
    for module in HANDLERS:
        samples = sorted(import_time_us(module)["without_boto_us"] for _ in range(runs))
        boto = import_time_us(module)["boto_stack_us"]
        results[module] = {
            "median_ms_without_boto3": round(samples[len(samples) // 2] / 1000, 1),
            "boto_stack_ms": round(boto / 1000, 1),
        }
    return results


if __name__ == "__main__":
    print(measure())
