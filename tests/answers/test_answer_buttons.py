"""A warning carries its answers: the guard and resource it is about travel with the alert,
and Slack shows them as buttons whose values only CostGuard can sign."""

from __future__ import annotations

from datetime import timedelta

from costguard.domain.answers import Refusal
from costguard.domain.decisions import warning_alert
from costguard.domain.signatures import ButtonClaims, read_button, sign_button
from costguard.rendering import MachineAlert, machine_json, slack_blocks
from tests.answers.test_answers_taken import KEY, idle
from tests.unit.test_executor import T0

SECRET = b"slack-signing-secret"


def sign(guard: str, resource: str, owners: tuple[str, ...], deadline: str = "") -> str:
    return sign_button(SECRET, ButtonClaims(guard, resource, owners, deadline))


def warning(guard: str = "idle-notebooks") -> MachineAlert:
    alert = warning_alert(idle(T0), T0 + timedelta(hours=24), T0, guard)
    return MachineAlert.model_validate(machine_json(alert))


def test_an_action_warning_carries_its_answers_as_four_buttons() -> None:
    blocks = slack_blocks(warning(), sign)["blocks"]
    [actions] = [b for b in blocks if b["type"] == "actions"]
    assert [e["action_id"] for e in actions["elements"]] == [
        "keep-4h",
        "keep-until-tomorrow",
        "act-now",
        "exempt",
    ]
    # every button names the warning's guard, resource, owners and deadline, signed
    for element in actions["elements"]:
        claims = read_button(SECRET, element["value"])
        assert claims == ButtonClaims("idle-notebooks", KEY, ("U024BE7LH",), "2026-11-21T12:00:00Z")
        assert len(element["value"]) <= 2000  # Slack's limit for a button value
    # "act now" asks Slack's confirmation dialog first
    act_now = actions["elements"][2]
    assert act_now["style"] == "danger" and act_now["confirm"]["confirm"]["text"] == "Act now"


def test_no_buttons_without_a_signer_or_on_any_other_alert() -> None:
    assert not [b for b in slack_blocks(warning())["blocks"] if b["type"] == "actions"]
    unaddressed = warning(guard="")
    assert unaddressed.answer_to is None
    assert not [b for b in slack_blocks(unaddressed, sign)["blocks"] if b["type"] == "actions"]


def test_a_button_value_signed_elsewhere_is_not_ours() -> None:
    blocks = slack_blocks(
        warning(), lambda g, r, o, d="": sign_button(b"other", ButtonClaims(g, r, o, d))
    )
    [actions] = [b for b in blocks["blocks"] if b["type"] == "actions"]
    assert isinstance(read_button(SECRET, actions["elements"][0]["value"]), Refusal)
