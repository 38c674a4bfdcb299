"""Organization mode at scale: 200 accounts x 4 regions, 10 % of them holding accelerators.

What one scheduled time (a *tick*, every 15 minutes by default) costs the hub, from four
sources, each named in the results:

1. **Member work, measured on moto** (:func:`measure_member_work`): the consumer's real
   code path (messages from a FIFO queue -> ``consume`` -> ``build_org_work`` ->
   ``OrgWork`` -> ``SliceWork``/``ProbeWork``/``RegionsWork`` -> ``build_scan_service``)
   in member accounts entered through ``sts:AssumeRole``: a representative non-empty
   account-region (GPU instances, a notebook, an endpoint), a small one, an empty one and
   a CPU-only one. Per item: AWS calls by operation, DynamoDB units (sized as DynamoDB
   bills them), seconds, log bytes.
2. **The hub at 800 account-regions, measured on moto** (:func:`measure_hub`): the real
   fan-out (``build_fanout``: directory Query, plan, send, aggregation sweep) and the real
   consumer services over DynamoDB, with the member accounts replaced by the in-memory
   fakes of ``tests/support/org_fakes.py`` (no member time, no member calls) and SQS by a
   stand-in client (:class:`StandInSqs`; moto's FIFO queue takes time quadratic in its
   depth). Per tick: the fan-out's seconds, calls and units, the plan's size.
3. **A day, and a sweep, simulated in memory** (:func:`simulate_day`): the real ``Fanout``
   and ``OrgWork`` services over ``OrgWorld``: work items per tick by kind; calls and
   invocations follow from the items and the measured figures per item.
4. **Models**: the consumers' schedule (``benchmarks/hub_schedule.py``), the bill
   (``benchmarks/hub_bill.py``), and where the design stops scaling.

Seconds: moto answers in-process, without network latency, and its own (slow, pure
Python) server side is not the guard's time. So every figure keeps the wall time on moto
apart from **our** time (wall time minus the time spent inside moto's request handling and
in this benchmark's own meter), and the AWS estimate is our time plus a stated latency per
AWS call (:data:`LATENCY`).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import hub_bill
from benchmarks.guard_bill import CapacityMeter, _size
from benchmarks.hub_schedule import Message, schedule
from costguard.config_spec import BY_NAME, rate_minutes

if TYPE_CHECKING:
    from costguard.domain.directory import Work

START = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
#: The default schedule (scanRate).
TICK = timedelta(minutes=rate_minutes(BY_NAME["scan_rate"].default))
HUB = "123456789012"  # moto's default account: the hub
REGIONS = ("us-east-1", "us-west-2", "eu-west-1", "ap-southeast-2")
ACCOUNTS = 200
HOLDING = 0.10
#: The member accounts of the moto measurement, by what they hold.
FULL, EMPTY, CPU_ONLY, SMALL = "222222222222", "333333333333", "444444444444", "555555555555"
#: Stated latency of one AWS call from a Lambda in the hub's region (seconds): a member
#: account's API in the member's region (a cross-region round trip plus the service's own
#: time; EC2's Describe calls are the slow ones), STS, and the hub's DynamoDB and SQS.
LATENCY = {"member": 0.15, "sts": 0.15, "hub": 0.01}
#: The aggregation reads the slices' ledgers with this many threads (OrgSettings).
AGGREGATION_THREADS = 16
#: A new consumer container: the Lambda runtime's init before the handler's imports
#: (stated; the handler module's import time is measured).
RUNTIME_INIT_SECONDS = 0.25
#: Lambda's START, END and REPORT lines of one invocation (stated).
PLATFORM_LOG_BYTES = 400
#: Defaults of the deployment (config_spec): the event source's cap, the FIFO groups per
#: account, the consumers' and the fan-out's timeout, the probe interval.
MAX_CONCURRENCY: int = BY_NAME["org_max_concurrency"].default
PER_ACCOUNT_CAP: int = BY_NAME["org_per_account_concurrency"].default
LAMBDA_TIMEOUT_SECONDS: int = BY_NAME["scan_timeout_seconds"].default
PROBE_INTERVAL = timedelta(hours=BY_NAME["org_probe_hours"].default)
#: Published limits the bottlenecks are computed against.
LIMITS = {
    "dynamodb_item_bytes": 400 * 1024,
    "dynamodb_partition_write_units_per_s": 1000,
    "dynamodb_partition_read_units_per_s": 3000,
    "dynamodb_query_page_bytes": 1024 * 1024,
    "sqs_fifo_messages_per_s_batched": 3000,
    "sqs_fifo_requests_per_s": 300,
    "sqs_fifo_in_flight": 20_000,
    "lambda_timeout_s": 900,
    "lambda_account_concurrency": 1000,
    "lambda_event_source_max_concurrency": 1000,
    "ec2_describe_bucket": 100,
    "ec2_describe_refill_per_s": 20,
    # We found no published AssumeRole rate in AWS's quota tables; this is the figure
    # commonly cited for an account's STS requests per Region: a planning assumption.
    "sts_requests_per_s_assumed": 600,
}
#: Instance Scheduler on AWS, as its users report it (issue 13): $/month at 150 account-regions.
INSTANCE_SCHEDULER_USD = 330
INSTANCE_SCHEDULER_ACCOUNT_REGIONS = 150


# -- measuring: calls, units, our time ---------------------------------------------------------


class Calls:
    """AWS calls by ``service.Operation`` from every session it is attached to."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def attach(self, session: Any) -> None:
        session.events.register("before-call", self._count)

    def add(self, name: str) -> None:
        with self._lock:
            self.calls[name] += 1

    def _count(self, model: Any, **_: Any) -> None:
        self.add(f"{model.service_model.service_name}.{model.name}")

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.calls)


class NotOurs:
    """Seconds spent in moto's request handling (AWS's side) and in this benchmark's own
    metering: subtracted from the wall time, what is left is the guard's own time."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds

    @contextmanager
    def around_moto(self) -> Iterator[None]:
        from moto.core.botocore_stubber import BotocoreStubber

        original = BotocoreStubber.__call__

        def timed(stub: Any, event_name: str, request: Any, **kw: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(stub, event_name, request, **kw)
            finally:
                self.add(time.perf_counter() - started)

        BotocoreStubber.__call__ = timed  # type: ignore[method-assign]
        # Threads (the scan's sources, the aggregation's reads) would otherwise be switched
        # in the middle of a moto call, whose time would then include other threads' work:
        # with a long switch interval a thread holds the GIL until it blocks.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(60.0)
        try:
            yield
        finally:
            sys.setswitchinterval(interval)
            BotocoreStubber.__call__ = original  # type: ignore[method-assign]


class Lap:
    """Wall seconds and our seconds (wall minus :class:`NotOurs`) since it started."""

    def __init__(self, not_ours: NotOurs) -> None:
        self._not_ours = not_ours
        self._wall = time.perf_counter()
        self._excluded = not_ours.seconds

    def wall(self) -> float:
        return time.perf_counter() - self._wall

    def ours(self) -> float:
        return max(0.0, self.wall() - (self._not_ours.seconds - self._excluded))


def hub_side(name: str) -> bool:
    return name.startswith(("dynamodb.", "sqs.", "sns.", "organizations."))


def split_calls(calls: Mapping[str, int]) -> dict[str, int]:
    """Calls as member-side (in the member account), STS, and hub-side."""
    sts = sum(v for k, v in calls.items() if k.startswith("sts."))
    hub = sum(v for k, v in calls.items() if hub_side(k))
    return {"member": sum(calls.values()) - sts - hub, "sts": sts, "hub": hub}


def aws_seconds(
    ours: float,
    calls: Mapping[str, int],
    *,
    parallel_hub: int = 1,
    latency: Mapping[str, float] = LATENCY,
) -> float:
    """Our time plus the stated latency of each call (sequential: an upper bound, the scan
    reads its sources in parallel); ``parallel_hub`` threads share the hub's calls."""
    split = split_calls(calls)
    return (
        ours
        + split["member"] * latency["member"]
        + split["sts"] * latency["sts"]
        + math.ceil(split["hub"] / parallel_hub) * latency["hub"]
    )


class SizedMeter(CapacityMeter):
    """Write and read units as DynamoDB bills them, by what the item is.

    On top of :class:`~benchmarks.guard_bill.CapacityMeter` (which bills an update as one
    unit): ``UpdateItem`` and ``PutItem`` are billed on the larger of the item before and
    after (read from moto with a client of its own, uncounted, its time not ours), twice
    in a transaction; and every unit is attributed to the item's kind (its partition key):
    the tick's plan, the directory, or a slice's ledger.
    """

    def __init__(self, raw: Any, not_ours: NotOurs) -> None:
        super().__init__()
        self._raw = raw
        self._not_ours = not_ours
        self.by_kind: Counter[str] = Counter()
        self._lock = threading.Lock()

    @staticmethod
    def kind(pk: str) -> str:
        if pk.endswith("#TICKS") or "#TICK#" in pk:  # the plan, its counter and done items
            return "plan"
        if pk.endswith("#DIR"):
            return "directory"
        return "ledger"

    def _stored(self, table: str, key: Mapping[str, Any]) -> int:
        item = self._raw.get_item(TableName=table, Key=dict(key)).get("Item")
        return _size(item) if item else 0

    def _before(self, params: dict[str, Any], model: Any, **kw: Any) -> None:
        lap = Lap(self._not_ours)
        context = kw.get("context")
        name = model.name
        writes: list[tuple[str, dict[str, Any], int, int]] = []  # table, key, new size, x
        if name == "UpdateItem":
            writes.append((params["TableName"], params["Key"], 0, 1))
        elif name == "PutItem":
            item = params["Item"]
            writes.append((params["TableName"], _key(item), _size(item), 1))
        elif name == "TransactWriteItems":
            for entry in params["TransactItems"]:
                for op, body in entry.items():
                    if op == "Put":
                        item = body["Item"]
                        writes.append((body["TableName"], _key(item), _size(item), 2))
                    else:  # Update, Delete, ConditionCheck
                        writes.append((body["TableName"], body["Key"], 0, 2))
        if context is not None and writes:
            context["costguard_writes"] = [
                (table, key, new, times, self._stored(table, key))
                for table, key, new, times in writes
            ]
        self._not_ours.add(lap.ours())  # its lookups' time in moto is counted already

    def _after(self, parsed: dict[str, Any], model: Any, **kw: Any) -> None:
        lap = Lap(self._not_ours)
        context = kw.get("context") or {}
        name = model.name
        with self._lock:
            for table, key, new, times, before in context.pop("costguard_writes", []):
                after = new or self._stored(table, key)
                units = times * max(1, math.ceil(max(before, after) / 1024))
                self.write_units[name] += units
                self.by_kind[f"write:{self.kind(key['pk']['S'])}"] += units
            if name == "GetItem":
                item = parsed.get("Item") or {}
                units = max(1, math.ceil(_size(item) / 4096))
                self.read_units[name] += units
                self.by_kind[f"read:{self.kind(item['pk']['S']) if item else 'ledger'}"] += units
            elif name == "Query":
                items = parsed.get("Items", [])
                units = max(1, math.ceil(sum(_size(i) for i in items) / 4096))
                self.read_units[name] += units
                kind = self.kind(items[0]["pk"]["S"]) if items else "ledger"
                self.by_kind[f"read:{kind}"] += units
        self._not_ours.add(lap.ours())

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.by_kind)


