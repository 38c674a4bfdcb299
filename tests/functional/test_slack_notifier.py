"""The Slack notifier against a real HTTP server on loopback that plays Slack."""

from __future__ import annotations

import io
import json
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.slack import (
    SlackDeliveryError,
    SlackWebhook,
    WebhookSecretError,
    parse_webhook_secret,
)
from costguard.domain.alerts import Alert, AlertKind, AlertResource, AlertSeverity
from costguard.rendering import machine_json
from costguard_demo.slack_standin import STANDIN_WEBHOOK_PATH, SlackStandIn, sns_event
from tests.support.clock import MIDDAY

#: The stack's placeholder: a random generated string (punctuation included).
PLACEHOLDER = "q7#Vx!2:kP/9w.Lz^A&c=Rt%8u;Y_e?b"
SECRET_PATH = "/services/T01ABCDEF/B02GHIJKL/s3cr3tT0kenDoNotLeak"
SECRET_PIECES = ("T01ABCDEF", "B02GHIJKL", "s3cr3tT0kenDoNotLeak")


def no_sleep(_s: float) -> None:
    return None


def alert_document(project: str = "vision", **changes: Any) -> dict[str, Any]:
    alert = Alert(
        alert_id=f"burn-rate-anomaly/{project}/20261120T1200",
        kind=AlertKind.BURN_RATE_ANOMALY,
        project=project,
        severity=AlertSeverity.CRITICAL,
        title=f"{project}: spend jumped",
        summary=f"{project} burns more",
        at=MIDDAY,
        owners=("alice@example.com",),
        resources=(
            AlertResource(
                "us-east-1/ec2-instance/i-1",
                "ec2-instance",
                "us-east-1",
                "p5.48xlarge",
                Decimal("55.04"),
                "dave@example.com",
                "new",
            ),
        ),
    )
    return {**machine_json(alert), **changes}


def hostile_alert() -> dict[str, Any]:
    alert = Alert(
        alert_id="burn-rate-anomaly/<!channel>/20261120T1200",
        kind=AlertKind.BURN_RATE_ANOMALY,
        project="<!channel> & <http://evil.example|click me>",
        severity=AlertSeverity.CRITICAL,
        title="spend jumped",
        summary="owner <@U123> said <!here> & left",
        at=MIDDAY,
        owners=("<!everyone>",),
        resources=(
            AlertResource(
                "us-east-1/ec2-instance/i-1",
                "ec2-instance",
                "us-east-1",
                "p5.48xlarge",
                Decimal("55.04"),
                "<!channel>",
                "new",
            ),
        ),
    )
    return machine_json(alert)


def huge_alert() -> dict[str, Any]:
    """Hundreds of resources and owners, and tag values at AWS's 256-character maximum."""
    long_tag = "<&>" * 85 + "x"
    resources = tuple(
        AlertResource(
            f"us-east-1/ec2-instance/i-{n:017x}",
            "ec2-instance",
            "us-east-1",
            "p5.48xlarge",
            Decimal("55.04"),
            f"owner-{n}-{long_tag}",
            "new",
        )
        for n in range(400)
    )
    alert = Alert(
        alert_id=f"unattributed-spend/2026-11-20/{long_tag}",
        kind=AlertKind.UNATTRIBUTED,
        project=long_tag,
        severity=AlertSeverity.CRITICAL,
        title=f"{long_tag}: 400 resource(s) with no project",
        summary=f"{long_tag} " * 40,
        at=MIDDAY,
        owners=tuple(r.owner for r in resources if r.owner),
        resources=resources,
        facts={f"fact_{n}": long_tag * 10 for n in range(12)},
        next_steps=tuple(f"step {n}: {long_tag}" for n in range(30)),
    )
    return machine_json(alert)


def event(*documents: dict[str, Any]) -> dict[str, Any]:
    return sns_event(*(json.dumps(d) for d in documents))


@dataclass
class Captured:
    """Everything the notifier logged, as the JSON lines Powertools prints."""

    stream: io.StringIO

    @property
    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines() if line]

    @property
    def text(self) -> str:
        return self.stream.getvalue()


