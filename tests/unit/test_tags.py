from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costguard.domain.findings import FindingCode
from costguard.domain.tags import (
    Exemption,
    TagKeys,
    normalise_project,
    parse_budget,
    parse_exempt,
    read_tags,
)


@pytest.mark.parametrize(
    ("raw", "amount"),
    [
        ("5000", Decimal("5000")),
        ("5000.50", Decimal("5000.50")),
        ("5,000", Decimal("5000")),
        ("$5000", Decimal("5000")),
        (" $ 1,250,000.75 ", Decimal("1250000.75")),
    ],
)
def test_accepts_the_documented_budget_spellings(raw: str, amount: Decimal) -> None:
    assert parse_budget(raw) == amount


@pytest.mark.parametrize(
    "raw",
    [
        "abc",
        "-5",
        "1e309",
        "",
        "  ",
        "0",
        "5,00",
        "5.000,00",
        "NaN",
        "Infinity",
        "$",
        "5000 USD",
        "12,3456",
    ],
)
def test_rejects_anything_that_is_not_a_plain_positive_amount(raw: str) -> None:
    assert isinstance(parse_budget(raw), str)


def test_malformed_budget_is_a_finding_naming_resource_and_value() -> None:
    # GIVEN a resource tagged costguard:budget=abc
    tags = {"costguard:project": "vision", "costguard:budget": "abc"}
    # WHEN its tags are read
    parsed = read_tags("us-east-1/ec2-instance/i-1", tags, TagKeys())
    # THEN the project still counts, the budget is ignored, and the finding names both
    assert parsed.project == "vision"
    assert parsed.budget is None
    (finding,) = parsed.findings
    assert finding.code is FindingCode.MALFORMED_BUDGET
    assert finding.resource == "us-east-1/ec2-instance/i-1"
    assert "costguard:budget='abc'" in finding.message


def test_project_falls_back_to_Project_then_project_in_order() -> None:
    keys = TagKeys()
    assert read_tags("r", {"Project": "A", "project": "b"}, keys).project == "A"
    assert read_tags("r", {"project": "b"}, keys).project == "b"
    assert read_tags("r", {"costguard:project": "c", "Project": "A"}, keys).project == "c"


def test_project_names_are_free_text_and_unicode_normalised() -> None:
    composed = "caf\u00e9 team / 計算 #1"
    decomposed = "cafe\u0301 team / 計算 #1"
    assert normalise_project(decomposed) == normalise_project(composed) == composed
    assert normalise_project("x" * 256) == "x" * 256
    assert normalise_project("x" * 257) is None
    assert normalise_project("   ") is None
    assert normalise_project("bad\x00name") is None


def test_exempt_true_is_permanent_and_a_date_runs_through_that_day() -> None:
    assert parse_exempt("true") == Exemption()
    assert parse_exempt("false") is None
    day = parse_exempt("2026-12-31")
    assert isinstance(day, Exemption)
    assert day.active(datetime(2026, 12, 31, 23, 59, tzinfo=UTC))
    assert not day.active(datetime(2027, 1, 1, 0, 0, tzinfo=UTC))
    moment = parse_exempt("2026-12-01T10:00:00+02:00")
    assert isinstance(moment, Exemption)
    assert moment.until == datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def test_malformed_exempt_fails_safe_as_exempt_with_a_finding() -> None:
    parsed = read_tags("r", {"costguard:exempt": "next tuesday"}, TagKeys())
    assert parsed.exemption == Exemption()
    assert parsed.findings[0].code is FindingCode.MALFORMED_EXEMPT


@given(st.text(max_size=40))
def test_budget_parser_never_raises(raw: str) -> None:
    result = parse_budget(raw)
    assert isinstance(result, (Decimal, str))
    if isinstance(result, Decimal):
        assert result > 0


# --- Exemptions: total over the whole calendar, one meaning per instant -----------------

FOREVER = Exemption()
END_OF_TIME = datetime.max.replace(tzinfo=UTC)


