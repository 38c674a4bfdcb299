"""Guards at Organization scale: one guard run in one member account, measured on moto,
and the month of every guard's runs across an Organization, modelled.

In Organization mode a guard's schedule invokes the hub's fan-out with ``{"guard": name}``;
it plans one run per member account from the directory (no AWS call) and sends one FIFO
message per run to the act queue; the act consumer (batch size 1) assumes
``costguard-member-act`` in the account and runs the single-account guard there, over
the run's regions, recording in the hub's ledger. Compute guards (idle notebooks) run
only in accounts with an active region, over those regions; data guards (stale volumes,
stale objects) run in every account, over every allowed region.

1. **One run, measured on moto** (:func:`measure_runs`): the real act path
   (``build_guard_work`` -> ``consume`` -> ``GuardWork.run`` -> the guard through the
   executor) for each shipped guard, in a member account entered through STS, empty and
   holding a handful of what the guard guards, over 1, 2 and 4 regions, and the same run
   again once other accounts hold things too. AWS calls by ``service.Operation`` in the
   member account and in the hub (its ledger, topic, STS) apart; DynamoDB units as
   DynamoDB bills them; our code's seconds (moto's own time excluded: see
   ``benchmarks/org_scale.py``); log bytes.
2. **The guard fan-out at 200 accounts, measured on moto** (:func:`measure_fanout`): the
   real ``GuardFanout`` over a directory of 200 accounts x 4 regions (10 % active), with
   SQS replaced by the stand-in of ``org_scale``: its seconds, calls and units per guard.
3. **The month, modelled** (:func:`act_month`, in ``benchmarks/hub_bill.py``): runs per
   guard tick, Lambda GB-seconds and requests, SQS FIFO requests, KMS, DynamoDB, logs,
   X-Ray and the alarms the act path adds, from the figures above; then the
   Organization-mode stack at 200, 500 and 1,000 accounts.

Seconds on AWS are our time plus ``org_scale.LATENCY`` per call, as for the scan.
"""

from __future__ import annotations

import gc
import io
import json
import math
import statistics
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks import hub_bill, org_scale
from benchmarks.hub_bill import as_shipped, regions_at_once  # noqa: F401 - re-exported
from benchmarks.org_scale import (
    ACCOUNTS,
    HOLDING,
    HUB,
    LATENCY,
    REGIONS,
    RUNTIME_INIT_SECONDS,
    Calls,
    Lap,
    NotOurs,
    SizedMeter,
    _member,
    _moto_env,
    _stub_studio,
    least_squares,
    units_of,
)

#: Member accounts of the moto measurement: nothing anywhere; three times the handful over
#: two regions; another account holding things in every region. The accounts holding a
#: handful in one region are numbered from 222222222222.
EMPTY, BIG, OTHER = "333333333333", "666666666666", "777777777777"
GUARDS = tuple(hub_bill.SPECS)
#: Each guard's default schedule, minutes.
SCHEDULE = {name: hub_bill.schedule_minutes(name) for name in GUARDS}
#: Organizations the model is priced at (accounts; 4 regions, 10 % active).
SIZES = (200, 500, 1000)
#: The month before the act path (``make bench`` of 2026-11-30, 200 accounts).
BEFORE_USD = 13.98
TARGET_USD = 30
#: Lambda gives a function one vCPU at 1,769 MB and a proportional share below it.
ONE_VCPU_MB = 1769
#: What a cold act consumer imports before and during its first run (boto3 included).
ACT_IMPORTS = (
    "costguard.handlers.org_act",
    "costguard.wiring.org",
    "costguard.guards",
    "costguard.services.stale_objects",
    "costguard.services.idle",
    "costguard.services.stale_volumes",
    "costguard.services.sweep",
    "costguard.adapters.s3",
    "boto3",
)


def _anchor(now: datetime) -> datetime:
    """The measured runs' time: the 15th of a month at noon, at least three days before
    the real clock (moto stamps volumes, snapshots and objects with it), away from month
    ends (the ledger partitions by month)."""
    at = now.replace(day=15, hour=12, minute=0, second=0, microsecond=0)
    if at > now - timedelta(days=3):
        at = (at.replace(day=1) - timedelta(days=1)).replace(day=15)
    return at


T0 = _anchor(datetime.now(UTC))