def _key(item: Mapping[str, Any]) -> dict[str, Any]:
    return {"pk": item["pk"], "sk": item["sk"]}


def units_of(delta: Mapping[str, float]) -> dict[str, float]:
    writes = sum(v for k, v in delta.items() if k.startswith("write:"))
    reads = sum(v for k, v in delta.items() if k.startswith("read:"))
    return {"write_units": writes, "read_units": reads}


@contextmanager
def _moto_env() -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
            "POWERTOOLS_METRICS_DISABLED": "true",
        }
    )
    os.environ.pop("AWS_ENDPOINT_URL", None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _record(m: Mapping[str, Any], n: int) -> dict[str, Any]:
    """An SQS FIFO record as Lambda's event source hands it to the consumer."""
    attributes = m.get("Attributes", {})
    return {
        "messageId": m["MessageId"],
        "receiptHandle": m["ReceiptHandle"],
        "body": m["Body"],
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "0",
            "SenderId": "x",
            "ApproximateFirstReceiveTimestamp": "0",
            "MessageGroupId": attributes.get("MessageGroupId", "g"),
            "MessageDeduplicationId": attributes.get("MessageDeduplicationId", str(n)),
            "SequenceNumber": attributes.get("SequenceNumber", str(n)),
        },
        "messageAttributes": {},
        "md5OfBody": m["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:us-east-1:{HUB}:work.fifo",
        "awsRegion": "us-east-1",
    }


def _receive_all(sqs: Any, url: str) -> Iterator[list[dict[str, Any]]]:
    """The queue in batches of up to ten (as the event source receives), deleted after."""
    while True:
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0
        ).get("Messages", [])
        if not got:
            return
        yield got
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)
            ],
        )


@contextmanager
def _timed_aggregation(
    calls: Calls, meter: SizedMeter, not_ours: NotOurs
) -> Iterator[dict[str, Any]]:
    """The aggregation runs inside the consumer of the slice that completes the plan: timed
    apart, so that a scan's figures are the scan's (and the tick's are the tick's)."""
    from costguard.services import org as org_services

    seen: dict[str, Any] = {}
    original = org_services.Aggregation.run
    original_figures = org_services.Aggregation._slice_figures
    read = Calls()  # the slices whose ledgers were read

    def run(self: Any, tick: datetime, now: datetime) -> Any:
        c0, u0, r0, lap = calls.snapshot(), meter.snapshot(), read.snapshot(), Lap(not_ours)
        out = original(self, tick, now)
        seen.update(
            ours=lap.ours(),
            wall=lap.wall(),
            calls=dict(calls.snapshot() - c0),
            units=dict(meter.snapshot() - u0),
            slices=(read.snapshot() - r0)["slice"],
        )
        return out

    def figures(self: Any, s: Any, month: str) -> Any:
        read.add("slice")
        return original_figures(self, s, month)

    org_services.Aggregation.run = run  # type: ignore[method-assign]
    org_services.Aggregation._slice_figures = figures  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        org_services.Aggregation.run = original  # type: ignore[method-assign]
        org_services.Aggregation._slice_figures = original_figures  # type: ignore[method-assign]


# -- 1. member work on moto ----------------------------------------------------------------


def _member(base: Any, account: str, region: str) -> Any:
    import boto3

    creds = base.client("sts").assume_role(
        RoleArn=f"arn:aws:iam::{account}:role/setup", RoleSessionName="setup"
    )["Credentials"]
    return boto3.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=region,
    )


def _launch(base: Any, account: str, region: str, types: Sequence[str], tagged: bool) -> None:
    """Instances launched two hours before the first tick (back-dated on moto's backend)."""
    from moto.ec2.models import ec2_backends

    ec2 = _member(base, account, region).client("ec2")
    spec: dict[str, Any] = {}
    if tagged:
        tags = [{"Key": "costguard:project", "Value": "llm"}]
        spec["TagSpecifications"] = [{"ResourceType": "instance", "Tags": tags}]
    when = (START - timedelta(hours=2)).replace(tzinfo=None)
    for itype in types:
        made = ec2.run_instances(
            ImageId="ami-12345678", MinCount=1, MaxCount=1, InstanceType=itype, **spec
        )["Instances"][0]
        ec2_backends[account][region].get_instance(made["InstanceId"]).launch_time = when


def _seed_members(base: Any) -> None:
    """FULL/us-east-1: 3 GPU instances (2 g5.xlarge, 1 p4d.24xlarge), 2 CPU ones, a GPU
    notebook and a GPU endpoint; SMALL/us-west-2: one g5.xlarge; CPU_ONLY/us-east-1: two
    m5.large; EMPTY: nothing anywhere."""
    from moto.backends import get_backend

    _launch(base, FULL, "us-east-1", ("g5.xlarge", "g5.xlarge", "p4d.24xlarge"), tagged=True)
    _launch(base, FULL, "us-east-1", ("m5.large", "m5.large"), tagged=False)
    _launch(base, SMALL, "us-west-2", ("g5.xlarge",), tagged=True)
    _launch(base, CPU_ONLY, "us-east-1", ("m5.large", "m5.large"), tagged=False)
    sm = _member(base, FULL, "us-east-1").client("sagemaker")
    role = f"arn:aws:iam::{FULL}:role/sagemaker"
    tags = [{"Key": "costguard:project", "Value": "llm"}]
    sm.create_notebook_instance(
        NotebookInstanceName="explore", InstanceType="ml.p3.2xlarge", RoleArn=role, Tags=tags
    )
    sm.create_model(ModelName="ranker", ExecutionRoleArn=role, PrimaryContainer={"Image": "x:1"})
    sm.create_endpoint_config(
        EndpointConfigName="ranker",
        ProductionVariants=[
            {
                "VariantName": "primary",
                "ModelName": "ranker",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.g4dn.xlarge",
            }
        ],
    )
    sm.create_endpoint(EndpointName="ranker", EndpointConfigName="ranker", Tags=tags)
    backend = get_backend("sagemaker")[FULL]["us-east-1"]  # type: ignore[call-overload]
    when = (START - timedelta(hours=2)).replace(tzinfo=None).isoformat()
    for thing in (backend.notebook_instances["explore"], backend.endpoints["ranker"]):
        thing.creation_time = thing.last_modified_time = when


def _warm_up(base: Any, accounts: Sequence[str]) -> None:
    """Touch moto's backends once per account, region and service, so that their lazy
    creation (up to a second each) is not in any measured item."""
    for account in accounts:
        for region in REGIONS:
            member = _member(base, account, region)
            member.client("ec2").describe_instances()
            member.client("ec2").describe_volumes()
            member.client("eks").list_clusters()
            member.client("sagemaker").list_notebook_instances()
            member.client("resourcegroupstaggingapi").get_resources()
            member.client("cloudwatch").list_metrics()


def _stub_studio(session: Any, calls: Calls) -> None:
    """SageMaker Studio (scanned by default) is not implemented by moto: ``ListApps``
    answers as an account without Studio apps does, and is counted as a call."""
    from botocore.awsrequest import AWSResponse

    def list_apps(**_: Any) -> tuple[Any, dict[str, Any]]:
        calls.add("sagemaker.ListApps")
        return AWSResponse("https://sagemaker", 200, {}, None), {"Apps": []}  # type: ignore[arg-type]

    session.events.register("before-call.sagemaker.ListApps", list_apps)


@dataclass
class ItemSample:
    kind: str
    slice: str
    tick: int
    wall: float
    ours: float
    calls: dict[str, int]
    units: dict[str, int]
    aggregation: dict[str, Any] = field(default_factory=dict)


def measure_member_work(ticks: int = 7) -> dict[str, Any]:
    """The consumer's work items in member accounts on moto, per kind (see the module)."""
    from moto import mock_aws

    not_ours = NotOurs()
    with _moto_env(), mock_aws(), not_ours.around_moto():
        bench = _MemberBench.build(not_ours)
        with bench.org_log(), _timed_aggregation(bench.calls, bench.meter, not_ours) as agg:
            for n in range(ticks):
                bench.one_tick(n, ticks, agg)
        sts = bench.cold_entries()
        sends = _send_batches(bench.hub, bench.plain, not_ours)
    summary = _member_summary(bench.samples, bench.fanouts, bench.builds, bench.log_bytes, sts)
    return {**summary, "send_batch": sends}


