"""``costguard demo``: a whole guard cycle against the embedded AWS.

1. start moto's server on a free loopback port (fake credentials, nothing real reachable);
2. create the ledger table and seed a realistic ML fleet through boto3 over HTTP;
3. run the scan handler's code for several cycles, 15 simulated minutes apart,
   with the fleet changing in between (a new p5 appears, a notebook stops);
4. print the final report, or ``--json``. Exit 1 on any error.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from costguard.names import Env

TABLE = "costguard-demo-ledger"
INTERVAL = timedelta(minutes=15)


def create_ledger_table(session: Any, name: str, region: str) -> None:
    ddb = session.client("dynamodb", region_name=region)
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.get_waiter("table_exists").wait(TableName=name)


def demo_environment(table: str) -> dict[str, str]:
    """What the CDK stack would set on the Lambda, for the embedded account."""
    return {
        Env.REGIONS: "us-east-1,us-west-2",
        Env.TABLE_NAME: table,
        Env.SCOPE: "123456789012",
        Env.DRY_RUN: "true",
        # moto has neither the tagging API for SageMaker nor SageMaker Studio.
        Env.SAGEMAKER_TAGS: "per-resource",
        Env.SAGEMAKER_STUDIO: "false",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }


def run_demo(*, as_json: bool = False, cycles: int = 4) -> int:
    import boto3

    from costguard.demo.fleet import (
        DEMO_SPOT_PRICES,
        PRIMARY,
        _run,
        _tags,
        backdate_instances,
        install_spot_prices,
        seed_fleet,
    )
    from costguard.demo.server import embedded_aws
    from costguard.domain.findings import FindingCode
    from costguard.report import report_json, report_table
    from costguard.settings import Settings

    def say(message: str) -> None:
        if not as_json:
            print(message, file=sys.stderr, flush=True)

    cycles = max(1, cycles)
    end = datetime.now(UTC).replace(second=0, microsecond=0)
    start = end - INTERVAL * (cycles - 1)
    saved = {k: os.environ.get(k) for k in demo_environment(TABLE)}
    try:
        with embedded_aws() as url:
            say(f"embedded AWS (moto server) listening on {url}")
            os.environ.update(demo_environment(TABLE))
            # Imported after the environment is set: Powertools reads it at import.
            from costguard.handlers.scan import process, summary

            session = boto3.Session()
            create_ledger_table(session, TABLE, PRIMARY)
            fleet = seed_fleet(session, start)
            install_spot_prices(DEMO_SPOT_PRICES, start)
            say(
                f"seeded {len(fleet.instances)} instances, {len(fleet.notebooks)} notebooks, "
                f"{len(fleet.endpoints)} endpoint, 1 EKS cluster in 2 regions"
            )
            settings = Settings.from_env(os.environ)
            history = []
            report = None
            for n in range(cycles):
                now = start + INTERVAL * n
                if n == cycles // 2 and cycles > 1:
                    # Mid-run, someone launches another p5 for the pre-training project ...
                    ec2 = session.client("ec2", region_name=PRIMARY)
                    new = _run(
                        ec2,
                        "p5.48xlarge",
                        _tags("llm-pretraining", owner="dave@example.com"),
                        "us-east-1b",
                    )[0]
                    backdate_instances(PRIMARY, {new: now - timedelta(minutes=5)})
                    # ... and the serving team stops its exploration notebook.
                    session.client("sagemaker", region_name=PRIMARY).stop_notebook_instance(
                        NotebookInstanceName="recsys-explore"
                    )
                    say(
                        "fleet changed: +1 p5.48xlarge (llm-pretraining), notebook recsys-explore stopped"
                    )
                report = process({"time": now.isoformat()}, settings, session)
                history.append(summary(report))
                say(
                    f"cycle {n + 1}/{cycles} at {now:%H:%M} UTC: {report.resource_count} resources, "
                    f"ledger {report.ledger.value}, {sum(report.api_calls.values())} API calls, "
                    f"{report.duration_s:.2f}s"
                )
            assert report is not None
            failures = [f for f in report.findings if f.code is FindingCode.SCAN_FAILED]
            if as_json:
                json.dump(
                    {"endpoint": url, "cycles": history, "report": report_json(report)},
                    sys.stdout,
                    indent=2,
                )
                sys.stdout.write("\n")
            else:
                print(report_table(report))
            if failures:
                print(f"costguard demo: {len(failures)} scan failures", file=sys.stderr)
                return 1
            return 0
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
