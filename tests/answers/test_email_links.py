"""An action warning's e-mail carries signed answer links (one per answer), and the answer
desk takes them: a GET shows the confirmation page and acts on nothing, the page's POST hands
the right answer on, once. Without the link key or the endpoint's address, no links at all."""

from __future__ import annotations

import html
import itertools
import json
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from costguard.adapters.sns import SnsNotifier
from costguard.domain.alerts import Alert
from costguard.domain.answer_links import answer_base, email_answers, link_expiry
from costguard.domain.answers import Answer
from costguard.domain.decisions import Decision, taken_alert, warning_alert
from costguard.env import Env
from costguard.rendering import email_text
from costguard.services.answers import USED_LINKS, HttpAnswer, HttpRequest
from costguard.wiring.answer_links import email_answer_links
from tests.answers.test_answer_desk import LINKS, Desk
from tests.unit.test_executor import GRACE, T0, idle, target

URL = "https://abc123.lambda-url.us-east-1.on.aws/"
ENVIRON = {Env.LINK_SECRET: "arn:aws:secretsmanager:us-east-1:1:secret:links", Env.ANSWER_URL: URL}
HEADING = "Answer this warning (links work once, until"
LINK = re.compile(r"^ *(.+?): (https?://\S+)$", re.M)


@dataclass
class FakeSns:
    """The SNS client: what was published."""

    published: list[dict[str, Any]] = field(default_factory=list)

    def publish(self, **kwargs: Any) -> dict[str, str]:
        self.published.append(kwargs)
        return {"MessageId": f"m-{len(self.published)}"}


def counter() -> Any:
    numbers = itertools.count(1)
    return lambda: f"nonce-{next(numbers)}"


def warning(decision: Decision | None = None, deadline: datetime | None = None) -> Alert:
    d = decision or idle()
    return warning_alert(d, deadline or T0 + GRACE, T0, "idle-notebooks")


def sent(alert: Alert, environ: dict[str, str] = ENVIRON, **kw: Any) -> dict[str, str]:
    """The SNS message of ``alert`` by protocol, published with links made from ``environ``."""
    sns = FakeSns()
    links = email_answer_links(
        environ, read_secret=kw.pop("read_secret", lambda _name: LINKS), nonce=counter(), **kw
    )
    SnsNotifier(sns, "arn:aws:sns:us-east-1:1:alerts", links).publish(alert)  # type: ignore[arg-type]
    [message] = sns.published
    by_protocol: dict[str, str] = json.loads(message["Message"])
    return by_protocol


def links_in(text: str) -> dict[str, str]:
    """The answer section's links, by label."""
    section = text[text.index(HEADING) :]
    return {label.strip(): url for label, url in LINK.findall(section)}


def get(desk: Desk, url: str, now: datetime = T0) -> HttpAnswer:
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    return desk.handle(HttpRequest("GET", parts.path, {}, b"", query), now)  # type: ignore[no-any-return]


def confirm(desk: Desk, page: HttpAnswer, now: datetime = T0, **extra: str) -> HttpAnswer:
    """The page's form, posted as a browser would (its hidden fields, and ``extra``)."""
    fields = dict(re.findall(r'<input type=hidden name=(\w+) value="([^"]*)">', page.body))
    form = {k: html.unescape(v) for k, v in fields.items()} | extra
    return desk.handle(HttpRequest("POST", "/answer", {}, urlencode(form).encode()), now)  # type: ignore[no-any-return]


# -- the e-mail ---------------------------------------------------------------------------------


def test_a_warnings_email_ends_with_one_signed_link_per_answer() -> None:
    # GIVEN an idle notebook owned by alice@example.com, warned (stop in 24 hours)
    message = sent(warning())
    text = message["email"]
    # THEN the e-mail's last section offers the four answers, each a link to the endpoint
    section = text[text.index(HEADING) : text.index("Alert id:")]
    assert HEADING + " 2026-11-21 12:00 UTC):" in section
    links = links_in(text)
    assert list(links) == [
        "Keep 4 hours",
        "Keep until tomorrow 09:00",
        "Act now",
        "Exempt for a period you choose",
    ]
    assert all(u.startswith(URL + "answer?t=") for u in links.values())
    assert len(set(links.values())) == 4
    assert "recorded as alice@example.com's" in section
    # AND it comes after what the reader needs (the next steps), before the footer only
    assert text.index("What to do next:") < text.index(HEADING) < text.index("Alert id:")
    # AND no other protocol carries a link: not the default text, not the machine JSON
    for protocol in ("default", "email-json", "sqs", "lambda", "https"):
        assert "answer?t=" not in message[protocol], protocol
    assert message["default"] == email_text(warning())


