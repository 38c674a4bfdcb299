"""A Slack timestamp a hostile caller picks: whatever its value, the request is refused with
401 like any stale one, never answered with a crash (a Function URL then shows a 502 and the
log a traceback instead of the reason)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from costguard.domain.signatures import SLACK_MAX_SKEW, slack_signature, verify_slack
from costguard.handlers.answer import process
from costguard.services.answers import HttpRequest
from tests.answers.test_answer_desk import SIGNING, Desk, button_payload, slack_request
from tests.answers.test_answer_endpoint import function_url_event
from tests.support.clock import MIDDAY


def signed_at(timestamp: str) -> HttpRequest:
    sent = slack_request(button_payload())
    return HttpRequest(
        "POST",
        "/slack",
        {
            "x-slack-request-timestamp": timestamp,
            "x-slack-signature": slack_signature(SIGNING, timestamp, sent.body),
        },
        sent.body,
    )


@pytest.mark.parametrize(
    "timestamp",
    [
        "253402300800",  # 10000-01-01: past datetime's range
        "999999999999",  # the longest all-digit value the check lets through
        "0",
        "000000000000",
    ],
)
def test_a_timestamp_beyond_the_calendar_is_refused_as_stale(timestamp: str) -> None:
    """GIVEN a correctly signed request whose timestamp is a 12-digit number of seconds that
    no calendar date has (year 10000 and later)
    WHEN the endpoint receives it
    THEN it is refused with 401 and the reason, and nothing is queued.

    Defect: ``datetime.fromtimestamp`` raised ``ValueError: year 33658 is out of range``
    out of ``verify_slack``, so the Function URL answered 502 with a traceback in the log.
    """
    desk = Desk()
    answer = process(function_url_event(signed_at(timestamp)), desk.desk, MIDDAY)
    assert answer["statusCode"] == 401
    assert "5 minutes" in answer["body"]
    assert desk.queue.submitted == []


def test_exactly_five_minutes_either_way_is_taken_and_a_second_more_is_not() -> None:
    """GIVEN requests signed 300 s and 301 s from the clock, either way
    WHEN they are verified
    THEN 300 s is taken (Slack's bound is "more than five minutes") and 301 s refused."""
    body = b"payload=%7B%7D"

    def verdict(at: datetime) -> object:
        ts = str(int(at.timestamp()))
        return verify_slack(SIGNING, ts, slack_signature(SIGNING, ts, body), body, MIDDAY)

    assert verdict(MIDDAY - SLACK_MAX_SKEW) is None
    assert verdict(MIDDAY + SLACK_MAX_SKEW) is None
    assert verdict(MIDDAY - SLACK_MAX_SKEW - timedelta(seconds=1)).status == 401  # type: ignore[attr-defined]
    assert verdict(MIDDAY + SLACK_MAX_SKEW + timedelta(seconds=1)).status == 401  # type: ignore[attr-defined]
