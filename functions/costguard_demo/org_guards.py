"""``costguard demo --org``, the guards: two guards acting in member accounts, with
simulated time, on the Organization the scan ticks listed.

Each guard's schedule is run at a few simulated times as EventBridge Scheduler invokes the
hub's fan-out (``{"guard": name, "time": ...}``): the fan-out's code
(:func:`costguard.wiring.org.build_guard_fanout` ``.tick``) plans one run per member
account from the directory the scan ticks keep, and sends each to the FIFO act queue (one
message group per account). The queue is then delivered to the act consumer's code
(:func:`costguard.handlers.org_act.consume`) one record per invocation, as its event source
does; the consumer (role ``costguard-hub-act``) enters the account through
``costguard-member-act`` and runs the single-account guard through the one executor: warn,
grace, act (or, with ``dryRun``, report), with the claims and audit trail in the hub's
ledger under ``<hub scope>/<account>`` and the owners' alerts on the hub's topic.

What the guards find, seeded after the scan ticks (so the scans' figures are unchanged):

- ``ml-research`` us-west-2 (a region without compute: the data guard looks there all the
  same): an unattached project volume (warned, snapshotted, deleted), and an exempt one;
- ``ml-vision`` us-east-1: an unattached volume without ``costguard:project`` (out of scope);
- ``ml-vision`` us-west-2 (where the scan found compute): an idle GPU notebook (warned, then
  stopped) and a busy one, with CloudWatch points as in ``costguard demo``'s idle chapter;
- the hub's own (management) account: an unattached project volume, which no guard may
  touch (the account is opted out, and the guards act only through member accounts' roles).

**Simulated time.** The guards' times are placed on the three days *before* the scan
ticks (which end at the story's fixed instant, :data:`costguard_demo.story.STORY_END`),
each at a fixed hour, so a day boundary never falls between two times meant for the same
day. moto starts a snapshot at the real clock's time: after each time, the snapshots it
made are set to that simulated time. The story, and the number of once-a-day alerts and
warnings in it, is then the same whatever the wall clock reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from costguard.domain.decisions import Step
from costguard.domain.org_roles import OrgRoles
from costguard.domain.tags import Tags
from costguard.domain.text import plural, truncate
from costguard.services.org_act import GuardRunOutcome, GuardWork

if TYPE_CHECKING:
    from costguard.domain.decisions import Decision
    from costguard.domain.org_act import GuardRun
    from costguard.ports import TimeLeft
    from costguard.services.guard import Guard, GuardContext, Policy
    from costguard_demo.org_world import Hub, Organization

STALE_VOLUMES = "stale-volumes"
IDLE_NOTEBOOKS = "idle-notebooks"
#: The act consumer runs shortly after the scheduled time.
CONSUMER_DELAY = timedelta(minutes=1)
#: How many days before the scans the guards' first time falls.
DAYS_BEFORE = 3


@dataclass(frozen=True)
class Time:
    """One scheduled time of one guard: an offset from the first day's midnight (UTC)."""

    offset: timedelta
    guard: str
    label: str
    #: Deliver this time's runs a second time at once (SQS delivers at least once).
    replay: bool = False


H = timedelta(hours=1)
D = timedelta(days=1)
#: The stale-volume guard runs every 30 minutes and the idle-notebook guard hourly; these
#: are the times where something happens (the others find nothing new).
SCHEDULE = (
    Time(9 * H, STALE_VOLUMES, "first seen unattached: the 48 h clock starts"),
    Time(D + 9 * H, STALE_VOLUMES, "24 h before the TTL: the owner is warned", replay=True),
    Time(2 * D + 8 * H, IDLE_NOTEBOOKS, "idle for its whole hour: the owner is warned"),
    Time(2 * D + 9 * H, IDLE_NOTEBOOKS, "the hour of grace is over, still idle: stop"),
    Time(2 * D + 9 * H, STALE_VOLUMES, "at the TTL: a snapshot first"),
    Time(2 * D + 9.5 * H, STALE_VOLUMES, "the snapshot completed: delete", replay=True),
)
#: The idle notebooks run from here, and publish their points until the last time.
NOTEBOOKS_FROM = 2 * D + 6 * H
METRICS_UNTIL = 2 * D + 10 * H


