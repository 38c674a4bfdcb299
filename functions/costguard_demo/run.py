"""``costguard demo``: a whole guard cycle against the embedded AWS.

1. start moto's server on a free loopback port (fake credentials, nothing real reachable);
2. create the ledger table and seed a realistic ML fleet through boto3 over HTTP;
3. run the scan handler's code for several cycles, 15 simulated minutes apart,
   with the fleet changing in between (a new p5 appears, a notebook stops);
4. print the final report, or ``--json``. Exit 1 on any error.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from costguard.domain.text import plural
from costguard.env import Env
from costguard_demo.plumbing import (
    INTERVAL,
    ORG_TICKS,
    borrowed_environ,
    create_alert_channels,
    create_ledger_table,
    demo_window,
    drain,
    narrator,
)

#: What ``costguard demo`` imports (:mod:`costguard.cli.demo`).
__all__ = ["ORG_TICKS", "run_demo"]

TABLE = "costguard-demo-ledger"


def demo_environment(table: str, topic_arn: str = "") -> dict[str, str]:
    """What the CDK stack would set on the Lambda, for the embedded account."""
    return {
        Env.TOPIC_ARN: topic_arn,
        # A digest at any hour, so the demo shows one whatever the time of day.
        Env.DIGEST_HOUR_UTC: "0",
        Env.REGIONS: "us-east-1,us-west-2",
        Env.TABLE_NAME: table,
        Env.SCOPE: "123456789012",
        Env.DRY_RUN: "true",
        # moto has neither the tagging API for SageMaker nor SageMaker Studio.
        Env.SAGEMAKER_TAGS: "per-resource",
        Env.SAGEMAKER_STUDIO: "false",
        # Cost Explorer's bill beside the scan's (the demo's stand-in: costguard_demo.cost_explorer).
        Env.COST_EXPLORER: "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }


DEFAULT_CYCLES = 6
#: Where ``costguard demo`` writes the month's report, unless this variable names a file.
REPORT_PATH_VARIABLE = "COSTGUARD_DEMO_REPORT"


def report_path() -> Path:
    """``$COSTGUARD_DEMO_REPORT``, else ``costguard-demo-report.html`` in the temporary
    directory (``$TMPDIR``, else ``/tmp``): the same path every run, outside the checkout."""
    named = os.environ.get(REPORT_PATH_VARIABLE)
    return Path(named) if named else Path(tempfile.gettempdir()) / "costguard-demo-report.html"


def run_demo(*, fmt: str = "table", cycles: int | None = None, org: bool = False) -> int:
    """The single-account demo, or with ``org`` the Organization hub's
    (:mod:`costguard_demo.org`); ``cycles`` None: each one's default. ``fmt`` is the
    ``--format``: the story is told on stderr only for ``table``."""
    if org:
        from costguard_demo.org import DEFAULT_TICKS, run_org_demo

        return run_org_demo(as_json=fmt == "json", ticks=cycles or DEFAULT_TICKS)
    as_json = fmt != "table"
    import boto3

    from costguard_demo.server import embedded_aws
    from costguard_demo.slack_standin import SlackStandIn
    from costguard_demo.story import STORY_END

    say = narrator(as_json)
    cycles = max(1, DEFAULT_CYCLES if cycles is None else cycles)
    start, end = demo_window(STORY_END, cycles)
    with borrowed_environ(demo_environment(TABLE)), embedded_aws() as url, SlackStandIn() as slack:
        say(f"embedded AWS (moto server) listening on {url}; Slack stand-in on {slack.url}")
        demo = _Demo.set_up(boto3.Session(), slack, say, start)
        from costguard_demo.cost_explorer import no_anomalies, queue_bill

        queue_bill(url, start)
        no_anomalies(demo.session)
        for n in range(cycles):
            demo.cycle(n, start + INTERVAL * n, cycles)
        say("\nGuards that act (not dry-run here), with simulated time:")
        code = demo.finish(url, demo.guards_act(end), fmt)
        say(f"\nThe month's report (open it in a browser): {demo.write_report(end)}")
        return code


@dataclass
class _Demo:
    """The embedded account as the deployed scan sees it: the scan handler run on a
    schedule, its alerts delivered through the topic's queue to the Slack notifier."""

    session: Any
    slack: Any
    say: Callable[[str], None]
    topic: str
    queue_url: str
    webhook: Any
    settings: Any
    delivered: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    report: Any = None
    spike: str = ""
    launches: list[dict[str, Any]] = field(default_factory=list)
    #: Signs action warnings' answer buttons (the Slack notifier's, with ``answers`` on).
    sign: Any = None
    answered: Any = None

    @classmethod
    def set_up(cls, session: Any, slack: Any, say: Callable[[str], None], start: datetime) -> _Demo:
        """The alert channels, the Lambda's environment, the ledger and the fleet."""
        from costguard.settings import Settings
        from costguard_demo.fleet import DEMO_SPOT_PRICES, PRIMARY, install_spot_prices, seed_fleet

        topic, queue_url = create_alert_channels(session, PRIMARY)
        os.environ.update(demo_environment(TABLE, topic))
        # Imported after the environment is set: Powertools reads it at import.
        from costguard.handlers.slack_notifier import button_signer
        from costguard_demo.answers import SIGNING_SECRET_NAME, put_secrets

        # Deployed with answers on: the Slack app's signing secret, and the link key.
        put_secrets(session, PRIMARY)

        webhook = slack.webhook()
        create_ledger_table(session, TABLE, PRIMARY)
        fleet = seed_fleet(session, start)
        install_spot_prices(DEMO_SPOT_PRICES, start)
        say(
            f"seeded {plural(len(fleet.instances), 'instance')}, "
            f"{plural(len(fleet.notebooks), 'notebook')}, "
            f"{len(fleet.endpoints)} endpoint, 1 EKS cluster in 2 regions"
        )
        return cls(
            session,
            slack,
            say,
            topic,
            queue_url,
            webhook,
            Settings.from_env(os.environ),
            sign=button_signer(SIGNING_SECRET_NAME),
        )

    def cycle(self, n: int, now: datetime, cycles: int) -> None:
        """One scheduled scan, after the fleet changed (or not) since the last one."""
        # Imported after the environment is set: Powertools reads it at import.
        from costguard.handlers.scan import process, summary

        self._change_fleet(n, now, cycles)
        outcome = process({"time": now.isoformat()}, self.settings, self.session, clock=now)
        report = self.report = outcome.report
        self.history.append(summary(outcome))
        self.deliver_alerts()
        self.say(
            f"cycle {n + 1}/{cycles} at {now:%H:%M} UTC: {plural(report.resource_count, 'resource')}, "
            f"ledger {report.ledger.value}, {plural(len(outcome.alerts), 'alert')}, "
            f"{sum(report.api_calls.values())} API calls, {report.duration_s:.2f}s"
        )
        for a in outcome.alerts:
            self.say(f"    alert [{a.severity.value}] {a.kind.value}: {a.title}")

    def _change_fleet(self, n: int, now: datetime, cycles: int) -> None:
        from costguard_demo.fleet import PRIMARY, backdate_instances, project_tags, run_instances

        ec2 = self.session.client("ec2", region_name=PRIMARY)
        if n == cycles // 2 and cycles > 1:
            # Mid-run, someone starts a p5 in the vision project (a burn-rate spike) ...
            owner = project_tags("vision-research", owner="dave@example.com")
            self.spike = run_instances(ec2, "p5.48xlarge", owner, "us-east-1b")[0]
            backdate_instances(PRIMARY, {self.spike: now - timedelta(minutes=5)})
            # ... and the serving team stops its exploration notebook.
            self.session.client("sagemaker", region_name=PRIMARY).stop_notebook_instance(
                NotebookInstanceName="recsys-explore"
            )
            self.say(
                "fleet changed: +1 p5.48xlarge (vision-research), notebook recsys-explore stopped"
            )
            # EventBridge delivers the p5's "running" event; the on-launch check alerts
            # within seconds, ten minutes before the next scan would have.
            from costguard_demo.launch import check_launch

            launched = now - timedelta(minutes=5)
            self.launches += check_launch(
                self.settings,
                self.session,
                self.say,
                self.spike,
                PRIMARY,
                launched + timedelta(seconds=2),
                launched + timedelta(seconds=3),
            )
            self.deliver_alerts()
        if self.spike and n == cycles - 1 and cycles > 3:
            ec2.terminate_instances(InstanceIds=[self.spike])
            self.say("fleet changed: the vision-research p5 was terminated")

    def deliver_alerts(self) -> None:
        """Every alert reaches the subscribed queue; each is handed to the Slack notifier
        as SNS would invoke it, and posted to the Slack stand-in over HTTP."""
        from costguard.handlers.slack_notifier import process as notify_slack
        from costguard_demo.fleet import PRIMARY
        from costguard_demo.slack_standin import sns_event

        for message in drain(self.session, self.queue_url, PRIMARY):
            self.delivered.append(message)
            notify_slack(sns_event(json.dumps(message)), self.webhook, self.sign)

    def guards_act(self, end: datetime) -> list[dict[str, Any]]:
        """The guards that act, each through the one executor with simulated time: the
        idle-notebook warn -> stop cycle, the stale-volume snapshot -> delete, and the
        stale-object sweep (its warnings reach Slack through the alert topic)."""
        from costguard_demo.answers import run_answer_chapter
        from costguard_demo.fleet import PRIMARY, SECONDARY
        from costguard_demo.idle import run_idle_chapter
        from costguard_demo.sweep import run_sweep_chapter
        from costguard_demo.volumes import run_volume_chapter

        session, say = self.session, self.say
        # The guards audit into the deployed ledger, where the month's report reads them.
        ledger = self.ledger()
        guard_actions = [
            *run_idle_chapter(session, PRIMARY, say, end, ledger),
            *run_volume_chapter(session, PRIMARY, say, end, ledger),
            *run_sweep_chapter(session, PRIMARY, say, end, topic_arn=self.topic),
        ]
        self.deliver_alerts()
        # One warning answered from Slack: the idle guard's own handler, in the second
        # region (its notebook is the only one there), warns through the topic and Slack.
        self.answered = run_answer_chapter(
            session,
            SECONDARY,
            say,
            end,
            slack=self.slack,
            table=TABLE,
            topic=self.topic,
            deliver=self.deliver_alerts,
            home=PRIMARY,
        )
        return guard_actions

    def ledger(self) -> Any:
        """The demo's ledger table, as the deployed Lambdas read and write it."""
        from costguard.adapters.dynamodb import DynamoDbLedger
        from costguard_demo.fleet import PRIMARY

        return DynamoDbLedger(self.session.client("dynamodb", region_name=PRIMARY), TABLE)

    def write_report(self, end: datetime) -> Path:
        """The month's report, as ``costguard report --table`` draws it, from the demo's
        ledger and last scan: :func:`report_path`."""
        from costguard.cli.report import write_html
        from costguard.domain.calendar import month_key
        from costguard.services.report import ReportRequest, build_report

        report = build_report(self.report, self.ledger(), ReportRequest(month_key(end)), end)
        path = report_path()
        write_html(report, path)
        return path

    def finish(self, url: str, guard_actions: list[dict[str, Any]], fmt: str) -> int:
        """The report, the alerts and the actions; 1 when anything failed."""
        from costguard.domain.findings import FindingCode

        report, delivered, received = self.report, self.delivered, self.slack.received
        assert report is not None
        alerts = [
            {k: m[k] for k in ("alert_id", "kind", "project", "severity", "summary")}
            for m in delivered
        ]
        if fmt == "json":
            answered = self.answered
            answers = (
                [{"at": at.isoformat(), "step": what} for at, what in answered.steps]
                if answered is not None
                else []
            )
            _print_json(
                url,
                self.history,
                alerts,
                delivered,
                received,
                report,
                guard_actions,
                self.launches,
                answers,
            )
        elif fmt != "table":
            # The final scan's report, as `costguard scan --format` prints it.
            from costguard.cli.output import write
            from costguard.cli.scan_output import report_json, scan_markdown_heading, scan_tables

            table, views = scan_tables([(None, report)])
            write(
                fmt,
                kind="demo",
                data=report_json(report),
                table=table,
                views=views,
                heading=scan_markdown_heading([report]),
                generated_at=report.now,
            )
        else:
            _print_text(report, alerts, delivered, received, guard_actions)
        failures = [f for f in report.findings if f.code is FindingCode.SCAN_FAILED]
        if failures:
            print(f"costguard demo: {len(failures)} scan failures", file=sys.stderr)
            return 1
        failed_actions = [a for a in guard_actions if a.get("outcome") == "failed"]
        if failed_actions:
            print(
                f"costguard demo: {plural(len(failed_actions), 'action')} failed", file=sys.stderr
            )
            return 1
        if len(received) != len(delivered):
            print("costguard demo: some alerts did not reach Slack", file=sys.stderr)
            return 1
        return 0