@pytest.mark.parametrize(
    "raw",
    ["9999-12-31", "99991231", "9999-12-31T23:00:00-05:00", "9999-12-31T23:59:59.999999-23:59"],
)
def test_exempts_for_good_when_the_date_is_past_the_end_of_the_calendar(raw: str) -> None:
    # GIVEN an exemption written as a far-future date, a natural "forever"
    # WHEN it is parsed (it raised OverflowError and failed every scan before)
    parsed = read_tags("us-east-1/ec2-instance/i-1", {"costguard:exempt": raw}, TagKeys())
    # THEN it is a permanent exemption and no finding
    assert parsed.exemption == FOREVER
    assert parsed.findings == ()


def test_keeps_the_last_representable_instant_as_a_dated_exemption() -> None:
    assert parse_exempt("9999-12-31T23:59:59.999999Z") == Exemption(END_OF_TIME)


@pytest.mark.parametrize("raw", ["0001-01-01T00:00:00+01:00", "00010101T000000+2359"])
def test_expires_an_exemption_that_ends_before_year_one_utc(raw: str) -> None:
    # GIVEN an instant before 0001-01-01T00:00Z (it raised OverflowError before)
    parsed = parse_exempt(raw)
    # THEN it is an exemption that has already expired, not a crash
    assert isinstance(parsed, Exemption)
    assert not parsed.active(datetime(2026, 11, 20, tzinfo=UTC))


@pytest.mark.parametrize(
    ("compact", "extended"),
    [
        ("20261231", "2026-12-31"),
        ("20261231T120000Z", "2026-12-31T12:00:00Z"),
        ("20261231T1200+0100", "2026-12-31T12:00+01:00"),
        ("20261231t120000.5z", "2026-12-31 12:00:00,500000+00:00"),
        ("2026-12-31T24:00", "2027-01-01T00:00:00Z"),
    ],
)
def test_compact_and_extended_spellings_of_one_instant_mean_the_same(
    compact: str, extended: str
) -> None:
    assert parse_exempt(compact) == parse_exempt(extended)
    assert isinstance(parse_exempt(compact), Exemption)


def test_a_compact_date_runs_through_the_end_of_that_day() -> None:
    # GIVEN costguard:exempt=20261231 (it ended at the *start* of the day before)
    day = parse_exempt("20261231")
    assert isinstance(day, Exemption)
    # THEN the resource is exempt all of 31 December, UTC
    assert day.active(datetime(2026, 12, 31, 23, 59, tzinfo=UTC))
    assert not day.active(datetime(2027, 1, 1, tzinfo=UTC))


@pytest.mark.parametrize(
    "raw",
    [
        "2026-12-31X12:00",  # fromisoformat on 3.11 takes any separator
        "2026-W53-4",  # ... and week dates
        "2026W534",
        "2026-12-31T12:00+24:00",
        "2026-12-31T12:00-2400",
        "2026-12-31T12:60",
        "2026-12-31T23:59:60",
        "2026-12-31T24:01",
        "2026-02-29",
        "0000-01-01",
        "２０２６-12-31",
        "2026-1231",
        "2026-12-31Z",
    ],
)
def test_refuses_spellings_outside_the_documented_grammar(raw: str) -> None:
    parsed = read_tags("r", {"costguard:exempt": raw}, TagKeys())
    assert parsed.exemption == FOREVER  # fail safe
    (finding,) = parsed.findings
    assert finding.code is FindingCode.MALFORMED_EXEMPT
    assert "costguard:exempt=" in finding.message


# --- Budgets: ASCII digits, whole cents --------------------------------------------------


@pytest.mark.parametrize("raw", ["５０００", "1٠0", "١٠٠", "5,٠٠0", "$５"])
def test_refuses_budgets_written_with_non_ascii_digits(raw: str) -> None:
    parsed = read_tags("r", {"costguard:project": "p", "costguard:budget": raw}, TagKeys())
    assert parsed.budget is None
    (finding,) = parsed.findings
    assert finding.code is FindingCode.MALFORMED_BUDGET


@pytest.mark.parametrize("raw", ["0.001", "0.009", "5000.505", "0.0099999"])
def test_refuses_budgets_in_fractions_of_a_cent(raw: str) -> None:
    assert parse_budget(raw) == "is not a whole number of cents"


