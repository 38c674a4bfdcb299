"""Properties of the shared word helpers: a cut line never exceeds its width and never shows
part of a number, a money amount, an ARN or a resource id.

Defect: summaries were cut at a fixed character count, so a reader saw ``over its $12,``
(twelve dollars?) and ``arn:aws:s`` (which ARN?).
"""

from __future__ import annotations

import os
import re
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from costguard.domain.text import ELLIPSIS, duration, truncate
from tests.property.conftest import CASES

EXAMPLES = int(os.environ.get("SWEEP_PROPERTY_EXAMPLES", "60")) * 5

#: Tokens a person must never see in part.
protected = st.one_of(
    st.decimals(min_value=0, max_value=10**9, places=2).map(lambda d: f"${d:,}"),
    st.integers(-(10**12), 10**12).map(lambda n: f"{n:,}"),
    st.floats(0, 1e6, allow_nan=False).map(lambda f: f"{f:.4f}"),
    st.from_regex(
        r"arn:aws:(iam|sts|s3|ec2)::[0-9]{12}:[a-z-]{1,12}/[a-z0-9-]{1,20}", fullmatch=True
    ),
    st.from_regex(r"(i|vol|snap)-[0-9a-f]{17}", fullmatch=True),
    st.from_regex(r"[0-9]{12}/us-east-1/ec2-instance/i-[0-9a-f]{8}", fullmatch=True),
)
words = st.one_of(
    protected,
    st.text(alphabet=st.characters(blacklist_categories=("Zs", "Cc")), min_size=1, max_size=12),
    st.sampled_from(["over", "its", "budget", "-", "(", "x,", "AccessDenied:", "é", "\U0001f600"]),
)
separators = st.sampled_from([" ", "  ", "\t", " \n "])
sentences = st.lists(st.tuples(words, separators), min_size=1, max_size=30).map(
    lambda parts: "".join(w + s for w, s in parts).rstrip()
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(text=sentences, width=st.integers(0, 200), ellipsis=st.sampled_from([ELLIPSIS, "..."]))
def test_truncation_never_exceeds_the_width_nor_cuts_a_token(
    text: str, width: int, ellipsis: str
) -> None:
    """GIVEN any line of words, numbers, amounts and ARNs, WHEN it is cut to a width,
    THEN it fits, it is the line itself when that fits, and otherwise every token it shows
    is a whole token of the line (bar sentence punctuation after it), before the ellipsis."""
    CASES["count"] += 1
    cut = truncate(text, width, ellipsis)

    assert len(cut) <= width
    if len(text) <= width:
        assert cut == text
        return
    assert cut.endswith(ellipsis[: max(width, 0)])
    shown = cut[: -len(ellipsis)].rstrip() if cut.endswith(ellipsis) else ""
    whole = text.split()
    for i, token in enumerate(shown.split()):
        last = i == len(shown.split()) - 1
        assert token == whole[i] or (last and whole[i].rstrip(",;:") == token), (token, text)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    before=st.lists(st.sampled_from(["over", "its", "spend", "a"]), max_size=8),
    token=protected,
    after=st.lists(st.sampled_from(["budget", "now", "x"]), max_size=4),
    width=st.integers(1, 120),
)
def test_a_number_or_arn_is_shown_whole_or_not_at_all(
    before: list[str], token: str, after: list[str], width: int
) -> None:
    """GIVEN a line holding an amount, a number or an ARN, WHEN it is cut anywhere, THEN
    the line shows that token whole or not at all (never ``$12,`` for ``$12,000.00``)."""
    CASES["count"] += 1
    text = " ".join([*before, token, *after])
    cut = truncate(text, width)
    others = [t for t in cut.split() if t != ELLIPSIS and t not in before and t not in after]
    assert all(t == token for t in others), (cut, token)


@settings(max_examples=EXAMPLES, deadline=None)
@given(seconds=st.integers(-(10**8), 10**8))
def test_a_duration_reads_as_words(seconds: int) -> None:
    """GIVEN any span, WHEN it is said, THEN it has one or two units in words, never
    ``1 day, 0:00:00``."""
    CASES["count"] += 1
    said = duration(timedelta(seconds=seconds))
    assert ":" not in said
    assert re.fullmatch(r"-?[0-9,]+ (day|days|h|min|s)( [0-9]+ (h|min|s))?", said), said
