"""The scan use case with in-memory fakes: no boto3, no moto."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.findings import FindingCode
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.spend import BudgetStatus
from costguard.ports import AccessDeniedError, Inventory
from costguard.services.scan import ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.clock import MIDDAY
from tests.support.fakes import StaticInventory, StaticSpotPrices


def instance(
    id_: str, itype: str, region: str = "us-east-1", hours_ago: float = 10, **tags: str
) -> Resource:
    return Resource(
        id=id_,
        kind=ResourceKind.EC2_INSTANCE,
        region=region,
        instance_type=itype,
        availability_zone=f"{region}a",
        launched_at=MIDDAY - timedelta(hours=hours_ago),
        tags={k.replace("__", ":"): v for k, v in tags.items()},
    )


def service(
    inventories: dict[str, Inventory],
    ledger: InMemoryLedger,
    failing: dict[str, Exception] | None = None,
) -> ScanService:
    return ScanService(
        sources=[StaticInventory("ec2", inventories, failing)],
        spot_prices=StaticSpotPrices({}),
        catalog=fixture_catalog(),
        ledger=ledger,
        settings=ScanSettings(scope="acct", regions=("us-east-1", "us-west-2")),
    )


def test_budget_report_from_backfill_then_exact_accrual() -> None:
    # GIVEN a p5.48xlarge running for 10 h in a project with a $12,000 budget
    fleet = {
        "us-east-1": Inventory(
            (instance("i-p5", "p5.48xlarge", costguard__project="llm", costguard__budget="12000"),)
        )
    }
    ledger = InMemoryLedger()
    # WHEN it is scanned twice, 15 minutes apart
    first = service(fleet, ledger).run(MIDDAY)
    second = service(fleet, ledger).run(MIDDAY + timedelta(minutes=15))
    # THEN month-to-date is the back-fill plus exactly 15 minutes, and the forecast is over budget
    (p1,) = first.projects
    assert p1.month_to_date_usd == Decimal("550.40")
    assert p1.estimated_usd == Decimal("550.40")
    (p2,) = second.projects
    assert p2.month_to_date_usd == Decimal("550.40") + Decimal("13.76")
    assert p2.run_rate_usd_per_hour == Decimal("55.04")
    assert p2.status is BudgetStatus.OVER
    assert p2.forecast_month_usd > Decimal(12000)


def test_one_failing_region_is_reported_and_the_rest_completes() -> None:
    fleet = {
        "us-west-2": Inventory(
            (instance("i-g5", "g5.xlarge", region="us-west-2", costguard__project="cv"),)
        )
    }
    denied = AccessDeniedError(
        "ec2", "us-east-1", "DescribeInstances", "UnauthorizedOperation", "not allowed"
    )
    report = service(fleet, InMemoryLedger(), {"us-east-1": denied}).run(MIDDAY)
    assert [p.project for p in report.projects] == ["cv"]
    (failure,) = [f for f in report.findings if f.code is FindingCode.SCAN_FAILED]
    assert failure.resource == "us-east-1/ec2"
    assert "UnauthorizedOperation" in failure.message


def test_unattributed_and_unpriced_are_reported_never_zero() -> None:
    fleet = {
        "us-east-1": Inventory(
            (
                instance("i-x", "g5.xlarge"),
                instance("i-new", "p9.96xlarge", costguard__project="llm"),
            )
        )
    }
    report = service(fleet, InMemoryLedger()).run(MIDDAY)
    assert report.unattributed.run_rate_usd_per_hour == Decimal("1.006")
    (llm,) = report.projects
    assert llm.unpriced == 1
    assert {f.code for f in report.findings} >= {FindingCode.UNATTRIBUTED, FindingCode.UNPRICED}


def test_projects_with_spend_this_month_but_nothing_running_still_report() -> None:
    ledger = InMemoryLedger()
    running = {
        "us-east-1": Inventory(
            (instance("i-a", "g5.xlarge", costguard__project="cv", costguard__budget="100"),)
        )
    }
    service(running, ledger).run(MIDDAY)
    report = service({}, ledger).run(MIDDAY + timedelta(hours=1))
    (cv,) = report.projects
    assert cv.run_rate_usd_per_hour == 0
    assert cv.month_to_date_usd > 0


def test_pending_node_group_capacity_is_reported_not_spent() -> None:
    ng = Resource(
        id="c/gpu",
        kind=ResourceKind.EKS_NODEGROUP,
        region="us-east-1",
        instance_type="g5.12xlarge",
        desired_size=3,
        eks_cluster="c",
        eks_nodegroup="gpu",
        tags={"costguard:project": "cv"},
    )
    node = Resource(
        id="i-n",
        kind=ResourceKind.EC2_INSTANCE,
        region="us-east-1",
        instance_type="g5.12xlarge",
        launched_at=MIDDAY - timedelta(hours=1),
        eks_cluster="c",
        eks_nodegroup="gpu",
    )
    report = service({"us-east-1": Inventory((ng, node))}, InMemoryLedger()).run(MIDDAY)
    (pending,) = report.pending_capacity
    assert (pending.running, pending.pending) == (1, 2)
    (cv,) = report.projects
    assert cv.run_rate_usd_per_hour == Decimal("5.672")  # one node, not three


def test_aws_error_codes_become_domain_errors_named_for_what_went_wrong() -> None:
    from botocore.exceptions import ClientError, EndpointConnectionError

    from costguard.adapters.aws import translate
    from costguard.ports import AccessDeniedError, SourceError, ThrottledError

    def client_error(code: str) -> ClientError:
        return ClientError(
            {"Error": {"Code": code, "Message": f"{code} happened"}}, "DescribeInstances"
        )

    assert isinstance(
        translate("ec2", "us-east-1", "DescribeInstances", client_error("RequestLimitExceeded")),
        ThrottledError,
    )
    assert isinstance(
        translate("eks", "us-east-1", "ListClusters", client_error("ThrottlingException")),
        ThrottledError,
    )
    assert isinstance(
        translate("ec2", "us-east-1", "DescribeInstances", client_error("UnauthorizedOperation")),
        AccessDeniedError,
    )
    assert isinstance(
        translate("sagemaker", "eu-west-1", "ListApps", client_error("AccessDeniedException")),
        AccessDeniedError,
    )
    offline = translate(
        "ec2",
        "ap-east-1",
        "DescribeInstances",
        EndpointConnectionError(endpoint_url="https://ec2.ap-east-1.amazonaws.com"),
    )
    assert type(offline) is SourceError
    assert offline.region == "ap-east-1"
    html = translate(
        "sagemaker",
        "us-east-1",
        "ListApps",
        ClientError({"Error": {"Code": "500", "Message": "<!doctype html><html>..."}}, "ListApps"),
    )
    assert html.detail == "the endpoint answered with an HTML error page"


def test_a_throttled_region_is_reported_and_the_other_regions_still_count() -> None:
    from costguard.ports import ThrottledError

    fleet = {
        "us-west-2": Inventory(
            (instance("i-g5", "g5.xlarge", region="us-west-2", costguard__project="cv"),)
        )
    }
    throttled = ThrottledError(
        "ec2", "us-east-1", "DescribeInstances", "RequestLimitExceeded", "slow down"
    )
    report = service(fleet, InMemoryLedger(), {"us-east-1": throttled}).run(MIDDAY)
    assert [p.project for p in report.projects] == ["cv"]
    assert any(
        f.code is FindingCode.SCAN_FAILED and "RequestLimitExceeded" in f.message
        for f in report.findings
    )
