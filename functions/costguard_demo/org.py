"""``costguard demo --org``: the Organization hub on the embedded AWS, 3 accounts x 2 regions.

What runs is the deployed hub's code, over moto's HTTP server (a real socket; moto keeps one
backend per account, reached through assumed-role credentials):

1. The management account (which also runs the hub, and opts itself out with the tag
   ``costguard:opt-out=true``) creates an Organization and three member accounts. Two get
   the member stack's roles, ``costguard-member-read`` and ``costguard-member-act``
   (each trusting only its hub consumer role, in the Organization); the third, ``sandbox``,
   does not: the StackSet never reached it.
2. Each member account gets a small GPU fleet through ``OrganizationAccountAccessRole``;
   project ``llm`` runs in two accounts, so its roll-up is visible.
3. The hub's resources are created as the stack builds them: the ledger table, the alert
   topic (with an SQS subscriber, and the Slack notifier posting to a Slack stand-in), a
   FIFO work queue whose dead-letter queue takes a message after ``orgMaxReceives``
   receives, and the two Lambda roles.
4. A few scheduled times (15 simulated minutes apart) each run the fan-out's code
   (:func:`costguard.wiring.org.build_fanout` ``.tick``), then the queue is delivered to
   the consumer's code (:func:`costguard.handlers.org.consume`) as Lambda's event source
   does: batches of up to ten records with their receipt handles; the records the consumer
   reports as failed are not deleted, come back after the visibility timeout, and after
   the last receive SQS (moto) moves them to the dead-letter queue.
5. Then the last time is run again, and its messages redelivered: nothing is added.
6. The guards act (:mod:`costguard_demo.org_guards`): the stale-volume and idle-notebook
   guards' schedules, at simulated times on the three days before the scans, through the
   guard fan-out, the FIFO act queue and the act consumer (role ``costguard-hub-act``,
   entering each account through the member stack's ``costguard-member-act``); the
   deployment's ``dryRun`` is off, as ``costguard demo``'s guards act.

moto's STS lets anyone assume any role, even one that does not exist. AWS refuses, and
the demo is about that refusal, so :func:`checked_assume_role` makes the embedded STS
check, as AWS does, that the role exists, that its trust policy admits the caller, and
that the caller's own policies allow it. Both sides are narrow: the read role trusts only
the hub's scan role and the act role only the hub's act role, and each hub role's own
policy names only its member role, so either alone keeps the scan role out of the act
role, and the other way.

Exit 0 when the story ran as designed (the sandbox account failing is part of it), 1 on
anything unexpected.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from costguard.domain.money import ZERO, cents, rate
from costguard.domain.org_roles import OrgRoles
from costguard.domain.tags import Tags
from costguard.domain.text import plural, truncate
from costguard.services.fanout import OrgWork, WorkOutcome
from costguard_demo.plumbing import INTERVAL, ORG_TICKS
from costguard_demo.story import STORY_END

if TYPE_CHECKING:
    from costguard.domain.directory import Directory
    from costguard.domain.org import Slice
    from costguard.services.fanout import TickSummary
    from costguard.services.org import OrgReport

from costguard_demo.org_world import (
    ADMIN_ROLE,
    CONSUMER_DELAY,
    FANOUT_ROLE,
    HOME,
    HUB,
    REGIONS,
    SEED,
    TABLE,
    VISION_BUDGET_TAG,
    Delivery,
    Hub,
    Organization,
    RecordingWork,
    assume,
    checked_assume_role,
    create_hub,
    create_organization,
    deliver,
    deploy_member_role,
    hub_environment,
    lambda_session,
)

DEFAULT_TICKS = 4
#: Regions, probes, scans: the story needs three times; a day of them is plenty.
MIN_TICKS, MAX_TICKS = ORG_TICKS.start, ORG_TICKS.stop - 1

# -- the fleet ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Launch:
    account: str
    region: str
    instance_type: str
    project: str | None
    name: str
    age: timedelta
    stopped: bool = False
    budget: str | None = None


def fleet_of(org: Organization) -> list[Launch]:
    """A small ML fleet: llm in two accounts, vision notebooks, a stopped box, a p5 nobody
    can see (the sandbox has no member role: unknown to CostGuard, not $0)."""
    research, vision, sandbox = (a.id for a in org.members)
    day = timedelta(days=1)
    return [
        Launch(research, "us-east-1", "p4d.24xlarge", "llm", "llm-pretrain-0", 2 * day),
        Launch(research, "us-east-1", "g5.2xlarge", "llm", "llm-eval", 5 * day),
        # A CPU box: the probe judges types as the scan does, so us-west-2 stays empty.
        Launch(research, "us-west-2", "m5.large", "llm", "bastion", 9 * day),
        Launch(
            vision,
            "us-west-2",
            "g6.xlarge",
            "vision",
            "vision-notebook-1",
            3 * day,
            budget=VISION_BUDGET_TAG,
        ),
        Launch(
            vision,
            "us-west-2",
            "g6.xlarge",
            "vision",
            "vision-notebook-2",
            day,
            budget=VISION_BUDGET_TAG,
        ),
        Launch(vision, "us-west-2", "g5.12xlarge", "llm", "llm-finetune", timedelta(hours=20)),
        Launch(vision, "us-east-1", "g5.xlarge", "vision", "vision-old", 12 * day, stopped=True),
        Launch(sandbox, "us-east-1", "p5.48xlarge", None, "someones-experiment", 2 * day),
    ]


def admin_sessions(session: Any, org: Organization) -> dict[str, Any]:
    """Each member account's ``OrganizationAccountAccessRole`` session (what an operator
    uses to deploy there), and the management account's own."""
    admins = {
        a.id: assume(session, f"arn:aws:iam::{a.id}:role/{ADMIN_ROLE}", "costguard-demo-seed")
        for a in org.members
    }
    return admins | {org.management: session}


