"""Within a minute of a launch, over HTTP: the on-launch Lambda's path on moto's server.

A recorded EventBridge event (the real shape: ``tests/fixtures/events``) is handed to
``handlers.on_launch.process`` as EventBridge would invoke the Lambda; its alert goes
through the alert topic to the topic's SQS subscriber, and from there, as SNS invokes
the Slack notifier, to the Slack stand-in over a real socket. Then the next scheduled
scan runs the same UTC day: what the launch sent, it does not send again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.domain.tags import Tags
from costguard_demo.fleet import backdate_instances
from costguard_demo.plumbing import create_alert_channels, create_ledger_table, drain
from tests.support.clock import MIDDAY
from tests.support.events import load_event
from tests.support.launch import LaunchWorld

pytestmark = pytest.mark.e2e
REGION = "us-east-1"
ACCOUNT = "123456789012"
#: The launch's instant, and the next scheduled scan's (the same UTC day).
LAUNCH = MIDDAY
NEXT_SCAN = MIDDAY + timedelta(minutes=15)
#: Alerts about a resource (the daily findings digest lists findings, not alerts).
ABOUT_RESOURCES = {"unattributed-spend", "launch-policy", "budget-forecast"}


@dataclass
class Account(LaunchWorld):
    """The deployed stack's pieces on moto's server: ledger, topic, subscriber, and Slack."""

    slack: Any = None
    delivered: list[dict[str, Any]] = field(default_factory=list)

    def launch(self, instance_type: str, at: datetime, **tags: str) -> str:
        ec2 = self.session.client("ec2", region_name=REGION)
        spec = (
            [
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                }
            ]
            if tags
            else []
        )
        instance = str(
            ec2.run_instances(
                ImageId="ami-12345678",
                InstanceType=instance_type,
                MinCount=1,
                MaxCount=1,
                Placement={"AvailabilityZone": f"{REGION}a"},
                TagSpecifications=spec,
            )["Instances"][0]["InstanceId"]
        )
        backdate_instances(REGION, {instance: at})
        return instance

    def on_launch(self, instance: str, at: datetime) -> dict[str, Any]:
        """EventBridge's ``running`` event for ``instance``, handed to the Lambda at ``at``."""
        from costguard.handlers.on_launch import process

        event = load_event(
            "ec2-instance-state-running",
            account=ACCOUNT,
            region=REGION,
            resource_id=instance,
            time=at.isoformat().replace("+00:00", "Z"),
        )
        result: dict[str, Any] = process(event, self.settings(), self.session, at)
        return result

    def scan(self, at: datetime) -> Any:
        from costguard.handlers.scan import process

        return process({"time": at.isoformat()}, self.settings(), self.session, clock=at)

    def alerts_out(self) -> list[dict[str, Any]]:
        """What the topic's SQS subscriber received since last asked, each handed to the
        Slack notifier as SNS invokes it (and posted to the stand-in over HTTP)."""
        from costguard.handlers.slack_notifier import process as notify_slack
        from costguard_demo.slack_standin import sns_event

        new = drain(self.session, self.queue, REGION)
        for message in new:
            self.delivered.append(message)
            posted = notify_slack(sns_event(json.dumps(message)), self.slack.webhook())
            assert posted["posted"] == [message["alert_id"]], posted
        return new


def naming(messages: list[dict[str, Any]], instance: str) -> list[dict[str, Any]]:
    """The alerts about a resource that name ``instance``."""
    return [m for m in messages if m["kind"] in ABOUT_RESOURCES and instance in json.dumps(m)]


def slack_text(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False)


@pytest.fixture
def account(moto_server: str) -> Iterator[Account]:
    import boto3

    from costguard_demo.slack_standin import SlackStandIn

    session = boto3.Session()
    create_ledger_table(session, "ledger", REGION)
    topic, queue = create_alert_channels(session, REGION)
    with SlackStandIn() as slack:
        yield Account(session, topic, queue, slack=slack)


