"""`costguard demo --org --json` end to end: three member accounts on moto's HTTP server, the
hub's fan-out and consumer over a FIFO work queue, one account without its member role."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.config_spec import BY_NAME
from costguard.domain.calendar import month_start
from costguard.wiring import BundledCatalog

#: Every test reading the demo's story (the `demo` fixture, and the dry-run telling) is a
#: `story` test: `make calendar` runs them at calendar edges. The failure variants below
#: (a refused role, a misbehaving guard) run in `make test` only.
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def demo() -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "costguard.cli", "demo", "--org", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    envelope: dict[str, Any] = json.loads(done.stdout)
    assert (envelope["schema_version"], envelope["kind"]) == (2, "demo.org")
    document: dict[str, Any] = envelope["data"]
    return document


def _ids(demo: dict[str, Any]) -> dict[str, str]:
    return {a["name"]: a["account"] for a in demo["accounts"]}


@pytest.mark.story
def test_lists_three_accounts_and_leaves_the_opted_out_management_account_out(
    demo: dict[str, Any],
) -> None:
    ids = _ids(demo)
    assert sorted(demo["listing"]["accounts"]) == sorted(
        [ids["ml-research"], ids["ml-vision"], ids["sandbox"]]
    )
    assert demo["listing"]["opted_out"] == [ids["management"]]
    assert all(t["accounts"] == 3 for t in demo["ticks"])
    # tick 1 reads every account's regions; nothing is probed or scanned before that
    assert demo["ticks"][0]["work"] == {"regions": 3, "probe": 0, "scan": 0}


@pytest.mark.story
def test_names_the_account_without_its_member_role_in_a_finding_an_alert_and_the_dlq(
    demo: dict[str, Any],
) -> None:
    sandbox = _ids(demo)["sandbox"]
    role = f"arn:aws:iam::{sandbox}:role/costguard-member-read"
    assert demo["assume_role_refused"] == [role]
    # its regions item failed every receive and was dead-lettered, alone
    assert [(d["kind"], d["account"], d["receives"]) for d in demo["dead_letters"]] == [
        ("regions", sandbox, 3)
    ]
    assert demo["ticks"][0]["delivery"]["failed_receives"] == 3
    finding = [f for f in demo["findings"] if f["resource"] == f"account/{sandbox}"]
    assert finding and finding[0]["code"] == "scan-failed"
    assert "AccessDenied" in finding[0]["message"]
    alerts = [a for a in demo["alerts"] if a["kind"] == "scan-failed"]
    assert len(alerts) == 1 and sandbox in alerts[0]["title"]
    assert demo["alerts_delivered"]["sqs"] == demo["alerts_delivered"]["slack"]
    assert demo["alerts_delivered"]["sqs"] == len(demo["alerts"]) >= 1
    # nothing about it is counted: its p5 is unknown, not $0, and in no project
    rows = [s for s in demo["slices"] if s["account"] == sandbox]
    assert {s["state"] for s in rows} == {"unreachable"}
    assert all(s["usd_per_hour"] is None for s in rows)
    assert not any(sandbox in p["accounts"] for p in demo["projects"])


@pytest.mark.story
def test_the_ticks_fall_in_one_regions_retry_window_of_the_account_without_its_role(
    demo: dict[str, Any],
) -> None:
    """Defect (seen once under pytest-xdist, and not caused by it): an extra "regions" dead
    letter. A failed regions read is retried once per probe interval, in a window phased
    per account; the ticks were placed by the wall clock, so in one run in eight (45 of
    every 360 minutes) a later tick crossed the sandbox account's window, its regions were
    read and dead-lettered again, and the story changed. The ticks now end at the story's
    fixed instant (``STORY_END``): this pins that they stay inside one window."""
    from costguard.domain.directory import window_crossed

    sandbox = _ids(demo)["sandbox"]
    first, *later = [datetime.fromisoformat(t["time"]) for t in demo["ticks"]]
    interval = timedelta(hours=BY_NAME["org_probe_hours"].default)  # the demo hub's
    crossed = [t for t in later if window_crossed(first, t, f"regions/{sandbox}", interval)]
    assert crossed == []


@pytest.mark.story
def test_empty_regions_are_probed_and_never_scanned(demo: dict[str, Any]) -> None:
    ids = _ids(demo)
    empty = {(ids["ml-research"], "us-west-2"), (ids["ml-vision"], "us-east-1")}
    active = {(ids["ml-research"], "us-east-1"), (ids["ml-vision"], "us-west-2")}
    states = {(s["account"], s["region"]): s["state"] for s in demo["slices"]}
    assert {k for k, v in states.items() if v == "empty"} == empty
    assert {k for k, v in states.items() if v == "active"} == active
    second = demo["ticks"][1]
    # Region reads are phased per account over the probe interval, so an account read at
    # tick 1 may be read once more at tick 2 when its phase boundary falls in between (a
    # one-off extra DescribeRegions, by design); never a scan before the probes answered.
    assert second["work"]["probe"] == 4 and second["work"]["scan"] == 0
    assert second["work"]["regions"] <= 3
    scanned = {
        (i["account"], i["region"])
        for t in demo["ticks"]
        for i in t["items"]
        if i["kind"] == "scan"
    }
    assert scanned == active
    # from tick 3 on, every tick scans the active slices, and each of those ticks is
    # aggregated by the consumer that brought its last slice in
    for t in demo["ticks"][2:]:
        assert {(i["account"], i["region"]) for i in t["items"] if i["kind"] == "scan"} == active
        assert t["aggregated"] == [t["time"]]


@pytest.mark.story
def test_the_project_in_two_accounts_is_rolled_up_from_both(demo: dict[str, Any]) -> None:
    ids = _ids(demo)
    llm = next(p for p in demo["projects"] if p["project"] == "llm")
    assert llm["accounts"] == sorted([ids["ml-research"], ids["ml-vision"]])
    # the roll-up is the sum of the two slices' figures ...
    parts = [s["projects"]["llm"] for s in demo["slices"] if "llm" in (s["projects"] or {})]
    assert len(parts) == 2
    assert llm["month_to_date_usd"] == pytest.approx(
        sum(p["month_to_date_usd"] for p in parts), abs=0.02
    )
    assert llm["usd_per_hour"] == pytest.approx(sum(p["usd_per_hour"] for p in parts), abs=0.001)
    # ... and by hand from the packaged catalog: p4d.24xlarge + g5.2xlarge in us-east-1,
    # g5.12xlarge in us-west-2, from launch (or the month's start) to the last scheduled time.
    # The root volumes add about $0.001/h each; the bastion is a CPU, out of scope.
    catalog, _ = BundledCatalog().read()
    last = datetime.fromisoformat(demo["ticks"][-1]["time"])
    rate = Decimal(0)
    spent = Decimal(0)
    for f in demo["fleet"]:
        if f["project"] != "llm" or f["instance_type"].startswith("m5"):
            continue
        hourly = catalog.ec2_on_demand(f["region"], f["instance_type"])
        assert hourly is not None
        since = max(datetime.fromisoformat(f["launched_at"]), month_start(last))
        rate += hourly
        spent += hourly * Decimal((last - since).total_seconds()) / 3600
    assert llm["usd_per_hour"] == pytest.approx(float(rate), abs=0.01)
    assert llm["month_to_date_usd"] == pytest.approx(float(spent), rel=0.002)
    assert llm["budget_usd"] == 25000.0


@pytest.mark.story
def test_re_running_a_tick_adds_nothing(demo: dict[str, Any]) -> None:
    replay = demo["replay"]
    assert replay["planned"] is False
    assert replay["redelivered"] == 2
    assert replay["newly_done"] == 0
    assert set(replay["ledger"]) <= {"already-applied", "contended"}
    assert replay["spend_changed"] is False


@pytest.mark.story
def test_a_budget_tagged_in_a_member_account_drives_the_rolled_up_budget_alerts(
    demo: dict[str, Any],
) -> None:
    # GIVEN vision's budget tagged (50 USD) on its notebooks in ml-vision, none in the table
    vision = next(p for p in demo["projects"] if p["project"] == "vision")
    # THEN the roll-up carries it, two g6.xlarge notebooks are over it, and the budget
    # alerts went out through the topic to the subscriber and Slack
    assert (vision["budget_usd"], vision["budget_source"], vision["status"]) == (
        50.0,
        "tag",
        "over",
    )
    # (on the 1st of a month little is spent yet, but the forecast is over all the same)
    kinds = {(a["kind"], a["project"]) for a in demo["alerts"]}
    assert ("budget-forecast", "vision") in kinds


def test_exits_1_when_an_account_that_has_its_role_cannot_be_entered(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a run in which ml-vision's member role, which the demo means to deploy, is
    # never created (the StackSet failed there too)
    from costguard_demo import org

    deploy = org.deploy_member_role

    def flaky(admin: Any, hub: str, org_id: str) -> None:
        if admin.client("sts").get_caller_identity()["Account"] != vision[0]:
            deploy(admin, hub, org_id)

    vision: list[str] = []
    create = org.create_organization

    def remember(session: Any) -> Any:
        made = create(session)
        vision.append(next(a.id for a in made.members if a.name == "ml-vision"))
        return made

    monkeypatch.setattr(org, "deploy_member_role", flaky)
    monkeypatch.setattr(org, "create_organization", remember)
    # WHEN the demo runs (in this process)
    code = org.run_org_demo(as_json=True)
    # THEN it says so and exits 1: an unexpected failure is not part of the story
    err = capsys.readouterr().err
    assert code == 1
    assert "work items of accounts with their role were dead-lettered" in err and vision[0] in err


# -- the guards, acting in member accounts through the act queue -----------------------------------


def _resource(demo: dict[str, Any], label: str) -> dict[str, Any]:
    return next(r for r in demo["guards"]["resources"] if r["label"] == label)


def _steps(demo: dict[str, Any], label: str) -> list[tuple[str, str, str]]:
    """(time, guard, step) of every executor outcome on the seeded resource ``label``."""
    return [
        (t["time"], t["guard"], o["outcome"])
        for t in demo["guards"]["ticks"]
        if not t["replay"]
        for r in t["runs"]
        for o in r["outcomes"]
        if o["label"] == label
    ]


@pytest.mark.story
def test_the_member_volume_is_warned_then_snapshotted_then_deleted(demo: dict[str, Any]) -> None:
    # GIVEN an unattached project volume in ml-research us-west-2, a region without compute
    ids = _ids(demo)
    volume = _resource(demo, "llm-scratch-checkpoints")
    assert (volume["account"], volume["region"]) == (ids["ml-research"], "us-west-2")
    g = demo["guards"]
    assert g["dry_run"] is False
    # THEN the stale-volume guard, run at its scheduled times, warned its owner 24 h before
    # the 48 h TTL, started a snapshot at the TTL, and deleted it once that had completed
    first = datetime.fromisoformat(g["first_time"])
    hours = [
        (round((datetime.fromisoformat(at) - first).total_seconds() / 3600, 1), step)
        for at, _guard, step in _steps(demo, "llm-scratch-checkpoints")
    ]
    assert hours == [(24.0, "warned"), (48.0, "waiting"), (48.5, "acted")]
    outcomes = [
        o
        for t in g["ticks"]
        if not t["replay"]
        for r in t["runs"]
        for o in r["outcomes"]
        if o["label"] == "llm-scratch-checkpoints"
    ]
    assert "started" in outcomes[1]["detail"] and "completed" in outcomes[2]["detail"]
    # AND the owner heard of it first through the hub's topic, and Slack, then of the delete
    titles = [a["title"] for a in demo["alerts"] if "llm-scratch-checkpoints" in a["title"]]
    assert titles == [
        next(t for t in titles if t.startswith("CostGuard will delete")),
        "CostGuard did delete ebs-volume llm-scratch-checkpoints",
    ]
    # AND it is gone from its account, its backup snapshot kept
    assert volume["state"] == "deleted" and len(volume["snapshots"]) == 1


@pytest.mark.story
def test_the_exempt_the_untagged_and_the_hubs_own_volumes_survive(demo: dict[str, Any]) -> None:
    ids = _ids(demo)
    for label in ("llm-golden-dataset", "someones-scratch", "hub-scratch"):
        r = _resource(demo, label)
        # never warned, never snapshotted, never deleted
        assert (r["state"], r["snapshots"]) == ("available", []), label
        assert "costguard:action-after" not in r["tags"], label
        assert _steps(demo, label) == [], label
    assert _resource(demo, "hub-scratch")["account"] == ids["management"]
    # the hub's own (opted-out) account is never sent to the act queue
    planned = {p["account"] for t in demo["guards"]["ticks"] for p in t["planned"]}
    assert planned == {ids["ml-research"], ids["ml-vision"]}


@pytest.mark.story
def test_the_idle_notebook_is_warned_then_stopped_and_the_busy_one_left_alone(
    demo: dict[str, Any],
) -> None:
    ids = _ids(demo)
    assert [s for _t, _g, s in _steps(demo, "vision-idle-notebook")] == ["warned", "acted"]
    assert _resource(demo, "vision-idle-notebook")["state"] == "stopped"
    assert _steps(demo, "vision-busy-notebook") == []
    assert _resource(demo, "vision-busy-notebook")["state"] == "running"
    # The compute guard runs where the scans found compute; the data guard everywhere allowed
    ticks = demo["guards"]["ticks"]
    idle = {
        (p["account"], tuple(p["regions"]))
        for t in ticks
        if t["guard"] == "idle-notebooks"
        for p in t["planned"]
    }
    assert idle == {(ids["ml-research"], ("us-east-1",)), (ids["ml-vision"], ("us-west-2",))}
    stale = {
        (p["account"], tuple(p["regions"]))
        for t in ticks
        if t["guard"] == "stale-volumes"
        for p in t["planned"]
    }
    assert stale == {
        (a, ("us-east-1", "us-west-2")) for a in (ids["ml-research"], ids["ml-vision"])
    }


@pytest.mark.story
def test_the_savings_are_the_catalog_rates_of_what_was_done(demo: dict[str, Any]) -> None:
    # g5.xlarge in us-west-2 stopped; 500 GiB gp3 deleted, less its 500 GiB snapshot kept
    catalog, _ = BundledCatalog().read()
    notebook = catalog.ec2_on_demand("us-west-2", "g5.xlarge")
    assert notebook is not None
    volume = (
        catalog.ebs_gb_month["us-west-2"]["gp3"] - catalog.ebs_snapshot_gb_month["us-west-2"]
    ) * 500
    ids = _ids(demo)
    by_account = {a["account"]: a for a in demo["guards"]["accounts"]}
    assert by_account[ids["ml-vision"]]["saved_usd_per_month"] == pytest.approx(
        float(notebook * 730), abs=0.01
    )
    assert by_account[ids["ml-research"]]["saved_usd_per_month"] == pytest.approx(
        float(volume), abs=0.01
    )
    assert demo["guards"]["savings"]["usd_per_month"] == pytest.approx(
        float(notebook * 730 + volume), abs=0.01
    )
    assert (by_account[ids["ml-vision"]]["warned"], by_account[ids["ml-vision"]]["acted"]) == (1, 1)


@pytest.mark.story
def test_the_account_without_its_member_stack_is_never_entered_by_a_guard_and_is_named(
    demo: dict[str, Any],
) -> None:
    sandbox = _ids(demo)["sandbox"]
    g = demo["guards"]
    # GIVEN sandbox, where neither member role exists: its regions were never read
    # THEN no guard run is planned there (it would only fail and dead-letter every time) ...
    assert all(p["account"] != sandbox for t in g["ticks"] for p in t["planned"])
    assert g["dead_letters"] == []
    # ... the act consumer never tried its act role ...
    assert demo["assume_role_refused"] == [f"arn:aws:iam::{sandbox}:role/costguard-member-read"]
    # ... and the guards' report names it, with the finding and the daily alert that do
    [named] = g["not_entered"]
    assert named["account"] == sandbox and "costguard-member-read" in named["why"]
    assert named["findings"] == [f"scan-failed account/{sandbox}"]
    assert named["alerts"] == [f"CostGuard cannot enter account {sandbox}"]
    # AND the other two accounts were guarded, every run done, none failed
    assert {a["name"] for a in g["accounts"]} == {"ml-research", "ml-vision"}
    assert all(a["failed"] == 0 for a in g["accounts"])
    assert all(t["delivery"]["failed_receives"] == 0 for t in g["ticks"])


@pytest.mark.story
def test_a_guard_tick_delivered_again_changes_nothing(demo: dict[str, Any]) -> None:
    replays = [t for t in demo["guards"]["ticks"] if t["replay"]]
    # the warning's time and the delete's time, each run (and delivered) a second time
    assert [(t["guard"], t["label"]) for t in replays] == [
        ("stale-volumes", "24 h before the TTL: the owner is warned"),
        ("stale-volumes", "the snapshot completed: delete"),
    ]
    for t in replays:
        assert t["sent"] == 2 and t["delivery"]["done"] == 2
        assert t["changed"] == [] and t["alerts"] == []
        steps = {o["outcome"] for r in t["runs"] for o in r["outcomes"]}
        assert steps <= {"waiting"}  # warned already: waiting for the deadline, no 2nd warning


@pytest.mark.story
def test_the_guards_times_fall_on_fixed_hours_of_the_three_days_before_the_scans(
    demo: dict[str, Any],
) -> None:
    first_scan = datetime.fromisoformat(demo["ticks"][0]["time"])
    times = [datetime.fromisoformat(t["time"]) for t in demo["guards"]["ticks"]]
    assert len({t.date() for t in times}) == 3
    assert max(times) < first_scan.replace(hour=0, minute=0) - timedelta(hours=14)
    assert sorted({f"{t:%H:%M}" for t in times}) == ["08:00", "09:00", "09:30"]


@pytest.mark.story
def test_with_dry_run_the_guards_say_what_they_would_do_and_save_and_change_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN the deployment's dryRun on (in this process, three scan ticks)
    from costguard_demo import org

    # WHEN the demo runs
    code = org.run_org_demo(as_json=True, ticks=3, dry_run=True)
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    doc = json.loads(out.out)["data"]
    g = doc["guards"]
    # THEN the guards reported what they would do, and what it would save ...
    assert g["dry_run"] is True
    steps = {o["outcome"] for t in g["ticks"] for r in t["runs"] for o in r["outcomes"]}
    assert "would-warn" in steps and steps <= {"would-warn", "would-act"}
    assert g["savings"]["usd_per_month"] == 0
    assert g["savings"]["would_usd_per_month"] == pytest.approx(749.38, abs=0.01)
    assert len(g["savings"]["would"]) == 2
    # ... and changed nothing: no tag, no snapshot, no delete, no stop, nobody told
    for r in g["resources"]:
        assert r["state"] == ("running" if r["kind"] == "notebook" else "available"), r
        assert r["snapshots"] == [] and "costguard:action-after" not in r["tags"], r
    assert not [a for a in doc["alerts"] if a["kind"].startswith("action-")]


@pytest.mark.parametrize(
    ("spoil", "problem"),
    [
        (lambda g: _set(g, "llm-golden-dataset", state="deleted"), "llm-golden-dataset"),
        (lambda g: _set(g, "hub-scratch", tags={"costguard:action-after": "x"}), "hub-scratch"),
        (lambda g: _set(g, "vision-idle-notebook", state="running"), "vision-idle-notebook"),
        (lambda g: _drop_step(g, "warned"), "without a warning first"),
        (lambda g: g["ticks"][-1].update(changed=["vol-x"]), "delivered again changed"),
        (lambda g: g["not_entered"].clear(), "not named in the guards' report"),
        (lambda g: g["accounts"].pop(0), "no guard ran in"),
    ],
)
def test_the_demo_exits_1_when_a_guard_misbehaves(
    demo: dict[str, Any], spoil: Any, problem: str
) -> None:
    from costguard_demo.org import verdict

    # GIVEN the demo's own report, which passes
    assert verdict(demo) == []
    # WHEN one thing in the guards' part is not as designed THEN the verdict says so (exit 1)
    spoiled = copy.deepcopy(demo)
    spoil(spoiled["guards"])
    assert any(problem in p for p in verdict(spoiled)), verdict(spoiled)


def _set(g: dict[str, Any], label: str, **values: Any) -> None:
    next(r for r in g["resources"] if r["label"] == label).update(values)


def _drop_step(g: dict[str, Any], step: str) -> None:
    for t in g["ticks"]:
        for r in t["runs"]:
            r["outcomes"] = [o for o in r["outcomes"] if o["outcome"] != step]


def test_an_account_whose_act_role_refuses_is_named_once_a_day_and_the_others_guarded(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN ml-vision's member stack at an older version: its read role, no act role (so its
    # regions are read and the guards plan runs there), and only the stale-volume guard's
    # first two times (two UTC days; the second one's runs delivered twice)
    from costguard_demo import org, org_guards

    deploy = org.deploy_member_role
    create = org.create_organization
    vision: list[str] = []

    def remember(session: Any) -> Any:
        made = create(session)
        vision.append(next(a.id for a in made.members if a.name == "ml-vision"))
        return made

    def old_stack(admin: Any, hub: str, org_id: str) -> None:
        deploy(admin, hub, org_id)
        if admin.client("sts").get_caller_identity()["Account"] == vision[0]:
            iam = admin.client("iam")
            iam.delete_role_policy(RoleName="costguard-member-act", PolicyName="costguard")
            iam.delete_role(RoleName="costguard-member-act")

    monkeypatch.setattr(org, "create_organization", remember)
    monkeypatch.setattr(org, "deploy_member_role", old_stack)
    monkeypatch.setattr(org_guards, "SCHEDULE", org_guards.SCHEDULE[:2])
    # WHEN the demo runs
    code = org.run_org_demo(as_json=True, ticks=3)
    out = capsys.readouterr()
    assert out.out, out.err[-3000:]
    doc = json.loads(out.out)["data"]
    g, account = doc["guards"], vision[0]
    # THEN it exits 1 (not part of the story), saying why
    assert code == 1 and "guard runs were dead-lettered" in out.err
    # AND the act consumer was refused costguard-member-act there, each run retried and
    # parked in the act queue's dead letters, alone
    assert f"arn:aws:iam::{account}:role/costguard-member-act" in doc["assume_role_refused"]
    assert [(d["account"], d["receives"]) for d in g["dead_letters"]] == [(account, 3)] * 3
    # AND it is named in a finding each day and an alert once a day, whatever the retries
    days = [f["day"] for f in g["findings"] if f["resource"] == f"account/{account}"]
    assert len(days) == 2 and days[0] < days[1]
    title = f"CostGuard cannot act in account {account}"
    assert [a["title"] for a in doc["alerts"]].count(title) == 2
    [named] = [n for n in g["not_entered"] if n["account"] == account]
    assert "costguard-member-act" in named["why"]
    assert f"act-failed account/{account}" in named["findings"] and named["alerts"] == [title] * 2
    # AND ml-research was guarded all the same: its volume's owner was warned
    assert [s for _t, _g, s in _steps(doc, "llm-scratch-checkpoints")] == ["warned"]