def seed_fleet(
    session: Any, org: Organization, start: datetime, admins: Mapping[str, Any] | None = None
) -> list[Launch]:
    """Launch the fleet through each account's admin role; back-date the launch times."""
    from moto.backends import get_backend

    fleet = fleet_of(org)
    admins = admins or admin_sessions(session, org)
    ec2_backends: Any = get_backend("ec2")
    for launch in fleet:
        ec2 = admins[launch.account].client("ec2", region_name=launch.region)
        tags = [{"Key": "Name", "Value": launch.name}]
        if launch.project:
            tags.append({"Key": Tags.PROJECT, "Value": launch.project})
        if launch.budget:
            tags.append({"Key": Tags.BUDGET, "Value": launch.budget})
        instance = ec2.run_instances(
            ImageId="ami-12345678",
            InstanceType=launch.instance_type,
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )["Instances"][0]
        if launch.stopped:
            ec2.stop_instances(InstanceIds=[instance["InstanceId"]])
        backend = ec2_backends[launch.account][launch.region]
        naive = (start - launch.age).astimezone(UTC).replace(tzinfo=None)
        moto_instance = backend.get_instance(instance["InstanceId"])
        moto_instance.launch_time = naive
        for mapping in moto_instance.block_device_mapping.values():
            backend.get_volume(mapping.volume_id).create_time = naive
    for a in org.members:
        if a.member_role:
            deploy_member_role(admins[a.id], HUB, org.id)
    return fleet


# -- the story --------------------------------------------------------------------------------


def _num(value: Decimal, places: str = "cents") -> float:
    return float(cents(value) if places == "cents" else rate(value))


@dataclass
class SliceFigures:
    month_to_date: Decimal = ZERO
    usd_per_hour: Decimal = ZERO
    projects: dict[str | None, tuple[Decimal, Decimal]] = field(default_factory=dict)


def slice_figures(ledger: Any, s: Slice, month: str) -> SliceFigures:
    """A slice's month-to-date and run-rate per project, read from its ledger scope as the
    aggregation reads it (the run-rate of what its last committed scan saw)."""
    from costguard.domain.org import slice_scope

    scope = slice_scope(HUB, s)
    out = SliceFigures()
    for project, row in ledger.month_totals(scope, month).items():
        out.projects[project] = (row.usd, ZERO)
    mark = ledger.watermark(scope)
    for o in ledger.observations(scope).values():
        if mark is not None and o.observed_at == mark:
            mtd, per_hour = out.projects.get(o.project, (ZERO, ZERO))
            out.projects[o.project] = (mtd, per_hour + o.usd_per_hour)
    out.month_to_date = sum((v[0] for v in out.projects.values()), ZERO)
    out.usd_per_hour = sum((v[1] for v in out.projects.values()), ZERO)
    return out


