"""The ``costguard`` command: scan a real account, run the demo, refresh prices.

Exit codes, the same for every subcommand:

  0    done. A scan where some sources failed still exits 0: the report lists each
       one as a ``scan-failed`` finding, and stderr says which.
  1    AWS error: a call the command itself needs failed (no or expired credentials,
       access denied, throttling, no network); nothing is printed on stdout.
  2    bad input: an option, an environment variable, a profile, a table, a file.
  3    no data: the command finished but read nothing where it needed something.
       ``scan``: every source failed (the report is still printed). ``prices
       refresh``: a region returned no prices, so the catalog is not marked fresh.
  4    over budget: ``estimate train --project P`` found that the run would take the
       project's month forecast over its budget (the estimate is still printed).
  130  interrupted (Ctrl-C).
  141  stdout was closed early (``costguard scan --json | head``).

Errors are one line on stderr, ``costguard: ...``, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

# Shared with the subcommand modules (one copy under `python -m`); re-exported from here.
from costguard.cli_common import (
    EXIT_AWS,
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_NO_DATA,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
)
from costguard.cli_common import now as clock_now
from costguard.env import Env

if TYPE_CHECKING:
    from costguard.adapters.catalog import CatalogFile
    from costguard.services.scan import ScanReport
    from costguard.settings import Settings

#: Regions ``prices refresh`` fetches when none is given.
DEFAULT_PRICE_REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
#: The demo simulates 15 minutes a cycle: 1,000 cycles is ten days of history.
MAX_DEMO_CYCLES = 1000

#: Codes with which AWS rejects the credentials themselves, not a permission.
CREDENTIAL_CODES = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidSignatureException",
        "AuthFailure",
        "NoCredentialsError",
    }
)
NO_CREDENTIALS = (
    "no AWS credentials found: pass --profile, set AWS_PROFILE, run `aws sso login`, "
    "or export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
)
#: DynamoDB operations the ledger makes: their ResourceNotFoundException is a wrong --table.
_LEDGER_OPERATIONS = frozenset(
    {
        "GetItem",
        "Query",
        "BatchGetItem",
        "TransactGetItems",
        "PutItem",
        "UpdateItem",
        "BatchWriteItem",
        "TransactWriteItems",
    }
)
#: Services a scan calls that are not inventory: success there is not "something was read".
_NOT_INVENTORY = frozenset({"sts", "dynamodb"})


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``costguard scan: error: ...``) and exit 2."""

    def error(self, message: str) -> NoReturn:
        from costguard.settings import one_line

        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message, 300)}\n")


# -- argument types: each rejects bad input with a message that says what would do ----------


def region_name(value: str) -> str:
    from costguard.adapters.aws import unknown_region
    from costguard.settings import REGION

    # fullmatch and ASCII: REGION's `$` accepts a trailing newline, and `\d` any script's digits.
    if not (value.isascii() and REGION.fullmatch(value)):
        raise argparse.ArgumentTypeError(
            f"not an AWS region name: {value!r} (expected e.g. us-east-1)"
        )
    # Shaped like a region is not a region: us-east-9 would resolve to an endpoint nobody
    # runs (or one that answers with an HTML page), and fail every call of the command.
    unknown = unknown_region(value)
    if unknown:
        raise argparse.ArgumentTypeError(unknown)
    return value


#: DynamoDB's own rule for table names, or a table ARN (which DynamoDB also accepts).
TABLE_NAME = re.compile(
    r"[A-Za-z0-9_.-]{3,255}|arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}"
)


def table_name(value: str) -> str:
    if not TABLE_NAME.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"not a DynamoDB table name: {value!r} (3 to 255 of A-Z a-z 0-9 _ . -, "
            "or a table ARN; the stack's LedgerTable output)"
        )
    return value


def _bounded(what: str, low: int, high: int, why: str = "") -> Callable[[str], int]:
    def parse(value: str) -> int:
        text = value.strip()
        if not re.fullmatch(r"[0-9]+", text) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(
                f"must be a whole number of {what} from {low} to {high}{why}, got {value!r}"
            )
        return int(text)

    return parse


def _alert_days() -> int:
    from costguard.adapters.dynamodb import ALERT_TTL

    return ALERT_TTL.days


def alert_hours(value: str) -> int:
    """1 hour up to the alert log's retention: older alerts are gone, so asking is a mistake."""
    days = _alert_days()
    return _bounded("hours", 1, days * 24, f" (alerts are kept {days} days)")(value)


demo_cycles = _bounded("cycles", 1, MAX_DEMO_CYCLES)


# -- shared plumbing --------------------------------------------------------------------------


def _progress(enabled: bool) -> Callable[[str], None]:
    def show(message: str) -> None:
        if enabled:
            print(f"costguard: {message}", file=sys.stderr, flush=True)

    return show


def _session(args: argparse.Namespace) -> Any:
    import boto3

    return boto3.Session(profile_name=args.profile) if args.profile else boto3.Session()


def _require_credentials(session: Any) -> None:
    """Fail once, clearly, before any work: not once per region and service, in threads."""
    credentials = session.get_credentials()
    if credentials is None:
        raise CommandError(NO_CREDENTIALS, EXIT_AWS)
    # Resolves refreshable credentials (SSO, assume-role) now: an expired SSO token fails here.
    credentials.get_frozen_credentials()


def _default_region(session: Any) -> str | None:
    # botocore reads AWS_DEFAULT_REGION and the profile, not AWS_REGION; the Lambdas and
    # the AWS CLI v2 do read AWS_REGION, so the CLI does too.
    region: str | None = session.region_name or os.environ.get("AWS_REGION") or None
    return region


