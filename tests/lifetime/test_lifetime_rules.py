"""The maximum-lifetime rules (pure): the tags' grammar, calendar edges, when to warn."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.domain.findings import FindingCode
from costguard.domain.lifetime import LifetimeVerdict, judge_lifetime
from costguard.domain.tags import Tags, parse_expires, parse_max_hours
from tests.support.clock import MIDDAY

GRACE = timedelta(hours=1)
KEY = "123456789012/us-east-1/ec2-instance/i-1"


def judge(
    tags: dict[str, str], started: datetime | None, now: datetime, default: int = 0
) -> LifetimeVerdict:
    return judge_lifetime(
        tags, started, now, default_hours=default, warn_before=GRACE, resource=KEY
    )


@pytest.mark.parametrize(("raw", "hours"), [("72", 72), (" 1 ", 1), ("8760", 8760)])
def test_max_hours_is_a_whole_number_of_hours_up_to_a_year(raw: str, hours: int) -> None:
    assert parse_max_hours(raw) == hours


@pytest.mark.parametrize(
    "raw", ["abc", "0", "-1", "1e9", "1000000000", "8761", "1.5", "", "７２", "٧٢", "72h", "+5"]
)
def test_a_malformed_max_hours_is_refused_with_a_reason(raw: str) -> None:
    # GIVEN a value that is not 1-8760 ASCII digits (zero, negative, scientific, other digits)
    # WHEN parsed  THEN a reason, never a number
    assert isinstance(parse_max_hours(raw), str)


@pytest.mark.parametrize(
    ("raw", "instant"),
    [
        # a bare date runs through the end of that day, UTC: month end rolls to the 1st
        ("2026-11-30", datetime(2026, 12, 1, tzinfo=UTC)),
        ("2026-12-31", datetime(2027, 1, 1, tzinfo=UTC)),
        ("2028-02-29", datetime(2028, 3, 1, tzinfo=UTC)),
        ("20280229", datetime(2028, 3, 1, tzinfo=UTC)),
        ("2026-12-31T23:59:59Z", datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)),
        ("2026-12-31T23:59:59", datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)),
        ("2026-12-01T08:00+02:00", datetime(2026, 12, 1, 6, 0, tzinfo=UTC)),
    ],
)
def test_expires_reads_the_exemption_date_grammar(raw: str, instant: datetime) -> None:
    assert parse_expires(raw) == instant


@pytest.mark.parametrize(
    "raw",
    ["2027-02-29", "12/31/2026", "31.12.2026", "2026-13-01", "tomorrow", "true", "", "２０２６-12-31",
     "2026-12-31T25:00Z"],
)  # fmt: skip
def test_an_expires_in_another_format_or_no_such_day_is_refused(raw: str) -> None:
    assert isinstance(parse_expires(raw), str)


def test_an_expires_past_year_9999_never_comes() -> None:
    assert parse_expires("9999-12-31") is None


def test_max_hours_counts_from_the_start_and_warns_one_grace_period_before_the_end() -> None:
    # GIVEN an instance started at midday with costguard:max-hours=4
    tags = {Tags.MAX_HOURS: "4"}
    end = MIDDAY + timedelta(hours=4)
    # WHEN judged one second before the warning window, at its start, and after the end
    early = judge(tags, MIDDAY, end - GRACE - timedelta(seconds=1))
    warn = judge(tags, MIDDAY, end - GRACE)
    late = judge(tags, MIDDAY, end + timedelta(days=3))
    # THEN not due, then due (the stop never before the end), and due long after
    assert early.ends_at == end and not early.due
    assert warn.ends_at == end and warn.due
    assert late.due and "ended at 2026-11-20T16:00:00Z" in late.reason


def test_expires_at_235959_is_due_from_an_hour_before() -> None:
    tags = {Tags.EXPIRES: "2026-11-30T23:59:59Z"}
    started = datetime(2026, 11, 30, 8, tzinfo=UTC)
    assert not judge(tags, started, datetime(2026, 11, 30, 22, 59, 58, tzinfo=UTC)).due
    assert judge(tags, started, datetime(2026, 11, 30, 22, 59, 59, tzinfo=UTC)).due


def test_both_tags_the_earlier_end_wins() -> None:
    # GIVEN max-hours ending at 16:00 and expires at the end of the day
    v = judge({Tags.MAX_HOURS: "4", Tags.EXPIRES: "2026-11-20"}, MIDDAY, MIDDAY)
    assert v.ends_at == MIDDAY + timedelta(hours=4)
    # AND the other way round
    v = judge({Tags.MAX_HOURS: "48", Tags.EXPIRES: "2026-11-20T13:00Z"}, MIDDAY, MIDDAY)
    assert v.ends_at == MIDDAY + timedelta(hours=1)


@pytest.mark.parametrize(
    ("tags", "code"),
    [
        ({Tags.MAX_HOURS: "abc"}, FindingCode.MALFORMED_MAX_HOURS),
        ({Tags.MAX_HOURS: "0"}, FindingCode.MALFORMED_MAX_HOURS),
        ({Tags.MAX_HOURS: "1e9"}, FindingCode.MALFORMED_MAX_HOURS),
        ({Tags.EXPIRES: "31/12/2026"}, FindingCode.MALFORMED_EXPIRES),
        # before the resource started: a tag copied from an older resource, or a wrong year
        ({Tags.EXPIRES: "2025-11-20"}, FindingCode.MALFORMED_EXPIRES),
        # one good tag does not make a malformed other one a guess
        ({Tags.MAX_HOURS: "1", Tags.EXPIRES: "soon"}, FindingCode.MALFORMED_EXPIRES),
    ],
)
def test_a_malformed_tag_is_a_finding_and_nothing_is_enforced_not_even_the_default(
    tags: dict[str, str], code: FindingCode
) -> None:
    # GIVEN a malformed lifetime tag, long after any default would have ended
    v = judge(tags, MIDDAY, MIDDAY + timedelta(days=30), default=1)
    # THEN a finding naming the resource and the tag, and no lifetime
    assert v.ends_at is None and not v.due
    assert [f.code for f in v.findings] == [code]
    (finding,) = v.findings
    assert finding.resource == KEY and "costguard:" in finding.message


def test_an_expires_in_the_past_but_after_the_start_has_been_reached() -> None:
    v = judge({Tags.EXPIRES: "2026-11-20T13:00Z"}, MIDDAY, MIDDAY + timedelta(days=2))
    assert v.due and not v.findings


def test_a_start_after_now_is_never_judged() -> None:
    # GIVEN a launch time an hour ahead of this run's clock (the clocks disagree)
    v = judge({Tags.MAX_HOURS: "1"}, MIDDAY + timedelta(hours=1), MIDDAY, default=1)
    # THEN no lifetime, and a finding says why
    assert v.ends_at is None and not v.due
    assert [f.code for f in v.findings] == [FindingCode.LIFETIME_NOT_ENFORCED]


def test_the_default_applies_only_without_a_lifetime_tag_and_zero_is_off() -> None:
    later = MIDDAY + timedelta(hours=30)
    assert judge({}, MIDDAY, later, default=24).due
    assert "maxGpuHours" in judge({}, MIDDAY, later, default=24).reason
    assert judge({}, MIDDAY, later, default=0).ends_at is None
    # a tag, even a longer one, wins over the default
    assert not judge({Tags.MAX_HOURS: "48"}, MIDDAY, later, default=24).due


def test_an_unknown_start_enforces_expires_but_not_max_hours() -> None:
    late = MIDDAY + timedelta(days=400)
    assert judge({Tags.EXPIRES: "2026-11-20"}, None, late).due
    v = judge({Tags.MAX_HOURS: "1"}, None, late)
    assert v.ends_at is None
    assert [f.code for f in v.findings] == [FindingCode.LIFETIME_NOT_ENFORCED]