def _tick_json(
    n: int, summary: TickSummary, delivery: Delivery, outcomes: Sequence[WorkOutcome]
) -> dict[str, Any]:
    items = [
        {"kind": w.kind.value, "account": w.slice.account, "region": w.slice.region}
        for w in summary.work.items()
    ]
    results = []
    for o in outcomes:
        row: dict[str, Any] = {
            "kind": o.work.kind.value,
            "account": o.work.slice.account,
            "region": o.work.slice.region,
        }
        if o.scan is not None:
            row |= {
                "ledger": o.scan.ledger.value,
                "newly_done": o.scan.newly_done,
                "resources": o.scan.resources,
                "aggregated": o.scan.aggregated is not None,
            }
        if o.probe is not None:
            row |= {
                "found": list(o.probe.answer.found),
                "state": o.probe.state.value if o.probe.state else None,
            }
        if o.regions is not None:
            row |= {"regions": len(o.regions.regions)}
        results.append(row)
    return {
        "tick": n,
        "time": summary.tick.isoformat(),
        "accounts": summary.accounts,
        "account_regions": summary.known,
        "work": {
            "regions": len(summary.work.regions),
            "probe": len(summary.work.probes),
            "scan": len(summary.work.scans),
        },
        "items": items,
        "sent": summary.sent,
        "planned": summary.planned,
        "carried": len(summary.work.carried),
        "unreachable": [
            {"account": u.account, "region": u.region, "failure": u.failure}
            for u in summary.unreachable
        ],
        "delivery": delivery.as_dict(),
        "results": results,
        "aggregated": [r.tick.isoformat() for r in summary.aggregated]
        + [o.scan.aggregated.tick.isoformat() for o in outcomes if o.scan and o.scan.aggregated],
        "alerts": list(summary.alerts),
    }


def _project_rows(report: OrgReport) -> list[dict[str, Any]]:
    rows = []
    for p in report.projects:
        rollup = report.rollups.get(p.project)
        rows.append(
            {
                "project": p.project,
                "accounts": sorted(rollup.accounts) if rollup else [],
                "usd_per_hour": _num(p.run_rate_usd_per_hour, "rate"),
                "month_to_date_usd": _num(p.month_to_date_usd),
                "forecast_month_usd": _num(p.forecast_month_usd),
                "budget_usd": _num(p.budget_usd) if p.budget_usd is not None else None,
                "budget_source": p.budget_source,
                "status": p.status.value,
            }
        )
    unattributed = report.rollups.get(None)
    if unattributed is not None:
        rows.append(
            {
                "project": None,
                "accounts": sorted(unattributed.accounts),
                "usd_per_hour": _num(unattributed.run_rate_usd_per_hour, "rate"),
                "month_to_date_usd": _num(unattributed.month_to_date_usd),
                "forecast_month_usd": None,
                "budget_usd": None,
                "budget_source": "none",
                "status": "unattributed",
            }
        )
    return rows


def _slice_rows(
    org: Organization,
    directory: Directory,
    ledger: Any,
    month: str,
    resources: Mapping[Slice, int],
) -> list[dict[str, Any]]:
    from costguard.domain.org import Slice

    rows = []
    for account in org.members:
        entry = directory.regions.get(account.id)
        for region in REGIONS:
            s = Slice(account.id, region)
            status = directory.slices.get(s)
            row: dict[str, Any] = {
                "account": account.id,
                "name": account.name,
                "region": region,
            }
            if entry is None or entry.discovered_at is None:
                # Its regions could never be read: nothing about it is known.
                row |= {
                    "state": "unreachable",
                    "failure": entry.failure if entry else "",
                    "resources": None,
                    "usd_per_hour": None,
                    "month_to_date_usd": None,
                    "projects": {},
                }
                rows.append(row)
                continue
            figures = slice_figures(ledger, s, month)
            row |= {
                "state": status.state.value if status else "unprobed",
                "resources": resources.get(s, 0),
                "usd_per_hour": _num(figures.usd_per_hour, "rate"),
                "month_to_date_usd": _num(figures.month_to_date),
                "projects": {
                    (p or "(unattributed)"): {
                        "month_to_date_usd": _num(mtd),
                        "usd_per_hour": _num(per_hour, "rate"),
                    }
                    for p, (mtd, per_hour) in sorted(
                        figures.projects.items(), key=lambda kv: kv[0] or ""
                    )
                },
            }
            rows.append(row)
    return rows


def _window(now: datetime, ticks: int) -> datetime:
    """The first simulated time: ``ticks`` times 15 minutes apart within one UTC day."""
    from costguard_demo.plumbing import demo_window

    start, _end = demo_window(now, ticks)
    return start


