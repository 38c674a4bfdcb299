"""The answers an e-mailed action warning carries: one signed link per answer. Pure: the link
secret, the endpoint's address and the nonces are passed in.

Each link's token (:func:`costguard.domain.signatures.sign_link`) names the guard, the
resource, the answer, the owner it answers as, a random nonce (single use) and an expiry.
A link opens the answer endpoint's confirmation page (a GET never acts); the page's form
POSTs the answer.

- **Whom the links answer as.** An e-mail reaches whoever the alert topic sends it to, so
  the links are made for the resource's owners that are e-mail addresses
  (``costguard:owner``), as the guard's act path re-checks them: an answer is taken only
  from an owner (or an admin), so a link naming anyone else could only be refused. A
  resource owned only by Slack IDs gets no links (its owners answer in Slack).
- **How long they last.** Until the warning's deadline or 24 hours after it was sent,
  whichever comes first: at the deadline the guard acts, and a link that still offered
  "keep" or "act now" would offer what can no longer be given as asked.
- **Never a broken link.** Without an address, a secret or an e-mail owner, or when a
  token would be longer than the endpoint accepts, the warning carries no links at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

from costguard.domain.alerts import Alert, AlertKind
from costguard.domain.answers import Answer
from costguard.domain.decisions import deadline_tag
from costguard.domain.signatures import LINK_MAX_LIFE, MAX_TOKEN_CHARS, LinkClaims, sign_link

#: The answers an e-mail offers, in the order of the Slack buttons, with their words.
EMAIL_ANSWERS: tuple[tuple[Answer, str], ...] = (
    (Answer.KEEP_4H, "Keep 4 hours"),
    (Answer.KEEP_UNTIL_TOMORROW, "Keep until tomorrow 09:00"),
    (Answer.ACT_NOW, "Act now"),
    (Answer.EXEMPT, "Exempt for a period you choose"),
)
#: Links are made for at most this many e-mail owners (four links each).
MAX_LINKED_OWNERS = 3
#: The path the answer endpoint serves links on (services.answers: GET/POST /answer).
ANSWER_PATH = "/answer"
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass(frozen=True, slots=True)
class AnswerLink:
    answer: Answer
    label: str
    url: str


@dataclass(frozen=True, slots=True)
class OwnerLinks:
    """The links that answer as one owner (the address the audit names)."""

    owner: str
    links: tuple[AnswerLink, ...]


@dataclass(frozen=True, slots=True)
class EmailAnswers:
    """An action warning's links, and until when they work (whole seconds, UTC)."""

    expires: datetime
    owners: tuple[OwnerLinks, ...]


def answer_base(url: str) -> str | None:
    """The endpoint's address as links are built on (``https://host/path``, no trailing
    slash), or None when it is not one a mail reader could open: https, or http on a
    loopback address (a local endpoint); no user, query or fragment."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
    except ValueError:
        return None
    if not host or parts.username or parts.password or parts.query or parts.fragment:
        return None
    if parts.scheme != "https" and not (parts.scheme == "http" and host in _LOOPBACK):
        return None
    if any(ch.isspace() or not ch.isprintable() for ch in url.strip()):
        return None
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def link_expiry(sent: datetime, deadline: datetime | None) -> datetime:
    """24 hours after ``sent``, or the deadline if earlier; whole seconds (as the token
    carries it, so the e-mail shows the instant the endpoint enforces)."""
    latest = sent + LINK_MAX_LIFE
    until = min(latest, deadline) if deadline is not None else latest
    return until.astimezone(UTC).replace(microsecond=0)


def email_owners(owners: tuple[str, ...]) -> tuple[str, ...]:
    """The owners a link can answer as (e-mail addresses), each once, at most
    :data:`MAX_LINKED_OWNERS`."""
    seen: dict[str, str] = {}
    for owner in owners:
        address = owner.strip()
        if "@" in address and address.lower() not in seen:
            seen[address.lower()] = address
    return tuple(seen.values())[:MAX_LINKED_OWNERS]


def email_answers(
    alert: Alert, secret: bytes, base_url: str, nonce: Callable[[], str]
) -> EmailAnswers | None:
    """The signed links of an answerable action warning, or None (see the module)."""
    to = alert.answer_to
    base = answer_base(base_url)
    if to is None or alert.kind is not AlertKind.ACTION_WARNING or base is None or not secret:
        return None
    owners = email_owners(alert.owners)
    expires = link_expiry(alert.at, to.deadline)
    if not owners or expires <= alert.at:
        return None
    made: list[OwnerLinks] = []
    deadline = deadline_tag(to.deadline) if to.deadline is not None else ""
    for owner in owners:
        links = []
        for answer, label in EMAIL_ANSWERS:
            claims = LinkClaims(to.resource, answer, expires, nonce(), owner, to.guard, deadline)
            token = sign_link(secret, claims, alert.at)
            if len(token) > MAX_TOKEN_CHARS:
                return None  # the endpoint would refuse it: no links rather than a broken one
            links.append(AnswerLink(answer, label, f"{base}{ANSWER_PATH}?t={quote(token)}"))
        made.append(OwnerLinks(owner, tuple(links)))
    return EmailAnswers(expires, tuple(made))
