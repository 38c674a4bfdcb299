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

One module per command group (:mod:`.scan` and :mod:`.org`, :mod:`.ledger` for ``alerts``
and ``actions``, :mod:`.demo`, :mod:`.prices`, :mod:`.estimate`), each adding its commands
to the parser with ``register``; what they share is :mod:`.common`. None imports another.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from costguard.cli.common import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Flags,
    Parser,
    failure,
)

__all__ = ["build_parser", "main"]


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


def build_parser() -> argparse.ArgumentParser:
    """The ``costguard`` parser: every command, flag and help text the command has."""
    # Here, not at the top: `python -m costguard.cli.estimate` imports this package first,
    # and a command module already imported would then run as a second copy.
    from costguard.cli import completion, demo, estimate, ledger, prices, scan

    p = Parser(
        prog="costguard",
        description="Scan a real account, run the demo, refresh prices, estimate a run.",
        epilog=(
            "exit codes: 0 ok, 1 AWS error, 2 bad input, 3 no data, 4 over budget, "
            "130 interrupted, "
            "141 stdout closed (see docs/cli.md)"
        ),
    )
    p.add_argument("--version", action=_VersionAction)
    flags = Flags()
    sub = p.add_subparsers(dest="command", required=True)
    for group in (scan, ledger, demo, prices, estimate, completion):
        group.register(sub, flags)
    return p


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
        args = build_parser().parse_args(argv)
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
