"""The Organization hub on moto: discovery, the tick's fan-out through SQS FIFO, the
consumer's three kinds of work in member accounts (assumed roles), poison and throttled
members, per-account caps, and the month of a region whose GPUs stopped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.stub import Stubber

from costguard.adapters.aws import RETRY_CONFIG, ClientFactory
from costguard.adapters.directory import DynamoDbDirectory
from costguard.adapters.dynamodb import DynamoDbLedger
from costguard.adapters.member import MemberProbe, MemberRegions
from costguard.adapters.organizations import OrganizationAccounts
from costguard.adapters.work_queue import SqsWorkQueue, WorkItem
from costguard.domain.directory import SliceState, Work, WorkKind
from costguard.domain.org import Slice, slice_scope
from costguard.handlers.org import consume
from costguard.services.fanout import OrgWork, ProbeWork
from costguard.settings import Settings
from costguard.wiring.org import HubSettings, build_fanout, build_org_work
from tests.functional.test_org_slices import (
    HUB,
    REGIONS,
    A,
    B,
    C,
    _deny_assume,
    _launch,
    _member_session,
)

T0 = datetime.fromisoformat("2026-11-20T12:00:00+00:00")
TICK = timedelta(minutes=15)


@pytest.fixture
def hub(aws: Any) -> Iterator[Any]:
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    yield aws


@pytest.fixture
def queue(hub: Any) -> str:
    sqs = hub.client("sqs", region_name="us-east-1")
    url: str = sqs.create_queue(QueueName="work.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    return url


def _settings(**extra: Any) -> Settings:
    return Settings(
        table_name="ledger",
        scope=HUB,
        regions=REGIONS,
        projects={"llm": {"budget": 100}},
        sagemaker_studio=False,
        **extra,
    )


def _env(url: str, **extra: Any) -> HubSettings:
    values: dict[str, Any] = {"accounts": (A, B, C), "queue_url": url, "per_account_cap": 2}
    return HubSettings(**(values | extra))


def _record(m: dict[str, Any]) -> dict[str, Any]:
    return {
        "messageId": m["MessageId"],
        "receiptHandle": m["ReceiptHandle"],
        "body": m["Body"],
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "0",
            "SenderId": "x",
            "ApproximateFirstReceiveTimestamp": "0",
            "MessageGroupId": m["Attributes"]["MessageGroupId"],
            "MessageDeduplicationId": m["Attributes"]["MessageDeduplicationId"],
            "SequenceNumber": m["Attributes"].get("SequenceNumber", "1"),
        },
        "messageAttributes": {},
        "md5OfBody": m["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:111111111111:work.fifo",
        "awsRegion": "us-east-1",
    }


def _pump(
    session: Any, url: str, work: OrgWork, now: datetime
) -> tuple[list[WorkItem], list[WorkItem]]:
    """Deliver the queue to the consumer as Lambda would, in batches of up to 10; a failed
    item is taken off too (as if dead-lettered) and returned. (done, failed)"""
    sqs = session.client("sqs", region_name="us-east-1")
    done: list[WorkItem] = []
    failed: list[WorkItem] = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]).get(
            "Messages", []
        )
        if not got:
            return done, failed
        event = {"Records": [_record(m) for m in got]}
        try:
            out = consume(event, work, now)
            bad = {f["itemIdentifier"] for f in out["batchItemFailures"]}
        except BatchProcessingError:
            bad = {m["MessageId"] for m in got}
        for m in got:
            item = WorkItem.model_validate_json(m["Body"])
            (failed if m["MessageId"] in bad else done).append(item)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def _directory(session: Any) -> DynamoDbDirectory:
    return DynamoDbDirectory(session.client("dynamodb", region_name="us-east-1"), "ledger", HUB)


def _ledger(session: Any) -> DynamoDbLedger:
    return DynamoDbLedger(session.client("dynamodb", region_name="us-east-1"), "ledger")


def _kinds(items: list[WorkItem]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i.kind] = out.get(i.kind, 0) + 1
    return out


# -- discovery ---------------------------------------------------------------------------------


def test_discovers_active_accounts_and_honours_the_opt_out_tag(hub: Any, queue: str) -> None:
    # GIVEN an Organization of four accounts: one opted out ("True"), one closed (SUSPENDED)
    org = hub.client("organizations", region_name="us-east-1")
    org.create_organization(FeatureSet="ALL")
    made = [
        org.create_account(AccountName=f"team{n}", Email=f"team{n}@example.com")[
            "CreateAccountStatus"
        ]["AccountId"]
        for n in range(3)
    ]
    org.tag_resource(ResourceId=made[1], Tags=[{"Key": "costguard:opt-out", "Value": "True"}])
    org.close_account(AccountId=made[2])
    management = org.describe_organization()["Organization"]["MasterAccountId"]
    # WHEN the fan-out discovers the accounts and runs its first tick
    fanout = build_fanout(_settings(), _env(queue, accounts=None, discover=True), hub)
    summary = fanout.tick(T0)
    # THEN the management account and team0 are guarded; team1 and team2 are not
    listing = _directory(hub).load().listing
    assert listing is not None
    assert listing.accounts == tuple(sorted([management, made[0]]))
    assert listing.opted_out == (made[1],) and listing.inactive == (made[2],)
    assert summary.accounts == 2 and len(summary.work.regions) == 2
    # AND the next tick reads the stored list: no Organizations call until a day has passed
    calls: list[str] = []
    source = OrganizationAccounts(org)
    original = source.accounts

    def counting() -> list[tuple[str, str]]:
        calls.append("ListAccounts")
        return original()

    source.accounts = counting  # type: ignore[method-assign]
    fanout._source = source
    fanout.tick(T0 + TICK)
    assert calls == []
    fanout.tick(T0 + timedelta(days=1))
    assert calls == ["ListAccounts"]


def test_a_discovery_error_is_a_domain_error_naming_the_code(hub: Any) -> None:
    from costguard.domain.directory import DiscoveryError

    # GIVEN a hub that is neither the management account nor a delegated administrator
    org = hub.client("organizations", region_name="us-east-1")
    stub = Stubber(org)
    stub.add_client_error(
        "list_accounts",
        "AccessDeniedException",
        "You don't have permissions to access this resource.",
        400,
    )
    stub.activate()
    # WHEN the accounts are listed THEN the error names the code and the call
    with pytest.raises(DiscoveryError) as caught:
        OrganizationAccounts(org).accounts()
    assert caught.value.code == "AccessDeniedException"
    assert "ListAccounts" in caught.value.detail


# -- the tick, end to end -------------------------------------------------------------------------


def test_reads_regions_probes_then_scans_only_the_region_that_holds_a_gpu(
    hub: Any, queue: str
) -> None:
    # GIVEN a GPU in account A's us-east-1, nothing anywhere else
    _launch(hub, A, "us-east-1", "llm", T0 - timedelta(hours=1))
    fanout = build_fanout(_settings(), _env(queue), hub)
    work = build_org_work(_settings(), hub)
    # WHEN three ticks run, each followed by its queue
    fanout.tick(T0)
    regions, _ = _pump(hub, queue, work, T0)
    fanout.tick(T0 + TICK)
    probes, _ = _pump(hub, queue, work, T0 + TICK)
    third = fanout.tick(T0 + 2 * TICK)
    scans, failed = _pump(hub, queue, work, T0 + 2 * TICK)
    # THEN each account's enabled regions were read in it (not the opt-in ones it did not
    # enable), and only the allow-listed ones were probed
    assert _kinds(regions) == {"regions": 3}
    d = _directory(hub).load()
    for a in (A, B, C):
        assert set(REGIONS) <= set(d.regions[a].regions)
        assert "ap-east-1" not in d.regions[a].regions  # not-opted-in on moto
    # the six account-regions were probed, and only A's us-east-1 was scanned
    assert _kinds(probes).get("probe") == 6
    assert [(i.kind, i.slice) for i in scans] == [("scan", Slice(A, "us-east-1"))]
    assert failed == [] and third.planned
    assert d.slices[Slice(A, "us-east-1")].state is SliceState.ACTIVE
    assert sum(st.state is SliceState.EMPTY for st in d.slices.values()) == 5
    observed = _ledger(hub).observations(slice_scope(HUB, Slice(A, "us-east-1")))
    assert any("/ec2-instance/" in k for k in observed)


def test_a_poison_account_is_named_in_a_finding_and_an_alert_and_the_rest_go_on(
    hub: Any, queue: str
) -> None:
    # GIVEN an alert topic with an inbox, a GPU in A, and account B without the member role
    sns = hub.client("sns", region_name="us-east-1")
    topic = sns.create_topic(Name="alerts")["TopicArn"]
    sqs = hub.client("sqs", region_name="us-east-1")
    inbox = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    _launch(hub, A, "us-east-1", "llm", T0 - timedelta(hours=1))
    _deny_assume(hub, B)
    settings = _settings(topic_arn=topic)
    fanout = build_fanout(settings, _env(queue), hub)
    work = build_org_work(settings, hub)
    # WHEN the first ticks run
    fanout.tick(T0)
    _, failed = _pump(hub, queue, work, T0)
    # THEN B's regions item failed alone, with its reason recorded
    assert [(i.kind, i.account) for i in failed] == [("regions", B)]
    entry = _directory(hub).load().regions[B]
    assert entry.failure.startswith("AccessDenied") and entry.discovered_at is None
    # AND the next tick names B (a finding in the hub's ledger, one alert), probes A and C
    second = fanout.tick(T0 + TICK)
    assert [u.account for u in second.unreachable] == [B]
    assert {x.account for x in second.work.probes} == {A, C}
    findings = _ledger(hub).findings(HUB, "2026-11-20")
    assert any(B in f.resource and "AccessDenied" in f.message for f in findings)
    subjects = [
        json.loads(m["Body"])["Subject"]
        for m in sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages", [])
    ]
    assert any(B in s for s in subjects), subjects
    # AND the tick after sends no second alert the same day
    third = fanout.tick(T0 + 2 * TICK)
    assert not [a for a in third.alerts if "unreachable" in a]


def test_a_throttled_member_fails_alone_and_is_recorded(hub: Any) -> None:
    # GIVEN account B whose EC2 answers RequestLimitExceeded (after the client's own
    # retries), and account A with a GPU
    _launch(hub, A, "us-east-1", "llm", T0 - timedelta(hours=1))
    store = _directory(hub)
    throttled = hub.client("ec2", region_name="us-east-1", config=RETRY_CONFIG)
    stub = Stubber(throttled)
    stub.add_client_error(
        "describe_instances", "RequestLimitExceeded", "Request limit exceeded.", 503
    )
    stub.activate()

    class ThrottledClients(ClientFactory):
        def ec2(self, region: str) -> Any:
            return throttled

    def prober_for(s: Slice) -> MemberProbe:
        session = _member_session(hub, s.account, s.region)
        factory = ThrottledClients if s.account == B else ClientFactory
        return MemberProbe(factory(session, account=s.account))

    scans = build_org_work(_settings(), hub).scans
    work = OrgWork(scans, store, ProbeWork(store, prober_for))
    items = [WorkItem.of(Work(T0, WorkKind.PROBE, Slice(x, "us-east-1"))) for x in (A, B, C)]
    event = {
        "Records": [
            _record(
                {
                    "MessageId": f"m{n}",
                    "ReceiptHandle": "r",
                    "Body": i.model_dump_json(),
                    "MD5OfBody": "x",
                    "Attributes": {
                        "MessageGroupId": i.account,
                        "MessageDeduplicationId": i.dedupe_id(),
                    },
                }
            )
            for n, i in enumerate(items)
        ]
    }
    # WHEN the batch is consumed
    out = consume(event, work, T0)
    # THEN B's probe is handed back for SQS to retry; A and C are done
    assert out["batchItemFailures"] == [{"itemIdentifier": "m1"}]
    d = store.load()
    assert d.slices[Slice(A, "us-east-1")].state is SliceState.ACTIVE
    assert d.slices[Slice(C, "us-east-1")].state is SliceState.EMPTY
    b = d.slices[Slice(B, "us-east-1")]
    assert b.state is SliceState.UNPROBED and b.failure.startswith("RequestLimitExceeded")
    stub.assert_no_pending_responses()


def test_duplicate_and_late_probe_messages_change_nothing(hub: Any, queue: str) -> None:
    # GIVEN B's us-east-1, probed empty at T0+1 tick
    work = build_org_work(_settings(), hub)
    sqs_queue = SqsWorkQueue(hub.client("sqs", region_name="us-east-1"), queue)
    s = Slice(B, "us-east-1")
    sqs_queue.send([Work(T0 + TICK, WorkKind.PROBE, s)])
    _pump(hub, queue, work, T0 + TICK)
    before = _directory(hub).load().slices[s]
    # WHEN the same probe comes again (a redelivery) and an older one comes late
    event_items = [Work(T0 + TICK, WorkKind.PROBE, s), Work(T0, WorkKind.PROBE, s)]
    for n, w in enumerate(event_items):
        item = WorkItem.of(w)
        consume(
            {
                "Records": [
                    _record(
                        {
                            "MessageId": f"d{n}",
                            "ReceiptHandle": "r",
                            "Body": item.model_dump_json(),
                            "MD5OfBody": "x",
                            "Attributes": {
                                "MessageGroupId": B,
                                "MessageDeduplicationId": item.dedupe_id(),
                            },
                        }
                    )
                ]
            },
            work,
            T0 + 2 * TICK,
        )
    # THEN the stored state is the one of T0+1 tick, written once
    after = _directory(hub).load().slices[s]
    assert after == before and after.version == 1 and after.as_of == T0 + TICK


def test_a_region_whose_gpu_stopped_keeps_its_month_in_the_roll_up(hub: Any, queue: str) -> None:
    # GIVEN project llm's GPU in A and project other's GPU in B, both running for an hour
    _launch(hub, A, "us-east-1", "llm", T0 - timedelta(hours=1))
    _launch(hub, B, "us-east-1", "other", T0 - timedelta(hours=1))
    env = _env(queue, accounts=(A, B))
    fanout = build_fanout(_settings(), env, hub)
    work = build_org_work(_settings(), hub)
    for n in range(3):
        fanout.tick(T0 + n * TICK)
        _pump(hub, queue, work, T0 + n * TICK)
    llm_scope = slice_scope(HUB, Slice(A, "us-east-1"))
    spent = _ledger(hub).month_totals(llm_scope, "2026-11")["llm"].usd
    assert spent > 0
    # WHEN A's GPU is terminated: the next scan finds nothing and empties the slice
    ec2 = _member_session(hub, A, "us-east-1").client("ec2")
    ids = [
        i["InstanceId"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
    ]
    ec2.terminate_instances(InstanceIds=ids)
    fanout.tick(T0 + 3 * TICK)
    _pump(hub, queue, work, T0 + 3 * TICK)
    assert _directory(hub).load().slices[Slice(A, "us-east-1")].state is SliceState.EMPTY
    # AND the following tick plans B's scan, carrying A's slice for the month
    fourth = fanout.tick(T0 + 4 * TICK)
    assert fourth.work.scans == (Slice(B, "us-east-1"),)
    assert fourth.work.carried == (Slice(A, "us-east-1"),)
    hub.client("sqs", region_name="us-east-1").purge_queue(QueueUrl=queue)
    # WHEN B's slice comes in, completing the plan: it aggregates the time
    outcome = work.run(Work(T0 + 4 * TICK, WorkKind.SCAN, Slice(B, "us-east-1")), T0 + 4 * TICK)
    assert outcome.scan is not None
    report = outcome.scan.aggregated
    # THEN llm's month-to-date is still in the Organization's roll-up, not dropped to $0
    assert report is not None
    assert report.rollups["llm"].month_to_date_usd >= spent
    assert report.rollups["llm"].accounts == {A}
    assert report.rollups["other"].run_rate_usd_per_hour > 0
    # AND its month keeps the split its slice's ledger holds: none of it "not split"
    split = report.rollups["llm"].month_to_date_by_category
    assert split["compute"] > 0 and split["not_split"] == 0
    assert sum(split.values()) == report.rollups["llm"].month_to_date_usd


# -- the queue -------------------------------------------------------------------------------------


def test_at_most_cap_items_of_one_account_are_in_flight(hub: Any, queue: str) -> None:
    # GIVEN six items each for accounts A and B, two FIFO groups per account
    regions = ["us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1"]
    sqs = hub.client("sqs", region_name="us-east-1")
    sent = SqsWorkQueue(sqs, queue, per_account_cap=2).send(
        [Work(T0, WorkKind.SCAN, Slice(a, r)) for a in (A, B) for r in regions]
    )
    assert sent == 12
    # WHEN consumers take messages one at a time and none is finished yet
    in_flight: list[WorkItem] = []
    while got := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=1).get("Messages", []):
        in_flight += [WorkItem.model_validate_json(m["Body"]) for m in got]
    # THEN at most two of each account's items are handed out
    per_account = {a: sum(1 for i in in_flight if i.account == a) for a in (A, B)}
    assert 1 <= per_account[A] <= 2 and 1 <= per_account[B] <= 2


# -- the member role ----------------------------------------------------------------------------


def test_the_probe_and_regions_call_only_what_the_member_role_grants(hub: Any) -> None:
    from costguard.iam import (
        ORG_MEMBER_EXTRA,
        PROBE_ACTIONS,
        all_actions,
        member_read_permissions,
        scan_permissions,
    )
    from costguard.wiring import CallCounter

    # GIVEN a member account with a CPU instance only (the probe reads every call)
    session = _member_session(hub, C, "us-east-1")
    session.client("ec2").run_instances(
        ImageId="ami-12345678", MinCount=1, MaxCount=1, InstanceType="m5.large"
    )
    counter = CallCounter()
    counter.attach(session)
    clients = ClientFactory(session, account=C)
    # WHEN it is probed and its regions read
    answer = MemberProbe(clients).probe("us-east-1")
    regions = MemberRegions(clients).opted_in("us-east-1")
    # THEN nothing was found (a CPU is not an accelerator), the regions are the enabled ones
    assert answer.found == () and "us-east-1" in regions and "ap-east-1" not in regions
    called = {k.replace(".", ":", 1) for k in counter.snapshot()}
    assert called == set(PROBE_ACTIONS) | all_actions(ORG_MEMBER_EXTRA)
    # AND every call is granted to the member-read role; the probe needs nothing new
    assert called <= all_actions(member_read_permissions(sagemaker_studio=False))
    assert set(PROBE_ACTIONS) <= all_actions(scan_permissions())


def test_instance_types_are_read_once_per_region_not_once_per_probe(
    hub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.adapters.ec2 import InstanceTypeCache

    # GIVEN two member accounts with the same CPU type in us-east-1 (not in the accelerator
    # table, so EC2 is asked what it is)
    for account in (A, B):
        _member_session(hub, account, "us-east-1").client("ec2").run_instances(
            ImageId="ami-12345678", MinCount=1, MaxCount=1, InstanceType="m5.large"
        )
    fetched: list[tuple[str, tuple[str, ...]]] = []
    real = InstanceTypeCache._fetch

    def spy(self: InstanceTypeCache, ec2: Any, region: str, batch: list[str]) -> None:
        fetched.append((region, tuple(batch)))
        real(self, ec2, region, batch)

    monkeypatch.setattr(InstanceTypeCache, "_fetch", spy)
    work = build_org_work(_settings(), hub)
    # WHEN both regions are probed by one consumer
    for account in (A, B):
        work.run(Work(T0, WorkKind.PROBE, Slice(account, "us-east-1")), T0)
    # THEN the type was described once: instance types are the same in every account
    assert fetched == [("us-east-1", ("m5.large",))]