def _print_json(
    url: str,
    history: list[dict[str, Any]],
    alerts: list[dict[str, Any]],
    delivered: list[dict[str, Any]],
    received: Sequence[Any],
    report: Any,
    guard_actions: list[dict[str, Any]],
    launches: list[dict[str, Any]],
    answers: list[dict[str, Any]],
) -> None:
    from costguard.cli.output import write
    from costguard.cli.scan_output import report_json

    document = {
        "endpoint": url,
        "cycles": history,
        "alerts": alerts,
        "alerts_delivered": {"sqs": len(delivered), "slack": len(received)},
        "report": report_json(report),
        "actions": guard_actions,
        "launches": launches,
        # One warning answered from Slack, step by step (the story's own times).
        "answers": answers,
    }
    # The envelope every command prints; its time is the story's (simulated), not the clock's.
    write("json", kind="demo", data=document, table=_NO_TABLE, generated_at=report.now)


#: ``demo --format json`` prints no table.
_NO_TABLE: Any = None


def _print_text(
    report: Any,
    alerts: list[dict[str, Any]],
    delivered: list[dict[str, Any]],
    received: Sequence[Any],
    guard_actions: list[dict[str, Any]],
) -> None:
    from costguard.cli import terminal
    from costguard.cli.scan_output import report_table

    colour = terminal.colour_enabled()
    room = terminal.width()
    print(report_table(report))
    print(
        f"\nAlerts: {len(delivered)} delivered to the SQS subscriber and "
        f"{len(received)} posted to Slack as Block Kit"
    )
    # The summary's column is left empty here: it is cut to the room the others leave.
    heads = terminal.columns(
        [[f"[{a['severity']}]", a["kind"], a["project"] or "-", "-"] for a in alerts]
    )
    for padded, item in zip(heads, alerts, strict=True):
        head = padded[:-1]
        severity = f"[{item['severity']}]"
        shown = terminal.status(severity, colour) + head[len(severity) :]
        rest = None if room is None else room - len(head) - 2
        print(f"  {shown}{terminal.fit(item['summary'], rest)}")
    print(f"\nActions ({len(guard_actions)}):")
    rows = [
        [
            str(act["outcome"]),
            act["resource"],
            act["project"] or "-",
            f"${act['usd_per_month_saved']:,.2f}/month",
        ]
        for act in guard_actions
    ]
    for line in terminal.columns(rows, right=frozenset({3})):
        print(f"  {line}")