def test_an_untagged_p5_is_alerted_at_launch_and_not_again_by_the_next_scan(
    account: Account,
) -> None:
    """GIVEN an untagged p5.48xlarge just launched WHEN EventBridge's recorded ``running``
    event reaches the on-launch Lambda THEN unattributed-spend reaches the SQS subscriber
    and Slack, naming the instance, its type and $/h; AND the next scan, the same UTC day,
    sends nothing new about it (nor about its root volume)."""
    # GIVEN
    p5 = account.launch("p5.48xlarge", LAUNCH - timedelta(seconds=14))
    # WHEN
    result = account.on_launch(p5, LAUNCH)
    # THEN the Lambda says what it did ...
    (verdict,) = result["launches"]
    assert verdict["outcome"] == "alerted", verdict
    assert verdict["resource"] == f"{ACCOUNT}/{REGION}/ec2-instance/{p5}"
    # ... the subscriber got the alert ...
    (alert,) = account.alerts_out()
    assert alert["kind"] == "unattributed-spend"
    assert alert["title"] == f"Just launched with no project: p5.48xlarge {p5}, $55.04/h"
    (resource,) = alert["resources"]
    assert (resource["key"], resource["instance_type"], resource["usd_per_hour"]) == (
        f"{ACCOUNT}/{REGION}/ec2-instance/{p5}",
        "p5.48xlarge",
        55.04,
    )
    assert alert["facts"]["launched_by"]  # who launched it, or when CloudTrail will say
    # ... and so did Slack, over HTTP, in a message Slack accepts
    (posted,) = account.slack.received
    text = slack_text(posted)
    assert p5 in text and "p5.48xlarge" in text and "$55.04/h" in text
    assert account.slack.rejected == []

    # WHEN the next scheduled scan runs, 15 minutes later the same UTC day
    outcome = account.scan(NEXT_SCAN)
    # THEN it publishes nothing new about the instance or its volume
    again = account.alerts_out()
    assert naming(again, p5) == [], [m["alert_id"] for m in again]
    assert not [a for a in outcome.alerts if a.kind.value in ABOUT_RESOURCES]
    assert len(account.slack.received) == 1 + len(again)


def test_a_tagged_p5_that_takes_its_project_over_budget_is_named_as_the_cause(
    account: Account,
) -> None:
    """GIVEN project llm (budget $10,000 via costguard:budget) with a g5 running since the
    morning, and the scan's figures for it WHEN a tagged p5.48xlarge launches at noon THEN
    budget-forecast goes out at once, naming the p5; AND the next scan does not repeat it."""
    # GIVEN
    tags = {Tags.PROJECT: "llm", Tags.BUDGET: "10000"}
    account.launch("g5.xlarge", LAUNCH - timedelta(hours=6), **tags)
    morning = account.scan(LAUNCH - timedelta(hours=1))
    assert not [a for a in morning.alerts if a.kind.value == "budget-forecast"]
    account.alerts_out()
    p5 = account.launch("p5.48xlarge", LAUNCH - timedelta(seconds=14), **tags)
    # WHEN
    result = account.on_launch(p5, LAUNCH)
    # THEN
    assert [v["outcome"] for v in result["launches"]] == ["alerted"], result
    (alert,) = account.alerts_out()
    assert alert["kind"] == "budget-forecast"
    assert alert["project"] == "llm"
    assert alert["title"] == f"llm: launch of p5.48xlarge {p5} takes the forecast over budget"
    assert alert["facts"]["cause"] == f"p5.48xlarge {p5}"
    assert f"p5.48xlarge {p5} ($55.04/h)" in alert["summary"]
    assert [r["key"] for r in alert["resources"]] == [f"{ACCOUNT}/{REGION}/ec2-instance/{p5}"]
    assert p5 in slack_text(account.slack.received[-1])
    # AND the next scan knows it was sent
    account.scan(NEXT_SCAN)
    again = account.alerts_out()
    assert [m for m in again if m["kind"] == "budget-forecast"] == []


