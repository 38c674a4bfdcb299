"""What a warning's Slack message says once its answer is taken: the resource as the warning
named it, what was done, until when on the answerers' wall clock (UTC beside it), and who."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from costguard.domain.answers import Answer, Answerer, AnswerRequest
from costguard.domain.decisions import Action, done
from costguard.services.answering import Taken, TakenAnswer, local_time, told

AT = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)


def request(answer: Answer, until: datetime | None, reason: str = "") -> AnswerRequest:
    return AnswerRequest(
        "idle-notebooks",
        "us-east-1/ec2-instance/i-0abc",
        answer,
        Answerer("U0MARIA", "slack", "@maria"),
        AT,
        until,
        reason,
    )


def test_a_keep_is_told_on_the_deployments_wall_clock_with_utc_beside_it() -> None:
    # GIVEN a deployment in Europe/Paris, and a keep until 13:00 UTC
    paris = ZoneInfo("Europe/Paris")
    taken = TakenAnswer(Taken.KEPT, "kept", label="ec2-instance train-box")
    # WHEN it is told
    text = told(request(Answer.KEEP_4H, AT + timedelta(hours=1)), taken, paris)
    # THEN the message reads as Maria's clock does (UTC+1 in March before the change)
    assert (
        text
        == "ec2-instance train-box: kept until 14:00 Europe/Paris (13:00 UTC) on Sat 28 Mar by @maria"
    )


def test_the_wall_clock_follows_a_daylight_saving_change() -> None:
    # GIVEN until 09:00 in Paris the morning after the clocks go forward (29 March 2026)
    paris = ZoneInfo("Europe/Paris")
    until = datetime(2026, 3, 29, 7, 0, tzinfo=UTC)
    # THEN it is told as 09:00 there (UTC+2 now), not 08:00
    assert local_time(until, paris) == "09:00 Europe/Paris (07:00 UTC) on Sun 29 Mar"


def test_without_a_zone_the_time_is_told_in_utc_once() -> None:
    assert local_time(AT, None) == "12:00 UTC on Sat 28 Mar"
    assert local_time(AT, ZoneInfo("UTC")) == "12:00 UTC on Sat 28 Mar"


def test_an_exemption_is_told_with_its_reason_and_a_resource_not_found_by_its_key() -> None:
    until = datetime(2026, 4, 30, 23, 59, 59, tzinfo=UTC)
    taken = TakenAnswer(Taken.EXEMPTED, "exempted")
    text = told(request(Answer.EXEMPT, until, "thesis run"), taken)
    assert text == (
        "us-east-1/ec2-instance/i-0abc: exempted until 23:59 UTC on Thu 30 Apr by @maria "
        "(thesis run)"
    )


def test_act_now_is_told_with_what_the_guard_did() -> None:
    taken = TakenAnswer(Taken.ACT_NOW, "stopped now", label="notebook-instance nb-1")
    assert told(request(Answer.ACT_NOW, None), taken) == (
        "notebook-instance nb-1: @maria answered act now: stopped now"
    )


def test_what_each_action_did_in_words() -> None:
    assert done(Action.STOP_INSTANCE) == "stopped"
    assert done(Action.DELETE_VOLUME) == "deleted"
    assert done(Action.DELETE_OBJECTS) == "deleted objects in"