def test_each_link_shows_a_page_on_get_and_answers_once_on_the_pages_post() -> None:
    # GIVEN the e-mail's links, and the answer desk with the same link key
    links = links_in(sent(warning())["email"])
    expected = {
        "Keep 4 hours": (Answer.KEEP_4H, T0 + timedelta(hours=4)),
        "Keep until tomorrow 09:00": (
            Answer.KEEP_UNTIL_TOMORROW,
            datetime(2026, 11, 21, 8, 0, tzinfo=UTC),
        ),
        "Act now": (Answer.ACT_NOW, None),
    }
    for label, (answer, until) in expected.items():
        desk = Desk()  # Europe/Paris: tomorrow 09:00 is 08:00 UTC in November
        # WHEN a mail scanner (or the owner) opens the link, twice
        page = get(desk, links[label])
        again = get(desk, links[label])
        # THEN a confirmation page, and nothing handed on, no link used
        assert page.status == again.status == 200 and "method=post" in page.body, label
        assert desk.queue.submitted == [] and desk.ledger.status(USED_LINKS, "nonce-1") is None
        # WHEN the owner confirms on the page  THEN the right answer goes to the guard
        assert confirm(desk, page).status == 200, label
        [request] = desk.queue.submitted
        assert (request.guard, request.resource, request.answer, request.until) == (
            "idle-notebooks",
            idle().target.key,
            answer,
            until,
        )
        assert (request.answerer.id, request.answerer.via) == ("alice@example.com", "email")
        # AND a second POST of the same link is refused, and hands nothing on
        assert confirm(desk, page).status == 409
        assert len(desk.queue.submitted) == 1


def test_the_exempt_link_asks_why_and_until_when_on_its_page() -> None:
    desk = Desk()
    page = get(desk, links_in(sent(warning())["email"])["Exempt for a period you choose"])
    assert "name=reason" in page.body and "name=until" in page.body
    assert confirm(desk, page).status == 400 and desk.queue.submitted == []
    assert confirm(desk, page, reason="paper deadline", until="2026-12-01").status == 200
    [request] = desk.queue.submitted
    assert request.answer is Answer.EXEMPT and request.reason == "paper deadline"


def test_a_link_cannot_answer_for_another_resource_nor_with_another_links_page() -> None:
    desk = Desk()
    links = links_in(sent(warning())["email"])
    other = links_in(sent(warning(idle("nb-2")))["email"])
    token = parse_qs(urlsplit(links["Act now"]).query)["t"][0]
    payload, mac = token.split(".")
    # GIVEN the token rewritten to name another resource (the MAC kept)
    import base64

    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["r"] = idle("nb-2").target.key
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    refused = get(desk, f"{URL}answer?t={forged}.{mac}")
    # THEN refused as not CostGuard's, on GET and on POST
    assert refused.status == 403
    form = {"t": f"{forged}.{mac}", "csrf": "x"}
    assert (
        desk.handle(HttpRequest("POST", "/answer", {}, urlencode(form).encode()), T0).status == 403
    )
    # AND one link's page cannot carry another link's token
    page = get(desk, links["Act now"])
    other_page = get(desk, other["Act now"])
    csrf = re.search(r'name=csrf value="([^"]*)"', other_page.body)
    assert csrf is not None
    mixed = {"t": token, "csrf": csrf.group(1)}
    assert (
        desk.handle(HttpRequest("POST", "/answer", {}, urlencode(mixed).encode()), T0).status == 403
    )
    assert desk.queue.submitted == [] and page.status == 200


def test_links_expire_at_the_warnings_deadline_when_it_is_within_24_hours() -> None:
    # GIVEN a warning whose deadline is 2 hours away
    text = sent(warning(deadline=T0 + timedelta(hours=2)))["email"]
    assert HEADING + " 2026-11-20 14:00 UTC):" in text
    desk = Desk()
    url = links_in(text)["Keep 4 hours"]
    page = get(desk, url, T0 + timedelta(hours=1))
    # WHEN the link is used after the deadline  THEN it is refused as expired
    assert get(desk, url, T0 + timedelta(hours=2)).status == 410
    assert confirm(desk, page, T0 + timedelta(hours=2, seconds=1)).status == 410
    assert desk.queue.submitted == []
    # AND a deadline 3 days away still gives links of 24 hours at most
    far = sent(warning(deadline=T0 + timedelta(days=3)))["email"]
    assert HEADING + " 2026-11-21 12:00 UTC):" in far
    assert get(Desk(), links_in(far)["Act now"], T0 + timedelta(hours=24)).status == 410


def test_link_expiry_is_whole_seconds_and_never_past_24_hours() -> None:
    sent_at = T0 + timedelta(microseconds=700)
    assert link_expiry(sent_at, None) == T0 + timedelta(hours=24)
    assert link_expiry(sent_at, T0 + timedelta(minutes=5, microseconds=1)) == T0 + timedelta(
        minutes=5
    )
    assert link_expiry(sent_at, T0 + timedelta(days=9)) == T0 + timedelta(hours=24)


