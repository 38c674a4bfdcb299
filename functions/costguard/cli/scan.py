"""``costguard scan``: a read-only scan of the account boto3 resolves (or, with
``--accounts``/``--org``, of several accounts through their member roles: :mod:`.org`)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from costguard.cli import common
from costguard.env import Env

if TYPE_CHECKING:
    from costguard.services.scan import ScanReport
    from costguard.settings import Settings

#: Services a scan calls that are not inventory: success there is not "something was read".
_NOT_INVENTORY = frozenset({"sts", "dynamodb"})


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

    def attach(self, aws: Any) -> None:
        aws.events.register("after-call", self._after_call)
        aws.events.register("after-call-error", self._after_error)

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
            if codes and set(codes) <= common.CREDENTIAL_CODES
            else ""
        )
        return common.EXIT_NO_DATA, (
            f"every source failed, nothing was read ({_listing(failed)}"
            + (f"; AWS answered {', '.join(codes)}" if codes else "")
            + f"){hint}; see the scan-failed findings"
        )
    if failed:
        return common.EXIT_OK, (
            f"warning: {len(failed)} source{'s' if len(failed) > 1 else ''} failed and "
            f"{'are' if len(failed) > 1 else 'is'} missing from this scan: {_listing(failed)}"
        )
    return common.EXIT_OK, None


# -- settings: the options over the COSTGUARD_* variables ---------------------------------


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


def settings_for_scan(
    args: argparse.Namespace, aws: Any, environ: Mapping[str, str] | None = None
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
        region = common.default_region(aws)
        if not region:
            raise common.CommandError(
                "no region: pass --region, or set AWS_REGION / a profile region"
            )
        options["regions"] = (region,)
        names["regions"] = _DEFAULT_REGION
    # from_env insists on regions; without COSTGUARD_REGIONS the stand-in satisfies it, and
    # options["regions"] (always set on that path) replaces it below.
    base = Settings.from_env(env if Env.REGIONS in env else {**env, Env.REGIONS: _STAND_IN_REGION})
    try:
        settings = Settings.model_validate({**dict(base), **options})
    except ValidationError as exc:
        raise SettingsError.of(validation_problems(exc, names)) from None
    # The regions that got here without --region's check (COSTGUARD_REGIONS, the default
    # region), named by where they came from.
    for region in settings.regions:
        unknown = unknown_region(region)
        if unknown:
            raise common.CommandError(
                f"{names['regions'] if 'regions' in options else Env.REGIONS}: {unknown}"
            )
    return settings


# -- the command -----------------------------------------------------------------------------


def cmd_scan(args: argparse.Namespace) -> int:
    from costguard.adapters.catalog import rate_book
    from costguard.domain.catalog_merge import CatalogInUse
    from costguard.settings import one_line
    from costguard.wiring import CallCounter, build_scan_service, clients_for

    aws = common.session(args)
    settings = settings_for_scan(args, aws)
    catalog, which, source = common.choose_catalog(args.catalog, common.progress(True))
    common.require_credentials(aws)
    if getattr(args, "accounts", None) or getattr(args, "org", False):
        return _scan_accounts(args, aws, settings, catalog.to_domain(), which)
    if settings.table_name and not args.scope:
        # The deployed scan keys the ledger by account id; read the same rows.
        settings = settings.model_copy(update={"scope": common.account(aws, settings.regions[0])})
    counter = CallCounter()
    counter.attach(aws)
    calls = InventoryCalls()
    calls.attach(aws)
    ledger = None
    if settings.table_name:
        from costguard.adapters.memory import ReadOnlyLedger
        from costguard.wiring import build_ledger

        # Read-only: the deployed ledger is read, never written, by a local scan.
        ledger = ReadOnlyLedger(build_ledger(settings, clients_for(settings, aws)))
    service = build_scan_service(
        settings,
        clients_for(settings, aws),
        ledger=ledger,
        catalog=catalog.to_domain(),
        # Progress is for a person watching a table; a tool reading stdout wants quiet.
        progress=common.progress(not args.quiet and args.format == "table"),
        counter=counter,
        # Which catalog it is, so that the scan says when its prices are stale.
        catalog_in_use=CatalogInUse(source, catalog.version, rate_book(catalog)),
    )
    # Which prices the numbers rest on is part of the answer, not progress: said in every format.
    common.progress(not args.quiet)(one_line(which, 1000))
    # build_ledger's choice of region, named so the user can check it.
    with common.table_errors(settings.table_name or "", aws.region_name or settings.regions[0]):
        report = service.run(common.now())
    print_scan(args.format, report)
    code, message = scan_outcome(report, calls)
    if message:
        print(f"costguard: {message}", file=sys.stderr)
    return code


def print_scan(fmt: str, report: ScanReport) -> None:
    """One account's scan in ``fmt``: the envelope (kind ``scan``), its rows, or the text."""
    from functools import cache

    from costguard.cli.output import write
    from costguard.cli.scan_output import (
        report_json,
        report_table,
        scan_markdown_heading,
        scan_tables,
    )

    tables = cache(lambda: scan_tables([(None, report)]))
    write(
        fmt,
        kind="scan",
        data=lambda: report_json(report),
        table=lambda: tables()[0],
        views=lambda: tables()[1],
        generated_at=report.now,
        text=lambda: report_table(report),
        heading=scan_markdown_heading([report]),
        empty="none found",
    )