@dataclass
class _MemberBench:
    """The hub's fan-out and consumer on moto, entering four member accounts of different
    shapes (see the module), with every call, unit and second of ours recorded."""

    not_ours: NotOurs
    hub: Any
    plain: Any
    sqs: Any
    url: str
    calls: Calls
    meter: SizedMeter
    settings: Any
    env: Any
    fanout: Any
    inner: Any
    log: io.StringIO = field(default_factory=io.StringIO)
    entered: set[int] = field(default_factory=set)
    samples: list[ItemSample] = field(default_factory=list)
    fanouts: list[dict[str, Any]] = field(default_factory=list)
    builds: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    log_bytes: list[float] = field(default_factory=list)

    @classmethod
    def build(cls, not_ours: NotOurs) -> _MemberBench:
        import boto3

        from costguard.adapters.assume import MemberClients
        from costguard.handlers import org
        from costguard.settings import Settings
        from costguard.wiring.org import HubSettings, build_fanout
        from costguard_demo.plumbing import create_alert_channels, create_ledger_table

        hub = boto3.Session(region_name="us-east-1")
        plain = boto3.Session(region_name="us-east-1")
        create_ledger_table(plain, "ledger", "us-east-1")
        topic, _ = create_alert_channels(plain, "us-east-1")
        sqs = plain.client("sqs")
        url = sqs.create_queue(QueueName="work.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        _seed_members(plain)
        accounts = (FULL, EMPTY, CPU_ONLY, SMALL)
        _warm_up(plain, accounts)
        calls = Calls()
        calls.attach(hub)
        meter = SizedMeter(plain.client("dynamodb"), not_ours)
        meter.attach(hub)
        settings = Settings(
            table_name="ledger",
            scope=HUB,
            regions=REGIONS,
            topic_arn=topic,
            projects={"llm": {"budget": 100_000}},
        )
        env = HubSettings(accounts=accounts, queue_url=url, per_account_cap=PER_ACCOUNT_CAP)
        # Its warnings go to the handler's log, as the fan-out Lambda's do.
        fanout = build_fanout(
            settings, env, hub, log=lambda m, x: org.logger.warning(m, extra=dict(x))
        )
        inner = MemberClients(hub, env.member_role)
        return cls(not_ours, hub, plain, sqs, url, calls, meter, settings, env, fanout, inner)

    def members(self, s: Any) -> Any:
        """Member clients as the consumer enters them, each new session counted."""
        clients = self.inner(s)
        if id(clients.session) not in self.entered:
            self.entered.add(id(clients.session))
            self.calls.attach(clients.session)
            _stub_studio(clients.session, self.calls)
        return clients

    @contextmanager
    def org_log(self) -> Iterator[None]:
        """The consumer's log into :attr:`log`, to count its bytes per item."""
        from aws_lambda_powertools import Logger

        from costguard.handlers import org

        saved_logger = org.logger
        org.logger = Logger(service="costguard-org-bench", stream=self.log)
        try:
            yield
        finally:
            org.logger = saved_logger

    def one_tick(self, n: int, ticks: int, aggregation: dict[str, Any]) -> None:
        """Scheduled time ``n``: the fan-out, then each batch of the queue consumed."""
        tick = START + n * TICK
        now = tick + timedelta(minutes=1)
        if n == ticks - 1:
            self._gpu_came_and_went(tick)
        c0, u0, lap = self.calls.snapshot(), self.meter.snapshot(), Lap(self.not_ours)
        summary = self.fanout.tick(tick)
        self.fanouts.append(
            {
                "tick": n,
                "sent": summary.sent,
                "wall_on_moto": lap.wall(),
                "ours": lap.ours(),
                "calls": dict(self.calls.snapshot() - c0),
                "units": dict(self.meter.snapshot() - u0),
            }
        )
        for batch in _receive_all(self.sqs, self.url):
            self._consume(batch, n, now, aggregation)

    def _gpu_came_and_went(self, tick: datetime) -> None:
        """A GPU appeared (a probe saw it) and is gone by the scan: the scan of an empty
        account-region and of a CPU-only one, which it turns empty again."""
        from costguard.adapters.directory import DynamoDbDirectory
        from costguard.domain.directory import after_probe
        from costguard.domain.org import Slice

        store = DynamoDbDirectory(self.plain.client("dynamodb"), "ledger", HUB)
        seen = tick - timedelta(minutes=14)
        for s in (Slice(EMPTY, "us-east-1"), Slice(CPU_ONLY, "us-east-1")):
            store.update_slice(s, lambda st, at=seen: after_probe(st, at, True))

    def _consume(
        self, batch: list[dict[str, Any]], n: int, now: datetime, aggregation: dict[str, Any]
    ) -> None:
        """One batch through a freshly built consumer, as one Lambda invocation."""
        from costguard.handlers.org import build_org_work, consume

        c0, lap = self.calls.snapshot(), Lap(self.not_ours)
        work = build_org_work(self.settings, self.hub, members=self.members)  # type: ignore[arg-type]
        self.builds.append((lap.ours(), dict(self.calls.snapshot() - c0)))
        work.run = self._timed(work.run, n, aggregation)  # type: ignore[method-assign]
        self.log.seek(0)
        self.log.truncate()
        records = [_record(m, i) for i, m in enumerate(batch)]
        out = consume({"Records": records}, work, now)
        if out != {"batchItemFailures": []}:
            raise RuntimeError(f"a work item failed on moto: {out}")
        self.log_bytes.append(len(self.log.getvalue().encode()) / len(batch))

    def _timed(self, run: Any, n: int, aggregation: dict[str, Any]) -> Any:
        """``run``, each item recorded as a sample, the aggregation it completed taken out."""

        def timed(w: Work, at: datetime) -> Any:
            aggregation.clear()
            c0, u0, lap = self.calls.snapshot(), self.meter.snapshot(), Lap(self.not_ours)
            out = run(w, at)
            sample = ItemSample(
                w.kind.value,
                w.slice.key,
                n,
                lap.wall(),
                lap.ours(),
                dict(self.calls.snapshot() - c0),
                dict(self.meter.snapshot() - u0),
            )
            if aggregation:
                sample.aggregation = dict(aggregation)
                sample.wall -= aggregation["wall"]
                sample.ours -= aggregation["ours"]
                sample.calls = dict(Counter(sample.calls) - Counter(aggregation["calls"]))
                sample.units = dict(Counter(sample.units) - Counter(aggregation["units"]))
            self.samples.append(sample)
            return out

        return timed

    def cold_entries(self) -> list[tuple[float, float]]:
        """Entering an account with fresh credentials, as a cold consumer does."""
        from costguard.adapters.assume import MemberClients
        from costguard.domain.org import Slice

        sts: list[tuple[float, float]] = []
        for _ in range(5):
            lap = Lap(self.not_ours)
            MemberClients(self.plain, self.env.member_role)(Slice(EMPTY, "us-east-1"))
            sts.append((lap.wall(), lap.ours()))
        return sts


def _send_batches(hub: Any, plain: Any, not_ours: NotOurs, batches: int = 20) -> dict[str, Any]:
    """The fan-out's SendMessageBatch of ten work items, through its real adapter to moto's
    FIFO queue (drained after each, so that moto's queue stays short): our seconds a call."""
    from costguard.adapters.work_queue import SqsWorkQueue
    from costguard.domain.directory import Work, WorkKind
    from costguard.domain.org import Slice

    url = plain.client("sqs").create_queue(
        QueueName="send-probe.fifo", Attributes={"FifoQueue": "true"}
    )["QueueUrl"]
    queue = SqsWorkQueue(hub.client("sqs", region_name="us-east-1"), url, PER_ACCOUNT_CAP)
    ours = []
    for b in range(batches):
        works = [
            Work(START, WorkKind.SCAN, Slice(f"{100_000_000_000 + 10 * b + i:012d}", "us-east-1"))
            for i in range(10)
        ]
        lap = Lap(not_ours)
        queue.send(works)
        ours.append(lap.ours())
        for _ in _receive_all(plain.client("sqs"), url):
            pass
    return {"batches": batches, "seconds_ours_per_call": round(statistics.median(ours), 5)}


def _typical(group: Sequence[ItemSample]) -> dict[str, Any]:
    """The calls of the most common shape, its units, and the median seconds."""
    if not group:
        return {}
    shapes = Counter(tuple(sorted(s.calls.items())) for s in group)
    shape = dict(shapes.most_common(1)[0][0])
    same = [s for s in group if s.calls == shape]
    units: Counter[str] = Counter()
    for s in same:
        units.update(s.units)
    ours = statistics.median(s.ours for s in group)
    return {
        "samples": len(group),
        "seconds_wall_on_moto": round(statistics.median(s.wall for s in group), 4),
        "seconds_ours": round(ours, 4),
        "seconds_aws_estimate": round(aws_seconds(ours, shape), 3),
        "calls": dict(sorted(shape.items())),
        "calls_by_side": split_calls(shape),
        **{
            k: round(v, 2)
            for k, v in units_of({k: v / len(same) for k, v in units.items()}).items()
        },
        "units_by_kind": {k: round(v / len(same), 2) for k, v in sorted(units.items())},
    }


def _member_summary(
    samples: list[ItemSample],
    fanouts: list[dict[str, Any]],
    builds: list[tuple[float, dict[str, int]]],
    log_bytes: list[float],
    sts: list[tuple[float, float]],
) -> dict[str, Any]:
    last = max(s.tick for s in samples)
    steady = range(3, last)  # after regions (0), probes (1) and each slice's first scan (2)

    def pick(kind: str, key: str, ticks: range | None = None) -> list[ItemSample]:
        return [
            s
            for s in samples
            if s.kind == kind and s.slice == key and (ticks is None or s.tick in ticks)
        ]

    groups = {
        "scan_representative": pick("scan", f"{FULL}/us-east-1", steady),
        "scan_representative_first": pick("scan", f"{FULL}/us-east-1", range(2, 3)),
        "scan_small": pick("scan", f"{SMALL}/us-west-2", steady),
        "scan_empty": pick("scan", f"{EMPTY}/us-east-1"),
        "scan_cpu_only": pick("scan", f"{CPU_ONLY}/us-east-1"),
        "probe_empty": [
            s for s in samples if s.kind == "probe" and s.slice.startswith(EMPTY + "/")
        ],
        "probe_cpu_only": pick("probe", f"{CPU_ONLY}/us-east-1"),
        "probe_hit": pick("probe", f"{FULL}/us-east-1") + pick("probe", f"{SMALL}/us-west-2"),
        "regions": [s for s in samples if s.kind == "regions"],
    }
    aggregated = [s.aggregation for s in samples if s.aggregation and s.tick in steady]
    aggregation: dict[str, Any] = {}
    if aggregated:
        a = aggregated[-1]
        slices = max(1, a["slices"])
        ours = statistics.median(x["ours"] for x in aggregated)
        aggregation = {
            "samples": len(aggregated),
            "slices_rolled_up": a["slices"],
            "seconds_wall_on_moto": round(statistics.median(x["wall"] for x in aggregated), 4),
            "seconds_ours": round(ours, 4),
            "calls": dict(sorted(a["calls"].items())),
            **units_of(a["units"]),
            "read_units_per_slice": round(units_of(a["units"])["read_units"] / slices, 2),
            "calls_per_slice": round(sum(a["calls"].values()) / slices, 2),
            "seconds_ours_per_slice": round(ours / slices, 4),
        }
    warm = builds[1:]
    fan = fanouts[-2]
    return {
        "items": {k: _typical(v) for k, v in groups.items()},
        "aggregation": aggregation,
        "consumer_invocation_build": {
            "seconds_ours": round(statistics.median(b[0] for b in builds), 4),
            "calls_first": builds[0][1],
            "calls_warm_max": max((sum(b[1].values()) for b in warm), default=0),
        },
        "log_bytes_per_item": round(statistics.median(log_bytes)) if log_bytes else 0,
        "assume_role": {
            "seconds_wall_on_moto": round(statistics.median(x[0] for x in sts), 4),
            "seconds_ours": round(statistics.median(x[1] for x in sts), 4),
        },
        "fanout_of_four_accounts": {
            "sent": fan["sent"],
            "seconds_ours": round(fan["ours"], 4),
            "calls": fan["calls"],
            **units_of(fan["units"]),
        },
    }


# -- 2. the hub at 800 account-regions on moto (members faked) -------------------------------


class StandInSqs:
    """SQS FIFO at the boto3 client's surface, for the large runs (moto's FIFO queue takes
    time quadratic in its depth: 800 messages cost it 40 s). It checks what SQS checks
    (at most ten entries, unique ids, a group and a deduplication id each), keeps the
    messages in order, drops a repeated deduplication id, and counts its calls."""

    def __init__(self, calls: Calls) -> None:
        self.messages: list[dict[str, Any]] = []
        self._seen: set[str] = set()
        self._calls = calls

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self._calls.add("sqs.SendMessageBatch")
        ids = [e["Id"] for e in Entries]
        if not 1 <= len(Entries) <= 10 or len(set(ids)) != len(ids):
            raise ValueError(f"SendMessageBatch: {len(Entries)} entries, ids {ids}")
        ok = []
        for e in Entries:
            if not e.get("MessageGroupId") or not e.get("MessageDeduplicationId"):
                raise ValueError("a FIFO message needs a group and a deduplication id")
            if e["MessageDeduplicationId"] not in self._seen:
                self._seen.add(e["MessageDeduplicationId"])
                self.messages.append(e)
            digest = hashlib.md5(e["MessageBody"].encode(), usedforsecurity=False).hexdigest()
            ok.append({"Id": e["Id"], "MessageId": e["Id"], "MD5OfMessageBody": digest})
        return {"Successful": ok, "Failed": []}

    def drain(self) -> list[dict[str, Any]]:
        out, self.messages = self.messages, []
        return out


def measure_hub(
    accounts: int = ACCOUNTS,
    fraction: float = HOLDING,
    ticks: int = 6,
    all_active: bool = True,
) -> dict[str, Any]:
    """The fan-out's and the consumers' hub-side work (DynamoDB, SQS) for ``accounts`` x 4
    regions: tick 0 reads every account's regions, tick 1 probes every account-region,
    tick 2 scans the active ones for the first time, then the steady state."""
    from moto import mock_aws

    per_tick: list[dict[str, Any]] = []
    not_ours = NotOurs()
    with _moto_env(), mock_aws(), not_ours.around_moto():
        bench = _HubBench.build(accounts, fraction, not_ours)
        with _timed_aggregation(bench.calls, bench.meter, not_ours) as aggregation:
            for n in range(ticks):
                per_tick.append(bench.one_tick(n, aggregation))
        directory_bytes = _directory_bytes(bench.raw)
        stress = bench.all_active(ticks) if all_active else {}
    return {
        "accounts": accounts,
        "account_regions": accounts * len(REGIONS),
        "holding_fraction": fraction,
        "directory_bytes": directory_bytes,
        "directory_bytes_per_account_region": round(directory_bytes / (accounts * len(REGIONS)), 1),
        "ticks": per_tick,
        "all_active": stress,
    }


@dataclass
class _HubBench:
    """The hub on moto, instrumented: its fan-out and its consumer's work over a simulated
    Organization (the members answer from :class:`OrgWorld`, not from moto)."""

    not_ours: NotOurs
    calls: Calls
    meter: SizedMeter
    raw: Any
    sqs: StandInSqs
    world: Any
    store: Any
    fanout: Any
    work: Any

    @classmethod
    def build(cls, accounts: int, fraction: float, not_ours: NotOurs) -> _HubBench:
        import boto3

        from costguard.adapters.directory import DynamoDbDirectory
        from costguard.settings import Settings
        from costguard.wiring.org import HubSettings, build_fanout
        from costguard_demo.plumbing import create_ledger_table
        from tests.support.org_fakes import OrgWorld

        hub = boto3.Session(region_name="us-east-1")
        plain = boto3.Session(region_name="us-east-1")
        create_ledger_table(plain, "ledger", "us-east-1")
        world = OrgWorld.build(accounts, REGIONS, fraction)
        calls = Calls()
        calls.attach(hub)
        raw = plain.client("dynamodb")
        meter = SizedMeter(raw, not_ours)
        meter.attach(hub)
        sqs = StandInSqs(calls)
        settings = Settings(table_name="ledger", scope=HUB, regions=REGIONS)
        env = HubSettings(
            accounts=tuple(world.accounts),
            queue_url=f"https://sqs.us-east-1.amazonaws.com/{HUB}/work.fifo",
            per_account_cap=PER_ACCOUNT_CAP,
        )
        fanout = build_fanout(settings, env, hub, sqs=sqs)
        ddb = hub.client("dynamodb", region_name="us-east-1")
        store = DynamoDbDirectory(ddb, "ledger", HUB)
        work = _hub_work(ddb, store, world)
        return cls(not_ours, calls, meter, raw, sqs, world, store, fanout, work)

    def one_tick(self, n: int, aggregation: dict[str, Any]) -> dict[str, Any]:
        """Tick ``n``: the fan-out, then every item it sent, consumed one by one."""
        tick = START + n * TICK
        aggregation.clear()
        fan = self._fanout(tick)
        aggregation.clear()
        kinds, item_calls, item_units, item_ours = self._consume(tick + timedelta(minutes=1))
        agg = dict(aggregation)
        if agg:
            # The tick's, not the scan's that happened to complete the plan.
            item_calls["scan"].subtract(agg["calls"])
            item_units["scan"].subtract(agg["units"])
            item_ours["scan"] -= agg["ours"]
        plan = self.raw.get_item(
            TableName="ledger",
            Key={"pk": {"S": f"ORG#{HUB}#TICKS"}, "sk": {"S": _stamp(tick)}},
        ).get("Item")
        return {
            "tick": n,
            "items": dict(kinds),
            "fanout": fan,
            "consumer_hub_side_per_item": {
                k: {
                    "calls": {c: round(v / kinds[k], 2) for c, v in (+item_calls[k]).items()},
                    **{u: round(v / kinds[k], 2) for u, v in units_of(+item_units[k]).items()},
                    "seconds_ours": round(item_ours[k] / kinds[k], 5),
                }
                for k in kinds
            },
            "aggregation": _aggregation_figures(agg),
            "plan": _plan_figures(plan),
        }

    def _fanout(self, tick: datetime) -> dict[str, Any]:
        calls, meter = self.calls, self.meter
        c0, u0, lap = calls.snapshot(), meter.snapshot(), Lap(self.not_ours)
        summary = self.fanout.tick(tick)
        fan_calls = dict(calls.snapshot() - c0)
        return {
            "sent": summary.sent,
            "seconds_wall_on_moto": round(lap.wall(), 3),
            "seconds_ours": round(lap.ours(), 3),
            # SQS is the stand-in here: see fanout_seconds for the estimate.
            "seconds_aws_estimate_without_sqs_client": round(aws_seconds(lap.ours(), fan_calls), 3),
            "calls": fan_calls,
            **units_of(meter.snapshot() - u0),
            "units_by_kind": dict(meter.snapshot() - u0),
            "log_bytes": len(json.dumps(summary.as_dict()).encode()),
        }

    def _consume(
        self, now: datetime
    ) -> tuple[Counter[str], dict[str, Counter[str]], dict[str, Counter[str]], Counter[str]]:
        """Each queued item through the consumer's work: counts, calls, units and our time."""
        from costguard.adapters.work_queue import WorkItem

        kinds: Counter[str] = Counter()
        item_calls: dict[str, Counter[str]] = defaultdict(Counter)
        item_units: dict[str, Counter[str]] = defaultdict(Counter)
        item_ours: Counter[str] = Counter()
        for m in self.sqs.drain():
            w = WorkItem.model_validate_json(m["MessageBody"]).work()
            c0, u0, lap = self.calls.snapshot(), self.meter.snapshot(), Lap(self.not_ours)
            self.work.run(w, now)
            kinds[w.kind.value] += 1
            item_ours[w.kind.value] += lap.ours()
            item_calls[w.kind.value].update(self.calls.snapshot() - c0)
            item_units[w.kind.value].update(self.meter.snapshot() - u0)
        return kinds, item_calls, item_units, item_ours

    def all_active(self, ticks: int) -> dict[str, Any]:
        return _all_active(
            self.fanout,
            self.store,
            self.world,
            self.raw,
            self.calls,
            self.meter,
            self.not_ours,
            ticks,
        )


def _hub_work(ddb: Any, store: Any, world: Any) -> Any:
    """The consumer's work as the hub builds it, its members answered by ``world``."""
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.adapters.slices import DynamoDbSliceBook
    from costguard.services.fanout import OrgWork, ProbeWork, RegionsWork
    from costguard.services.org import Aggregation, OrgSettings, SliceWork
    from tests.support.org_fakes import FakeAccessError

    book = DynamoDbSliceBook(ddb, "ledger", HUB)
    errors = (FakeAccessError,)
    return OrgWork(
        SliceWork(
            book,
            world.scan_for,
            # One reader thread, so that our time is measurable; the estimate spreads
            # the calls' latency over the deployed 16 (AGGREGATION_THREADS).
            Aggregation(
                book, DynamoDbLedger(ddb, "ledger"), OrgSettings(scope=HUB, read_workers=1)
            ),
            errors,
        ),
        store,
        ProbeWork(store, world.prober_for, errors),
        RegionsWork(store, world.reader_for, errors),
    )


def _directory_bytes(raw: Any) -> int:
    """The size of the hub's directory: every account-region's row."""
    return sum(
        _size(item)
        for page in raw.get_paginator("query").paginate(
            TableName="ledger",
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"ORG#{HUB}#DIR"}},
        )
        for item in page["Items"]
    )


