"""EC2 adapter on moto: accelerators from DescribeInstanceTypes, spot, volumes, API calls."""

from __future__ import annotations

from collections import Counter
from typing import Any

from botocore.stub import Stubber

from costguard.adapters.aws import ClientFactory
from costguard.adapters.ec2 import Ec2Inventory, Ec2SpotPrices
from costguard.domain.findings import FindingCode
from costguard.domain.models import AcceleratorKind, Lifecycle, ResourceKind
from costguard.ports import AccessDeniedError
from tests.support.clock import MIDDAY


def run(
    ec2: Any, itype: str, count: int = 1, spot: bool = False, tags: dict[str, str] | None = None
) -> list[str]:
    args: dict[str, Any] = {
        "ImageId": "ami-12345678",
        "InstanceType": itype,
        "MinCount": count,
        "MaxCount": count,
    }
    if spot:
        args["InstanceMarketOptions"] = {"MarketType": "spot"}
    if tags:
        args["TagSpecifications"] = [
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ]
    return [i["InstanceId"] for i in ec2.run_instances(**args)["Instances"]]


def counted(session: Any) -> tuple[ClientFactory, Counter[str]]:
    calls: Counter[str] = Counter()
    session.events.register("before-call", lambda model, **_: calls.update([model.name]))
    return ClientFactory(session), calls


def test_finds_accelerator_instances_and_skips_cpu_ones(aws: Any) -> None:
    ec2 = aws.client("ec2", region_name="us-east-1")
    run(ec2, "p5.48xlarge", tags={"costguard:project": "llm"})
    run(ec2, "inf2.xlarge")
    run(ec2, "trn1.32xlarge")
    run(ec2, "m5.large")
    inv = Ec2Inventory(ClientFactory(aws)).collect("us-east-1", MIDDAY)
    instances = {r.instance_type: r for r in inv.resources if r.kind is ResourceKind.EC2_INSTANCE}
    assert set(instances) == {"p5.48xlarge", "inf2.xlarge", "trn1.32xlarge"}
    p5 = instances["p5.48xlarge"]
    assert p5.accelerator is not None
    assert (p5.accelerator.kind, p5.accelerator.name, p5.accelerator.count) == (
        AcceleratorKind.GPU,
        "H100",
        8,
    )
    assert instances["trn1.32xlarge"].accelerator.kind is AcceleratorKind.TRAINIUM  # type: ignore[union-attr]
    assert instances["inf2.xlarge"].accelerator.kind is AcceleratorKind.INFERENTIA  # type: ignore[union-attr]
    assert p5.tags["costguard:project"] == "llm"


def test_spot_instances_are_marked_spot(aws: Any) -> None:
    ec2 = aws.client("ec2", region_name="us-east-1")
    run(ec2, "g5.xlarge", spot=True)
    run(ec2, "g5.xlarge")
    inv = Ec2Inventory(ClientFactory(aws)).collect("us-east-1", MIDDAY)
    lifecycles = sorted(
        r.lifecycle.value for r in inv.resources if r.kind is ResourceKind.EC2_INSTANCE
    )
    assert lifecycles == [Lifecycle.ON_DEMAND.value, Lifecycle.SPOT.value]


def test_unknown_instance_type_is_kept_with_a_finding(aws: Any) -> None:
    ec2 = aws.client("ec2", region_name="us-east-1")
    (unknown,) = run(ec2, "p9.96xlarge")
    run(ec2, "g5.xlarge")
    inv = Ec2Inventory(ClientFactory(aws)).collect("us-east-1", MIDDAY)
    ids = {r.id for r in inv.resources}
    assert unknown in ids
    assert [f.code for f in inv.findings] == [FindingCode.UNKNOWN_INSTANCE_TYPE]


def test_attached_volumes_are_found_and_inherit_the_instance_project(aws: Any) -> None:
    ec2 = aws.client("ec2", region_name="us-east-1")
    (iid,) = run(ec2, "g5.xlarge", tags={"costguard:project": "cv", "costguard:budget": "100"})
    inv = Ec2Inventory(ClientFactory(aws)).collect("us-east-1", MIDDAY)
    (vol,) = [r for r in inv.resources if r.kind is ResourceKind.EBS_VOLUME]
    assert vol.attached_to == iid
    assert vol.tags == {"costguard:project": "cv"}  # the budget stays on the instance
    assert vol.size_gib > 0


def test_api_calls_grow_with_pages_not_with_instances(aws: Any) -> None:
    ec2 = aws.client("ec2", region_name="us-east-1")
    for itype in ("g5.xlarge", "g6.xlarge", "p4d.24xlarge"):
        run(ec2, itype, count=40)
    factory, calls = counted(aws)
    inv = Ec2Inventory(factory).collect("us-east-1", MIDDAY)
    assert len([r for r in inv.resources if r.kind is ResourceKind.EC2_INSTANCE]) == 120
    assert calls == Counter(
        {"DescribeInstances": 1, "DescribeInstanceTypes": 1, "DescribeVolumes": 1}
    )


def test_access_denied_is_translated_into_a_domain_error(aws: Any) -> None:
    factory = ClientFactory(aws)
    ec2 = factory("ec2", "us-east-1")
    with Stubber(ec2) as stub:
        stub.add_client_error(
            "describe_instances", "UnauthorizedOperation", "You are not authorized"
        )
        try:
            Ec2Inventory(factory).collect("us-east-1", MIDDAY)
        except AccessDeniedError as exc:
            assert exc.code == "UnauthorizedOperation"
            assert exc.region == "us-east-1"
        else:  # pragma: no cover
            raise AssertionError("expected AccessDeniedError")


def test_spot_price_takes_the_latest_per_type_and_az(aws: Any) -> None:
    factory = ClientFactory(aws)
    ec2 = factory("ec2", "us-east-1")
    history = [
        {
            "InstanceType": "p4d.24xlarge",
            "AvailabilityZone": "us-east-1a",
            "SpotPrice": "9.50",
            "Timestamp": MIDDAY.replace(hour=1),
            "ProductDescription": "Linux/UNIX",
        },
        {
            "InstanceType": "p4d.24xlarge",
            "AvailabilityZone": "us-east-1a",
            "SpotPrice": "9.88",
            "Timestamp": MIDDAY.replace(hour=2),
            "ProductDescription": "Linux/UNIX",
        },
        {
            "InstanceType": "p4d.24xlarge",
            "AvailabilityZone": "us-east-1b",
            "SpotPrice": "11.00",
            "Timestamp": MIDDAY.replace(hour=1),
            "ProductDescription": "Linux/UNIX",
        },
    ]
    with Stubber(ec2) as stub:
        stub.add_response("describe_spot_price_history", {"SpotPriceHistory": history})
        prices = Ec2SpotPrices(factory).latest("us-east-1", ["p4d.24xlarge"], MIDDAY)
    assert {k: str(v) for k, v in prices.items()} == {
        ("us-east-1", "us-east-1a", "p4d.24xlarge"): "9.88",
        ("us-east-1", "us-east-1b", "p4d.24xlarge"): "11.00",
    }