# -- no links rather than a broken one ------------------------------------------------------------


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {Env.ANSWER_URL: URL},
        {Env.LINK_SECRET: "links"},
        {Env.LINK_SECRET: " ", Env.ANSWER_URL: URL},
        {**ENVIRON, Env.ANSWER_URL: "http://example.com/"},  # not https, not loopback
        {**ENVIRON, Env.ANSWER_URL: "https://example.com/?a=1"},
        {**ENVIRON, Env.ANSWER_URL: "https://user@example.com/"},
        {**ENVIRON, Env.ANSWER_URL: "ftp://example.com/"},
        {**ENVIRON, Env.ANSWER_URL: "https://exa mple.com/"},
        {**ENVIRON, Env.ANSWER_URL: "not a url"},
    ],
)
def test_without_the_link_key_or_a_valid_address_the_warning_carries_no_links(
    environ: dict[str, str],
) -> None:
    message = sent(warning(), environ)
    assert HEADING not in message["email"]
    assert message["email"] == message["default"] == email_text(warning())


def test_a_link_key_that_cannot_be_read_sends_the_warning_without_links_and_says_why() -> None:
    heard: list[str] = []

    def denied(_name: str) -> bytes:
        raise PermissionError("AccessDeniedException")

    message = sent(warning(), read_secret=denied, on_error=heard.append)
    assert HEADING not in message["email"]
    assert heard == ["the link secret could not be read (PermissionError)"]


def test_only_answerable_action_warnings_and_e_mail_owners_get_links() -> None:
    # GIVEN a warning of an unanswerable guard, an action taken, and Slack-only owners
    unanswerable = warning_alert(idle(), T0 + GRACE, T0, guard="")
    taken = taken_alert(idle(), "stopped", "idle", T0)
    slack_owned = warning(replace(idle(), target=replace(target(), owners=("U024BE7LH",))))
    # THEN none carries links (an answer as anyone but an owner would be refused)
    for alert in (unanswerable, taken, slack_owned):
        assert HEADING not in sent(alert)["email"], alert.alert_id
    # AND a link key of no bytes makes none either
    assert email_answers(warning(), b"", URL, counter()) is None


def test_several_e_mail_owners_each_get_their_own_links_and_slack_ids_none() -> None:
    owners = ("U024BE7LH", "alice@example.com", "Bob@Example.com", "bob@example.com")
    alert = warning(replace(idle(), target=replace(target(), owners=owners)))
    text = sent(alert)["email"]
    assert "  As alice@example.com:" in text and "  As Bob@Example.com:" in text
    assert "U024BE7LH:" not in text and text.count("answer?t=") == 8
    # WHEN bob's "keep" link is used  THEN the answer is recorded as bob's
    section = text[text.index("  As Bob@Example.com:") :]
    desk = Desk()
    assert (
        confirm(desk, get(desk, links_in(HEADING + "\n" + section)["Keep 4 hours"])).status == 200
    )
    assert desk.queue.submitted[0].answerer.id == "Bob@Example.com"


def test_odd_unicode_in_owners_and_names_cannot_break_the_email_or_its_links() -> None:
    # GIVEN an owner and a resource whose tags carry line breaks, bidi overrides, emoji
    # and characters SNS refuses
    owner = "ma\u202eria\u2028@exa\nmple.com\U0001f600\ufffe"
    rid = "nb-\u00e9t\u00e9\u200d\U0001f468\u200d\U0001f52c\r\nX-Injected: yes"
    d = replace(idle(), target=replace(target(rid), owners=(owner,), name="Ṩ\u0301 \x00nb"))
    message = sent(warning(d))
    text = message["email"]
    # THEN every line the answer section adds is one line, the links whole and ASCII
    lines = text.split("\n")
    assert not any(line.startswith("X-Injected") for line in lines)
    links = links_in(text)
    assert len(links) == 4 and all(u.isascii() and " " not in u for u in links.values())
    # AND the links still answer, for that resource, as that owner
    desk = Desk()
    assert confirm(desk, get(desk, links["Act now"])).status == 200
    [request] = desk.queue.submitted
    assert request.resource == d.target.key and request.answerer.id == owner


def test_the_endpoint_address_is_read_as_a_mail_reader_would_open_it() -> None:
    assert answer_base("https://abc.lambda-url.us-east-1.on.aws/") == (
        "https://abc.lambda-url.us-east-1.on.aws"
    )
    assert answer_base("http://127.0.0.1:8080/") == "http://127.0.0.1:8080"
    assert answer_base("https://host/base/") == "https://host/base"
    for bad in ("", "https://", "http://example.com", "https://h/#x", "javascript:alert(1)"):
        assert answer_base(bad) is None, bad