def _aggregation_figures(agg: Mapping[str, Any]) -> dict[str, Any]:
    if not agg:
        return {}
    calls = agg["calls"]
    return {
        "slices_rolled_up": agg["slices"],
        "seconds_wall_on_moto": round(agg["wall"], 3),
        "seconds_ours": round(agg["ours"], 3),
        "seconds_aws_estimate": round(
            aws_seconds(agg["ours"], calls, parallel_hub=AGGREGATION_THREADS), 3
        ),
        "calls": calls,
        **units_of(agg["units"]),
    }


def _plan_figures(plan: Mapping[str, Any] | None) -> dict[str, Any]:
    """The plan item's size, and its bytes per slice key (one set) and without them."""
    if not plan:
        return {}
    expected = plan["expected"]["SS"]
    done = plan.get("done", {}).get("SS", [])
    keys = sum(len(k.encode()) for k in expected)
    total = _size(plan)
    return {
        "slices": len(expected),
        "done": len(done),
        "bytes": total,
        "bytes_per_slice_key": round(keys / len(expected), 2),
        "bytes_without_slices": total - keys - sum(len(k.encode()) for k in done),
    }


def _stamp(moment: datetime) -> str:
    from costguard.adapters.dynamodb import stamp

    return stamp(moment)


def _all_active(
    fanout: Any,
    store: Any,
    world: Any,
    raw: Any,
    calls: Calls,
    meter: SizedMeter,
    not_ours: NotOurs,
    ticks: int,
) -> dict[str, Any]:
    """Every account-region active: the fan-out with a plan and a message per slice (its
    time per slice bounds what one fan-out can enqueue within its timeout), and the plan
    item's size (DynamoDB's 400 KB item limit): then a plan too large for one item."""
    from botocore.exceptions import ClientError

    from costguard.adapters.slices import DynamoDbSliceBook
    from costguard.domain.directory import after_probe
    from costguard.domain.org import Slice

    tick = START + ticks * TICK
    seen = tick - timedelta(minutes=1)
    for account in world.accounts:
        for region in world.regions:
            store.update_slice(Slice(account, region), lambda st: after_probe(st, seen, True))
    c0, u0, lap = calls.snapshot(), meter.snapshot(), Lap(not_ours)
    summary = fanout.tick(tick)
    ours = lap.ours()
    fan_calls = dict(calls.snapshot() - c0)
    plan = raw.get_item(
        TableName="ledger", Key={"pk": {"S": f"ORG#{HUB}#TICKS"}, "sk": {"S": _stamp(tick)}}
    )["Item"]
    figures = _plan_figures(plan)
    # The largest plan moto takes (its limit: 405,000 bytes; AWS documents 400 KB), found
    # by bisection over plans of slices with the longest region name.
    book = DynamoDbSliceBook(raw, "ledger", "limit-probe")
    low, high = 1, 20_000
    while high - low > 1:
        n = (low + high) // 2
        slices = [Slice(f"{100_000_000_000 + i:012d}", "ap-southeast-2") for i in range(n)]
        try:
            book.plan(tick + n * timedelta(seconds=1), slices, tick + timedelta(minutes=10))
            low = n
        except ClientError:
            high = n
    outcome = {"largest_plan_stored_slices": low, "key_bytes": len(slices[0].key)}
    return {
        "slices": len(summary.work.scans),
        "sent": summary.sent,
        "seconds_wall_on_moto": round(lap.wall(), 3),
        "seconds_ours": round(ours, 3),
        "seconds_aws_estimate_without_sqs_client": round(aws_seconds(ours, fan_calls), 3),
        "calls": fan_calls,
        **units_of(meter.snapshot() - u0),
        "plan": figures,
        "plan_put_on_moto": outcome,
    }