def test_a_launch_above_the_deployment_limit_is_a_launch_policy_alert_sent_once(
    account: Account,
) -> None:
    """GIVEN maxUsdPerHour=20 WHEN a p5.48xlarge of project vision launches ($55.04/h)
    THEN launch-policy goes out at once, naming the instance and the limit; AND the next
    scan, which judges the same policy, does not send it again."""
    from costguard.env import Env

    # GIVEN
    account.env[Env.MAX_USD_PER_HOUR] = "20"
    p5 = account.launch("p5.48xlarge", LAUNCH - timedelta(seconds=14), **{Tags.PROJECT: "vision"})
    # WHEN
    result = account.on_launch(p5, LAUNCH)
    # THEN
    assert [v["outcome"] for v in result["launches"]] == ["alerted"], result
    (alert,) = account.alerts_out()
    assert alert["kind"] == "launch-policy"
    assert alert["project"] == "vision"
    assert alert["title"] == f"vision: p5.48xlarge {p5} is outside the project's policy"
    assert "$55.04/h" in alert["summary"] and "$20" in alert["summary"]
    assert "maxUsdPerHour" in alert["summary"]
    assert p5 in slack_text(account.slack.received[-1])
    # AND the next scan judges it outside the policy too, and says nothing new
    account.scan(NEXT_SCAN)
    again = account.alerts_out()
    assert naming(again, p5) == [], [m["alert_id"] for m in again]


def test_a_p5_that_takes_its_team_over_the_teams_table_budget_is_alerted_once(
    account: Account,
) -> None:
    """GIVEN the central teams table (COSTGUARD_TEAMS_JSON) gives team research $10,000,
    project llm is tagged costguard:team=research and has no budget of its own, and a g5
    of llm has run since 06:00 (scanned at 11:00) WHEN a p5 of llm launches at noon THEN the
    team's budget-forecast goes out at once, through Slack, naming the team, its project
    and the p5; AND the next scan does not repeat it."""
    from costguard.env import Env

    account.env[Env.TEAMS_JSON] = json.dumps({"research": {"budget": 10000}})
    tags = {Tags.PROJECT: "llm", Tags.TEAM: "research"}
    account.launch("g5.xlarge", LAUNCH - timedelta(hours=6), **tags)
    morning = account.scan(LAUNCH - timedelta(hours=1))
    assert not [a for a in morning.alerts if a.kind.value == "budget-forecast"]
    account.alerts_out()
    p5 = account.launch("p5.48xlarge", LAUNCH - timedelta(seconds=14), **tags)
    # WHEN
    result = account.on_launch(p5, LAUNCH)
    # THEN the team: the g5 ($1.006/h) and its 8 GiB gp2 root volume ($0.80 a month:
    # $0.0010959/h), $1.0070959/h, 5 h at the last scan and 1 h since: 6.0425753; then with
    # the p5, (1.0070959 + 55.04) x 252 h = 14,123.8681644 more: $14,129.91, over $10,000
    assert [v["outcome"] for v in result["launches"]] == ["alerted"], result
    (alert,) = account.alerts_out()
    assert alert["kind"] == "budget-forecast" and alert["project"] is None
    assert alert["facts"]["team"] == "research" and alert["facts"]["projects"] == "llm"
    assert alert["facts"]["budget"] == "$10,000.00"
    assert alert["facts"]["forecast"] == "$14,129.91"
    assert alert["title"] == (
        f"team research: a launch in llm takes the team over budget (p5.48xlarge {p5})"
    )
    posted = slack_text(account.slack.received[-1])
    assert "team research" in posted and p5 in posted and "$14,129.91" in posted
    # AND the next scan knows it was sent
    account.scan(NEXT_SCAN)
    again = account.alerts_out()
    assert [m for m in again if m["kind"] == "budget-forecast"] == []
