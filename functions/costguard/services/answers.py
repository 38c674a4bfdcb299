"""The answer desk: a warning's answers, from Slack's buttons and e-mail links, checked and
handed to the act path. It never acts itself: its only way out is a queue the act path
reads, where each answer goes through the executor (claimed once, scope and exemption
re-checked, audited with who answered, dry-run honoured).

Everything it refuses is refused with a status and a reason (for the log), and touches
nothing: a forged, altered, stale or replayed Slack request; a user who is not the owner;
a link that is tampered with, expired or used; a GET (mail scanners open links: a GET only
shows the confirmation page); a form without its CSRF token; an oversized or garbled body.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Protocol
from urllib.parse import parse_qs

from costguard.domain.answers import (
    Answer,
    Answerer,
    AnswerRequest,
    Refusal,
    clean_reason,
    exemption_until,
    keep_until,
    may_answer,
    parse_answer,
    time_zone,
)
from costguard.domain.calendar import require_utc
from costguard.domain.signatures import (
    MAX_BODY_BYTES,
    ButtonClaims,
    LinkClaims,
    csrf_token,
    read_button,
    read_link,
    verify_csrf,
    verify_slack,
)
from costguard.domain.tags import Tags
from costguard.domain.text import truncate
from costguard.ports import ClaimStore, SlackCallError
from costguard.rendering import (
    EXEMPT_CALLBACK_ID,
    EXEMPT_REASON_BLOCK,
    EXEMPT_UNTIL_BLOCK,
    exempt_modal,
    read_exempt_metadata,
    slack_escape,
)

#: Claims of the desk: a Slack request's signature (replays) and a link's nonce (one use).
SLACK_REQUESTS = "slack-request"
USED_LINKS = "answer-link"


class AnswerQueue(Protocol):
    def submit(self, request: AnswerRequest) -> None: ...


class AnswerSecrets(Protocol):
    """Slack's signing secret, the Slack app's bot token (for the Exempt… dialog) and the
    deployment's link secret (Secrets Manager)."""

    def slack_signing_secret(self) -> bytes: ...

    def slack_bot_token(self) -> bytes: ...

    def link_secret(self) -> bytes: ...


class SlackDialogs(Protocol):
    """What the desk asks of Slack while the person waits (within Slack's 3 seconds)."""

    def open_view(self, token: bytes, trigger_id: str, view: dict[str, Any]) -> None:
        """Open a modal for the person whose interaction gave ``trigger_id``; raises
        :class:`~costguard.ports.SlackCallError` saying why not."""
        ...

    def respond(self, response_url: str, message: dict[str, Any]) -> None:
        """Post a message (e.g. an ephemeral one) through an interaction's response URL."""
        ...

    def is_response_url(self, url: object) -> bool:
        """Whether ``url`` is Slack's own response URL (the only kind ever posted to)."""
        ...


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    #: Header names lower-cased.
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    query: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    status: int
    body: str = ""
    content_type: str = "application/json"
    #: Why it was refused (for the log; never the secret, never the token).
    refused: str | None = None
    #: What was accepted (for the log).
    accepted: AnswerRequest | None = None


@dataclass(frozen=True, slots=True)
class DeskSettings:
    scope: str
    #: Slack member IDs or e-mail addresses who may answer any warning.
    admins: frozenset[str] = frozenset()
    #: The deployment's time zone, for "keep until tomorrow 09:00".
    time_zone: str = "UTC"


def _refused(r: Refusal) -> HttpAnswer:
    return HttpAnswer(r.status, json.dumps({"error": r.reason}), refused=r.reason)