class CpuNotOurs:
    """CPU seconds spent in moto's request handling. Our CPU seconds (the process's minus
    these) are steadier than wall seconds on a shared machine: a run's wall time there
    includes other processes' turns."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextmanager
    def around_moto(self) -> Iterator[None]:
        from moto.core.botocore_stubber import BotocoreStubber

        original = BotocoreStubber.__call__

        def timed(stub: Any, event_name: str, request: Any, **kw: Any) -> Any:
            started = time.process_time()
            try:
                return original(stub, event_name, request, **kw)
            finally:
                self.seconds += time.process_time() - started

        BotocoreStubber.__call__ = timed  # type: ignore[method-assign]
        try:
            yield
        finally:
            BotocoreStubber.__call__ = original  # type: ignore[method-assign]


class CpuLap:
    def __init__(self, not_ours: CpuNotOurs) -> None:
        self._not_ours = not_ours
        self._cpu = time.process_time()
        self._excluded = not_ours.seconds

    def ours(self) -> float:
        return max(0.0, time.process_time() - self._cpu - (self._not_ours.seconds - self._excluded))


# -- 1. one run in one member account, on moto ------------------------------------------------


def _seed(base: Any, account: str, regions: Sequence[str], copies: int = 1) -> dict[str, int]:
    """What each guard guards, ``copies`` times in each of ``regions``: two unattached
    project volumes (the stale-volume guard's), a bucket with ``costguard:ttl`` holding
    six objects of which two are past it (the stale-object guard's), and a GPU notebook
    idle for two hours and a SageMaker notebook instance (the idle guard's), all created
    before the runs (back-dated on moto's backends)."""
    from moto.backends import get_backend

    from costguard.domain.tags import Tags
    from tests.support.idle_fleet import gpu_dims, points

    when = T0 - timedelta(hours=3)
    naive = when.replace(tzinfo=None)
    project = [{"Key": Tags.PROJECT, "Value": "llm"}]
    held: Counter[str] = Counter()
    s3_backend = get_backend("s3")[account]["global"]  # type: ignore[call-overload]
    for region in regions:
        member = _member(base, account, region)
        ec2 = member.client("ec2")
        ec2_backend = get_backend("ec2")[account][region]  # type: ignore[call-overload]
        for _ in range(2 * copies):
            volume = ec2.create_volume(
                AvailabilityZone=f"{region}a",
                Size=100,
                VolumeType="gp3",
                TagSpecifications=[{"ResourceType": "volume", "Tags": project}],
            )["VolumeId"]
            ec2_backend.get_volume(volume).create_time = naive
            held["volumes"] += 1
        s3 = member.client("s3")
        for c in range(copies):
            bucket = f"scratch-{account}-{region}-{c}"
            location = {} if region == "us-east-1" else {"LocationConstraint": region}
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration=location)  # type: ignore[arg-type]
            s3.put_bucket_tagging(
                Bucket=bucket,
                Tagging={"TagSet": [{"Key": Tags.TTL, "Value": "48h"}, *project]},
            )
            for i, age in enumerate((72, 60, 24, 12, 2, 1)):
                key = f"tmp/part-{i}"
                s3.put_object(Bucket=bucket, Key=key, Body=b"x" * 1024)
                obj = s3_backend.get_object(bucket, key)
                obj.last_modified = (T0 - timedelta(hours=age)).replace(tzinfo=None)
                held["objects"] += 1
            held["buckets"] += 1
        tags = [
            {"Key": k, "Value": v}
            for k, v in {Tags.PROJECT: "llm", Tags.ROLE: "notebook", Tags.OWNER: "a@x.io"}.items()
        ]
        cw = member.client("cloudwatch")
        sm = member.client("sagemaker")
        sm_backend = get_backend("sagemaker")[account][region]  # type: ignore[call-overload]
        for c in range(copies):
            made = ec2.run_instances(
                ImageId="ami-12345678",
                InstanceType="g5.xlarge",
                MinCount=1,
                MaxCount=1,
                TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
            )["Instances"][0]
            iid = made["InstanceId"]
            ec2_backend.get_instance(iid).launch_time = naive
            series = [
                ("CWAgent", "nvidia_smi_utilization_gpu", gpu_dims(iid, 0), 0.0),
                ("AWS/EC2", "CPUUtilization", {"InstanceId": iid}, 1.0),
                ("AWS/EC2", "NetworkIn", {"InstanceId": iid}, 10_000.0),
                ("AWS/EC2", "NetworkOut", {"InstanceId": iid}, 10_000.0),
            ]
            for namespace, metric, dims, value in series:
                data = [
                    {
                        "MetricName": metric,
                        "Dimensions": [{"Name": k, "Value": v} for k, v in dims.items()],
                        "Timestamp": t,
                        "Value": v,
                    }
                    for t, v in points(T0 - timedelta(hours=2), T0 + timedelta(hours=2), value)
                ]
                cw.put_metric_data(Namespace=namespace, MetricData=data)  # type: ignore[arg-type]
            name = f"explore-{c}"
            sm.create_notebook_instance(
                NotebookInstanceName=name,
                InstanceType="ml.p3.2xlarge",
                RoleArn=f"arn:aws:iam::{account}:role/sagemaker",
                Tags=[{"Key": Tags.PROJECT, "Value": "llm"}],
            )
            notebook = sm_backend.notebook_instances[name]
            notebook.creation_time = notebook.last_modified_time = naive.isoformat()
            held["gpu_notebooks"] += 1
            held["sagemaker_notebooks"] += 1
    return dict(held)


def _warm_up(base: Any, accounts: Sequence[str]) -> None:
    """Touch moto's backends once per account, region and service, so that their lazy
    creation is not in any measured run."""
    for account in accounts:
        for region in REGIONS:
            member = _member(base, account, region)
            member.client("ec2").describe_volumes()
            member.client("ec2").describe_instances()
            member.client("cloudwatch").list_metrics()
            member.client("sagemaker").list_notebook_instances()
            member.client("sagemaker").list_domains()
        _member(base, account, "us-east-1").client("s3").list_buckets()


@dataclass
class RunSample:
    guard: str
    case: str
    account: str
    regions: int
    #: Building the consumer's graph at the invocation (our CPU seconds, hub calls).
    build_cpu: float
    build_calls: dict[str, int]
    #: The run (entering the account included): our CPU seconds, our wall seconds.
    cpu: float
    wall: float
    member_calls: dict[str, int]
    hub_calls: dict[str, int]
    units: dict[str, float]
    log_bytes: int
    outcome: str

    @property
    def sides(self) -> dict[str, int]:
        sts = sum(v for k, v in self.hub_calls.items() if k.startswith("sts."))
        return {
            "member_calls": sum(self.member_calls.values()),
            "sts_calls": sts,
            "hub_calls": sum(self.hub_calls.values()) - sts,
        }

    def figures(self) -> dict[str, float]:
        """The run as :data:`hub_bill.RUN_FIGURES` (seconds: our CPU seconds plus latency)."""
        sides = self.sides
        return {
            "seconds": run_seconds(self.cpu, sides),
            **sides,
            "write_units": self.units["write_units"],
            "read_units": self.units["read_units"],
            "log_bytes": self.log_bytes,
        }

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(
            build_cpu=round(self.build_cpu, 4),
            cpu=round(self.cpu, 4),
            wall=round(self.wall, 4),
            calls_by_side=self.sides,
            seconds_aws_estimate=round(self.figures()["seconds"], 3),
        )
        return out


def run_seconds(
    ours: float, sides: Mapping[str, float], latency: Mapping[str, float] = LATENCY
) -> float:
    """Our time plus the stated latency of each call, sequential (as a guard makes them)."""
    return (
        ours
        + sides.get("member_calls", 0) * latency["member"]
        + sides.get("sts_calls", 0) * latency["sts"]
        + sides.get("hub_calls", 0) * latency["hub"]
    )


class _Act:
    """The act consumer on moto, as its handler runs: one invocation per run (batch size
    1), a new boto3 session for the hub's clients at each invocation, the member
    credentials cold (a MemberClients of its own per invocation, on the container's
    first session), every session counted.

    Before each invocation everything alive is frozen out of the garbage collector: a
    Lambda's heap holds the handler's objects, not moto's backends, whose traversal
    would otherwise put collections of a few tenths of a second in random runs."""

    def __init__(
        self, settings: Any, not_ours: NotOurs, cpu_not_ours: CpuNotOurs, meter: SizedMeter
    ) -> None:
        import boto3
        from aws_lambda_powertools import Logger

        from costguard import run_log
        from costguard.handlers import org_act

        self.settings = settings
        self.not_ours = not_ours
        self.cpu_not_ours = cpu_not_ours
        self.meter = meter
        self.hub_calls = Calls()
        self.member_calls = Calls()
        self.base = boto3.Session(region_name="us-east-1")
        self.hub_calls.attach(self.base)
        self.log = io.StringIO()
        self._modules = (run_log, org_act)
        self._saved = [m.logger for m in self._modules]
        for m in self._modules:
            m.logger = Logger(service=f"bench-{m.__name__}", stream=self.log)
        self._entered: set[int] = set()

    def close(self) -> None:
        for m, saved in zip(self._modules, self._saved, strict=True):
            m.logger = saved
        gc.unfreeze()

    def _session(self) -> Any:
        import boto3

        session = boto3.Session(region_name="us-east-1")
        self.hub_calls.attach(session)
        self.meter.attach(session)
        return session

    def _members(self) -> Any:
        from costguard.adapters.assume import MemberClients
        from costguard.domain.org_roles import OrgRoles
        from costguard.wiring.org import ACT_SESSION

        inner = MemberClients(self.base, OrgRoles.MEMBER_ACT, session_name=ACT_SESSION)

        def enter(s: Any) -> Any:
            clients = inner(s)
            if id(clients.session) not in self._entered:
                self._entered.add(id(clients.session))
                self.member_calls.attach(clients.session)
                _stub_studio(clients.session, self.member_calls)
            return clients

        return enter

    def invoke(
        self, guard: str, account: str, regions: Sequence[str], at: datetime, case: str
    ) -> RunSample:
        from costguard.adapters.work_queue import GuardItem
        from costguard.handlers.org_act import consume
        from costguard.wiring.org import build_guard_work

        gc.collect()
        gc.freeze()
        cpu, h0 = CpuLap(self.cpu_not_ours), self.hub_calls.snapshot()
        session = self._session()
        work = build_guard_work(self.settings, session, members=self._members())  # type: ignore[arg-type]
        build_cpu, build_calls = cpu.ours(), dict(self.hub_calls.snapshot() - h0)
        seen: dict[str, Any] = {}
        run = work.run

        def timed(r: Any, now: datetime, budget: Any = None) -> Any:
            h0, m0 = self.hub_calls.snapshot(), self.member_calls.snapshot()
            u0, lap, cpu = self.meter.snapshot(), Lap(self.not_ours), CpuLap(self.cpu_not_ours)
            out = run(r, now, budget)
            if out.report is None:
                # A dropped run would be measured as free: refuse to measure it.
                raise RuntimeError(f"{r.guard} in {r.account} was dropped: {out.dropped}")
            steps = sorted({o.step.value for o in out.report.outcomes})
            seen.update(
                cpu=cpu.ours(),
                wall=lap.ours(),
                hub=dict(self.hub_calls.snapshot() - h0),
                member=dict(self.member_calls.snapshot() - m0),
                units=units_of(self.meter.snapshot() - u0),
                outcome=",".join(steps) or "nothing",
            )
            return out

        work.run = timed  # type: ignore[method-assign]
        body = GuardItem(time=at, guard=guard, account=account, regions=tuple(regions))
        self.log.seek(0)
        self.log.truncate()
        out = consume({"Records": [_record(body.model_dump_json(), account)]}, work, at)
        if out != {"batchItemFailures": []}:
            raise RuntimeError(f"{guard} in {account} failed on moto: {out}")
        return RunSample(
            guard,
            case,
            account,
            len(regions),
            build_cpu,
            build_calls,
            seen["cpu"],
            seen["wall"],
            seen["member"],
            seen["hub"],
            seen["units"],
            len(self.log.getvalue().encode()),
            seen["outcome"],
        )


def _record(body: str, group: str) -> dict[str, Any]:
    """An SQS FIFO record as Lambda's event source hands it to the act consumer."""
    import hashlib

    return {
        "messageId": hashlib.sha1(body.encode(), usedforsecurity=False).hexdigest(),
        "receiptHandle": "r",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "0",
            "SenderId": "x",
            "ApproximateFirstReceiveTimestamp": "0",
            "MessageGroupId": group,
            "MessageDeduplicationId": "d",
            "SequenceNumber": "1",
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:us-east-1:{HUB}:act.fifo",
        "awsRegion": "us-east-1",
    }


@contextmanager
def _measuring() -> Iterator[tuple[NotOurs, CpuNotOurs]]:
    from moto import mock_aws

    from costguard_demo.cloudtrail import install

    install()  # CloudTrail's AttachVolume history (the stale-volume guard's proof)
    not_ours, cpu = NotOurs(), CpuNotOurs()
    with ExitStack() as stack:
        stack.enter_context(_moto_env())
        stack.enter_context(mock_aws())
        stack.enter_context(not_ours.around_moto())
        stack.enter_context(cpu.around_moto())
        yield not_ours, cpu


def _settings(topic: str | None = None, **kw: Any) -> Any:
    from costguard.settings import Settings

    return Settings(
        table_name="ledger",
        scope=HUB,
        regions=REGIONS,
        topic_arn=topic,
        dry_run=False,
        # moto evaluates no SEARCH: the idle guard lists the GPU series first.
        idle_gpu_discovery="list",
        **kw,
    )


def measure_runs(repeats: int = 3) -> dict[str, Any]:
    """Each guard's run (see the module): empty over 1, 2 and 4 regions (``repeats`` times
    each); then, once other accounts hold things, the empty account's run again, the runs
    of ``repeats`` accounts holding a handful in one region (the first run, then the next
    scheduled one) and of one account holding three times that over two regions."""
    import boto3

    from costguard_demo.plumbing import create_alert_channels, create_ledger_table

    samples: list[RunSample] = []
    held: dict[str, dict[str, int]] = {}
    fulls = [f"{222222222222 + 1000 * i:012d}" for i in range(repeats)]
    with _measuring() as (not_ours, cpu_not_ours):
        plain = boto3.Session(region_name="us-east-1")
        create_ledger_table(plain, "ledger", "us-east-1")
        topic, _ = create_alert_channels(plain, "us-east-1")
        _warm_up(plain, (EMPTY, *fulls, BIG, OTHER))
        meter = SizedMeter(plain.client("dynamodb"), not_ours)
        # The act consumer acts only in the accounts the deployment guards now.
        guarded = (EMPTY, *fulls, BIG, OTHER)
        act = _Act(_settings(topic, org_accounts=guarded), not_ours, cpu_not_ours, meter)
        try:
            # A container's first invocation reads the price catalog: measured apart.
            cold = act.invoke("stale-objects", EMPTY, REGIONS[:1], T0, "first_in_container")
            for guard in GUARDS:
                for n in (1, 2, 4):
                    for _ in range(repeats):
                        samples.append(act.invoke(guard, EMPTY, REGIONS[:n], T0, f"empty_{n}"))
            for account in fulls:
                held[account] = _seed(plain, account, REGIONS[:1])
            held[BIG] = _seed(plain, BIG, REGIONS[:2], copies=3)
            held[OTHER] = _seed(plain, OTHER, REGIONS)
            for guard in GUARDS:
                # A compute guard runs over the account's active regions only (the plan's).
                compute = hub_bill.SPECS[guard].reach is hub_bill.Reach.COMPUTE
                regions = REGIONS[:1] if compute else REGIONS
                later = T0 + timedelta(minutes=SCHEDULE[guard])
                for _ in range(repeats):
                    # Other accounts' resources change nothing in this account's run.
                    samples.append(act.invoke(guard, EMPTY, REGIONS, T0, "empty_4_others_hold"))
                for account in fulls:
                    samples.append(act.invoke(guard, account, regions, T0, "holding"))
                for account in fulls:
                    # The next scheduled run (on the state the first recorded).
                    samples.append(act.invoke(guard, account, regions, later, "holding_next"))
                big = REGIONS[:2] if compute else REGIONS
                samples.append(act.invoke(guard, BIG, big, T0, "holding_x3"))
        finally:
            act.close()
    return {"held": held, "first_in_container": cold, "samples": samples}


def client_models_seconds(repeats: int = 5) -> dict[str, float]:
    """CPU seconds a fresh boto3 session spends creating each client a guard's run creates
    (botocore loads and parses the service's model per session: each new member
    credential is a new session), minus the same in a session that has loaded them."""
    import boto3

    services = {
        "idle-notebooks": ("ec2", "sagemaker", "cloudwatch", "resourcegroupstaggingapi"),
        "stale-volumes": ("ec2",),
        "stale-objects": ("s3",),
    }
    out = {}
    for guard, names in services.items():
        fresh, warm = [], []
        for _ in range(repeats):
            gc.disable()  # a collection over whatever else is alive is not the session's
            try:
                session = boto3.Session(region_name="us-east-1")
                started = time.process_time()
                for name in names:
                    session.client(name, region_name="us-east-1")  # type: ignore[call-overload]
                fresh.append(time.process_time() - started)
                for name in names:  # (the second region still loads some data)
                    session.client(name, region_name="us-west-2")  # type: ignore[call-overload]
                started = time.process_time()
                for name in names:
                    session.client(name, region_name="eu-west-1")  # type: ignore[call-overload]
                warm.append(time.process_time() - started)
            finally:
                gc.enable()
        out[guard] = round(max(0.0, statistics.median(fresh) - statistics.median(warm)), 4)
    return out


def act_cold_start() -> dict[str, float]:
    """A new act consumer container: the runtime's init (stated, as org_scale), the act
    path's imports (measured in a fresh interpreter, boto3 included)."""
    from benchmarks.import_time import import_time_us

    statement = ", ".join(ACT_IMPORTS)
    samples = sorted(import_time_us(statement)["total_us"] for _ in range(3))
    imports = samples[1] / 1e6
    return {"imports_s": round(imports, 3), "runtime_init_s": RUNTIME_INIT_SECONDS}


# -- 2. the guard fan-out at Organization scale, on moto --------------------------------------


def _directory(store: Any, accounts: Sequence[str], holding: set[Any], at: datetime) -> None:
    """The directory the scan ticks keep: every account's regions read, the holding
    account-regions active, the others probed empty."""
    from costguard.domain.directory import SliceState
    from costguard.domain.org import Slice

    for account in accounts:
        store.update_regions(
            account, lambda r: replace(r, regions=tuple(REGIONS), discovered_at=at)
        )
        for region in REGIONS:
            s = Slice(account, region)
            state = SliceState.ACTIVE if s in holding else SliceState.EMPTY
            store.update_slice(
                s, lambda st, state=state: replace(st, state=state, as_of=at, checked_at=at)
            )


def measure_fanout(accounts: int = ACCOUNTS, fraction: float = HOLDING) -> dict[str, Any]:
    """The fan-out Lambda's answer to each guard's schedule (``handlers.org_act.
    guard_fanout``: directory Query, plan, sends to moto's FIFO act queue), over
    ``accounts`` x 4 regions of which ``fraction`` are active."""
    import boto3
    from aws_lambda_powertools import Logger

    from costguard import events
    from costguard.adapters.directory import DynamoDbDirectory
    from costguard.handlers import org
    from costguard_demo.plumbing import create_ledger_table
    from tests.support.org_fakes import OrgWorld

    world = OrgWorld.build(accounts, REGIONS, fraction)
    out: dict[str, Any] = {}
    with _measuring() as (not_ours, cpu_not_ours):
        plain = boto3.Session(region_name="us-east-1")
        create_ledger_table(plain, "ledger", "us-east-1")
        sqs = plain.client("sqs")
        url = sqs.create_queue(QueueName="act.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        store = DynamoDbDirectory(plain.client("dynamodb"), "ledger", HUB)
        _directory(store, world.accounts, world.holding, T0 - timedelta(hours=1))
        calls = Calls()
        meter = SizedMeter(plain.client("dynamodb"), not_ours)
        settings = _settings(org_accounts=tuple(world.accounts), act_queue_url=url)
        log = io.StringIO()
        saved_logger, saved_clock = org.guard_logger, events.CLOCK
        # A logger of its own per measurement (Powertools shares one per service name).
        org.guard_logger = Logger(service=f"bench-guard-fanout-{accounts}", stream=log)
        events.CLOCK = lambda: T0
        try:
            for guard in GUARDS:
                log.seek(0)
                log.truncate()
                gc.collect()
                gc.freeze()
                c0, u0 = calls.snapshot(), meter.snapshot()
                lap, cpu = Lap(not_ours), CpuLap(cpu_not_ours)
                # The handler makes a session per invocation (fanout_handler).
                hub = boto3.Session(region_name="us-east-1")
                calls.attach(hub)
                meter.attach(hub)
                summary = org.guard_fanout({"time": T0.isoformat(), "guard": guard}, settings, hub)
                figures = {
                    "runs": summary["runs"],
                    "account_regions_covered": summary["account_regions"],
                    "sent": summary["sent"],
                    "cpu_ours": round(cpu.ours(), 4),
                    "wall_ours": round(lap.ours(), 4),
                    "calls": dict(calls.snapshot() - c0),
                    **units_of(meter.snapshot() - u0),
                    "log_bytes": len(log.getvalue().encode()),
                }
                figures["seconds_aws_estimate"] = round(
                    figures["cpu_ours"] + sum(figures["calls"].values()) * LATENCY["hub"], 4
                )
                out[guard] = figures
                for _ in _drain(sqs, url):
                    pass
        finally:
            org.guard_logger, events.CLOCK = saved_logger, saved_clock
            gc.unfreeze()
    return {
        "accounts": accounts,
        "account_regions": accounts * len(REGIONS),
        "active": len(world.holding),
        "accounts_with_an_active_region": len({s.account for s in world.holding}),
        "guards": out,
    }


def _drain(sqs: Any, url: str) -> Iterator[dict[str, Any]]:
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)
            ],
        )
        yield from got


# -- from the measurements to each guard's line ------------------------------------------------


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _group(samples: Sequence[RunSample], guard: str, case: str) -> list[RunSample]:
    return [s for s in samples if s.guard == guard and s.case == case]


def _typical(group: Sequence[RunSample]) -> dict[str, Any]:
    """A group of like runs: their calls (the same in every run, or flagged), the median
    of each figure, the seconds on moto."""
    if not group:
        return {}
    shapes = {
        tuple(sorted((Counter(s.member_calls) + Counter(s.hub_calls)).items())) for s in group
    }
    first = group[0]
    figures = {k: _median([s.figures()[k] for s in group]) for k in hub_bill.RUN_FIGURES}
    return {
        "samples": len(group),
        "regions": first.regions,
        "outcome": first.outcome,
        "member_calls": dict(sorted(first.member_calls.items())),
        "hub_calls": dict(sorted(first.hub_calls.items())),
        "calls_by_side": first.sides,
        "calls_total": sum(first.sides.values()),
        "same_calls_in_every_run": len(shapes) == 1,
        "cpu_seconds_ours": round(_median([s.cpu for s in group]), 4),
        "wall_seconds_ours_on_moto": round(_median([s.wall for s in group]), 4),
        "seconds_aws_estimate": round(figures["seconds"], 3),
        "write_units": figures["write_units"],
        "read_units": figures["read_units"],
        "log_bytes": round(figures["log_bytes"]),
    }


def guard_line(samples: Sequence[RunSample], guard: str) -> dict[str, Any]:
    """A guard's measured runs, and its cost line: a least-squares line in the regions of
    the empty account's runs, and what holding a handful adds (the larger of the first
    and the next run, each figure, minus the empty line at the same regions: an upper
    bound for an account's runs over the month)."""
    empty = [
        s
        for s in samples
        if s.guard == guard and s.case.startswith("empty_") and s.case[6:].isdigit()
    ]
    rows = [(1.0, float(s.regions)) for s in empty]
    base, per_region = {}, {}
    for k in hub_bill.RUN_FIGURES:
        a, b = least_squares(rows, [s.figures()[k] for s in empty])
        # A cost does not fall with regions: a slope under zero is the seconds' noise.
        base[k], per_region[k] = round(a, 4) + 0.0, round(max(0.0, b), 4)
    holding = _group(samples, guard, "holding")
    later = _group(samples, guard, "holding_next")
    at = holding[0].regions
    delta = {}
    for k in hub_bill.RUN_FIGURES:
        top = max(
            _median([s.figures()[k] for s in holding]), _median([s.figures()[k] for s in later])
        )
        delta[k] = round(max(0.0, top - (base[k] + per_region[k] * at)), 4)
    runs = {
        case: _typical(_group(samples, guard, case))
        for case in (
            "empty_1",
            "empty_2",
            "empty_4",
            "empty_4_others_hold",
            "holding",
            "holding_next",
            "holding_x3",
        )
    }
    same = runs["empty_4"]["member_calls"] == runs["empty_4_others_hold"]["member_calls"] and (
        runs["empty_4"]["hub_calls"] == runs["empty_4_others_hold"]["hub_calls"]
    )
    return {
        "runs": runs,
        "line": {"base": base, "per_region": per_region, "holding": delta},
        "calls_per_region": per_region["member_calls"] + per_region["hub_calls"],
        "calls_unchanged_when_other_accounts_hold_things": same,
        "calls_holding_x3_over_holding": round(
            runs["holding_x3"]["calls_total"] / max(1, runs["holding"]["calls_total"]), 2
        ),
    }


def costs_from(lines: Mapping[str, Mapping[str, Any]]) -> tuple[hub_bill.GuardCost, ...]:
    return tuple(
        hub_bill.GuardCost(
            name,
            SCHEDULE[name],
            hub_bill.SPECS[name].reach is hub_bill.Reach.COMPUTE,
            lines[name]["line"]["base"],
            lines[name]["line"]["per_region"],
            lines[name]["line"]["holding"],
        )
        for name in GUARDS
    )


def fanout_line(fanouts: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The fan-out's seconds per guard tick: a least-squares fit on the account-regions
    of the directory it reads and its sends of ten, over every guard and size measured."""
    rows, y = [], []
    for f in fanouts:
        for g in f["guards"].values():
            rows.append((1.0, float(f["account_regions"]), float(math.ceil(g["runs"] / 10))))
            y.append(g["seconds_aws_estimate"])
    base, per_ar, per_send = least_squares(rows, y)
    logs = [g["log_bytes"] for f in fanouts for g in f["guards"].values()]
    return {
        "base": round(max(0.0, base), 5),
        "per_account_region": round(max(0.0, per_ar), 6),
        "per_send": round(max(0.0, per_send), 5),
        "log_bytes": max(logs),
    }


def act_load_from(
    lines: Mapping[str, Mapping[str, Any]],
    samples: Sequence[RunSample],
    first: RunSample,
    cold: Mapping[str, float],
    fanout: Mapping[str, float],
) -> hub_bill.ActLoad:
    """The act path's inputs from the measurements."""
    warm_build = _median([s.build_cpu for s in samples])
    # A new container: the runtime's init, the imports, its first graph (the catalog's
    # read: one GetItem) instead of a warm one.
    first_build = first.build_cpu + sum(first.build_calls.values()) * LATENCY["hub"]
    from pathlib import Path

    import costguard

    catalog = Path(costguard.__file__).with_name("data") / "prices.json"
    return hub_bill.ActLoad(
        guards=costs_from(lines),
        catalog_read_units=math.ceil(catalog.stat().st_size / hub_bill.READ_UNIT_BYTES),
        build_seconds=round(warm_build, 4),
        cold_start_seconds=round(
            cold["imports_s"] + cold["runtime_init_s"] + first_build - warm_build, 3
        ),
        fanout_seconds_base=fanout["base"],
        fanout_seconds_per_account_region=fanout["per_account_region"],
        fanout_seconds_per_send=fanout["per_send"],
        fanout_log_bytes=int(fanout["log_bytes"]),
    )


# -- 3. the model: runs, calls and invocations per tick, the month ----------------------------


#: Regions beyond the measured four, for the fit's points with more regions.
MORE_REGIONS = ("eu-central-1", "ap-northeast-1", "sa-east-1", "ca-central-1")


def plan_tick(
    accounts: int, fraction: float, regions: int, act: hub_bill.ActLoad
) -> dict[str, dict[str, float]]:
    """Each guard's runs at one scheduled time, planned by the real planner
    (``plan_guard_runs``) over the directory of ``org_scale``'s world, and their calls
    from each guard's measured line."""
    from costguard.domain.directory import (
        AccountListing,
        AccountRegions,
        Directory,
        SliceState,
        SliceStatus,
    )
    from costguard.domain.org_act import plan_guard_runs
    from tests.support.org_fakes import OrgWorld

    names = (*REGIONS, *MORE_REGIONS)[:regions]
    world = OrgWorld.build(accounts, names, fraction)
    directory = Directory(
        AccountListing(tuple(world.accounts), T0),
        {a: AccountRegions(a, tuple(names), T0) for a in world.accounts},
        {s: SliceStatus(s, SliceState.ACTIVE, T0, T0) for s in world.holding},
    )
    with_compute = {s.account for s in world.holding}
    out = {}
    for cost in act.guards:
        reach = hub_bill.SPECS[cost.name].reach
        runs = plan_guard_runs(directory, world.accounts, T0, cost.name, reach)
        calls = 0.0
        for r in runs:
            share = 1.0 if r.account in with_compute else act.data_only_holding_share
            figures = cost.run(len(r.regions), share)
            calls += figures["member_calls"] + figures["sts_calls"] + figures["hub_calls"]
        out[cost.name] = {
            "accounts": accounts,
            "account_regions": accounts * regions,
            "active": len(world.holding),
            "accounts_with_an_active_region": len(with_compute),
            "invocations": len(runs),
            "account_regions_covered": sum(len(r.regions) for r in runs),
            "calls": round(calls, 2),
        }
    return out


#: The fit's columns: what a guard tick's calls and invocations may follow.
FIT_TERMS = ("accounts", "accounts_with_an_active_region", "active", "account_regions")


def sweep_fit(act: hub_bill.ActLoad) -> dict[str, Any]:
    """Calls and invocations per guard tick over Organizations of several sizes, active
    shares and regions, and their least-squares fit on the accounts, the accounts with an
    active region, the active account-regions and all account-regions: which term each
    guard's work follows (the world spreads active regions one per account up to a
    quarter of them, then two and more per account)."""
    cases = [(a, f, 4) for a in (50, 200, 500, 1000) for f in (0.05, 0.10, 0.25, 0.5)]
    cases += [(200, 0.10, 2), (200, 0.10, 8), (500, 0.05, 8), (200, 0.5, 8), (500, 0.5, 2)]
    points = [plan_tick(a, f, r, act) for a, f, r in cases]
    fit: dict[str, Any] = {}
    for cost in act.guards:
        rows = [tuple(float(p[cost.name][t]) for t in FIT_TERMS) for p in points]
        fit[cost.name] = {}
        for key in ("calls", "invocations"):
            y = [p[cost.name][key] for p in points]
            coefficients = least_squares(rows, y)
            worst = max(
                abs(sum(c * x for c, x in zip(coefficients, row, strict=True)) - v)
                for row, v in zip(rows, y, strict=True)
            )
            fit[cost.name][f"{key}_per_tick"] = {
                **{
                    f"per_{t}": round(c, 3) + 0.0
                    for t, c in zip(FIT_TERMS, coefficients, strict=True)
                },
                "largest_residual": round(worst, 2),
            }
    at_200 = next(p for p, c in zip(points, cases, strict=True) if c == (200, 0.10, 4))
    expected = ACCOUNTS * (1 - (1 - HOLDING) ** len(REGIONS))
    return {
        "points": [
            {"accounts": a, "active_fraction": f, "regions": r, **{g: p[g] for g in p}}
            for (a, f, r), p in zip(cases, points, strict=True)
        ],
        "fit": fit,
        "at_200_accounts": at_200,
        "compute_runs_at_200": {
            "world_spread_one_active_region_per_account": at_200["idle-notebooks"]["invocations"],
            "independent_regions_expected": round(expected, 1),
            "model_uses": hub_bill.compute_accounts(hub_bill.HubLoad()),
        },
    }


def _with_seconds(cost: hub_bill.GuardCost, change: Any) -> hub_bill.GuardCost:
    """``cost`` with ``change(part, figures) -> seconds`` applied to its base, per-region
    and holding figures."""
    return replace(
        cost,
        base={**cost.base, "seconds": change("base", cost.base)},
        per_region={**cost.per_region, "seconds": change("per_region", cost.per_region)},
        holding={**cost.holding, "seconds": change("holding", cost.holding)},
    )


def _latency_of(figures: Mapping[str, float]) -> float:
    return run_seconds(0.0, figures)


def variants(
    act: hub_bill.ActLoad, client_models: Mapping[str, float]
) -> dict[str, hub_bill.ActLoad]:
    """What moves the act path's bill (each alone)."""

    def warm(c: hub_bill.GuardCost) -> hub_bill.GuardCost:
        # Credentials kept from an earlier run of the account: no AssumeRole.
        sts = LATENCY["sts"] * c.base["sts_calls"]
        return replace(c, base={**c.base, "sts_calls": 0.0, "seconds": c.base["seconds"] - sts})

    def cpu_share(c: hub_bill.GuardCost) -> hub_bill.GuardCost:
        # At 512 MB a function has 512/1,769 of a vCPU: our CPU seconds take longer.
        stretch = ONE_VCPU_MB / (act.memory_gb * 1024)
        return _with_seconds(
            c, lambda part, f: _latency_of(f) + (f["seconds"] - _latency_of(f)) * stretch
        )

    def shared_loader(c: hub_bill.GuardCost) -> hub_bill.GuardCost:
        saved = client_models.get(c.name, 0.0)
        return replace(c, base={**c.base, "seconds": max(0.0, c.base["seconds"] - saved)})

    return {
        "warm_credentials": replace(act, guards=tuple(warm(c) for c in act.guards)),
        "one_botocore_loader_for_all_member_sessions": replace(
            act, guards=tuple(shared_loader(c) for c in act.guards)
        ),
        "stale_volumes_hourly": replace(
            act,
            guards=tuple(
                replace(c, every_minutes=60) if c.name == "stale-volumes" else c for c in act.guards
            ),
        ),
        "lambda_cpu_share_at_512_mb": replace(act, guards=tuple(cpu_share(c) for c in act.guards)),
    }


def template_alarms() -> dict[str, Any]:
    """The Organization-mode template's alarms, synthesized here; modelled when the
    template does not have the act path yet (per-guard Lambdas, no act consumer)."""
    body = org_scale.org_template()
    resources = body["Resources"].values()
    alarms = sum(1 for r in resources if r["Type"] == "AWS::CloudWatch::Alarm")
    handlers = [
        r["Properties"].get("Handler", "")
        for r in resources
        if r["Type"] == "AWS::Lambda::Function"
    ]
    act = "costguard.handlers.org_act.handler" in handlers
    guard_lambdas = sum(1 for h in handlers if h == "costguard.handlers.act.handler")
    modelled = alarms - 3 * guard_lambdas + (0 if act else hub_bill.ACT_ALARMS)
    return {
        "synthesized": alarms,
        "template_has_act_consumer": act,
        "per_guard_lambdas_in_template": guard_lambdas,
        "used": alarms if act and not guard_lambdas else modelled,
        "modelled": hub_bill.ORG_ALARMS,
    }


def month_at(
    accounts: int, hub_load: hub_bill.HubLoad, act: hub_bill.ActLoad, alarms: int
) -> dict[str, Any]:
    month = hub_bill.stack_month(replace(hub_load, accounts=accounts), alarms=alarms, act=act)
    lines = month["usd_per_month"]
    assert isinstance(lines, dict)
    guards = month["act"]
    assert isinstance(guards, dict)
    return {
        "accounts": accounts,
        "usd_per_month": lines,
        "usd_per_month_total": month["usd_per_month_total"],
        "act_path_usd": round(sum(v for k, v in lines.items() if k.startswith("act_")), 2),
        "act_by_guard": {
            name: {
                k: g[k]
                for k in (
                    "runs_per_tick",
                    "regions_per_run",
                    "invocations_per_month",
                    "seconds_per_run",
                    "calls_per_month",
                    "gb_seconds_per_month",
                    "usd_per_month",
                )
            }
            for name, g in guards["guards"].items()
        },
    }


def measure(hub_load: hub_bill.HubLoad | None = None) -> dict[str, Any]:
    """Everything (``make bench``): ``hub_load`` is the hub's measured load (org_scale's),
    default :class:`hub_bill.HubLoad`."""
    started = time.perf_counter()
    took: dict[str, float] = {}

    def timed(name: str, step: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        out = step(*args)
        took[name] = round(time.perf_counter() - t0, 1)
        return out

    hub_load = hub_load or hub_bill.HubLoad()
    measured = timed("runs_on_moto", measure_runs)
    samples: list[RunSample] = measured["samples"]
    fanouts = [timed(f"fanout_{n}_on_moto", measure_fanout, n) for n in (50, ACCOUNTS)]
    cold = timed("cold_start", act_cold_start)
    models = timed("client_models", client_models_seconds)
    alarms = timed("template", template_alarms)
    lines = {g: guard_line(samples, g) for g in GUARDS}
    fan = fanout_line(fanouts)
    measured_act = act_load_from(lines, samples, measured["first_in_container"], cold, fan)
    act = hub_bill.as_shipped(measured_act)
    fit = timed("fit", sweep_fit, act)
    months = {str(n): month_at(n, hub_load, act, alarms["used"]) for n in SIZES}
    moved = {
        name: {
            str(n): {
                "usd_per_month_total": month_at(n, hub_load, changed, alarms["used"])[
                    "usd_per_month_total"
                ],
                "act_path_usd": month_at(n, hub_load, changed, alarms["used"])["act_path_usd"],
            }
            for n in (ACCOUNTS, 1000)
        }
        # Each variant changes the measured figures, then is modelled as shipped.
        for name, changed in (
            (n, hub_bill.as_shipped(v)) for n, v in variants(measured_act, models).items()
        )
    }
    at_200 = months[str(ACCOUNTS)]
    return {
        "organization": {
            "accounts": ACCOUNTS,
            "regions": len(REGIONS),
            "active_fraction": HOLDING,
            "schedules_minutes": SCHEDULE,
            "act_consumer_memory_mb": int(act.memory_gb * 1024),
            "batch_size": 1,
        },
        "measured_on_moto": {
            "held": measured["held"],
            "guards": lines,
            "first_invocation_in_a_container": measured["first_in_container"].as_dict(),
            "fanout": fanouts,
            "client_models_cpu_seconds_per_fresh_session": models,
        },
        "cold_start": cold,
        "act_load": asdict(act),
        "fit": fit,
        "alarms": alarms,
        "month": months,
        "stack_total_usd": {
            "before_act_path_200_accounts": BEFORE_USD,
            **{f"accounts_{n}": months[str(n)]["usd_per_month_total"] for n in SIZES},
            "target_usd": TARGET_USD,
            "under_target_at_200": at_200["usd_per_month_total"] < TARGET_USD,
        },
        "what_moves_it": moved,
        "latency_assumed_s": LATENCY,
        "benchmark_seconds": {**took, "total": round(time.perf_counter() - started, 1)},
        "notes": (
            "Measured on moto (in-process, this machine): calls by operation in the member "
            "account and in the hub, DynamoDB units, log bytes, our CPU seconds (moto's own "
            "excluded). Modelled: latency per AWS call, an AssumeRole per run (cold "
            "credentials), cold containers at every guard tick, every invocation traced, "
            "us-east-1 list prices without free tiers: upper bounds. The idle guard's "
            "CloudWatch reads are billed to the member accounts and are not included."
        ),
    }


if __name__ == "__main__":
    print(json.dumps(measure(), indent=2, default=str))