@pytest.fixture
def logs() -> Iterator[Captured]:
    from costguard.handlers import slack_notifier

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(slack_notifier.logger.registered_formatter)
    target = logging.getLogger(slack_notifier.logger.service)
    # At the Lambda's level (no POWERTOOLS_LOG_LEVEL: INFO), whatever the process did first:
    # a logger takes its level once, when made, and an in-process Organization demo makes
    # this one under its own POWERTOOLS_LOG_LEVEL=ERROR when it runs before these tests on
    # the same worker (these tests then saw no line at all).
    level = target.level
    target.setLevel(logging.INFO)
    target.addHandler(handler)
    try:
        yield Captured(stream)
    finally:
        target.removeHandler(handler)
        target.setLevel(level)


@pytest.fixture(autouse=True)
def _fresh_notifier(monkeypatch: pytest.MonkeyPatch) -> None:
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters import base

    from costguard.handlers import slack_notifier

    monkeypatch.setattr(slack_notifier, "_warned_not_configured", False)
    parameters.clear_caches()
    base.DEFAULT_PROVIDERS.clear()


def assert_secret_absent(*texts: str) -> None:
    for text in texts:
        for piece in (SECRET_PATH, *SECRET_PIECES):
            assert piece not in text


# -- rendering and escaping, over a real socket ------------------------------------------


def test_notifier_posts_block_kit_with_every_user_string_escaped() -> None:
    from costguard.handlers.slack_notifier import process

    with SlackStandIn() as slack:
        result = process(event(hostile_alert()), slack.webhook(sleep=no_sleep))
    assert result["posted"] == ["burn-rate-anomaly/<!channel>/20261120T1200"]
    (payload,) = slack.received
    assert payload["blocks"][0]["type"] == "header"
    text = json.dumps(payload)
    for raw in (
        "<!channel>",
        "<!here>",
        "<!everyone>",
        "<http://evil.example|click me>",
        "<@U123>",
    ):
        assert raw not in text
    assert "&lt;!channel&gt; &amp; &lt;http://evil.example|click me&gt;" in text
    # Links CostGuard itself builds stay links.
    assert (
        "<https://us-east-1.console.aws.amazon.com/ec2/home?region=us-east-1#InstanceDetails:instanceId=i-1|"
        in text
    )


def test_posts_an_alert_with_hundreds_of_resources_and_owners_within_slack_limits() -> None:
    from costguard.handlers.slack_notifier import process

    # GIVEN an alert far past every Block Kit limit, and a stand-in that refuses as Slack does
    with SlackStandIn() as slack:
        # WHEN the notifier posts it
        result = process(event(huge_alert()), slack.webhook(sleep=no_sleep))
    # THEN Slack accepts it, with the lists cut short and counted
    assert slack.rejected == []
    assert len(result["posted"]) == 1
    (payload,) = slack.received
    fields = next(b["fields"] for b in payload["blocks"] if "fields" in b)
    owners = next(f["text"] for f in fields if f["text"].startswith("*Owners*"))
    assert owners.endswith(" more")
    resources = payload["blocks"][3]["text"]["text"]
    assert resources.endswith("more")


# -- the stand-in refuses what Slack refuses ----------------------------------------------


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def button(
    text: str = "Keep 4 hours", value: str = "v", style: str | None = None
) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "button",
        "action_id": "keep-4h",
        "text": {"type": "plain_text", "text": text},
        "value": value,
    }
    if style is not None:
        element["style"] = style
    return element


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ({"blocks": [section("x")] * 51}, "invalid_blocks"),
        (
            {"blocks": [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}]},
            "invalid_blocks",
        ),
        (
            {"blocks": [{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}]},
            "invalid_blocks",
        ),
        (
            {"blocks": [{"type": "header", "text": {"type": "plain_text", "text": ""}}]},
            "invalid_blocks",
        ),
        ({"blocks": [section("s" * 3001)]}, "invalid_blocks"),
        ({"blocks": [section("😀" * 1501)]}, "invalid_blocks"),
        (
            {"blocks": [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]}]},
            "invalid_blocks",
        ),
        (
            {"blocks": [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}]},
            "invalid_blocks",
        ),
        ({"blocks": [{"type": "nonsense"}]}, "invalid_blocks"),
        # buttons: a label past 75 characters, a value past 2,000, a style Slack lacks
        ({"blocks": [{"type": "actions", "elements": [button(text="b" * 76)]}]}, "invalid_blocks"),
        (
            {"blocks": [{"type": "actions", "elements": [button(value="v" * 2001)]}]},
            "invalid_blocks",
        ),
        ({"blocks": [{"type": "actions", "elements": [button(style="red")]}]}, "invalid_blocks"),
        ({"blocks": [{"type": "actions", "elements": []}]}, "invalid_blocks"),
        ({"text": ""}, "no_text"),
        ([1, 2], "invalid_payload"),
    ],
)
def test_standin_refuses_what_slack_refuses(payload: Any, error: str) -> None:
    with SlackStandIn() as slack, pytest.raises(SlackDeliveryError, match=error):
        slack.webhook(sleep=no_sleep).post(payload)
    assert slack.received == []
    assert slack.rejected == [(400, error)]