def first_day(scan_start: datetime) -> datetime:
    """Midnight (UTC) of the guards' first day, :data:`DAYS_BEFORE` days before the scans."""
    day = scan_start.astimezone(UTC) - DAYS_BEFORE * D
    return day.replace(hour=0, minute=0, second=0, microsecond=0)


# -- what the guards find -------------------------------------------------------------------


@dataclass(frozen=True)
class Seeded:
    account: str
    region: str
    kind: str  # "volume" | "notebook"
    id: str
    label: str
    what: str
    #: What must have become of it when the guards act for real (dry-run: nothing).
    expect: str


def _volume(
    session: Any, account: str, region: str, label: str, size: int, at: datetime, **tags: str
) -> str:
    from costguard_demo.server import moto_backend

    ec2 = session.client("ec2", region_name=region)
    tags = {"Name": label, **tags}
    vid = str(
        ec2.create_volume(
            AvailabilityZone=f"{region}a",
            Size=size,
            VolumeType="gp3",
            TagSpecifications=[
                {
                    "ResourceType": "volume",
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                }
            ],
        )["VolumeId"]
    )
    moto_backend("ec2", region, account).get_volume(vid).create_time = at.replace(tzinfo=None)
    return vid


def seed_targets(org: Organization, sessions: Mapping[str, Any], day: datetime) -> list[Seeded]:
    """The volumes and notebooks the guards find (see the module's docstring), created
    through each account's ``sessions`` (its administrator's)."""
    from costguard_demo.idle import launch_notebook, publish_metrics

    by_name = {a.name: a.id for a in org.members}
    research, vision = by_name["ml-research"], by_name["ml-vision"]
    created = day + 8 * H
    owner = {Tags.OWNER: "alice@example.com"}
    out = [
        Seeded(
            research,
            "us-west-2",
            "volume",
            _volume(
                sessions[research],
                research,
                "us-west-2",
                "llm-scratch-checkpoints",
                500,
                created,
                **{Tags.PROJECT: "llm"},
                **owner,
            ),
            "llm-scratch-checkpoints",
            "500 GiB gp3, llm, unattached",
            "deleted",
        ),
        Seeded(
            research,
            "us-west-2",
            "volume",
            _volume(
                sessions[research],
                research,
                "us-west-2",
                "llm-golden-dataset",
                300,
                created,
                **{Tags.PROJECT: "llm", Tags.EXEMPT: "true"},
                **owner,
            ),
            "llm-golden-dataset",
            "300 GiB gp3, llm, unattached, exempt",
            "kept",
        ),
        Seeded(
            vision,
            "us-east-1",
            "volume",
            _volume(sessions[vision], vision, "us-east-1", "someones-scratch", 200, created),
            "someones-scratch",
            "200 GiB gp3, unattached, no project tag",
            "kept",
        ),
        Seeded(
            org.management,
            "us-east-1",
            "volume",
            _volume(
                sessions[org.management],
                org.management,
                "us-east-1",
                "hub-scratch",
                100,
                created,
                **{Tags.PROJECT: "llm"},
                **owner,
            ),
            "hub-scratch",
            "100 GiB gp3, llm, unattached, hub's own account",
            "kept",
        ),
    ]
    launched = day + NOTEBOOKS_FROM
    for label, gpu, expect in (
        ("vision-idle-notebook", 0.0, "stopped"),
        ("vision-busy-notebook", 92.0, "running"),
    ):
        iid = launch_notebook(
            sessions[vision], "us-west-2", label, launched, vision, project="vision"
        )
        publish_metrics(sessions[vision], "us-west-2", iid, launched, day + METRICS_UNTIL, gpu=gpu)
        out.append(
            Seeded(
                vision,
                "us-west-2",
                "notebook",
                iid,
                label,
                f"g5.xlarge notebook, vision, GPU {gpu:g}% busy",
                expect,
            )
        )
    return out


