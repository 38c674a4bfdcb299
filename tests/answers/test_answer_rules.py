"""Answering a warning (pure): the answers, their times across time zones and DST, the
exemption's bounds, and who may answer."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from costguard.domain.answers import (
    Answer,
    Answerer,
    Refusal,
    clean_reason,
    exemption_until,
    keep_until,
    may_answer,
    parse_answer,
    time_zone,
)
from tests.support.clock import MIDDAY

PARIS = ZoneInfo("Europe/Paris")


def test_keep_4_hours_is_4_hours_from_the_answer() -> None:
    assert keep_until(Answer.KEEP_4H, MIDDAY, PARIS) == MIDDAY + timedelta(hours=4)


@pytest.mark.parametrize(
    ("now", "zone", "until"),
    [
        # Friday 20 November 13:00 in Paris: Saturday 09:00 Paris is 08:00 UTC
        (MIDDAY, "Europe/Paris", datetime(2026, 11, 21, 8, 0, tzinfo=UTC)),
        # 23:30 UTC on the 31st is already 1 January in Tokyo: "tomorrow" is the 2nd there
        (
            datetime(2026, 12, 31, 23, 30, tzinfo=UTC),
            "Asia/Tokyo",
            datetime(2027, 1, 2, 0, 0, tzinfo=UTC),
        ),
        # the night the clocks go forward in Paris (29 March 2026): still 09:00 there
        (
            datetime(2026, 3, 28, 12, 0, tzinfo=UTC),
            "Europe/Paris",
            datetime(2026, 3, 29, 7, 0, tzinfo=UTC),
        ),
        # 29 February of a leap year, in New York
        (
            datetime(2028, 2, 28, 23, 59, 59, tzinfo=UTC),
            "America/New_York",
            datetime(2028, 2, 29, 14, 0, tzinfo=UTC),
        ),
    ],
)
def test_keep_until_tomorrow_is_9_am_on_the_deployments_wall_clocks(
    now: datetime, zone: str, until: datetime
) -> None:
    tz = time_zone(zone)
    assert not isinstance(tz, Refusal)
    assert keep_until(Answer.KEEP_UNTIL_TOMORROW, now, tz) == until
    assert keep_until(Answer.KEEP_UNTIL_TOMORROW, now, tz).astimezone(tz).hour == 9


def test_an_unknown_time_zone_is_a_refusal_not_a_crash() -> None:
    assert isinstance(time_zone("Mars/Olympus_Mons"), Refusal)
    assert isinstance(time_zone("../../etc/passwd"), Refusal)


def test_an_exemption_runs_through_its_end_date_and_at_most_90_days() -> None:
    today = MIDDAY.date()
    assert exemption_until(today, MIDDAY) == datetime(2026, 11, 21, tzinfo=UTC)
    assert exemption_until(today + timedelta(days=90), MIDDAY) == datetime(2027, 2, 19, tzinfo=UTC)
    assert isinstance(exemption_until(today + timedelta(days=91), MIDDAY), Refusal)
    assert isinstance(exemption_until(date(2026, 11, 19), MIDDAY), Refusal)


def test_a_reason_is_one_printable_line() -> None:
    assert clean_reason("  running the\nbenchmark \u202e until Friday ") == (
        "running the benchmark until Friday"
    )
    assert isinstance(clean_reason("   "), Refusal)
    assert isinstance(clean_reason(None), Refusal)
    assert isinstance(clean_reason("x" * 501), Refusal)


def test_only_the_answers_costguard_knows_are_taken() -> None:
    assert parse_answer("keep-4h") is Answer.KEEP_4H
    for raw in ("KEEP-4H", "delete-everything", None, 4, ["act-now"]):
        assert isinstance(parse_answer(raw), Refusal)


def test_the_owners_and_the_admins_may_answer_and_nobody_else() -> None:
    owners = ("U024BE7LH", "Maria@Example.com")
    admins = {"W0ADMIN12"}
    assert may_answer(Answerer("U024BE7LH", "slack"), owners, admins)
    assert may_answer(Answerer("maria@example.com", "email"), owners, admins)
    assert may_answer(Answerer("W0ADMIN12", "slack"), owners, admins)
    # a Slack ID is exact: another workspace member, or the ID in other case, is not the owner
    assert not may_answer(Answerer("U024BE7LX", "slack"), owners, admins)
    assert not may_answer(Answerer("u024be7lh", "slack"), owners, admins)
    assert not may_answer(Answerer("mallory@example.com", "email"), owners, admins)
    assert not may_answer(Answerer("U024BE7LH", "slack"), (), set())