def test_standin_accepts_a_message_at_exactly_the_limits() -> None:
    payload = {
        "text": "t",
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": "h" * 150}},
            section("s" * 3000),
            {"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2000}] * 10},
            *[section("x")] * 47,
        ],
    }
    with SlackStandIn() as slack:
        assert slack.webhook(sleep=no_sleep).post(payload) == 1
    assert len(slack.received) == 1


# -- retries ------------------------------------------------------------------------------


def test_429_is_retried_after_the_time_slack_asks_for() -> None:
    waits: list[float] = []
    with SlackStandIn(script=[429, 429, 200], retry_after="2") as slack:
        attempts = slack.webhook(sleep=waits.append).post({"text": "hi"})
    assert attempts == 3
    assert waits == [2.0, 2.0]
    assert slack.received == [{"text": "hi"}]


@pytest.mark.parametrize("header", ["nan", "inf", "-inf", "Wed, 21 Oct 2026 07:28:00 GMT", ""])
def test_429_with_an_unusable_retry_after_waits_a_finite_backoff(header: str) -> None:
    waits: list[float] = []
    with SlackStandIn(script=[429, 200], retry_after=header) as slack:
        assert slack.webhook(sleep=waits.append).post({"text": "hi"}) == 2
    # time.sleep(nan) raises ValueError: the wait must be a real number of seconds.
    assert waits == [1.0]


def test_5xx_is_retried_with_backoff() -> None:
    waits: list[float] = []
    with SlackStandIn(script=[500, 503, 200]) as slack:
        assert slack.webhook(sleep=waits.append).post({"text": "hi"}) == 3
    assert waits == [0.5, 1.0]


def test_persistent_failure_raises_for_the_dlq() -> None:
    from costguard.handlers.slack_notifier import process

    with (
        SlackStandIn(script=[500] * 10) as slack,
        pytest.raises(SlackDeliveryError, match="after 5 attempts"),
    ):
        process(event(hostile_alert()), slack.webhook(sleep=no_sleep))
    assert slack.attempts == 5


def test_a_rejected_message_is_not_retried() -> None:
    with SlackStandIn(script=[400]) as slack, pytest.raises(SlackDeliveryError, match="rejected"):
        slack.webhook(sleep=no_sleep).post({"text": "hi"})
    assert slack.attempts == 1


def test_a_redirect_is_refused_not_followed() -> None:
    # GIVEN a webhook host that answers with a redirect elsewhere
    with SlackStandIn(script=[302]) as slack, pytest.raises(SlackDeliveryError, match="302"):
        # WHEN the message is posted
        slack.webhook(sleep=no_sleep).post({"text": "hi"})
    # THEN nothing follows the redirect: the message goes to the webhook host or nowhere
    assert slack.gets == 0
    assert slack.attempts == 1


# -- the webhook secret -------------------------------------------------------------------


@pytest.mark.parametrize(
    "secret",
    [
        "https://hooks.slack.com/services/T000/B000/XXXX",
        "https://hooks.slack.com/services/T000/B000/XXXX\n",
        "  https://hooks.slack.com/workflows/T000/A000/123/abc_DEF-9  ",
        b"https://hooks.slack.com/services/T000/B000/XXXX",
        "https://HOOKS.slack.com/services/T000/B000/XXXX",
    ],
)
def test_accepts_a_slack_webhook_url(secret: str | bytes) -> None:
    path = parse_webhook_secret(secret)
    assert path is not None
    assert path.value.startswith(("/services/T000/", "/workflows/T000/"))
    assert "T000" not in repr(path) and "T000" not in str(path)


