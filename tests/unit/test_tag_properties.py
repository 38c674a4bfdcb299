"""Properties of the tag contract over arbitrary text: no value of any tag may raise;
each one becomes a value or a finding that names the resource and the tag."""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal

from hypothesis import example, given, settings
from hypothesis import strategies as st

from costguard.domain.findings import FindingCode
from costguard.domain.tags import (
    MAX_BUDGET,
    MAX_PROJECT_LEN,
    Exemption,
    _invisible,
    normalise_project,
    parse_budget,
    parse_exempt,
    parse_owners,
    parse_project,
    read_tags,
)
from tests.support.tag_strategies import KEYS, tag_sets

REF = "eu-west-1/ec2-instance/i-0123456789abcdef0"
PROJECT_KEYS = KEYS.project


EMAIL = re.compile(r"[A-Za-z0-9_%+'-]+(\.[A-Za-z0-9_%+'-]+)*@([a-z0-9-]+\.)+[a-z0-9-]+")
SLACK = re.compile(r"[UW][A-Z0-9]{8,20}")


@settings(max_examples=200)
@given(tag_sets)
@example({"costguard:exempt": "9999-12-31"})
@example({"costguard:exempt": "9999-12-31T23:00:00-05:00"})
@example({"costguard:exempt": "0001-01-01T00:00:00+01:00"})
@example({"costguard:budget": "５０００", "Project": "vision\u200b"})
@example(
    {"costguard:owner": "a@b.io\r\nURGENT from AWS Billing", "costguard:project": "計算" * 128}
)
def test_every_tag_value_becomes_a_value_or_a_finding_naming_resource_and_tag(
    tags: dict[str, str],
) -> None:
    # WHEN any tags are read, THEN nothing raises
    parsed = read_tags(REF, tags, KEYS)
    assert read_tags(REF, tags, KEYS) == parsed  # and the cached answer is the same

    by_code: dict[FindingCode, list[str]] = {}
    for finding in parsed.findings:
        # every finding names the resource and one tag that it carries
        assert finding.resource == REF
        key = finding.message.removeprefix("tag ").split("=", 1)[0]
        assert key in tags, finding.message
        by_code.setdefault(finding.code, []).append(key)
        # and a finding can carry no invisible or line-breaking character into an alert
        assert not any(_invisible(ch) for ch in finding.message), finding.message
        assert len(finding.message) < 1_000

    project_key = next((k for k in PROJECT_KEYS if k in tags), None)
    if project_key is None:
        assert parsed.project is None
    elif parsed.project is None:
        assert by_code[FindingCode.MALFORMED_PROJECT] == [project_key]
    else:
        assert FindingCode.MALFORMED_PROJECT not in by_code
        name = parsed.project
        assert 1 <= len(name) <= MAX_PROJECT_LEN
        assert name == name.strip() and "  " not in name
        assert not any(_invisible(ch) for ch in name)
        assert unicodedata.is_normalized("NFKC", name)
        assert normalise_project(name) == name  # idempotent: one name, one ledger row

    if KEYS.budget not in tags:
        assert parsed.budget is None
    elif parsed.budget is None:
        assert by_code[FindingCode.MALFORMED_BUDGET] == [KEYS.budget]
    else:
        assert FindingCode.MALFORMED_BUDGET not in by_code
        assert Decimal("0.01") <= parsed.budget <= MAX_BUDGET
        assert parsed.budget == parsed.budget.quantize(Decimal("0.01"))

    raw_owner = tags.get(KEYS.owner)
    for owner in parsed.owners:
        assert EMAIL.fullmatch(owner) or SLACK.fullmatch(owner), owner
    assert parsed.owner == (", ".join(parsed.owners) or None)
    if raw_owner is None or not raw_owner.strip():
        assert parsed.owners == () and FindingCode.MALFORMED_OWNER not in by_code
    elif not parsed.owners:
        assert by_code[FindingCode.MALFORMED_OWNER] == [KEYS.owner]

    raw_exempt = tags.get(KEYS.exempt)
    if raw_exempt is None:
        assert parsed.exemption is None
    elif parsed.exemption is None:
        assert raw_exempt.strip().lower() in {"false", "no"}
    else:
        until = parsed.exemption.until
        assert until is None or until.utcoffset() == timedelta(0)
    if FindingCode.MALFORMED_EXEMPT in by_code:
        assert parsed.exemption == Exemption()  # fail safe


