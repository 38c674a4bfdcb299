"""The ``costguard`` command: scan a real account, run the demo, refresh prices."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from costguard.names import Env


def _progress(enabled: bool) -> Any:
    def show(message: str) -> None:
        if enabled:
            print(f"costguard: {message}", file=sys.stderr, flush=True)

    return show


def _settings_for_scan(args: argparse.Namespace, session: Any) -> Any:
    from costguard.settings import Settings, SettingsError

    env = dict(os.environ)
    if args.region:
        env[Env.REGIONS] = ",".join(args.region)
    elif Env.REGIONS not in env:
        if not session.region_name:
            raise SettingsError("no region: pass --region, or set AWS_REGION / a profile region")
        env[Env.REGIONS] = session.region_name
    if args.table:
        env[Env.TABLE_NAME] = args.table
        # The deployed scan keys the ledger by account id; read the same rows.
        env[Env.SCOPE] = args.scope or _account(session)
    elif args.scope:
        env[Env.SCOPE] = args.scope
    if args.sagemaker_tags:
        env[Env.SAGEMAKER_TAGS] = args.sagemaker_tags
    return Settings.from_env(env)


def cmd_scan(args: argparse.Namespace) -> int:
    import boto3

    from costguard.report import report_json, report_table
    from costguard.wiring import CallCounter, build_scan_service

    session = boto3.Session(profile_name=args.profile) if args.profile else boto3.Session()
    settings = _settings_for_scan(args, session)
    counter = CallCounter()
    counter.attach(session)
    ledger = None
    if settings.table_name:
        from costguard.adapters.memory import ReadOnlyLedger
        from costguard.wiring import build_ledger

        # Read-only: the deployed ledger is read, never written, by a local scan.
        ledger = ReadOnlyLedger(build_ledger(settings, session))
    service = build_scan_service(
        settings,
        session,
        ledger=ledger,
        progress=_progress(not args.quiet and not args.json),
        counter=counter,
    )
    report = service.run(datetime.now(UTC))
    if args.json:
        json.dump(report_json(report), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(report_table(report))
    return 0


def cmd_alerts(args: argparse.Namespace) -> int:
    """Recent alerts, read back from a deployed CostGuard's ledger."""
    from datetime import timedelta

    import boto3

    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.settings import SettingsError

    if not args.table:
        raise SettingsError(
            "`costguard alerts` reads a deployed ledger: pass --table (the LedgerTable output)"
        )
    session = boto3.Session(profile_name=args.profile) if args.profile else boto3.Session()
    ledger = DynamoDbLedger(
        session.client("dynamodb", region_name=args.region or session.region_name), args.table
    )
    now = datetime.now(UTC)
    alerts = ledger.recent_alerts(
        args.scope or _account(session), now - timedelta(hours=args.hours), now
    )
    if args.json:
        json.dump(alerts, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    if not alerts:
        print(f"No alerts in the last {args.hours} h.")
    for a in alerts:
        print(
            f"{a['at'][:16]}  [{a['severity']:<8}] {a['kind']:<20} {a.get('project') or '-':<20} {a['title']}"
        )
    return 0


def _account(session: Any) -> str:
    return str(session.client("sts").get_caller_identity()["Account"])


def cmd_demo(args: argparse.Namespace) -> int:
    from costguard.demo.run import run_demo

    return run_demo(as_json=args.json, cycles=args.cycles)


def cmd_prices_refresh(args: argparse.Namespace) -> int:
    import boto3

    from costguard.adapters.catalog import bundled_catalog_path
    from costguard.adapters.pricing_api import refresh_catalog

    session = boto3.Session(profile_name=args.profile) if args.profile else boto3.Session()
    out = args.output or bundled_catalog_path()
    summary = refresh_catalog(
        session.client("pricing", region_name=args.pricing_region),
        regions=tuple(args.region or ("us-east-1", "us-west-2", "eu-west-1")),
        output=out,
        today=datetime.now(UTC).date(),
        progress=_progress(True),
    )
    print(json.dumps(summary, indent=2))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="costguard", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    scan = sub.add_parser("scan", help="read-only scan of the account boto3 resolves")
    scan.add_argument("--region", action="append", help="region to scan (repeatable)")
    scan.add_argument("--json", action="store_true", help="print the JSON report")
    scan.add_argument("--profile", help="AWS profile")
    scan.add_argument(
        "--table", help="ledger table to read and update (default: none, estimates only)"
    )
    scan.add_argument(
        "--sagemaker-tags",
        choices=["tagging-api", "per-resource"],
        help="how to read SageMaker tags (default tagging-api)",
    )
    scan.add_argument("--scope", help="ledger scope to read (default: the account id)")
    scan.add_argument("--quiet", action="store_true", help="no progress on stderr")
    scan.set_defaults(func=cmd_scan)

    alerts = sub.add_parser("alerts", help="recent alerts from a deployed CostGuard's ledger")
    alerts.add_argument("--table", help="the ledger table (stack output LedgerTable)")
    alerts.add_argument("--hours", type=int, default=24, help="how far back (default 24)")
    alerts.add_argument("--scope", help="ledger scope (default: the account id)")
    alerts.add_argument("--region", help="the ledger's region")
    alerts.add_argument("--profile", help="AWS profile")
    alerts.add_argument("--json", action="store_true")
    alerts.set_defaults(func=cmd_alerts)

    demo = sub.add_parser("demo", help="a whole guard cycle against an embedded AWS (moto server)")
    demo.add_argument("--json", action="store_true")
    demo.add_argument(
        "--cycles", type=int, default=6, help="scan cycles, 15 simulated minutes apart"
    )
    demo.set_defaults(func=cmd_demo)

    prices = sub.add_parser("prices", help="price catalog")
    prices_sub = prices.add_subparsers(dest="prices_command", required=True)
    refresh = prices_sub.add_parser(
        "refresh", help="rebuild the catalog from the AWS Price List API"
    )
    refresh.add_argument("--region", action="append")
    refresh.add_argument("--output", type=lambda s: __import__("pathlib").Path(s))
    refresh.add_argument("--profile")
    refresh.add_argument("--pricing-region", default="us-east-1")
    refresh.set_defaults(func=cmd_prices_refresh)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from botocore.exceptions import BotoCoreError, ClientError

    from costguard.settings import SettingsError

    try:
        code: int = args.func(args)
    except SettingsError as exc:
        print(f"costguard: {exc}", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as exc:
        print(f"costguard: AWS error: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
