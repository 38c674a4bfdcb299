"""The ``costguard`` command: scan a real account, run the demo, refresh prices.

Exit codes, the same for every subcommand:

  0    done. A scan where some sources failed still exits 0: the report lists each
       one as a ``scan-failed`` finding, and stderr says which.
  1    AWS error: a call the command itself needs failed (no or expired credentials,
       access denied, throttling, no network); nothing is printed on stdout.
  2    bad input: an option, an environment variable, a profile, a table, a file.
  3    no data: the command finished but read nothing where it needed something.
       ``scan``, ``report``: every source failed (the report is still printed). ``prices
       refresh``: a region returned no prices, so the catalog is not marked fresh.
  4    over budget: ``estimate train --project P`` found that the run would take the
       project's month forecast over its budget (the estimate is still printed).
  130  interrupted (Ctrl-C).
  141  stdout was closed early (``costguard scan --json | head``).

Errors are one line on stderr, ``costguard: ...``, never a traceback.

One module per command group (:mod:`.scan` and :mod:`.org`, :mod:`.report`, :mod:`.ledger`
for ``alerts`` and ``actions``, :mod:`.demo`, :mod:`.prices`, :mod:`.estimate`, :mod:`.guardrails`), each adding
its commands to the parser with ``register``; what they share is :mod:`.common`. None imports
another, except :mod:`.report`, which runs a scan as ``scan`` does: it takes ``scan``'s
public settings and outcome and ``ledger``'s month check rather than a second copy.
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
    from costguard.cli import (
        completion,
        demo,
        estimate,
        guardrails,
        ledger,
        prices,
        report,
        scan,
    )

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
    for group in (scan, report, ledger, demo, prices, estimate, guardrails, completion):
        group.register(sub, flags)
    return p


def _command_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``args`` chose: ``costguard estimate train``'s."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                return _command_parser(chosen, args)
    return parser


def unknown_arguments(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """``unknown option --ledger-region (did you mean --table-region?)``, for a person."""
    import difflib

    known = [o for a in parser._actions if a.help != argparse.SUPPRESS for o in a.option_strings]
    first = extras[0]
    if not first.startswith("-"):
        return f"unexpected argument {first!r} (see {parser.prog} --help)"
    flag = first.split("=", 1)[0]
    near = difflib.get_close_matches(flag, known, n=1, cutoff=0.7)
    hint = f"did you mean {near[0]}?" if near else f"see {parser.prog} --help"
    return f"unknown option {flag} ({hint})"


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
        parser = build_parser()
        args, extras = parser.parse_known_args(argv)
        if extras:
            # argparse names them at the top ("costguard: error: unrecognized arguments"),
            # not in the command that would have taken them, and suggests nothing.
            command = _command_parser(parser, args)
            command.error(unknown_arguments(command, extras))
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