# -- 3. a day, simulated in memory ----------------------------------------------------------


@dataclass(frozen=True)
class DayTick:
    index: int
    scans: int
    probes: int
    probe_hits: int
    regions: int
    listing: bool
    works: tuple[Any, ...]

    @property
    def items(self) -> int:
        return self.scans + self.probes + self.regions


def simulate_day(
    accounts: int, fraction: float, *, hours: float = 24, regions: Sequence[str] = REGIONS
) -> tuple[list[DayTick], frozenset[Any]]:
    """The first day of an Organization (from its first tick), ticks every 15 minutes at
    the default probe interval: each tick's items, from the real services over
    ``tests/support/org_fakes.OrgWorld``. Returns the ticks and the active slices."""
    from costguard.domain.directory import WorkKind
    from tests.support.org_fakes import OrgSimulation, OrgWorld

    world = OrgWorld.build(accounts, regions, fraction)
    sim = OrgSimulation(world, probe_interval=PROBE_INTERVAL)
    out = []
    for n in range(int(timedelta(hours=hours) / TICK)):
        stats = sim.tick(START + n * TICK)
        probes = [w for w in stats.items if w.kind is WorkKind.PROBE]
        out.append(
            DayTick(
                n,
                stats.count(WorkKind.SCAN),
                len(probes),
                sum(1 for w in probes if w.slice in world.holding),
                stats.count(WorkKind.REGIONS),
                "organizations.ListAccounts" in stats.calls,
                stats.items,
            )
        )
    return out, frozenset(world.holding)


#: The first day's bursts: every account's regions (0), every account-region probed (1),
#: the active ones scanned for the first time (2).
BURSTS = 3


@dataclass(frozen=True)
class Costs:
    """What each piece of a tick costs, from the two measurements (see :func:`costs_from`)."""

    #: Seconds per item (AWS estimate, credentials cold), by scan / probe_empty / probe_hit
    #: / regions.
    seconds: Mapping[str, float]
    #: AWS calls per item by side (member, sts, hub), same keys.
    calls: Mapping[str, Mapping[str, int]]
    per_invocation: float
    cold_start: float
    #: The fan-out: seconds and DynamoDB calls in the steady state, seconds of the bursts.
    fanout_seconds: float
    fanout_dynamodb_calls: int
    fanout_burst_seconds: Mapping[int, float]
    #: The aggregation: calls and our seconds per rolled-up slice (real ledgers).
    aggregation_calls_per_slice: float
    aggregation_ours_per_slice: float
    hub_latency: float = LATENCY["hub"]

    def aggregation_seconds(self, slices: int) -> float:
        calls = self.aggregation_calls_per_slice * slices
        return (
            slices * self.aggregation_ours_per_slice
            + math.ceil(calls / AGGREGATION_THREADS) * self.hub_latency
        )


ITEM_KINDS = {
    "scan": "scan_representative",
    "probe_empty": "probe_empty",
    "probe_hit": "probe_hit",
    "regions": "regions",
}


def costs_from(
    member: Mapping[str, Any],
    hub: Mapping[str, Any],
    cold_start: float,
    latency: Mapping[str, float] = LATENCY,
) -> Costs:
    """Per item: our measured time plus ``latency`` per call, and one cold AssumeRole (its
    latency and our time creating the session) unless the item measured one already."""
    items = member["items"]
    sts = latency["sts"] + member["assume_role"]["seconds_ours"]

    def seconds(kind: str) -> float:
        item = items[ITEM_KINDS[kind]]
        cold = 0 if item["calls_by_side"]["sts"] else sts
        return aws_seconds(item["seconds_ours"], item["calls"], latency=latency) + cold

    steady = hub["ticks"][-1]
    agg = member["aggregation"]
    return Costs(
        seconds={kind: seconds(kind) for kind in ITEM_KINDS},
        calls={
            "scan": items["scan_representative"]["calls_by_side"],
            "probe_empty": items["probe_empty"]["calls_by_side"],
            "probe_hit": items["probe_hit"]["calls_by_side"],
            "regions": items["regions"]["calls_by_side"],
        },
        per_invocation=member["consumer_invocation_build"]["seconds_ours"] + LATENCY["hub"],
        cold_start=cold_start,
        fanout_seconds=fanout_seconds(steady["fanout"], member, latency),
        fanout_dynamodb_calls=sum(
            v for k, v in steady["fanout"]["calls"].items() if k.startswith("dynamodb.")
        ),
        fanout_burst_seconds={
            t["tick"]: fanout_seconds(t["fanout"], member, latency) for t in hub["ticks"][:BURSTS]
        },
        aggregation_calls_per_slice=agg["calls_per_slice"],
        aggregation_ours_per_slice=agg["seconds_ours_per_slice"],
        hub_latency=latency["hub"],
    )


