"""Hostile values for every flag of every command: refused in one line, never a traceback.

The parser is walked, so a flag added tomorrow is attacked too. Only parsing runs: a value
that passes is a value the command accepts, and nothing reaches AWS.
"""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from costguard.cli import build_parser
from tests.cli.test_parser_audit import COMMANDS

HOSTILE = [
    "",
    " ",
    "\x00",
    "us-east-1\x00",
    "a\nb",
    "x" * 100_000,
    "-1",
    "0",
    "1e309",
    "nan",
    "-inf",
    "9" * 400,
    "١٢",  # Arabic-Indic digits
    "\u202eevil",  # right-to-left override
    "\udcff",  # a lone surrogate, as a non-UTF-8 argv decodes
    "é",
    "us-east-9",
]

FLAGS = [
    (path, action.option_strings[0])
    for path, parser in COMMANDS
    for action in parser._actions
    if action.option_strings and action.nargs != 0 and action.help != argparse.SUPPRESS
]


@pytest.mark.parametrize(("path", "flag"), FLAGS, ids=[f"{' '.join(p)} {f}" for p, f in FLAGS])
def test_a_hostile_value_is_refused_in_one_line_or_taken(path: tuple[str, ...], flag: str) -> None:
    """Defect: ``scan --account-workers 0`` was taken; ``estimate train --ledger-region``
    took any text.

    GIVEN each hostile value, WHEN it is given to the flag, THEN the parser either takes it
    or exits 2 with one line naming the flag; it never raises."""
    for value in HOSTILE:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                build_parser().parse_args([*path, flag, value])
            except SystemExit as exc:
                assert exc.code == 2, (flag, value, exc.code)
                text = err.getvalue()
                assert text.count("\n") == 1 and "Traceback" not in text, text
                assert len(text) < 700, text
                # a refusal says which flag (or, for a required one, what is missing)
                assert flag in text or "required" in text, text


@pytest.mark.parametrize(
    "argv",
    [
        ["scan", "--account-workers", "0"],
        ["scan", "--account-workers", "-1"],
        ["scan", "--account-workers", "100000000000000000000"],
        ["scan", "--role-name", ""],
        ["scan", "--scope", ""],
        ["scan", "--opt-out-tag", ""],
        ["alerts", "--scope", "\x00"],
        ["estimate", "train", "--params", "7e9", "--tokens", "2e12", "--table", ""],
        ["estimate", "train", "--params", "7e9", "--tokens", "2e12", "--table-region", "zz"],
        ["alerts", "--table-region", "us-east-9"],
        ["prices", "refresh", "--pricing-region", "us-west-2"],  # no Price List endpoint there
    ],
)
def test_values_that_used_to_pass_are_refused(argv: list[str]) -> None:
    """Defect: each of these was taken, then failed later (or not at all: an empty --scope
    was read as no scope, and a bad ledger region sent every call to a host nobody runs).

    GIVEN the value, WHEN parsed, THEN exit 2 before any work."""
    with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["scan", "--region", "us-east-1", "--catalog", "a\x00b"],
        ["prices", "refresh", "--region", "us-east-1", "--out", "a\x00b"],
        ["prices", "refresh", "--region", "us-east-1", "--out", "x" * 5000],
        ["prices", "show", "--catalog", ""],
    ],
)
def test_a_path_the_os_would_refuse_is_refused_first(argv: list[str]) -> None:
    """Defect: ``--catalog 'a<NUL>b'`` and ``--out`` with a 5,000-character name passed the
    parser and ended in a traceback (``ValueError: embedded null byte``, ``OSError: File
    name too long``). GIVEN such a path, WHEN parsed, THEN exit 2 naming the flag."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    assert argv[-2] in err.getvalue() and err.getvalue().count("\n") == 1


def test_a_catalog_that_never_ends_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Defect: ``prices show --catalog /dev/zero`` read until memory ran out.

    GIVEN an endless file as the catalog, WHEN shown, THEN exit 2 saying it is too large."""
    from costguard.cli import main

    assert main(["prices", "show", "--catalog", "/dev/zero"]) == 2
    assert "larger than" in capsys.readouterr().err
