"""What every ``costguard`` command module shares, written once.

The exit codes and the error type, the one clock read, the parser class and the flags
several commands take, the AWS session and the checks made before any work (credentials,
region, account, ledger table), the price catalog a command prices with, and the output
helpers. Command modules import this module and nothing of each other.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from costguard.cli.output import Format

if TYPE_CHECKING:
    from costguard.adapters.catalog import CatalogFile

EXIT_OK = 0
EXIT_AWS = 1
EXIT_USAGE = 2
EXIT_NO_DATA = 3
#: ``estimate train --project``: the run would take the project's forecast over budget.
EXIT_OVER_BUDGET = 4
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `... | head`

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
    {"GetItem", "Query", "BatchGetItem", "TransactGetItems"}
    | {"PutItem", "UpdateItem", "BatchWriteItem", "TransactWriteItems"}
)


class CommandError(Exception):
    """A failure the user can act on: its message is the whole story, ``code`` the exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def now() -> datetime:
    """The command's one clock read, taken at the edge as the Lambdas take theirs.

    It is :data:`costguard.events.CLOCK`, the one clock every entry point reads:
    tests set it (in the process, or in a child process through a test helper) to run a
    command at any instant; nothing else in the product reads the wall clock.
    """
    from costguard import events  # pydantic only when a command asks the time

    return events.CLOCK()


# -- the parser, and the argument types several commands share ---------------------------


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``costguard scan: error: ...``) and exit 2."""

    def error(self, message: str) -> NoReturn:
        from costguard.settings import one_line

        message = self._command_message(message) or _plain_words(message)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message, 300)}\n")

    def _command_message(self, message: str) -> str | None:
        """argparse names a missing or mistyped command by its internal ``dest``
        (``required: estimate_command``); a person needs the commands to choose from."""
        import difflib

        for action in self._actions:
            if not isinstance(action, argparse._SubParsersAction) or not action.dest:
                continue
            names = list(action.choices)
            choose = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
            if message.startswith("the following arguments are required:") and re.search(
                rf"\b{re.escape(action.dest)}\b", message
            ):
                return f"choose a command: {choose}"
            given = re.match(
                rf"argument {re.escape(action.dest)}: invalid choice: (.*) \(", message
            )
            if given:
                near = difflib.get_close_matches(given.group(1).strip("'\""), names, n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                return f"unknown command {given.group(1)}{hint}: choose {choose}"
        return None


def _plain_words(message: str) -> str:
    """argparse's phrasing of a flag given without its value, or with one it takes none of."""
    given = re.fullmatch(r"argument ([^:]+): ignored explicit argument (.*)", message)
    if given:
        return f"{given.group(1)} takes no value (got {given.group(2)})"
    needs = re.fullmatch(r"argument ([^:]+): expected one argument", message)
    if needs:
        return f"{needs.group(1)} needs a value"
    return message


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


def whole_number(low: int, high: int, message: str) -> Callable[[str], int]:
    """An argument type for a whole number from ``low`` to ``high`` (ASCII digits only);
    ``message`` is formatted with ``low``, ``high`` and the ``value`` given."""

    def parse(value: str) -> int:
        text = value.strip()
        if not re.fullmatch(r"[0-9]+", text) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(message.format(low=low, high=high, value=value))
        return int(text)

    return parse


def text_value(what: str, limit: int, pattern: str | None = None) -> Callable[[str], str]:
    """An argument type for a name: not empty, no control characters (NUL, newline), at
    most ``limit`` characters and, when given, matching ``pattern`` (``what`` says which
    characters). An empty ``--scope ""`` would otherwise be read as no scope at all."""

    def parse(value: str) -> str:
        shown = value if len(value) <= 60 else value[:60] + "…"
        if not value.strip():
            raise argparse.ArgumentTypeError(f"empty: give {what}")
        if any(not ch.isprintable() for ch in value):
            raise argparse.ArgumentTypeError(f"control characters in {shown!r}: give {what}")
        if len(value) > limit or (pattern and not re.fullmatch(pattern, value)):
            raise argparse.ArgumentTypeError(
                f"not {what}: {shown!r} (at most {limit:,} characters)"
            )
        return value

    return parse


def file_path(value: str) -> Path:
    """An argument type for a file path: not empty, no NUL (the OS refuses it with a
    ``ValueError``), no name longer than the file system allows."""
    shown = value if len(value) <= 60 else value[:60] + "…"
    if not value.strip():
        raise argparse.ArgumentTypeError("empty: give a file path")
    if "\x00" in value:
        raise argparse.ArgumentTypeError(f"a NUL character in the path {shown!r}")
    if len(value.encode("utf-8", "surrogateescape")) > 4096 or any(
        len(part.encode("utf-8", "surrogateescape")) > 255 for part in Path(value).parts
    ):
        raise argparse.ArgumentTypeError(f"the path {shown!r} is longer than a file system allows")
    return Path(value)