class Inspector:
    """Reads the seeded resources as their accounts see them (clients made once)."""

    def __init__(self, sessions: Mapping[str, Any], seeded: Sequence[Seeded]) -> None:
        self._seeded = seeded
        self._ec2 = {
            (s.account, s.region): sessions[s.account].client("ec2", region_name=s.region)
            for s in seeded
        }

    def state(self) -> dict[str, dict[str, Any]]:
        """Each seeded resource's state, tags and backup snapshots, by id."""
        out: dict[str, dict[str, Any]] = {}
        for (account, region), ec2 in self._ec2.items():
            here = [s for s in self._seeded if (s.account, s.region) == (account, region)]
            volumes = [s.id for s in here if s.kind == "volume"]
            notebooks = [s.id for s in here if s.kind == "notebook"]
            found: dict[str, Any] = {}
            snapshots: list[Any] = []
            if volumes:
                for v in ec2.describe_volumes(Filters=[{"Name": "volume-id", "Values": volumes}])[
                    "Volumes"
                ]:
                    found[v["VolumeId"]] = (v["State"], v.get("Tags", []))
                snapshots = ec2.describe_snapshots(
                    OwnerIds=["self"], Filters=[{"Name": "volume-id", "Values": volumes}]
                )["Snapshots"]
            if notebooks:
                for r in ec2.describe_instances(InstanceIds=notebooks)["Reservations"]:
                    for i in r["Instances"]:
                        found[i["InstanceId"]] = (i["State"]["Name"], i.get("Tags", []))
            for s in here:
                state, tags = found.get(s.id, ("deleted", []))
                out[s.id] = {
                    "state": state,
                    "tags": {t["Key"]: t["Value"] for t in tags},
                    "snapshots": sorted(
                        x["SnapshotId"] for x in snapshots if x.get("VolumeId") == s.id
                    )
                    if s.kind == "volume"
                    else [],
                }
        return out


# -- the act consumer, watched ------------------------------------------------------------------


@dataclass
class _RecordingPolicy:
    inner: Policy
    seen: list[Decision]

    def decide(self, now: datetime) -> Sequence[Decision]:
        decisions = list(self.inner.decide(now))
        self.seen.extend(decisions)
        return decisions


@dataclass
class Watched:
    """One run the act consumer carried out: what the guard judged, and what it did."""

    run: GuardRun
    outcome: GuardRunOutcome | None
    decisions: list[Decision] = field(default_factory=list)
    error: str | None = None


class RecordingGuardWork(GuardWork):
    """The act consumer's graph, keeping each run's decisions and report (the Lambda only
    logs them); everything is done by the wrapped graph."""

    def __init__(self, inner: GuardWork) -> None:
        # Not GuardWork.__init__: every call goes to ``inner``, whose guards are built
        # with their policy watched.
        self._inner = inner
        self.runs: list[Watched] = []
        self._seen: list[Decision] = []
        build = inner._build

        def watched(run: GuardRun, clients: Any, ctx: GuardContext) -> Guard:
            guard = build(run, clients, ctx)
            return replace(guard, policy=_RecordingPolicy(guard.policy, self._seen))

        inner._build = watched

    def run(
        self, run: GuardRun, now: datetime, time_left: TimeLeft | None = None
    ) -> GuardRunOutcome:
        self._seen.clear()
        try:
            outcome = self._inner.run(run, now, time_left)
        except Exception as exc:
            self.runs.append(Watched(run, None, list(self._seen), f"{type(exc).__name__}: {exc}"))
            raise
        self.runs.append(Watched(run, outcome, list(self._seen)))
        return outcome


# -- the chapter ----------------------------------------------------------------------------------


def _money(value: Any) -> float:
    return round(float(value), 2)


