"""The tag contract: how a resource says which project pays for it.

Every parser is *total*: it returns a value or a reason, never raises, because
one bad tag must never stop the scan of a whole account. A reason becomes a
finding that names the resource and the tag (key and value).

Grammar (values are first stripped of leading and trailing whitespace)::

    costguard:project   (falls back to Project, then project; the first key present
                        wins, even when its value is malformed)
        Free text, 1-256 characters after normalisation. Normalisation: Unicode NFKC
        (full-width "ｖｉｓｉｏｎ" and "vision" are one project; so are a no-break
        space and a space), then every run of spaces becomes one space.
        Rejected (malformed-project, resource left unattributed): any control,
        format (Cf: zero-width, bidi controls, soft hyphen, tag characters),
        surrogate, private-use or unassigned character, line/paragraph separators,
        and the invisible fillers U+034F, U+115F, U+1160, U+17B4, U+17B5,
        U+180B-U+180F, U+2800, U+3164, U+FE00-U+FE0F, U+FFA0, U+E0100-U+E01EF.
        A name that differs from another only by invisible characters would be a
        lookalike project with its own budget, so it is refused, not cleaned.

    costguard:budget    monthly USD
        ["$"] digits ["." digits]            5000   5000.50   $5000   $ 5000
        ["$"] d{1,3} ("," ddd)+ ["." digits] 5,000  1,250,000.75
        ASCII digits only. Greater than zero, a whole number of cents (0.001 is
        refused; 5000.500 reads as 5000.50), at most 1,000,000,000. Otherwise
        malformed-budget, and the budget is ignored.

    costguard:team      the team the resource's project belongs to
        The costguard:project grammar (normalised the same way). Anything else is a
        malformed-team finding and no team is read from the tag. A project carrying two
        teams is a team-conflict finding (domain/teams.py says which one applies).

    costguard:team-budget  monthly USD of the team of the resource's project
        The costguard:budget grammar; the lowest tagged applies, as for costguard:budget.
        Anything else is malformed-budget, and the team budget is ignored.

    costguard:owner     who is told; one or more, separated by commas, semicolons
                        or spaces
        e-mail          local@domain.tld   (ASCII; the local part, at most 64
                        characters, of letters, digits and . _ % + ' -; domain
                        labels of letters, digits and -, IDNs as xn--; at most 254
                        characters in all; the domain is lower-cased)
        Slack member    U0123ABCD, @U0123ABCD or <@U0123ABCD> (U or W, then 8-20
                        upper-case letters or digits, at least one a digit; kept as
                        the bare ID)
        At most 256 characters in all. Each entry that is neither is dropped with a
        malformed-owner finding; the valid entries are kept. A blank value is no
        owner; a value of separators only is a finding.

    costguard:exempt    skip actions on the resource
        true | yes                       exempt for good
        false | no                       not exempt
        (empty)                          a finding, and read as exempt: someone tried
        YYYY-MM-DD | YYYYMMDD            exempt through the end of that day, UTC
        date (T|t|space) time [offset]   exempt until that instant
            time    hh[:mm[:ss[(.|,)fraction]]] or hh[mm[ss[(.|,)fraction]]];
                    24:00[:00] is the end of the day; fractions beyond µs are dropped
            offset  Z | z | ±hh | ±hh:mm | ±hhmm (at most ±23:59); none means UTC
        Case-insensitive words, ASCII digits. Anything else is a malformed-exempt
        finding and the resource is treated as exempt until the tag is fixed (fail
        safe). An instant past the end of year 9999 UTC (e.g. ``9999-12-31``, a
        natural "forever") is a permanent exemption; one before year 1 UTC has expired.

    costguard:ttl       time to live of the data in a bucket, or of a snapshot
        digits (h | d)                   48h   7d   (case-insensitive, ASCII digits)
        From 1 hour to 3650 days. Anything else is a malformed-ttl finding and the
        resource is left alone: a guessed time to live could delete live data.

    costguard:idle-minutes  the idle window of one notebook, overriding the default
        digits                           90   (ASCII digits, minutes)
        From 15 minutes (three heartbeats) to 10080 (a week). Anything else is a
        malformed-idle-minutes finding and the default window is used.

    costguard:max-hours  the maximum lifetime of a GPU instance, notebook or training job
        digits                           72   (ASCII digits, whole hours)
        From 1 to 8760 (a year), counted from its launch (its last start). Anything else
        (0, -1, 1.5, 1e9, "７２") is a malformed-max-hours finding, and the lifetime
        guard leaves the resource alone (the deployment's default does not apply either):
        a guessed lifetime could stop live work.

    costguard:expires   the instant after which it is stopped
        the costguard:exempt date grammar without the words: a bare date (YYYY-MM-DD or
        YYYYMMDD) runs through the end of that day, UTC; a time without an offset is UTC.
        Anything else (31/12/2026, 2026-02-30, "tomorrow") is a malformed-expires finding
        and the resource is left alone. An instant past the end of year 9999 never
        comes. A date before the resource was launched is also a malformed-expires
        finding (a tag copied from an older resource, or a wrong year); a date in the past
        but after the launch has simply been reached.

    costguard:max-usd-per-hour  the project's limit on one resource's hourly cost
        the costguard:budget grammar (5000, $12.50), from $0.01 to $100,000 an hour.
        Read like costguard:budget: on any of the project's resources, the lowest
        applies. A launch above it is alerted. Anything else is a
        malformed-usd-per-hour finding, and no limit is read from that tag.

    costguard:require-spot  the project's EC2 instances and training jobs run on spot
        true | yes | false | no          (case-insensitive)
        true on any of the project's resources makes it the project's policy: an
        on-demand launch is alerted. Anything else is a malformed-require-spot finding.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Final, NamedTuple

from costguard.domain.findings import Finding, FindingCode
from costguard.domain.windows import before


class Tags:
    """Tag keys that CostGuard reads on resources (and writes: the warning, the snapshot's source).

    The public contract with users: one source of truth for the Lambdas, CDK and the docs.
    """

    PROJECT: Final = "costguard:project"
    BUDGET: Final = "costguard:budget"
    OWNER: Final = "costguard:owner"
    #: The team a resource's project belongs to (the project name grammar); a project
    #: belongs to one team (see domain/teams.py).
    TEAM: Final = "costguard:team"
    #: The monthly budget of the team of the resource's project (the budget grammar).
    TEAM_BUDGET: Final = "costguard:team-budget"
    EXEMPT: Final = "costguard:exempt"
    #: Written by CostGuard when it warns: the UTC time after which it acts.
    ACTION_AFTER: Final = "costguard:action-after"
    #: Puts an EC2 instance in the idle-notebook guard's scope: ``notebook``.
    ROLE: Final = "costguard:role"
    #: Per-resource idle window in minutes, overriding the deployment's default.
    IDLE_MINUTES: Final = "costguard:idle-minutes"
    #: A GPU instance's, notebook's or training job's maximum lifetime, in whole hours from
    #: its launch (its last start): warned, then stopped when it is reached.
    MAX_HOURS: Final = "costguard:max-hours"
    #: The UTC date or time after which a GPU instance, notebook or training job is stopped.
    EXPIRES: Final = "costguard:expires"
    #: Written by CostGuard when it warns that a maximum lifetime is reached: the UTC time
    #: after which it stops the resource (its own tag: the idle guard's warning is another).
    STOP_AFTER: Final = "costguard:stop-after"
    #: The project's limit on one resource's $/h: a launch above it is alerted.
    MAX_USD_PER_HOUR: Final = "costguard:max-usd-per-hour"
    #: ``true``: the project's EC2 instances and training jobs must run on spot capacity.
    REQUIRE_SPOT: Final = "costguard:require-spot"
    #: Opts an S3 bucket or an EBS snapshot into the stale-data sweep: ``48h``, ``7d``.
    TTL: Final = "costguard:ttl"
    #: Written by CostGuard on the snapshot it takes of a volume before deleting it.
    SOURCE_VOLUME: Final = "costguard:source-volume"
    #: Lets a stale-object sweep the breaker stopped go on: the UTC date (YYYY-MM-DD) the
    #: owner confirmed, on or after the trip.
    CONFIRM_DELETE: Final = "costguard:confirm-delete"
    #: On an AWS account (Organizations): ``true`` keeps the hub out of it. Configurable.
    ORG_OPT_OUT: Final = "costguard:opt-out"
    #: Accepted, in order, when ``costguard:project`` is absent. Configurable.
    PROJECT_FALLBACKS: Final = ("Project", "project")

    # Tags that AWS itself puts on EC2 instances of EKS managed node groups / Karpenter.
    EKS_CLUSTER: Final = "eks:cluster-name"
    EKS_NODEGROUP: Final = "eks:nodegroup-name"
    AWS_EKS_CLUSTER: Final = "aws:eks:cluster-name"
    KARPENTER_NODEPOOL: Final = "karpenter.sh/nodepool"
    KARPENTER_CLUSTER_PREFIX: Final = "kubernetes.io/cluster/"
    KARPENTER_PROVISIONER: Final = "karpenter.sh/provisioner-name"
    # Tags that AWS puts on the instances of a group that replaces a stopped member.
    AUTOSCALING_GROUP: Final = "aws:autoscaling:groupName"
    EC2_FLEET: Final = "aws:ec2:fleet-id"
    SPOT_FLEET: Final = "aws:ec2spot:fleet-request-id"
    EMR_CLUSTER: Final = "aws:elasticmapreduce:job-flow-id"


MAX_PROJECT_LEN = 256
#: The whole ``costguard:owner`` value; AWS caps any tag value at 256 characters too.
MAX_OWNER_LEN = 256
#: RFC 5321: a forward path holds at most 254 characters of address.
MAX_EMAIL_LEN = 254
#: Budgets above this are a typo, not a budget.
MAX_BUDGET = Decimal("1000000000")
CENT = Decimal("0.01")
#: How much of a bad value a finding quotes.
_QUOTE_LEN = 80

# ASCII classes, spelled out: ``\d`` would admit "５０００" and "1٠0".
_PLAIN = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?")

_EXEMPT = re.compile(
    r"(?P<y>[0-9]{4})(?P<ds>-?)(?P<mo>[0-9]{2})(?P=ds)(?P<d>[0-9]{2})"
    r"(?:[Tt ]"
    r"(?P<h>[0-9]{2})"
    r"(?:(?P<ts>:?)(?P<mi>[0-9]{2})(?:(?P=ts)(?P<s>[0-9]{2})(?:[.,](?P<f>[0-9]+))?)?)?"
    r"(?:(?P<z>[Zz])|(?P<sign>[+-])(?P<oh>[0-9]{2})(?::?(?P<om>[0-9]{2}))?)?"
    r")?"
)
_US_PER_DAY = 86_400_000_000
_EPOCH = datetime.min.replace(tzinfo=UTC)
#: Microseconds from datetime.min to datetime.max, both UTC.
_LAST_US = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // timedelta(microseconds=1)

_LOCAL = r"[A-Za-z0-9_%+'-]+(?:\.[A-Za-z0-9_%+'-]+)*"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_EMAIL = re.compile(
    rf"(?P<local>{_LOCAL})@(?P<domain>(?:{_LABEL}\.)+(?:[A-Za-z]{{2,63}}|xn--[A-Za-z0-9-]{{1,59}}))"
)
#: A member ID: U or W, then upper-case letters and digits, at least one digit (so that
#: a shouted word such as WARNING is not mistaken for one).
_SLACK = re.compile(r"(?P<a><@|@)?(?P<id>[UW](?=[A-Z]*[0-9])[A-Z0-9]{8,20})(?P<b>>)?")
_OWNER_SEPARATORS = re.compile(r"[,;\s]+")

#: Unicode categories refused in names: controls, format characters (zero-width,
#: bidi), surrogates, private use, unassigned, and line/paragraph separators.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
#: Printable by category, yet drawn as nothing: default-ignorable marks and fillers.
_INVISIBLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)
_INVISIBLE_CLASS = re.compile(
    "[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _INVISIBLE_RANGES) + "]"
)
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class TagKeys:
    """Which tag keys mean what. Defaults follow :class:`Tags`."""

    project: tuple[str, ...] = (Tags.PROJECT, *Tags.PROJECT_FALLBACKS)
    budget: str = Tags.BUDGET
    owner: str = Tags.OWNER
    exempt: str = Tags.EXEMPT
    team: str = Tags.TEAM
    team_budget: str = Tags.TEAM_BUDGET


@dataclass(frozen=True, slots=True)
class Exemption:
    """``until`` is None for a permanent exemption."""

    until: datetime | None = None

    def active(self, now: datetime) -> bool:
        return before(now, self.until)


class ResourceTags(NamedTuple):
    """What a resource's tags say, once parsed; ``findings`` lists what was wrong.

    ``owner`` is the valid owners joined with ", " (None if none), for display;
    ``owners`` lists them one by one.
    """

    project: str | None
    budget: Decimal | None
    owner: str | None
    exemption: Exemption | None
    findings: tuple[Finding, ...] = ()
    owners: tuple[str, ...] = ()
    #: The team the resource says its project belongs to (None: no valid team tag).
    team: str | None = None
    team_budget: Decimal | None = None


class Owners(NamedTuple):
    """A parsed ``costguard:owner``: the valid owners, and why the rest were dropped."""

    valid: tuple[str, ...]
    problem: str | None = None


def _invisible(ch: str) -> bool:
    """True for characters that draw nothing, control the layout, or cannot be stored."""
    if unicodedata.category(ch) in _FORBIDDEN_CATEGORIES:
        return True
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _INVISIBLE_RANGES)


def _first_invisible(text: str) -> str | None:
    # Fast path: isprintable() is False for every forbidden category (and for spaces
    # other than U+0020, which are allowed), so most names skip the loop.
    if text.isprintable() and _INVISIBLE_CLASS.search(text) is None:
        return None
    return next((ch for ch in text if _invisible(ch)), None)


def _quote(raw: str) -> str:
    """A value for a finding, quoted like repr() but with every invisible character
    escaped (repr() leaves a Hangul filler or a variation selector as is), and cut."""
    parts = []
    for ch in raw[:_QUOTE_LEN]:
        if ch in "\\'":
            parts.append("\\" + ch)
        elif _invisible(ch) or not ch.isprintable():
            parts.append(ascii(ch)[1:-1])
        else:
            parts.append(ch)
    text = "'" + "".join(parts) + "'"
    return text if len(raw) <= _QUOTE_LEN else f"{text}... ({len(raw)} characters)"


def _codepoint(ch: str) -> str:
    name = unicodedata.name(ch, "") if unicodedata.category(ch) != "Cs" else ""
    return f"U+{ord(ch):04X}" + (f" ({name})" if name else "")


@lru_cache(maxsize=4096)
def parse_budget(raw: str) -> Decimal | str:
    """Parse a monthly budget in USD; return the amount, or why it is not one.

    Accepts ``5000``, ``5000.50``, ``5,000`` and ``$5000``. Rejects anything that
    is not a plain positive amount in whole cents: a guess at a garbled budget is
    worse than none, and a sub-cent budget would alert as critical at once.
    """
    text = raw.strip()
    if text.startswith("$"):
        text = text[1:].strip()
    if not text:
        return "is empty"
    if not (_PLAIN.fullmatch(text) or _GROUPED.fullmatch(text)):
        return "is not an amount in USD (use e.g. 5000, 5,000.50 or $5000)"
    try:
        amount = Decimal(text.replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the regexes admit only ASCII digits
        return "is not an amount in USD"
    if amount <= 0:
        return "must be greater than zero"
    if amount > MAX_BUDGET:
        return f"is larger than {MAX_BUDGET:,} USD"
    cents = amount.quantize(CENT)
    if cents != amount:
        return "is not a whole number of cents"
    # "5000.500" is 5000.50: keep at most two decimals, as written otherwise.
    return cents if len(text.partition(".")[2]) > 2 else amount


#: A $/h limit above this is a typo: the dearest instance costs about $100 an hour.
MAX_USD_PER_HOUR = Decimal(100_000)


def parse_usd_per_hour(raw: str) -> Decimal | str:
    """Parse ``costguard:max-usd-per-hour`` (the budget grammar); the limit, or why not."""
    parsed = parse_budget(raw)
    if isinstance(parsed, str):
        return parsed.replace(
            "amount in USD (use e.g. 5000, 5,000.50 or $5000)",
            "amount in USD an hour (use e.g. 40 or $12.50)",
        )
    if parsed > MAX_USD_PER_HOUR:
        return f"is more than {MAX_USD_PER_HOUR:,} USD an hour"
    return parsed


def parse_flag(raw: str) -> bool | str:
    """Parse a yes/no tag such as ``costguard:require-spot``; the answer, or why not."""
    text = raw.strip().lower()
    if text in {"true", "yes"}:
        return True
    if text in {"false", "no"}:
        return False
    return "is not true or false"


_TTL = re.compile(r"([0-9]{1,6})\s*([hd])", re.IGNORECASE)
MAX_TTL = timedelta(days=3650)
MIN_IDLE_MINUTES = 15
MAX_IDLE_MINUTES = 10_080


def parse_ttl(raw: str) -> timedelta | str:
    """Parse ``costguard:ttl`` (``48h``, ``7d``); return the time to live, or why not."""
    match = _TTL.fullmatch(raw.strip())
    if match is None:
        return "is not a time to live (use hours or days, e.g. 48h or 7d)"
    amount = int(match.group(1))
    ttl = timedelta(hours=amount) if match.group(2).lower() == "h" else timedelta(days=amount)
    if ttl <= timedelta(0):
        return "must be at least 1h"
    if ttl > MAX_TTL:
        return "is longer than 3650d"
    return ttl


MIN_MAX_HOURS = 1
#: A year: a longer "maximum lifetime" is a typo (1e9 hours), not a lifetime.
MAX_MAX_HOURS = 8760


def parse_max_hours(raw: str) -> int | str:
    """Parse ``costguard:max-hours``; return the lifetime in whole hours, or why not."""
    text = raw.strip()
    if not text.isascii() or not text.isdigit():
        return "is not a whole number of hours (e.g. 72)"
    hours = int(text)
    if not MIN_MAX_HOURS <= hours <= MAX_MAX_HOURS:
        return f"must be from {MIN_MAX_HOURS} to {MAX_MAX_HOURS} hours"
    return hours


def parse_expires(raw: str) -> datetime | str | None:
    """Parse ``costguard:expires``; return the instant, None for "never" (past year 9999),
    or why not. The ``costguard:exempt`` date grammar, without its words."""
    bad = "is not a UTC date or time (e.g. 2026-12-31 or 2026-12-31T18:00Z)"
    text = raw.strip()
    if text.lower() in {"true", "yes", "false", "no"} or not text:
        return bad
    parsed = parse_exempt(text)
    if isinstance(parsed, str):
        _, sep, detail = parsed.partition(": ")  # "...: no such day"
        return f"{bad}: {detail}" if sep else bad
    return None if parsed is None else parsed.until


def parse_idle_minutes(raw: str) -> int | str:
    """Parse ``costguard:idle-minutes``; return the window in minutes, or why not."""
    text = raw.strip()
    if not text.isascii() or not text.isdigit():
        return "is not a whole number of minutes (e.g. 90)"
    minutes = int(text)
    if not MIN_IDLE_MINUTES <= minutes <= MAX_IDLE_MINUTES:
        return f"must be from {MIN_IDLE_MINUTES} to {MAX_IDLE_MINUTES} minutes"
    return minutes


@lru_cache(maxsize=4096)
def parse_exempt(raw: str) -> Exemption | str | None:
    """Parse ``costguard:exempt``; return the exemption, None for "not exempt", or why not.

    The grammar is explicit (see the module docstring) rather than whatever this
    Python's ``fromisoformat`` accepts, so that ``20261231`` and ``2026-12-31`` mean
    the same day on every runtime, and the arithmetic is done in integers so that
    no offset at the edge of the calendar can overflow.
    """
    text = raw.strip()
    lowered = text.lower()
    if lowered in {"true", "yes"}:
        return Exemption()
    if lowered in {"false", "no"}:
        return None
    if not text:
        # The console's default for a key-only tag: someone tried to exempt it.
        return "is empty (set true, false or a date); read as exempt until it is set"
    bad = "is neither true/false nor an ISO-8601 date or time (e.g. 2026-12-31)"
    m = _EXEMPT.fullmatch(text)
    if m is None:
        return bad
    try:
        day = date(int(m["y"]), int(m["mo"]), int(m["d"]))
    except ValueError:
        return f"{bad}: no such day"
    local_us = (day.toordinal() - 1) * _US_PER_DAY
    if m["h"] is None:
        # A bare date runs through the end of that day.
        return _exemption_at(local_us + _US_PER_DAY)
    hour, minute, second = int(m["h"]), int(m["mi"] or 0), int(m["s"] or 0)
    micro = int((m["f"] or "0")[:6].ljust(6, "0"))
    end_of_day = hour == 24 and minute == second == micro == 0
    if not end_of_day and (hour > 23 or minute > 59 or second > 59):
        return f"{bad}: no such time of day"
    local_us += ((hour * 60 + minute) * 60 + second) * 1_000_000 + micro
    offset_us = 0
    if m["sign"] is not None:
        off_h, off_m = int(m["oh"]), int(m["om"] or 0)
        if off_h > 23 or off_m > 59:
            return f"{bad}: the UTC offset must be between -23:59 and +23:59"
        offset_us = (off_h * 60 + off_m) * 60_000_000 * (-1 if m["sign"] == "-" else 1)
    return _exemption_at(local_us - offset_us)


def _exemption_at(us: int) -> Exemption:
    """An exemption ending ``us`` microseconds after 0001-01-01T00:00Z, clamped.

    Past the last representable instant (9999-12-31T23:59:59.999999Z) means for
    good; before the first means it has already expired.
    """
    if us > _LAST_US:
        return Exemption()
    return Exemption(_EPOCH + timedelta(microseconds=max(us, 0)))


@lru_cache(maxsize=4096)
def parse_project(raw: str) -> tuple[str, None] | tuple[None, str]:
    """Normalise a project name; return ``(name, None)`` or ``(None, why not)``."""
    text = raw.strip()
    if not text:
        return None, "is empty"
    if len(text) > 4 * MAX_PROJECT_LEN:  # bound the work before normalising
        return None, f"is longer than {MAX_PROJECT_LEN} characters"
    typed = text
    text = unicodedata.normalize("NFKC", text).strip()
    # Name the character as typed (NFKC turns U+3164 into U+1160), and check both.
    bad = _first_invisible(typed) or _first_invisible(text)
    if bad is not None:
        return None, f"contains {_codepoint(bad)}, an invisible or control character"
    text = _SPACES.sub(" ", text)
    if not text:  # pragma: no cover - stripped above; NFKC maps no visible text to nothing
        return None, "is empty"
    if len(text) > MAX_PROJECT_LEN:
        return None, f"is longer than {MAX_PROJECT_LEN} characters"
    return text, None


def normalise_project(raw: str) -> str | None:
    """The project name ``raw`` stands for, or None if it is not a valid name.

    Unicode is normalised to NFKC so that the same name typed on two keyboards
    (full-width or not, no-break space or not) lands in one ledger row.
    """
    return parse_project(raw)[0]


def _owner(entry: str) -> str | None:
    email = _EMAIL.fullmatch(entry)
    if email is not None:
        if len(entry) > MAX_EMAIL_LEN or len(email["local"]) > 64:
            return None
        return f"{email['local']}@{email['domain'].lower()}"
    slack = _SLACK.fullmatch(entry)
    if slack is not None and (slack["a"], slack["b"]) in {(None, None), ("@", None), ("<@", ">")}:
        return slack["id"]
    return None


@lru_cache(maxsize=4096)
def parse_owners(raw: str) -> Owners:
    """Parse ``costguard:owner``: e-mail addresses and Slack member IDs.

    Owners are printed into e-mails and Slack messages, so only those two shapes
    pass: an owner with a line break could otherwise write a fake line into an alert.
    """
    text = raw.strip()
    if not text:
        return Owners(())
    if len(text) > MAX_OWNER_LEN:
        return Owners((), f"is longer than {MAX_OWNER_LEN} characters; owner ignored")
    valid: list[str] = []
    rejected: list[str] = []
    for entry in _OWNER_SEPARATORS.split(text):
        if not entry:
            continue
        owner = _owner(entry)
        if owner is None:
            rejected.append(entry)
        elif owner not in valid:
            valid.append(owner)
    if not valid and not rejected:
        return Owners((), "names no owner, only separators; owner ignored")
    if not rejected:
        return Owners(tuple(valid))
    what = ", ".join(_quote(r) for r in rejected[:3]) + (
        f" and {len(rejected) - 3} more" if len(rejected) > 3 else ""
    )
    verb = "is" if len(rejected) == 1 else "are"
    return Owners(
        tuple(valid),
        f"names {what}, which {verb} not an e-mail address or a Slack member ID "
        f"(e.g. alice@example.com, U0123ABCD); "
        + (f"kept {', '.join(valid)}, dropped the rest" if valid else "owner ignored"),
    )


@dataclass(frozen=True, slots=True)
class _Parsed:
    """One combination of tag values, parsed: ``tags`` is the answer for every resource
    that carries it, once the ``problems`` are addressed to the resource as findings."""

    tags: ResourceTags
    problems: tuple[tuple[FindingCode, str], ...]


@lru_cache(maxsize=8192)
def _parse(
    project_tag: tuple[str, str] | None,
    budget_key: str,
    budget_raw: str | None,
    owner_key: str,
    owner_raw: str | None,
    exempt_key: str,
    exempt_raw: str | None,
    team_key: str = "",
    team_raw: str | None = None,
    team_budget_key: str = "",
    team_budget_raw: str | None = None,
) -> _Parsed:
    """The tag values repeat across a fleet; parse each combination once."""
    problems: list[tuple[FindingCode, str]] = []
    project = None
    if project_tag is not None:
        key, raw = project_tag
        project, why = parse_project(raw)
        if why is not None:
            problems.append(
                (
                    FindingCode.MALFORMED_PROJECT,
                    f"tag {key}={_quote(raw)} {why}; not a project name "
                    f"(1-{MAX_PROJECT_LEN} visible characters); resource left unattributed",
                )
            )
    budget: Decimal | None = None
    if budget_raw is not None:
        parsed = parse_budget(budget_raw)
        if isinstance(parsed, Decimal):
            budget = parsed
        else:
            problems.append(
                (
                    FindingCode.MALFORMED_BUDGET,
                    f"tag {budget_key}={_quote(budget_raw)} {parsed}; budget ignored",
                )
            )
    exemption: Exemption | None = None
    if exempt_raw is not None:
        parsed_exempt = parse_exempt(exempt_raw)
        if isinstance(parsed_exempt, str):
            # Fail safe: a resource whose owner *tried* to exempt it is treated as exempt.
            exemption = Exemption()
            problems.append(
                (
                    FindingCode.MALFORMED_EXEMPT,
                    f"tag {exempt_key}={_quote(exempt_raw)} {parsed_exempt}; "
                    "treated as exempt until fixed",
                )
            )
        else:
            exemption = parsed_exempt
    owners: tuple[str, ...] = ()
    if owner_raw is not None:
        parsed_owners = parse_owners(owner_raw)
        owners = parsed_owners.valid
        if parsed_owners.problem is not None:
            problems.append(
                (
                    FindingCode.MALFORMED_OWNER,
                    f"tag {owner_key}={_quote(owner_raw)} {parsed_owners.problem}",
                )
            )
    team_name: str | None = None
    if team_raw is not None:
        team_name, why = parse_project(team_raw)
        if why is not None:
            problems.append(
                (
                    FindingCode.MALFORMED_TEAM,
                    f"tag {team_key}={_quote(team_raw)} {why}; not a team name "
                    f"(1-{MAX_PROJECT_LEN} visible characters); team ignored",
                )
            )
    team_budget: Decimal | None = None
    if team_budget_raw is not None:
        parsed = parse_budget(team_budget_raw)
        if isinstance(parsed, Decimal):
            team_budget = parsed
        else:
            problems.append(
                (
                    FindingCode.MALFORMED_BUDGET,
                    f"tag {team_budget_key}={_quote(team_budget_raw)} {parsed}; team budget ignored",
                )
            )
    return _Parsed(
        ResourceTags(
            project,
            budget,
            ", ".join(owners) or None,
            exemption,
            (),
            owners,
            team_name,
            team_budget,
        ),
        tuple(problems),
    )


def read_tags(resource_ref: str, tags: Mapping[str, str], keys: TagKeys) -> ResourceTags:
    """Parse a resource's tags into what CostGuard needs, collecting findings."""
    project_tag = None
    for key in keys.project:
        value = tags.get(key)
        if value is not None:
            project_tag = (key, value)
            break
    parsed = _parse(
        project_tag,
        keys.budget,
        tags.get(keys.budget),
        keys.owner,
        tags.get(keys.owner),
        keys.exempt,
        tags.get(keys.exempt),
        keys.team,
        tags.get(keys.team),
        keys.team_budget,
        tags.get(keys.team_budget),
    )
    found = parsed.tags
    if not parsed.problems:
        return found  # the common case: shared, since a NamedTuple cannot change
    findings = tuple(Finding(code, resource_ref, message) for code, message in parsed.problems)
    return found._replace(findings=findings)
