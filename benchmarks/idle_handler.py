"""The idle-notebook guard's whole path, through the shipped handler: API calls per pass.

``benchmarks/idle_pass.py`` counts the judgement alone (the policy's reads). This runs the
actuator Lambda's ``handlers.act.process`` for the ``idle-notebooks`` guard on moto,
with the ledger table and the alert topic, over consecutive hourly passes of one fleet
of N single-GPU EC2 notebooks (a share of them idle), in dry-run and in enforce, and
counts every call the handler makes (``before-call``: one per API call, retries not
included), by operation.

Each pass is measured on its own. In dry-run every pass is the same report; in enforce
the first pass warns the idle ones, the pass at the deadline stops them, and the passes
after that see only the busy ones still running. Calls that an *action* needs (the
warning's tag, claim, record and alert; the stop, its claim and audit) are counted
apart from the pass's own calls: a pass that changes nothing makes only the latter.

moto's CloudWatch is swapped for an indexed ``get_metric_data`` (same answers, SEARCH
evaluated: ``tests.support.fake_cloudwatch.indexed_moto_cloudwatch``), so that a
1,000-notebook pass takes seconds.
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ACCOUNT = "123456789012"
USD_PER_1000_METRICS = Decimal("0.01")
RUNS_PER_MONTH = 730  # hourly: 8,760 h a year / 12
#: Outcomes that change something (a warning given, withdrawn or acted on): each costs
#: its own calls (the claim, the tag, the message, the record), which no batch can share.
ACTIONS = frozenset({"warned", "acted", "cleared", "notice-only"})


def measure(
    n: int = 1000, idle_share: float = 0.5, *, dry_run: bool = True, passes: int = 3
) -> dict[str, Any]:
    """``passes`` hourly passes of the handler over ``n`` notebooks, each counted."""
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }.items():
        os.environ.setdefault(k, v)
    import boto3
    from aws_lambda_powertools import Logger
    from moto import mock_aws

    from costguard import run_log, wiring
    from costguard.handlers import act
    from costguard.services import executor as executor_module
    from costguard_demo.plumbing import create_alert_channels, create_ledger_table
    from tests.support.fake_cloudwatch import indexed_moto_cloudwatch
    from tests.support.idle_fleet import idle_guard_settings, launch, notebook_tags, publish_ec2

    saved_logger = run_log.logger
    run_log.logger = Logger(service=f"idle-bench-{n}", stream=open(os.devnull, "w"))  # noqa: SIM115
    results: list[dict[str, Any]] = []
    try:
        with indexed_moto_cloudwatch() as series_read, mock_aws():
            session = boto3.Session(region_name="us-east-1")
            create_ledger_table(session, "ledger", "us-east-1")
            topic, _queue = create_alert_channels(session, "us-east-1")
            ids = launch(session, notebook_tags(), at=NOW - timedelta(hours=3), count=n)
            busy = set(ids[int(n * idle_share) :])
            for iid in ids:
                publish_ec2(
                    session,
                    iid,
                    NOW - timedelta(hours=2),
                    NOW + timedelta(hours=passes + 1),
                    gpu=(60.0 if iid in busy else 0.0,),
                )
            settings = idle_guard_settings(topic, dry_run=dry_run, account=ACCOUNT)
            calls: Counter[str] = Counter()
            executing: Counter[str] = Counter()
            phase = {"executor": False}

            def count(model: Any, **_: Any) -> None:
                name = f"{model.service_model.service_name}.{model.name}"
                calls[name] += 1
                if phase["executor"]:
                    executing[name] += 1

            session.events.register("before-call", count)
            run = executor_module.Executor.run

            def timed_run(self: Any, *args: Any, **kwargs: Any) -> Any:
                phase["executor"] = True
                try:
                    return run(self, *args, **kwargs)
                finally:
                    phase["executor"] = False

            executor_module.Executor.run = timed_run  # type: ignore[method-assign]
            try:
                for p in range(passes):
                    now = NOW + timedelta(hours=p)
                    calls.clear()
                    executing.clear()
                    series_read.clear()
                    # An hour on, a warm Lambda's catalog has expired (or it is a cold start).
                    wiring.CATALOG_CACHE.clear()
                    report = act.process({"time": now.isoformat()}, settings, session, clock=now)
                    total = sum(calls.values())
                    acts = sum(v for k, v in report.counts.items() if k in ACTIONS)
                    results.append(
                        {
                            "pass": p + 1,
                            "outcomes": dict(report.counts),
                            "api_calls": total,
                            "judgement_calls": total - sum(executing.values()),
                            "executor_calls": sum(executing.values()),
                            "actions": acts,
                            "metrics_read": sum(series_read),
                            "calls": dict(sorted(calls.items())),
                        }
                    )
            finally:
                executor_module.Executor.run = run  # type: ignore[method-assign]
    finally:
        run_log.logger = saved_logger
    return {
        "candidates": n,
        "idle_share": idle_share,
        "mode": "dry-run" if dry_run else "enforce",
        "passes": results,
        "max_calls_per_pass": max(r["api_calls"] for r in results),
        "max_calls_per_pass_without_actions": max(
            (r["api_calls"] for r in results if not r["actions"]), default=None
        ),
    }


def bill(measured: list[dict[str, Any]], episodes_per_notebook_day: int = 1) -> dict[str, Any]:
    """The CloudWatch bill a month (730 hourly passes; $0.01 per 1,000 metrics read), from
    the metrics each measured pass read through the handler.

    Dry-run re-reads an idle notebook in full every pass (it has no warning to wait on):
    the bill grows with the share of idle notebooks. Enforcing reads an idle notebook in
    full when it warns and once more at the deadline, then it is stopped: each idle
    episode costs the metrics of those two passes, whatever the share.
    """
    usd = lambda m: float((Decimal(m) * USD_PER_1000_METRICS / 1000).quantize(Decimal("0.01")))  # noqa: E731
    out: dict[str, Any] = {"passes_per_month": RUNS_PER_MONTH}
    for m in measured:
        if m["mode"] != "dry-run":
            continue
        steady = m["passes"][-1]["metrics_read"]
        out[f"dry_run_idle_{m['idle_share']:g}_usd_per_month"] = usd(steady * RUNS_PER_MONTH)
    enforce = {m["idle_share"]: m for m in measured if m["mode"] == "enforce"}
    if 0.0 in enforce and 1.0 in enforce:
        n = enforce[1.0]["candidates"]
        busy_pass = enforce[0.0]["passes"][-1]["metrics_read"]
        warn, stop = (p["metrics_read"] for p in enforce[1.0]["passes"][:2])
        per_episode = Decimal(warn + stop) / n
        episodes = n * episodes_per_notebook_day * 30
        out["enforce_busy_usd_per_month"] = usd(busy_pass * RUNS_PER_MONTH)
        out["enforce_metrics_per_idle_episode"] = float(per_episode)
        out["enforce_idle_episodes_per_month"] = episodes
        out["enforce_usd_per_month"] = usd(busy_pass * RUNS_PER_MONTH + per_episode * episodes)
    return out


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    measured = [
        measure(n, share, dry_run=mode) for mode in (True, False) for share in (0.0, 0.5, 1.0)
    ]
    print(json.dumps({"idle_handler": measured, "idle_handler_bill": bill(measured)}, indent=2))