def fanout_seconds(
    fan: Mapping[str, Any], member: Mapping[str, Any], latency: Mapping[str, float] = LATENCY
) -> float:
    """A fan-out measured with the SQS stand-in: its seconds, plus our measured seconds of
    each real SendMessageBatch call (on moto, part 1) and every call's latency."""
    sends = fan["calls"].get("sqs.SendMessageBatch", 0)
    client = member["send_batch"]["seconds_ours_per_call"]
    return aws_seconds(fan["seconds_ours"] + sends * client, fan["calls"], latency=latency)


def messages_of(
    works: Sequence[Any], costs: Costs, holding: frozenset[Any], cap: int
) -> list[Message]:
    """The tick's messages in the order the fan-out sends them, grouped as SQS groups them."""
    from costguard.adapters.work_queue import message_group

    out = []
    for w in works:
        kind = w.kind.value
        if kind == "probe":
            kind = "probe_hit" if w.slice in holding else "probe_empty"
        out.append(Message(message_group(w.slice, cap), costs.seconds[kind]))
    return out


def tick_wall(
    t: DayTick, costs: Costs, holding: frozenset[Any], concurrency: int
) -> dict[str, Any]:
    """One tick's wall time: the fan-out, the consumers' schedule, then the aggregation
    (in the consumer of the slice that completes the plan)."""
    run = schedule(
        messages_of(t.works, costs, holding, PER_ACCOUNT_CAP),
        concurrency=concurrency,
        batch_size=10,
        per_invocation=costs.per_invocation,
        cold_start=costs.cold_start,
    )
    fan = costs.fanout_burst_seconds.get(t.index, costs.fanout_seconds)
    agg = costs.aggregation_seconds(t.scans) if t.scans else 0.0
    return {
        "wall_seconds": round(fan + run.makespan + agg, 1),
        "fanout_seconds": round(fan, 2),
        "consumers_seconds": round(run.makespan, 1),
        "aggregation_seconds": round(agg, 2),
        "invocations": run.invocations,
        "containers": run.containers,
        "mean_batch": round(statistics.fmean(run.batch_sizes), 2) if run.batch_sizes else 0,
        "billed_consumer_seconds": round(run.busy_seconds, 1),
    }


def tick_table(day: Sequence[DayTick], costs: Costs, holding: frozenset[Any]) -> dict[str, Any]:
    """Per tick: items by kind, invocations (scheduled at the default concurrency), AWS
    calls (hub-side and member-side) from the simulated items and the measured calls per
    item, and the wall time; the first day's bursts apart from the steady state."""
    c = costs.calls
    accounts = 0
    rows = []
    for t in day:
        wall = tick_wall(t, costs, holding, MAX_CONCURRENCY)
        invocations = wall["invocations"]
        hits = t.probe_hits
        dynamodb = (
            t.scans * c["scan"]["hub"]
            + (t.probes - hits) * c["probe_empty"]["hub"]
            + hits * c["probe_hit"]["hub"]
            + t.regions * c["regions"]["hub"]
            + costs.fanout_dynamodb_calls
            + costs.aggregation_calls_per_slice * t.scans
            + (1 if t.listing else 0)  # the new account list
        )
        sqs = {
            "SendMessageBatch": math.ceil(t.items / 10),
            "ReceiveMessage": invocations,
            "DeleteMessageBatch": invocations,
        }
        if t.index == 0:
            accounts = t.regions  # every account's regions are read first
        organizations = (
            {"ListAccounts": math.ceil(accounts / 20), "ListTagsForResource": accounts}
            if t.listing
            else {}
        )
        member_calls = {
            "sts_assume_role_upper_bound": t.items,
            "scan": t.scans * c["scan"]["member"],
            "probe": (t.probes - hits) * c["probe_empty"]["member"]
            + hits * c["probe_hit"]["member"],
            "regions": t.regions * c["regions"]["member"],
        }
        rows.append(
            {
                "tick": t.index,
                "items": {"scan": t.scans, "probe": t.probes, "regions": t.regions},
                "invocations": {
                    "consumer": invocations,
                    "consumer_if_batches_were_full": math.ceil(t.items / 10),
                    "fanout": 1,
                },
                "calls": {
                    "hub": {
                        "dynamodb": round(dynamodb),
                        "sqs": sqs,
                        "organizations": organizations,
                    },
                    "member": member_calls,
                },
                "calls_total": round(
                    dynamodb
                    + sum(sqs.values())
                    + sum(organizations.values())
                    + sum(member_calls.values())
                ),
                "wall": wall,
            }
        )
    return {"per_tick": rows, "bursts": rows[:BURSTS], "steady": _steady(rows[BURSTS:])}


def _steady(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    def stats(values: Sequence[float]) -> dict[str, float]:
        return {"mean": round(statistics.fmean(values), 2), "min": min(values), "max": max(values)}

    return {
        "ticks": len(rows),
        "items": {k: stats([r["items"][k] for r in rows]) for k in ("scan", "probe", "regions")},
        "items_total": stats([sum(r["items"].values()) for r in rows]),
        "consumer_invocations": stats([r["invocations"]["consumer"] for r in rows]),
        "consumer_containers": stats([r["wall"]["containers"] for r in rows]),
        "calls_hub_dynamodb": stats([r["calls"]["hub"]["dynamodb"] for r in rows]),
        "calls_hub_sqs": stats([sum(r["calls"]["hub"]["sqs"].values()) for r in rows]),
        "calls_member": {
            k: stats([r["calls"]["member"][k] for r in rows]) for k in rows[0]["calls"]["member"]
        },
        "calls_total": stats([r["calls_total"] for r in rows]),
        "wall_seconds": stats([r["wall"]["wall_seconds"] for r in rows]),
        "billed_consumer_seconds": stats([r["wall"]["billed_consumer_seconds"] for r in rows]),
    }


# -- 4. the sweep: work follows the non-empty account-regions ---------------------------------


SWEEP_FRACTIONS = (0.05, 0.10, 0.25, 0.50)
SWEEP_ACCOUNTS = (50, 200, 500)


def sweep(costs: Costs) -> dict[str, Any]:
    """Steady-state items, invocations and calls per tick for several Organizations, and a
    least-squares fit of each on the active and the empty account-regions."""
    points = []
    cases = [(ACCOUNTS, f) for f in SWEEP_FRACTIONS] + [
        (a, HOLDING) for a in SWEEP_ACCOUNTS if a != ACCOUNTS
    ]
    for accounts, fraction in cases:
        day, holding = simulate_day(accounts, fraction)
        table = tick_table(day, costs, holding)["steady"]
        slices = accounts * len(REGIONS)
        points.append(
            {
                "accounts": accounts,
                "account_regions": slices,
                "holding_fraction": fraction,
                "active": len(holding),
                "empty": slices - len(holding),
                "items_per_tick": table["items_total"]["mean"],
                "scans_per_tick": table["items"]["scan"]["mean"],
                "probes_per_tick": table["items"]["probe"]["mean"],
                "regions_per_tick": table["items"]["regions"]["mean"],
                "consumer_invocations_per_tick": table["consumer_invocations"]["mean"],
                "calls_per_tick": table["calls_total"]["mean"],
                "wall_seconds_per_tick": table["wall_seconds"]["mean"],
                "items_if_every_account_region_were_scanned": slices,
            }
        )
    # Every point has 4 regions an account, so the accounts' daily regions items are
    # folded into the two coefficients (1/96 a tick per account, 1/384 per account-region).
    rows = [(p["active"], p["empty"]) for p in points]
    fit = {
        name: least_squares(rows, [p[key] for p in points])
        for name, key in (
            ("items_per_tick", "items_per_tick"),
            ("calls_per_tick", "calls_per_tick"),
            ("invocations_per_tick", "consumer_invocations_per_tick"),
        )
    }
    ticks_a_day = timedelta(days=1) / TICK
    per_region = 1 / (ticks_a_day * len(REGIONS))
    return {
        "points": points,
        "fit": {
            k: {"per_active": round(v[0], 4), "per_empty": round(v[1], 4)} for k, v in fit.items()
        },
        "expected_items_per_tick": {
            "per_active": round(1 + per_region, 4),
            "per_empty": round(TICK / PROBE_INTERVAL + per_region, 4),
        },
    }


def least_squares(rows: Sequence[Sequence[float]], y: Sequence[float]) -> list[float]:
    """The coefficients b minimising |X b - y| (normal equations, Gaussian elimination)."""
    k = len(rows[0])
    a = [[float(sum(r[i] * r[j] for r in rows)) for j in range(k)] for i in range(k)]
    b = [float(sum(r[i] * v for r, v in zip(rows, y, strict=True))) for i in range(k)]
    for col in range(k):
        pivot = max(range(col, k), key=lambda r: abs(a[r][col]))
        a[col], a[pivot] = a[pivot], a[col]
        b[col], b[pivot] = b[pivot], b[col]
        if abs(a[col][col]) < 1e-12:
            raise ValueError("the points do not determine the fit (collinear columns)")
        for r in range(k):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * p for x, p in zip(a[r], a[col], strict=True)]
                b[r] -= f * b[col]
    return [b[i] / a[i][i] for i in range(k)]


# -- 5. the hub's wall time per tick -----------------------------------------------------------


