"""The idle-notebook guard on moto: back-dated metrics, batched reads, warn -> stop."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.adapters.aws import ClientFactory
from costguard.adapters.catalog import load_catalog
from costguard.adapters.cloudwatch import MAX_QUERIES_PER_CALL, CloudWatchMetrics
from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.notebooks import NotebookCandidateSource
from costguard.adapters.sagemaker import PerResourceTags
from costguard.domain.decisions import Action, Step
from costguard.domain.idle import GpuDiscovery, Heartbeat, MetricQuery
from costguard.domain.tags import Tags
from costguard.services.executor import Executor, ExecutorSettings
from costguard.services.idle import IdlePolicy, IdleSettings
from tests.support.clock import MIDDAY
from tests.support.idle_fleet import REGION, launch, notebook_tags, points, publish_ec2, put

#: moto does not evaluate SEARCH: the guard finds GPU series with ListMetrics here
#: (tests/functional/test_idle_search.py runs the SEARCH path on a fake CloudWatch).
LIST = GpuDiscovery.LIST
GRACE = timedelta(hours=1)
ACCOUNT = "123456789012"


class Calls:
    def __init__(self, session: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.params: list[tuple[str, dict[str, Any]]] = []
        session.events.register("provide-client-params", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        name = f"{model.service_model.service_name}.{model.name}"
        self.calls[name] += 1
        self.params.append((name, params))


class Alerts:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self._lock = threading.Lock()

    def publish(self, alert: Any) -> str:
        with self._lock:
            self.sent.append(alert)
        return str(len(self.sent))


def guard(session: Any, *, studio: Any = None) -> tuple[IdlePolicy, list[Any]]:
    clients = ClientFactory(session, account=ACCOUNT)
    policy = IdlePolicy(
        NotebookCandidateSource(clients, PerResourceTags(clients), sagemaker=False),
        CloudWatchMetrics(clients.cloudwatch),
        load_catalog(),
        IdleSettings(regions=(REGION,), account=ACCOUNT, grace=GRACE, gpu_discovery=LIST),
        studio=studio,
    )
    return policy, [Ec2InstanceActuator(clients)]


def executor(actuators: list[Any], ledger: Any, alerts: Alerts, dry_run: bool = False) -> Executor:
    return Executor(actuators, ledger, alerts, ExecutorSettings(scope=ACCOUNT, dry_run=dry_run))


def state(session: Any, iid: str) -> str:
    ec2 = session.client("ec2", region_name=REGION)
    (r,) = ec2.describe_instances(InstanceIds=[iid])["Reservations"]
    return str(r["Instances"][0]["State"]["Name"])


def test_the_reader_batches_500_queries_a_call_and_reads_back_dated_maxima(aws: Any) -> None:
    # GIVEN back-dated CPU datapoints for 3 instances and 1,100 queries in all
    put(
        aws,
        "AWS/EC2",
        "CPUUtilization",
        {"InstanceId": "i-1"},
        points(MIDDAY - timedelta(hours=1), MIDDAY, 3.0),
    )
    calls = Calls(aws)
    reader = CloudWatchMetrics(ClientFactory(aws).cloudwatch)
    start, end = MIDDAY - timedelta(hours=1), MIDDAY
    queries = [
        MetricQuery(
            f"k{n}",
            "AWS/EC2",
            "CPUUtilization",
            (("InstanceId", f"i-{n}"),),
            start,
            end,
            timedelta(minutes=5),
        )
        for n in range(1, 1101)
    ]
    # WHEN read
    got = reader.maxima(REGION, queries)
    # THEN three calls, none over the limit, and every query answered (empty when no data)
    sizes = [
        len(p["MetricDataQueries"]) for n, p in calls.params if n == "cloudwatch.GetMetricData"
    ]
    assert sizes == [500, 500, 100]
    assert max(sizes) <= MAX_QUERIES_PER_CALL
    assert got["k1"].values == (3.0,) * 12
    assert got["k2"].values == ()
    assert len(got) == 1100


def test_the_reader_splits_calls_by_the_datapoint_limit_too(aws: Any) -> None:
    calls = Calls(aws)
    reader = CloudWatchMetrics(ClientFactory(aws).cloudwatch)
    start, end = MIDDAY - timedelta(hours=16, minutes=40), MIDDAY  # 200 periods a query
    queries = [
        MetricQuery(
            f"k{n}",
            "AWS/EC2",
            "CPUUtilization",
            (("InstanceId", f"i-{n}"),),
            start,
            end,
            timedelta(minutes=5),
        )
        for n in range(600)
    ]
    reader.maxima(REGION, queries)
    sizes = [
        len(p["MetricDataQueries"]) for n, p in calls.params if n == "cloudwatch.GetMetricData"
    ]
    assert all(s * 201 <= 100_800 for s in sizes)
    assert sum(sizes) == 600


def test_gpu_series_are_found_by_one_listing_and_merged_across_hosts(aws: Any) -> None:
    # GIVEN an instance whose GPU 0 reported under two hosts (it was restarted)
    t0 = MIDDAY - timedelta(hours=1)
    put(
        aws,
        "CWAgent",
        "nvidia_smi_utilization_gpu",
        {"InstanceId": "i-a", "index": "0", "name": "A10G", "host": "old"},
        points(t0, t0 + timedelta(minutes=30), 0),
    )
    put(
        aws,
        "CWAgent",
        "nvidia_smi_utilization_gpu",
        {"InstanceId": "i-a", "index": "0", "name": "A10G", "host": "new"},
        points(t0 + timedelta(minutes=30), MIDDAY, 0),
    )
    put(
        aws,
        "CWAgent",
        "nvidia_smi_utilization_gpu",
        {"InstanceId": "i-other", "index": "0", "name": "A10G", "host": "x"},
        points(t0, MIDDAY, 0),
    )
    calls = Calls(aws)
    found = CloudWatchMetrics(ClientFactory(aws).cloudwatch).gpu_series(REGION, ["i-a"])
    assert calls.calls == Counter({"cloudwatch.ListMetrics": 1})
    (gpu,) = found["i-a"]
    assert gpu.index == "0" and len(gpu.dimension_sets) == 2
    assert "i-other" not in found


@pytest.fixture
def fleet(aws: Any) -> dict[str, str]:
    """Four notebooks, launched 3 hours ago, with 5 hours of back-dated metrics."""
    launched = MIDDAY - timedelta(hours=3)
    (idle,) = launch(aws, notebook_tags(Name="idle"), at=launched)
    (busy,) = launch(aws, notebook_tags(Name="busy"), at=launched)
    (silent,) = launch(aws, notebook_tags(Name="silent"), at=launched)
    (exempt,) = launch(
        aws, notebook_tags(Name="exempt", **{Tags.EXEMPT: "2026-12-31"}), at=launched
    )
    (expired,) = launch(
        aws, notebook_tags(Name="expired", **{Tags.EXEMPT: "2026-11-01"}), at=launched
    )
    (young,) = launch(aws, notebook_tags(Name="young"), at=MIDDAY - timedelta(minutes=20))
    (other,) = launch(aws, {Tags.PROJECT: "vision"}, at=launched)  # not a notebook
    start, end = MIDDAY - timedelta(hours=3), MIDDAY + timedelta(hours=2)
    for iid in (idle, exempt, expired, young, other):
        publish_ec2(aws, iid, start, end)
    publish_ec2(aws, busy, start, end, gpu=(0.0, 87.0))
    return {
        "idle": idle,
        "busy": busy,
        "silent": silent,
        "exempt": exempt,
        "expired": expired,
        "young": young,
        "other": other,
    }


def test_warns_then_stops_an_idle_notebook_and_leaves_the_rest(
    aws: Any, fleet: dict[str, str]
) -> None:
    policy, actuators = guard(aws)
    ledger, alerts = InMemoryLedger(), Alerts()
    # WHEN the guard runs now
    decisions = policy.decide(MIDDAY)
    by_id = {d.target.id: d for d in decisions}
    # THEN only notebooks were judged, each with its verdict and evidence
    assert fleet["other"] not in by_id
    assert by_id[fleet["idle"]].action is Action.STOP_INSTANCE
    assert by_id[fleet["idle"]].evidence["gpu0_max"] == "0.0%"
    assert by_id[fleet["idle"]].usd_per_hour_saved > 0
    assert by_id[fleet["busy"]].evidence["verdict"] == "busy"
    assert "87.0%" in by_id[fleet["busy"]].reason
    assert by_id[fleet["silent"]].evidence["verdict"] == "unknown"
    assert by_id[fleet["exempt"]].evidence["verdict"] == "skipped"
    assert by_id[fleet["young"]].action is Action.NONE
    assert by_id[fleet["expired"]].action is Action.STOP_INSTANCE  # its exemption ran out
    first = executor(actuators, ledger, alerts).run(decisions, MIDDAY)
    assert first.counts == {"warned": 2}
    assert len(alerts.sent) == 2
    # WHEN it runs during the grace period THEN nothing more is read and it waits
    calls = Calls(aws)
    middle = MIDDAY + timedelta(minutes=30)
    second = executor(actuators, ledger, alerts).run(policy.decide(middle), middle)
    assert second.counts == {"waiting": 2}
    gpu_reads = [p for n, p in calls.params if n == "cloudwatch.GetMetricData"]
    assert all(
        q["MetricStat"]["Metric"]["Dimensions"][0]["Value"] not in (fleet["idle"], fleet["expired"])
        for p in gpu_reads
        for q in p["MetricDataQueries"]
    )
    # WHEN it runs at the deadline THEN the idle ones are stopped, once, and told
    at = MIDDAY + GRACE + timedelta(minutes=1)
    third = executor(actuators, ledger, alerts).run(policy.decide(at), at)
    # (and the young one, now older than its window, is warned in its turn)
    assert third.counts == {"acted": 2, "warned": 1}
    assert state(aws, fleet["idle"]) in {"stopping", "stopped"}
    assert state(aws, fleet["busy"]) == state(aws, fleet["silent"]) == "running"
    assert state(aws, fleet["exempt"]) == "running"
    assert len(alerts.sent) == 5


def test_activity_after_the_warning_withdraws_it_at_the_deadline(
    aws: Any, fleet: dict[str, str]
) -> None:
    policy, actuators = guard(aws)
    ledger, alerts = InMemoryLedger(), Alerts()
    executor(actuators, ledger, alerts).run(policy.decide(MIDDAY), MIDDAY)
    # GIVEN the owner used the GPU for 5 minutes, 20 minutes after the warning, then left
    put(
        aws,
        "CWAgent",
        "nvidia_smi_utilization_gpu",
        {
            "InstanceId": fleet["idle"],
            "index": "0",
            "name": "NVIDIA A10G",
            "host": "ip-10-0-0-0.ec2.internal",
        },
        [(MIDDAY + timedelta(minutes=20), 60.0)],
    )
    at = MIDDAY + GRACE + timedelta(minutes=1)
    report = executor(actuators, ledger, alerts).run(policy.decide(at), at)
    outcomes = {o.decision.target.id: o.step for o in report.outcomes}
    assert outcomes[fleet["idle"]] is Step.CLEARED
    assert outcomes[fleet["expired"]] is Step.ACTED
    assert state(aws, fleet["idle"]) == "running"


def test_a_late_deadline_run_reads_since_the_warning_in_one_call_for_all(aws: Any) -> None:
    # GIVEN three idle notebooks warned in the same run
    ids = launch(aws, notebook_tags(), at=MIDDAY - timedelta(hours=3), count=3)
    for iid in ids:
        publish_ec2(aws, iid, MIDDAY - timedelta(hours=3), MIDDAY + timedelta(hours=7))
    calls = Calls(aws)
    policy, actuators = guard(aws)
    ledger, alerts = InMemoryLedger(), Alerts()
    assert executor(actuators, ledger, alerts).run(policy.decide(MIDDAY), MIDDAY).counts == {
        "warned": 3
    }
    # WHEN the run at the deadline comes 5 hours late
    at = MIDDAY + timedelta(hours=6)
    calls.calls.clear()
    decisions = policy.decide(at)
    # THEN each is read from the window before its warning to now, over one shared
    # range: two calls (GPUs, then CPU and network), as many as on time
    assert {d.evidence["window_minutes"] for d in decisions} == {str(7 * 60)}
    assert calls.calls["cloudwatch.GetMetricData"] == 2
    # AND still idle all that time, they are stopped on that warning
    assert executor(actuators, ledger, alerts).run(decisions, at).counts == {"acted": 3}


def test_a_warning_not_judged_within_two_days_of_its_deadline_is_renewed(aws: Any) -> None:
    # GIVEN an idle notebook warned, and a guard that then did not run for three days
    (iid,) = launch(aws, notebook_tags(), at=MIDDAY - timedelta(hours=3))
    policy, actuators = guard(aws)
    ledger, alerts = InMemoryLedger(), Alerts()
    publish_ec2(aws, iid, MIDDAY - timedelta(hours=3), MIDDAY)
    executor(actuators, ledger, alerts).run(policy.decide(MIDDAY), MIDDAY)
    later = MIDDAY + GRACE + timedelta(days=2, minutes=5)
    publish_ec2(aws, iid, later - timedelta(hours=2), later + timedelta(hours=2))
    # WHEN it runs again
    first = executor(actuators, ledger, alerts).run(policy.decide(later), later)
    # THEN the stale warning is withdrawn, not acted on, and the owner warned afresh next
    assert [o.step for o in first.outcomes] == [Step.CLEARED]
    again = later + timedelta(minutes=15)
    second = executor(actuators, ledger, alerts).run(policy.decide(again), again)
    assert [o.step for o in second.outcomes] == [Step.WARNED]
    assert state(aws, iid) == "running"


def test_exempting_during_the_grace_period_withdraws_the_warning(
    aws: Any, fleet: dict[str, str]
) -> None:
    policy, actuators = guard(aws)
    ledger, alerts = InMemoryLedger(), Alerts()
    executor(actuators, ledger, alerts).run(policy.decide(MIDDAY), MIDDAY)
    ec2 = aws.client("ec2", region_name=REGION)
    ec2.create_tags(Resources=[fleet["idle"]], Tags=[{"Key": Tags.EXEMPT, "Value": "2027-01-01"}])
    at = MIDDAY + GRACE + timedelta(minutes=1)
    report = executor(actuators, ledger, alerts).run(policy.decide(at), at)
    outcomes = {o.decision.target.id: o.step for o in report.outcomes}
    assert outcomes[fleet["idle"]] is Step.CLEARED
    assert state(aws, fleet["idle"]) == "running"


def test_dry_run_reports_each_would_be_action_with_its_savings(
    aws: Any, fleet: dict[str, str]
) -> None:
    from costguard.handlers.act import summary

    policy, actuators = guard(aws)
    report = executor(actuators, InMemoryLedger(), Alerts(), dry_run=True).run(
        policy.decide(MIDDAY), MIDDAY
    )
    actions = summary(report)["actions"]
    assert {a["resource"].rsplit("/", 1)[1] for a in actions} == {fleet["idle"], fleet["expired"]}
    for a in actions:
        assert a["resource_kind"] == "ec2-instance" and a["dry_run"] is True
        assert a["action"] == "stop-instance"
        assert a["outcome"] == "would-warn" and a["project"] == "vision"
        assert a["usd_per_hour_saved"] > 0 and "idle for 60 minutes" in a["reason"]


def test_a_malformed_window_tag_is_a_finding_and_the_default_window(aws: Any) -> None:
    (iid,) = launch(
        aws, notebook_tags(**{Tags.IDLE_MINUTES: "soon"}), at=MIDDAY - timedelta(hours=3)
    )
    publish_ec2(aws, iid, MIDDAY - timedelta(hours=2), MIDDAY)
    policy, _ = guard(aws)
    (d,) = policy.decide(MIDDAY)
    assert d.action is Action.STOP_INSTANCE
    assert [f.code.value for f in policy.findings] == ["malformed-idle-minutes"]


def test_a_longer_window_from_the_tag_needs_that_long_idle(aws: Any) -> None:
    (iid,) = launch(
        aws, notebook_tags(**{Tags.IDLE_MINUTES: "120"}), at=MIDDAY - timedelta(hours=3)
    )
    publish_ec2(aws, iid, MIDDAY - timedelta(minutes=90), MIDDAY)  # 90 minutes of data
    policy, _ = guard(aws)
    (d,) = policy.decide(MIDDAY)
    assert d.evidence["verdict"] == "unknown"
    assert d.evidence["window_minutes"] == "120"


def test_a_notebook_tag_on_an_auto_scaling_member_is_a_finding_never_a_stop(aws: Any) -> None:
    # GIVEN an idle GPU instance tagged a notebook, but a member of an Auto Scaling group,
    # and warned by an earlier version of the guard
    tags = notebook_tags(**{"aws:autoscaling:groupName": "gpu-asg"})
    (iid,) = launch(aws, tags, at=MIDDAY - timedelta(hours=3))
    publish_ec2(aws, iid, MIDDAY - timedelta(hours=3), MIDDAY + timedelta(hours=2))
    ledger, alerts = InMemoryLedger(), Alerts()
    ec2 = aws.client("ec2", region_name=REGION)
    ec2.create_tags(
        Resources=[iid], Tags=[{"Key": Tags.ACTION_AFTER, "Value": "2026-11-20T11:00:00Z"}]
    )
    # WHEN the guard runs
    policy, actuators = guard(aws)
    calls = Calls(aws)
    (d,) = policy.decide(MIDDAY)
    report = executor(actuators, ledger, alerts).run([d], MIDDAY)
    # THEN it is never a candidate: no metric is read, the old warning is withdrawn,
    # and the owner learns why from a finding
    assert d.action is Action.NONE and "Auto Scaling group gpu-asg" in d.reason
    assert not [n for n in calls.calls if n.startswith("cloudwatch.")]
    assert [f.code.value for f in policy.findings] == ["idle-managed-instance"]
    assert [o.step for o in report.outcomes] == [Step.CLEARED]
    assert state(aws, iid) == "running"


def test_the_fallback_stops_only_notebooks_silent_for_the_whole_maximum_runtime(
    aws: Any,
) -> None:
    from costguard_demo.fleet import backdate_sagemaker

    # GIVEN four notebook instances InService for 13 hours, none with a heartbeat in the
    # last hour: two never had one, two published one until 2 hours ago
    sm = aws.client("sagemaker", region_name=REGION)
    names = ("never-1", "never-2", "silent-1", "silent-2")
    for name in names:
        sm.create_notebook_instance(
            NotebookInstanceName=name,
            InstanceType="ml.t3.medium",
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/notebook",
            Tags=[{"Key": Tags.PROJECT, "Value": "vision"}],
        )
    backdate_sagemaker(REGION, dict.fromkeys(names, MIDDAY - timedelta(hours=13)), {})
    for name in ("silent-1", "silent-2"):
        put(
            aws,
            Heartbeat.NAMESPACE,
            Heartbeat.JUPYTER_ACTIVITY,
            {Heartbeat.DIMENSION: name},
            points(MIDDAY - timedelta(hours=13), MIDDAY - timedelta(hours=2), 0.0),
        )
    clients = ClientFactory(aws, account=ACCOUNT)
    policy = IdlePolicy(
        NotebookCandidateSource(clients, PerResourceTags(clients)),
        CloudWatchMetrics(clients.cloudwatch),
        load_catalog(),
        IdleSettings(regions=(REGION,), account=ACCOUNT, grace=GRACE, gpu_discovery=LIST),
    )
    calls = Calls(aws)
    # WHEN the guard judges them
    verdicts = {d.target.id: d.evidence["verdict"] for d in policy.decide(MIDDAY)}
    # THEN only those that never had a heartbeat are idle by the fallback
    assert verdicts == {
        "never-1": "idle",
        "never-2": "idle",
        "silent-1": "unknown",
        "silent-2": "unknown",
    }
    # AND the look back over the maximum runtime is one batched call, not one per notebook
    assert calls.calls["cloudwatch.GetMetricData"] == 2


def test_busy_notebooks_cost_no_executor_call(aws: Any, fleet: dict[str, str]) -> None:
    policy, actuators = guard(aws)
    decisions = [d for d in policy.decide(MIDDAY) if not d.acts]
    calls = Calls(aws)
    executor(actuators, InMemoryLedger(), Alerts()).run(decisions, MIDDAY)
    assert not calls.calls


def test_two_overlapping_runs_stop_once_and_notify_once(aws: Any, fleet: dict[str, str]) -> None:
    # GIVEN a DynamoDB ledger on moto (each call atomic, as in AWS) and a warned notebook
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard_demo.plumbing import create_ledger_table
    from tests.support.atomic import AtomicCalls

    create_ledger_table(aws, "ledger", REGION)
    ledger = DynamoDbLedger(AtomicCalls(aws.client("dynamodb", region_name=REGION)), "ledger")
    alerts = Alerts()
    policy, actuators = guard(aws)
    executor(actuators, ledger, alerts).run(policy.decide(MIDDAY), MIDDAY)
    warned = len(alerts.sent)
    at = MIDDAY + GRACE + timedelta(minutes=1)
    decisions = policy.decide(at)
    barrier = threading.Barrier(2)
    reports: list[Any] = []

    def run() -> None:
        barrier.wait()
        reports.append(executor(actuators, ledger, alerts).run(decisions, at))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # THEN each notebook is stopped by one run, and its owner told once
    steps = Counter(
        o.step for r in reports for o in r.outcomes if o.decision.target.id == fleet["idle"]
    )
    assert steps[Step.ACTED] == 1
    assert sum(steps.values()) == 2
    taken = [a for a in alerts.sent[warned:] if fleet["idle"] in a.alert_id]
    assert len(taken) == 1


class FakeStudio:
    """Studio apps as the inventory reports them (moto has no Studio)."""

    def __init__(self, apps: list[Any], gaps: list[Any] | None = None) -> None:
        self._apps = apps
        self._gaps = gaps or []

    def apps(self, region: str) -> list[Any]:
        return [a for a in self._apps if a.region == region]

    def idle_shutdown_gaps(self, region: str) -> list[Any]:
        return list(self._gaps)


def studio_app(name: str, last_activity: datetime | None, **tags: str) -> Any:
    from costguard.domain.studio import StudioApp

    return StudioApp(
        domain_id="d-abc123",
        space_name=f"space-{name}",
        app_type="JupyterLab",
        app_name=name,
        arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:app/d-abc123/space-{name}/JupyterLab/{name}",
        region=REGION,
        status="InService",
        instance_type="ml.g5.xlarge",
        created=MIDDAY - timedelta(hours=6),
        last_user_activity=last_activity,
        tags={Tags.PROJECT: "vision", Tags.OWNER: "alice@example.com", **tags},
    )


def test_studio_apps_are_judged_on_last_user_activity_and_gaps_are_findings(aws: Any) -> None:
    # GIVEN Studio apps: one unused for 3 h, one used 10 minutes ago, one Studio could not
    # date, one exempt; and a domain without built-in idle shutdown
    from costguard.domain.findings import Finding, FindingCode

    gap = Finding(FindingCode.STUDIO_IDLE_SHUTDOWN_OFF, "d-abc123", "idle shutdown is off")
    studio = FakeStudio(
        [
            studio_app("idle", MIDDAY - timedelta(hours=3)),
            studio_app("busy", MIDDAY - timedelta(minutes=10)),
            studio_app("unknown", None),
            studio_app("exempt", MIDDAY - timedelta(hours=3), **{Tags.EXEMPT: "true"}),
        ],
        [gap],
    )
    policy, _ = guard(aws, studio=studio)
    # WHEN the policy judges them
    decisions = {d.target.id.rsplit("/", 1)[1]: d for d in policy.decide(MIDDAY)}
    # THEN only the idle one is to be deleted (the space and its storage kept), at the
    # SageMaker rate, and unknown or exempt is never idle
    assert decisions["idle"].action is Action.DELETE_APP
    assert "space and its storage are kept" in decisions["idle"].reason
    assert decisions["idle"].usd_per_hour_saved > 0
    assert decisions["idle"].target.kind == "sagemaker-studio-app"
    assert decisions["idle"].target.id == "d-abc123/space-idle/JupyterLab/idle"
    for name in ("busy", "unknown", "exempt"):
        assert decisions[name].action is Action.NONE, name
    # AND the domain without idle shutdown is reported
    assert gap in policy.findings


def test_a_gpu_notebook_instance_without_gpu_readings_is_unknown_and_never_warned(
    aws: Any,
) -> None:
    """Defect: an ml.p3.2xlarge whose heartbeat reported JupyterActivity=0 and no
    GPUUtilization (nvidia-smi timed out or printed [N/A]) was judged on Jupyter activity
    alone: warned, then stopped. Missing data is never idle.

    GIVEN two notebook instances InService for 3 hours, each with an hour of
    JupyterActivity=0 and no GPUUtilization: an ml.p3.2xlarge (1 GPU) and an ml.t3.medium
    WHEN the guard judges them and the executor runs in enforce
    THEN the GPU one is unknown (a finding says its GPU does not report), never warned;
    the CPU one is idle and warned; and no GPU series is read for the CPU type."""
    from costguard_demo.fleet import backdate_sagemaker

    sm = aws.client("sagemaker", region_name=REGION)
    types = {"gpu-nb": "ml.p3.2xlarge", "cpu-nb": "ml.t3.medium"}
    for name, itype in types.items():
        sm.create_notebook_instance(
            NotebookInstanceName=name,
            InstanceType=itype,
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/notebook",
            Tags=[
                {"Key": Tags.PROJECT, "Value": "vision"},
                {"Key": Tags.OWNER, "Value": "alice@example.com"},
            ],
        )
        put(
            aws,
            Heartbeat.NAMESPACE,
            Heartbeat.JUPYTER_ACTIVITY,
            {Heartbeat.DIMENSION: name},
            points(MIDDAY - timedelta(hours=2), MIDDAY, 0.0),
        )
    backdate_sagemaker(REGION, dict.fromkeys(types, MIDDAY - timedelta(hours=3)), {})
    clients = ClientFactory(aws, account=ACCOUNT)
    from costguard.adapters.sagemaker_actuator import SageMakerNotebookActuator

    policy = IdlePolicy(
        NotebookCandidateSource(clients, PerResourceTags(clients)),
        CloudWatchMetrics(clients.cloudwatch),
        load_catalog(),
        IdleSettings(regions=(REGION,), account=ACCOUNT, grace=GRACE, gpu_discovery=LIST),
    )
    calls = Calls(aws)
    decisions = {d.target.id: d for d in policy.decide(MIDDAY)}
    assert decisions["gpu-nb"].action is Action.NONE
    assert decisions["gpu-nb"].evidence["verdict"] == "unknown"
    assert "no GPUUtilization" in decisions["gpu-nb"].reason
    assert [f.resource.rsplit("/", 1)[1] for f in policy.findings] == ["gpu-nb"]
    assert decisions["cpu-nb"].action is Action.STOP_NOTEBOOK
    gpu_reads = [
        q["MetricStat"]["Metric"]["Dimensions"][0]["Value"]
        for n, p in calls.params
        if n == "cloudwatch.GetMetricData"
        for q in p["MetricDataQueries"]
        if q["MetricStat"]["Metric"]["MetricName"] == Heartbeat.GPU_UTILIZATION
    ]
    assert gpu_reads == ["gpu-nb"]
    report = executor([SageMakerNotebookActuator(clients)], InMemoryLedger(), Alerts()).run(
        list(decisions.values()), MIDDAY
    )
    assert {o.decision.target.id: o.step for o in report.outcomes} == {"cpu-nb": Step.WARNED}


def test_the_ec2_actuator_looks_at_many_instances_in_one_call(aws: Any) -> None:
    """GIVEN 30 instances and one id that no longer exists (terminated and gone)
    WHEN the actuator inspects all 31 THEN the 30 are answered, the gone one is absent,
    and it cost one call for the batch plus the halving that isolates the gone id
    (2 x log2(31) at most), never one call per instance; without the gone id, one call."""
    from costguard.domain.decisions import Target

    ids = launch(aws, notebook_tags(), at=MIDDAY - timedelta(hours=3), count=30)
    actuator = Ec2InstanceActuator(ClientFactory(aws, account=ACCOUNT))

    def target(iid: str) -> Target:
        return Target(f"{ACCOUNT}/{REGION}/ec2-instance/{iid}", "ec2-instance", REGION, iid)

    gone = "i-0123456789abcdef0"
    calls = Calls(aws)
    seen = actuator.inspect([target(i) for i in [*ids, gone]])
    assert set(seen) == {target(i).key for i in ids}
    assert all(o.state == "running" and o.tags[Tags.PROJECT] == "vision" for o in seen.values())
    assert calls.calls["ec2.DescribeInstances"] <= 1 + 2 * 5
    calls.calls.clear()
    assert len(actuator.inspect([target(i) for i in ids])) == 30
    assert calls.calls == Counter({"ec2.DescribeInstances": 1})
