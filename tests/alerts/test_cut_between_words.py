"""Alert texts cut to a channel's limit are cut between words.

Defect: Slack headers and sections, and SNS email subjects, were cut at the limit's last
character: ``... over its $12,`` (twelve dollars?) or ``... arn:aws:s``.
"""

from __future__ import annotations

import pytest

from costguard.rendering import fit_mrkdwn, fit_plain

TEXT = (
    "At the current $120.40/h, llm-pretraining will spend $46,837.70 in 2026-11, "
    "$34,837.70 over its $12,000.00 budget; role arn:aws:iam::123456789012:role/costguard-x"
)
TOKENS = TEXT.split()


@pytest.mark.parametrize("fit", [fit_plain, fit_mrkdwn])
def test_a_cut_alert_text_shows_only_whole_words(fit: object) -> None:
    """GIVEN a summary with amounts and an ARN, WHEN fitted to every limit shorter than it,
    THEN it fits, ends with an ellipsis, and every word it shows is whole."""
    for limit in range(12, len(TEXT)):
        shown = fit(TEXT, limit)  # type: ignore[operator]
        assert len(shown) <= limit and shown.endswith("…"), (limit, shown)
        words = shown[:-1].split()
        assert words == TOKENS[: len(words)], (limit, shown)


def test_an_email_subject_is_cut_between_words() -> None:
    """GIVEN an alert whose title is longer than SNS's 100-character subject, WHEN the
    subject is made, THEN it is ASCII, at most 100 characters, and ends on a whole word."""
    from dataclasses import replace

    from costguard.rendering import email_subject
    from tests.unit.test_rendering import big_alert

    alert = replace(big_alert(1, 1, "p"), title=TEXT)
    subject = email_subject(alert)
    assert len(subject) <= 100 and subject.isascii() and subject.endswith(" ~")
    assert "$12," not in subject or "$12,000.00" in subject
