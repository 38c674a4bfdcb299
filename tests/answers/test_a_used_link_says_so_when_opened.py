"""An e-mail link already used says so when it is opened again: no form that can only fail,
and the page never claims the answer is still to be given."""

from __future__ import annotations

from costguard.services.answers import HttpRequest
from tests.answers.test_answer_desk import Desk, link, post


def test_opening_a_used_link_says_it_was_used_and_offers_no_form() -> None:
    """GIVEN a link its owner opened and confirmed (the answer was handed on)
    WHEN the link is opened again (the owner, a colleague it was forwarded to, a scanner)
    THEN the page says the link was already used (409), with no form to press.

    Defect: the GET showed the confirmation page again, with its button, although the
    link could answer nothing more: the person pressed and only then learnt it was used.
    """
    desk = Desk()
    token = link()
    assert desk.handle(post(token)).status == 200
    page = desk.handle(HttpRequest("GET", "/answer", query={"t": token}))
    assert page.status == 409
    assert "already used" in page.body
    assert "<form" not in page.body
    assert len(desk.queue.submitted) == 1
