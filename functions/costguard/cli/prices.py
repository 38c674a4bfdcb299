"""``costguard prices refresh`` and ``costguard prices show``: the price catalog a scan
prices with, rebuilt from the AWS Price List API (a file, or a deployed guard's stored
catalog), and shown rate by rate with where each came from."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from costguard.cli import common

#: Regions ``prices refresh`` fetches when none is given.
DEFAULT_PRICE_REGIONS = ("us-east-1", "us-west-2", "eu-west-1")


def _writable_output(out: Path) -> Path:
    """Checked before any API call: a refresh that cannot be saved should not be fetched."""
    if out.is_dir():
        raise common.CommandError(
            f"--out {out} is a directory; pass a file path such as {out}/prices.json"
        )
    parent = out.parent
    if not parent.is_dir():
        raise common.CommandError(f"--out {out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise common.CommandError(
            f"cannot write the price catalog to {out}: permission denied; pass --out PATH "
            "(a file you can write) and scan with --catalog PATH"
        )
    return out


def _default_output() -> Path:
    """The user's catalog (see :func:`user_catalog_path`), its directory made if need be."""
    out = common.user_catalog_path()
    if out is None:
        raise common.CommandError(
            "no home directory to keep the refreshed price catalog in: set XDG_DATA_HOME or "
            "HOME, or pass --out PATH (and scan with --catalog PATH)"
        )
    try:
        out.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise common.CommandError(
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
        raise common.CommandError(
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


def _table_region(args: argparse.Namespace, aws: Any) -> str:
    region = args.table_region or common.default_region(aws)
    if not region:
        raise common.CommandError(
            "no region for --table: pass --table-region (the stack's region), or set "
            "AWS_REGION / a profile region"
        )
    return str(region)


def _refresh_outcome(summary: dict[str, Any], where: str, show: Callable[[str], None]) -> int:
    print(json.dumps(summary, indent=2))
    sys.stdout.flush()
    warn = common.progress(True)  # failures and what was held back: said even with --quiet
    failed = summary.get("failed_regions") or {}
    empty = summary["regions_without_prices"]
    wrote = (
        "the other regions' prices were written" if summary["written"] else "nothing was written"
    )
    for line in summary.get("held_for_review", []):
        warn(f"held for review: {line}")
    for line in summary.get("rejected_answers", []):
        warn(f"not taken as a price: {line}")
    if summary.get("stored_catalog_problem"):
        warn(f"warning: {summary['stored_catalog_problem']}; started from the packaged catalog")
    if failed:
        warn(
            "could not read "
            + "; ".join(f"{r} ({why})" for r, why in sorted(failed.items()))
            + f": left as they were; {wrote}"
        )
        return common.EXIT_AWS
    if empty:
        warn(
            f"no prices returned for {', '.join(empty)} (not a region the Price List API "
            f"knows?): the catalog is not marked fresh, as_of stays {summary['as_of']}; {wrote}"
        )
        return common.EXIT_NO_DATA
    if summary["written"]:
        show(f"wrote {where}: version {summary['version']}, as of {summary['as_of']}")
    else:
        show(f"{where} is already current: version {summary['version']}")
    return common.EXIT_OK


def cmd_prices_refresh(args: argparse.Namespace) -> int:
    from costguard.adapters.catalog import read_catalog_file
    from costguard.config_spec import BY_NAME
    from costguard.wiring.refresh import refresh_catalog

    aws = common.session(args)
    hold_pct = (
        args.hold_pct if args.hold_pct is not None else BY_NAME["price_change_hold_pct"].default
    )
    regions = tuple(dict.fromkeys(args.region or DEFAULT_PRICE_REGIONS))
    show = common.progress(not args.quiet)
    if args.table:
        return _refresh_table(args, aws, regions, hold_pct, show)
    out = _writable_output(_outside_the_package(args.output or _default_output()))
    previous = read_catalog_file()
    common.require_credentials(aws)
    show(f"refreshing the price catalog at {out}")
    summary = refresh_catalog(
        aws.client("pricing", region_name=args.pricing_region),
        regions=regions,
        output=out,
        today=common.now().date(),
        progress=show,
        previous=previous,
        hold_pct=hold_pct,
    )
    return _refresh_outcome(summary, str(out), show)


def _refresh_table(
    args: argparse.Namespace,
    aws: Any,
    regions: tuple[str, ...],
    hold_pct: Any,
    show: Callable[[str], None],
) -> int:
    """Refresh a deployed guard's stored catalog, as its weekly Lambda does."""
    from costguard.adapters.aws import RETRY_CONFIG
    from costguard.adapters.catalog import CatalogDocuments
    from costguard.adapters.catalog_store import DynamoDbCatalogStore
    from costguard.adapters.pricing_api import PriceListApi
    from costguard.services.price_refresh import PriceRefresh

    region = _table_region(args, aws)
    common.require_credentials(aws)
    show(f"refreshing the price catalog stored in {args.table} ({region})")
    refresh = PriceRefresh(
        DynamoDbCatalogStore(aws.client("dynamodb", region_name=region), args.table),
        PriceListApi(aws.client("pricing", region_name=args.pricing_region, config=RETRY_CONFIG)),
        CatalogDocuments(),
        hold_pct=hold_pct,
        progress=show,
    )
    with common.table_errors(args.table, region):
        outcome = refresh.run(regions, common.now())
    summary = {"table": args.table, **outcome.summary()}
    return _refresh_outcome(summary, f"table {args.table}", show)


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

        aws = common.session(args)
        region = _table_region(args, aws)
        common.require_credentials(aws)
        reader = CatalogReader(
            DynamoDbCatalogStore(aws.client("dynamodb", region_name=region), args.table)
        )
        with common.table_errors(args.table, region):
            _catalog, in_use = reader.read()
        which = f"prices from the {in_use.describe()} in table {args.table} (what the guard uses)"
        if in_use.problem:
            common.progress(True)(f"warning: {in_use.problem}")
    else:
        chosen, which, _source = common.choose_catalog(args.catalog, common.progress(True))
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
        doc = {"catalog": which, "version": in_use.version, "as_of": book.as_of.isoformat()}
        common.emit_json({**doc, "rates": rows}, ensure_ascii=True)
        return common.EXIT_OK if rows else common.EXIT_NO_DATA
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
        common.progress(True)("no rate matches --type/--region in this catalog")
        return common.EXIT_NO_DATA
    return common.EXIT_OK


#: The regions where the Price List API has an endpoint (botocore's endpoint data agrees;
#: cn-northwest-1 serves the China partition).
PRICING_ENDPOINT_REGIONS = ("us-east-1", "eu-central-1", "ap-south-1", "cn-northwest-1")


def register(sub: Any, flags: common.Flags) -> None:
    """Add ``prices refresh`` and ``prices show`` to the ``costguard`` parser."""
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
        type=common.file_path,
        metavar="PATH",
        help="where to write the catalog (default: the user's catalog, see above); never "
        "inside the installed package",
    )
    target.add_argument(
        "--table",
        type=common.table_name,
        metavar="NAME",
        help="refresh the catalog a deployed guard stores in its ledger table (the "
        "LedgerTable output), as its weekly price-refresh Lambda does",
    )
    refresh.add_argument("--table-region", **common.TABLE_REGION)
    refresh.add_argument(
        "--hold-pct",
        type=_hold_pct,
        metavar="PCT",
        help="hold a rate that moved more than PCT percent for review instead of applying "
        "it (1-1000, default 50, the guard's priceChangeHoldPct)",
    )
    refresh.add_argument(
        "--pricing-region",
        type=common.region_name,
        # The Price List API answers in these regions only; another is a host nobody runs.
        choices=PRICING_ENDPOINT_REGIONS,
        metavar="REGION",
        default="us-east-1",
        help="the Price List API's endpoint region: us-east-1 (default), eu-central-1, "
        "ap-south-1, or cn-northwest-1 for the China regions",
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
    show.add_argument("--region", type=common.region_name, metavar="REGION", help="one region only")
    show_from = show.add_mutually_exclusive_group()
    show_from.add_argument(
        "--table", type=common.table_name, metavar="NAME", help="a deployed guard's ledger table"
    )
    show_from.add_argument(
        "--catalog",
        type=common.file_path,
        metavar="PATH",
        help="a catalog file (as `scan --catalog`)",
    )
    show.add_argument("--table-region", **common.TABLE_REGION)
    show.set_defaults(func=cmd_prices_show)