def _run_json(w: Watched, names: Mapping[str, str], labels: Mapping[str, str]) -> dict[str, Any]:
    report = w.outcome.report if w.outcome else None
    outcomes = []
    for o in report.outcomes if report else ():
        t = o.decision.target
        outcomes.append(
            {
                "resource": t.key,
                "id": t.id,
                "label": labels.get(t.id, t.name or t.id),
                # The one action vocabulary (docs/actions.md): what the resource is, what
                # is done to it, what happened.
                "resource_kind": t.kind,
                "region": t.region,
                "action": o.decision.action.value,
                "outcome": o.step.value,
                "detail": o.detail,
                "reason": o.decision.reason,
                "usd_per_month_saved": _money(o.usd_per_month_saved),
                "deadline": o.deadline.isoformat() if o.deadline else None,
                "error": o.error,
            }
        )
    judged = [
        {
            "id": d.target.id,
            "region": d.target.region,
            "label": labels.get(d.target.id, d.target.name or d.target.id),
            "action": d.action.value,
            "reason": d.reason,
        }
        for d in w.decisions
    ]
    return {
        "account": w.run.account,
        "name": names.get(w.run.account, w.run.account),
        "guard": w.run.guard,
        "regions": list(w.run.regions),
        "dropped": w.outcome is not None and report is None,
        "error": w.error,
        "judged": judged,
        "outcomes": outcomes,
        "counts": dict(report.counts) if report else {},
        "saved_usd_per_month": _money(report.saved_usd_per_month(Step.ACTED)) if report else 0.0,
        "would_save_usd_per_month": (
            _money(report.saved_usd_per_month(Step.WOULD_WARN, Step.WOULD_ACT)) if report else 0.0
        ),
    }


def run_guard_chapter(
    say: Callable[[str], None],
    org: Organization,
    hub: Hub,
    environ: Mapping[str, str],
    scan_start: datetime,
    alerts_out: Callable[[], list[dict[str, Any]]],
    sessions: Mapping[str, Any],
) -> dict[str, Any]:
    """Seed, then run :data:`SCHEDULE` through the fan-out, the act queue and the act
    consumer; returns the ``guards`` part of the demo's ``--json``."""
    run = _GuardRun.start(say, org, hub, environ, scan_start, alerts_out, sessions)
    ticks: list[dict[str, Any]] = []
    for t in SCHEDULE:
        ticks.append(run.time(t))
        if t.replay:
            ticks.append(run.time(t, again=ticks[-1]["_bodies"]))
    for doc in ticks:
        del doc["_bodies"]
    return run.chapter_json(ticks)


