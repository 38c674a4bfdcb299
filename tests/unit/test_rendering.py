"""Golden renderings of one alert per channel. Set UPDATE_GOLDEN=1 to rewrite them."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costguard.domain.alerts import (
    Alert,
    AlertKind,
    AlertResource,
    AlertSeverity,
    anomaly_alert,
    unattributed_alert,
)
from costguard.rendering import (
    MachineAlert,
    _cap_blocks,
    chat_notification,
    chat_safe,
    email_subject,
    email_text,
    fit_mrkdwn,
    machine_json,
    slack_blocks,
    slack_escape,
    slack_length,
    sns_attributes,
    sns_message,
)
from costguard_demo.slack_standin import slack_error
from tests.support.clock import MIDDAY

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def spike() -> object:
    causes = [
        AlertResource(
            "us-east-1/ec2-instance/i-0abc",
            "ec2-instance",
            "us-east-1",
            "p5.48xlarge",
            Decimal("55.04"),
            "dave@example.com",
            "new",
        ),
        AlertResource(
            "us-east-1/sagemaker-endpoint/ranker/primary",
            "sagemaker-endpoint",
            "us-east-1",
            "ml.g5.xlarge",
            Decimal("4.224"),
            None,
            "+$2.8160/h",
        ),
    ]
    return anomaly_alert(
        "llm-pretraining",
        Decimal("120.40"),
        Decimal("255.30"),
        causes,
        ("alice@example.com",),
        MIDDAY,
        "20261120T1200",
    )


def check(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(actual)
    assert actual == path.read_text(), f"{name} changed; UPDATE_GOLDEN=1 to accept"


def test_email_golden() -> None:
    alert = spike()
    check("anomaly.email.txt", email_subject(alert) + "\n\n" + email_text(alert) + "\n")  # type: ignore[arg-type]


def test_chat_golden_follows_the_amazon_q_custom_notification_schema() -> None:
    payload = chat_notification(spike())  # type: ignore[arg-type]
    assert payload["version"] == "1.0" and payload["source"] == "custom"
    assert set(payload["content"]) >= {"description"}
    check("anomaly.chat.json", json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def test_machine_golden_is_versioned_with_a_stable_alert_id() -> None:
    payload = machine_json(spike())  # type: ignore[arg-type]
    assert payload["schema"] == "costguard.alert/v1"
    assert payload["alert_id"] == "burn-rate-anomaly/llm-pretraining/20261120T1200"
    check("anomaly.machine.json", json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def test_slack_golden() -> None:
    check(
        "anomaly.slack.json",
        json.dumps(
            slack_blocks(MachineAlert.model_validate(machine_json(spike()))),  # type: ignore[arg-type]
            indent=2,
            ensure_ascii=False,
        )
        + "\n",
    )


def test_sns_message_has_a_rendering_for_every_protocol_and_routing_attributes() -> None:
    alert = spike()
    body = json.loads(sns_message(alert))  # type: ignore[arg-type]
    assert set(body) >= {"default", "email", "https", "sqs", "lambda"}
    assert json.loads(body["sqs"])["kind"] == AlertKind.BURN_RATE_ANOMALY.value
    assert json.loads(body["https"])["source"] == "custom"
    assert sns_attributes(alert) == {  # type: ignore[arg-type]
        "project": {"DataType": "String", "StringValue": "llm-pretraining"},
        "severity": {"DataType": "String", "StringValue": "critical"},
        "kind": {"DataType": "String", "StringValue": "burn-rate-anomaly"},
    }


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("<!channel>", "&lt;!channel&gt;"),
        ("<http://evil|click>", "&lt;http://evil|click&gt;"),
        ("R&D", "R&amp;D"),
        ("a > b", "a &gt; b"),
    ],
)
def test_slack_escaping(raw: str, safe: str) -> None:
    assert slack_escape(raw) == safe


def test_email_subject_is_ascii_and_short() -> None:
    alert = anomaly_alert("計算チーム" * 20, Decimal(1), Decimal(50), [], (), MIDDAY, "e")
    subject = email_subject(alert)
    assert len(subject) <= 100
    assert subject.isascii()
    assert "\n" not in subject


# -- Slack: Block Kit limits, escaping first, cutting after ----------------------------


def slack_of(document: dict[str, Any]) -> dict[str, Any]:
    return slack_blocks(MachineAlert.model_validate(document))


def big_alert(resources: int = 300, owners: int = 300, tag: str = "<&>" * 85 + "x") -> Alert:
    """Hundreds of resources and owners; tag values at AWS's 256-character maximum."""
    return Alert(
        alert_id=f"unattributed-spend/2026-11-20/{tag}",
        kind=AlertKind.UNATTRIBUTED,
        project=tag,
        severity=AlertSeverity.CRITICAL,
        title=f"{tag}: {resources} resource(s) with no project",
        summary=f"{tag} " * 40,
        at=MIDDAY,
        owners=tuple(f"owner-{n}-{tag}" for n in range(owners)),
        resources=tuple(
            AlertResource(
                f"us-east-1/ec2-instance/i-{n:017x}",
                "ec2-instance",
                "us-east-1",
                "p5.48xlarge",
                Decimal("55.04"),
                f"owner-{n}-{tag}",
                "new",
            )
            for n in range(resources)
        ),
        facts={f"fact_{n}": tag * 10 for n in range(12)},
        next_steps=tuple(f"step {n}: {tag}" for n in range(30)),
    )