@pytest.mark.parametrize("secret", [None, "", "   \n", PLACEHOLDER, "replace-me", "TODO"])
def test_an_empty_or_placeholder_secret_means_no_webhook(secret: str | None) -> None:
    assert parse_webhook_secret(secret) is None


MALFORMED = [
    ("http://hooks.slack.com" + SECRET_PATH, "must start with https://"),
    ('"https://hooks.slack.com' + SECRET_PATH + '"', "must start with https://"),
    ("https://hooks.slack.com.evil.example" + SECRET_PATH, "host must be exactly"),
    ("https://evil.example" + SECRET_PATH, "host must be exactly"),
    ("https://user:pw@hooks.slack.com" + SECRET_PATH, "user information"),
    ("https://hooks.slack.com:8443" + SECRET_PATH, "host must be exactly"),
    ("https://hooks.slack.com" + SECRET_PATH + "?x=1", "query or fragment"),
    ("https://hooks.slack.com" + SECRET_PATH + "#frag", "query or fragment"),
    ("https://hooks.slack.com" + SECRET_PATH + "\r\nX-Injected: 1", "whitespace or control"),
    ("https://hooks.slack.com" + SECRET_PATH + "\nhttps://hooks.slack.com/x", "whitespace"),
    ("https://hooks.slack.com" + SECRET_PATH + " https://evil.example/", "whitespace"),
    ("https://hooks.slack.com" + SECRET_PATH + "https://evil.example/", "exactly one URL"),
    ("https://hooks.slack.com" + SECRET_PATH + "\u2028", "whitespace or control"),
    ("https://hooks.slack.com/api/T01ABCDEF/B02GHIJKL/s3cr3tT0kenDoNotLeak", "the path must be"),
    ("https://hooks.slack.com/services/../T01ABCDEF/s3cr3tT0kenDoNotLeak", "the path must be"),
    ("https://hooks.slack.com/services/T01ABCDEF/%0d%0as3cr3tT0kenDoNotLeak", "the path must be"),
    ("hooks.slack.com" + SECRET_PATH, "must start with https://"),
    ('{"url": "https://hooks.slack.com' + SECRET_PATH + '"}', "whitespace"),
]


@pytest.mark.parametrize(("secret", "reason"), MALFORMED)
def test_a_malformed_webhook_secret_is_a_clear_error_that_never_shows_it(
    secret: str, reason: str, logs: Captured
) -> None:
    from costguard.handlers.slack_notifier import process

    # GIVEN a secret meant as a webhook URL but not a valid one
    with SlackStandIn(path=SECRET_PATH) as slack:
        webhook = SlackWebhook(lambda: secret, origin=slack.origin, sleep=no_sleep)
        # WHEN an alert arrives
        with pytest.raises(WebhookSecretError, match=reason) as raised:
            process(event(alert_document()), webhook)
    # THEN nothing is sent, and neither the error nor the logs show any part of the secret
    assert slack.attempts == 0
    assert_secret_absent(str(raised.value), repr(raised.value), logs.text)
    assert raised.value.__cause__ is None


@pytest.mark.parametrize(
    ("script", "leaky"),
    [([400], False), ([400], True), ([404], True), ([500] * 5, True), ([403], True)],
)
def test_a_failing_post_never_shows_the_webhook_url(
    script: list[int], leaky: bool, logs: Captured
) -> None:
    from costguard.handlers.slack_notifier import process

    # GIVEN Slack (or a proxy before it) that fails, and may echo the URL in its answer
    with SlackStandIn(script=script, path=SECRET_PATH, leaky=leaky) as slack:
        webhook = SlackWebhook(
            lambda: "https://hooks.slack.com" + SECRET_PATH, origin=slack.origin, sleep=no_sleep
        )
        # WHEN the post fails
        with pytest.raises(SlackDeliveryError) as raised:
            process(event(alert_document()), webhook)
    # THEN the error says what happened, without the URL
    assert "HTTP" in str(raised.value)
    assert_secret_absent(str(raised.value), repr(raised.value), logs.text)
    assert raised.value.__cause__ is None
    assert raised.value.__context__ is None or raised.value.__suppress_context__


