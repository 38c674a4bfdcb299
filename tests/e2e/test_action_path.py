"""The one path to act, end to end: a toy policy (tests only) through the real executor,
EC2 actuator, DynamoDB ledger and SNS topic, all on moto's server over HTTP.

It proves that a new capability needs only a policy and an actuator: warn, wait,
act, audit, notify, dry-run, claims and concurrency all come from the executor.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from costguard.adapters.aws import ClientFactory, tags_of
from costguard.adapters.dynamodb import DynamoDbLedger
from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.adapters.sns import SnsNotifier
from costguard.domain.decisions import Step
from costguard.domain.tags import Tags
from costguard.services.executor import Executor, ExecutorSettings
from costguard_demo.plumbing import create_alert_channels, create_ledger_table, drain
from costguard_demo.server import embedded_aws
from tests.support.atomic import AtomicCalls
from tests.support.moto_requests import RequestCounter
from tests.support.toy import TOY, toy_policy

pytestmark = pytest.mark.e2e
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
GRACE = timedelta(hours=1)
SCOPE = "123456789012"
#: What CostGuard may write in dry-run: its own ledger. Nothing of the user's.
LEDGER_WRITES = {"PutItem", "UpdateItem", "TransactWriteItems", "BatchWriteItem"}


class Account:
    def __init__(self) -> None:
        import boto3

        self.session = boto3.Session()
        create_ledger_table(self.session, "ledger", "us-east-1")
        self.topic, self.queue = create_alert_channels(self.session, "us-east-1")
        ec2 = self.session.client("ec2", region_name="us-east-1")

        def run(**tags: str) -> str:
            spec = [{"Key": k, "Value": v} for k, v in tags.items()]
            return str(
                ec2.run_instances(
                    ImageId="ami-12345678",
                    InstanceType="g5.xlarge",
                    MinCount=1,
                    MaxCount=1,
                    TagSpecifications=[{"ResourceType": "instance", "Tags": spec}],
                )["Instances"][0]["InstanceId"]
            )

        self.idle = run(**{Tags.PROJECT: "vision", TOY: "idle"})
        self.exempt = run(**{Tags.PROJECT: "vision", TOY: "idle", Tags.EXEMPT: "true"})
        self.untagged = run(**{TOY: "idle"})
        self.busy = run(**{Tags.PROJECT: "vision", TOY: "busy"})
        self.ledger = DynamoDbLedger(
            AtomicCalls(self.session.client("dynamodb", region_name="us-east-1")), "ledger"
        )

    def executor(self, *, dry_run: bool) -> Executor:
        return Executor(
            [Ec2InstanceActuator(ClientFactory(self.session))],
            self.ledger,
            SnsNotifier(self.session.client("sns", region_name="us-east-1"), self.topic),
            ExecutorSettings(scope=SCOPE, dry_run=dry_run),
        )

    def run(self, now: datetime, *, dry_run: bool = False) -> dict[str, Step]:
        report = self.executor(dry_run=dry_run).run(toy_policy(self.session, now), now)
        assert not report.failures, report.failures
        return {o.decision.target.id: o.step for o in report.outcomes}

    def state(self, instance: str) -> tuple[str, dict[str, str]]:
        ec2 = self.session.client("ec2", region_name="us-east-1")
        (i,) = ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"]
        return i["State"]["Name"], tags_of(i.get("Tags"))


@pytest.fixture
def counter() -> RequestCounter:
    return RequestCounter()


@pytest.fixture
def account(counter: RequestCounter) -> Iterator[Account]:
    with embedded_aws(middleware=counter):
        yield Account()


def test_a_dry_run_makes_no_mutating_call_on_any_user_resource(
    account: Account, counter: RequestCounter
) -> None:
    counter.calls.clear()
    # WHEN the toy guard runs in dry-run, before and long after any grace period
    first = account.run(T0, dry_run=True)
    account.run(T0 + 3 * GRACE, dry_run=True)
    # THEN moto's server received no call that changes anything but CostGuard's ledger
    assert set(counter.mutating()) <= LEDGER_WRITES, counter.mutating()
    assert first[account.idle] is Step.WOULD_WARN
    assert account.state(account.idle)[0] == "running"
    assert drain(account.session, account.queue, "us-east-1") == []
    # AND the audit trail says what would happen and what it would save
    (would,) = [
        e for e in account.ledger.audit_trail(SCOPE, "2026-11") if e.resource.endswith(account.idle)
    ]
    assert would.outcome == "would-warn"
    assert Decimal(would.details["usd_per_month_saved"]) == Decimal("734.380")


def test_warn_then_act_stops_only_what_is_in_scope_and_not_exempt(
    account: Account, counter: RequestCounter
) -> None:
    counter.calls.clear()
    steps = account.run(T0)
    assert counter.calls["CreateTags"] == 1  # the warning tag, on the idle instance only
    assert steps[account.idle] is Step.WARNED
    assert steps[account.exempt] is Step.SKIPPED
    assert steps[account.untagged] is Step.SKIPPED
    assert account.busy not in steps  # busy and never warned: nothing to record
    assert account.state(account.idle)[1][Tags.ACTION_AFTER] == "2026-11-20T13:00:00Z"
    assert account.run(T0 + GRACE / 2)[account.idle] is Step.WAITING
    counter.calls.clear()
    assert account.run(T0 + GRACE)[account.idle] is Step.ACTED
    assert counter.calls["StopInstances"] == 1
    assert account.state(account.idle)[0] in {"stopping", "stopped"}
    assert account.state(account.exempt)[0] == "running"
    assert account.state(account.untagged)[0] == "running"
    kinds = [m["kind"] for m in drain(account.session, account.queue, "us-east-1")]
    assert kinds == ["action-warning", "action-taken"]
    trail = [e.outcome for e in account.ledger.audit_trail(SCOPE, "2026-11")]
    assert trail.count("warned") == 1 and trail.count("acted") == 1
    # AND running again stops nothing more
    counter.calls.clear()
    account.run(T0 + 2 * GRACE)
    assert counter.calls["StopInstances"] == 0


def test_activity_withdraws_the_warning(account: Account) -> None:
    account.run(T0)
    ec2 = account.session.client("ec2", region_name="us-east-1")
    ec2.create_tags(Resources=[account.idle], Tags=[{"Key": TOY, "Value": "busy"}])
    assert account.run(T0 + GRACE / 2)[account.idle] is Step.CLEARED
    assert Tags.ACTION_AFTER not in account.state(account.idle)[1]
    assert account.state(account.idle)[0] == "running"


def test_overlapping_runs_stop_once(account: Account, counter: RequestCounter) -> None:
    account.run(T0)
    counter.calls.clear()
    barrier = threading.Barrier(4)
    decisions = toy_policy(account.session, T0 + GRACE)

    def run() -> None:
        executor = account.executor(dry_run=False)
        barrier.wait()
        executor.run(decisions, T0 + GRACE)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.calls["StopInstances"] == 1