@dataclass
class _GuardRun:
    """The hub's guards at work over the seeded targets: the guard fan-out, the act queue
    and one warm act consumer, and the targets' state after each time."""

    say: Callable[[str], None]
    hub: Hub
    settings: Any
    names: dict[str, str]
    day: datetime
    seeded: list[Seeded]
    inspector: Inspector
    fanout: Any
    act_session: Any
    act_sqs: Any
    work: RecordingGuardWork
    alerts_out: Callable[[], list[dict[str, Any]]]
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)
    snapshots: dict[tuple[str, str], Any] = field(default_factory=dict)

    @classmethod
    def start(
        cls,
        say: Callable[[str], None],
        org: Organization,
        hub: Hub,
        environ: Mapping[str, str],
        scan_start: datetime,
        alerts_out: Callable[[], list[dict[str, Any]]],
        sessions: Mapping[str, Any],
    ) -> _GuardRun:
        """The targets seeded, and the guards' Lambdas built as the stack configures them."""
        from costguard.settings import Settings
        from costguard.wiring.org import HubSettings, build_guard_fanout, build_guard_work
        from costguard_demo.org_world import FANOUT_ROLE, HOME, HUB, lambda_session

        settings = Settings.from_env(environ)
        env = HubSettings.from_settings(settings)
        names = {a.id: a.name for a in org.members} | {org.management: "management"}
        day = first_day(scan_start)
        seeded = seed_targets(org, sessions, day)
        inspector = Inspector(sessions, seeded)
        fanout = build_guard_fanout(settings, env, lambda_session(HUB, FANOUT_ROLE))
        act_session = lambda_session(HUB, OrgRoles.HUB_ACT)
        act_sqs = act_session.client("sqs", region_name=HOME)
        # One consumer graph for the whole run: a warm Lambda keeps its member credentials.
        work = RecordingGuardWork(build_guard_work(settings, act_session))
        run = cls(
            say, hub, settings, names, day, seeded, inspector, fanout, act_session, act_sqs,
            work, alerts_out,
        )  # fmt: skip
        run.introduce()
        # Nothing changes them between two times but the guards: each time's "after" is the
        # next one's "before".
        run.states.append(inspector.state())
        run.snapshots = run.known_snapshots()
        return run

    def introduce(self) -> None:
        mode = (
            "dryRun=true: nothing is changed" if self.settings.dry_run else "dryRun=false: they act"
        )
        first, last = self.day + SCHEDULE[0].offset, self.day + SCHEDULE[-1].offset
        self.say(
            f"\nGuards acting in member accounts ({mode}), simulated "
            f"{first:%Y-%m-%d %H:%M} .. {last:%Y-%m-%d %H:%M} "
            "UTC, days before the scans:"
        )
        for s in self.seeded:
            self.say(f"  seeded {self.names[s.account]} {s.region} {s.id} {s.label}: {s.what}")

    def known_snapshots(self) -> dict[tuple[str, str], Any]:
        """moto starts a snapshot at the real clock's time: each is set to the simulated time
        of the run that asked for it, so the story holds whatever the wall clock reads."""
        from costguard_demo.server import snapshot_ids

        places = {(s.account, s.region) for s in self.seeded}
        return {p: snapshot_ids(p[1], p[0]) for p in places}

    def time(self, t: Time, again: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
        """The guard's schedule at ``t`` (the fan-out, then the act consumer); with
        ``again``, no fan-out: those act-queue messages delivered a second time."""
        at = self.day + t.offset
        now = at + CONSUMER_DELAY
        before = self.states[-1]
        runs, accounts, sent = self._send_again(again) if again else self._fan_out(t, at)
        first = len(self.work.runs)
        delivery = self._deliver(now)
        alerts = self.alerts_out()
        after = self.inspector.state()
        self.states.append(after)
        labels = {s.id: s.label for s in self.seeded}
        doc = {
            "time": at.isoformat(),
            "guard": t.guard,
            "label": t.label,
            "replay": bool(again),
            "accounts": accounts,
            "planned": [
                {
                    "account": r.account,
                    "name": self.names.get(r.account, r.account),
                    "regions": list(r.regions),
                }
                for r in runs
            ],
            "sent": sent,
            "delivery": delivery.as_dict(),
            "runs": [_run_json(w, self.names, labels) for w in self.work.runs[first:]],
            "alerts": [
                {k: a.get(k) for k in ("kind", "project", "severity", "title")} for a in alerts
            ],
            "changed": sorted(k for k in after if after[k] != before[k]),
            "_bodies": delivery.bodies,
        }
        _say_tick(self.say, doc, replay=bool(again))
        return doc

    def _fan_out(self, t: Time, at: datetime) -> tuple[list[Any], int, int]:
        """What the schedule sends (validated as the fan-out parses it)."""
        from costguard.handlers.org import GuardFanoutEvent

        event = GuardFanoutEvent.model_validate({"guard": t.guard, "time": at.isoformat()})
        summary = self.fanout.tick(event.guard, at)
        return list(summary.runs), summary.accounts, summary.sent

    def _send_again(self, again: Sequence[Mapping[str, Any]]) -> tuple[list[Any], int, int]:
        """SQS delivers at least once: the same runs, as new messages (another deduplication
        id, as after the five-minute window); once each, however often a failing one was
        received."""
        from costguard.adapters.work_queue import GuardItem

        items = list(
            {i.dedupe_id(): i for i in (GuardItem.model_validate(b) for b in again)}.values()
        )
        for item in items:
            self.act_sqs.send_message(
                QueueUrl=self.hub.act_queue_url,
                MessageBody=item.model_dump_json(),
                MessageGroupId=item.account,
                MessageDeduplicationId=f"{item.dedupe_id()}/again",
            )
        runs = [item.run() for item in items]
        return runs, len({r.account for r in runs}), len(runs)

    def _deliver(self, now: datetime) -> Any:
        """The act queue to the act consumer, then the new snapshots stamped at ``now``."""
        from costguard.handlers.org_act import consume as act_consume
        from costguard_demo.org_world import drain_queue
        from costguard_demo.server import stamp_new_snapshots

        delivery = drain_queue(
            self.act_session,
            self.hub.act_queue_url,
            self.hub.act_dead_letters_url,
            lambda e: act_consume(e, self.work, now),
            batch_size=1,  # the act event source's: one guard run an invocation
            sqs=self.act_sqs,
        )
        self.dead_letters.extend(delivery.dead_lettered)
        for account, region in self.snapshots:
            known = self.snapshots[account, region]
            self.snapshots[account, region] = stamp_new_snapshots(region, known, now, account)
        return delivery

    def chapter_json(self, ticks: list[dict[str, Any]]) -> dict[str, Any]:
        final = self.states[-1]
        resources = [
            {
                "account": s.account,
                "name": self.names[s.account],
                "region": s.region,
                "kind": s.kind,
                "id": s.id,
                "label": s.label,
                "what": s.what,
                "expected": s.expect if not self.settings.dry_run else _unchanged(s),
                **final[s.id],
            }
            for s in self.seeded
        ]
        return {
            "dry_run": self.settings.dry_run,
            "first_time": (self.day + SCHEDULE[0].offset).isoformat(),
            "last_time": (self.day + SCHEDULE[-1].offset).isoformat(),
            "ticks": ticks,
            "resources": resources,
            "accounts": _by_account(ticks, self.names),
            "savings": _savings(ticks),
            "dead_letters": self.dead_letters,
            "alerts": [a for t in ticks for a in t["alerts"]],
        }


def _unchanged(s: Seeded) -> str:
    return "running" if s.kind == "notebook" else "kept"


ACTED = (Step.ACTED.value,)
WOULD = (Step.WOULD_WARN.value, Step.WOULD_ACT.value)


def _per_resource(runs: Sequence[Mapping[str, Any]], steps: Sequence[str]) -> dict[str, float]:
    """Each resource's monthly saving, counted once however many runs reported it."""
    return {
        o["resource"]: o["usd_per_month_saved"]
        for r in runs
        for o in r["outcomes"]
        if o["outcome"] in steps
    }


def _savings(ticks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    runs = [r for t in ticks for r in t["runs"]]
    acted = _per_resource(runs, ACTED)
    would = {k: v for k, v in _per_resource(runs, WOULD).items() if k not in acted}
    return {
        "usd_per_month": _money(sum(acted.values())),
        "would_usd_per_month": _money(sum(would.values())),
        "acted": sorted(acted),
        "would": sorted(would),
    }


def _by_account(
    ticks: Sequence[Mapping[str, Any]], names: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Per account: how often each guard ran there, and what it warned, did and saved."""
    rows = []
    runs = [r for t in ticks for r in t["runs"]]
    for account in sorted({r["account"] for r in runs}, key=lambda a: names.get(a, a)):
        mine = [r for r in runs if r["account"] == account]
        guards: dict[str, int] = {}
        for r in mine:
            guards[r["guard"]] = guards.get(r["guard"], 0) + 1
        steps = [o["outcome"] for r in mine for o in r["outcomes"]]
        acted = _per_resource(mine, ACTED)
        would = {k: v for k, v in _per_resource(mine, WOULD).items() if k not in acted}
        rows.append(
            {
                "account": account,
                "name": names.get(account, account),
                "runs": guards,
                "warned": steps.count(Step.WARNED.value),
                "acted": steps.count(Step.ACTED.value),
                "would": sum(steps.count(s) for s in WOULD),
                "failed": sum(1 for r in mine if r["error"]) + steps.count(Step.FAILED.value),
                "saved_usd_per_month": _money(sum(acted.values())),
                "would_save_usd_per_month": _money(sum(would.values())),
            }
        )
    return rows


def _say_tick(say: Callable[[str], None], doc: Mapping[str, Any], *, replay: bool) -> None:
    """One progress line per scheduled time (the table has the details)."""
    steps = [
        f"{r['name']} {o['label']}: {o['outcome']}" for r in doc["runs"] for o in r["outcomes"]
    ]
    failed = [f"{r['name']}: {truncate(r['error'], 80)}" for r in doc["runs"] if r["error"]]
    say(
        f"{'  again ' if replay else '  '}{_when(doc['time'])} {doc['guard']}: "
        f"{plural(len(doc['planned']), 'run')}; " + ("; ".join(steps + failed) or "nothing to do")
    )


def _when(iso: str) -> str:
    return iso[5:16].replace("T", " ")


def _regions(planned: Sequence[Mapping[str, Any]]) -> str:
    by_regions: dict[str, list[str]] = {}
    for p in planned:
        by_regions.setdefault(", ".join(p["regions"]), []).append(p["name"])
    return "; ".join(f"{', '.join(n)} ({r})" for r, n in by_regions.items()) or "no account"


def guard_lines(doc: Mapping[str, Any]) -> list[str]:
    """The demo table's section: which guard ran where, what it found, warned and did (or
    would do), what that saves, and the accounts no guard could enter."""
    g = doc["guards"]
    seeded = {r["id"] for r in g["resources"]}
    mode = (
        "dryRun=true: each guard reports what it would do and changes nothing"
        if g["dry_run"]
        else "dryRun=false: each guard warns the owner first, then acts"
    )
    lines = [
        "",
        "Guards in member accounts (each schedule -> the hub's fan-out -> FIFO act queue -> act "
        f"consumer, through costguard-member-act), {mode}.",
        f"Simulated {g['first_time'][:16].replace('T', ' ')} .. "
        f"{g['last_time'][:16].replace('T', ' ')} UTC, "
        "days before the scans:",
    ]
    shown: set[tuple[str, str]] = set()
    for t in g["ticks"]:
        if t["replay"]:
            steps = sorted({o["outcome"] for r in t["runs"] for o in r["outcomes"]}) or ["nothing"]
            lines.append(
                f"  {_when(t['time'])}  {t['guard']:<15} again (its runs delivered a second "
                "time): "
                f"{', '.join(steps)}; changed {', '.join(t['changed']) or 'nothing'}, "
                f"{plural(len(t['alerts']), 'alert')}"
            )
            continue
        lines.append(
            f"  {_when(t['time'])}  {t['guard']:<15} in {_regions(t['planned'])}: {t['label']}"
        )
        for r in t["runs"]:
            acted_on = {o["id"] for o in r["outcomes"]}
            for j in r["judged"]:
                key = (t["guard"], j["id"])
                if j["id"] in seeded and j["id"] not in acted_on and key not in shown:
                    shown.add(key)
                    lines.append(f"      {r['name']} {j['region']} {j['label']}: {j['reason']}")
            for o in r["outcomes"]:
                shown.add((t["guard"], o["id"]))
                money = (
                    f" (${o['usd_per_month_saved']:,.2f}/month)"
                    if o["outcome"] in ACTED + WOULD and o["usd_per_month_saved"]
                    else ""
                )
                detail = o["error"] or o["detail"]
                if not detail.startswith(o["outcome"]):
                    detail = f"{o['outcome']}: {detail}"
                lines.append(f"      {r['name']} {o['region']} {o['label']}: {detail}{money}")
            if r["error"]:
                lines.append(f"      {r['name']}: run failed: {truncate(r['error'], 110)}")
        for a in t["alerts"]:
            lines.append(f"      -> alert [{a['severity']}] {a['kind']}: {a['title']}")
    guards = sorted({t["guard"] for t in g["ticks"]})
    lines += [
        "",
        "Guards by account:",
        f"  {'account':<12}  {'name':<12} {'runs (' + ' / '.join(guards) + ')':<38} "
        f"{'warned':>6} {'acted':>5} {'would':>5}  {'saved $/month':>13}",
    ]
    for a in g["accounts"]:
        runs = " / ".join(str(a["runs"].get(name, 0)) for name in guards)
        saved = a["would_save_usd_per_month"] if g["dry_run"] else a["saved_usd_per_month"]
        lines.append(
            f"  {a['account']:<12}  {a['name']:<12} {runs:<38} {a['warned']:>6} {a['acted']:>5} "
            f"{a['would']:>5}  {saved:>13,.2f}"
        )
    for n in g["not_entered"]:
        lines.append(
            f"  {n['account']:<12}  {n['name']:<12} NOT ENTERED: {truncate(n['why'], 150)}"
        )
        named = [f"finding {f}" for f in n["findings"]] + [f'alert "{x}"' for x in n["alerts"]]
        lines.append(f"  {'':<12}  {'':<12} named in: {'; '.join(named) or 'NOTHING'}")
    lines += ["", "What became of what the guards found:"]
    for r in g["resources"]:
        state = r["state"]
        if r["snapshots"]:
            state += f" (backup {', '.join(r['snapshots'])})"
        if "costguard:action-after" in r["tags"]:
            state += f" (warned: action after {r['tags']['costguard:action-after']})"
        if r["expected"] == "kept" and r["state"] == "available":
            state += ": kept"
        lines.append(
            f"  {r['name']:<12} {r['region']:<10} {r['id']:<22} {r['label']:<24} "
            f"{truncate(r['what'], 52):<52} -> {state}"
        )
    sv = g["savings"]
    lines.append(
        f"Saved: ${sv['usd_per_month']:,.2f}/month by {plural(len(sv['acted']), 'action')}"
        + (
            f"; would save ${sv['would_usd_per_month']:,.2f}/month ({plural(len(sv['would']), 'resource')})"
            if g["dry_run"]
            else ""
        )
    )
    return lines


def guard_problems(doc: Mapping[str, Any]) -> list[str]:
    """What must hold for the guards' part to have behaved as designed (else exit 1)."""
    g = doc["guards"]
    problems = []
    for r in g["resources"]:
        expected = r["expected"]
        state = r["state"]
        ok = {
            "deleted": state == "deleted" and bool(r["snapshots"]),
            "kept": state == "available"
            and not r["snapshots"]
            and "costguard:action-after" not in r["tags"],
            "stopped": state == "stopped",
            "running": state == "running",
        }[expected]
        if not ok:
            problems.append(
                f"{r['name']} {r['label']} ({r['id']}) is {state}, snapshots {r['snapshots']}, "
                f"not {expected}"
            )
    runs = [r for t in g["ticks"] for r in t["runs"]]
    failed: dict[str, list[str]] = {}
    for r in runs:
        errors = [o["error"] for o in r["outcomes"] if o["error"]]
        if r["error"] or errors:
            failed.setdefault(r["name"], []).append(str(r["error"] or errors[0]))
    for name, errors in failed.items():
        problems.append(
            f"{len(errors)} guard runs in {name} failed, first: {truncate(errors[0], 200)}"
        )
    if g["dead_letters"]:
        parked = sorted({f"{d['guard']} {d['account']}" for d in g["dead_letters"]})
        problems.append(f"{len(g['dead_letters'])} guard runs were dead-lettered: {parked}")
    if not g["dry_run"]:
        # Warned first: every action follows a warning of the same resource, at an earlier time.
        for t in g["ticks"]:
            for r in t["runs"]:
                for o in r["outcomes"]:
                    if o["outcome"] != Step.ACTED.value:
                        continue
                    warned = [
                        u["time"]
                        for u in g["ticks"]
                        for x in u["runs"]
                        for w in x["outcomes"]
                        if w["resource"] == o["resource"] and w["outcome"] == Step.WARNED.value
                    ]
                    if not warned or min(warned) >= t["time"]:
                        problems.append(f"{o['resource']} was acted on without a warning first")
    for t in g["ticks"]:
        if t["replay"] and (t["changed"] or t["alerts"]):
            problems.append(
                f"the {t['guard']} run of {t['time']} delivered again changed {t['changed']} "
                f"and sent {plural(len(t['alerts']), 'alert')}"
            )
    members = [a for a in doc["accounts"] if a["name"] != "management"]
    guarded = {a["account"] for a in g["accounts"]}
    for a in members:
        if a["member_role"] and a["account"] not in guarded:
            problems.append(f"no guard ran in {a['name']} ({a['account']}), which has its roles")
        if not a["member_role"]:
            named = [n for n in g["not_entered"] if n["account"] == a["account"]]
            if not named or not named[0]["findings"] or not named[0]["alerts"]:
                problems.append(
                    f"{a['name']} ({a['account']}), which no guard can enter, is not named in "
                    "the guards' report with a finding and an alert"
                )
    return problems
