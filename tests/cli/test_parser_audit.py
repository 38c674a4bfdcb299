"""Every flag, command and help text of ``build_parser()``, read the way a newcomer would.

One spelling per meaning; a flag spelled the same means and validates the same everywhere;
help shows no markup, no internal names, and usage errors no argparse internals.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from collections.abc import Iterator

import pytest

from costguard.cli import build_parser


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, (*path, name))


COMMANDS = list(_commands(build_parser()))


def _flags() -> dict[str, list[tuple[tuple[str, ...], argparse.Action]]]:
    found: dict[str, list[tuple[tuple[str, ...], argparse.Action]]] = defaultdict(list)
    for path, parser in COMMANDS:
        for action in parser._actions:
            for option in action.option_strings:
                found[option].append((path, action))
    return found


def test_the_ledger_region_has_one_name() -> None:
    """Defect: the ledger's region was ``--region`` (alerts, actions), ``--table-region``
    (prices) and ``--ledger-region`` (estimate train), and the last was not even checked.

    GIVEN every command that reads a deployed ledger's table in a region of its choosing,
    WHEN its flags are listed, THEN the region is ``--table-region``, validated as a region,
    and no command knows ``--ledger-region``."""
    flags = _flags()
    assert "--ledger-region" not in flags
    takers = {path for path, _ in flags["--table-region"]}
    assert {
        ("alerts",),
        ("actions",),
        ("estimate", "train"),
        ("prices", "refresh"),
        ("prices", "show"),
    } <= takers
    for _, action in flags["--table-region"]:
        assert getattr(action.type, "__name__", "") == "region_name"
        assert action.dest == "table_region"


def test_a_flag_spelled_alike_is_checked_alike() -> None:
    """Defect: ``estimate train --table`` took any text, while every other ``--table`` was
    checked against DynamoDB's table-name rule; ``--scope ""`` was read as no scope.

    GIVEN a flag several commands take, WHEN their definitions are compared, THEN the same
    argument type checks it everywhere (``--region`` means the regions a command works in,
    always a checked region)."""
    for option, uses in _flags().items():
        kinds = {getattr(a.type, "__qualname__", repr(a.type)) for _, a in uses}
        assert len(kinds) == 1, (option, kinds, [p for p, _ in uses])


def test_every_numeric_flag_has_a_checked_range() -> None:
    """Defect: ``scan --account-workers 0`` (and -1, and 10**20) was accepted.

    GIVEN every flag whose value is a number, WHEN its type is read, THEN it is a checked
    range, never bare ``int`` or ``float``."""
    for path, parser in COMMANDS:
        for action in parser._actions:
            assert action.type not in (int, float), (path, action.option_strings)


@pytest.mark.parametrize(
    ("path", "parser"), COMMANDS, ids=[" ".join(p) or "costguard" for p, _ in COMMANDS]
)
def test_help_shows_no_markup_and_no_internal_names(
    path: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    """Defect: ``costguard --help`` showed the module docstring's RST (``:mod:`.scan```,
    double back-quotes), and a catalog note told users "issue 9".

    GIVEN each command's --help, WHEN read, THEN no reStructuredText roles or literals, no
    issue numbers, no module paths, no argparse dests."""
    text = parser.format_help()
    assert not re.search(r":(mod|func|class|data|meth|attr):`|``", text), text
    assert not re.search(r"\bissue \d+|\battack\d+|costguard\.[a-z_]+\.[a-z_]+", text), text
    assert not re.search(r"\b[a-z]+_command\b", text), text


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            [],
            "costguard: error: choose a command: scan, report, alerts, actions, demo, prices, estimate, guardrails or completion",
        ),
        (["estimate"], "costguard estimate: error: choose a command: train or iteration"),
        (["prices"], "costguard prices: error: choose a command: refresh or show"),
        (
            ["estimate", "trian"],
            "costguard estimate: error: unknown command 'trian' (did you mean train?): choose train or iteration",
        ),
        (
            ["scna"],
            "costguard: error: unknown command 'scna' (did you mean scan?): choose scan, report, alerts, actions, demo, prices, estimate, guardrails or completion",
        ),
    ],
)
def test_a_missing_or_mistyped_command_is_named_in_words(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect: ``costguard estimate`` said ``the following arguments are required:
    estimate_command`` (argparse's internal dest).

    GIVEN a command group without its command, or a misspelt one, WHEN run, THEN exit 2 and
    one line naming the commands to choose from."""
    from costguard.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip() == said


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["estimate", "train", "--params", "7e9", "--tokens", "2e12", "--ledger-region", "x"],
            "costguard estimate train: error: unknown option --ledger-region "
            "(did you mean --table-region?)",
        ),
        (
            ["prices", "show", "--tipe", "g5"],
            "costguard prices show: error: unknown option --tipe (did you mean --type?)",
        ),
        (
            ["scan", "--bogus"],
            "costguard scan: error: unknown option --bogus (see costguard scan --help)",
        ),
        (
            ["scan", "foo"],
            "costguard scan: error: unexpected argument 'foo' (see costguard scan --help)",
        ),
    ],
)
def test_an_unknown_option_is_named_in_its_command_with_a_suggestion(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect: ``costguard scan --bogus`` said ``costguard: error: unrecognized arguments:
    --bogus`` (the top-level parser, no command named), and the renamed ``--ledger-region``
    gave no hint of its new name.

    GIVEN an option the command does not take, WHEN run, THEN exit 2, one line from that
    command, with the nearest option it does take."""
    from costguard.cli import main

    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == said
