"""An e-mailed warning answered by its link, over HTTP, on moto's server.

The guard (its act Lambda's ``process``) warns an idle instance; the alert topic's e-mail
subscriber receives the text SNS picks for e-mail, with its answer links, signed with the
link key from Secrets Manager. The answer Lambda (``handlers.answer``) serves the links
behind a real HTTP server: a GET (a mail scanner) shows the page and changes nothing; the
page's POST hands the answer to the guard's own Lambda (asynchronously when deployed; here
a Lambda client whose invoke runs ``handlers.act.take_answer`` in-process), which keeps the
instance. The guard does not act at its deadline, the same link cannot answer twice, and
the audit trail names the owner who answered by e-mail.
"""

from __future__ import annotations

import html
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest

from costguard.domain.decisions import deadline_tag
from costguard.domain.tags import Tags
from costguard.env import Env
from costguard_demo.function_url import FunctionUrlServer
from costguard_demo.plumbing import create_alert_channels, create_ledger_table, drain
from tests.support.clock import MIDDAY, clock_at
from tests.support.ec2 import run_instance
from tests.support.toy import GRACE, TOY, toy_spec

pytestmark = pytest.mark.e2e
REGION = "us-east-1"
ACCOUNT = "123456789012"
OWNER = "alice@example.com"
#: The e-mail address the stack subscribes to the alert topic (alertEmails).
TEAM = "ml-costs@example.com"
#: The toy guard's Lambda, as the stack names it with answers on.
TOY_FUNCTION = "CostGuard-guard-toy"
HEADING = "Answer this warning (links work once, until"


def settings(topic: str) -> Any:
    from costguard.settings import Settings

    return Settings.from_env(
        {
            Env.REGIONS: REGION,
            Env.TABLE_NAME: "ledger",
            Env.SCOPE: ACCOUNT,
            Env.DRY_RUN: "false",
            Env.TOPIC_ARN: topic,
        }
    )


@dataclass
class GuardLambda:
    """The Lambda client the answer Lambda invokes the guard through: each asynchronous
    invoke runs the guard Lambda's answer path, as the deployed invoke would."""

    session: Any
    topic: str
    guard_environ: dict[str, str]
    invoked: list[dict[str, Any]] = field(default_factory=list)

    def invoke(self, *, FunctionName: str, InvocationType: str, Payload: bytes) -> dict[str, Any]:
        from costguard import events
        from costguard.handlers.act import answer_links_from, take_answer

        assert (FunctionName, InvocationType) == (TOY_FUNCTION, "Event")
        result = take_answer(
            json.loads(Payload),
            settings(self.topic),
            self.session,
            events.CLOCK(),
            guards={"toy": toy_spec().build},
            answer_links=answer_links_from(self.guard_environ),
        )
        self.invoked.append(result)
        return {"StatusCode": 202}


@dataclass
class Session:
    """The answer Lambda's boto3 session: moto's, but its Lambda client is the guard's."""

    real: Any
    guard: GuardLambda
    region_name: str = REGION

    def client(self, name: str, region_name: str | None = None) -> Any:
        if name == "lambda":
            return self.guard
        return self.real.client(name, region_name=region_name)


@dataclass
class Account:
    session: Any
    topic: str
    queue: str
    link_secret: str
    endpoint: FunctionUrlServer
    guard: GuardLambda

    def guard_environ(self) -> dict[str, str]:
        return {Env.LINK_SECRET: self.link_secret, Env.ANSWER_URL: self.endpoint.url}

    def run_guard(self, at: Any) -> Any:
        from costguard.handlers.act import answer_links_from, process

        with clock_at(at, frozen=True):
            return process(
                {"time": at.isoformat(), "guard": "toy"},
                settings(self.topic),
                self.session,
                at,
                guards={"toy": toy_spec().build},
                answer_links=answer_links_from(self.guard_environ()),
            )

    def emails(self) -> list[str]:
        """What the topic's e-mail subscriber receives: the text SNS picks for ``email``
        from each message published (moto's own choice of protocol), in order."""
        from moto.sns import sns_backends

        backend = sns_backends[ACCOUNT][REGION]
        (subscription,) = [
            s
            for s in backend.subscriptions.values()
            if s.topic.arn == self.topic and s.protocol == "email"
        ]
        return [
            subscription._parse_message_structure(message, "email")
            for _id, message, *_ in backend.topics[self.topic].sent_notifications
        ]

    def tags(self, instance: str) -> dict[str, str]:
        ec2 = self.session.client("ec2", region_name=REGION)
        (reservation,) = ec2.describe_instances(InstanceIds=[instance])["Reservations"]
        return {t["Key"]: t["Value"] for t in reservation["Instances"][0].get("Tags", [])}

    def state(self, instance: str) -> str:
        ec2 = self.session.client("ec2", region_name=REGION)
        (reservation,) = ec2.describe_instances(InstanceIds=[instance])["Reservations"]
        return str(reservation["Instances"][0]["State"]["Name"])

    def used_links(self) -> list[dict[str, Any]]:
        ddb = self.session.client("dynamodb", region_name=REGION)
        items = ddb.scan(TableName="ledger")["Items"]
        return [i for i in items if i["pk"]["S"].startswith("ONCE#answer-link")]

    def answers_audited(self) -> list[Any]:
        from costguard.adapters.dynamodb import DynamoDbLedger

        ledger = DynamoDbLedger(self.session.client("dynamodb", region_name=REGION), "ledger")
        trail = ledger.audit_trail(ACCOUNT, "2026-11")
        return [e for e in trail if e.action.startswith("answer-")]