def wall_time(day: Sequence[DayTick], holding: frozenset[Any], costs: Costs) -> dict[str, Any]:
    """The bursts and the busiest steady tick at three concurrency caps."""
    busiest = max(day[BURSTS:], key=lambda t: t.items)
    cases = {
        "tick_0_regions": day[0],
        "tick_1_probes": day[1],
        "tick_2_first_scans": day[2],
        "steady_busiest": busiest,
    }
    return {
        "item_seconds_aws_estimate": {k: round(v, 3) for k, v in costs.seconds.items()},
        "per_invocation_seconds": round(costs.per_invocation, 4),
        "cold_start_seconds": round(costs.cold_start, 3),
        "by_tick": {
            name: {
                "tick": t.index,
                "items": t.items,
                "by_max_concurrency": {
                    str(n): tick_wall(t, costs, holding, n) for n in (5, MAX_CONCURRENCY, 50)
                },
            }
            for name, t in cases.items()
        },
    }


# -- 6. the bill ------------------------------------------------------------------------------


def load_from(
    member: Mapping[str, Any],
    hub: Mapping[str, Any],
    costs: Costs,
    steady: Mapping[str, Any],
    **kw: Any,
) -> hub_bill.HubLoad:
    """The bill's inputs, from the measurements (see :class:`hub_bill.HubLoad`)."""
    items = member["items"]
    last = hub["ticks"][-1]
    scan_units = items["scan_representative"]["units_by_kind"]
    hub_item = last["consumer_hub_side_per_item"]
    plan = hub["all_active"]["plan"] if hub["all_active"] else last["plan"]
    invocations = steady["consumer_invocations"]["mean"]
    # Cold containers (every tick, an upper bound): each pays the cold start once.
    cold_share = steady["consumer_containers"]["mean"] / max(1.0, invocations)
    active = round(ACCOUNTS * len(REGIONS) * HOLDING)
    return hub_bill.HubLoad(
        **{
            "seconds_per_scan": costs.seconds["scan"],
            # In the steady state a probe is of an empty account-region (an active one is
            # scanned, not probed).
            "seconds_per_probe": costs.seconds["probe_empty"],
            "seconds_per_regions": costs.seconds["regions"],
            "seconds_per_invocation": costs.per_invocation + costs.cold_start * cold_share,
            "fanout_seconds": costs.fanout_seconds,
            "items_per_invocation": steady["items_total"]["mean"] / max(1.0, invocations),
            "log_bytes_per_item": member["log_bytes_per_item"],
            "log_bytes_per_invocation": PLATFORM_LOG_BYTES,
            "log_bytes_per_tick": last["fanout"]["log_bytes"] + PLATFORM_LOG_BYTES,
            # A scan's ledger and directory units with a real scan (part 1); the plan's
            # put and marks follow from the plan's measured size.
            "write_units_per_scan": scan_units.get("write:ledger", 0)
            + scan_units.get("write:directory", 0),
            "read_units_per_scan": scan_units.get("read:ledger", 0)
            + scan_units.get("read:directory", 0)
            + scan_units.get("read:plan", 0),
            "write_units_per_probe": hub_item["probe"]["write_units"],
            "read_units_per_probe": hub_item["probe"]["read_units"],
            "write_units_per_regions": items["regions"]["write_units"],
            "read_units_per_regions": items["regions"]["read_units"],
            "directory_bytes_per_account_region": hub["directory_bytes_per_account_region"],
            "read_units_per_rolled_up_slice": member["aggregation"]["read_units_per_slice"],
            "aggregation_seconds_per_rolled_up_slice": costs.aggregation_seconds(active) / active,
            "plan_base_bytes": plan["bytes_without_slices"],
            "plan_bytes_per_slice": plan["bytes_per_slice_key"],
        }
        | kw
    )


def bills(
    load: hub_bill.HubLoad, alarms: int, latency_variants: Mapping[str, hub_bill.HubLoad]
) -> dict[str, Any]:
    """The month at 200 accounts, at Instance Scheduler's scale, and what moves it."""
    from dataclasses import replace

    at_200 = hub_bill.stack_month(load, alarms=alarms)
    scheduler_scale = replace(load, accounts=math.ceil(INSTANCE_SCHEDULER_ACCOUNT_REGIONS / 4))
    at_150 = hub_bill.stack_month(scheduler_scale, alarms=alarms)
    variants: dict[str, Any] = {}
    changes: dict[str, hub_bill.HubLoad] = {
        "holding_5_percent": replace(load, active_fraction=0.05),
        "holding_25_percent": replace(load, active_fraction=0.25),
        "holding_50_percent": replace(load, active_fraction=0.50),
        "holding_100_percent": replace(load, active_fraction=1.0),
        "accounts_500": replace(load, accounts=500),
        "scan_every_5_minutes": replace(load, scan_minutes=5),
        "probe_every_hour": replace(load, probe_hours=1),
        **latency_variants,
    }
    for name, changed in changes.items():
        month = hub_bill.stack_month(changed, alarms=alarms)
        lines = month["usd_per_month"]
        variants[name] = {
            "usd_per_month_total": month["usd_per_month_total"],
            "consumer_lambda": lines["consumer_lambda"],
            "dynamodb_writes": lines["dynamodb_writes"],
        }

    def total(changed: hub_bill.HubLoad) -> float:
        return float(hub_bill.stack_month(changed, alarms=alarms)["usd_per_month_total"])

    # Where the month crosses the target: the active account-regions at 200 accounts, and
    # the accounts at 10 % active (each found by bisection; the bill grows with both).
    low, high = 0, load.accounts * load.regions_per_account
    slices = high
    while high - low > 1:
        mid = (low + high) // 2
        fraction = mid / slices
        low, high = (
            (mid, high) if total(replace(load, active_fraction=fraction)) < 30 else (low, mid)
        )
    active_at_30 = high
    low, high = load.accounts, 100 * load.accounts
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if total(replace(load, accounts=mid)) < 30 else (low, mid)
    return {
        "default_200_accounts": at_200,
        "target_usd_per_month": 30,
        "crosses_30_usd_at": {
            "active_account_regions_of_800": active_at_30,
            "accounts_at_10_percent_active": high,
        },
        "under_target": at_200["usd_per_month_total"] < 30,
        "at_instance_scheduler_scale": {
            "account_regions": scheduler_scale.accounts * scheduler_scale.regions_per_account,
            "usd_per_month_total": at_150["usd_per_month_total"],
            "instance_scheduler_reported_usd": INSTANCE_SCHEDULER_USD,
        },
        "what_moves_it": variants,
    }


def org_template() -> dict[str, Any]:
    """The Organization-mode template, synthesized here (bundling skipped; no account)."""
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    root = Path(__file__).resolve().parent.parent
    if str(root / "infra") not in sys.path:  # `make bench` runs without PYTHONPATH
        sys.path.insert(0, str(root / "infra"))
    from costguard_infra.app_builder import build_app

    context = json.loads((root / "cdk.json").read_text())["context"]
    with tempfile.TemporaryDirectory(prefix="costguard-org-bench-") as out:
        app, _stack = build_app(
            {
                **context,
                "orgAccounts": "discover",
                "orgId": "o-abc1234567",
                "aws:cdk:bundling-stacks": [],
            },
            outdir=out,
        )
        app.synth()
        body: dict[str, Any] = json.loads((Path(out) / "CostGuard.template.json").read_text())
    return body


def template_resources() -> dict[str, int]:
    """Counted in the Organization-mode template (:func:`org_template`)."""
    body = org_template()
    kinds = Counter(r["Type"] for r in body["Resources"].values())
    return {
        "alarms": kinds["AWS::CloudWatch::Alarm"],
        "lambda_functions": kinds["AWS::Lambda::Function"],
        "kms_keys": kinds["AWS::KMS::Key"],
        "secrets": kinds["AWS::SecretsManager::Secret"],
        "dashboards": kinds["AWS::CloudWatch::Dashboard"],
        "schedules": kinds["AWS::Scheduler::Schedule"],
        "queues": kinds["AWS::SQS::Queue"],
    }


# -- 7. where it stops scaling -------------------------------------------------------------------


def bottlenecks(
    load: hub_bill.HubLoad, member: Mapping[str, Any], hub: Mapping[str, Any], costs: Costs
) -> dict[str, Any]:
    """The next limits, each with the size at which it bites and the next step."""
    fan_per_slice = fanout_seconds(hub["all_active"], member) / max(1, hub["all_active"]["slices"])
    return {
        "plan_item_400kb": _plan_item(load, hub["all_active"], costs.seconds["scan"]),
        "fanout_timeout": _fanout_timeout(fan_per_slice),
        "sqs_fifo": _sqs_fifo(fan_per_slice),
        "lambda_concurrency": _lambda_concurrency(load, costs.seconds["scan"]),
        "member_ec2_rate": _member_ec2_rate(member, costs.seconds["scan"]),
        "sts_assume_role": _sts_assume_role(costs.seconds),
        "aggregation_in_one_lambda": _aggregation_in_one_lambda(costs),
        "directory_partition": _directory_partition(hub["directory_bytes_per_account_region"]),
    }