def test_accepts_whole_cents_written_with_trailing_zeros() -> None:
    assert parse_budget("0.01") == Decimal("0.01")
    assert str(parse_budget("5000.500")) == "5000.50"


# --- Project names: no invisible lookalikes ----------------------------------------------

INVISIBLE = [
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",
    "\u202a",
    "\u202b",
    "\u202c",
    "\u202d",
    "\u202e",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
    "\u200e",
    "\u200f",
    "\u061c",
    "\u00ad",  # soft hyphen (Cf)
    "\U000e0041",  # tag character (Cf)
    "\u3164",  # Hangul filler (Lo, drawn as nothing)
    "\u2800",  # braille blank
    "\ufe0f",  # variation selector
    "\ue000",  # private use
    "\U000e0080",  # unassigned
    "\u2028",  # line separator
]


@pytest.mark.parametrize("char", INVISIBLE)
def test_refuses_a_project_name_with_an_invisible_character(char: str) -> None:
    # GIVEN a project name that looks like "vision" but carries an invisible character
    tags = {"Project": f"vi{char}sion", "costguard:budget": "1000000"}
    # WHEN its tags are read
    parsed = read_tags("us-east-1/ec2-instance/i-9", tags, TagKeys())
    # THEN it is not a lookalike project with its own budget: it is a finding
    assert parsed.project is None
    (finding,) = parsed.findings
    assert finding.code is FindingCode.MALFORMED_PROJECT
    assert finding.resource == "us-east-1/ec2-instance/i-9"
    assert finding.message.startswith("tag Project=")
    assert f"U+{ord(char):04X}" in finding.message
    assert char not in finding.message  # the value is quoted with escapes


@pytest.mark.parametrize(
    ("typed", "name"),
    [
        ("ｖｉｓｉｏｎ", "vision"),  # full-width
        ("vision\u00a0team", "vision team"),  # no-break space
        ("vision\u3000team", "vision team"),  # ideographic space
        ("vision   team", "vision team"),
        ("ﬁnance", "finance"),  # ligature
        ("プロジェクト１", "プロジェクト1"),
    ],
)
def test_one_name_typed_on_two_keyboards_is_one_project(typed: str, name: str) -> None:
    assert normalise_project(typed) == name


def test_keeps_visible_unicode_project_names_as_written() -> None:
    for name in ["Vision Research 🇫🇷", "計算" * 128, "caf\u00e9 / été #1", "x²"[:1]]:
        assert normalise_project(name) == name


def test_quotes_at_most_a_prefix_of_a_huge_value_in_a_finding() -> None:
    huge = "\u200b" * 100_000
    (finding,) = read_tags("r", {"costguard:project": huge}, TagKeys()).findings
    assert len(finding.message) < 1_000
    assert "(100000 characters)" in finding.message


# --- Owners: an e-mail address or a Slack member ID --------------------------------------


@pytest.mark.parametrize(
    ("raw", "owners"),
    [
        ("alice@example.com", ("alice@example.com",)),
        ("  Alice.O'Neil+gpu@Example.CO.uk ", ("Alice.O'Neil+gpu@example.co.uk",)),
        ("U024BE7LH", ("U024BE7LH",)),
        ("@U024BE7LH", ("U024BE7LH",)),
        ("<@W012A3CDE>", ("W012A3CDE",)),
        ("alice@example.com, U024BE7LH", ("alice@example.com", "U024BE7LH")),
        (
            "alice@example.com;bob@example.org  U024BE7LH",
            ("alice@example.com", "bob@example.org", "U024BE7LH"),
        ),
        ("alice@example.com, alice@EXAMPLE.com", ("alice@example.com",)),
        ("ops@xn--bcher-kva.example", ("ops@xn--bcher-kva.example",)),
    ],
)
def test_accepts_e_mail_addresses_and_slack_member_ids_as_owners(
    raw: str, owners: tuple[str, ...]
) -> None:
    parsed = read_tags("r", {"costguard:owner": raw}, TagKeys())
    assert parsed.findings == ()
    assert parsed.owners == owners
    assert parsed.owner == ", ".join(owners)