@given(
    st.text(
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF) | st.characters(), max_size=64
    )
)
def test_parsers_survive_lone_surrogates(raw: str) -> None:
    # A JSON response can carry "\ud800"; the parsers must still answer.
    parse_budget(raw)
    parse_exempt(raw)
    parse_owners(raw)
    name, why = parse_project(raw)
    assert (name is None) != (why is None)
    if name is not None:
        assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in name)


# --- One instant, one meaning ------------------------------------------------------------

offsets = st.integers(-(23 * 60 + 59), 23 * 60 + 59).map(lambda m: timedelta(minutes=m))
#: Wall-clock times, naive on purpose: the offset is drawn separately, and together they
#: reach instants outside datetime's range, which is the point.
walls = st.datetimes()
WALL_MIN, WALL_MAX = datetime.min, datetime.max  # noqa: DTZ901 - wall clock, see above
US = timedelta(microseconds=1)


def wall(text: str) -> datetime:
    return datetime.fromisoformat(text)


def spell(local: datetime, offset: timedelta, compact: bool) -> str:
    """``local`` at ``offset``, in ISO-8601 basic (compact) or extended form."""
    sign = "-" if offset < timedelta(0) else "+"
    hh, mm = divmod(abs(offset) // timedelta(minutes=1), 60)
    d, t = ("", "") if compact else ("-", ":")
    return (
        f"{local.year:04}{d}{local.month:02}{d}{local.day:02}"
        f"T{local.hour:02}{t}{local.minute:02}{t}{local.second:02}.{local.microsecond:06}"
        f"{sign}{hh:02}{t}{mm:02}"
    )


@settings(max_examples=300)
@given(walls, offsets)
@example(wall("9999-12-31T23:00"), timedelta(hours=-5))
@example(wall("0001-01-01T00:00"), timedelta(hours=1))
@example(WALL_MAX, -timedelta(hours=23, minutes=59))
@example(WALL_MIN, timedelta(hours=23, minutes=59))
def test_compact_and_extended_spellings_of_any_instant_agree_and_are_clamped(
    local: datetime, offset: timedelta
) -> None:
    compact = parse_exempt(spell(local, offset, compact=True))
    extended = parse_exempt(spell(local, offset, compact=False))
    assert compact == extended
    assert isinstance(extended, Exemption)
    # The instant itself, computed in integers (outside datetime's range), then clamped.
    us = (local - WALL_MIN) // US - offset // US
    if us > (WALL_MAX - WALL_MIN) // US:
        assert extended == Exemption()
    else:
        assert extended == Exemption(WALL_MIN.replace(tzinfo=UTC) + max(us, 0) * US)
        if us >= 0:  # and where Python can represent it, the same instant as Python says
            assert extended.until == local.replace(tzinfo=timezone(offset))


@given(st.dates())
def test_a_bare_date_in_either_spelling_runs_through_that_day(day: date) -> None:
    extended = f"{day.year:04}-{day.month:02}-{day.day:02}"
    compact = extended.replace("-", "")
    parsed = parse_exempt(extended)
    assert parsed == parse_exempt(compact)
    assert isinstance(parsed, Exemption)
    if parsed.until is None:  # the day after 9999-12-31 cannot be written: forever
        assert day == date.max
    else:
        assert parsed.until == datetime.combine(day, time(), UTC) + timedelta(days=1)


# --- Budgets: every whole-cent amount in range, in every documented spelling --------------


@given(st.decimals(min_value=Decimal("0.01"), max_value=MAX_BUDGET, places=2))
def test_every_documented_spelling_of_a_budget_reads_back_the_amount(amount: Decimal) -> None:
    plain = f"{amount:f}"
    grouped = f"{amount:,f}"
    for spelling in (plain, grouped, f"${plain}", f"$ {grouped}", f" {plain} "):
        assert parse_budget(spelling) == amount, spelling