def test_a_refused_connection_never_shows_the_webhook_url(logs: Captured) -> None:
    from costguard.handlers.slack_notifier import process

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    webhook = SlackWebhook(
        lambda: "https://hooks.slack.com" + SECRET_PATH,
        origin=f"http://127.0.0.1:{port}",
        sleep=no_sleep,
    )
    with pytest.raises(SlackDeliveryError, match="after 5 attempts") as raised:
        process(event(alert_document()), webhook)
    assert_secret_absent(str(raised.value), repr(raised.value), logs.text)


# -- no webhook configured ----------------------------------------------------------------


@pytest.mark.parametrize("secret", [PLACEHOLDER, "", "  "])
def test_no_configured_webhook_is_a_logged_no_op_not_an_error(secret: str, logs: Captured) -> None:
    from costguard.handlers.slack_notifier import NOT_CONFIGURED, process

    # GIVEN a deployment that never put a webhook URL in the secret
    with SlackStandIn() as slack:
        webhook = SlackWebhook(lambda: secret, origin=slack.origin, sleep=no_sleep)
        # WHEN two alerts arrive, one invocation each
        first = process(event(alert_document("a")), webhook)
        second = process(event(alert_document("b")), webhook)
    # THEN neither fails nor posts; a warning says why, once
    assert first["status"] == second["status"] == NOT_CONFIGURED
    assert first["posted"] == []
    assert slack.attempts == 0
    levels = [line["level"] for line in logs.lines if "webhook" in line["message"]]
    assert levels == ["WARNING", "INFO"]


def test_handler_reads_the_secret_with_powertools_and_skips_the_placeholder(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.env import Env
    from costguard.handlers.slack_notifier import NOT_CONFIGURED, handler

    # GIVEN the secret as the stack creates it: a random placeholder
    sm = aws.client("secretsmanager", region_name="us-east-1")
    sm.create_secret(Name="costguard/slack-webhook", SecretString=PLACEHOLDER)
    monkeypatch.setenv(Env.SLACK_SECRET_NAME, "costguard/slack-webhook")
    # WHEN the deployed handler gets an alert
    result = handler(event(alert_document()), LambdaContextStub())
    # THEN it returns a summary instead of failing into the dead-letter queue
    assert result["status"] == NOT_CONFIGURED


def test_webhook_url_is_read_through_powertools_and_cached(aws: Any) -> None:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    from costguard.handlers.slack_notifier import build_webhook

    sm = aws.client("secretsmanager", region_name="us-east-1")
    sm.create_secret(Name="costguard/slack-webhook", SecretString=PLACEHOLDER)
    calls: list[str] = []
    client = aws.client("secretsmanager", region_name="us-east-1")
    client.meta.events.register(
        "before-call.secrets-manager.GetSecretValue", lambda **_: calls.append("get")
    )
    with SlackStandIn() as slack:
        webhook = build_webhook(
            "costguard/slack-webhook",
            secrets=SecretsProvider(boto3_client=client),
            origin=slack.origin,
        )
        assert webhook.target() is None  # the placeholder: not configured
        # The URL is put in; a warm container keeps the cached value for up to 5 minutes.
        sm.put_secret_value(SecretId="costguard/slack-webhook", SecretString=slack.secret)
        assert webhook.target() is None
        assert len(calls) == 1


# -- records that are not CostGuard alerts ------------------------------------------------


def record_without_sns() -> dict[str, Any]:
    return {"EventSource": "aws:sns"}


def record_with(message: str) -> dict[str, Any]:
    return dict(sns_event(message)["Records"][0])


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (record_without_sns(), "not an SNS record"),
        ("just a string", "not an SNS record"),
        (None, "not an SNS record"),
        ({"Sns": {"Message": "{}"}}, "not an SNS record"),
        (record_with("not json {"), "no schema"),
        (record_with("[1, 2, 3]"), "no schema"),
        (record_with('{"AlarmName": "cpu", "NewStateValue": "ALARM"}'), "no schema"),
        (record_with('{"schema": "costguard.alert/v2", "alert_id": "x"}'), "costguard.alert/v2"),
        (record_with(json.dumps({**alert_document(), "resources": "lots"})), "malformed"),
        (record_with(json.dumps({**alert_document(), "owners": [{"n": 1}]})), "malformed"),
        (record_with(json.dumps({**alert_document(), "alert_id": None})), "malformed"),
    ],
)
def test_a_record_that_is_not_a_costguard_alert_is_logged_and_skipped(
    record: Any, reason: str, logs: Captured
) -> None:
    from costguard.handlers.slack_notifier import process

    # GIVEN an event with a foreign or malformed record between two good ones
    good = event(alert_document("a"), alert_document("b"))["Records"]
    mixed = {"Records": [good[0], record, good[1]]}
    with SlackStandIn() as slack:
        # WHEN it is processed
        result = process(mixed, slack.webhook(sleep=no_sleep))
    # THEN the good ones are posted, the other is skipped with one clear error line
    assert result["posted"] == [
        "burn-rate-anomaly/a/20261120T1200",
        "burn-rate-anomaly/b/20261120T1200",
    ]
    assert len(slack.received) == 2
    (skipped,) = result["skipped"]
    assert skipped["record"] == 1 and reason in skipped["reason"]
    errors = [line for line in logs.lines if line["level"] == "ERROR"]
    assert len(errors) == 1 and errors[0]["skipped"][0]["reason"] == skipped["reason"]