@pytest.mark.parametrize(
    "raw",
    [
        "alice",
        "@alice",
        "alice@localhost",
        "alice@@example.com",
        ".alice@example.com",
        "alice@-example.com",
        "alice@exa_mple.com",
        "U024BE7LH>",
        "<@U024BE7LH",
        "u024be7lh",
        "WARNINGS",  # a shouted word is not a member ID
        "élise@example.com",
        "alice@exämple.com",
        "alice\u200b@example.com",
        "alice@example.com\u202e",
        "a" * 65 + "@example.com",
        "a@" + "b" * 63 + "." + "c" * 63 + "." + "d" * 63 + "." + "e" * 62 + ".com",
        "<script>@example.com",
    ],
)
def test_drops_an_owner_that_is_neither_an_e_mail_nor_a_slack_id(raw: str) -> None:
    parsed = read_tags("us-east-1/ec2-instance/i-1", {"costguard:owner": raw}, TagKeys())
    assert parsed.owner is None
    assert parsed.owners == ()
    (finding,) = parsed.findings
    assert finding.code is FindingCode.MALFORMED_OWNER
    assert finding.resource == "us-east-1/ec2-instance/i-1"
    assert finding.message.startswith("tag costguard:owner=")


def test_an_owner_cannot_write_a_line_into_an_alert() -> None:
    # GIVEN an owner tag carrying a line break and a fake billing notice
    raw = "alice@example.com\r\nURGENT from AWS Billing: pay at http://evil.example/pay"
    # WHEN its tags are read
    parsed = read_tags("r", {"costguard:owner": raw}, TagKeys())
    # THEN only the valid address survives, and the rest is a finding, quoted with escapes
    assert parsed.owner == "alice@example.com"
    (finding,) = parsed.findings
    assert finding.code is FindingCode.MALFORMED_OWNER
    assert "\r" not in finding.message and "\n" not in finding.message
    assert "'URGENT'" in finding.message


def test_drops_an_owner_longer_than_a_tag_value_can_be() -> None:
    raw = ",".join(["alice@example.com"] * 20)
    parsed = read_tags("r", {"costguard:owner": raw}, TagKeys())
    assert parsed.owner is None
    assert "longer than 256" in parsed.findings[0].message


def test_a_blank_owner_is_no_owner_and_no_finding() -> None:
    parsed = read_tags("r", {"costguard:owner": "  "}, TagKeys())
    assert (parsed.owner, parsed.findings) == (None, ())


def test_an_owner_of_separators_only_is_a_finding() -> None:
    parsed = read_tags("r", {"costguard:owner": ", ;,"}, TagKeys())
    assert parsed.owner is None
    assert [f.code for f in parsed.findings] == [FindingCode.MALFORMED_OWNER]


@pytest.mark.parametrize(
    ("raw", "hours"),
    [("48h", 48), ("7d", 168), (" 7D ", 168), ("1h", 1), ("3650d", 3650 * 24), ("12 h", 12)],
)
def test_reads_a_time_to_live_in_hours_or_days(raw: str, hours: int) -> None:
    from datetime import timedelta

    from costguard.domain.tags import parse_ttl

    assert parse_ttl(raw) == timedelta(hours=hours)


@pytest.mark.parametrize(
    "raw", ["", "48", "2w", "0h", "0d", "-1d", "1.5d", "４８h", "48h ago", "3651d", "h", "1e3h"]
)
def test_refuses_a_time_to_live_it_cannot_read_without_guessing(raw: str) -> None:
    from costguard.domain.tags import parse_ttl

    assert isinstance(parse_ttl(raw), str)


@pytest.mark.parametrize(("raw", "expected"), [("90", 90), (" 15 ", 15), ("10080", 10080)])
def test_reads_an_idle_window_in_minutes(raw: str, expected: int) -> None:
    from costguard.domain.tags import parse_idle_minutes

    assert parse_idle_minutes(raw) == expected


@pytest.mark.parametrize("raw", ["", "14", "10081", "1h", "９０", "-30", "90.5", "0"])
def test_refuses_an_idle_window_it_cannot_read(raw: str) -> None:
    from costguard.domain.tags import parse_idle_minutes

    assert isinstance(parse_idle_minutes(raw), str)
