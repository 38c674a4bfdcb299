"""How long the demos take, as a user runs them: ``costguard demo [--org] --json`` in a
child process, wall seconds (median of ``runs``). Measured here, not asserted in a test:
a timed test fails on a busy machine and proves nothing on an idle one."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from typing import Any


def _once(*extra: str) -> float:
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "costguard.cli", "demo", "--json", *extra],
        capture_output=True,
        check=True,
        timeout=600,
    )
    return time.monotonic() - started


def measure(runs: int = 3) -> dict[str, Any]:
    single = [_once() for _ in range(runs)]
    org = [_once("--org") for _ in range(runs)]
    return {
        "runs": runs,
        "demo_wall_seconds_median": round(statistics.median(single), 1),
        "demo_org_wall_seconds_median": round(statistics.median(org), 1),
    }