def text_objects(payload: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (where, text) in a Block Kit payload."""
    found = []
    for block in payload["blocks"]:
        if isinstance(block.get("text"), dict):
            found.append((block["type"], block["text"]["text"]))
        for f in block.get("fields", []):
            found.append(("field", f["text"]))
        for e in block.get("elements", []):
            found.append(("context", e["text"]))
    return found


LIMITS = {"header": 150, "section": 3000, "field": 2000, "context": 3000}


def assert_within_block_kit_limits(payload: dict[str, Any]) -> None:
    assert 1 <= len(payload["blocks"]) <= 50
    for block in payload["blocks"]:
        assert len(block.get("fields", [])) <= 10
    for where, text in text_objects(payload):
        assert 1 <= slack_length(text) <= LIMITS[where], (where, len(text))
        if where == "header":  # plain text: shown as is, nothing to escape
            continue
        assert ENTITY_SAFE.fullmatch(text), f"a cut entity in {where}: {text[-20:]!r}"
        assert LINK_SAFE.fullmatch(text), f"a cut link in {where}: {text[-40:]!r}"


#: Outside a link, ``&`` only starts an entity; every ``<`` is closed by ``>``.
ENTITY_SAFE = re.compile(r"(?:[^&]|&(?:amp|lt|gt);)*", re.S)
LINK_SAFE = re.compile(r"(?:[^<>]|<[^<>]*>)*", re.S)


def test_slack_message_stays_within_block_kit_limits_with_hundreds_of_resources_and_owners() -> (
    None
):
    # GIVEN an alert far over every limit once escaped (each "<&>" grows to 13 characters)
    payload = slack_of(machine_json(big_alert()))
    # THEN every block is within Slack's limits, and no entity or link is cut in half
    assert_within_block_kit_limits(payload)
    assert slack_error(json.dumps(payload).encode()) is None


def test_owners_and_resources_beyond_what_fits_are_counted_not_dropped() -> None:
    payload = slack_of(machine_json(big_alert(resources=300, owners=300)))
    fields = payload["blocks"][2]["fields"]
    owners = next(f["text"] for f in fields if f["text"].startswith("*Owners*"))
    shown = owners.removeprefix("*Owners*\n").split(", ")
    hidden = int(re.search(r" \+(\d+) more$", owners).group(1))  # type: ignore[union-attr]
    assert len(shown) + hidden == 300
    resources = payload["blocks"][3]["text"]["text"]
    listed = resources.count("• ")
    assert resources.endswith(f"…and {300 - listed} more")


def test_a_few_owners_are_all_listed_without_a_count() -> None:
    fields = slack_of(machine_json(spike()))["blocks"][2]["fields"]  # type: ignore[arg-type]
    assert {"type": "mrkdwn", "text": "*Owners*\nalice@example.com, dave@example.com"} in fields
    assert not any("more" in f["text"] for f in fields)


@pytest.mark.parametrize(
    "summary", ["&" * 2000, "<" * 1000 + ">" * 1000, "a&" * 1500, "😀&" * 1200]
)
def test_a_long_summary_is_cut_after_escaping_on_an_entity_boundary(summary: str) -> None:
    document = {**machine_json(spike()), "summary": summary}  # type: ignore[arg-type]
    section = slack_of(document)["blocks"][1]["text"]["text"]
    assert slack_length(section) <= 3000
    assert section.endswith("…")
    assert ENTITY_SAFE.fullmatch(section)


def test_the_resource_list_is_cut_between_lines_never_inside_a_link() -> None:
    # GIVEN resources whose links and labels take ~330 characters a line
    document = machine_json(big_alert(resources=8, owners=1, tag="&" * 60))
    text = slack_of(document)["blocks"][3]["text"]["text"]
    assert slack_length(text) <= 3000
    assert LINK_SAFE.fullmatch(text)
    for line in text.splitlines()[:-1]:
        assert line.startswith("• <https://us-east-1.console.aws.amazon.com/")


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(
        st.one_of(
            st.text(alphabet="a&<>|*_~`😀\u0301\u200d ", max_size=40).map(slack_escape),
            st.just("<https://us-east-1.console.aws.amazon.com/x|label &amp; more>"),
        ),
        max_size=60,
    ),
    limit=st.integers(min_value=2, max_value=400),
)
def test_fit_mrkdwn_never_exceeds_the_limit_nor_cuts_an_entity_or_link(
    pieces: list[str], limit: int
) -> None:
    text = "".join(pieces)
    fitted = fit_mrkdwn(text, limit)
    assert slack_length(fitted) <= limit
    assert ENTITY_SAFE.fullmatch(fitted) and LINK_SAFE.fullmatch(fitted)
    if fitted != text:
        assert fitted.endswith("…") and text.startswith(fitted[:-1])


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("t" * 151, "t" * 149 + "…"),
        ("", "CostGuard alert"),
        ("  \n ", "CostGuard alert"),
        ("line one\nline two", "line one line two"),
        ("😀" * 100, "😀" * 74 + "…"),
        ("e\u0301" * 100, "e\u0301" * 74 + "…"),
    ],
)
def test_the_header_is_plain_text_of_1_to_150_characters(title: str, expected: str) -> None:
    document = {**machine_json(spike()), "title": title}  # type: ignore[arg-type]
    header = slack_of(document)["blocks"][0]["text"]
    assert header == {"type": "plain_text", "text": expected, "emoji": False}


def test_a_user_string_cannot_add_a_line_to_a_slack_field() -> None:
    document = {
        **machine_json(spike()),  # type: ignore[arg-type]
        "project": "vision\n*Severity*\ninfo",
        "owners": ["alice\u2028*Budget*: unlimited"],
    }
    fields = [f["text"] for f in slack_of(document)["blocks"][2]["fields"]]
    assert fields[0] == "*Project*\nvision *Severity* info"
    assert fields[2] == "*Owners*\nalice *Budget*: unlimited"


def test_links_are_only_costguard_console_links_rebuilt_from_the_key() -> None:
    # GIVEN a message whose console_url (or key) would close the link or point elsewhere
    document = machine_json(spike())  # type: ignore[arg-type]
    document["resources"][0]["console_url"] = "https://evil.example/|<!channel>"
    document["resources"][1]["key"] = "evil.example>|x/ec2-instance/i-9"
    text = slack_of(document)["blocks"][3]["text"]["text"]
    # THEN the first links to the console page its key names, the second is plain text
    assert "evil.example/" not in text
    assert "<!channel>" not in text
    assert text.splitlines()[0].startswith(
        "• <https://us-east-1.console.aws.amazon.com/ec2/home?region=us-east-1#InstanceDetails:instanceId=i-0abc|"
    )
    assert text.splitlines()[1].startswith("• ml.g5.xlarge evil.example&gt;|x/ec2-instance/i-9 —")


def test_cap_blocks_keeps_the_context_line() -> None:
    blocks = [{"type": "section", "n": n} for n in range(60)] + [{"type": "context"}]
    capped = _cap_blocks(blocks)
    assert len(capped) == 50 and capped[-1] == {"type": "context"}


# -- e-mail: one line per user string ----------------------------------------------------

LINE_BREAKERS = ["\n", "\r\n", "\r", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\u202e"]


@pytest.mark.parametrize("brk", LINE_BREAKERS)
def test_no_user_string_can_add_a_line_to_the_email(brk: str) -> None:
    # GIVEN tags that try to inject a line (a fake header, a fake instruction)
    injected = f"vision{brk}Bcc: mallory@example.com"
    alert = Alert(
        alert_id=f"burn-rate-anomaly/{injected}/e",
        kind=AlertKind.BURN_RATE_ANOMALY,
        project=injected,
        severity=AlertSeverity.WARNING,
        title=f"{injected}: spend jumped",
        summary=f"{injected} burns more",
        at=MIDDAY,
        owners=(f"alice{brk}Reply-To: x",),
        resources=(
            AlertResource(
                f"us-east-1/sagemaker-notebook/nb{brk}Click: here",
                "sagemaker-notebook",
                "us-east-1",
                "ml.p3.2xlarge",
                Decimal("3.825"),
                f"bob{brk}Urgent: pay",
                "new",
            ),
        ),
        facts={"delta": f"+1{brk}Transfer: now"},
    )
    # WHEN rendered for e-mail
    body = email_text(alert)
    subject = email_subject(alert)
    # THEN no line starts with what a tag injected, and the subject is one printable line
    for line in body.splitlines():
        assert not line.lstrip().startswith(("Bcc:", "Reply-To:", "Click:", "Urgent:", "Transfer:"))
    assert body.count("\n") == email_text(spike_like(alert)).count("\n")  # type: ignore[arg-type]
    assert subject.isprintable() and subject.isascii() and len(subject) <= 100
    # AND neither does the chat payload
    chat = chat_notification(alert)
    for text in (chat["content"]["title"], *chat["content"]["description"].split("\n")):
        assert not text.lstrip().startswith(("Bcc:", "Reply-To:", "Click:", "Urgent:"))


def spike_like(alert: Alert) -> Alert:
    """The same alert with harmless strings, to compare line counts."""
    return dataclasses.replace(
        alert,
        alert_id="a",
        project="vision",
        title="t",
        summary="s",
        owners=("alice",),
        resources=(
            dataclasses.replace(
                alert.resources[0], key="us-east-1/sagemaker-notebook/nb", owner="bob"
            ),
        ),
        facts={"delta": "+1"},
    )


# -- Amazon Q custom notifications: no mention, link or markup from a tag ----------------


def test_chat_notification_neutralises_mentions_links_and_markup_in_user_strings() -> None:
    # GIVEN a project and owners built to ping a channel and hide a link
    hostile = "<!channel> <@U123> @here [click](https://evil.example) <at>Bob</at>"
    alert = anomaly_alert(
        hostile,
        Decimal(10),
        Decimal(100),
        [
            AlertResource(
                "us-east-1/ec2-instance/i-1",
                "ec2-instance",
                "us-east-1",
                "p5.48xlarge",
                Decimal("55.04"),
                "@everyone <https://evil.example|bit.ly>",
                "new",
            )
        ],
        ("dave@example.com",),
        MIDDAY,
        "e",
    )
    # WHEN rendered for Amazon Q
    payload = chat_notification(alert)
    rendered = json.dumps(payload, ensure_ascii=False)
    # THEN nothing a chat client would act on survives, and e-mail addresses stay intact
    for live in ("<!channel>", "<@U123>", "@here", "@everyone", "](https://", "<at>", "<https://"):
        assert live not in rendered
    assert "‹!channel›" in payload["content"]["title"]
    assert "[click]\u200b(https://evil.example)" in payload["content"]["description"]
    assert payload["content"]["keywords"][2].startswith("‹!channel›")


def test_chat_notification_leaves_ordinary_text_alone() -> None:
    assert chat_safe("alice@example.com spent $5.00/h on g5.xlarge (vision-research)") == (
        "alice@example.com spent $5.00/h on g5.xlarge (vision-research)"
    )


# -- SNS: the whole message fits in 256 KiB -----------------------------------------------


@pytest.mark.parametrize("resources", [150, 400, 2000])
def test_an_alert_about_hundreds_of_resources_still_fits_in_one_sns_message(
    resources: int,
) -> None:
    # GIVEN an unattributed-spend alert about hundreds of untagged GPU instances
    many = [
        AlertResource(
            f"us-east-1/ec2-instance/i-0{n:016x}",
            "ec2-instance",
            "us-east-1",
            "g5.xlarge",
            Decimal("1.006"),
            f"some.engineer.{n}@example.com",
        )
        for n in range(resources)
    ]
    alert = unattributed_alert(many, MIDDAY)
    assert alert is not None
    # WHEN it is rendered for SNS
    body = sns_message(alert)
    # THEN SNS's 256 KiB limit is kept, and the renderings say how many were left out
    assert len(body.encode()) <= 256 * 1024 - 4096
    parts = json.loads(body)
    machine = json.loads(parts["sqs"])
    assert machine["resources_total"] == resources
    assert machine["owners_total"] == len(alert.owners)  # the listed resources' owners
    assert len(machine["resources"]) < resources
    assert "more, not listed here" in parts["email"]
    # AND the Slack notifier counts the ones it never received
    slack = slack_blocks(MachineAlert.model_validate(machine))
    assert slack["blocks"][3]["text"]["text"].endswith(
        f"…and {resources - slack['blocks'][3]['text']['text'].count('• ')} more"
    )


def test_a_small_alert_is_not_cut_for_sns() -> None:
    machine = json.loads(json.loads(sns_message(spike()))["sqs"])  # type: ignore[arg-type]
    assert "resources_total" not in machine and len(machine["resources"]) == 2


def test_an_alert_too_big_for_sns_is_rendered_once_per_listing_that_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cap at or above what the alert lists renders the body the previous cap rendered:
    an alert about two resources whose free text no cap can shrink is rendered twice
    (everything listed, then nothing), not once per cap; the body is the one the last cap
    gives, as before."""
    from costguard import rendering

    # GIVEN an alert about two resources whose summary alone is over SNS's limit
    alert = dataclasses.replace(spike(), summary="x" * (300 * 1024))  # type: ignore[type-var]
    rendered: list[int | None] = []
    real = rendering._sns_json

    def counted(alert: Any, cap: int | None, answers: Any = None) -> str:
        rendered.append(cap)
        return real(alert, cap, answers)

    monkeypatch.setattr(rendering, "_sns_json", counted)
    # WHEN it is rendered for SNS
    body = sns_message(alert)
    # THEN each different listing once: both resources (every cap from none to 5 lists
    # both), then none; and the body is the last cap's
    assert rendered == [None, 0]
    assert body == rendering.sns_safe(real(alert, 0))


HOSTILE_TEXT = st.text(
    alphabet=st.sampled_from(list("a <>&|*_`@![]()\n\r\u2028\u0301\u200d😀é:/")), max_size=300
)


@settings(max_examples=150, deadline=None)
@given(
    title=HOSTILE_TEXT,
    summary=HOSTILE_TEXT,
    project=st.one_of(st.none(), HOSTILE_TEXT),
    owners=st.lists(HOSTILE_TEXT, max_size=40),
    keys=st.lists(HOSTILE_TEXT, max_size=40),
    facts=st.dictionaries(HOSTILE_TEXT, HOSTILE_TEXT, max_size=12),
    steps=st.lists(HOSTILE_TEXT, max_size=25),
)
def test_any_alert_renders_as_block_kit_slack_accepts(
    title: str,
    summary: str,
    project: str | None,
    owners: list[str],
    keys: list[str],
    facts: dict[str, str],
    steps: list[str],
) -> None:
    document = {
        "schema": "costguard.alert/v1",
        "alert_id": "id/" + title,
        "kind": "burn-rate-anomaly",
        "project": project,
        "severity": "critical",
        "title": title,
        "summary": summary,
        "owners": owners,
        "facts": facts,
        "next_steps": steps,
        "resources": [
            {"key": f"us-east-1/ec2-instance/{k}", "kind": "ec2-instance", "owner": k, "change": k}
            for k in keys
        ],
    }
    payload = slack_of(document)
    assert slack_error(json.dumps(payload).encode()) is None
    assert_within_block_kit_limits(payload)
    for where, text in text_objects(payload):
        if where != "header":
            assert "<!" not in text and "<@" not in text


@pytest.mark.parametrize(
    "key",
    ["us-east-1/ec2-instance/i-1", "123456789012/us-east-1/ec2-instance/i-1"],
)
def test_console_links_read_keys_with_or_without_the_account(key: str) -> None:
    from costguard.rendering import console_url

    assert console_url(key) == (
        "https://us-east-1.console.aws.amazon.com/ec2/home?region=us-east-1"
        "#InstanceDetails:instanceId=i-1"
    )