class AnswerDesk:
    def __init__(
        self,
        secrets: AnswerSecrets,
        claims: ClaimStore,
        queue: AnswerQueue,
        settings: DeskSettings,
        dialogs: SlackDialogs | None = None,
    ) -> None:
        """``dialogs``: Slack's Web API for the Exempt… dialog; without it, Exempt… tells
        the person how to exempt by hand."""
        self._secrets = secrets
        self._claims = claims
        self._queue = queue
        self._s = settings
        self._dialogs = dialogs

    def handle(self, request: HttpRequest, now: datetime) -> HttpAnswer:
        now = require_utc(now)
        if len(request.body) > MAX_BODY_BYTES:
            return _refused(Refusal("the body is too large", status=413))
        route = (request.method.upper(), request.path.rstrip("/") or "/")
        if route == ("POST", "/slack"):
            return self._slack(request, now)
        if route == ("GET", "/answer"):
            return self._page(request.query.get("t"), now)
        if route == ("POST", "/answer"):
            return self._confirmed(request, now)
        return _refused(Refusal(f"no such route: {route[0]} {truncate(route[1], 60)}", 404))

    # -- Slack ------------------------------------------------------------------------------

    def _slack(self, request: HttpRequest, now: datetime) -> HttpAnswer:
        headers = request.headers
        signature = headers.get("x-slack-signature")
        refused = verify_slack(
            self._secrets.slack_signing_secret(),
            headers.get("x-slack-request-timestamp"),
            signature,
            request.body,
            now,
        )
        if refused is not None:
            return _refused(refused)
        assert signature is not None
        request_id = hashlib.sha256(signature.encode()).hexdigest()[:32]
        if not self._claims.put_once(SLACK_REQUESTS, request_id, now, {}):
            return _refused(Refusal("the same Slack request was already answered", 401))
        payload = _slack_payload(request.body)
        if isinstance(payload, Refusal):
            return _refused(payload)
        user = _mapping(payload.get("user"))
        who = Answerer(
            str(user.get("id", "")),
            "slack",
            "@" + str(user.get("username") or user.get("name") or user.get("id", "")),
        )
        if payload.get("type") == "block_actions":
            return self._button(payload, who, now, request_id)
        if payload.get("type") == "view_submission":
            return self._exempt_form(payload, who, now, request_id)
        return _refused(Refusal("not an interaction CostGuard answers", 400))

    def _button(
        self, payload: Mapping[str, Any], who: Answerer, now: datetime, request_id: str
    ) -> HttpAnswer:
        actions = payload.get("actions")
        if not isinstance(actions, list) or not actions or not isinstance(actions[0], Mapping):
            return _refused(Refusal("the interaction names no button", 400))
        answer = parse_answer(actions[0].get("action_id"))
        if isinstance(answer, Refusal):
            return _refused(answer)
        claims = read_button(self._secrets.slack_signing_secret(), actions[0].get("value"))
        if isinstance(claims, Refusal):
            return _refused(claims)
        if not may_answer(who, claims.owners, self._s.admins):
            owners = ", ".join(f"<@{o}>" if "@" not in o else o for o in claims.owners) or "none"
            text = f"This warning is not yours to answer: its owners ({owners}) or a CostGuard admin can."
            return self._ephemeral(
                payload, text, refused=f"{who} is not an owner of {claims.resource}"
            )
        if answer is Answer.EXEMPT:
            return self._open_exempt_dialog(payload, actions[0].get("value"), claims, now)
        until = None
        if answer in (Answer.KEEP_4H, Answer.KEEP_UNTIL_TOMORROW):
            zone = time_zone(self._s.time_zone)
            if isinstance(zone, Refusal):
                return _refused(zone)
            until = keep_until(answer, now, zone)
        return self._accept(
            AnswerRequest(
                claims.guard,
                claims.resource,
                answer,
                who,
                now,
                until,
                response_url=_text(payload.get("response_url")),
                request_id=request_id,
                deadline=claims.deadline,
            ),
            "",
        )

    def _open_exempt_dialog(
        self, payload: Mapping[str, Any], value: object, claims: ButtonClaims, now: datetime
    ) -> HttpAnswer:
        """Exempt… opens a dialog (a reason, an end date); its submission comes back as a
        ``view_submission``. Slack wants the modal within 3 seconds of the press (the
        trigger_id expires): one short attempt, and if it fails the person is told, in the
        channel and only to them, how to exempt by hand."""
        trigger_id = _text(payload.get("trigger_id"))
        response_url = _text(payload.get("response_url"))
        why: str
        if self._dialogs is None:
            why = "the Exempt… dialog is not set up (no Slack Web API)"
        elif trigger_id is None or not isinstance(value, str):
            why = "the press carries no trigger_id to open the dialog with"
        else:
            view = exempt_modal(
                claims.guard,
                claims.resource,
                value,
                response_url if self._dialogs.is_response_url(response_url) else None,
                now.date(),
            )
            try:
                self._dialogs.open_view(self._secrets.slack_bot_token(), trigger_id, view)
            except Exception as exc:  # told to the person and logged; never a traceback
                why = _why(exc)
            else:
                return HttpAnswer(200, "")
        text = (
            "CostGuard could not open the Exempt… dialog. To exempt "
            f"{slack_escape(claims.resource)}, tag it `{Tags.EXEMPT}=YYYY-MM-DD` (the last "
            "day it may keep running), or ask a CostGuard admin. Keep 4 hours and Keep until "
            "tomorrow still work."
        )
        return self._ephemeral(payload, text, refused=f"could not open the Exempt… dialog: {why}")

    def _ephemeral(self, payload: Mapping[str, Any], text: str, *, refused: str) -> HttpAnswer:
        """Tell only the person who pressed. Slack ignores the body of a button press's
        acknowledgement, so the message goes through the press's response URL (one short
        attempt); it is in the body too, for anything that reads it."""
        message = {"response_type": "ephemeral", "replace_original": False, "text": text}
        url = payload.get("response_url")
        if self._dialogs is not None and self._dialogs.is_response_url(url):
            assert isinstance(url, str)
            try:
                self._dialogs.respond(url, message)
            except Exception as exc:  # the refusal is logged all the same
                refused = f"{refused} (and the reply did not reach Slack: {_why(exc)})"
        return HttpAnswer(200, json.dumps(message), refused=refused)

    def _exempt_form(
        self, payload: Mapping[str, Any], who: Answerer, now: datetime, request_id: str
    ) -> HttpAnswer:
        view = _mapping(payload.get("view"))
        if view.get("callback_id") != EXEMPT_CALLBACK_ID:
            return _refused(Refusal("not a dialog CostGuard opened", 400))
        value, response_url = read_exempt_metadata(view.get("private_metadata"))
        claims = read_button(self._secrets.slack_signing_secret(), value)
        if isinstance(claims, Refusal):
            return _refused(claims)
        if not may_answer(who, claims.owners, self._s.admins):
            # Slack shows errors on the dialog's inputs; anything but a 200 is "trouble
            # connecting".
            return HttpAnswer(
                200,
                json.dumps(
                    {
                        "response_action": "errors",
                        "errors": {
                            EXEMPT_REASON_BLOCK: "This warning is not yours to answer: its "
                            "owners or a CostGuard admin can."
                        },
                    }
                ),
                refused=f"{who} is not an owner of {claims.resource}",
            )
        values = _form_values(view)
        reason = clean_reason(values.get(EXEMPT_REASON_BLOCK))
        end = _date(values.get(EXEMPT_UNTIL_BLOCK))
        if isinstance(reason, Refusal) or isinstance(end, Refusal):
            errors = {}
            if isinstance(reason, Refusal):
                errors[EXEMPT_REASON_BLOCK] = reason.reason
            if isinstance(end, Refusal):
                errors[EXEMPT_UNTIL_BLOCK] = end.reason
            return HttpAnswer(
                200,
                json.dumps({"response_action": "errors", "errors": errors}),
                refused="the Exempt… dialog was sent back: " + "; ".join(errors.values()),
            )
        until = exemption_until(end, now)
        if isinstance(until, Refusal):
            return HttpAnswer(
                200,
                json.dumps(
                    {"response_action": "errors", "errors": {EXEMPT_UNTIL_BLOCK: until.reason}}
                ),
                refused=f"the Exempt… dialog was sent back: {until.reason}",
            )
        if response_url is not None and not (
            self._dialogs is not None and self._dialogs.is_response_url(response_url)
        ):
            response_url = None  # only ever Slack's own: the message is then left as it is
        return self._accept(
            AnswerRequest(
                claims.guard,
                claims.resource,
                Answer.EXEMPT,
                who,
                now,
                until,
                reason,
                response_url=response_url,
                request_id=request_id,
                deadline=claims.deadline,
            ),
            json.dumps({"response_action": "clear"}),
        )

    # -- e-mail links -----------------------------------------------------------------------

    def _page(self, token: str | None, now: datetime) -> HttpAnswer:
        """GET never acts: it shows what the link would do, and a form to confirm it."""
        claims = read_link(self._secrets.link_secret(), token, now)
        if isinstance(claims, Refusal):
            return _page_answer(
                claims.status, "This link cannot be used", claims.reason, claims.reason
            )
        assert token is not None
        if self._claims.status(USED_LINKS, claims.nonce) is not None:
            return _used_link()
        csrf = csrf_token(self._secrets.link_secret(), token)
        return HttpAnswer(200, confirmation_page(claims, token, csrf), "text/html; charset=utf-8")

    def _confirmed(self, request: HttpRequest, now: datetime) -> HttpAnswer:
        form = _form(request.body)
        token = form.get("t")
        secret = self._secrets.link_secret()
        claims = read_link(secret, token, now)
        if isinstance(claims, Refusal):
            return _page_answer(
                claims.status, "This link cannot be used", claims.reason, claims.reason
            )
        assert token is not None
        bad = verify_csrf(secret, token, form.get("csrf"))
        if bad is not None:
            return _page_answer(
                bad.status, "Please answer from the link's page", bad.reason, bad.reason
            )
        until: datetime | None = None
        reason = ""
        if claims.answer in (Answer.KEEP_4H, Answer.KEEP_UNTIL_TOMORROW):
            zone = time_zone(self._s.time_zone)
            if isinstance(zone, Refusal):
                return _refused(zone)
            until = keep_until(claims.answer, now, zone)
        elif claims.answer is Answer.EXEMPT:
            cleaned = clean_reason(form.get("reason"))
            end = _date(form.get("until"))
            checked = exemption_until(end, now) if isinstance(end, date) else end
            problem = next((r for r in (cleaned, checked) if isinstance(r, Refusal)), None)
            if problem is not None:
                return _page_answer(
                    400, "Please give a reason and an end date", problem.reason, problem.reason
                )
            assert isinstance(cleaned, str) and isinstance(checked, datetime)
            until, reason = checked, cleaned
        if self._claims.status(USED_LINKS, claims.nonce) is not None:
            return _used_link()
        accepted = self._accept(
            AnswerRequest(
                claims.guard,
                claims.resource,
                claims.answer,
                Answerer(claims.to, "email", claims.to),
                now,
                until,
                reason,
                request_id=claims.nonce,
                deadline=claims.deadline,
            ),
            "",
        )
        if accepted.status != 200:
            return _page_answer(
                accepted.status,
                "CostGuard could not take the answer now",
                "Please try the link again in a minute.",
                accepted.refused or "not handed on",
            )
        # Used once it is handed on (a failure to hand it on leaves the link usable); two
        # POSTs racing here are one answer all the same: the act path claims its request id.
        self._claims.put_once(USED_LINKS, claims.nonce, now, {"resource": claims.resource})
        return HttpAnswer(
            200,
            _html(
                "Answer received",
                f"{_what(claims.answer, until)}: CostGuard does this within a minute if the "
                "warning still stands and you are still one of its owners (or an admin). "
                "Nothing is e-mailed back: the audit trail (costguard actions) records it.",
            ),
            "text/html; charset=utf-8",
            accepted=accepted.accepted,
        )

    def _accept(self, request: AnswerRequest, body: str) -> HttpAnswer:
        try:
            self._queue.submit(request)
        except Exception as exc:  # the answer is not lost silently: the sender is told
            why = f"could not hand the answer to the {request.guard} guard: {type(exc).__name__}"
            return HttpAnswer(503, json.dumps({"error": why}), refused=why)
        return HttpAnswer(200, body, accepted=request)