def _account(session: Any, region: str | None) -> str:
    """The account id, which the deployed scan uses as the ledger scope."""
    from costguard.adapters.aws import AWS_ERRORS

    try:
        return str(session.client("sts", region_name=region).get_caller_identity()["Account"])
    except AWS_ERRORS as exc:
        code, message = failure(exc) or (EXIT_AWS, str(exc))
        raise CommandError(
            f"{message}; pass --scope (the ledger scope: the account id) to skip this lookup", code
        ) from exc


def _missing_table(exc: Exception, table: str, region: str) -> CommandError | None:
    from botocore.exceptions import ClientError

    if (
        isinstance(exc, ClientError)
        and exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException"
        and exc.operation_name in _LEDGER_OPERATIONS
    ):
        return CommandError(
            f"ledger table {table!r} not found in {region}: pass the stack's LedgerTable "
            "output as --table, in the region the stack is deployed to"
        )
    return None


class InventoryCalls:
    """Which inventory API calls AWS answered, and with which error codes.

    A failing source is a ``scan-failed`` finding, but a source can also fail piece by
    piece (SageMaker reads notebooks, endpoints and jobs separately), so findings alone
    cannot say whether anything at all was read. Calls that succeeded can.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.succeeded = 0
        self.error_codes: Counter[str] = Counter()

    def attach(self, session: Any) -> None:
        session.events.register("after-call", self._after_call)
        session.events.register("after-call-error", self._after_error)

    def _after_error(self, exception: BaseException, event_name: str, **_: Any) -> None:
        """An answer that is no answer (an HTML page) raises before ``after-call``."""
        from costguard.adapters.aws import HtmlAnswerError

        service = event_name.split(".")[1] if event_name.count(".") >= 2 else ""
        if isinstance(exception, HtmlAnswerError) and service not in _NOT_INVENTORY:
            with self._lock:
                self.error_codes[f"HTTP {exception.status}"] += 1

    def _after_call(self, http_response: Any, parsed: Any, model: Any, **_: Any) -> None:
        if model.service_model.service_name in _NOT_INVENTORY or http_response is None:
            return
        with self._lock:
            if http_response.status_code < 300:
                self.succeeded += 1
            else:
                error = parsed.get("Error", {}) if isinstance(parsed, dict) else {}
                self.error_codes[str(error.get("Code") or http_response.status_code)] += 1


def _listing(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def scan_outcome(report: ScanReport, calls: InventoryCalls) -> tuple[int, str | None]:
    """Exit code and stderr line for a finished scan.

    Every source failed (and so nothing was read) is exit 3: an empty report must not
    look like an empty account. Some failed is exit 0 with a warning: one opted-out
    region or one missing permission would otherwise fail every scheduled run, and the
    report already lists each failed source as a ``scan-failed`` finding.
    """
    from costguard.domain.findings import FindingCode, Severity

    failed = sorted(
        {
            f.resource
            for f in report.findings
            if f.code is FindingCode.SCAN_FAILED and f.severity is Severity.ERROR
        }
    )
    if failed and calls.succeeded == 0:
        codes = sorted(calls.error_codes)
        hint = (
            "; AWS rejected the credentials: refresh them (e.g. `aws sso login`) and retry"
            if codes and set(codes) <= CREDENTIAL_CODES
            else ""
        )
        return EXIT_NO_DATA, (
            f"every source failed, nothing was read ({_listing(failed)}"
            + (f"; AWS answered {', '.join(codes)}" if codes else "")
            + f"){hint}; see the scan-failed findings"
        )
    if failed:
        return EXIT_OK, (
            f"warning: {len(failed)} source{'s' if len(failed) > 1 else ''} failed and "
            f"{'are' if len(failed) > 1 else 'is'} missing from this scan: {_listing(failed)}"
        )
    return EXIT_OK, None


# -- scan ----------------------------------------------------------------------------------


#: ``scan`` option -> the Settings field it sets, so a validation error names the option.
SCAN_OPTIONS: dict[str, str] = {
    "regions": "--region",
    "table_name": "--table",
    "scope": "--scope",
    "sagemaker_tags": "--sagemaker-tags",
}
#: The environment variable each of those options overrides (an option beats the environment).
_OVERRIDES: dict[str, str] = {
    "regions": Env.REGIONS,
    "table_name": Env.TABLE_NAME,
    "scope": Env.SCOPE,
    "sagemaker_tags": Env.SAGEMAKER_TAGS,
}
#: Where a scan's region comes from when neither --region nor COSTGUARD_REGIONS is given.
_DEFAULT_REGION = "the default region (AWS_REGION, AWS_DEFAULT_REGION or the profile's region)"
#: Stands in for the regions while the environment is read without any; never used to scan.
_STAND_IN_REGION = "us-east-1"


def _scan_options(args: argparse.Namespace) -> dict[str, Any]:
    """The Settings fields the command line sets: only the options actually given."""
    given: dict[str, Any] = {}
    if args.region:
        given["regions"] = tuple(args.region)
    if args.table:
        given["table_name"] = args.table
    if args.scope:
        given["scope"] = args.scope
    if args.sagemaker_tags:
        given["sagemaker_tags"] = args.sagemaker_tags
    return given


def _settings_for_scan(
    args: argparse.Namespace, session: Any, environ: Mapping[str, str] | None = None
) -> Settings:
    """Settings from the options, over the ``COSTGUARD_*`` variables for what has no option.

    The environment configures a local scan as it configures the Lambda (project tag keys,
    projects, SageMaker Studio, ...), read by :meth:`Settings.from_env` so its errors name the
    variable. The options are typed values, validated by ``Settings(...)`` itself, and their
    errors name the option: nothing is turned back into an environment variable.
    """
    from pydantic import ValidationError

    from costguard.adapters.aws import unknown_region
    from costguard.settings import Settings, SettingsError, validation_problems

    environ = os.environ if environ is None else environ
    options = _scan_options(args)
    overridden = {_OVERRIDES[field] for field in options}
    env = {k: v for k, v in environ.items() if k.startswith("COSTGUARD_") and k not in overridden}
    names = dict(SCAN_OPTIONS)
    if "regions" not in options and Env.REGIONS not in env:
        region = _default_region(session)
        if not region:
            raise CommandError("no region: pass --region, or set AWS_REGION / a profile region")
        options["regions"] = (region,)
        names["regions"] = _DEFAULT_REGION
    if Env.REGIONS in env:
        base = Settings.from_env(env)
    else:
        # from_env insists on regions; the stand-in satisfies it, and options["regions"]
        # (always set on this path) replaces it below.
        base = Settings.from_env({**env, Env.REGIONS: _STAND_IN_REGION})
    try:
        settings = Settings.model_validate({**dict(base), **options})
    except ValidationError as exc:
        raise SettingsError.of(validation_problems(exc, names)) from None
    # The regions that got here without --region's check (COSTGUARD_REGIONS, the default
    # region), named by where they came from.
    for region in settings.regions:
        unknown = unknown_region(region)
        if unknown:
            raise CommandError(
                f"{names['regions'] if 'regions' in options else Env.REGIONS}: {unknown}"
            )
    return settings


# -- the price catalog: packaged, refreshed by the user, or named --------------------------


def user_catalog_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where ``prices refresh`` writes by default and ``scan`` looks: the user's data dir.

    ``$XDG_DATA_HOME/costguard/prices.json``, else ``~/.local/share/costguard/prices.json``
    (the XDG base directory rules: a relative ``XDG_DATA_HOME`` is ignored). None when there
    is no home directory to speak of. Never the installed package, which may be read-only,
    shared by other users, and is replaced by the next upgrade.
    """
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_DATA_HOME", "")
    if base and os.path.isabs(base):
        return Path(base) / "costguard" / "prices.json"
    try:
        home = Path.home()
    except (RuntimeError, KeyError):  # no HOME and no password-database entry
        return None
    if not home.is_absolute():
        return None
    return home / ".local" / "share" / "costguard" / "prices.json"


