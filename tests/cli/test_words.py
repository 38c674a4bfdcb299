"""The words CostGuard prints for people: counts, durations, cut lines, labels.

Each test names the defect a newcomer found, with the text they saw.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from costguard.domain.text import duration, labelled, plural, truncate


@pytest.mark.parametrize(
    ("n", "word", "said"),
    [
        (1, "object", "1 object"),
        (2, "object", "2 objects"),
        (0, "account", "0 accounts"),
        (1024, "object", "1,024 objects"),
        (3, "batch", "3 batches"),
        (2, "policy", "2 policies"),
        (1, "more resource", "1 more resource"),
        (5, "account-region", "5 account-regions"),
    ],
)
def test_a_count_takes_the_plural_it_needs(n: int, word: str, said: str) -> None:
    """Defect: ``1 objects``, ``1 alerts``, ``1 instances seeded``, ``2 change(s)``.

    GIVEN a count and a noun, WHEN it is said, THEN singular for one, plural otherwise."""
    assert plural(n, word) == said


@pytest.mark.parametrize(
    ("span", "said"),
    [
        (timedelta(days=1), "1 day"),
        (timedelta(hours=1), "1 h"),
        (timedelta(hours=3, minutes=20), "3 h 20 min"),
        (timedelta(days=2, hours=4), "2 days 4 h"),
        (timedelta(minutes=45), "45 min"),
        (timedelta(seconds=30), "30 s"),
        (timedelta(0), "0 s"),
        (timedelta(hours=-3), "-3 h"),
    ],
)
def test_a_duration_reads_as_a_person_says_it(span: timedelta, said: str) -> None:
    """Defect: the demo said ``Stale objects, 1 day, 0:00:00 later`` (``str(timedelta)``).

    GIVEN a span, WHEN it is said, THEN in words, to its two largest units."""
    assert duration(span) == said


@pytest.mark.parametrize(
    ("label", "text", "said"),
    [
        ("busy", "busy: gpu0 reached 92.0%", "busy: gpu0 reached 92.0%"),
        (
            "warned",
            "warned; acting after 2026-11-19T14:00:00Z",
            "warned; acting after 2026-11-19T14:00:00Z",
        ),
        (
            "idle",
            "idle for 60 minutes: every GPU under 5%",
            "idle for 60 minutes: every GPU under 5%",
        ),
        ("acted", "deleted 2 objects", "acted: deleted 2 objects"),
        ("skipped", "exempt: costguard:exempt", "skipped: exempt: costguard:exempt"),
    ],
)
def test_a_label_is_not_said_twice(label: str, text: str, said: str) -> None:
    """Defect: ``busy-gpu-notebook: busy: busy: gpu0 ...`` and ``s3://demo-scratch: warned:
    warned; acting after ...``.

    GIVEN a verdict and a reason that already starts with it, WHEN labelled, THEN once."""
    assert labelled(label, text) == said


@pytest.mark.parametrize(
    ("text", "width", "cut"),
    [
        (
            "At the current $120.40/h, llm-pretraining will spend $46,837.70 in 2026-11, "
            "$34,837.70 over its $12,000.00 budget.",
            95,
            "At the current $120.40/h, llm-pretraining will spend $46,837.70 in 2026-11, "
            "$34,837.70 over …",
        ),
        (
            "reading its regions failed with AccessDenied: User: "
            "arn:aws:sts::123456789012:assumed-role/costguard-hub-scan/x is not authorized",
            60,
            "reading its regions failed with AccessDenied: User …",
        ),
    ],
)
def test_a_cut_line_drops_whole_words(text: str, width: int, cut: str) -> None:
    """Defect: summaries cut mid-word: ``over its $12,`` and ``AccessDenied: User: arn:aws:s``.

    GIVEN a line too long for its width, WHEN it is cut, THEN whole tokens go and an
    ellipsis says so; no amount or ARN is shown in part."""
    assert truncate(text, width) == cut


def test_the_domain_clip_keeps_arns_whole() -> None:
    """Defect: the Organization demo's finding ended ``AccessDenied: User: arn:aws:s``:
    the domain's ``clip`` (alert lines, findings) cut at a character count.

    GIVEN a failure naming an ARN, WHEN clipped to a finding's line, THEN the ARN is whole
    or absent."""
    from costguard.domain.alerts import clip

    arn = "arn:aws:sts::123456789012:assumed-role/costguard-hub-scan/costguard-hub"
    text = f"account 929432429208: reading its regions failed with AccessDenied: User: {arn} x"
    for width in range(10, len(text)):
        shown = clip(text, width)
        assert len(shown) <= width
        assert arn in shown or "arn:" not in shown, shown


def test_settings_one_line_cuts_between_words() -> None:
    """Defect: an error line was cut at 200 characters wherever that fell (``one_line``).

    GIVEN an error naming an amount near its limit, WHEN flattened to one line, THEN the
    amount is whole or absent."""
    from costguard.settings import one_line

    text = "budget " * 27 + "$12,000.00 over"
    shown = one_line(text, 200)
    assert len(shown) <= 200 and shown.endswith("…")
    assert "$12," not in shown or "$12,000.00" in shown