# -- parsing and pages ------------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _why(exc: Exception) -> str:
    """An exception as the log may show it: CostGuard's own errors say why (and never a
    secret); anything else only by its type."""
    if isinstance(exc, SlackCallError):
        return truncate(str(exc), 200)
    return type(exc).__name__


def _slack_payload(body: bytes) -> Mapping[str, Any] | Refusal:
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=True, max_num_fields=20)
        payload = json.loads(form["payload"][0])
    except (UnicodeDecodeError, ValueError, KeyError, IndexError):
        return Refusal("the Slack body is not a form with a JSON payload", 400)
    if not isinstance(payload, Mapping):
        return Refusal("the Slack payload is not a JSON object", 400)
    return payload


def _form(body: bytes) -> dict[str, str]:
    try:
        parsed = parse_qs(body.decode("utf-8"), max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return {}
    return {k: v[0] for k, v in parsed.items() if v}


def _form_values(view: Mapping[str, Any]) -> dict[str, str]:
    """A modal's inputs by block id (``reason``: plain text, ``until``: a date picker)."""
    values = _mapping(_mapping(view.get("state")).get("values"))
    out: dict[str, str] = {}
    for block, inputs in values.items():
        if not isinstance(inputs, Mapping):
            continue
        for element in inputs.values():
            if isinstance(element, Mapping):
                value = element.get("value") or element.get("selected_date")
                if isinstance(value, str):
                    out[str(block)] = value
    return out


def _date(raw: object) -> date | Refusal:
    try:
        return date.fromisoformat(str(raw))
    except ValueError:
        return Refusal("the end date is not a date (YYYY-MM-DD)")


_WORDS = {
    Answer.KEEP_4H: "Keep it for 4 hours",
    Answer.KEEP_UNTIL_TOMORROW: "Keep it until tomorrow 09:00",
    Answer.ACT_NOW: "Act now",
    Answer.EXEMPT: "Exempt it",
}


def _what(answer: Answer, until: datetime | None) -> str:
    words = _WORDS[answer]
    return f"{words} (until {until:%Y-%m-%d %H:%M} UTC)" if until else words


_CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"


def _html(title: str, text: str, form: str = "") -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title></head>"
        '<body style="font-family:sans-serif;max-width:36em;margin:2em auto">'
        f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>{form}</body></html>"
    )


def _used_link() -> HttpAnswer:
    return _page_answer(409, "This link was already used", "Each link answers once.", "link reused")


def _page_answer(status: int, title: str, text: str, why: str) -> HttpAnswer:
    return HttpAnswer(status, _html(title, text), "text/html; charset=utf-8", refused=why)


def confirmation_page(claims: LinkClaims, token: str, csrf: str) -> str:
    """What a link shows: the answer it would give, and a form that gives it (POST)."""
    extra = ""
    if claims.answer is Answer.EXEMPT:
        extra = (
            "<p><label>Reason <input name=reason required maxlength=500></label></p>"
            "<p><label>Until (at most 90 days) <input name=until type=date required></label></p>"
        )
    form = (
        '<form method=post action="">'
        f'<input type=hidden name=t value="{html.escape(token)}">'
        f'<input type=hidden name=csrf value="{html.escape(csrf)}">'
        f"{extra}<button type=submit>{html.escape(_WORDS[claims.answer])}</button></form>"
    )
    return _html(
        "Answer CostGuard's warning",
        f"{_WORDS[claims.answer]}: {claims.resource} ({claims.guard}). This link works once, until "
        f"{claims.expires:%Y-%m-%d %H:%M} UTC.",
        form,
    )
