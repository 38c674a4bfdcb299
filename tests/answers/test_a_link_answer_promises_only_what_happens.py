"""The page after a link's answer is confirmed says what happens next, and only that: the
guard takes the answer after its checks; nobody is e-mailed back about it."""

from __future__ import annotations

from tests.answers.test_answer_desk import Desk, link, post


def test_the_confirmation_page_does_not_promise_to_tell_anybody() -> None:
    """GIVEN an owner confirming a link's "Keep 4 hours"
    WHEN the answer is handed on
    THEN the page says CostGuard will do it after checking it is still theirs to answer,
    and does not promise that the owners will be told.

    Defect: the page said "CostGuard will do this shortly and tell the owners", but an
    answer from a link updates no message and sends no e-mail: when the guard refused it
    (the owner changed, the notebook already stopped) the person was left believing it
    was done, waiting for a word that never came.
    """
    desk = Desk()
    page = desk.handle(post(link()))
    assert page.status == 200
    assert "tell the owners" not in page.body
    assert "still" in page.body and "audit" in page.body
