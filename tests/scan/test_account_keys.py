"""Resource keys carry the account: what must hold when one scan sees several accounts,
and when a deployed guard is upgraded from keys without the account."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.models import Resource, ResourceKind
from costguard.ports import Inventory
from costguard.services.scan import ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.fakes import StaticInventory, StaticSpotPrices

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
A, B = "111111111111", "222222222222"


def nodegroup(account: str, project: str) -> Resource:
    """A managed node group named like every team's: cluster `ml`, group `gpu`."""
    return Resource(
        id="ml/gpu",
        kind=ResourceKind.EKS_NODEGROUP,
        region="us-east-1",
        account=account,
        tags={"costguard:project": project},
        instance_type="g5.xlarge",
        eks_cluster="ml",
        eks_nodegroup="gpu",
        desired_size=1,
    )


def node(account: str, instance_id: str) -> Resource:
    """A node of that group: only AWS's eks tags, as EKS launches them."""
    return Resource(
        id=instance_id,
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        account=account,
        instance_type="g5.xlarge",
        availability_zone="us-east-1a",
        launched_at=T0 - timedelta(hours=1),
        tags={"eks:cluster-name": "ml", "eks:nodegroup-name": "gpu"},
        eks_cluster="ml",
        eks_nodegroup="gpu",
    )


def test_a_node_takes_the_project_of_its_own_accounts_node_group() -> None:
    # GIVEN two accounts in one scan (keys are account/region/kind/id so that "an
    # organization's resources share one ledger"), each with a cluster `ml` whose node
    # group `gpu` belongs to a different project
    resources = (
        nodegroup(A, "vision"),
        node(A, "i-0aaaaaaaaaaaaaaa1"),
        nodegroup(B, "speech"),
        node(B, "i-0bbbbbbbbbbbbbbb1"),
    )
    service = ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory(resources)})],
        StaticSpotPrices({}),
        fixture_catalog(),
        InMemoryLedger(),
        ScanSettings(scope="org", regions=("us-east-1",)),
    )
    # WHEN it scans
    report = service.run(T0)
    # THEN each node is charged to its own account's node group's project
    charged = {a.priced.resource.key: p.project for p in report.projects for a in p.resources}
    assert charged[f"{A}/us-east-1/ec2-instance/i-0aaaaaaaaaaaaaaa1"] == "vision"
    assert charged[f"{B}/us-east-1/ec2-instance/i-0bbbbbbbbbbbbbbb1"] == "speech"
    rates = {p.project: p.run_rate_usd_per_hour for p in report.projects}
    assert rates["vision"] == rates["speech"] > Decimal(0)


SCOPE = "123456789012"


def untagged_gpu(account: str) -> Resource:
    return Resource(
        id="i-0123456789abcdef0",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        account=account,
        instance_type="p4d.24xlarge",
        availability_zone="us-east-1a",
        launched_at=T0 - timedelta(hours=2),
        tags={},
    )


def guard_cycle(ledger: InMemoryLedger, notifier: object, account: str, now: datetime) -> list:
    """One deployed scan and its alerts; account "" is the guard before the upgrade."""
    from costguard.services.alerts import AlertService, AlertSettings

    report = ScanService(
        [StaticInventory("ec2", {"us-east-1": Inventory((untagged_gpu(account),))})],
        StaticSpotPrices({}),
        fixture_catalog(),
        ledger,
        ScanSettings(scope=SCOPE, regions=("us-east-1",), account=account),
    ).run(now)
    service = AlertService(ledger, notifier, AlertSettings(scope=SCOPE))  # type: ignore[arg-type]
    return service.run(report, report.previous, now)


def unattributed(notifier: object) -> int:
    return sum(1 for a in notifier.published if a.kind.value == "unattributed-spend")  # type: ignore[attr-defined]


def test_upgrading_to_account_keys_does_not_announce_the_same_untagged_gpu_twice_a_day() -> None:
    from tests.support.fakes import RecordingNotifier

    ledger = InMemoryLedger()
    notifier = RecordingNotifier([])
    # GIVEN a guard from before keys carried the account, which told the team this morning
    # about an untagged p4d ("once per resource per day")
    guard_cycle(ledger, notifier, "", T0)
    assert unattributed(notifier) == 1
    # WHEN the upgraded guard (keys account/region/kind/id) scans 15 minutes later, the
    # same day, the same instance (the upgrade adopts the ledger: it is the same resource)
    guard_cycle(ledger, notifier, SCOPE, T0 + timedelta(minutes=15))
    # THEN nobody is told about it a second time today
    assert unattributed(notifier) == 1


def test_the_digest_after_an_upgrade_counts_each_finding_once() -> None:
    from costguard.services.alerts import AlertService, AlertSettings
    from tests.support.fakes import RecordingNotifier

    ledger = InMemoryLedger()
    notifier = RecordingNotifier([])
    bad_budget = {"costguard:project": "vision", "costguard:budget": "abc"}

    def cycle(account: str, now: datetime) -> None:
        gpu = Resource(
            id="i-0123456789abcdef0",
            kind=ResourceKind.EC2_INSTANCE,
            region="us-east-1",
            account=account,
            instance_type="g5.xlarge",
            availability_zone="us-east-1a",
            launched_at=T0 - timedelta(days=2),
            tags=bad_budget,
        )
        report = ScanService(
            [StaticInventory("ec2", {"us-east-1": Inventory((gpu,))})],
            StaticSpotPrices({}),
            fixture_catalog(),
            ledger,
            ScanSettings(scope=SCOPE, regions=("us-east-1",), account=account),
        ).run(now)
        AlertService(ledger, notifier, AlertSettings(scope=SCOPE)).run(  # type: ignore[arg-type]
            report, report.previous, now
        )

    # GIVEN a malformed budget tag on one instance, recorded yesterday evening by the guard
    # from before the upgrade (after that day's digest) ...
    yesterday = T0.replace(hour=20) - timedelta(days=1)
    cycle("", yesterday)
    # ... and by the upgraded guard early today, before the digest hour
    cycle(SCOPE, T0.replace(hour=6))
    # WHEN today's digest goes out
    cycle(SCOPE, T0.replace(hour=8, minute=15))
    (digest,) = [
        a
        for a in notifier.published
        if a.kind.value == "findings-digest" and a.at.date() == T0.date()
    ]
    # THEN the one malformed tag is one finding, not two
    assert digest.facts == {"malformed-budget": "1"}


def test_pending_capacity_counts_only_the_node_groups_own_instances() -> None:
    # GIVEN two accounts with a node group `ml/gpu` each: account A wants 2 nodes and runs
    # 1 (one pending), account B wants 1 and runs 1
    resources = (
        replace(nodegroup(A, "vision"), desired_size=2),
        node(A, "i-0aaaaaaaaaaaaaaa1"),
        nodegroup(B, "speech"),
        node(B, "i-0bbbbbbbbbbbbbbb1"),
    )
    service = ScanService(
        [StaticInventory("eks", {"us-east-1": Inventory(resources)})],
        StaticSpotPrices({}),
        fixture_catalog(),
        InMemoryLedger(),
        ScanSettings(scope="org", regions=("us-east-1",)),
    )
    # WHEN it scans
    report = service.run(T0)
    # THEN account A's pending node is reported
    pending = {(p.nodegroup.key, p.pending) for p in report.pending_capacity}
    assert pending == {(f"{A}/us-east-1/eks-nodegroup/ml/gpu", 1)}