def http(url: str, data: bytes | None = None) -> tuple[int, str]:
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if data else {}
    request = urllib.request.Request(url, data=data, headers=headers)  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def form_of(page: str) -> bytes:
    """The confirmation page's form as a browser posts it: its hidden fields."""
    fields = re.findall(r'<input type=hidden name=(\w+) value="([^"]*)">', page)
    return urlencode({k: html.unescape(v) for k, v in fields}).encode()


@pytest.fixture
def account(moto_server: str) -> Iterator[Account]:
    import boto3
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters import base

    from costguard.handlers.answer import process
    from costguard.wiring.answers import answer_desk

    # Powertools keeps one secrets client (and the values) per process: this test's, on
    # this server, and none left behind.
    parameters.clear_caches()
    base.DEFAULT_PROVIDERS.clear()
    session = boto3.Session()
    create_ledger_table(session, "ledger", REGION)
    topic, queue = create_alert_channels(session, REGION)
    session.client("sns", region_name=REGION).subscribe(
        TopicArn=topic, Protocol="email", Endpoint=TEAM
    )
    secrets = session.client("secretsmanager", region_name=REGION)
    link_secret = secrets.create_secret(Name="CostGuard-AnswerLinkSecret", SecretString="k" * 64)[
        "ARN"
    ]
    secrets.create_secret(Name="costguard/slack-signing-secret", SecretString="placeholder")
    guard = GuardLambda(session, topic, {})
    answer_environ = {
        Env.SLACK_SIGNING_SECRET: "costguard/slack-signing-secret",
        Env.LINK_SECRET: link_secret,
        Env.TABLE_NAME: "ledger",
        Env.SCOPE: ACCOUNT,
        Env.GUARD_FUNCTIONS: json.dumps({"toy": TOY_FUNCTION}),
        Env.TIME_ZONE: "Europe/Paris",
    }
    desk = answer_desk(answer_environ, Session(session, guard))
    with FunctionUrlServer(lambda event: process(event, desk)) as endpoint:
        deployed = Account(session, topic, queue, link_secret, endpoint, guard)
        guard.guard_environ = deployed.guard_environ()
        yield deployed
    parameters.clear_caches()
    base.DEFAULT_PROVIDERS.clear()


def test_an_emailed_warning_is_kept_by_its_link_get_then_post(account: Account) -> None:
    ec2 = account.session.client("ec2", region_name=REGION)
    instance = run_instance(ec2, {Tags.PROJECT: "vision", TOY: "idle", Tags.OWNER: OWNER})
    # GIVEN the idle instance warned by the guard (stop after 1 hour)
    assert account.run_guard(MIDDAY).counts == {"warned": 1}
    # THEN the e-mail subscriber's text carries the answer links, until the deadline
    (email,) = account.emails()
    assert instance in email
    assert f"{HEADING} 2026-11-20 13:00 UTC):" in email
    links = dict(re.findall(r"^ *(.+?): (http://127\.0\.0\.1:\d+/answer\?t=\S+)$", email, re.M))
    assert set(links) == {
        "Keep 4 hours",
        "Keep until tomorrow 09:00",
        "Act now",
        "Exempt for a period you choose",
    }
    # AND the machine JSON the queue subscriber receives carries none
    (machine,) = drain(account.session, account.queue, REGION)
    assert machine["kind"] == "action-warning" and "answer?t=" not in json.dumps(machine)

    # WHEN a mail scanner opens the "Keep 4 hours" link (GET), twice
    with clock_at(MIDDAY + timedelta(minutes=5), frozen=True):
        status, page = http(links["Keep 4 hours"])
        again, _ = http(links["Keep 4 hours"])
    # THEN it sees the confirmation page, and nothing changes: no tag, no answer handed
    # on, no link used, nothing audited
    assert (status, again) == (200, 200) and "method=post" in page
    assert Tags.EXEMPT not in account.tags(instance)
    assert account.guard.invoked == [] and account.used_links() == []
    assert account.answers_audited() == []

    # WHEN the owner confirms on the page (its form's POST)
    kept_at = MIDDAY + timedelta(minutes=10)
    with clock_at(kept_at, frozen=True):
        status, done = http(links["Keep 4 hours"], form_of(page))
    # THEN the guard's Lambda takes the answer: the instance is kept for 4 hours
    assert status == 200 and "Answer received" in done
    assert [r["answer"] for r in account.guard.invoked] == ["kept"]
    assert account.tags(instance)[Tags.EXEMPT] == deadline_tag(kept_at + timedelta(hours=4))
    assert len(account.used_links()) == 1

    # WHEN the same link's form is posted again
    with clock_at(MIDDAY + timedelta(minutes=11), frozen=True):
        reused, _ = http(links["Keep 4 hours"], form_of(page))
    # THEN refused, and nothing more is handed on
    assert reused == 409 and len(account.guard.invoked) == 1

    # WHEN the guard runs past the warning's deadline
    after = account.run_guard(MIDDAY + GRACE + timedelta(minutes=5))
    # THEN it does not act: the instance runs on, kept
    assert after.counts.get("acted", 0) == 0
    assert account.state(instance) == "running"

    # AND the audit trail names the owner who answered, by e-mail
    (answered,) = account.answers_audited()
    assert answered.action == "answer-keep-4h" and answered.outcome == "kept"
    assert (answered.details["by"], answered.details["via"]) == (OWNER, "email")
    # AND every request reached the endpoint over HTTP: GET, GET, POST, POST
    assert [(m, s) for m, _, s in account.endpoint.requests] == [
        ("GET", 200),
        ("GET", 200),
        ("POST", 200),
        ("POST", 409),
    ]
