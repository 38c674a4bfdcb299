"""Hypothesis strategies for tag values: arbitrary text, and text near the edges of the
tag grammar (dates at years 0001 and 9999, offsets of ±23:59, compact forms, odd digits,
invisible characters, long CJK and emoji names). Shared by the unit and moto tests."""

from __future__ import annotations

from hypothesis import strategies as st

from costguard.domain.tags import TagKeys

KEYS = TagKeys()
ALL_KEYS = (*KEYS.project, KEYS.budget, KEYS.owner, KEYS.exempt)

AWS_MAX_VALUE = 256

# Characters that matter most: invisible, bidi, controls, odd digits, full-width, CJK.
TRICKY = (
    "\u200b\u200c\u200d\u2060\ufeff\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    "\u200e\u200f\u061c\u00ad\u3164\u2800\ufe0f\ue000\u2028\u2029\u0085\x00\r\n\t\x7f"
    "\u00a0\u3000５٠١$,.:+-@<>TZtz 0123456789計算ｖ🇫🇷"
)
any_text = st.text(max_size=AWS_MAX_VALUE)  # every code point but surrogates
tricky_text = st.text(st.sampled_from(TRICKY) | st.characters(), max_size=AWS_MAX_VALUE)


@st.composite
def iso_like(draw: st.DrawFn) -> str:
    """ISO-8601-looking strings, biased to the edges of the calendar and of the grammar."""
    year = draw(
        st.sampled_from(["0001", "9999", "0000", "2026", "1970"]) | st.from_regex(r"\A[0-9]{4}\Z")
    )
    month = draw(st.sampled_from(["01", "12", "00", "13", "02"]))
    day = draw(st.sampled_from(["01", "28", "29", "31", "00", "32"]))
    dsep = draw(st.sampled_from(["-", ""]))
    text = f"{year}{dsep}{month}{dsep}{day}"
    if draw(st.booleans()):
        sep = draw(st.sampled_from(["T", "t", " ", "X", "\u3000"]))
        hour = draw(st.sampled_from(["00", "23", "24", "25"]))
        tsep = draw(st.sampled_from([":", ""]))
        time = hour + draw(
            st.sampled_from(["", f"{tsep}00", f"{tsep}59", f"{tsep}59{tsep}59", f"{tsep}60"])
        )
        if draw(st.booleans()):
            time += draw(st.sampled_from([".", ","])) + draw(st.from_regex(r"\A[0-9]{1,12}\Z"))
        offset = draw(
            st.sampled_from(
                [
                    "",
                    "Z",
                    "z",
                    "+23:59",
                    "-23:59",
                    "+00:00",
                    "-2359",
                    "+24:00",
                    "+01",
                    "+99:99",
                    "+23:60",
                ]
            )
        )
        text += sep + time + offset
    if draw(st.booleans()):  # a stray character somewhere
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(TRICKY) | st.characters()) + text[at:]
    return text


budget_like = st.from_regex(r"\A\$? ?[0-9,٠５]{0,14}(\.[0-9]{0,4})?\Z") | st.decimals(
    allow_nan=True, allow_infinity=True
).map(str)
owner_like = st.lists(
    st.from_regex(r"\A[A-Za-z0-9.'_+-]{1,20}@[a-z0-9.-]{1,20}\Z")
    | st.from_regex(r"\A(<@|@)?[UWuw][A-Z0-9]{5,22}>?\Z")
    | tricky_text.map(lambda t: t[:20]),
    max_size=6,
).flatmap(lambda parts: st.sampled_from([", ", ";", " ", "\r\n", ","]).map(lambda s: s.join(parts)))
#: Long names in 3- and 4-byte UTF-8: 256 of them overflow a 1,024-byte DynamoDB key.
name_like = st.text(st.sampled_from("計算🚀a \u200b"), min_size=100, max_size=AWS_MAX_VALUE)
value = st.one_of(any_text, tricky_text, iso_like(), budget_like, owner_like, name_like)
tag_sets = st.fixed_dictionaries({}, optional=dict.fromkeys(ALL_KEYS, value))
