"""Run the ``costguard`` command in this process, as a test would run it in a child one.

A child process proves the entry point starts (each entry point keeps one such test); for
the rest, the same ``main`` called here with the same arguments, environment and clock
gives the same exit code and output, without a second interpreter importing boto3.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from costguard_demo.plumbing import borrowed_environ
from tests.support.clock import clock_at


@dataclass(frozen=True)
class Done:
    """What ``subprocess.run(..., capture_output=True, text=True)`` would have returned."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def environment(changes: Mapping[str, str | None]) -> Iterator[None]:
    """``os.environ`` with ``changes`` (None: unset), restored after."""
    with borrowed_environ(changes):
        for key, value in changes.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield


def costguard(*args: str, at: datetime, env: Mapping[str, str | None] | None = None) -> Done:
    """``costguard *args`` in this process, its clock starting at ``at``."""
    from costguard.cli import main

    out, err = io.StringIO(), io.StringIO()
    with (
        environment(env or {}),
        clock_at(at),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = main(list(args))
    return Done(code, out.getvalue(), err.getvalue())
