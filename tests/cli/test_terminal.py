"""Colour and alignment for a person at a terminal, plain text for everything else.

Defect: the CLI had no notion of a terminal: nothing coloured a status, and the demo's
action table padded resource keys to 48 characters, so a longer key pushed its row out of
line.
"""

from __future__ import annotations

import io

import pytest

from costguard.cli import terminal


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stream", "environ", "coloured"),
    [
        (_Tty(), {}, True),
        (_Tty(), {"NO_COLOR": "1"}, False),
        (_Tty(), {"NO_COLOR": ""}, True),  # no-color.org: present *and not empty*
        (_Tty(), {"TERM": "dumb"}, False),
        (io.StringIO(), {}, False),  # a pipe or a file
    ],
)
def test_colour_only_on_a_terminal_that_wants_it(
    stream: io.StringIO, environ: dict[str, str], coloured: bool
) -> None:
    """GIVEN where stdout goes and the environment, WHEN the CLI asks whether to colour,
    THEN only a terminal gets colour, and NO_COLOR (non-empty) or TERM=dumb switch it off."""
    assert terminal.colour_enabled(stream, environ) is coloured


def test_a_coloured_status_keeps_its_column() -> None:
    """GIVEN statuses padded to one width, WHEN coloured, THEN the visible text is the padded
    word, so the escape codes never shift the next column."""
    shown = terminal.status("over", True, 8)
    assert shown.startswith("\033[31m") and shown.endswith("\033[0m")
    assert shown.replace("\033[31m", "").replace("\033[0m", "") == "over    "
    assert terminal.status("over", False, 8) == "over    "


def test_columns_widen_to_their_longest_cell() -> None:
    """GIVEN rows whose keys differ in length, WHEN aligned, THEN every row's next column
    starts at the same place and amounts line up on the right."""
    lines = terminal.columns(
        [
            ["warned", "123456789012/us-east-1/ec2-instance/i-8d9a377613913f91e", "$734.38"],
            ["acted", "123456789012/us-east-1/s3-bucket/demo-scratch", "$0.00"],
        ],
        right=frozenset({2}),
    )
    assert len({len(line) for line in lines}) == 1
    assert lines[1].endswith("  $0.00") and lines[0].endswith("$734.38")


def test_piped_output_is_never_cut() -> None:
    """GIVEN stdout that is not a terminal, WHEN a long summary is fitted, THEN every word is
    printed (a script reads it whole)."""
    assert terminal.width(io.StringIO()) is None
    text = "word " * 100
    assert terminal.fit(text, None) == text
