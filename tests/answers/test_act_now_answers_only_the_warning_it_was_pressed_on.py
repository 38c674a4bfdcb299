""" "Act now" answers the warning it was pressed on. When that warning has ended (the owner
used the notebook) and a newer one has been sent since, a late delivery of the old press
must not cut the new warning's grace period short: the owner has not answered it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from costguard.domain.answers import Answer, AnswerRequest, answer_event, read_answer_event
from costguard.domain.decisions import Action, Step, deadline_tag, warning_alert
from costguard.domain.signatures import ButtonClaims, read_button
from costguard.rendering import MachineAlert, machine_json, slack_blocks
from costguard.services.answering import AnswerTaker, Taken
from costguard.services.executor import Executor
from tests.answers.test_answer_buttons import SECRET, sign
from tests.answers.test_answer_desk import Desk, button_payload, slack_request
from tests.answers.test_answers_taken import GRACE, KEY, MARIA, T0, World, idle
from tests.support.fakes import RecordingNotifier

W1 = deadline_tag(T0 + GRACE)


def test_a_late_act_now_from_an_ended_warning_does_not_answer_the_next_one() -> None:
    """GIVEN a notebook warned at T0 (W1), its owner pressing "Act now" on W1 at T0 + 1 min,
    and that answer's delivery delayed (the guard's Lambda throttled: asynchronous events
    wait up to the configured hour)
    AND meanwhile the owner used the notebook (W1 withdrawn at T0 + 5 min), and it went
    idle again and was warned anew at T0 + 40 min (W2, deadline T0 + 40 min + 24 h)
    WHEN the old press is finally taken at T0 + 50 min
    THEN it is not an answer to W2: refused (told to the presser alone), and nothing is
    stopped before W2's deadline.

    Defect: the button named the guard and the resource, not the warning: the taker
    recorded "act now" against W2's deadline, and the guard's run stopped the notebook at
    once; W2's owner never had its grace period, nor pressed anything on it.
    """
    w = World()
    assert w.guard_run(T0) is Step.WARNED
    withdrawn = T0 + timedelta(minutes=5)
    busy = replace(idle(withdrawn), action=Action.NONE)
    executor = Executor([w.actuator], w.ledger, RecordingNotifier([]), w.settings)
    assert [o.step for o in executor.run([busy], withdrawn).outcomes] == [Step.CLEARED]
    assert w.guard_run(T0 + timedelta(minutes=40)) is Step.WARNED
    pressed = T0 + timedelta(minutes=1)
    taken_at = T0 + timedelta(minutes=50)
    taker = AnswerTaker("idle-notebooks", [w.actuator], w.ledger, w.settings)
    request = AnswerRequest(
        "idle-notebooks", KEY, Answer.ACT_NOW, MARIA, pressed, request_id="late", deadline=W1
    )
    taken = taker.take(request, taken_at)
    assert taken.outcome is Taken.REFUSED and taken.private
    assert "has ended" in taken.detail
    assert w.guard_run(taken_at + timedelta(seconds=5)) is Step.WAITING
    assert w.resources["nb-1"].state == "InService"
    # AND pressed on W2 itself, "act now" is taken
    on_w2 = replace(
        request, request_id="w2", deadline=deadline_tag(T0 + timedelta(minutes=40) + GRACE)
    )
    assert taker.take(on_w2, taken_at).outcome is Taken.ACT_NOW


def test_the_warning_answered_travels_from_its_button_to_the_guard() -> None:
    """GIVEN an action warning rendered for Slack
    THEN its buttons' signed value names the warning's deadline; the desk puts it in the
    answer it hands on, and the answer event carries it to the guard's Lambda."""
    alert = warning_alert(idle(T0), T0 + GRACE, T0, "idle-notebooks")
    blocks = slack_blocks(MachineAlert.model_validate(machine_json(alert)), sign)["blocks"]
    [actions] = [b for b in blocks if b["type"] == "actions"]
    value = actions["elements"][2]["value"]
    claims = read_button(SECRET, value)
    assert isinstance(claims, ButtonClaims) and claims.deadline == W1
    desk = Desk()
    payload = button_payload(answer="act-now", value=value)
    # (the desk's signing secret is the one the buttons were signed with)
    assert desk.handle(slack_request(payload)).status == 200
    [handed] = desk.queue.submitted
    assert handed.deadline == W1
    back = read_answer_event(answer_event(handed))
    assert isinstance(back, AnswerRequest) and back.deadline == W1


def test_the_warning_answered_travels_in_an_e_mail_link_too() -> None:
    """GIVEN an action warning's e-mailed links
    THEN each link's token names the warning's deadline, and the answer its page confirms
    carries it to the guard."""
    from urllib.parse import parse_qs, unquote, urlsplit

    from costguard.domain.alerts import Alert
    from costguard.domain.answer_links import email_answers
    from costguard.domain.signatures import LinkClaims, read_link
    from tests.answers.test_answer_desk import LINKS, post

    alert = warning_alert(
        replace(idle(T0), target=replace(idle(T0).target, owners=("maria@example.com",))),
        T0 + GRACE,
        T0,
        "idle-notebooks",
    )
    assert isinstance(alert, Alert)
    made = email_answers(alert, LINKS, "https://answers.example", lambda: "nonce-1")
    assert made is not None
    act_now = made.owners[0].links[2]
    token = unquote(parse_qs(urlsplit(act_now.url).query)["t"][0])
    claims = read_link(LINKS, token, T0)
    assert isinstance(claims, LinkClaims) and claims.deadline == W1
    desk = Desk()
    assert desk.handle(post(token), T0).status == 200
    [handed] = desk.queue.submitted
    assert handed.deadline == W1
