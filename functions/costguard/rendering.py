"""How an alert reads in each channel. Pure functions: golden-tested, no I/O.

- ``email``: plain text a busy person can act on, with console links (and an answerable
  action warning's signed answer links, last);
- ``https``: Amazon Q Developer in chat apps' custom-notification schema (it drops anything else);
- ``sqs``/``lambda``: versioned machine JSON with a stable ``alert_id``;
- Slack Block Kit, for the incoming-webhook notifier, with every user string escaped.

Project names, owners and resource ids come from tags and names anyone in the account
can set. Every channel neutralises them on its own terms: one line each in e-mail (no
injected header or line), no mention or link in chat, escaped mrkdwn in Slack, and
Slack's Block Kit limits always respected, whatever the size of the alert.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any, Literal, Protocol
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

from costguard.domain.alerts import Alert, AlertResource
from costguard.domain.answer_links import EmailAnswers
from costguard.domain.answers import MAX_EXEMPT_DAYS, MAX_REASON_CHARS
from costguard.domain.decisions import deadline_tag
from costguard.domain.models import KeyParts, parse_key
from costguard.domain.money import per_hour, rate
from costguard.domain.text import plural, truncate

MACHINE_SCHEMA = "costguard.alert/v1"
KEYLESS = KeyParts("", "", "", "")
_SEVERITY_MARK = {"critical": "CRITICAL", "warning": "WARNING", "info": "INFO"}


def console_url(resource_key: str) -> str | None:
    """A link to the resource in the AWS console, from its ``[account/]region/kind/id`` key.

    The console opens in the account the reader is signed in to; the account is in the
    key (and so in every message) for the reader to switch to.
    """
    parts = parse_key(resource_key)
    if parts is None:
        return None
    _, region, kind, rid = parts
    base = f"https://{region}.console.aws.amazon.com"
    q = quote(rid, safe="")
    return {
        "ec2-instance": f"{base}/ec2/home?region={region}#InstanceDetails:instanceId={q}",
        "ebs-volume": f"{base}/ec2/home?region={region}#VolumeDetails:volumeId={q}",
        "eks-cluster": f"{base}/eks/home?region={region}#/clusters/{q}",
        "eks-nodegroup": f"{base}/eks/home?region={region}#/clusters/{quote(rid.split('/')[0], safe='')}",
        "sagemaker-notebook": f"{base}/sagemaker/home?region={region}#/notebook-instances/{q}",
        "sagemaker-endpoint": f"{base}/sagemaker/home?region={region}#/endpoints/{quote(rid.split('/')[0], safe='')}",
        "sagemaker-training-job": f"{base}/sagemaker/home?region={region}#/jobs/{q}",
        "sagemaker-studio-app": f"{base}/sagemaker/home?region={region}#/studio",
    }.get(kind)


# -- text safety shared by every channel ----------------------------------------------

#: Characters that end or reorder a line: C0/C1 controls (CR, LF, tab, NEL, ...), the
#: Unicode line and paragraph separators, and the bidi embeddings, overrides and
#: isolates ("Trojan source" reordering). Each becomes one space.
_LINE_BREAKERS = {
    **dict.fromkeys(range(0x00, 0x20), " "),
    **dict.fromkeys(range(0x7F, 0xA0), " "),
    **dict.fromkeys((0x2028, 0x2029), " "),
    **dict.fromkeys(range(0x202A, 0x202F), " "),
    **dict.fromkeys(range(0x2066, 0x206A), " "),
}


def one_line(text: str) -> str:
    """``text`` with every control, line-separator and bidi character replaced by a space.

    A user string (a project, an owner, a resource id) can then never start a new
    line in an e-mail, a header, or a chat message, nor reorder what is shown.
    """
    return text.translate(_LINE_BREAKERS)


# -- e-mail ----------------------------------------------------------------------------


def _resource_line(r: AlertResource) -> str:
    price = "unpriced" if r.usd_per_hour is None else per_hour(r.usd_per_hour)
    parts = [f"{r.instance_type or r.kind} {r.key}", price]
    if r.change:
        parts.append(r.change)
    if r.owner:
        parts.append(f"owner {r.owner}")
    return one_line(" - ".join(parts))


def email_subject(alert: Alert) -> str:
    """SNS subjects: ASCII printable, no newlines, at most 100 characters."""
    text = one_line(f"[CostGuard {_SEVERITY_MARK[alert.severity.value]}] {alert.title}")
    ascii_text = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text)
    return truncate(ascii_text, 100, "~")


def email_text(
    alert: Alert, *, max_listed: int | None = None, answers: EmailAnswers | None = None
) -> str:
    """Plain text, one user string per line at most: nothing in a tag can add a line.

    ``max_listed`` caps the owners and resources listed (the rest are counted), to keep
    a very large alert within SNS's message size. ``answers``: an action warning's signed
    answer links, in their own section after everything else the reader needs.
    """
    resources = alert.resources[:max_listed]
    owners = alert.owners[:max_listed]
    lines = [alert.title, "", alert.summary, ""]
    if alert.project is not None:
        lines.append(f"Project:  {alert.project}")
    lines.append(f"Severity: {alert.severity.value}")
    if alert.owners:
        more = len(alert.owners) - len(owners)
        lines.append(f"Owners:   {', '.join(owners)}" + (f" +{more} more" if more else ""))
    lines.append(f"When:     {alert.at:%Y-%m-%d %H:%M} UTC")
    if alert.why:
        lines += ["", f"Why: {alert.why}."]
    if alert.facts:
        lines += ["", *[f"  {k.replace('_', ' ')}: {v}" for k, v in alert.facts.items()]]
    if alert.resources:
        lines += ["", "Resources:"]
        for r in resources:
            lines.append(f"  - {_resource_line(r)}")
            url = console_url(r.key)
            if url:
                lines.append(f"    {url}")
        total = len(alert.resources) + alert.omitted_resources
        if len(resources) < total:
            lines.append(f"  ... and {total - len(resources)} more, not listed here")
    if alert.details:
        lines += ["", *[f"  - {d}" for d in alert.details]]
    if alert.next_steps:
        lines += [
            "",
            "What to do next:",
            *[f"  {i}. {s}" for i, s in enumerate(alert.next_steps, 1)],
        ]
    if answers is not None:
        lines += ["", *answer_lines(answers)]
    lines += ["", f"Alert id: {alert.alert_id}", "Sent by CostGuard."]
    # Each element is one line by construction; a newline inside one came from a user string.
    return "\n".join(one_line(line) for line in lines)


def answer_lines(answers: EmailAnswers) -> list[str]:
    """The answer section of an e-mail: a heading with the links' expiry, one line per
    link (the owners' addresses come from tags: one line each, like every user string)."""
    heading = f"Answer this warning (links work once, until {answers.expires:%Y-%m-%d %H:%M} UTC):"
    lines = [heading]
    several = len(answers.owners) > 1
    for group in answers.owners:
        if several:
            lines.append(f"  As {group.owner}:")
        indent = "    " if several else "  "
        lines += [f"{indent}{link.label}: {link.url}" for link in group.links]
    whom = " or ".join(g.owner for g in answers.owners)
    lines.append(
        f"Each link opens a page that asks you to confirm; the answer is recorded as {whom}'s."
    )
    return lines


# -- machine JSON ----------------------------------------------------------------------


def machine_json(alert: Alert, *, max_listed: int | None = None) -> dict[str, Any]:
    """The versioned document for queues and Lambdas.

    With ``max_listed`` (only for an alert too large for SNS), owners and resources are
    cut to that many and ``owners_total``/``resources_total`` give the full counts.
    """
    document: dict[str, Any] = {
        "schema": MACHINE_SCHEMA,
        "alert_id": alert.alert_id,
        "kind": alert.kind.value,
        "project": alert.project,
        "severity": alert.severity.value,
        "title": alert.title,
        "summary": alert.summary,
        "why": alert.why,
        "at": alert.at.isoformat(),
        "owners": list(alert.owners[:max_listed]),
        "facts": dict(alert.facts),
        "details": list(alert.details),
        "next_steps": list(alert.next_steps),
        "resources": [
            {
                "key": r.key,
                "kind": r.kind,
                "region": r.region,
                "instance_type": r.instance_type,
                "usd_per_hour": None if r.usd_per_hour is None else float(rate(r.usd_per_hour)),
                "owner": r.owner,
                "change": r.change or None,
                "console_url": console_url(r.key),
                "account": (parse_key(r.key) or KEYLESS).account or None,
            }
            for r in alert.resources[:max_listed]
        ],
    }
    if alert.answer_to is not None:
        document["answer_to"] = {
            "guard": alert.answer_to.guard,
            "resource": alert.answer_to.resource,
        }
        if alert.answer_to.deadline is not None:
            document["answer_to"]["deadline"] = deadline_tag(alert.answer_to.deadline)
    resources_total = len(alert.resources) + alert.omitted_resources
    if resources_total > len(document["resources"]) or len(alert.owners) > len(document["owners"]):
        document["owners_total"] = len(alert.owners)
        document["resources_total"] = resources_total
    return document


class MachineResource(BaseModel):
    """One resource of a ``costguard.alert/v1`` document."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    key: str
    kind: str
    region: str = ""
    instance_type: str | None = None
    usd_per_hour: float | None = None
    owner: str | None = None
    change: str | None = None


class MachineAlert(BaseModel):
    """A ``costguard.alert/v1`` document read back, e.g. by the Slack notifier from SNS.

    Unknown keys are ignored (v1 only ever gains keys); a wrong type is a clear
    validation error instead of a ``KeyError`` or ``TypeError`` halfway through rendering.
    """

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    schema_: Literal["costguard.alert/v1"] = Field(alias="schema")
    alert_id: str = Field(min_length=1)
    kind: str
    project: str | None = None
    severity: str
    title: str
    summary: str = ""
    why: str | None = None
    owners: tuple[str, ...] = ()
    facts: dict[str, str | int | float | None] = Field(default_factory=dict)
    #: The lines a digest lists (findings, advice): shown in Slack as in e-mail.
    details: tuple[str, ...] = ()
    next_steps: tuple[str, ...] = ()
    resources: tuple[MachineResource, ...] = ()
    #: Present when SNS's size made the publisher list fewer than all of them.
    owners_total: int | None = Field(default=None, ge=0)
    resources_total: int | None = Field(default=None, ge=0)
    #: An action warning's answers are addressed to this guard and resource.
    answer_to: MachineAnswerTo | None = None


class MachineAnswerTo(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    guard: str = Field(min_length=1, max_length=64)
    resource: str = Field(min_length=1, max_length=1024)
    #: The warning's deadline as tagged: its buttons answer that warning and no other.
    deadline: str = Field(default="", max_length=40)


# -- Amazon Q Developer in chat apps -----------------------------------------------------

#: An ``@`` that opens a word (``@here``, ``@channel``, ``@alice``), not one inside an e-mail.
_MENTION_AT = re.compile(r"(?<![\w.+-])@")
_WORD_JOINER = "\u2060"
_ZERO_WIDTH_SPACE = "\u200b"


def chat_safe(text: str) -> str:
    """A user string made inert for Amazon Q's ``client-markdown`` in Slack *and* Teams.

    Amazon Q renders the title, description and next steps as the chat client's own
    markdown, mentions included. So: one line; no ``<`` or ``>`` (Slack's ``<!here>``,
    ``<@U…>`` and ``<url|text>``, Teams' ``<at>`` and HTML become look-alike guillemets);
    no ``@here``/``@channel``/``@name`` mention (a word joiner after the ``@`` keeps how it
    looks); no ``[text](url)`` link (a zero-width space between ``]`` and ``(``). E-mail
    addresses and bare words are left as they are.
    """
    text = one_line(text).replace("<", "‹").replace(">", "›")
    text = _MENTION_AT.sub("@" + _WORD_JOINER, text)
    return text.replace("](", "]" + _ZERO_WIDTH_SPACE + "(")


def chat_notification(alert: Alert) -> dict[str, Any]:
    """Amazon Q Developer in chat apps custom notification (version 1.0)."""
    lines = [alert.summary, *(f"• {_resource_line(r)}" for r in alert.resources[:5])]
    total = len(alert.resources) + alert.omitted_resources
    if total > 5:
        lines.append(f"• +{total - 5} more")
    return {
        "version": "1.0",
        "source": "custom",
        "id": chat_safe(alert.alert_id),
        "content": {
            "textType": "client-markdown",
            "title": chat_safe(f"{_SEVERITY_MARK[alert.severity.value]}: {alert.title}"),
            "description": "\n".join(chat_safe(line) for line in lines),
            "nextSteps": [chat_safe(s) for s in alert.next_steps],
            "keywords": [chat_safe(k) for k in ("CostGuard", alert.kind.value, alert.project) if k],
        },
        "metadata": {
            "threadId": chat_safe(alert.project or alert.kind.value),
            "summary": chat_safe(alert.title),
            "eventType": alert.kind.value,
            "additionalContext": {
                "alert_id": chat_safe(alert.alert_id),
                "severity": alert.severity.value,
            },
        },
    }


#: SNS refuses a message (with its attributes) over 256 KiB; keep room for the attributes.
SNS_MESSAGE_BUDGET_BYTES = 256 * 1024 - 8 * 1024
#: Tried in turn until the message fits: every owner and resource, then fewer.
_LISTING_CAPS: tuple[int | None, ...] = (None, 100, 50, 20, 10, 5, 0)


def sns_message(alert: Alert, answers: EmailAnswers | None = None) -> str:
    """The ``MessageStructure=json`` body: one rendering per protocol, within SNS's size.

    An alert about hundreds of resources would otherwise exceed 256 KiB (each rendering
    lists them, and the machine JSON goes to three protocols) and fail to publish at all:
    it lists fewer of them, counting the rest, until it fits. ``answers`` go to e-mail
    only (the ``email`` protocol's text; ``default`` stays without links).
    """
    body = ""
    listed: tuple[int, int] | None = None
    for cap in _LISTING_CAPS:
        # A cap at or above what the alert lists renders the same body as the cap before
        # it, which did not fit: render it once (a huge alert about one resource was
        # rendered seven times).
        if (len(alert.resources[:cap]), len(alert.owners[:cap])) == listed:
            continue
        listed = (len(alert.resources[:cap]), len(alert.owners[:cap]))
        body = sns_safe(_sns_json(alert, cap, answers))
        if len(body.encode()) <= SNS_MESSAGE_BUDGET_BYTES:
            return body
    return body  # huge free text, not a list: let SNS refuse it loudly


def _sns_json(alert: Alert, max_listed: int | None, answers: EmailAnswers | None = None) -> str:
    text = email_text(alert, max_listed=max_listed)
    machine = json.dumps(
        machine_json(alert, max_listed=max_listed), ensure_ascii=False, sort_keys=True
    )
    return json.dumps(
        {
            "default": text,
            "email": email_text(alert, max_listed=max_listed, answers=answers)
            if answers is not None
            else text,
            "email-json": machine,
            "https": json.dumps(chat_notification(alert), ensure_ascii=False),
            "http": json.dumps(chat_notification(alert), ensure_ascii=False),
            "sqs": machine,
            "lambda": machine,
        },
        ensure_ascii=False,
    )


#: What SNS refuses in a message body or a String attribute: anything outside XML 1.0
#: (U+FFFE, U+FFFF, lone surrogates, most C0 controls). A tag may carry them.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def sns_safe(text: str) -> str:
    """``text`` with every character SNS would refuse replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def sns_attributes(alert: Alert) -> dict[str, dict[str, str]]:
    """Routing attributes for subscription filter policies."""
    return {
        "project": {"DataType": "String", "StringValue": sns_safe(alert.project or "-")},
        "severity": {"DataType": "String", "StringValue": alert.severity.value},
        "kind": {"DataType": "String", "StringValue": alert.kind.value},
    }


# -- Slack Block Kit ---------------------------------------------------------------------

#: Block Kit limits (Slack answers ``invalid_blocks`` past any of them).
SLACK_MAX_BLOCKS = 50
SLACK_MAX_SECTION_TEXT = 3000
SLACK_MAX_FIELD_TEXT = 2000
SLACK_MAX_FIELDS = 10
SLACK_MAX_HEADER_TEXT = 150
#: Shown in full up to these counts, then "+N more".
SLACK_MAX_RESOURCES = 8
SLACK_MAX_OWNERS = 10
SLACK_MAX_FACTS = 6
#: A digest's lines take at most this many sections (3,000 characters each), then "+N more".
SLACK_MAX_DETAIL_SECTIONS = 3
SLACK_MAX_DETAIL_LINE = 700

_ELLIPSIS = "…"
#: Joiners and variation selectors belong with the character before them.
_CONTINUATIONS = {"\u200d", "\ufe0e", "\ufe0f"}
#: CostGuard's own links only: a console page in some region, nothing that could close the link.
_CONSOLE_LINK = re.compile(r"https://[a-z0-9-]+\.console\.aws\.amazon\.com/[^\s<>|&]*")


def slack_escape(text: str) -> str:
    """Slack mrkdwn control characters. ``<!channel>`` and ``<http://x|y>`` become inert text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_length(text: str) -> int:
    """Length as Slack may count it: UTF-16 code units, never fewer than code points."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _continues(ch: str) -> bool:
    """A mark, joiner or variation selector: part of the character before it."""
    return ch in _CONTINUATIONS or unicodedata.combining(ch) != 0


def _prefix_within(text: str, budget: int) -> str:
    """The longest prefix within ``budget`` that does not split a character from its marks."""
    used = 0
    for i, ch in enumerate(text):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > budget:
            cut = i
            while cut > 0 and _continues(text[cut]):
                cut -= 1
            return text[:cut]
    return text


def _trim_dangling(text: str) -> str:
    """No zero-width joiner left at the end, waiting to glue onto the ellipsis."""
    return text.rstrip("\u200d")


def _at_word(head: str, text: str) -> str:
    """``head`` (a prefix of ``text``) backed off to the end of its last whole word, so a
    cut never shows part of an amount, an ARN or a name (``$12,`` for ``$12,000.00``). A
    first word longer than the whole room is still cut: something must be shown."""
    if len(head) < len(text) and not text[len(head)].isspace():
        space = max(head.rfind(" "), head.rfind("\n"))
        if space > 0:
            head = head[:space]
    return head.rstrip()


def fit_plain(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` (Slack length) between words, with an ellipsis, if it is
    longer."""
    if slack_length(text) <= limit:
        return text
    return _trim_dangling(_at_word(_prefix_within(text, limit - 1), text)) + _ELLIPSIS


def fit_mrkdwn(text: str, limit: int) -> str:
    """Escaped mrkdwn cut to ``limit``, never inside an entity or a ``<link|label>``.

    After :func:`slack_escape`, every ``&`` starts an entity and every ``<`` starts a
    link CostGuard built itself, so a cut that leaves an ``&`` without its ``;`` or a
    ``<`` without its ``>`` backs off to just before it.
    """
    if slack_length(text) <= limit:
        return text
    head = _at_word(_prefix_within(text, limit - 1), text)
    lt = head.rfind("<")
    if lt > head.rfind(">"):
        head = head[:lt]
    amp = head.rfind("&")
    if amp != -1 and ";" not in head[amp:]:
        head = head[:amp]
    return _trim_dangling(head) + _ELLIPSIS


def _user(text: object, limit: int) -> str:
    """One user string, on one line, escaped, and cut (after escaping) to ``limit``."""
    return fit_mrkdwn(slack_escape(one_line(str(text))), limit)


def _field(label: str, value: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": fit_mrkdwn(f"*{label}*\n{value}", SLACK_MAX_FIELD_TEXT)}


def _joined_within(items: Sequence[str], sep: str, limit: int, more: str, total: int) -> str:
    """As many of ``items`` as fit in ``limit``, then ``more`` with the count left out.

    ``total`` counts the items not even offered (beyond a display cap) as left out too.
    """
    full = sep.join(items)
    if total == len(items) and slack_length(full) <= limit:
        return full
    budget = limit - slack_length(more.format(n=total))
    shown: list[str] = []
    used = 0
    for item in items:
        cost = slack_length(item) + (len(sep) if shown else 0)
        if used + cost > budget:
            break
        shown.append(item)
        used += cost
    return (sep.join(shown) + more.format(n=total - len(shown))).lstrip()


def _owners(owners: Sequence[str], total: int) -> str:
    names = [_user(o, 200) for o in owners[:SLACK_MAX_OWNERS]]
    budget = SLACK_MAX_FIELD_TEXT - len("*Owners*\n")
    return _joined_within(names, ", ", budget, " +{n} more", total)


def _resource_link(r: MachineResource) -> str:
    label = _user(f"{r.instance_type or r.kind} {r.key}", 300)
    url = console_url(r.key)
    if url and len(url) <= 1000 and _CONSOLE_LINK.fullmatch(url):
        return f"<{url}|{label}>"
    return label


def _resource_lines(resources: Sequence[MachineResource], total: int) -> str:
    lines = []
    for r in resources[:SLACK_MAX_RESOURCES]:
        price = "unpriced" if r.usd_per_hour is None else f"${r.usd_per_hour}/h"
        extra = " · ".join(_user(x, 300) for x in (r.change, r.owner) if x)
        lines.append(f"• {_resource_link(r)} — {price}" + (f" · {extra}" if extra else ""))
    return _joined_within(lines, "\n", SLACK_MAX_SECTION_TEXT, "\n…and {n} more", total)


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _detail_sections(details: Sequence[str]) -> list[dict[str, Any]]:
    """A digest's lines as up to :data:`SLACK_MAX_DETAIL_SECTIONS` sections, whole lines
    each, then the count of lines that did not fit."""
    lines = [f"• {_user(d, SLACK_MAX_DETAIL_LINE)}" for d in details]
    sections: list[str] = []
    current: list[str] = []
    used = 0
    shown = 0
    reserve = slack_length("\n…and 100,000 more lines")
    for line in lines:
        cost = slack_length(line) + (1 if current else 0)
        last = len(sections) == SLACK_MAX_DETAIL_SECTIONS - 1
        budget = SLACK_MAX_SECTION_TEXT - (reserve if last else 0)
        if used + cost > budget:
            if last or not current:
                break
            sections.append("\n".join(current))
            current, used = [], 0
            cost = slack_length(line)
        current.append(line)
        used += cost
        shown += 1
    if shown < len(lines):
        current.append(f"…and {plural(len(lines) - shown, 'more line')}")
    if current:
        sections.append("\n".join(current))
    return [_section(t) for t in sections]


def _cap_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most 50 blocks; the last one (the context line with the alert id) always stays."""
    if len(blocks) <= SLACK_MAX_BLOCKS:
        return blocks
    return [*blocks[: SLACK_MAX_BLOCKS - 1], blocks[-1]]


class ButtonSigner(Protocol):
    """Signs what an action warning's buttons are about (guard, resource, owners, and the
    warning's deadline): the Slack app's signing secret makes the value (see
    costguard.domain.signatures.sign_button)."""

    def __call__(
        self, guard: str, resource: str, owners: tuple[str, ...], deadline: str = ""
    ) -> str: ...


#: The answers a warning offers, as Slack buttons: (action id, label).
ANSWER_BUTTONS = (
    ("keep-4h", "Keep 4 hours"),
    ("keep-until-tomorrow", "Keep until tomorrow 09:00"),
    ("act-now", "Act now"),
    ("exempt", "Exempt…"),
)


def answer_block(alert: MachineAlert, sign: ButtonSigner | None) -> dict[str, Any] | None:
    """The answers an action warning carries, as one Block Kit ``actions`` block; None for
    any other alert, or where answers are not set up (no signer). "Act now" asks Slack's
    own confirmation dialog first."""
    to = alert.answer_to
    if sign is None or to is None or alert.kind != "action-warning":
        return None
    value = sign(to.guard, to.resource, tuple(alert.owners), to.deadline)
    elements: list[dict[str, Any]] = []
    for action_id, label in ANSWER_BUTTONS:
        button: dict[str, Any] = {
            "type": "button",
            "action_id": action_id,
            "text": {"type": "plain_text", "text": label, "emoji": False},
            "value": value,
        }
        if action_id == "act-now":
            button["style"] = "danger"
            button["confirm"] = {
                "title": {"type": "plain_text", "text": "Act now?"},
                "text": {
                    "type": "plain_text",
                    "text": fit_plain(f"{one_line(alert.title)}: now, not at the deadline.", 300),
                },
                "confirm": {"type": "plain_text", "text": "Act now"},
                "deny": {"type": "plain_text", "text": "Cancel"},
                "style": "danger",
            }
        elements.append(button)
    return {"type": "actions", "block_id": "costguard-answers", "elements": elements}


#: The Exempt… dialog (a Slack modal): its callback id and its two inputs' block ids, which
#: the view submission names its values and its errors by.
EXEMPT_CALLBACK_ID = "costguard-exempt"
EXEMPT_REASON_BLOCK = "reason"
EXEMPT_UNTIL_BLOCK = "until"
#: The end date the dialog proposes: a week on (at most MAX_EXEMPT_DAYS).
EXEMPT_DEFAULT_DAYS = 7
#: Slack's limits for a modal (Block Kit reference, "Modal views").
SLACK_MAX_MODAL_TITLE = 24
SLACK_MAX_PRIVATE_METADATA = 3000


def exempt_metadata(button_value: str, response_url: str | None) -> str:
    """The dialog's ``private_metadata``: the pressed button's signed value (which warning,
    about which resource, whose) and where the warning's message is updated in place. Without
    the response URL when both would not fit Slack's 3,000 characters (the message then
    stays as it is; the exemption holds all the same)."""
    both = json.dumps({"b": button_value, "u": response_url}, separators=(",", ":"))
    if response_url and len(both) <= SLACK_MAX_PRIVATE_METADATA:
        return both
    return json.dumps({"b": button_value, "u": None}, separators=(",", ":"))


def read_exempt_metadata(metadata: object) -> tuple[object, str | None]:
    """The button value and the response URL back from a submitted dialog (as sent: the
    caller verifies the value's signature and judges the URL)."""
    try:
        raw = json.loads(metadata) if isinstance(metadata, str) else None
    except ValueError:
        raw = None
    if not isinstance(raw, dict):
        return metadata, None
    url = raw.get("u")
    return raw.get("b"), url if isinstance(url, str) and url else None


def exempt_modal(
    guard: str, resource: str, button_value: str, response_url: str | None, today: date
) -> dict[str, Any]:
    """The Exempt… dialog Slack opens (``views.open``): a reason and an end date, at most
    :data:`MAX_EXEMPT_DAYS` ahead (the desk checks both again on submission)."""
    last = today + timedelta(days=MAX_EXEMPT_DAYS)
    what = _user(f"{one_line(resource)} ({one_line(guard)})", 500)
    return {
        "type": "modal",
        "callback_id": EXEMPT_CALLBACK_ID,
        "title": {"type": "plain_text", "text": "Exempt from CostGuard", "emoji": False},
        "submit": {"type": "plain_text", "text": "Exempt", "emoji": False},
        "close": {"type": "plain_text", "text": "Cancel", "emoji": False},
        "private_metadata": exempt_metadata(button_value, response_url),
        "blocks": [
            _section(
                fit_mrkdwn(
                    f"CostGuard will leave {what} alone through the end of the date you choose "
                    "(UTC), then warn again. The reason goes in the audit trail.",
                    SLACK_MAX_SECTION_TEXT,
                )
            ),
            {
                "type": "input",
                "block_id": EXEMPT_REASON_BLOCK,
                "label": {"type": "plain_text", "text": "Reason", "emoji": False},
                "element": {
                    "type": "plain_text_input",
                    "action_id": EXEMPT_REASON_BLOCK,
                    "multiline": True,
                    "min_length": 1,
                    "max_length": MAX_REASON_CHARS,
                    "placeholder": {
                        "type": "plain_text",
                        "text": "e.g. a training run until the conference",
                    },
                },
                "hint": {
                    "type": "plain_text",
                    "text": f"Why it must keep running (at most {MAX_REASON_CHARS} characters).",
                },
            },
            {
                "type": "input",
                "block_id": EXEMPT_UNTIL_BLOCK,
                "label": {"type": "plain_text", "text": "Exempt until", "emoji": False},
                "element": {
                    "type": "datepicker",
                    "action_id": EXEMPT_UNTIL_BLOCK,
                    "initial_date": (
                        today + timedelta(days=min(EXEMPT_DEFAULT_DAYS, MAX_EXEMPT_DAYS))
                    ).isoformat(),
                    "placeholder": {"type": "plain_text", "text": "Pick the last day"},
                },
                "hint": {
                    "type": "plain_text",
                    "text": (
                        f"At most {MAX_EXEMPT_DAYS} days ahead (until {last.isoformat()}). "
                        "For longer, tag the resource costguard:exempt by hand."
                    ),
                },
            },
        ],
    }


def slack_blocks(alert: MachineAlert, sign: ButtonSigner | None = None) -> dict[str, Any]:
    """Block Kit for one alert, within Slack's limits however many resources and owners it
    has; an action warning carries its answers as buttons when ``sign`` is given."""
    icon = {
        "critical": ":rotating_light:",
        "warning": ":warning:",
        "info": ":information_source:",
    }.get(alert.severity, ":information_source:")
    title = one_line(alert.title).strip() or "CostGuard alert"
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {
                "type": "plain_text",
                "text": fit_plain(title, SLACK_MAX_HEADER_TEXT),
                "emoji": False,
            },
        },
        _section(
            fit_mrkdwn(f"{icon} {slack_escape(one_line(alert.summary))}", SLACK_MAX_SECTION_TEXT)
        ),
    ]
    fields = []
    if alert.project:
        fields.append(_field("Project", _user(alert.project, SLACK_MAX_FIELD_TEXT)))
    fields.append(_field("Severity", _user(alert.severity, 100)))
    if alert.owners:
        total = max(alert.owners_total or 0, len(alert.owners))
        fields.append(_field("Owners", _owners(alert.owners, total)))
    for k, v in list(alert.facts.items())[:SLACK_MAX_FACTS]:
        fields.append(_field(_user(k.replace("_", " "), 100), _user(v, SLACK_MAX_FIELD_TEXT)))
    blocks.append({"type": "section", "fields": fields[:SLACK_MAX_FIELDS]})
    answers = answer_block(alert, sign)
    if answers is not None:
        blocks.append(answers)
    if alert.resources:
        total = max(alert.resources_total or 0, len(alert.resources))
        blocks.append(_section(_resource_lines(alert.resources, total)))
    if alert.details:
        blocks.extend(_detail_sections(alert.details))
    if alert.next_steps:
        steps = "\n".join(f"{i}. {_user(s, 500)}" for i, s in enumerate(alert.next_steps[:20], 1))
        blocks.append(_section(fit_mrkdwn(f"*Next steps*\n{steps}", SLACK_MAX_SECTION_TEXT)))
    blocks.append(
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"CostGuard · {_user(alert.alert_id, 300)}"}],
        }
    )
    return {
        "text": fit_mrkdwn(slack_escape(title), SLACK_MAX_SECTION_TEXT),
        "blocks": _cap_blocks(blocks),
    }