def _scan_accounts(
    args: argparse.Namespace, aws: Any, settings: Settings, catalog: Any, which: str
) -> int:
    """``scan --accounts`` / ``scan --org``: each account through its member role."""
    from costguard.cli.org import discover_accounts, print_accounts, scan_accounts
    from costguard.settings import one_line

    option = "--org" if args.org else "--accounts"
    if settings.table_name:
        raise common.CommandError(f"{option} scans with an in-memory ledger: drop --table")
    show = common.progress(not args.quiet)
    accounts = args.accounts
    if args.org:
        accounts = discover_accounts(aws, args.opt_out_tag, common.now(), progress=show)
    show(one_line(which, 1000))
    at = common.now()
    results = scan_accounts(
        aws,
        accounts,
        settings,
        catalog,
        at,
        role_name=args.role_name,
        workers=args.account_workers,
        progress=show,
    )
    return print_accounts(results, args.format, at)


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


#: ``--account-workers``: each account scans its regions in threads of its own, and STS
#: throttles AssumeRole beyond a few dozen calls a second.
MAX_ACCOUNT_WORKERS = 32


def register(sub: Any, flags: common.Flags) -> None:
    """Add ``scan`` to the ``costguard`` parser."""
    scan = sub.add_parser(
        "scan",
        parents=[flags.profile, flags.regions, flags.format, flags.quiet],
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
        type=common.table_name,
        help="deployed ledger table to read, never write (default: none, estimates only)",
    )
    scan.add_argument(
        "--sagemaker-tags",
        choices=["tagging-api", "per-resource"],
        help="how to read SageMaker tags (default tagging-api)",
    )
    scan.add_argument(
        "--scope", type=common.SCOPE, help="ledger scope to read (default: the account id)"
    )
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
        type=common.TAG_KEY,
        metavar="KEY",
        help="with --org: the account tag whose value true leaves an account out "
        "(default costguard:opt-out)",
    )
    scan.add_argument(
        "--role-name",
        default="costguard-member-read",
        type=common.ROLE_NAME,
        metavar="ROLE",
        help="the member role --accounts/--org assumes (default costguard-member-read)",
    )
    scan.add_argument(
        "--account-workers",
        type=common.whole_number(
            1,
            MAX_ACCOUNT_WORKERS,
            "must be a whole number of accounts from {low} to {high}, got {value!r}",
        ),
        default=4,
        metavar="N",
        help=f"accounts scanned at once with --accounts/--org, 1 to {MAX_ACCOUNT_WORKERS} (default 4)",
    )
    scan.add_argument(
        "--catalog",
        type=common.file_path,
        metavar="PATH",
        help="price catalog file (default: the one `prices refresh` wrote, when it is newer "
        "than the packaged one; else the packaged one)",
    )
    scan.set_defaults(func=cmd_scan)
