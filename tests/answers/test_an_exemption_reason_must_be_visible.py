"""An exemption needs a reason a person can read in the audit trail: one made only of
invisible characters (zero-width spaces, bidi marks, control characters, lone combining
marks) is no reason, and is sent back like an empty one."""

from __future__ import annotations

import pytest

from costguard.domain.answers import Refusal, clean_reason


@pytest.mark.parametrize(
    "raw",
    [
        "\u200b\u200b\u200b",  # zero-width spaces
        "\u202e\u200f",  # right-to-left override, right-to-left mark
        "\x00\x07\x1b",  # control characters
        "\ufeff",  # a byte-order mark
        "\u0301\u0301",  # combining accents on nothing
        "\u2028\u2029",  # line and paragraph separators
    ],
)
def test_a_reason_of_invisible_characters_is_no_reason(raw: str) -> None:
    """GIVEN an Exempt… dialog (or link page) whose reason holds only invisible characters
    WHEN the reason is cleaned for the audit
    THEN it is refused as "an exemption needs a reason".

    Defect: the blank check ran before the invisible characters were replaced, so the
    exemption was taken with an empty reason in the audit trail.
    """
    assert isinstance(clean_reason(raw), Refusal)


def test_a_reason_with_some_visible_text_keeps_only_that_text() -> None:
    assert clean_reason("\u200bthesis\u202e run\n") == "thesis run"
    assert clean_reason("e\u0301te\u0301") == "e\u0301te\u0301"