def _newer(candidate: CatalogFile, than: CatalogFile) -> bool:
    """Prices checked later win; on the same day, the later version (a partial refresh)."""
    return (candidate.as_of, candidate.version) > (than.as_of, than.version)


def _describe(catalog: CatalogFile) -> str:
    return f"version {catalog.version}, as of {catalog.as_of}"


def choose_catalog(explicit: Path | None, warn: Callable[[str], None]) -> tuple[CatalogFile, str]:
    """The catalog a scan prices with, and a line saying which one and why.

    ``--catalog PATH`` always wins (and a broken one is bad input). Otherwise the catalog
    ``prices refresh`` wrote to :func:`user_catalog_path` is used when it is newer than the
    packaged one; a broken refreshed catalog is a warning, not a failed scan, because the
    packaged prices are still there and the user did not name that file.
    """
    chosen, which, _source = _choose_catalog(explicit, warn)
    return chosen, which


def _choose_catalog(
    explicit: Path | None, warn: Callable[[str], None]
) -> tuple[CatalogFile, str, str]:
    """:func:`choose_catalog`, and whether the file chosen is the packaged one ("bundled")."""
    from costguard.adapters.catalog import CatalogError, bundled_catalog_path, read_catalog_file
    from costguard.domain.catalog_merge import BUNDLED
    from costguard.settings import one_line

    if explicit is not None:
        named = read_catalog_file(explicit)
        return named, f"prices from {explicit} ({_describe(named)}; --catalog)", "file"
    packaged = read_catalog_file()
    used = f"prices from the packaged catalog {bundled_catalog_path()} ({_describe(packaged)})"
    refreshed_path = user_catalog_path()
    if refreshed_path is None or not os.path.exists(refreshed_path):
        return packaged, used, BUNDLED
    try:
        refreshed = read_catalog_file(refreshed_path)
    except CatalogError as exc:
        warn(
            one_line(
                f"warning: {exc}; using the packaged catalog (`costguard prices refresh` "
                "rebuilds it)",
                1000,
            )
        )
        return packaged, used, BUNDLED
    if _newer(refreshed, packaged):
        return (
            refreshed,
            f"prices from {refreshed_path} ({_describe(refreshed)}; refreshed)",
            "file",
        )
    return packaged, f"{used}; {refreshed_path} ({_describe(refreshed)}) is not newer", BUNDLED


