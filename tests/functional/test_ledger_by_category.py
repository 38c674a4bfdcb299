"""The month-to-date by category on the ledger (DynamoDB on moto, and in memory): kept in
the row that keeps the total, written by the scan's one transaction (exactly once, all or
nothing), "not split" for what an older version accrued, and small enough for hundreds of
projects; then a whole scan on moto, checked by hand.

By hand (``domain/spend.accrue``): a g5.xlarge at $1.00/h with its 730 GiB gp3 root volume
at $0.10/h, both created an hour before the first of three scans an hour apart: the first
back-fills 1 h, each later one adds 1 h, so compute 3 x $1.00 = $3.00 and storage
3 x $0.10 = $0.30.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.spend import Increment, Observation, month_split
from costguard.ports import CommitOutcome, Ledger, ScanCommit
from tests.functional.test_ledger_contract import T0, T1, T2, make_table
from tests.support.atomic import AtomicCalls

D = Decimal
MONTH = "2026-11"


class Counting(AtomicCalls):
    """Atomic calls, counted by operation: what a commit writes, and how."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("_"):
            self.calls[name] += 1
        return super().__getattr__(name)


@pytest.fixture
def dynamodb() -> Iterator[tuple[Counting, Ledger]]:
    import boto3
    from moto import mock_aws

    from costguard.adapters.dynamodb import DynamoDbLedger

    with mock_aws():
        session = boto3.Session()
        make_table(session)
        client = Counting(session.client("dynamodb", region_name="us-east-1"))
        yield client, DynamoDbLedger(client, "ledger")  # type: ignore[arg-type]


@pytest.fixture(params=["memory", "dynamodb"])
def ledger(request: pytest.FixtureRequest) -> Ledger:
    if request.param == "memory":
        return InMemoryLedger()
    _, store = request.getfixturevalue("dynamodb")
    return store  # type: ignore[no-any-return]


def commit(prev: Any, now: Any, compute: str, storage: str, project: str = "llm") -> ScanCommit:
    split = {"compute": D(compute), "storage": D(storage)}
    obs = Observation("us-east-1/ec2-instance/i-1", project, D(1), now, T0)
    return ScanCommit(
        "acct",
        prev,
        now,
        {(project, MONTH): Increment(D(compute) + D(storage), D(0), {20: D(1)}, split)},
        [obs],
    )


def split_of(ledger: Ledger, project: str = "llm") -> dict[str, Decimal]:
    row = ledger.month_totals("acct", MONTH)[project]
    assert sum(month_split(row.usd, row.by_category).values(), D(0)) == row.usd
    return month_split(row.usd, row.by_category)


def test_each_commit_adds_to_its_categories(ledger: Ledger) -> None:
    # GIVEN two scans: $1.00 compute and $0.10 storage, then the same again
    assert ledger.commit(commit(None, T0, "1.00", "0.10")) is CommitOutcome.APPLIED
    assert ledger.commit(commit(T0, T1, "1.00", "0.10")) is CommitOutcome.APPLIED
    # THEN the month is $2.20: compute $2.00, storage $0.20, nothing not split
    assert ledger.month_totals("acct", MONTH)["llm"].usd == D("2.20")
    assert split_of(ledger) == {"compute": D(2), "storage": D("0.20"), "not_split": D(0)}


def test_a_retried_or_late_scan_adds_to_no_category_twice(ledger: Ledger) -> None:
    ledger.commit(commit(None, T0, "1.00", "0.10"))
    ledger.commit(commit(T0, T2, "2.00", "0.20"))
    # WHEN the second scan is delivered again, and a slower scan from T0 commits late
    assert ledger.commit(commit(T0, T2, "2.00", "0.20")) is CommitOutcome.ALREADY_APPLIED
    assert ledger.commit(commit(T0, T1, "1.00", "0.10")) is CommitOutcome.CONTENDED
    # THEN neither added anything to either category
    assert split_of(ledger) == {"compute": D(3), "storage": D("0.30"), "not_split": D(0)}


def test_the_split_is_written_by_the_commits_one_transaction(
    dynamodb: tuple[Counting, Ledger],
) -> None:
    """Defect guarded: a second write for the categories could land without the total (or
    twice on a retry). The commit stays one TransactWriteItems, the categories in the
    totals row it already wrote."""
    client, ledger = dynamodb
    client.calls.clear()
    ledger.commit(commit(None, T0, "1.00", "0.10"))
    writes = {k: n for k, n in client.calls.items() if not k.startswith(("get", "query"))}
    assert writes == {"transact_write_items": 1}
    item = client.query(
        TableName="ledger",
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"SCOPE#acct#MONTH#{MONTH}"}},
    )["Items"]
    (row,) = [r["M"] for i in item for r in i["projects"]["M"].values()]
    assert row["cat"]["M"] == {"compute": {"N": "1.00"}, "storage": {"N": "0.10"}}


def old_row(client: Any, usd: int) -> None:
    """The totals row an older version wrote: a total and days, no categories."""
    from costguard.adapters.ddb import to_item
    from costguard.adapters.dynamodb import key_part, totals_shard

    k = key_part("llm")
    client.put_item(
        TableName="ledger",
        Item=to_item(
            {
                "pk": f"SCOPE#acct#MONTH#{MONTH}",
                "sk": f"TOTALS#{totals_shard(k):02d}",
                "month": MONTH,
                "projects": {
                    k: {"usd": D(usd), "est": D(0), "days": {"01": D(usd)}, "project": "llm"}
                },
            }
        ),
    )