#: IAM's rule for a role name.
ROLE_NAME = text_value("an IAM role name (A-Z a-z 0-9 and + = , . @ _ -)", 64, r"[\w+=,.@-]+")
#: A tag key: AWS allows 128 characters; no leading aws: (reserved).
TAG_KEY = text_value("a tag key (up to 128 characters)", 128, r"(?!aws:)[^\x00-\x1f]+")
#: A ledger scope (an account id, or the scope a deployment was given).
SCOPE = text_value("a ledger scope (the account id, e.g. 123456789012)", 256)


def tag_name(what: str) -> Callable[[str], str]:
    """An argument type for a name a tag carries (a project, a team), normalised as the scan
    normalises the tag (NFKC, spaces collapsed): ``--project ｌｌｍ`` and ``--team "research "``
    name ``llm`` and ``research``, the names the ledger and the report hold. Refused as the
    tag would be: empty, invisible or control characters, over 256 characters."""

    def parse(value: str) -> str:
        from costguard.domain.tags import parse_project

        name, why = parse_project(value)
        if name is None:
            raise argparse.ArgumentTypeError(f"not {what}: {why}")
        return name

    return parse


#: A project name, as tagged on resources.
PROJECT = tag_name("a project name")
#: A team name, as tagged on resources (``costguard:team``) or in the team table.
TEAM = tag_name("a team name")


#: The region of the ledger table ``--table`` names: ``--table-region`` in every command
#: that reads or writes a deployed ledger, so that it never collides with a command's own
#: ``--region`` (the regions it scans or prices).
TABLE_REGION: dict[str, Any] = {
    "type": region_name,
    "metavar": "REGION",
    "help": "the ledger table's region, where the stack is deployed (default: AWS_REGION, "
    "AWS_DEFAULT_REGION or the profile's region)",
}