@pytest.mark.parametrize("not_an_event", [{}, {"Records": "x"}, [], "text", None])
def test_an_event_that_is_not_from_sns_is_logged_not_raised(
    not_an_event: Any, logs: Captured
) -> None:
    from costguard.handlers.slack_notifier import process

    with SlackStandIn() as slack:
        result = process(not_an_event, slack.webhook(sleep=no_sleep))
    assert result["posted"] == [] and slack.attempts == 0
    assert [line["level"] for line in logs.lines] == ["ERROR"]


def test_a_failed_post_does_not_stop_the_others_and_fails_the_invocation_at_the_end() -> None:
    from costguard.handlers.slack_notifier import process

    # GIVEN three alerts in one event, and Slack refusing the second
    docs = [alert_document(p) for p in ("a", "b", "c")]
    # WHEN they are processed
    with (
        SlackStandIn(script=[200, 400, 200]) as slack,
        pytest.raises(SlackDeliveryError) as raised,
    ):
        process(event(*docs), slack.webhook(sleep=no_sleep))
    # THEN the first and third are posted, and the error names the one that was not
    assert [p["blocks"][0]["text"]["text"] for p in slack.received] == [
        "a: spend jumped",
        "c: spend jumped",
    ]
    assert str(raised.value).startswith("1 of 3 alerts not posted to Slack")
    assert "burn-rate-anomaly/b/20261120T1200" in str(raised.value)


def test_the_demo_event_shape_is_what_powertools_parser_accepts() -> None:
    from aws_lambda_powertools.utilities.parser import parse
    from aws_lambda_powertools.utilities.parser.models import SnsModel

    parsed = parse(event=event(alert_document()), model=SnsModel)
    assert json.loads(parsed.Records[0].Sns.Message)["schema"] == "costguard.alert/v1"
    assert STANDIN_WEBHOOK_PATH.startswith("/services/")


@dataclass
class LambdaContextStub:
    function_name: str = "costguard-slack"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:costguard-slack"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"


def test_an_action_warning_is_posted_with_its_signed_answer_buttons() -> None:
    # GIVEN a warning of the idle guard, and a signing secret configured for answers
    from costguard.domain.signatures import ButtonClaims, read_button, sign_button
    from costguard.handlers.slack_notifier import process

    secret = b"signing"
    document = alert_document(
        kind="action-warning",
        answer_to={
            "guard": "idle-notebooks",
            "resource": "123456789012/us-east-1/ec2-instance/i-1",
        },
    )

    def sign(guard: str, resource: str, owners: tuple[str, ...], deadline: str = "") -> str:
        return sign_button(secret, ButtonClaims(guard, resource, owners, deadline))

    # WHEN the notifier posts it
    with SlackStandIn() as slack:
        process(event(document), slack.webhook(sleep=no_sleep), sign)
        [posted] = slack.received
    # THEN Slack gets the four answers, each naming the guard and resource, signed
    [actions] = [b for b in posted["blocks"] if b["type"] == "actions"]
    claims = read_button(secret, actions["elements"][0]["value"])
    assert isinstance(claims, ButtonClaims) and claims.guard == "idle-notebooks"
    assert len(actions["elements"]) == 4
