"""What every ``costguard`` subcommand module shares: the exit codes and the error type.

Kept out of :mod:`costguard.cli` on purpose. ``python -m costguard.cli`` runs that file as
``__main__``; a subcommand module that imported ``costguard.cli`` for its error type would
load a second copy of it, whose ``CommandError`` is not the class ``failure()`` checks,
and every usage error would become a traceback with exit 1. A module that is never run as
``__main__`` has one copy, whichever way the command starts.
"""

from __future__ import annotations

from datetime import datetime

EXIT_OK = 0
EXIT_AWS = 1
EXIT_USAGE = 2
EXIT_NO_DATA = 3
#: ``estimate train --project``: the run would take the project's forecast over budget.
EXIT_OVER_BUDGET = 4
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `... | head`


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
    from costguard import events  # noqa: PLC0415 - pydantic only when a command asks the time

    return events.CLOCK()
