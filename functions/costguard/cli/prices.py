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
    if out.exists() and not out.is_file():
        # The catalog is moved into place: over a device or a pipe, it would replace it.
        raise common.CommandError(
            f"--out {out} is not a regular file (a device or a pipe); pass a file path such "
            "as ./prices.json"
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

#: ``--service`` choices, in the order rows are shown (``domain.rate_sheet.SERVICES``).
SHOW_SERVICES = ("ec2", "sagemaker", "ebs", "ebs-snapshot", "s3", "eks")


def _matches(name: str, wanted: str | None) -> bool:
    """``--type g5.xlarge`` is that type (``ml.`` optional); ``--type g5`` is its family;
    ``--type gp3`` an EBS volume type, its GB-month and its provisioned IOPS and
    throughput ("gp3 IOPS above 3,000")."""
    if wanted is None:
        return True
    bare, want = name.removeprefix("ml.").split(" ", 1)[0], wanted.removeprefix("ml.")
    return bare == want if "." in want else bare.split(".")[0] == want


def _said(text: str) -> str:
    """A name from a catalog or the command line, safe on one line of a terminal."""
    return text if text.isprintable() else repr(text)[1:-1]


def _catalog_in_use(args: argparse.Namespace) -> tuple[Any, Any, str, str]:
    """The catalog ``prices show`` reads: (prices, provenance, the line saying which, and
    a short name for each row: "packaged v3", "file v5", "stored v7")."""
    from costguard.adapters.catalog import rate_book
    from costguard.domain.catalog_merge import BUNDLED, CatalogInUse

    if args.table:
        from costguard.adapters.catalog_store import CatalogReader, DynamoDbCatalogStore

        aws = common.session(args)
        region = _table_region(args, aws)
        common.require_credentials(aws)
        reader = CatalogReader(
            DynamoDbCatalogStore(aws.client("dynamodb", region_name=region), args.table)
        )
        with common.table_errors(args.table, region):
            catalog, in_use = reader.read()
        # Not "the bundled catalog ... in table T": a guard with nothing stored uses the
        # bundled one, which is not in its table.
        which = f"prices from the {in_use.describe()} (what the guard of table {args.table} uses)"
        if in_use.problem:
            common.progress(True)(f"warning: {in_use.problem}")
        short = "packaged" if in_use.source == BUNDLED else in_use.source
        return catalog, in_use, which, f"{short} v{in_use.version}"
    chosen, which, source = common.choose_catalog(args.catalog, common.progress(True))
    in_use = CatalogInUse("file", chosen.version, rate_book(chosen))
    short = "packaged" if source == BUNDLED else "file"
    return chosen.to_domain(), in_use, which, f"{short} v{chosen.version}"


def _unknown_region(region: str, known: tuple[str, ...]) -> common.CommandError:
    return common.CommandError(
        f"--region {region}: the price catalog has no rates for {region} (it has "
        f"{', '.join(known)}); a scan there prices only EKS clusters (one rate in every "
        f"region) and reports everything else as unpriced; `costguard prices refresh "
        f"--region {region}` reads its prices"
    )


def _unknown_type(wanted: str) -> common.CommandError:
    return common.CommandError(
        f"--type {_said(wanted)}: the price catalog knows no such type (an instance type such "
        "as g5.xlarge or ml.g5.xlarge, a family such as g5, an EBS volume type such as gp3); "
        "`costguard prices show --format csv` lists every name"
    )


def cmd_prices_show(args: argparse.Namespace) -> int:
    """Every rate the guard will use, where each came from, and why a known one is missing."""
    from costguard.cli import output
    from costguard.domain.rate_sheet import EVERY_REGION, catalog_regions, rate_sheet

    catalog, in_use, which, short = _catalog_in_use(args)
    book = in_use.book
    every = rate_sheet(catalog, book)
    known_regions = catalog_regions(catalog, book)
    if args.region and args.region not in known_regions:
        raise _unknown_region(args.region, known_regions)
    if args.type is not None and not any(_matches(r.name, args.type) for r in every):
        raise _unknown_type(args.type)
    rows = [
        r
        for r in every
        if (not args.service or r.service in args.service)
        and (not args.region or r.region in (args.region, EVERY_REGION))
        and _matches(r.name, args.type)
    ]
    if not rows:
        asked = " ".join(
            f"--{flag} {_said(str(value))}"
            for flag, value in (
                ("service", ",".join(args.service or ())),
                ("type", args.type),
                ("region", args.region),
            )
            if value
        )
        common.progress(True)(
            f"the price catalog has no {' or '.join(args.service or ['such'])} rate "
            f"matching {asked}"
        )
        return common.EXIT_NO_DATA
    data = {
        "catalog": which,
        "catalog_source": short,
        "version": in_use.version,
        "as_of": book.as_of.isoformat(),
        "rates": [_row_json(r, short) for r in rows],
    }
    plain = args.format == output.Format.CSV
    table = output.Table(_COLUMNS, [_row_cells(r, short, dollars=not plain) for r in rows])
    text_table = output.Table(tuple(c for c in _COLUMNS if c.key != "catalog"), table.rows)
    output.write(
        args.format,
        kind="prices",
        data=data,
        table=table,
        generated_at=common.now(),
        text=f"{which[:1].upper()}{which[1:]}:\n" + output.plain_text(text_table),
        # Markdown opens with its bold line, as every other command's does.
        heading=f"CostGuard prices: the {short} catalog, as of {book.as_of.isoformat()}",
    )
    return common.EXIT_OK


def _row_json(r: Any, catalog: str) -> dict[str, Any]:
    return {
        "service": r.service,
        "region": r.region,
        "name": r.name,
        "key": r.key or r.name,
        "usd": None if r.usd is None else str(r.usd),
        "unit": r.unit,
        "priced": r.priced,
        "reason": r.reason,
        "source": r.source,
        "catalog": catalog,
        "as_of": r.as_of.isoformat() if r.as_of else None,
        "kept_since": r.kept_since.isoformat() if r.kept_since else None,
        "held_usd": str(r.held_usd) if r.held_usd is not None else None,
        "retired": r.retired,
        "confidence": r.confidence,
    }


def _columns() -> tuple[Any, ...]:
    from costguard.cli.output import Column

    return (
        Column("service", "service"),
        Column("region", "region"),
        Column("name", "name"),
        Column("usd", "rate", "right"),
        Column("unit", "per"),
        Column("source", "source"),
        Column("catalog", "catalog"),
        Column("as_of", "as of"),
        Column("notes", "notes"),
    )


_COLUMNS = _columns()


def _row_cells(r: Any, catalog: str, dollars: bool = True) -> dict[str, str]:
    notes = [
        *([f"unpriced: {r.reason}"] if r.reason and not r.priced else []),
        *([f"{r.reason}"] if r.reason and r.priced else []),
        *([f"kept since {r.kept_since} (the API stopped returning it)"] if r.kept_since else []),
        *([f"${r.held_usd} held for review"] if r.held_usd is not None else []),
        *(["retired"] if r.retired and not (r.reason or "").startswith("retired") else []),
        *([f"confidence {r.confidence}"] if r.confidence else []),
    ]
    return {
        "service": r.service,
        "region": _said(r.region),
        "name": _said(r.name),
        # A script reads a number (never $0 for unpriced: the word breaks a sum, as it should).
        "usd": "unpriced" if r.usd is None else (f"${r.usd}" if dollars else str(r.usd)),
        "unit": r.unit,
        "source": r.source,
        "catalog": catalog,
        "as_of": r.as_of.isoformat() if r.as_of else "unknown",
        "notes": _said("; ".join(notes)),
    }


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
        parents=[flags.profile, flags.format],
        help="every rate the guard uses, and where each came from",
        description=(
            "Every rate a guard prices with: EC2 and SageMaker instance-hours, EBS volumes "
            "per GB-month and their provisioned IOPS and throughput by tier, EBS snapshots "
            "and S3 storage classes per GB-month, EKS cluster-hours (standard and extended "
            "support). Each says where it came from (bundled with the package, or read "
            "from the Price List API), on which day, and whether it is kept or held for "
            "review; a type the catalog knows but has no rate for in "
            "a region is listed as unpriced, with the reason. With --table: the deployed "
            "guard's (its stored catalog, else the bundled one). Without: the catalog "
            "`costguard scan` would use."
        ),
    )
    show.add_argument(
        "--type",
        metavar="TYPE",
        help="an instance type (g5.xlarge, ml.g5.xlarge), a family (g5) or an EBS volume "
        "type (gp3)",
    )
    show.add_argument("--region", type=common.region_name, metavar="REGION", help="one region only")
    show.add_argument(
        "--service",
        action="append",
        choices=SHOW_SERVICES,
        help="one service only; repeat for several",
    )
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