def _plan_item(load: hub_bill.HubLoad, stress: Mapping[str, Any], scan_s: float) -> dict[str, Any]:
    """1. The plan item holds the expected keys once and is written once a tick; a mark
    writes the slice's own done item and the small counter item (1 WCU each)."""
    per_key = load.plan_bytes_per_slice
    plan_put_limit = int((LIMITS["dynamodb_item_bytes"] - load.plan_base_bytes) // per_key)
    # Hot key: every mark decrements the one counter item (1 WCU), against 1,000 WCU/s.
    marks_per_s = MAX_CONCURRENCY / scan_s
    counter_wcu_per_s = marks_per_s * 1

    def plan_usd(slices: int) -> float:
        from dataclasses import replace

        ticks = hub_bill.SECONDS_PER_MONTH / (load.scan_minutes * 60)
        units = hub_bill.plan_write_units(slices, replace(load))
        return round(ticks * units * hub_bill.PRICES["dynamodb_write_unit"], 2)

    return {
        "bytes_per_slice_key": per_key,
        "write_units_per_mark": load.write_units_per_mark,
        "active_slices_when_marks_fail": None,
        "active_slices_when_the_plan_put_fails": plan_put_limit,
        "checked_on_moto": stress.get("plan_put_on_moto"),
        "plan_write_usd_per_month": {n: plan_usd(n) for n in (80, 400, 800, 2000, 5000)},
        "hot_key": {
            "marks_per_second": round(marks_per_s, 1),
            "counter_write_units_per_s": round(counter_wcu_per_s, 1),
            "limit_write_units_per_s": LIMITS["dynamodb_partition_write_units_per_s"],
            "active_slices": None,
        },
        "next_step": (
            "marks are constant (a done item and the counter, 2 WCU); the plan item "
            "still holds the expected keys once: page them over several items beyond "
            f"~{plan_put_limit:,} active slices"
        ),
    }


def _fanout_timeout(fan_per_slice: float) -> dict[str, Any]:
    """2. The fan-out: its time per slice (800 active) against its timeout."""
    fan_timeout_slices = int(LAMBDA_TIMEOUT_SECONDS / fan_per_slice)
    fan_max_slices = int(LIMITS["lambda_timeout_s"] / fan_per_slice)
    return {
        "seconds_per_active_slice": round(fan_per_slice, 5),
        "slices_in_the_default_timeout_600s": fan_timeout_slices,
        "slices_in_lambdas_900s": fan_max_slices,
        "next_step": (
            "fan out in two stages (one message per account, whose consumer enqueues "
            "its regions) or a Step Functions Distributed Map over the directory"
        ),
    }


def _sqs_fifo(fan_per_slice: float) -> dict[str, Any]:
    """3. SQS: one fan-out sends sequentially."""
    send_rate = 10 / (LATENCY["hub"] + fan_per_slice * 10)
    return {
        "fanout_send_rate_messages_per_s": round(send_rate),
        "quota_messages_per_s_batched": LIMITS["sqs_fifo_messages_per_s_batched"],
        "in_flight_at_max_concurrency": MAX_CONCURRENCY * 10,
        "quota_in_flight": LIMITS["sqs_fifo_in_flight"],
        "bites": "not while one fan-out sends sequentially; in flight needs 2,000 consumers",
        "next_step": "high-throughput FIFO mode (per message group) if sends are parallelised",
    }


def _lambda_concurrency(load: hub_bill.HubLoad, scan_s: float) -> dict[str, Any]:
    """4. Consumers: a tick must end before the next one."""
    tick_s = load.scan_minutes * 60
    per_item_overhead = load.seconds_per_invocation / load.items_per_invocation
    active_per_tick = int(MAX_CONCURRENCY * tick_s / (scan_s + per_item_overhead))
    return {
        "active_slices_per_tick_at_max_concurrency_20": active_per_tick,
        "account_concurrency_default": LIMITS["lambda_account_concurrency"],
        "next_step": (
            "raise orgMaxConcurrency (up to 1,000, the event source's limit) within the "
            "account's unreserved concurrency; each consumer pays its own cold start"
        ),
    }


def _member_ec2_rate(member: Mapping[str, Any], scan_s: float) -> dict[str, Any]:
    """5. Member APIs: EC2 throttles per account and Region. The two items of an account in
    flight (its two FIFO groups) are in two different Regions: one scan per Region."""
    items = member["items"]["scan_representative"]["calls"]
    ec2_calls = sum(v for k, v in items.items() if k.startswith("ec2."))
    ec2_rate = ec2_calls / scan_s
    return {
        "ec2_calls_per_scan": ec2_calls,
        "peak_calls_per_s_per_account_region": round(ec2_rate, 2),
        "describe_bucket": LIMITS["ec2_describe_bucket"],
        "refill_per_s": LIMITS["ec2_describe_refill_per_s"],
        "share_of_refill_percent": round(100 * ec2_rate / LIMITS["ec2_describe_refill_per_s"], 1),
        "bites": (
            "not for EC2: each Region has its own bucket and an account's two items in "
            "flight are in two Regions. What grows with resources is SageMaker's Describe "
            "per endpoint (3 calls each; benchmarks/api_calls: 1,821 calls at 600 endpoints)"
        ),
        "next_step": (
            "orgPerAccountConcurrency 1 for accounts near their limits; cache endpoint "
            "configurations (immutable) across ticks"
        ),
    }


def _sts_assume_role(seconds: Mapping[str, float]) -> dict[str, Any]:
    """6. STS: at most one AssumeRole per item, each consumer an item at a time."""
    sts_rate = MAX_CONCURRENCY / min(seconds.values())
    sts_consumers = int(LIMITS["sts_requests_per_s_assumed"] * min(seconds.values()))
    return {
        "upper_bound_per_s_at_max_concurrency_20": round(sts_rate, 1),
        "assumed_quota_per_s": LIMITS["sts_requests_per_s_assumed"],
        "consumers_at_which_cold_credentials_hit_it": sts_consumers,
        "next_step": (
            "already cached per account and container for 45 minutes (MemberClients); "
            "route messages of one account to one group so a container keeps its accounts"
        ),
    }


def _aggregation_in_one_lambda(costs: Costs) -> dict[str, Any]:
    """8. The aggregation: one Lambda (the consumer completing the plan, or the fan-out's
    sweep at the deadline) reads every active slice's ledger, 16 at a time."""
    per_slice_agg = costs.aggregation_seconds(1000) / 1000
    agg_slices = int(LAMBDA_TIMEOUT_SECONDS / per_slice_agg)
    return {
        "seconds_per_active_slice": round(per_slice_agg, 4),
        "seconds_at_80": round(costs.aggregation_seconds(80), 2),
        "active_slices_in_the_default_timeout_600s": agg_slices,
        "next_step": (
            "roll up per account (or per shard of accounts) as slices come in, and let "
            "the aggregation read the partial roll-ups"
        ),
    }


def _directory_partition(per_slice_dir: float) -> dict[str, Any]:
    """7. The directory: one partition, read whole by every tick's Query."""
    return {
        "bytes_per_account_region": per_slice_dir,
        "account_regions_per_1mb_query_page": int(
            LIMITS["dynamodb_query_page_bytes"] / per_slice_dir
        ),
        "read_units_per_tick_at_800": math.ceil(per_slice_dir * 800 / 4096),
        "bites": (
            "pages, not limits: a Query reads the whole directory every tick, one page "
            "per MB, at 3,000 read units a second per partition"
        ),
        "next_step": "shard the directory by account hash once it spans many pages",
    }


# -- everything ---------------------------------------------------------------------------------


def cold_start_seconds() -> dict[str, float]:
    """The consumer module's import (measured, boto3 included) plus the runtime's init."""
    from benchmarks.import_time import import_time_us

    samples = sorted(import_time_us("costguard.handlers.org")["total_us"] for _ in range(3))
    imports = samples[1] / 1e6
    return {
        "handler_import_s": round(imports, 3),
        "total_s": round(imports + RUNTIME_INIT_SECONDS, 3),
    }


def measure() -> dict[str, Any]:
    started = time.perf_counter()
    took: dict[str, float] = {}

    def timed(name: str, step: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        out = step(*args)
        took[name] = round(time.perf_counter() - t0, 1)
        return out

    member = timed("member_work_on_moto", measure_member_work)
    hub = timed("hub_at_800_on_moto", measure_hub)
    cold = timed("cold_start", cold_start_seconds)
    costs = costs_from(member, hub, cold["total_s"])
    day, holding = timed("day", simulate_day, ACCOUNTS, HOLDING)
    table = timed("day_table", tick_table, day, costs, holding)
    walls = timed("wall_time", wall_time, day, holding, costs)
    resources = timed("template", template_resources)
    swept = timed("sweep", sweep, costs)
    load = load_from(member, hub, costs, table["steady"])
    latency_variants = {
        f"aws_calls_{name}": load_from(
            member, hub, costs_from(member, hub, cold["total_s"], latency), table["steady"]
        )
        for name, latency in (
            ("instant", {k: 0.0 for k in LATENCY}),
            ("twice_as_slow", {k: 2 * v for k, v in LATENCY.items()}),
        )
    }
    return {
        "organization": {
            "accounts": ACCOUNTS,
            "regions": len(REGIONS),
            "account_regions": ACCOUNTS * len(REGIONS),
            "holding_fraction": HOLDING,
            "schedule_minutes": int(TICK.total_seconds() // 60),
            "probe_hours": int(PROBE_INTERVAL.total_seconds() // 3600),
            "max_concurrency": MAX_CONCURRENCY,
            "per_account_cap": PER_ACCOUNT_CAP,
        },
        "measured_on_moto": {"member_work": member, "hub_at_800": hub},
        "day": {"bursts": table["bursts"], "steady": table["steady"]},
        "sweep": swept,
        "cold_start": cold,
        "wall_time": walls,
        "template": resources,
        "bill": bills(load, resources["alarms"], latency_variants),
        "bottlenecks": bottlenecks(load, member, hub, costs),
        "latency_assumed_s": LATENCY,
        "limits": LIMITS,
        "benchmark_seconds": {**took, "total": round(time.perf_counter() - started, 1)},
        "notes": (
            "Measured on moto (in-process, this machine): calls by operation, DynamoDB units, "
            "log bytes, our code's seconds (moto's own request handling excluded). Modelled: "
            "latency per AWS call, the consumers' schedule, cold starts' runtime init, STS at "
            "one AssumeRole per item (an upper bound), prices (us-east-1 list, no free tier)."
        ),
    }


if __name__ == "__main__":
    print(json.dumps(measure(), indent=2, default=str))