def run_org_demo(
    *, as_json: bool = False, ticks: int = DEFAULT_TICKS, dry_run: bool = False
) -> int:
    """Run the story; print the table (or ``--json``); 0 when it ran as designed.

    ``dry_run``: the deployment's ``dryRun`` (off, as ``costguard demo``'s guards act; on,
    the guards report what they would do and what it would save, and change nothing)."""
    started = time.monotonic()

    def say(message: str) -> None:
        if not as_json:
            print(message, file=sys.stderr, flush=True)

    ticks = min(max(MIN_TICKS, ticks), MAX_TICKS)
    saved = {k: os.environ.get(k) for k in ("POWERTOOLS_LOG_LEVEL", "POWERTOOLS_METRICS_DISABLED")}
    # The consumer logs each failed item as a warning: the demo reports them itself.
    os.environ["POWERTOOLS_LOG_LEVEL"] = "ERROR"
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
    try:
        document = _run(say, ticks, dry_run)
    except Exception as exc:
        print(f"costguard demo --org: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    document["wall_seconds"] = round(time.monotonic() - started, 1)
    problems = verdict(document)
    if as_json:
        from costguard.cli.output import write

        # The envelope every command prints, stamped with the story's last scheduled time.
        at = max((datetime.fromisoformat(t["time"]) for t in document["ticks"]), default=STORY_END)
        write("json", kind="demo.org", data=document, table=None, generated_at=at)
    else:
        print(org_table(document))
    for p in problems:
        print(f"costguard demo --org: {p}", file=sys.stderr)
    return 1 if problems else 0


def _run(say: Callable[[str], None], ticks: int, dry_run: bool) -> dict[str, Any]:
    import urllib.request

    import boto3

    from costguard_demo.server import embedded_aws
    from costguard_demo.slack_standin import SlackStandIn, sns_event

    start = _window(STORY_END, ticks)
    with embedded_aws() as url, SlackStandIn() as slack:
        seed = urllib.request.Request(f"{url}/moto-api/seed?a={SEED}", method="POST")  # noqa: S310
        urllib.request.urlopen(seed, timeout=10).close()  # noqa: S310 - loopback http
        say(f"embedded AWS (moto server) on {url}; Slack stand-in on {slack.url}")
        management = boto3.Session(region_name=HOME)
        org = create_organization(management)
        org_of = {a.id: org.id for a in org.members} | {org.management: org.id}
        with checked_assume_role(org_of) as refused:
            # One session per account for the whole run (each loads its service models once).
            admins = admin_sessions(management, org)
            fleet = seed_fleet(management, org, start, admins)
            hub = create_hub(management, org.id)
            say(
                f"Organization {org.id}: management {org.management} (runs the hub; tagged "
                "costguard:opt-out=true)"
            )
            for a in org.members:
                role = "member roles deployed" if a.member_role else "NO member roles"
                n = sum(1 for f in fleet if f.account == a.id)
                say(f"  {a.id} {a.name:<12} {role}; {plural(n, 'instance')} seeded")
            return _ticks(
                say, org, hub, fleet, start, ticks, slack, sns_event, url, refused, dry_run, admins
            )


def _ticks(
    say: Callable[[str], None],
    org: Organization,
    hub: Hub,
    fleet: Sequence[Launch],
    start: datetime,
    ticks: int,
    slack: Any,
    sns_event: Callable[..., dict[str, Any]],
    url: str,
    refused: Sequence[str],
    dry_run: bool,
    admins: Mapping[str, Any],
) -> dict[str, Any]:
    """The hub's story: its scheduled times, the last one retried, then the guards."""
    from costguard.adapters.directory import DynamoDbDirectory
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.domain.calendar import month_key

    run = _HubRun.deploy(say, org, hub, slack, sns_event, dry_run)
    for n in range(ticks):
        run.scheduled_time(n, start + INTERVAL * n, ticks)
    ledger = DynamoDbLedger(run.consumer_session.client("dynamodb", region_name=HOME), TABLE)
    directory = DynamoDbDirectory(
        run.consumer_session.client("dynamodb", region_name=HOME), TABLE, HUB
    ).load()
    last = start + INTERVAL * (ticks - 1)
    month = month_key(last)
    before = _slice_rows(org, directory, ledger, month, run.resources)
    replay = run.retry_last_time(last, ticks)
    slices = _slice_rows(org, directory, ledger, month, run.resources)
    replay["spend_changed"] = slices != before
    _say_replay(say, replay, ticks)

    # -- the guards: their schedules at simulated times, through the act queue
    from costguard_demo.org_guards import run_guard_chapter

    guards = run_guard_chapter(say, org, hub, run.environ, start, run.alerts_out, admins)
    findings = _findings(ledger, start, ticks)
    alerts = [
        {k: m.get(k) for k in ("alert_id", "kind", "project", "severity", "title", "summary")}
        for m in run.delivered
    ]
    guards["findings"] = _guard_findings(ledger, org, guards)
    guards["not_entered"] = _not_entered(org, directory, guards, findings, alerts)
    return {
        "endpoint": url,
        "organization": {
            "id": org.id,
            "management": org.management,
            "hub": HUB,
            "regions": list(REGIONS),
        },
        "accounts": _accounts_json(org, directory),
        "listing": {
            "accounts": list(directory.listing.accounts) if directory.listing else [],
            "opted_out": list(directory.listing.opted_out) if directory.listing else [],
        },
        "fleet": _fleet_json(fleet, start),
        "ticks": run.tick_docs,
        "slices": slices,
        "projects": _project_rows(run.last_report) if run.last_report else [],
        "aggregated_at": run.last_report.tick.isoformat() if run.last_report else None,
        "findings": findings,
        "alerts": alerts,
        "alerts_delivered": {"sqs": len(run.delivered), "slack": len(slack.received)},
        "dead_letters": run.dead_letters,
        "assume_role_refused": sorted(set(refused)),
        "replay": replay,
        "guards": guards,
    }


@dataclass
class _HubRun:
    """The deployed hub at work: its fan-out and consumer (one warm graph each for the whole
    run), and what they delivered, scanned and aggregated so far."""

    say: Callable[[str], None]
    hub: Hub
    environ: dict[str, str]
    consumer_session: Any
    inbox: Any
    fanout: Any
    recording: RecordingWork
    per_account_cap: int
    notify: Callable[[dict[str, Any]], Any]
    delivered: list[dict[str, Any]] = field(default_factory=list)
    tick_docs: list[dict[str, Any]] = field(default_factory=list)
    last_report: OrgReport | None = None
    resources: dict[Slice, int] = field(default_factory=dict)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def deploy(
        cls,
        say: Callable[[str], None],
        org: Organization,
        hub: Hub,
        slack: Any,
        sns_event: Callable[..., dict[str, Any]],
        dry_run: bool,
    ) -> _HubRun:
        """The hub's Lambdas as the stack configures them, on their own roles' sessions."""
        from costguard.handlers.slack_notifier import process as notify_slack
        from costguard.settings import Settings
        from costguard.wiring.org import HubSettings, build_fanout, build_org_work

        environ = hub_environment(org, hub, dry_run=dry_run)
        settings = Settings.from_env(environ)
        env = HubSettings.from_settings(settings)
        fanout_session = lambda_session(HUB, FANOUT_ROLE)
        consumer_session = lambda_session(HUB, OrgRoles.HUB_SCAN)
        fanout = build_fanout(settings, env, fanout_session)
        # One consumer graph for the whole run: a warm Lambda keeps its member credentials.
        recording = RecordingWork(
            build_org_work(settings, consumer_session, role_name=env.member_role)
        )
        webhook = slack.webhook()
        return cls(
            say,
            hub,
            environ,
            consumer_session,
            consumer_session.client("sqs", region_name=HOME),
            fanout,
            recording,
            env.per_account_cap,
            lambda message: notify_slack(sns_event(json.dumps(message)), webhook),
        )

    def alerts_out(self) -> list[dict[str, Any]]:
        """The alerts the topic's SQS subscriber got, each posted on to Slack."""
        from costguard_demo.plumbing import drain

        new = drain(self.consumer_session, self.hub.inbox_url, HOME, self.inbox)
        for message in new:
            self.delivered.append(message)
            self.notify(message)
        return new

    def scheduled_time(self, n: int, now: datetime, ticks: int) -> None:
        """One scheduled time: the fan-out's tick, then the work queue delivered."""
        summary = self.fanout.tick(now)
        first = len(self.recording.outcomes)
        delivery = deliver(self.consumer_session, self.hub, self.recording, now + CONSUMER_DELAY)
        outcomes = self.recording.outcomes[first:]
        for o in outcomes:
            if o.scan is not None:
                self.resources[o.work.slice] = o.scan.resources
                if o.scan.aggregated is not None:
                    self.last_report = o.scan.aggregated
        for r in summary.aggregated:
            last = self.last_report
            self.last_report = r if last is None or r.tick >= last.tick else last
        self.dead_letters += [d for d in delivery.dead_lettered if d not in self.dead_letters]
        if n == ticks - 1:
            self.kept = [b for b in delivery.bodies if b.get("kind", "scan") == "scan"]
        self.alerts_out()
        doc = _tick_json(n + 1, summary, delivery, outcomes)
        self.tick_docs.append(doc)
        _say_tick(self.say, n, ticks, now, summary, delivery, doc)

    def retry_last_time(self, last: datetime, ticks: int) -> dict[str, Any]:
        """Exactly once: the last time again (a retried fan-out), and its scans redelivered
        (``spend_changed`` is for the caller to say, from the ledger before and after)."""
        replay_summary = self.fanout.tick(last)
        first = len(self.recording.outcomes)
        at = last + CONSUMER_DELAY
        replay_delivery = deliver(self.consumer_session, self.hub, self.recording, at)
        redelivered = _redeliver(
            self.consumer_session, self.hub, self.recording, self.kept, at, self.per_account_cap
        )
        replay_outcomes = self.recording.outcomes[first:]
        self.alerts_out()
        outcomes_seen: list[str] = sorted({o.scan.ledger.value for o in replay_outcomes if o.scan})
        return {
            "tick": ticks,
            "planned": replay_summary.planned,
            "sent": replay_summary.sent,
            "received_from_queue": replay_delivery.received,
            "redelivered": redelivered,
            "ledger": outcomes_seen,
            "newly_done": sum(1 for o in replay_outcomes if o.scan and o.scan.newly_done),
            "spend_changed": None,
        }


def _say_tick(
    say: Callable[[str], None],
    n: int,
    ticks: int,
    now: datetime,
    summary: TickSummary,
    delivery: Delivery,
    doc: Mapping[str, Any],
) -> None:
    w = doc["work"]
    say(
        f"tick {n + 1}/{ticks} at {now:%H:%M} UTC: {plural(summary.accounts, 'account')}, "
        f"{plural(summary.known, 'account-region')}; enqueued {plural(w['regions'], 'region')}, "
        f"{plural(w['probe'], 'probe')}, {plural(w['scan'], 'scan')}; consumed {delivery.done} in "
        f"{plural(delivery.batches, 'batch')}, "
        f"{plural(delivery.failed_receives, 'failed receive')}, "
        f"{len(delivery.dead_lettered)} dead-lettered"
    )
    for u in summary.unreachable:
        say(f"    unreachable: {u.account} {u.region or '(regions)'}: {_short_failure(u.failure)}")
    if doc["aggregated"]:
        say(f"    aggregated {', '.join(t[11:16] for t in doc['aggregated'])} UTC")


def _say_replay(say: Callable[[str], None], replay: Mapping[str, Any], ticks: int) -> None:
    say(
        f"re-ran tick {ticks} (a retried fan-out): planned again: {_yes_no(replay['planned'])}; "
        f"{replay['sent']} sends, {replay['received_from_queue']} delivered; then "
        f"{replay['redelivered']} of its scans redelivered: ledger "
        f"{', '.join(replay['ledger']) or '-'}, spend changed: {_yes_no(replay['spend_changed'])}"
    )


def _findings(ledger: Any, start: datetime, ticks: int) -> list[dict[str, Any]]:
    """The hub's findings of each day the scans ran, each once."""
    findings: list[dict[str, Any]] = []
    days = sorted({(start + INTERVAL * n).strftime("%Y-%m-%d") for n in range(ticks)})
    for day in days:
        for f in ledger.findings(HUB, day):
            row = f.as_dict()
            if row not in findings:
                findings.append(row)
    return findings


def _accounts_json(org: Organization, directory: Any) -> list[dict[str, Any]]:
    guarded = directory.listing.accounts if directory.listing else ()
    members = [
        {"account": a.id, "name": a.name, "member_role": a.member_role, "guarded": a.id in guarded}
        for a in org.members
    ]
    management = {
        "account": org.management,
        "name": "management",
        "member_role": False,
        "guarded": False,
        "skipped": "opted out (costguard:opt-out=true)",
    }
    return [*members, management]


def _fleet_json(fleet: Sequence[Launch], start: datetime) -> list[dict[str, Any]]:
    return [
        {
            "account": f.account,
            "region": f.region,
            "instance_type": f.instance_type,
            "project": f.project,
            "name": f.name,
            "state": "stopped" if f.stopped else "running",
            "launched_at": (start - f.age).isoformat(),
        }
        for f in fleet
    ]


def _guard_findings(
    ledger: Any, org: Organization, guards: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The findings of the guards' days: the hub's (an account the act consumer could not
    enter) and each member account's own scope (what a guard's policy found wrong)."""
    from costguard.domain.org_act import guard_scope

    days = sorted({t["time"][:10] for t in guards["ticks"]})
    scopes = [HUB, *(guard_scope(HUB, a.id) for a in org.members)]
    out: list[dict[str, Any]] = []
    for scope in scopes:
        for day in days:
            for f in ledger.findings(scope, day):
                row = {"scope": scope, "day": day, **f.as_dict()}
                if row not in out:
                    out.append(row)
    return out


def _short_failure(failure: str) -> str:
    """``AccessDenied on arn:...:role/costguard-member-read`` from STS's long message."""
    code = failure.split(":", 1)[0]
    _, found, resource = failure.partition("on resource: ")
    return f"{code} on {resource.strip()}" if found else truncate(failure, 160)


def _not_entered(
    org: Organization,
    directory: Directory,
    guards: Mapping[str, Any],
    findings: Sequence[Mapping[str, Any]],
    alerts: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """The listed accounts no guard could enter, why, and the findings and alerts that
    name them.

    - No run planned: the guards' fan-out plans runs only in an account whose regions were
      read. One without the member stack (the StackSet never reached it) is never sent to
      the act queue, where it would only fail and dead-letter every run; the scan tick that
      could not read its regions names it (``scan-failed``, and an alert once a day).
    - Its act role refused: runs were planned (its regions were read) and the act consumer
      could not enter it; the consumer names it (``act-failed``, and an alert once a day)."""
    listed = directory.listing.accounts if directory.listing else ()
    planned = {p["account"] for t in guards["ticks"] for p in t["planned"]}
    runs = [r for t in guards["ticks"] for r in t["runs"]]
    every = [*findings, *guards.get("findings", [])]
    out = []
    for a in org.members:
        if a.id not in listed:
            continue
        mine = [r for r in runs if r["account"] == a.id]
        refused = [r for r in mine if (r["error"] or "").startswith("AccountAccessError")]
        if a.id not in planned:
            entry = directory.regions.get(a.id)
            why = "no guard run planned: its regions were never read" + (
                f" ({_short_failure(entry.failure)})" if entry and entry.failure else ""
            )
        elif mine and len(refused) == len(mine):
            error = str(refused[0]["error"]).split(": ", 2)[-1]
            why = f"every guard run refused: {_short_failure(error)}"
        else:
            continue
        out.append(
            {
                "account": a.id,
                "name": a.name,
                "why": why,
                "findings": sorted(
                    {f"{f['code']} {f['resource']}" for f in every if a.id in f["resource"]}
                ),
                "alerts": [x["title"] for x in alerts if a.id in (x.get("title") or "")],
            }
        )
    return out


def _redeliver(
    session: Any,
    hub: Hub,
    work: OrgWork,
    bodies: Sequence[Mapping[str, Any]],
    now: datetime,
    per_account_cap: int,
) -> int:
    """SQS delivers at least once: the same scans again, as new messages (another dedupe
    id, as after the five-minute window), to the consumer as before."""
    from costguard.adapters.work_queue import WorkItem, message_group

    if not bodies:
        return 0
    sqs = session.client("sqs", region_name=HOME)
    for n, body in enumerate(bodies):
        item = WorkItem.model_validate(body)
        sqs.send_message(
            QueueUrl=hub.queue_url,
            MessageBody=json.dumps(body),
            MessageGroupId=message_group(item.slice, per_account_cap),
            MessageDeduplicationId=f"{item.dedupe_id()}/again-{n}",
        )
    return deliver(session, hub, work, now).received


def verdict(doc: Mapping[str, Any]) -> list[str]:
    """What must hold for the demo to have behaved as designed (else exit 1): every account
    without its member role named in a finding and an alert, no work item of an account
    with its role dead-lettered, a tick aggregated, a re-run adding nothing, every alert
    in Slack."""
    problems = []
    members = [a for a in doc["accounts"] if a["name"] != "management"]
    if doc["ticks"][0]["accounts"] != len(members):
        problems.append(f"{doc['ticks'][0]['accounts']} accounts listed, not {len(members)}")
    for a in members:
        if a["member_role"]:
            continue
        if not any(a["account"] in f["resource"] for f in doc["findings"]):
            problems.append(f"no finding names {a['account']}, which has no member role")
        if not any(a["account"] in (x.get("title") or "") for x in doc["alerts"]):
            problems.append(f"no alert names {a['account']}, which has no member role")
    entered = {a["account"] for a in members if a["member_role"]}
    unexpected = [d for d in doc["dead_letters"] if d["account"] in entered]
    if unexpected:
        problems.append(f"work items of accounts with their role were dead-lettered: {unexpected}")
    if not doc["projects"]:
        problems.append("no tick was aggregated")
    if doc["replay"]["spend_changed"] or doc["replay"]["newly_done"]:
        problems.append("re-running a tick changed the ledger")
    if doc["alerts_delivered"]["sqs"] != doc["alerts_delivered"]["slack"]:
        problems.append("some alerts did not reach Slack")
    if "guards" in doc:
        from costguard_demo.org_guards import guard_problems

        problems += guard_problems(doc)
    return problems


# -- the table --------------------------------------------------------------------------------


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def org_table(doc: Mapping[str, Any]) -> str:
    """The story as text: each part of the ``--json`` document, in the order it happened."""
    org = doc["organization"]
    lines = [
        f"CostGuard Organization demo: {org['id']}, hub {org['hub']}, regions "
        f"{', '.join(org['regions'])}",
        *_account_lines(doc),
        *_tick_lines(doc),
        *_slice_lines(doc),
        *_project_lines(doc),
        *_finding_and_alert_lines(doc),
        *_replay_lines(doc),
    ]
    if "guards" in doc:
        from costguard_demo.org_guards import guard_lines

        lines += guard_lines(doc)
    lines += ["", f"Wall time: {doc.get('wall_seconds', 0)} s"]
    return "\n".join(lines)


def _account_lines(doc: Mapping[str, Any]) -> list[str]:
    lines = ["", "Accounts:"]
    for a in doc["accounts"]:
        what = a.get("skipped") or (
            ("listed" if a["guarded"] else "not listed")
            + ("" if a["member_role"] else "; member role MISSING: cannot be entered")
        )
        lines.append(f"  {a['account']}  {a['name']:<12} {what}")
    return lines


def _tick_lines(doc: Mapping[str, Any]) -> list[str]:
    lines = ["", "Work items per tick:"]
    lines.append(
        f"  {'tick':<4} {'time':<5}  {'accts':>5} {'regions':>7} {'probe':>5} {'scan':>4}  "
        f"{'done':>4} {'failed':>6} {'DLQ':>3}  aggregated"
    )
    for t in doc["ticks"]:
        w, d = t["work"], t["delivery"]
        lines.append(
            f"  {t['tick']:<4} {t['time'][11:16]:<5}  {t['accounts']:>5} {w['regions']:>7} "
            f"{w['probe']:>5} {w['scan']:>4}  {d['done']:>4} {d['failed_receives']:>6} "
            f"{len(d['dead_lettered']):>3}  {', '.join(x[11:16] for x in t['aggregated']) or '-'}"
        )
    return lines


def _slice_lines(doc: Mapping[str, Any]) -> list[str]:
    lines = ["", f"Accounts x regions (after tick {len(doc['ticks'])}):"]
    lines.append(
        f"  {'account':<12}  {'name':<12} {'region':<10} {'state':<12} {'res':>3} "
        f"{'$/h':>9} {'month-to-date':>14}"
    )
    for s in doc["slices"]:
        res = "-" if s["resources"] is None else str(s["resources"])
        per_hour = "unknown" if s["usd_per_hour"] is None else f"{s['usd_per_hour']:,.2f}"
        lines.append(
            f"  {s['account']:<12}  {s['name']:<12} {s['region']:<10} {s['state']:<12} "
            f"{res:>3} {per_hour:>9} {_money(s['month_to_date_usd']):>14}"
        )
    return lines


def _project_lines(doc: Mapping[str, Any]) -> list[str]:
    names = {a["account"]: a["name"] for a in doc["accounts"]}
    lines = ["", f"Projects rolled up across accounts (aggregated {doc['aggregated_at']}):"]
    lines.append(
        f"  {'project':<14} {'accounts':<27} {'$/h':>8} {'month-to-date':>14} "
        f"{'forecast':>12} {'budget':>10}  status"
    )
    for p in doc["projects"]:
        accounts = ", ".join(names.get(a, a) for a in p["accounts"]) or "-"
        source = {"tag": " (tag)", "config": " (table)"}.get(p["budget_source"], "")
        lines.append(
            f"  {p['project'] or '(unattributed)':<14} {accounts:<27} {p['usd_per_hour']:>8,.2f} "
            f"{_money(p['month_to_date_usd']):>14} {_money(p['forecast_month_usd']):>12} "
            f"{_money(p['budget_usd']):>10}  {p['status']}{source}"
        )
        key = p["project"] or "(unattributed)"
        parts = [
            f"{s['name']} {s['region']} {_money(s['projects'][key]['month_to_date_usd'])}"
            for s in doc["slices"]
            if key in (s["projects"] or {})
        ]
        if len(parts) > 1:
            lines.append(f"  {'':<14} = {' + '.join(parts)}")
    return lines


def _finding_and_alert_lines(doc: Mapping[str, Any]) -> list[str]:
    lines = ["", f"Findings ({len(doc['findings'])}):"]
    for f in doc["findings"]:
        lines.append(f"  [{f['severity']}] {f['code']} {f['resource']}: {f['message']}")
    sent = doc["alerts_delivered"]
    lines += [
        "",
        f"Alerts: {sent['sqs']} delivered to the SQS subscriber, {sent['slack']} posted to Slack",
    ]
    for a in doc["alerts"]:
        lines.append(f"  [{a['severity']}] {a['kind']}: {a['title']}")
    lines += ["", f"Dead letters ({len(doc['dead_letters'])}):"]
    for d in doc["dead_letters"]:
        lines.append(
            f"  {d.get('kind', 'scan')} {d['account']} {d['region']} {d['time'][11:16]} "
            f"after {d['receives']} receives"
        )
    return lines


def _replay_lines(doc: Mapping[str, Any]) -> list[str]:
    r = doc["replay"]
    return [
        "",
        f"Exactly once: tick {r['tick']} run again: planned again: {_yes_no(r['planned'])}; "
        f"{r['sent']} sends, {r['received_from_queue']} delivered (AWS would drop them as "
        "duplicates for 5 minutes; moto only while the first copy is queued)",
        f"  and {r['redelivered']} of its scans delivered once more: ledger "
        f"{', '.join(r['ledger']) or '-'}, {r['newly_done']} newly done, spend changed: "
        f"{_yes_no(r['spend_changed'])}",
    ]


def _yes_no(value: object) -> str:
    """A flag as a person reads it. Defect: the text said "planned again: False" (a
    Python repr); JSON keeps the boolean."""
    return "yes" if value else "no"