def test_a_month_begun_by_an_older_version_keeps_that_part_not_split(
    dynamodb: tuple[Counting, Ledger],
) -> None:
    client, ledger = dynamodb
    # GIVEN $40 accrued this month by an older version (no categories)
    old_row(client, 40)
    # WHEN it is read: all of it is not split (never guessed into compute)
    assert split_of(ledger) == {"compute": D(0), "storage": D(0), "not_split": D(40)}
    # WHEN this version accrues to it, twice
    ledger.commit(commit(None, T0, "1.00", "0.10"))
    ledger.commit(commit(T0, T1, "1.00", "0.10"))
    # THEN the $40 stays not split, and the new spend is split: $42.20 in all
    assert ledger.month_totals("acct", MONTH)["llm"].usd == D("42.20")
    assert split_of(ledger) == {"compute": D(2), "storage": D("0.20"), "not_split": D(40)}


def test_a_month_of_days_and_categories_for_hundreds_of_long_named_projects_fits(
    dynamodb: tuple[Counting, Ledger],
) -> None:
    """The categories add two numbers a project to its row (never one a resource or a
    scan): 31 days x 150 projects with 256-character CJK names, each with compute and
    storage at full precision, still commit in one transaction."""
    _, ledger = dynamodb
    names = [f"{i:04d}" + "計" * 252 for i in range(150)]
    day = {d: D("123.456789") for d in range(1, 32)}
    total = sum(day.values(), D(0))
    third = total / 3  # 28 significant digits, as accrual leaves them
    split = {"compute": total - third, "storage": third}
    increments = {(p, "2026-12"): Increment(total, total, day, split) for p in names}
    obs = [
        Observation(f"us-east-1/ec2-instance/i-{i:017x}", p, D(1), T0, T0)
        for i, p in enumerate(names)
    ]
    assert ledger.commit(ScanCommit("acct", None, T0, increments, obs)) is CommitOutcome.APPLIED
    months = ledger.month_totals("acct", "2026-12")
    assert len(months) == 150
    assert all(m.by_category == split for m in months.values())


# -- a whole scan on moto ------------------------------------------------------------------------


def test_three_hourly_scans_on_moto_keep_three_dollars_of_compute_and_thirty_cents_of_storage(
    aws: Any,
) -> None:
    """GIVEN on moto a g5.xlarge of project llm ($1.00/h) with a 730 GiB gp3 root volume
    ($0.10/h), both created an hour before the first scan, and the ledger on DynamoDB
    WHEN three scans run an hour apart, and the third is delivered again
    THEN llm's month is compute $3.00 and storage $0.30 ($3.30), in the ledger and the JSON."""
    from costguard.adapters.aws import ClientFactory
    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.adapters.ec2 import Ec2Inventory
    from costguard.cli.scan_output import report_json
    from costguard.domain.tags import Tags
    from costguard.services.scan import ScanService, ScanSettings
    from costguard_demo.fleet import backdate_instances
    from tests.support.catalog import round_rates_catalog
    from tests.support.clock import MIDDAY

    ec2 = aws.client("ec2", region_name="us-east-1")
    iid = ec2.run_instances(
        ImageId="ami-12345678",
        InstanceType="g5.xlarge",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "costguard:project", "Value": "llm"}]}
        ],
        BlockDeviceMappings=[
            {"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 730, "VolumeType": "gp3"}}
        ],
    )["Instances"][0]["InstanceId"]
    backdate_instances("us-east-1", {iid: MIDDAY - timedelta(hours=1)})
    make_table(aws)
    ledger = DynamoDbLedger(aws.client("dynamodb", region_name="us-east-1"), "ledger")

    def run(at: Any) -> Any:
        return ScanService(
            sources=[
                Ec2Inventory(
                    ClientFactory(aws), project_keys=(Tags.PROJECT, *Tags.PROJECT_FALLBACKS)
                )
            ],
            spot_prices=_NoSpot(),
            catalog=round_rates_catalog(),
            ledger=ledger,
            settings=ScanSettings(scope="acct", regions=("us-east-1",)),
        ).run(at)

    for n in range(3):
        report = run(MIDDAY + timedelta(hours=n))
    again = run(MIDDAY + timedelta(hours=2))
    assert again.ledger is CommitOutcome.ALREADY_APPLIED
    (llm,) = [p for p in again.projects if p.project == "llm"]
    assert llm.run_rate_usd_per_hour == D("1.10")  # the GPU and its volume, nothing else
    assert llm.month_to_date_usd == D("3.30")
    assert llm.month_to_date_by_category == {
        "compute": D(3),
        "storage": D("0.30"),
        "not_split": D(0),
    }
    (shown,) = [p for p in report_json(report)["projects"] if p["project"] == "llm"]
    assert shown["month_to_date_usd"] == 3.3
    assert shown["month_to_date_by_category"] == {"compute": 3.0, "storage": 0.3, "not_split": 0.0}


class _NoSpot:
    def latest(self, region: str, instance_types: Any, now: Any) -> dict[Any, Decimal]:
        return {}