def cmd_scan(args: argparse.Namespace) -> int:
    from costguard.adapters.catalog import rate_book
    from costguard.domain.catalog_merge import CatalogInUse
    from costguard.report import report_json, report_table
    from costguard.settings import one_line
    from costguard.wiring import CallCounter, build_scan_service, clients_for

    session = _session(args)
    settings = _settings_for_scan(args, session)
    catalog, which, source = _choose_catalog(args.catalog, _progress(True))
    _require_credentials(session)
    if getattr(args, "accounts", None) or getattr(args, "org", False):
        return _scan_accounts(args, session, settings, catalog.to_domain(), which)
    if settings.table_name and not args.scope:
        # The deployed scan keys the ledger by account id; read the same rows.
        settings = settings.model_copy(update={"scope": _account(session, settings.regions[0])})
    counter = CallCounter()
    counter.attach(session)
    calls = InventoryCalls()
    calls.attach(session)
    ledger = None
    if settings.table_name:
        from costguard.adapters.memory import ReadOnlyLedger
        from costguard.wiring import build_ledger

        # Read-only: the deployed ledger is read, never written, by a local scan.
        ledger = ReadOnlyLedger(build_ledger(settings, clients_for(settings, session)))
    service = build_scan_service(
        settings,
        clients_for(settings, session),
        ledger=ledger,
        catalog=catalog.to_domain(),
        progress=_progress(not args.quiet and not args.json),
        counter=counter,
        # Which catalog it is, so that the scan says when its prices are stale.
        catalog_in_use=CatalogInUse(source, catalog.version, rate_book(catalog)),
    )
    # Which prices the numbers rest on is part of the answer, not progress: said with --json too.
    _progress(not args.quiet)(one_line(which, 1000))
    try:
        report = service.run(clock_now())
    except Exception as exc:
        # build_ledger's choice of region, named so the user can check it.
        region = session.region_name or settings.regions[0]
        missing = _missing_table(exc, settings.table_name or "", region)
        if missing is None:
            raise
        raise missing from None
    if args.json:
        json.dump(report_json(report), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(report_table(report))
    sys.stdout.flush()
    code, message = scan_outcome(report, calls)
    if message:
        print(f"costguard: {message}", file=sys.stderr)
    return code


def _scan_accounts(
    args: argparse.Namespace, session: Any, settings: Settings, catalog: Any, which: str
) -> int:
    """``scan --accounts`` / ``scan --org``: each account through its member role (cli_org)."""
    from costguard.cli_org import discover_accounts, print_accounts, scan_accounts
    from costguard.settings import one_line

    option = "--org" if args.org else "--accounts"
    if settings.table_name:
        raise CommandError(f"{option} scans with an in-memory ledger: drop --table")
    accounts = args.accounts
    if args.org:
        accounts = discover_accounts(
            session, args.opt_out_tag, clock_now(), progress=_progress(not args.quiet)
        )
    _progress(not args.quiet)(one_line(which, 1000))
    results = scan_accounts(
        session,
        accounts,
        settings,
        catalog,
        clock_now(),
        role_name=args.role_name,
        workers=args.account_workers,
        progress=_progress(not args.quiet),
    )
    return print_accounts(results, args.json)


def account_list(text: str) -> list[str]:
    """``111111111111,222222222222`` -> the account ids, each checked, repeats dropped."""
    from costguard.handlers.org import parse_accounts

    try:
        accounts = parse_accounts(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not accounts:
        raise argparse.ArgumentTypeError("no account id given")
    return accounts


# -- alerts --------------------------------------------------------------------------------


def _deployed_ledger(args: argparse.Namespace, command: str) -> tuple[Any, str, str]:
    """The deployed ledger the command reads: (ledger, scope, region). Never writes."""
    from costguard.adapters.dynamodb import DynamoDbLedger

    if not args.table:
        raise CommandError(
            f"`costguard {command}` reads a deployed ledger: pass --table (the LedgerTable output)"
        )
    session = _session(args)
    region = args.region or _default_region(session)
    if not region:
        raise CommandError(
            "no region: pass --region (the ledger's region), or set AWS_REGION / a profile region"
        )
    _require_credentials(session)
    ledger = DynamoDbLedger(session.client("dynamodb", region_name=region), args.table)
    return ledger, args.scope or _account(session, region), region


def cmd_alerts(args: argparse.Namespace) -> int:
    """Recent alerts, read back from a deployed CostGuard's ledger."""
    from datetime import timedelta

    ledger, scope, region = _deployed_ledger(args, "alerts")
    now = clock_now()
    try:
        alerts = ledger.recent_alerts(scope, now - timedelta(hours=args.hours), now)
    except Exception as exc:
        missing = _missing_table(exc, args.table, region)
        if missing is None:
            raise
        raise missing from None
    if args.json:
        json.dump(alerts, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return EXIT_OK
    if not alerts:
        print(f"No alerts in the last {args.hours} h.")
    for a in alerts:
        print(
            f"{str(a.get('at', ''))[:16]:<16}  [{a.get('severity', '?'):<8}] "
            f"{a.get('kind', '?'):<20} {a.get('project') or '-':<20} {a.get('title', '')}"
        )
    return EXIT_OK


def month_name(value: str) -> str:
    if not re.fullmatch(r"[0-9]{4}-(0[1-9]|1[0-2])", value):
        raise argparse.ArgumentTypeError(f"must be a month like 2026-11, got {value!r}")
    return value


def cmd_actions(args: argparse.Namespace) -> int:
    """The audit trail: what CostGuard did, or would have done in dry-run, and why."""
    from costguard.settings import one_line

    ledger, scope, region = _deployed_ledger(args, "actions")
    month = args.month or f"{clock_now():%Y-%m}"
    try:
        events = ledger.audit_trail(scope, month)
    except Exception as exc:
        missing = _missing_table(exc, args.table, region)
        if missing is None:
            raise
        raise missing from None
    rows = [
        {
            "at": e.at.isoformat(),
            "action": e.action,
            "outcome": e.outcome,
            "resource": e.resource,
            **dict(e.details),
        }
        for e in events
    ]
    if args.json:
        json.dump(rows, sys.stdout, indent=2, ensure_ascii=False, default=str)
        sys.stdout.write("\n")
        return EXIT_OK
    if not rows:
        print(f"No actions recorded in {month}.")
    for r in rows:
        print(
            f"{r['at'][:16]:<16}  {r['outcome']:<17} {r['action']:<16} "
            f"{one_line(str(r.get('project') or '-'), 20):<20} {one_line(r['resource'], 60)}  "
            f"${r.get('usd_per_month_saved', '0')}/month  {one_line(str(r.get('reason', '')), 80)}"
        )
    return EXIT_OK


# -- demo ----------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    from costguard_demo.run import ORG_TICKS, run_demo

    if args.org and args.cycles is not None and args.cycles not in ORG_TICKS:
        # Regions, then probes, then scans: fewer times would not reach a scan.
        raise CommandError(
            f"--cycles with --org: from {ORG_TICKS.start} to {ORG_TICKS.stop - 1} scheduled "
            f"times, got {args.cycles}"
        )
    return run_demo(as_json=args.json, cycles=args.cycles, org=args.org)


# -- prices refresh ------------------------------------------------------------------------


def _writable_output(out: Path) -> Path:
    """Checked before any API call: a refresh that cannot be saved should not be fetched."""
    if out.is_dir():
        raise CommandError(
            f"--out {out} is a directory; pass a file path such as {out}/prices.json"
        )
    parent = out.parent
    if not parent.is_dir():
        raise CommandError(f"--out {out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise CommandError(
            f"cannot write the price catalog to {out}: permission denied; pass --out PATH "
            "(a file you can write) and scan with --catalog PATH"
        )
    return out


def _default_output() -> Path:
    """The user's catalog (see :func:`user_catalog_path`), its directory made if need be."""
    out = user_catalog_path()
    if out is None:
        raise CommandError(
            "no home directory to keep the refreshed price catalog in: set XDG_DATA_HOME or "
            "HOME, or pass --out PATH (and scan with --catalog PATH)"
        )
    try:
        out.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(
            f"cannot create {out.parent} for the price catalog: {exc.strerror or exc}; "
            "pass --out PATH (and scan with --catalog PATH)"
        ) from None
    return out


def _outside_the_package(out: Path) -> Path:
    """The installed package is never written: it may be read-only or shared, an upgrade
    replaces it, and a deployed guard reads its catalog from the store, not from there."""
    import costguard

    package = Path(costguard.__file__).resolve().parent
    target = Path(os.path.realpath(out))
    if target == package or package in target.parents:
        raise CommandError(
            f"--out {out} is inside the installed costguard package ({package}), which is "
            "never written: pass another path (and scan with --catalog PATH), or --table NAME "
            "to refresh a deployed guard's catalog"
        )
    return out


def _hold_pct(value: str) -> Any:
    from decimal import Decimal, InvalidOperation

    try:
        pct = Decimal(value.strip())
    except InvalidOperation:
        pct = Decimal(-1)
    if not (pct.is_finite() and 1 <= pct <= 1000):
        raise argparse.ArgumentTypeError(f"must be a percentage from 1 to 1000, got {value!r}")
    return pct


def _table_region(args: argparse.Namespace, session: Any) -> str:
    region = args.table_region or _default_region(session)
    if not region:
        raise CommandError(
            "no region for --table: pass --table-region (the stack's region), or set "
            "AWS_REGION / a profile region"
        )
    return str(region)


def _refresh_outcome(summary: dict[str, Any], where: str, progress: Callable[[str], None]) -> int:
    print(json.dumps(summary, indent=2))
    sys.stdout.flush()
    failed = summary.get("failed_regions") or {}
    empty = summary["regions_without_prices"]
    wrote = (
        "the other regions' prices were written" if summary["written"] else "nothing was written"
    )
    for line in summary.get("held_for_review", []):
        _progress(True)(f"held for review: {line}")
    for line in summary.get("rejected_answers", []):
        _progress(True)(f"not taken as a price: {line}")
    if summary.get("stored_catalog_problem"):
        _progress(True)(
            f"warning: {summary['stored_catalog_problem']}; started from the packaged catalog"
        )
    if failed:
        _progress(True)(
            "could not read "
            + "; ".join(f"{r} ({why})" for r, why in sorted(failed.items()))
            + f": left as they were; {wrote}"
        )
        return EXIT_AWS
    if empty:
        # A failure, so said even with --quiet.
        _progress(True)(
            f"no prices returned for {', '.join(empty)} (not a region the Price List API "
            f"knows?): the catalog is not marked fresh, as_of stays {summary['as_of']}; {wrote}"
        )
        return EXIT_NO_DATA
    if summary["written"]:
        progress(f"wrote {where}: version {summary['version']}, as of {summary['as_of']}")
    else:
        progress(f"{where} is already current: version {summary['version']}")
    return EXIT_OK


def cmd_prices_refresh(args: argparse.Namespace) -> int:
    from costguard.adapters.catalog import read_catalog_file
    from costguard.config_spec import BY_NAME
    from costguard.wiring.refresh import refresh_catalog

    session = _session(args)
    hold_pct = (
        args.hold_pct if args.hold_pct is not None else BY_NAME["price_change_hold_pct"].default
    )
    regions = tuple(dict.fromkeys(args.region or DEFAULT_PRICE_REGIONS))
    progress = _progress(not args.quiet)
    if args.table:
        return _refresh_table(args, session, regions, hold_pct, progress)
    out = _writable_output(_outside_the_package(args.output or _default_output()))
    previous = read_catalog_file()
    _require_credentials(session)
    progress(f"refreshing the price catalog at {out}")
    summary = refresh_catalog(
        session.client("pricing", region_name=args.pricing_region),
        regions=regions,
        output=out,
        today=clock_now().date(),
        progress=progress,
        previous=previous,
        hold_pct=hold_pct,
    )
    return _refresh_outcome(summary, str(out), progress)


def _refresh_table(
    args: argparse.Namespace,
    session: Any,
    regions: tuple[str, ...],
    hold_pct: Any,
    progress: Callable[[str], None],
) -> int:
    """Refresh a deployed guard's stored catalog, as its weekly Lambda does."""
    from costguard.adapters.aws import RETRY_CONFIG
    from costguard.adapters.catalog import CatalogDocuments
    from costguard.adapters.catalog_store import DynamoDbCatalogStore
    from costguard.adapters.pricing_api import PriceListApi
    from costguard.services.price_refresh import PriceRefresh

    region = _table_region(args, session)
    _require_credentials(session)
    progress(f"refreshing the price catalog stored in {args.table} ({region})")
    refresh = PriceRefresh(
        DynamoDbCatalogStore(session.client("dynamodb", region_name=region), args.table),
        PriceListApi(
            session.client("pricing", region_name=args.pricing_region, config=RETRY_CONFIG)
        ),
        CatalogDocuments(),
        hold_pct=hold_pct,
        progress=progress,
    )
    try:
        outcome = refresh.run(regions, clock_now())
    except Exception as exc:
        missing = _missing_table(exc, args.table, region)
        if missing is None:
            raise
        raise missing from None
    summary = {"table": args.table, **outcome.summary()}
    return _refresh_outcome(summary, f"table {args.table}", progress)


# -- prices show ---------------------------------------------------------------------------


def _matches(name: str, wanted: str | None) -> bool:
    """``--type g5.xlarge`` is that type (``ml.`` optional); ``--type g5`` is its family."""
    if wanted is None:
        return True
    bare, want = name.removeprefix("ml."), wanted.removeprefix("ml.")
    return bare == want if "." in want else bare.split(".")[0] == want


def cmd_prices_show(args: argparse.Namespace) -> int:
    """The rates the guard will use, and where each came from."""
    from costguard.adapters.catalog import rate_book
    from costguard.domain.catalog_merge import SECTIONS, CatalogInUse

    if args.table:
        from costguard.adapters.catalog_store import CatalogReader, DynamoDbCatalogStore

        session = _session(args)
        region = _table_region(args, session)
        _require_credentials(session)
        reader = CatalogReader(
            DynamoDbCatalogStore(session.client("dynamodb", region_name=region), args.table)
        )
        try:
            _catalog, in_use = reader.read()
        except Exception as exc:
            missing = _missing_table(exc, args.table, region)
            raise (missing or exc) from None
        which = f"prices from the {in_use.describe()} in table {args.table} (what the guard uses)"
        if in_use.problem:
            _progress(True)(f"warning: {in_use.problem}")
    else:
        chosen, which = choose_catalog(args.catalog, _progress(True))
        in_use = CatalogInUse("file", chosen.version, rate_book(chosen))
    book = in_use.book
    rows = []
    for section in SECTIONS:
        for region, rates in sorted(book.rates.get(section, {}).items()):
            if args.region and region != args.region:
                continue
            for name, usd in sorted(rates.items()):
                if not _matches(name, args.type):
                    continue
                src = book.source_of(section, region, name)
                assert src is not None
                rows.append(
                    {
                        "service": section,
                        "region": region,
                        "name": name,
                        "usd": str(usd),
                        "unit": "GB-month" if section == "ebs_gb_month" else "hour",
                        "source": src.source,
                        "as_of": src.as_of.isoformat(),
                        "kept_since": src.kept_since.isoformat() if src.kept_since else None,
                        "held_usd": str(src.held_usd) if src.held_usd is not None else None,
                        "retired": name in book.retired or name.removeprefix("ml.") in book.retired,
                    }
                )
    if args.json:
        json.dump(
            {
                "catalog": which,
                "version": in_use.version,
                "as_of": book.as_of.isoformat(),
                "rates": rows,
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
        return EXIT_OK if rows else EXIT_NO_DATA
    print(f"{which[:1].upper()}{which[1:]}:")
    for r in rows:
        notes = [
            *(
                [f"kept since {r['kept_since']} (the API stopped returning it)"]
                if r["kept_since"]
                else []
            ),
            *([f"${r['held_usd']} held for review"] if r["held_usd"] else []),
            *(["retired"] if r["retired"] else []),
        ]
        print(
            f"{r['service']:<12} {r['region']:<14} {r['name']:<22} ${r['usd']:>10}/{r['unit']:<8} "
            f"{r['source']:<15} as of {r['as_of']}" + (f"  ({'; '.join(notes)})" if notes else "")
        )
    if not rows:
        _progress(True)("no rate matches --type/--region in this catalog")
        return EXIT_NO_DATA
    return EXIT_OK


# -- the parser and main -------------------------------------------------------------------


def package_version() -> str:
    """The installed distribution's version; the source tree's when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("costguard")
    except PackageNotFoundError:
        from costguard import __version__

        return __version__


class _VersionAction(argparse.Action):
    """``--version``, looked up only when asked: the other commands never pay for it."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("help", "print the version and exit")
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, **kwargs
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        print(f"costguard {package_version()}")
        parser.exit(EXIT_OK)


class _Flags:
    """The flags several commands share, spelled, validated and documented once.

    Each is a parent parser (``parents=[...]``): a command takes the ones that mean
    something to it, and each flag means the same wherever it appears.
    """

    def __init__(self) -> None:
        self.profile = self._parent()
        self.profile.add_argument(
            "--profile",
            metavar="NAME",
            help="AWS profile from ~/.aws/config (default: AWS_PROFILE, else boto3's chain)",
        )
        self.region = self._parent()
        self.region.add_argument(
            "--region",
            type=region_name,
            metavar="REGION",
            help="AWS region, e.g. us-east-1 (default: AWS_REGION, AWS_DEFAULT_REGION or the "
            "profile's region)",
        )
        self.regions = self._parent()
        self.regions.add_argument(
            "--region",
            action="append",
            type=region_name,
            metavar="REGION",
            help="AWS region, e.g. us-east-1; repeat for several (default: see above)",
        )
        self.json = self._parent()
        self.json.add_argument(
            "--json", action="store_true", help="print JSON on stdout instead of text"
        )
        self.quiet = self._parent()
        self.quiet.add_argument(
            "--quiet",
            action="store_true",
            help="no progress on stderr (warnings and errors are still printed)",
        )

    @staticmethod
    def _parent() -> _Parser:
        return _Parser(add_help=False)


def build_parser() -> argparse.ArgumentParser:
    """The top-level `costguard` parser, for tools that read it (the docs test)."""
    return parser()


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="costguard",
        description=(__doc__ or "").split("\n\n", 1)[0],
        epilog=(
            "exit codes: 0 ok, 1 AWS error, 2 bad input, 3 no data, 4 over budget, "
            "130 interrupted, "
            "141 stdout closed (see the README)"
        ),
    )
    p.add_argument("--version", action=_VersionAction)
    flags = _Flags()
    sub = p.add_subparsers(dest="command", required=True)

    scan = sub.add_parser(
        "scan",
        parents=[flags.profile, flags.regions, flags.json, flags.quiet],
        help="read-only scan of the account boto3 resolves",
        description=(
            "Read-only scan of the account boto3 resolves. Regions: every --region, else "
            "COSTGUARD_REGIONS, else the default region (AWS_REGION, AWS_DEFAULT_REGION or "
            "the profile's). Other COSTGUARD_* variables apply as they do to the Lambda; "
            "an option beats its variable."
        ),
    )
    scan.add_argument(
        "--table",
        type=table_name,
        help="deployed ledger table to read, never write (default: none, estimates only)",
    )
    scan.add_argument(
        "--sagemaker-tags",
        choices=["tagging-api", "per-resource"],
        help="how to read SageMaker tags (default tagging-api)",
    )
    scan.add_argument("--scope", help="ledger scope to read (default: the account id)")
    who = scan.add_mutually_exclusive_group()
    who.add_argument(
        "--accounts",
        type=account_list,
        metavar="IDS",
        help="scan these accounts (comma-separated) through their CostGuard member role",
    )
    who.add_argument(
        "--org",
        action="store_true",
        help="scan every ACTIVE account of the Organization (ListAccounts with your "
        "credentials: the management or a delegated administrator account), except those "
        "tagged costguard:opt-out=true, through their CostGuard member role",
    )
    scan.add_argument(
        "--opt-out-tag",
        default="costguard:opt-out",
        metavar="KEY",
        help="with --org: the account tag whose value true leaves an account out "
        "(default costguard:opt-out)",
    )
    scan.add_argument(
        "--role-name",
        default="costguard-member-read",
        help="the member role --accounts/--org assumes (default costguard-member-read)",
    )
    scan.add_argument(
        "--account-workers",
        type=int,
        default=4,
        metavar="N",
        help="accounts scanned at once with --accounts/--org (default 4)",
    )
    scan.add_argument(
        "--catalog",
        type=Path,
        metavar="PATH",
        help="price catalog file (default: the one `prices refresh` wrote, when it is newer "
        "than the packaged one; else the packaged one)",
    )
    scan.set_defaults(func=cmd_scan)

    alerts = sub.add_parser(
        "alerts",
        parents=[flags.profile, flags.region, flags.json],
        help="recent alerts from a deployed CostGuard's ledger",
        description="Recent alerts, read from a deployed CostGuard's ledger in --region.",
    )
    alerts.add_argument(
        "--table", type=table_name, help="the ledger table (stack output LedgerTable)"
    )
    alerts.add_argument(
        "--hours",
        type=alert_hours,
        default=24,
        help=f"how far back, 1 to {_alert_days() * 24} (default 24)",
    )
    alerts.add_argument("--scope", help="ledger scope (default: the account id)")
    alerts.set_defaults(func=cmd_alerts)

    actions = sub.add_parser(
        "actions",
        parents=[flags.profile, flags.region, flags.json],
        help="the audit trail of actions (and dry-run would-dos) from a deployed ledger",
        description=(
            "What CostGuard did, or would have done in dry-run, and why: read from a "
            "deployed CostGuard's ledger in --region."
        ),
    )
    actions.add_argument(
        "--table", type=table_name, help="the ledger table (stack output LedgerTable)"
    )
    actions.add_argument("--month", type=month_name, help="YYYY-MM (default: this month)")
    actions.add_argument("--scope", help="ledger scope (default: the account id)")
    actions.set_defaults(func=cmd_actions)

    demo = sub.add_parser(
        "demo",
        parents=[flags.json],
        help="a whole guard cycle against an embedded AWS (moto server)",
    )
    demo.add_argument(
        "--cycles",
        type=demo_cycles,
        default=None,
        help=(
            f"scan cycles, 15 simulated minutes apart (1 to {MAX_DEMO_CYCLES}, default 6; "
            "with --org: the hub's scheduled times, 3 to 96, default 4)"
        ),
    )
    demo.add_argument(
        "--org",
        action="store_true",
        help=(
            "the Organization hub: 3 member accounts x 2 regions, one without its member "
            "role (fan-out, SQS FIFO work queue, consumer, aggregation)"
        ),
    )
    demo.set_defaults(func=cmd_demo)

    prices = sub.add_parser("prices", help="price catalog")
    prices_sub = prices.add_subparsers(dest="prices_command", required=True)
    refresh = prices_sub.add_parser(
        "refresh",
        parents=[flags.profile, flags.regions, flags.quiet],
        help="rebuild the catalog from the AWS Price List API",
        description=(
            "Rebuild the price catalog from the AWS Price List API. Regions: every --region, "
            f"else {', '.join(DEFAULT_PRICE_REGIONS)}. Written to "
            "$XDG_DATA_HOME/costguard/prices.json (default ~/.local/share/costguard/"
            "prices.json) unless --out says otherwise; `costguard scan` uses that file when "
            "it is newer than the packaged catalog. The installed package is never written."
        ),
    )
    target = refresh.add_mutually_exclusive_group()
    target.add_argument(
        "--out",
        "--output",
        dest="output",
        type=Path,
        metavar="PATH",
        help="where to write the catalog (default: the user's catalog, see above); never "
        "inside the installed package",
    )
    target.add_argument(
        "--table",
        type=table_name,
        metavar="NAME",
        help="refresh the catalog a deployed guard stores in its ledger table (the "
        "LedgerTable output), as its weekly price-refresh Lambda does",
    )
    refresh.add_argument(
        "--table-region",
        type=region_name,
        metavar="REGION",
        help="the ledger table's region (default: AWS_REGION, AWS_DEFAULT_REGION or the "
        "profile's region)",
    )
    refresh.add_argument(
        "--hold-pct",
        type=_hold_pct,
        metavar="PCT",
        help="hold a rate that moved more than PCT percent for review instead of applying "
        "it (1-1000, default 50, the guard's priceChangeHoldPct)",
    )
    refresh.add_argument(
        "--pricing-region",
        type=region_name,
        default="us-east-1",
        help="the Price List API's endpoint region (us-east-1, eu-central-1 or ap-south-1)",
    )
    refresh.set_defaults(func=cmd_prices_refresh)
    show = prices_sub.add_parser(
        "show",
        parents=[flags.profile, flags.json],
        help="the rates the guard uses, and where each came from",
        description=(
            "The rates a guard prices with, and where each came from (bundled with the "
            "package, or read from the Price List API, on which day; kept or held for "
            "review). With --table: the deployed guard's (its stored catalog, else the "
            "bundled one). Without: the catalog `costguard scan` would use."
        ),
    )
    show.add_argument("--type", metavar="TYPE", help="an instance type (g5.xlarge) or family (g5)")
    show.add_argument("--region", type=region_name, metavar="REGION", help="one region only")
    show_from = show.add_mutually_exclusive_group()
    show_from.add_argument(
        "--table", type=table_name, metavar="NAME", help="a deployed guard's ledger table"
    )
    show_from.add_argument(
        "--catalog", type=Path, metavar="PATH", help="a catalog file (as `scan --catalog`)"
    )
    show.add_argument(
        "--table-region", type=region_name, metavar="REGION", help="the ledger table's region"
    )
    show.set_defaults(func=cmd_prices_show)

    from costguard.cli_estimate import register as register_estimate

    register_estimate(sub, flags)
    return p


def failure(exc: BaseException) -> tuple[int, str] | None:
    """The exit code and one-line message for an error the user can act on; None for a bug."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
        ProfileNotFound,
    )
    from botocore.parsers import ResponseParserError

    from costguard.adapters.aws import translate
    from costguard.adapters.catalog import CatalogError
    from costguard.ports import CatalogStoreError, SourceError
    from costguard.settings import SettingsError, one_line

    if isinstance(exc, CommandError):
        return exc.code, str(exc)
    if isinstance(exc, SettingsError | CatalogError):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, CatalogStoreError):
        # The stored catalog (ledger table) cannot be read or written: not a bug here.
        return EXIT_AWS, one_line(f"{exc}", 400)
    if isinstance(exc, ProfileNotFound):
        return EXIT_USAGE, f"{exc}: check --profile / AWS_PROFILE against ~/.aws/config"
    if isinstance(exc, NoRegionError):
        return EXIT_USAGE, "no region: pass --region, or set AWS_REGION / a profile region"
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return EXIT_AWS, NO_CREDENTIALS
    if isinstance(exc, ClientError):
        exc = translate("aws", "", exc.operation_name, exc)
    if isinstance(exc, ResponseParserError):  # an answer that is no answer (an HTML page)
        exc = translate("aws", "", "a call", exc)
    if isinstance(exc, SourceError):
        if exc.code in CREDENTIAL_CODES:
            return EXIT_AWS, (
                f"AWS rejected the credentials ({exc.code}: {exc.detail or 'no message'}): "
                "they are missing, expired or wrong; refresh them (e.g. `aws sso login`) and retry"
            )
        return EXIT_AWS, one_line(
            f"AWS error: {exc.operation} failed with {exc.code}: {exc.detail or 'no message'}", 400
        )
    if isinstance(exc, BotoCoreError):
        # Expired SSO tokens, credential_process failures, unreachable endpoints, ...
        return EXIT_AWS, one_line(f"AWS error: {exc}", 400)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`costguard scan --json | head`): not an error worth a
        # traceback. Point stdout at /dev/null so the flush at exit does not fail again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help (0), or a usage error already printed (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        print("costguard: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except Exception as exc:
        found = failure(exc)
        if found is None:
            raise  # a bug: the traceback is the report
        code, message = found
        print(f"costguard: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    # Run the module's importable copy, not this `__main__` one: subcommand modules import
    # `costguard.cli`, and two copies of one module mean two of every class it defines.
    from costguard.cli import main as _importable_main

    raise SystemExit(_importable_main())