class DeprecatedAlias(argparse.Action):
    """An old spelling of a flag: it still works, and says once on stderr what to type now."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        current = next(
            (a.option_strings[0] for a in parser._actions if a.dest == self.dest and a is not self),
            self.dest,
        )
        print(
            f"costguard: warning: {option_string} is deprecated here; use {current}",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


class Flags:
    """The flags several commands share, spelled, validated and documented once.

    Each is a parent parser (``parents=[...]``): a command takes the ones that mean
    something to it, and each flag means the same wherever it appears.
    """

    def __init__(self) -> None:
        self.profile = _flag(
            "--profile",
            metavar="NAME",
            help="AWS profile from ~/.aws/config (default: AWS_PROFILE, else boto3's chain)",
        )
        self.regions = _flag(
            "--region",
            action="append",
            type=region_name,
            metavar="REGION",
            help="AWS region, e.g. us-east-1; repeat for several (default: see above)",
        )
        #: ``alerts`` and ``actions``: the ledger's region, spelled as every command spells it;
        #: ``--region``, its name in earlier docs, still works there (hidden, deprecated).
        self.ledger_region = _flag("--table-region", **TABLE_REGION)
        self.ledger_region.add_argument(
            "--region",
            dest="table_region",
            type=region_name,
            action=DeprecatedAlias,
            help=argparse.SUPPRESS,
        )
        #: ``--format table|json|csv|markdown`` and its synonym ``--json`` (dest ``format``).
        self.format = format_flag()
        self.quiet = _flag(
            "--quiet",
            action="store_true",
            help="no progress on stderr (warnings and errors are still printed)",
        )


def _flag(name: str, **kwargs: Any) -> Parser:
    """A parent parser holding the one flag ``name``."""
    parent = Parser(add_help=False)
    parent.add_argument(name, **kwargs)
    return parent


# -- output ------------------------------------------------------------------------------------


def progress(enabled: bool) -> Callable[[str], None]:
    """``costguard: message`` on stderr when ``enabled``: progress, warnings and errors."""

    def show(message: str) -> None:
        if enabled:
            print(f"costguard: {message}", file=sys.stderr, flush=True)

    return show


def emit_json(data: Any, *, ensure_ascii: bool = False, default: Any = None) -> None:
    """``data`` as indented JSON on stdout, one newline after it."""
    json.dump(data, sys.stdout, indent=2, ensure_ascii=ensure_ascii, default=default)
    sys.stdout.write("\n")


# -- AWS: the session, and what is checked before any work -------------------------------------


def session(args: argparse.Namespace) -> Any:
    import boto3

    return boto3.Session(profile_name=args.profile) if args.profile else boto3.Session()


def require_credentials(aws: Any) -> None:
    """Fail once, clearly, before any work: not once per region and service, in threads."""
    credentials = aws.get_credentials()
    if credentials is None:
        raise CommandError(NO_CREDENTIALS, EXIT_AWS)
    # Resolves refreshable credentials (SSO, assume-role) now: an expired SSO token fails here.
    credentials.get_frozen_credentials()


def default_region(aws: Any) -> str | None:
    # botocore reads AWS_DEFAULT_REGION and the profile, not AWS_REGION; the Lambdas and
    # the AWS CLI v2 do read AWS_REGION, so the CLI does too.
    region: str | None = aws.region_name or os.environ.get("AWS_REGION") or None
    return region


def account(aws: Any, region: str | None) -> str:
    """The account id, which the deployed scan uses as the ledger scope."""
    from costguard.adapters.aws import AWS_ERRORS

    try:
        return str(aws.client("sts", region_name=region).get_caller_identity()["Account"])
    except AWS_ERRORS as exc:
        code, message = failure(exc) or (EXIT_AWS, str(exc))
        raise CommandError(
            f"{message}; pass --scope (the ledger scope: the account id) to skip this lookup", code
        ) from exc


@contextmanager
def table_errors(table: str, region: str) -> Iterator[None]:
    """A ledger call on a table that is not there is a wrong ``--table``: bad input that
    says so, not an AWS error."""
    from botocore.exceptions import ClientError

    try:
        yield
    except ClientError as exc:
        if (
            exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException"
            or exc.operation_name not in _LEDGER_OPERATIONS
        ):
            raise
        raise CommandError(
            f"ledger table {table!r} not found in {region}: pass the stack's LedgerTable "
            "output as --table, in the region the stack is deployed to"
        ) from None


def deployed_ledger(
    args: argparse.Namespace, region: str | None, *, no_table: str, no_region: str
) -> tuple[Any, str, str]:
    """The deployed ledger a command reads, never writes: (ledger, scope, region).

    ``region`` is the option naming the ledger's region (else the default region);
    ``no_table`` and ``no_region`` are the messages when ``--table`` or a region is missing.
    """
    from costguard.adapters.dynamodb import DynamoDbLedger

    if not args.table:
        raise CommandError(no_table)
    aws = session(args)
    region = region or default_region(aws)
    if not region:
        raise CommandError(no_region)
    require_credentials(aws)
    ledger = DynamoDbLedger(aws.client("dynamodb", region_name=region), args.table)
    return ledger, args.scope or account(aws, region), region


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


def _describe(catalog: CatalogFile) -> str:
    return f"version {catalog.version}, as of {catalog.as_of}"


def choose_catalog(
    explicit: Path | None, warn: Callable[[str], None]
) -> tuple[CatalogFile, str, str]:
    """The catalog a command prices with, a line saying which one and why, and whether the
    file chosen is the packaged one ("bundled") or another ("file").

    ``--catalog PATH`` always wins (and a broken one is bad input). Otherwise the catalog
    ``prices refresh`` wrote to :func:`user_catalog_path` is used when it is newer than the
    packaged one; a broken refreshed catalog is a warning, not a failed scan, because the
    packaged prices are still there and the user did not name that file.
    """
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
    # Prices checked later win; on the same day, the later version (a partial refresh).
    if (refreshed.as_of, refreshed.version) > (packaged.as_of, packaged.version):
        return (
            refreshed,
            f"prices from {refreshed_path} ({_describe(refreshed)}; refreshed)",
            "file",
        )
    return packaged, f"{used}; {refreshed_path} ({_describe(refreshed)}) is not newer", BUNDLED


# -- errors ------------------------------------------------------------------------------------


def failure(exc: BaseException) -> tuple[int, str] | None:
    """The exit code and one-line message for an error the user can act on; None for a bug."""
    from botocore import exceptions as boto
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
    if isinstance(exc, boto.ProfileNotFound):
        return EXIT_USAGE, f"{exc}: check --profile / AWS_PROFILE against ~/.aws/config"
    if isinstance(exc, boto.NoRegionError):
        return EXIT_USAGE, "no region: pass --region, or set AWS_REGION / a profile region"
    if isinstance(exc, boto.NoCredentialsError | boto.PartialCredentialsError):
        return EXIT_AWS, NO_CREDENTIALS
    if isinstance(exc, boto.ClientError):
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
    if isinstance(exc, boto.BotoCoreError):
        # Expired SSO tokens, credential_process failures, unreachable endpoints, ...
        return EXIT_AWS, one_line(f"AWS error: {exc}", 400)
    return None


def format_flag() -> Parser:
    """The parent parser holding ``--format`` and its synonym ``--json`` (dest ``format``)."""
    parent = Parser(add_help=False)
    parent.add_argument(
        "--format",
        choices=[f.value for f in Format],
        default=Format.TABLE.value,
        help="how to print the results (default table; json, csv and markdown for tools)",
    )
    parent.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const=Format.JSON.value,
        help="the same as --format json",
    )
    return parent
